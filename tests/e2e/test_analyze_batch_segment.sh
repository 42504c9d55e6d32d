#!/usr/bin/env bash
# A worker collates each batch into a fresh shared-memory segment and faults
# its pages in one by one; no allocator setting keeps it, fewer bytes a batch
# do. 8 samples of 98304 floats make a 3 MiB batch (768 pages); malloc's
# thresholds are fixed so that the worker's heap is reused, and the faults
# left are the segment's. analyze must count about the batch's pages per batch
# and advise sending fewer bytes, without the allocator advice; 8 samples of
# 16 floats (576 bytes a batch) must get neither.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
W="$STALLPROF_SOURCE_DIR/scripts/workloads/synthetic.py"
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912
# A 3 ms sleep per sample keeps the worker alive long enough for the sampler
# (which finds a new process within a second) to see it over many batches.
for floats in 98304 16; do
  $SP run -q -o "f$floats.pb" -- "$PY" "$W" --workers 1 --batches 40 --batch-size 8 --sample-floats "$floats" \
    --fetch-sleep-ms 3 --compute-ms 5 >"f$floats.out" || fail "run with $floats floats a sample failed"
  $SP analyze "f$floats.pb" --json >"f$floats.json" || fail "analyze failed ($floats floats)"
done
"$PY" - <<'PY' || fail "the batch's shared-memory faults misreported (above)"
import json
big, small = (json.load(open(f"f{n}.json"))["loaders"][0] for n in (98304, 16))
pages = big["config"]["batch_bytes"] / 4096
print(f"3 MiB batches: {big['worker_faults_per_batch']:.0f} faults a batch for {pages:.0f} pages, "
      f"kernel {big['fetch_kernel_share']:.2f}; advice: {big['advice']}")
assert 8 * 98304 * 4 <= big["config"]["batch_bytes"] <= 8 * 98304 * 4 + 4096, big["config"]["batch_bytes"]  # and the labels
# The segment's pages, and a few of the worker's own; the sampler's first tick
# comes after the worker's first batches, so allow 20% fewer.
assert 0.8 * pages <= big["worker_faults_per_batch"] <= 1.5 * pages, big["worker_faults_per_batch"]
assert any(a.startswith("prep: each batch (3.00 MiB)") and "send fewer bytes a batch" in a for a in big["advice"]), big["advice"]
assert not any("GLIBC_TUNABLES" in a or "LD_PRELOAD" in a for a in big["advice"]), big["advice"]
print(f"576-byte batches: advice {small['advice']}")
assert not any("send fewer bytes" in a for a in small["advice"]), small["advice"]
PY
echo "PASS"
