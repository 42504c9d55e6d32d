#!/usr/bin/env bash
# A warm page cache with a few misses: the dataset's 4 KiB files are cached
# but for every 4th, evicted before the run, and the fetches spend kernel time
# that no miss caused (a fresh 2 MiB buffer a sample, mapped by malloc each
# time: some 2000 page faults a batch, half the worker's CPU). Caching the rest then gains little: whatif --cache must predict the
# gain the cached run measures. (The CPU a miss costs was once estimated as all
# the missing fetches' kernel time: here 0.36-0.45 s a MiB, 0.7-0.9 ms of a
# 4.5 ms batch, and +23% to +29% predicted against +0.5% to +1.6% measured; on
# a torchvision ImageFolder with 9 KiB of metadata misses, 14 s a MiB and +11%
# from caching a dataset already 100% cached.)
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
cd "$TMP"

# Per sample 1 ms of CPU and the faults; 4 samples a batch on one worker
# against a 1 ms step, so the worker's CPU bounds the throughput.
export MALLOC_MMAP_THRESHOLD_=1048576
files=$TMP/files
flags=(--workers 1 --batches 48 --batch-size 4 --files "$files" --file-bytes 4096 --scratch-mib 2
  --prep-cpu-ms 1 --compute-ms 1 --epochs 2)
"$PY" "$WORKLOADS/synthetic.py" --workers 0 --batches 1 --batch-size 192 --epochs 1 --files "$files" --file-bytes 4096 >/dev/null \
  || fail "creating the files failed"
gains=() profiled=() measured=()
for i in 1 2 3 4 5; do
  cat "$files"/* >/dev/null
  # Evict every 4th of the 192 files: the first epoch's reads of them miss, the
  # rest hit.
  "$PY" - "$files" <<'PY' || fail "evicting files failed"
import os, sys
for name in sorted(os.listdir(sys.argv[1]))[::4]:
    fd = os.open(os.path.join(sys.argv[1], name), os.O_RDONLY)
    os.fdatasync(fd)  # dirty pages (files just created) are not dropped
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
  $SP run -q -o warm.pb -- "$PY" "$WORKLOADS/synthetic.py" "${flags[@]}" >/dev/null || fail "run failed"
  $SP analyze warm.pb --json >warm.json || fail "analyze failed"
  $SP whatif warm.pb --cache 1G --json >cached.json || fail "whatif --cache 1G failed"
  # The predicted gain, against the model's own reproduction of the profile
  # (its baseline), so that the baseline's error does not count here.
  gains+=("$("$PY" -c 'import json,sys; l = json.load(open(sys.argv[1]))["loaders"][0]; print(l["scenarios"][0]["prediction"]["samples_per_s"] / l["baseline"]["samples_per_s"])' cached.json)")
  profiled+=("$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["loaders"][0]["steady_samples_per_s"])' warm.json)")
  # The same run with every file cached (the profile read them back in).
  $SP run -q -o cached.pb -- "$PY" "$WORKLOADS/synthetic.py" "${flags[@]}" >/dev/null || fail "cached run failed"
  measured+=("$($SP analyze cached.pb --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["loaders"][0]["steady_samples_per_s"])')")
done
$SP whatif warm.pb --cache 1G | grep -E "^ +[0-9]+ +[0-9]+ |per MiB read from storage" || true
echo "all cached: predicted gains ${gains[*]}; profiled ${profiled[*]}, measured cached ${measured[*]}"

rc=0
"$PY" - warm.json "${gains[*]}" "${profiled[*]}" "${measured[*]}" <<'PY' || rc=$?
import json, statistics, sys
loader = json.load(open(sys.argv[1]))["loaders"][0]
storage = {l["cause"]: l for l in loader["account"]["whole_run"]["lines"]}["storage"]
print("storage line:", storage["evidence"])
if storage["evidence"].startswith(("0 bytes", "device reads not recorded")):
    print("SKIP: no fetch read from the device (a page cache that ignores POSIX_FADV_DONTNEED, e.g. tmpfs)")
    sys.exit(77)
predicted = [float(g) - 1 for g in sys.argv[2].split()]
# Each cached run against the profile run just before it: runs of 4 s on a
# shared machine drift by 20% over the test (CI once measured +17.9% as the
# ratio of the two medians, the pairs' own ratios being -3% to +22%).
ratios = sorted(c / p for p, c in zip(map(float, sys.argv[3].split()), map(float, sys.argv[4].split())))
measured = statistics.median(ratios) - 1
print("all cached against the profile: predicted " + ", ".join(f"{g:+.1%}" for g in predicted)
      + f"; measured {measured:+.1%} (pairs " + ", ".join(f"{r - 1:+.1%}" for r in ratios) + ")")
# 48 misses of 4 KiB cost little CPU and I/O against 96 batches of 8 ms. Each
# profile's prediction is checked: where the fetches' CPU fits against their
# misses, the fit stands and the estimate is not used, so a wrong estimate
# shows only in some profiles.
worst = max(predicted, key=lambda g: abs(g - measured))
if abs(worst - measured) > 0.15:
    # The pairs' spread without the highest and the lowest: beyond the bound,
    # the runs cannot tell a right prediction from a wrong one (seen here: the
    # same workload at 86 and 125 samples/s in consecutive runs).
    spread = ratios[-2] - ratios[1]
    print(f"predicted {worst:+.1%} from caching, measured {measured:+.1%}; the pairs spread by {spread:.1%} without the extremes")
    sys.exit(78 if spread > 0.15 else 1)
PY
[ $rc -eq 77 ] && skip "no fetch read from the device"
[ $rc -eq 78 ] && skip "the prediction missed, but the pairs of runs spread by more than the bound (above): every other check passed"
[ $rc -eq 0 ] || fail "the gain predicted from caching a warm dataset with a few misses is off (above)"
echo PASS
