// Times the model's hot paths: the 100-stage pipeline LP (target < 50 ms),
// Recommend on a loader, and the exact LRU simulation over 1e6 items.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "model/cache.h"
#include "model/lp.h"

using namespace stallprof::model;

namespace {
template <typename F>
double MedianMs(int runs, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
}  // namespace

int main() {
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
  double optimum = 0;
  const double lp_ms = MedianMs(21, [&] { optimum = SolvePipelineLp(lp)->samples_per_s; });
  std::printf("lp_100_stages_ms %.3f (target < 50; optimum %.1f samples/s, %zu rows)\n", lp_ms, optimum,
              SolvePipelineLp(lp)->rows.size());

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
  RecommendOptions o;
  o.cores = 32;
  o.memory_bytes = 64ull << 30;
  const double rec_ms = MedianMs(11, [&] { (void)Recommend(p, o); });
  std::printf("recommend_ms %.3f (%d cache choices x up to 2 LPs)\n", rec_ms, 1 + 4 * 2);

  std::vector<uint64_t> items(1000000, 100000);
  double hit = 0;
  const double exact_ms = MedianMs(3, [&] { hit = SimulateLruRandomHitRatio(items, 50000000000ull, 2, 1); });
  std::printf("lru_exact_simulation_1e6_items_2_epochs_ms %.1f (hit %.4f, closed form %.4f)\n", exact_ms, hit,
              DerivedLruRandomHitRatio(0.5));
  LoaderProfile sized = p;
  sized.item_bytes = items;
  sized.dataset_bytes = 100000ull * 1000000;
  const double model_ms = MedianMs(5, [&] { hit = *CacheHitRatio(sized, 50000000000ull, CachePolicy::kLru, false); });
  std::printf("cache_hit_ratio_1e6_items_ms %.1f (sampled to 1e5 items; hit %.4f)\n", model_ms, hit);
  return lp_ms < 50 ? 0 : 1;
}
