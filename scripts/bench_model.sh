#!/usr/bin/env bash
# Benchmarks the model (LP, recommend, LRU simulation) with an optimized build
# of lib/model. Prints the medians; exits non-zero when the 100-stage LP takes
# 50 ms or more.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build-bench-model}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"${JOBS:-2}" --target stallprof_model stallprof_common >/dev/null
${CXX:-g++} -std=c++20 -O2 -I lib -I /usr/include/eigen3 bench/model/bench_model.cpp -o "$BUILD_DIR/bench_model" \
  "$BUILD_DIR/lib/model/libstallprof_model.a" "$BUILD_DIR/lib/common/libstallprof_common.a" -lglpk -lfmt
"$BUILD_DIR/bench_model"
