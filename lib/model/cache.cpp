#include "model/cache.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace stallprof::model {

// Above this many items the LRU simulation samples (SampledLruRandomHitRatio):
// 1e5 items keep the simulation in cache-friendly arrays, ~10 ms.
constexpr size_t kMaxSimulatedItems = 100'000;

const char* ToString(CachePolicy policy) {
  switch (policy) {
    case CachePolicy::kPageCache: return "pagecache";
    case CachePolicy::kLru: return "lru";
    case CachePolicy::kStatic: return "static";
  }
  return "?";
}

namespace {
// An intrusive doubly linked LRU list over item indices: O(1) per access and
// no allocation after setup, so 1e6 items x a few epochs take milliseconds.
class LruList {
 public:
  explicit LruList(size_t n) : prev_(n, kNone), next_(n, kNone), cached_(n, 0) {}
  bool Contains(uint32_t i) const { return cached_[i]; }
  void Unlink(uint32_t i) {
    if (prev_[i] != kNone) next_[prev_[i]] = next_[i]; else head_ = next_[i];
    if (next_[i] != kNone) prev_[next_[i]] = prev_[i]; else tail_ = prev_[i];
    prev_[i] = next_[i] = kNone;
    cached_[i] = 0;
  }
  void PushFront(uint32_t i) {  // most recently used
    prev_[i] = kNone;
    next_[i] = head_;
    if (head_ != kNone) prev_[head_] = i; else tail_ = i;
    head_ = i;
    cached_[i] = 1;
  }
  uint32_t Tail() const { return tail_; }  // least recently used
  bool Empty() const { return head_ == kNone; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> prev_, next_;
  std::vector<uint8_t> cached_;
  uint32_t head_ = kNone, tail_ = kNone;
};
}  // namespace

double SimulateLruRandomHitRatio(const std::vector<uint64_t>& item_bytes, uint64_t cache_bytes, uint32_t epochs,
                                 uint64_t seed) {
  const size_t n = item_bytes.size();
  if (n == 0) return 1;
  epochs = std::max<uint32_t>(epochs, 2);
  LruList lru(n);
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 rng(seed);
  uint64_t used = 0;
  double hit_bytes = 0, total_bytes = 0;
  for (uint32_t epoch = 0; epoch < epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    const bool steady = epoch > 0;
    for (uint32_t i : order) {
      const uint64_t size = item_bytes[i];
      if (steady) total_bytes += static_cast<double>(size);
      if (lru.Contains(i)) {
        if (steady) hit_bytes += static_cast<double>(size);
        lru.Unlink(i);
        lru.PushFront(i);
        continue;
      }
      if (size > cache_bytes) continue;  // never fits: read through
      while (used + size > cache_bytes && !lru.Empty()) {
        const uint32_t victim = lru.Tail();
        used -= item_bytes[victim];
        lru.Unlink(victim);
      }
      lru.PushFront(i);
      used += size;
    }
  }
  return total_bytes > 0 ? hit_bytes / total_bytes : 1;
}

uint64_t PageCacheInactiveRatio(uint64_t cache_bytes) {
  const uint64_t gib = cache_bytes >> 30;
  if (gib == 0) return 1;
  auto root = static_cast<uint64_t>(std::sqrt(static_cast<double>(10 * gib)));
  while (root * root > 10 * gib) --root;
  while ((root + 1) * (root + 1) <= 10 * gib) ++root;
  return root;
}

double SimulatePageCacheHitRatio(const std::vector<uint64_t>& item_bytes, uint64_t cache_bytes, uint32_t epochs,
                                 uint64_t seed, bool shuffle, uint64_t inactive_ratio) {
  const size_t n = item_bytes.size();
  if (n == 0) return 1;
  epochs = std::max<uint32_t>(epochs, 2);
  inactive_ratio = std::max<uint64_t>(inactive_ratio, 1);
  constexpr uint64_t kNoShadow = UINT64_MAX;
  LruList active(n), inactive(n);  // front: the newest on each list
  std::vector<uint8_t> referenced(n, 0);
  std::vector<uint64_t> shadow(n, kNoShadow);  // the age at eviction, while the kernel remembers it
  uint64_t age = 0;  // bytes evicted or activated so far (workingset's nonresident age)
  uint64_t in_active = 0, in_inactive = 0;
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 rng(seed);
  double hit_bytes = 0, total_bytes = 0;
  auto activate = [&](uint32_t i) {
    active.PushFront(i);
    in_active += item_bytes[i];
    age += item_bytes[i];
  };
  for (uint32_t epoch = 0; epoch < epochs; ++epoch) {
    if (shuffle) std::shuffle(order.begin(), order.end(), rng);
    const bool steady = epoch > 0;
    for (uint32_t i : order) {
      const uint64_t size = item_bytes[i];
      if (steady) total_bytes += static_cast<double>(size);
      if (active.Contains(i) || inactive.Contains(i)) {
        if (steady) hit_bytes += static_cast<double>(size);
        // folio_mark_accessed: referenced on the first access, activated on
        // the second while inactive (and no longer referenced).
        if (inactive.Contains(i) && referenced[i]) {
          inactive.Unlink(i);
          in_inactive -= size;
          referenced[i] = 0;
          activate(i);
        } else {
          referenced[i] = 1;
        }
        continue;
      }
      if (size > cache_bytes) continue;  // never fits: read through
      // A refault within the active list's size of its eviction is workingset: activated.
      if (shadow[i] != kNoShadow && age - shadow[i] <= in_active) {
        activate(i);
      } else {
        inactive.PushFront(i);
        in_inactive += size;
      }
      shadow[i] = kNoShadow;
      referenced[i] = 1;  // the read that faulted it marks it accessed
      while (in_active + in_inactive > cache_bytes) {
        while (in_inactive * inactive_ratio < in_active) {  // inactive_is_low: deactivate the oldest
          const uint32_t old = active.Tail();
          active.Unlink(old);
          in_active -= item_bytes[old];
          inactive.PushFront(old);
          in_inactive += item_bytes[old];
        }
        const uint32_t victim = inactive.Tail();
        inactive.Unlink(victim);
        in_inactive -= item_bytes[victim];
        shadow[victim] = age;
        age += item_bytes[victim];
      }
    }
  }
  return total_bytes > 0 ? hit_bytes / total_bytes : 1;
}

namespace {
// A few epochs: a stable mean with bounded work (about 1e6 accesses).
uint32_t EpochsFor(size_t items) {
  return static_cast<uint32_t>(std::clamp<size_t>(1'000'000 / std::max<size_t>(items, 1), 2, 20));
}

// A seeded uniform sample of at most `max_items` of the items (selection
// sampling, Knuth's algorithm S: each item kept with the right probability,
// in one pass), and `cache_bytes` scaled by the sampled share of the bytes.
std::pair<std::vector<uint64_t>, uint64_t> SampleItems(const std::vector<uint64_t>& item_bytes, uint64_t cache_bytes,
                                                       size_t max_items, uint64_t seed) {
  const size_t n = item_bytes.size();
  std::vector<uint64_t> sample;
  sample.reserve(max_items);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  double total = 0, kept = 0;
  size_t needed = max_items;
  for (size_t i = 0; i < n; ++i) {
    total += static_cast<double>(item_bytes[i]);
    if (needed > 0 && std::uniform_int_distribution<size_t>(0, n - i - 1)(rng) < needed) {
      sample.push_back(item_bytes[i]);
      kept += static_cast<double>(item_bytes[i]);
      --needed;
    }
  }
  const auto scaled = static_cast<uint64_t>(static_cast<double>(cache_bytes) * (total > 0 ? kept / total : 0));
  return {std::move(sample), scaled};
}
}  // namespace

double SampledPageCacheHitRatio(const std::vector<uint64_t>& item_bytes, uint64_t cache_bytes, size_t max_items,
                                uint64_t seed, bool shuffle) {
  const uint64_t ratio = PageCacheInactiveRatio(cache_bytes);
  if (item_bytes.size() <= max_items || max_items == 0)
    return SimulatePageCacheHitRatio(item_bytes, cache_bytes, EpochsFor(item_bytes.size()), seed, shuffle, ratio);
  auto [sample, scaled] = SampleItems(item_bytes, cache_bytes, max_items, seed);
  return SimulatePageCacheHitRatio(sample, scaled, EpochsFor(sample.size()), seed, shuffle, ratio);
}

double SampledLruRandomHitRatio(const std::vector<uint64_t>& item_bytes, uint64_t cache_bytes, size_t max_items,
                                uint64_t seed) {
  if (item_bytes.size() <= max_items || max_items == 0)
    return SimulateLruRandomHitRatio(item_bytes, cache_bytes, EpochsFor(item_bytes.size()), seed);
  auto [sample, scaled] = SampleItems(item_bytes, cache_bytes, max_items, seed);
  return SimulateLruRandomHitRatio(sample, scaled, EpochsFor(sample.size()), seed);
}

double DerivedLruRandomHitRatio(double c) {
  if (c <= 0) return 0;
  if (c >= 1) return 1;
  return c + (1 - c) * std::log1p(-c);
}

Result<double> CacheHitRatio(const LoaderProfile& profile, uint64_t cache_bytes, CachePolicy policy,
                             bool first_epoch) {
  uint64_t dataset = profile.dataset_bytes;
  if (dataset == 0 && !profile.item_bytes.empty())
    dataset = std::accumulate(profile.item_bytes.begin(), profile.item_bytes.end(), uint64_t{0});
  if (dataset == 0)
    return UnsupportedError("loader '" + profile.name +
                            "' has no dataset size, so a cache size cannot be turned into a hit ratio (its size is " +
                            profile.bytes_per_sample.source + "); record a file-backed dataset (e.g. ImageFolder), "
                            "ask for --cache all (everything cached), or leave --cache out");
  if (first_epoch) return 0.0;  // a cold cache: every item is read once
  const double fraction = static_cast<double>(cache_bytes) / static_cast<double>(dataset);
  if (fraction >= 1) return 1.0;
  if (policy == CachePolicy::kStatic) return fraction;
  const bool shuffled = profile.order == AccessOrder::kRandom;
  if (policy == CachePolicy::kPageCache) {
    if (!profile.item_bytes.empty())
      return SampledPageCacheHitRatio(profile.item_bytes, cache_bytes, kMaxSimulatedItems, 0x5ca1ab1e, shuffled);
    // Items of the mean size: as many as the dataset has (a sample of them
    // above the simulation's bound), else as many as the hit ratio needs to settle.
    const uint64_t items = std::clamp<uint64_t>(profile.dataset_items > 0 ? profile.dataset_items : 10'000, 1,
                                                kMaxSimulatedItems);
    const std::vector<uint64_t> equal(items, std::max<uint64_t>(dataset / items, 1));
    const auto scaled = static_cast<uint64_t>(fraction * static_cast<double>(equal.front() * items));
    return SimulatePageCacheHitRatio(equal, scaled, EpochsFor(items), 0x5ca1ab1e, shuffled,
                                     PageCacheInactiveRatio(cache_bytes));
  }
  if (!shuffled) return 0.0;  // LRU evicts each item just before its reuse
  if (!profile.item_bytes.empty()) return SampledLruRandomHitRatio(profile.item_bytes, cache_bytes, kMaxSimulatedItems, 0x5ca1ab1e);
  return DerivedLruRandomHitRatio(fraction);
}

}  // namespace stallprof::model
