#!/usr/bin/env bash
# Benchmarks the model (LP, recommend, LRU simulation) with an optimized build
# of lib/model and Google Benchmark (${REPS:-5} repetitions; the raw JSON is
# kept in ${BENCH_JSON:-/tmp/bench_model.json}). Prints the medians with their
# range; exits non-zero when the 100-stage LP's median takes 50 ms or more.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build-bench-model}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"${JOBS:-2}" --target stallprof_model stallprof_common >/dev/null
${CXX:-g++} -std=c++20 -O2 -I lib -I /usr/include/eigen3 bench/model/bench_model.cpp -o "$BUILD_DIR/bench_model" \
  "$BUILD_DIR/lib/model/libstallprof_model.a" "$BUILD_DIR/lib/common/libstallprof_common.a" -lglpk -lfmt -lbenchmark -lpthread
BENCH_JSON=${BENCH_JSON:-/tmp/bench_model.json}
"$BUILD_DIR/bench_model" --benchmark_repetitions="${REPS:-5}" --benchmark_format=json --benchmark_out="$BENCH_JSON" \
  --benchmark_out_format=json >/dev/null
/usr/bin/python3 - "$BENCH_JSON" <<'PY'
import json, statistics, sys
runs = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("run_type") == "iteration":
        runs.setdefault(b["run_name"], []).append(b)
def ms(name):
    values = [b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1e3}[b["time_unit"]] for b in runs[name]]
    return statistics.median(values), "%.3f (%.3f-%.3f over %d)" % (statistics.median(values), min(values), max(values), len(values))
lp, lp_text = ms("BM_Lp100Stages")
c = runs["BM_Lp100Stages"][0]
print("lp_100_stages_ms %s (target < 50; optimum %.1f samples/s, %d rows)" % (lp_text, c["optimum_samples_per_s"], c["rows"]))
print("recommend_ms %s (%d cache choices x up to 2 LPs)" % (ms("BM_Recommend")[1], 1 + 4 * 2))
c = runs["BM_LruExactSimulation1e6Items2Epochs"][0]
print("lru_exact_simulation_1e6_items_2_epochs_ms %s (hit %.4f, closed form %.4f)"
      % (ms("BM_LruExactSimulation1e6Items2Epochs")[1], c["hit"], c["closed_form"]))
print("cache_hit_ratio_1e6_items_ms %s (sampled to 1e5 items; hit %.4f)"
      % (ms("BM_CacheHitRatio1e6Items")[1], runs["BM_CacheHitRatio1e6Items"][0]["hit"]))
sys.exit(0 if lp < 50 else 1)
PY
