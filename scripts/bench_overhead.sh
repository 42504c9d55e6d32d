#!/usr/bin/env bash
# Overhead of `stallprof run` on training: the demo workload bare and under
# stallprof, alternating runs, medians and their ratio. Two figures:
#  - throughput (samples/s the script itself reports): what the user feels, but
#    on a shared 2-core machine run-to-run noise is several percent;
#  - CPU seconds of the whole job (launcher, hook, workers; /usr/bin/time),
#    per training sample: the cost stallprof adds, far less noisy.
# Usage: scripts/bench_overhead.sh [runs per side, default 7] [extra train_demo.py args]
# With STALLPROF_BIN_OTHER=<another build's stallprof> a third side runs that
# build in the same alternation (e.g. the hook before a change against after).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-7}; shift || true
SP=${STALLPROF_BIN:-build/stallprof}
PY=/usr/bin/python3
DEMO=(scripts/workloads/train_demo.py --epochs 2 "$@")
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
"$PY" "${DEMO[@]}" >/dev/null  # creates the dataset and warms the page cache
measure() {  # prints "samples/s cpu_seconds" of one run of "$@"
  /usr/bin/time -f "%U %S" -o "$TMP/time" "$@" >"$TMP/out"
  awk '/^epoch/ { s += $3; t += $6 } END { printf "%.2f ", s / t }' "$TMP/out"
  awk '{ printf "%.2f\n", $1 + $2 }' "$TMP/time"
}
OTHER=${STALLPROF_BIN_OTHER:-}
bare_rate=(); bare_cpu=(); traced_rate=(); traced_cpu=(); other_rate=(); other_cpu=()
for i in $(seq "$RUNS"); do
  read -r r c < <(measure "$PY" "${DEMO[@]}"); bare_rate+=("$r"); bare_cpu+=("$c")
  read -r r c < <(measure "$SP" run -q -o "$TMP/t.pb" -- "$PY" "${DEMO[@]}"); traced_rate+=("$r"); traced_cpu+=("$c")
  if [ -n "$OTHER" ]; then
    read -r r c < <(measure "$OTHER" run -q -o "$TMP/o.pb" -- "$PY" "${DEMO[@]}"); other_rate+=("$r"); other_cpu+=("$c")
  fi
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mbr=$(median "${bare_rate[@]}"); mtr=$(median "${traced_rate[@]}")
mbc=$(median "${bare_cpu[@]}"); mtc=$(median "${traced_cpu[@]}")
echo "runs: $RUNS per side, alternating; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bare      samples/s: ${bare_rate[*]} (median $mbr)"
echo "stallprof samples/s: ${traced_rate[*]} (median $mtr)"
awk -v b="$mbr" -v t="$mtr" 'BEGIN { printf "throughput: traced/bare = %.4f (%+.2f%%)\n", t / b, (t / b - 1) * 100 }'
echo "bare      CPU s: ${bare_cpu[*]} (median $mbc)"
echo "stallprof CPU s: ${traced_cpu[*]} (median $mtc)"
awk -v b="$mbc" -v t="$mtc" 'BEGIN { printf "CPU: traced/bare = %.4f (%+.2f%% CPU time for the same training)\n", t / b, (t / b - 1) * 100 }'
"${TRACE_CHECK:-build/trace_check}" "$TMP/t.pb" 2>/dev/null | grep -E "^(spans|bytes)=" | tr '\n' ' ' && echo "(last trace)"
if [ -n "$OTHER" ]; then
  mor=$(median "${other_rate[@]}"); moc=$(median "${other_cpu[@]}")
  echo "other ($OTHER) samples/s: ${other_rate[*]} (median $mor), CPU s: ${other_cpu[*]} (median $moc)"
  awk -v b="$mbr" -v t="$mor" -v bc="$mbc" -v tc="$moc" \
    'BEGIN { printf "other: throughput traced/bare = %.4f, CPU traced/bare = %.4f\n", t / b, tc / bc }'
fi
