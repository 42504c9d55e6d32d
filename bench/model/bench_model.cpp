// Times the model's hot paths with Google Benchmark: the 100-stage pipeline LP
// (target < 50 ms, checked by scripts/bench_model.sh), Recommend on a loader,
// the exact LRU simulation over 1e6 items and the sampled cache model. One
// iteration is one call; counters carry what the call computed, for context.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "model/cache.h"
#include "model/lp.h"

using namespace stallprof::model;

namespace {

PipelineLp HundredStageLp() {
  PipelineLp lp;
  for (int i = 0; i < 100; ++i) {
    const double cpu = 0.001 * (1 + i % 7);
    lp.pools.push_back({"pool" + std::to_string(i), cpu * (1 + i % 3), 5e7 + 1e6 * i});
    lp.stages.push_back({"stage" + std::to_string(i), cpu, static_cast<uint32_t>(i)});
  }
  lp.cores = 48;
  lp.memory_bytes = 64e9;
  lp.storage_bandwidth = 2e9;
  lp.storage_bytes_per_sample = 1e5;
  lp.max_samples_per_s = 5000;
  return lp;
}

LoaderProfile TrainLoader() {
  LoaderProfile p;
  p.name = "train";
  p.batch_size = 64;
  p.workers = 4;
  p.batches = 1000;
  p.compute_s_per_batch = 0.05;
  p.cpu_s_per_batch = 0.4;
  p.io_s_per_batch = 0.2;
  p.produce_s_per_batch = 0.6;
  p.produce_p99_s = 0.9;
  p.dataset_bytes = 100ull << 30;
  p.dataset_items = 1000000;
  p.bytes_per_sample = {107374.0, true, "bench"};
  p.storage_bandwidth = {500e6, true, "bench"};
  return p;
}

void BM_Lp100Stages(benchmark::State& state) {
  const PipelineLp lp = HundredStageLp();
  double optimum = 0;
  size_t rows = 0;
  for (auto _ : state) {
    auto solution = SolvePipelineLp(lp);
    optimum = solution->samples_per_s;
    rows = solution->rows.size();
  }
  state.counters["optimum_samples_per_s"] = optimum;
  state.counters["rows"] = static_cast<double>(rows);
}
BENCHMARK(BM_Lp100Stages)->Unit(benchmark::kMillisecond);

// 1 + 4 x 2 cache choices, up to 2 LPs each.
void BM_Recommend(benchmark::State& state) {
  const LoaderProfile p = TrainLoader();
  RecommendOptions o;
  o.cores = 32;
  o.memory_bytes = 64ull << 30;
  for (auto _ : state) benchmark::DoNotOptimize(Recommend(p, o));
}
BENCHMARK(BM_Recommend)->Unit(benchmark::kMillisecond);

void BM_LruExactSimulation1e6Items2Epochs(benchmark::State& state) {
  const std::vector<uint64_t> items(1000000, 100000);
  double hit = 0;
  for (auto _ : state) hit = SimulateLruRandomHitRatio(items, 50000000000ull, 2, 1);
  state.counters["hit"] = hit;
  state.counters["closed_form"] = DerivedLruRandomHitRatio(0.5);
}
BENCHMARK(BM_LruExactSimulation1e6Items2Epochs)->Unit(benchmark::kMillisecond);

// CacheHitRatio samples the 1e6 items down to 1e5.
void BM_CacheHitRatio1e6Items(benchmark::State& state) {
  LoaderProfile sized = TrainLoader();
  sized.item_bytes.assign(1000000, 100000);
  sized.dataset_bytes = 100000ull * 1000000;
  double hit = 0;
  for (auto _ : state) hit = *CacheHitRatio(sized, 50000000000ull, CachePolicy::kLru, false);
  state.counters["hit"] = hit;
}
BENCHMARK(BM_CacheHitRatio1e6Items)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
