#!/usr/bin/env bash
# Trace I/O benchmark: drain-side encoding speed (spans per CPU-second), bytes
# per span on disk, write speed, and LoadTrace speed
# and peak memory on a synthetic trace (default 10 M spans). Prints figures;
# asserts nothing. Usage: scripts/bench_trace.sh [spans] (BUILD_DIR=build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
SPANS=${1:-10000000}
cmake --build "$BUILD_DIR" --target gen_trace trace_check bench_drain -j2 >/dev/null
"$BUILD_DIR/bench_drain" "$SPANS"
OUT=$(mktemp /tmp/stallprof-bench-trace.XXXXXX.pb)
trap 'rm -f "$OUT"' EXIT

start=$(date +%s.%N)
"$BUILD_DIR/gen_trace" "$SPANS" "$OUT"
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v n="$SPANS" 'BEGIN { printf "write: %.2f s, %.1f M spans/s (generate + encode + write)\n", e - s, n / (e - s) / 1e6 }'
size=$(stat -c %s "$OUT")
echo "file: $size bytes"
for run in 1 2 3; do
  "$BUILD_DIR/trace_check" --time "$OUT" | awk -F= -v size="$size" -v run="$run" '
    /^load_seconds/ { t = $2 } /^spans_per_second/ { r = $2 } /^spans_per_cpu_second/ { rc = $2 } /^bytes_per_span/ { b = $2 } /^peak_rss_bytes/ { m = $2 }
    END { printf "load %d: %.3f s wall, %.1f M spans/s wall, %.1f M spans/CPU-s, %.2f bytes/span, peak RSS %.0f MiB (%.2fx the file)\n", run, t, r / 1e6, rc / 1e6, b, m / 1048576, m / size }'
done
