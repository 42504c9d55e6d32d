#!/usr/bin/env bash
# The bad-input job, three parts; any sanitizer report or crash fails the run.
# 1. ASan + UBSan build in ${BUILD_DIR:-build-asan}: the units that parse
#    untrusted bytes (ring, trace, analysis, report) and the e2e bad-input tests.
# 2. Fuzzing in ${FUZZ_BUILD_DIR:-build-fuzz}: the trace reader and the ring
#    consumer + drain (tests/fuzz), ${FUZZ_SECONDS:-60} s each from the corpus
#    in tests/fuzz/corpus: libFuzzer with ASan/UBSan when clang is installed,
#    else the deterministic mutation driver (fixed seed) under ASan/UBSan.
# 3. ThreadSanitizer in ${TSAN_BUILD_DIR:-build-tsan}: the ring and client
#    tests (producers and the consumer sharing lanes).
# SANITIZE_PARTS="asan fuzz tsan" picks parts.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ROOT=$(pwd)
PARTS=${SANITIZE_PARTS:-asan fuzz tsan}
part() { [[ " $PARTS " == *" $1 "* ]]; }

if part asan; then
export BUILD_DIR=${BUILD_DIR:-build-asan}
BUILD_TYPE=Debug scripts/build.sh -DSTALLPROF_SANITIZE=ON
# Programs the tests compile against the sanitized client library load the ASan
# runtime late (it is not first in their link order); that is expected here.
export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd "$BUILD_DIR" &&
  ctest --output-on-failure -j"${CTEST_JOBS:-2}" -R "^(ring|trace|analysis|report|common):|bad_input|test_export_chrome" "$@")
fi

if part fuzz; then
  FUZZ_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
  if command -v clang++ >/dev/null && command -v clang >/dev/null; then
    echo "fuzz: libFuzzer (clang) + ASan/UBSan"
    CC=clang CXX=clang++ cmake -S . -B "$FUZZ_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTALLPROF_FUZZ=ON >/dev/null
  else
    echo "fuzz: no clang, the deterministic mutation driver under ASan/UBSan"
    cmake -S . -B "$FUZZ_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTALLPROF_FUZZ=ON -DSTALLPROF_SANITIZE=ON >/dev/null
  fi
  cmake --build "$FUZZ_DIR" -j"$(nproc)" --target fuzz_trace fuzz_ring
  for target in trace ring; do
    work=$(mktemp -d /tmp/stallprof-fuzz-$target.XXXXXX)
    # New inputs go to $work (never into the repository's corpus); a crash
    # leaves its input there too, which the failure message names.
    (cd "$work" && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "$ROOT/$FUZZ_DIR/tests/fuzz/fuzz_$target" -max_total_time="${FUZZ_SECONDS:-60}" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -seed=1 -print_final_stats=1 -artifact_prefix="$work/" "$work" "$ROOT/tests/fuzz/corpus/$target" \
      2>&1 | tail -n 12) || { echo "fuzz_$target failed; inputs in $work" >&2; exit 1; }
    rm -rf "$work"
  done
fi

if part tsan; then
  TSAN_DIR=${TSAN_BUILD_DIR:-build-tsan}
  cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTALLPROF_TSAN=ON >/dev/null
  cmake --build "$TSAN_DIR" -j"$(nproc)" --target unit_ring unit_client stallprof_ring_producer
  (cd "$TSAN_DIR" && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --output-on-failure -j"${CTEST_JOBS:-2}" -R "^(ring|client):")
fi
