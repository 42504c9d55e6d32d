#!/usr/bin/env bash
# analyze and export speed on a synthetic trace (default 10 M spans): wall time
# end to end (load + analyze + print), spans/s, and peak RSS against the file
# size (/usr/bin/time -v), and its user and kernel CPU (the kernel's: mostly
# zeroing the fresh pages it fills). Prints figures; asserts nothing.
# Targets: analyze >= 40 M spans/s on one core (issue 10; 20 in issue 3) with
# peak RSS < 2x the file; export >= 5 M spans/s. Several traces in parallel:
# scripts/bench_analyze_job.sh.
# Usage: scripts/bench_analyze.sh [spans] [runs] (BUILD_DIR=build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
SPANS=${1:-10000000}
RUNS=${2:-3}
cmake --build "$BUILD_DIR" --target stallprof gen_trace -j2 >/dev/null
SP="$BUILD_DIR/stallprof"
OUT=$(mktemp /tmp/stallprof-bench-analyze.XXXXXX.pb)
trap 'rm -f "$OUT" "$OUT.time"' EXIT
"$BUILD_DIR/gen_trace" "$SPANS" "$OUT" 4 >/dev/null
size=$(stat -c %s "$OUT")
echo "trace: $SPANS spans, $size bytes ($(awk -v s="$size" -v n="$SPANS" 'BEGIN { printf "%.2f", s / n }') bytes/span)"
cat "$OUT" >/dev/null  # page cache warm: measure CPU work, not the disk

measure() {  # measure <label> <target M spans/s> <command...>
  local label=$1 target=$2
  shift 2
  for run in $(seq "$RUNS"); do
    /usr/bin/time -v "$@" >/dev/null 2>"$OUT.time"
    awk -F': ' -v label="$label" -v run="$run" -v n="$SPANS" -v size="$size" -v target="$target" '
      /Elapsed \(wall clock\)/ { split($2, p, ":"); t = (length(p) == 3) ? p[1] * 3600 + p[2] * 60 + p[3] : p[1] * 60 + p[2] }
      /User time \(seconds\)/ { u = $2 }
      /System time \(seconds\)/ { k = $2 }
      /Maximum resident set size/ { m = $2 * 1024 }
      END { printf "%s %d: %.3f s, %.1f M spans/s (target >= %d); CPU %.2f s user (%.1f M spans/s) + %.2f s kernel; peak RSS %.0f MiB = %.2fx the file\n",
                   label, run, t, n / t / 1e6, target, u, (u > 0 ? n / u / 1e6 : 0), k, m / 1048576, m / size }' "$OUT.time"
  done
}
measure "analyze" 40 "$SP" analyze "$OUT"
measure "analyze --json" 40 "$SP" analyze "$OUT" --json
measure "export (to /dev/null)" 5 "$SP" export "$OUT" -o -
