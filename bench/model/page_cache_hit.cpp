// Prints the model's steady-state byte hit ratios for N equal files under a
// cache of each given size: Linux's page cache (model::SimulatePageCacheHitRatio),
// the same with the inactive list's ratio held at 1 (its value below 1 GiB),
// a plain LRU and a static subset. scripts/bench_page_cache.sh sets them beside
// the kernel's measured ones.
// Usage: page_cache_hit FILES FILE_BYTES EPOCHS CACHE_BYTES...
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "model/cache.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: page_cache_hit FILES FILE_BYTES EPOCHS CACHE_BYTES...\n");
    return 2;
  }
  const std::vector<uint64_t> files(std::strtoull(argv[1], nullptr, 10), std::strtoull(argv[2], nullptr, 10));
  const auto epochs = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
  const double total = static_cast<double>(files.size()) * static_cast<double>(files.empty() ? 0 : files.front());
  for (int i = 4; i < argc; ++i) {
    const uint64_t cache = std::strtoull(argv[i], nullptr, 10);
    double page_cache = 0, ratio_one = 0, lru = 0;
    constexpr int kSeeds = 5;  // the mean over seeds: one permutation's luck moves an epoch by a few points
    for (int seed = 1; seed <= kSeeds; ++seed) {
      page_cache += stallprof::model::SimulatePageCacheHitRatio(files, cache, epochs, seed, true,
                                                                stallprof::model::PageCacheInactiveRatio(cache)) / kSeeds;
      ratio_one += stallprof::model::SimulatePageCacheHitRatio(files, cache, epochs, seed, true, 1) / kSeeds;
      lru += stallprof::model::SimulateLruRandomHitRatio(files, cache, epochs, seed) / kSeeds;
    }
    std::printf("%.1f MiB: page cache %.3f (inactive ratio %llu; at 1: %.3f), LRU %.3f, static %.3f\n",
                static_cast<double>(cache) / 1048576, page_cache,
                static_cast<unsigned long long>(stallprof::model::PageCacheInactiveRatio(cache)), ratio_one, lru,
                total > 0 ? static_cast<double>(cache) / total : 0);
  }
  return 0;
}
