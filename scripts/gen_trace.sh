#!/usr/bin/env bash
# Writes a synthetic trace of N spans shaped like a real run, for benchmarks:
#   scripts/gen_trace.sh 10000000 /tmp/10m.pb [workers]
# Uses build/gen_trace (BUILD_DIR overrides the build directory).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
[ $# -ge 2 ] || { echo "usage: scripts/gen_trace.sh N out.pb [workers]" >&2; exit 2; }
[ -x "$BUILD_DIR/gen_trace" ] || cmake --build "$BUILD_DIR" --target gen_trace -j2 >/dev/null
exec "$BUILD_DIR/gen_trace" "$@"
