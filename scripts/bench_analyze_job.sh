#!/usr/bin/env bash
# analyze of a whole job: one synthetic trace per rank (gen_trace with a rank),
# analyzed on one core (--jobs 1) and on every core (the default), end to end.
# Prints the single-core rate, the parallel wall time, the ideal (total spans /
# (single-core rate x cores)), the parallel time against it and the peak RSS
# of each (/usr/bin/time -v); medians of [runs]. Asserts nothing.
# Target (issue 10): parallel <= 2x the ideal, in bounded memory.
# Usage: scripts/bench_analyze_job.sh [ranks] [spans per rank] [runs] (BUILD_DIR=build)
# The issue's full size (256 M spans, ~2.4 GB of traces in $TMPDIR, minutes):
#   scripts/bench_analyze_job.sh 256 1000000 1
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
RANKS=${1:-32}
SPANS=${2:-1000000}
RUNS=${3:-3}
cmake --build "$BUILD_DIR" --target stallprof gen_trace -j2 >/dev/null
SP="$BUILD_DIR/stallprof"
GEN="$BUILD_DIR/gen_trace"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/stallprof-bench-job.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
CORES=$(nproc)
seq 0 $((RANKS - 1)) | xargs -P "$CORES" -I{} "$GEN" "$SPANS" "$DIR/rank{}.pb" 4 {} >/dev/null
TOTAL=$((RANKS * SPANS))
size=$(du -cb "$DIR"/rank*.pb | tail -1 | cut -f1)
echo "job: $RANKS traces x $SPANS spans = $TOTAL spans, $(awk -v s="$size" 'BEGIN { printf "%.0f", s / 1048576 }') MiB on disk; $CORES cores"
cat "$DIR"/rank*.pb >/dev/null  # page cache warm: measure CPU work, not the disk

# run <label> <stallprof analyze args...>: prints the median wall seconds and the max peak RSS (KiB).
run() {
  local label=$1
  shift
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -v "$SP" analyze "$@" >/dev/null 2>"$DIR/time"
    awk -F': ' '/Elapsed \(wall clock\)/ { split($2, p, ":"); t = (length(p) == 3) ? p[1] * 3600 + p[2] * 60 + p[3] : p[1] * 60 + p[2] }
                /Maximum resident set size/ { m = $2 }
                END { print t, m }' "$DIR/time"
  done | sort -n | awk -v label="$label" -v n="$TOTAL" '
    { t[NR] = $1; if ($2 > m) m = $2 }
    END { med = t[int((NR + 1) / 2)]; printf "%s %.3f %.0f\n", label, med, m }'
}
one=$(run one "$DIR/rank0.pb")
single=$(run single --jobs 1 "$DIR"/rank*.pb)
parallel=$(run parallel "$DIR"/rank*.pb)
echo "$one $single $parallel" | awk -v n="$TOTAL" -v cores="$CORES" -v ranks="$RANKS" '{
  om = $3; s = $5; sm = $6; p = $8; pm = $9
  rate = n / s
  ideal = n / (rate * cores)
  printf "single core (--jobs 1): %.3f s, %.1f M spans/s, peak RSS %.0f MiB\n", s, rate / 1e6, sm / 1024
  printf "parallel (--jobs %d): %.3f s, %.1f M spans/s, peak RSS %.0f MiB\n", cores, p, n / p / 1e6, pm / 1024
  printf "ideal on %d cores: %.3f s (spans / (single-core rate x cores)); parallel / ideal = %.2fx (target <= 2x)\n", cores, ideal, p / ideal
  printf "memory: one trace alone peaks at %.0f MiB; all %d add %.2f MiB per trace (the analyses kept for the report)\n", om / 1024, ranks, (sm - om) / 1024 / (ranks > 1 ? ranks - 1 : 1)
}'
echo "load while measuring: $(uptime | sed "s/.*load average/load average/")"
