// The cache hit model: what share of the dataset's bytes a cache of a given
// size serves, per policy and access order (docs/model.md "Cache").
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "model/model.h"

namespace stallprof::model {

// Byte hit ratio of an LRU cache of `cache_bytes` over items of `item_bytes`,
// read in a fresh seeded random permutation each epoch, simulated exactly.
// Epoch 1 starts cold; the result is the mean over epochs 2..`epochs` (the
// steady state; epochs >= 2). Cannot fail: an empty dataset gives 1.
double SimulateLruRandomHitRatio(const std::vector<uint64_t>& item_bytes, uint64_t cache_bytes, uint32_t epochs,
                                 uint64_t seed);

// The same under Linux's page cache (mm/vmscan.c and mm/workingset.c
// without MGLRU): a file read for the first time joins the inactive list; a
// second access while it is there moves it to the active list; a file read
// again soon after its eviction (fewer bytes evicted or activated since than
// the active list holds) goes straight to the active list; reclaim takes the
// inactive list's oldest, after moving the active list's oldest over while the
// inactive list is the smaller (`inactive_ratio`: the kernel's
// sqrt(10 x GiB of the lists), at least 1). `shuffle` false: the same order
// every epoch.
double SimulatePageCacheHitRatio(const std::vector<uint64_t>& item_bytes, uint64_t cache_bytes, uint32_t epochs,
                                 uint64_t seed, bool shuffle, uint64_t inactive_ratio);

// The kernel's inactive_ratio for file pages: int_sqrt(10 x GiB), or 1 under 1 GiB.
uint64_t PageCacheInactiveRatio(uint64_t cache_bytes);

// The same for large datasets in bounded time: simulates a seeded uniform
// sample of at most `max_items` items with the cache scaled by the sampled
// share of bytes (spatial sampling, as SHARDS does for miss-ratio curves).
// Exact (no sampling) when the dataset has at most `max_items` items.
double SampledLruRandomHitRatio(const std::vector<uint64_t>& item_bytes, uint64_t cache_bytes, size_t max_items,
                                uint64_t seed);
// The page cache's (the inactive ratio from the whole cache, not the sample's).
double SampledPageCacheHitRatio(const std::vector<uint64_t>& item_bytes, uint64_t cache_bytes, size_t max_items,
                                uint64_t seed, bool shuffle);

// The closed form for equal item sizes (docs/model.md derives it): with
// c = cache / dataset, hit = c + (1 - c) ln(1 - c) for c < 1, else 1.
double DerivedLruRandomHitRatio(double cache_fraction);

// Steady-state (or, with `first_epoch`, cold first epoch) byte hit ratio of
// `profile`'s dataset under a cache of `cache_bytes` and `policy`. Fails when
// the dataset size is unknown (names the missing measurement).
Result<double> CacheHitRatio(const LoaderProfile& profile, uint64_t cache_bytes, CachePolicy policy,
                             bool first_epoch);

const char* ToString(CachePolicy policy);  // "pagecache", "lru", "static"

}  // namespace stallprof::model
