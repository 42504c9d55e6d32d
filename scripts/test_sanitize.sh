#!/usr/bin/env bash
# The bad-input job: builds with ASan + UBSan into ${BUILD_DIR:-build-asan} and
# runs the units that parse untrusted bytes (ring, trace, analysis, report) and
# the end-to-end bad-input tests. Any sanitizer report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export BUILD_DIR=${BUILD_DIR:-build-asan}
BUILD_TYPE=Debug scripts/build.sh -DSTALLPROF_SANITIZE=ON
# Programs the tests compile against the sanitized client library load the ASan
# runtime late (it is not first in their link order); that is expected here.
export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$BUILD_DIR"
ctest --output-on-failure -j"${CTEST_JOBS:-2}" -R "^(ring|trace|analysis|report|common):|bad_input|test_export_chrome" "$@"
