#!/usr/bin/env bash
# Worker CPU spent faulting pages back in: each sample writes a fresh 2 MiB
# buffer one byte a page (scripts/workloads/synthetic.py --scratch-mib 2), 8
# samples a batch, so a worker whose allocator maps and unmaps the buffer every
# time faults 8 x 512 = 4096 pages a batch. glibc's malloc is made to do that
# (a fixed 128 KiB mmap threshold) or not to (a fixed 32 MiB one, which reuses
# the heap), the two regimes a real decoder falls into at random under glibc's
# dynamic thresholds. analyze must report the faults per batch and the kernel's
# share of the worker CPU in the account's evidence, and give the allocator
# advice in the first case only. A 40 MiB buffer (above glibc's largest mmap
# threshold, 32 MiB) faults 8 x 10240 pages a batch whatever the thresholds,
# and the advice's other allocator (tcmalloc, preloaded) keeps it; the advice
# knows which malloc each run had (the hook records it).
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
W="$STALLPROF_SOURCE_DIR/scripts/workloads/synthetic.py"
# A 5 ms sleep per sample keeps the worker alive over 1 s, long enough for the
# sampler, which finds a new process within a second, to see it twice.
FLAGS=(--workers 1 --batches 24 --batch-size 8 --scratch-mib 2 --prep-cpu-ms 1 --fetch-sleep-ms 5)

profile() {  # profile <name> <GLIBC_TUNABLES> [library to preload into the training process]
  GLIBC_TUNABLES=$2 $SP run -q -o "$1.pb" -- env ${3:+LD_PRELOAD=$3} "$PY" "$W" "${FLAGS[@]}" >"$1.out" || fail "$1: run failed"
  $SP analyze "$1.pb" --json >"$1.json" || fail "$1: analyze failed"
  $SP analyze "$1.pb" >"$1.txt" || fail "$1: analyze (text) failed"
}
profile faulting glibc.malloc.mmap_threshold=131072
profile reusing glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912
TCMALLOC=libtcmalloc_minimal.so.4
LD_PRELOAD=$TCMALLOC "$PY" -c 'print(1)' 2>&1 | grep -q "cannot be preloaded" && skip "$TCMALLOC (libtcmalloc-minimal4) is not installed: scripts/setup.sh installs it"
FLAGS=(--workers 1 --batches 24 --batch-size 8 --scratch-mib 40 --prep-cpu-ms 1 --fetch-sleep-ms 5)
profile large glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912
profile cached "" "$TCMALLOC"

"$PY" - <<'PY' || fail "page faults misreported (above)"
import json
def loader(name):
    return json.load(open(name + ".json"))["loaders"][0]
f, r = loader("faulting"), loader("reusing")
print(f"faulting: {f['worker_faults_per_batch']:.0f} faults/batch, kernel {f['fetch_kernel_share']:.2f}; "
      f"reusing: {r['worker_faults_per_batch']:.0f} faults/batch, kernel {r['fetch_kernel_share']:.2f}")
# 4096 set; the sampler's first tick comes after the worker's first batches, so allow 30% less.
assert 0.7 * 4096 <= f["worker_faults_per_batch"] <= 1.3 * 4096, f["worker_faults_per_batch"]
assert r["worker_faults_per_batch"] < 0.25 * 4096, r["worker_faults_per_batch"]
assert f["fetch_kernel_share"] > r["fetch_kernel_share"], (f["fetch_kernel_share"], r["fetch_kernel_share"])
tuning = "GLIBC_TUNABLES=glibc.malloc.mmap_threshold"
assert any(tuning in a for a in f["advice"]), f["advice"]
assert not any(tuning in a for a in r["advice"]), r["advice"]
# The hook records the malloc each ran: a 128 KiB threshold is not the fix.
assert f["config"]["allocator"] == "glibc", f["config"]["allocator"]
assert r["config"]["allocator"] == "glibc fixed thresholds", r["config"]["allocator"]
g, c = loader("large"), loader("cached")
assert c["config"]["allocator"] == "libtcmalloc_minimal.so.4", c["config"]["allocator"]
print(f"40 MiB, fixed thresholds: {g['worker_faults_per_batch']:.0f} faults/batch; tcmalloc: {c['worker_faults_per_batch']:.0f}")
assert g["worker_faults_per_batch"] >= 0.7 * 81920, g["worker_faults_per_batch"]
assert c["worker_faults_per_batch"] < 0.25 * 81920, c["worker_faults_per_batch"]
assert any("LD_PRELOAD=libtcmalloc_minimal.so.4" in a for a in g["advice"]), g["advice"]
# Its thresholds are fixed already: the advice does not tell it to fix them.
assert not any(tuning in a for a in g["advice"]), g["advice"]
PY
grep -q "page faults per batch" faulting.txt || fail "the text account does not show the page faults"
echo "PASS"
