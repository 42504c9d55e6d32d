#!/usr/bin/env bash
# Overhead on training, with a 95% confidence interval: bare, `stallprof run`
# and torch.profiler (CPU activities, default settings, the script run with
# runpy: scripts/workloads/with_torch_profiler.py) on two workloads:
#  - demo: scripts/workloads/train_demo.py (file-backed images, 2 workers, a CNN);
#  - fast: scripts/workloads/fast_loader.py (batch 1, trivial items, 200 us CPU
#    step, num_workers=0): thousands of batches a second, the hook's worst case.
# Each pair runs every side once, in an order that rotates from pair to pair;
# the figure per pair is the side's samples/s over the bare run's (the rate
# the script itself prints) and its CPU seconds (/usr/bin/time, whole job) over
# the bare run's. The interval is the t interval of the mean log ratio over the
# pairs: pairing cancels the machine's slow drifts, so a few pairs give a
# usable interval even where run-to-run noise is several percent.
# Usage: scripts/bench_overhead.sh [pairs, default 10] [workloads, default "demo fast"]
# With STALLPROF_BIN_OTHER=<another build's stallprof> a fourth side runs that
# build in the same rotation (e.g. the hook before a change against after).
# CONCURRENT=1 runs bare and `stallprof run` at the same time instead, each
# pinned to a CPU of its own (taskset), the CPUs swapped from pair to pair:
# this host slows both vCPUs together by up to 1.7x from minute to minute
# (scripts/bench_corun.py), which one-after-another pairs see as noise and
# simultaneous ones cancel. Each job then has one core (the launcher's
# threads share the traced job's); torch.profiler is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every side runs with fixed malloc thresholds: under glibc's dynamic ones the
# demo falls at random into refaulting its freed tensors (bare runs measured
# 342 to 484 samples/s in one series, and 1135 with fixed thresholds), a
# lottery larger than the overhead measured here. BENCH_DEFAULT_MALLOC=1 keeps
# glibc's defaults.
if [ "${BENCH_DEFAULT_MALLOC:-0}" != 1 ]; then
  export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912
fi
PAIRS=${1:-10}
WORKLOADS=${2:-demo fast}
SP=${STALLPROF_BIN:-build/stallprof}
OTHER=${STALLPROF_BIN_OTHER:-}
PY=/usr/bin/python3
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

workload_args() {
  case "$1" in
    demo) echo "scripts/workloads/train_demo.py --epochs 2" ;;
    fast) echo "scripts/workloads/fast_loader.py --samples 5000 --epochs 2 --step-us 200" ;;
    *) echo "bench_overhead.sh: unknown workload '$1' (demo, fast)" >&2; exit 2 ;;
  esac
}

# One run of side $1 on the workload "$@": appends "samples/s cpu_s" to $TMP/<side>.
# PIN=<cpu> runs it on that CPU alone.
run_side() {
  local side=$1; shift
  local -a cmd pin=()
  [ -n "${PIN:-}" ] && pin=(taskset -c "$PIN")
  case "$side" in
    bare) cmd=("$PY" "$@") ;;
    # --no-handoff-timing: the timing runs after the job (fast has no
    # workers); it costs the job nothing but would count in the CPU column.
    stallprof) cmd=("$SP" run -q --no-handoff-timing -o "$TMP/t.pb" -- "$PY" "$@") ;;
    other) cmd=("$OTHER" run -q --no-handoff-timing -o "$TMP/o.pb" -- "$PY" "$@") ;;
    torch.profiler) cmd=("$PY" scripts/workloads/with_torch_profiler.py "$@") ;;
  esac
  "${pin[@]}" /usr/bin/time -f "%U %S" -o "$TMP/$side.time" "${cmd[@]}" >"$TMP/$side.out" 2>"$TMP/$side.err" || {
    echo "bench_overhead.sh: $side failed:" >&2; cat "$TMP/$side.err" >&2; exit 1; }
  { awk '/^epoch/ { s += $3; t += $6 } END { printf "%.3f ", s / t }' "$TMP/$side.out"
    awk '{ printf "%.3f\n", $1 + $2 }' "$TMP/$side.time"; } >>"$TMP/$side"
}

sides=(bare stallprof torch.profiler)
[ -n "$OTHER" ] && sides+=(other)
if [ "${CONCURRENT:-0}" = 1 ]; then
  [ "$(nproc)" -ge 2 ] || { echo "bench_overhead.sh: CONCURRENT=1 needs 2 CPUs" >&2; exit 2; }
  sides=(bare stallprof)
fi
echo "pairs: $PAIRS per workload, $([ "${CONCURRENT:-0}" = 1 ] && echo "bare and stallprof at once, a CPU each, swapped every pair" || echo "sides rotating"); $(nproc) CPUs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for w in $WORKLOADS; do
  read -r -a args <<<"$(workload_args "$w")"
  "$PY" "${args[@]}" >/dev/null  # creates the dataset, warms the page cache and the imports
  rm -f "$TMP"/bare "$TMP"/stallprof "$TMP"/torch.profiler "$TMP"/other
  n=${#sides[@]}
  for i in $(seq 0 $((PAIRS - 1))); do
    if [ "${CONCURRENT:-0}" = 1 ]; then
      PIN=$((i % 2)) run_side bare "${args[@]}" &
      bare_pid=$!
      PIN=$(((i + 1) % 2)) run_side stallprof "${args[@]}"
      wait "$bare_pid"
      continue
    fi
    for j in $(seq 0 $((n - 1))); do run_side "${sides[$(((i + j) % n))]}" "${args[@]}"; done
  done
  echo
  echo "== $w: ${args[*]}"
  "$PY" - "$TMP" "${sides[@]}" <<'PYEOF'
import math, statistics, sys
tmp, sides = sys.argv[1], sys.argv[2:]
rows = {s: [tuple(map(float, l.split())) for l in open(f"{tmp}/{s}")] for s in sides}
# Two-sided 95% t quantiles by degrees of freedom (normal beyond 30).
T = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
     11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
     20: 2.086, 25: 2.060, 30: 2.042}
def t95(df):
    return T.get(df) or (T[max(k for k in T if k <= df)] if df <= 30 else 1.96)
def interval(logs):
    m = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(m), float("nan"), float("nan")
    h = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - h), math.exp(m + h)
bare = rows["bare"]
print(f"{'side':<15} {'samples/s (median)':>19} {'rate / bare [95% CI]':>30} {'CPU s (median)':>15} {'CPU / bare [95% CI]':>30}")
for s in sides:
    rate = statistics.median(r for r, _ in rows[s]); cpu = statistics.median(c for _, c in rows[s])
    if s == "bare":
        print(f"{s:<15} {rate:>19.1f} {'1':>30} {cpu:>15.2f} {'1':>30}")
        continue
    r = interval([math.log(a[0] / b[0]) for a, b in zip(rows[s], bare)])
    c = interval([math.log(a[1] / b[1]) for a, b in zip(rows[s], bare)])
    print(f"{s:<15} {rate:>19.1f} {'%.4f [%.4f, %.4f]' % r:>30} {cpu:>15.2f} {'%.4f [%.4f, %.4f]' % c:>30}")
for s in sides:
    print(f"  {s} samples/s per pair: " + " ".join(f"{r:.0f}" for r, _ in rows[s]))
PYEOF
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
