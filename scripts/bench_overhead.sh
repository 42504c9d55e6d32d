#!/usr/bin/env bash
# Overhead of `stallprof run` on training throughput: the demo workload bare and
# under stallprof, alternating runs, median of each and their ratio.
# Usage: scripts/bench_overhead.sh [runs per side, default 5] [extra train_demo.py args]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}; shift || true
SP=${STALLPROF_BIN:-build/stallprof}
PY=/usr/bin/python3
DEMO=(scripts/workloads/train_demo.py --epochs 2 "$@")
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
"$PY" "${DEMO[@]}" >/dev/null  # creates the dataset and warms the page cache
throughput() {  # samples/s summed over epochs, from the script's own output
  awk '/^epoch/ { s += $3; t += $6 } END { printf "%.2f\n", s / t }'
}
bare=(); traced=()
for i in $(seq "$RUNS"); do
  bare+=("$("$PY" "${DEMO[@]}" | throughput)")
  traced+=("$("$SP" run -q -o "$TMP/t.pb" -- "$PY" "${DEMO[@]}" | throughput)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mb=$(median "${bare[@]}"); mt=$(median "${traced[@]}")
echo "bare     samples/s: ${bare[*]} (median $mb)"
echo "stallprof samples/s: ${traced[*]} (median $mt)"
awk -v b="$mb" -v t="$mt" 'BEGIN { printf "overhead: %.2f%% of training throughput (traced/bare = %.4f)\n", (1 - t / b) * 100, t / b }'
ls -l "$TMP/t.pb" | awk '{ print "trace size:", $5, "bytes" }'
