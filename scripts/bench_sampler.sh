#!/usr/bin/env bash
# The launcher's /proc sampler: CPU per tick, and each /proc read kept open
# against opened by path (build/bench_sampler). Prints figures; asserts nothing.
# Usage: scripts/bench_sampler.sh [ticks, default 2000]   (BUILD_DIR, default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
[ -x "$BUILD/bench_sampler" ] || { echo "bench_sampler.sh: $BUILD/bench_sampler missing, build first" >&2; exit 1; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/bench_sampler" "${1:-2000}"
