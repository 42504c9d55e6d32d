#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>

#include "common/huge_pages.h"

using namespace stallprof;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // buffers come from operator new, where the sanitizer sees them
#else
constexpr bool kSanitized = false;
#endif

}  // namespace

TEST_CASE("a HugeVector of 2 MiB or more starts on a 2 MiB boundary") {
  if (kSanitized) WARN("skipped: a sanitized build takes every buffer from operator new");
  HugeVector<uint64_t> big;
  big.reserve(3 << 17);  // 3 MiB
  if (!kSanitized) CHECK(reinterpret_cast<uintptr_t>(big.data()) % kHugePageBytes == 0);
  HugeVector<uint32_t> odd(1'000'001);  // not a multiple of the page either
  if (!kSanitized) CHECK(reinterpret_cast<uintptr_t>(odd.data()) % kHugePageBytes == 0);
}

TEST_CASE("a HugeVector keeps its elements as it grows from small to huge and back") {
  HugeVector<uint64_t> v;
  for (uint64_t i = 0; i < 1'000'000; ++i) v.push_back(i * 3);  // crosses the 2 MiB threshold while growing
  REQUIRE(v.size() == 1'000'000);
  CHECK(v[0] == 0);
  CHECK(v[999'999] == 2'999'997);
  CHECK(std::accumulate(v.begin(), v.end(), uint64_t{0}) == uint64_t{3} * 999'999 * 1'000'000 / 2);
  v.resize(10);
  v.shrink_to_fit();  // back to a small buffer
  CHECK(v == std::vector<uint64_t>{0, 3, 6, 9, 12, 15, 18, 21, 24, 27});
  HugeVector<uint64_t> copy = v;
  CHECK(copy == v);
  CHECK_FALSE(copy == std::vector<uint64_t>{0, 3});
}

namespace {

// Takes every mapping the cache holds, so that what a test frees is all it holds.
std::vector<HugeVector<uint8_t>> DrainMappingCache() {
  std::vector<HugeVector<uint8_t>> taken;
  while (CachedHugePageBytes() > 0) taken.emplace_back().reserve(kMappedBytes);
  return taken;
}

}  // namespace

TEST_CASE("a freed HugeVector's mapping is reused by the next one of its size or less") {
  if (kSanitized) {
    WARN("skipped: a sanitized build takes every buffer from operator new");
    return;
  }
  auto taken = DrainMappingCache();
  const void* first = nullptr;
  {
    HugeVector<uint64_t> a(3 << 17, 7);  // 3 MiB: a 4 MiB mapping, faulted in
    first = a.data();
  }
  CHECK(CachedHugePageBytes() == 2 * kHugePageBytes);
  HugeVector<uint32_t> b;
  b.reserve(kMappedBytes);  // 1 MiB: takes the kept mapping, cut to one huge page
  CHECK(b.data() == first);
  CHECK(CachedHugePageBytes() == 0);
  b.assign(kMappedBytes / 4, 5);
  CHECK(b.back() == 5);
}

TEST_CASE("freed HugeVector mappings beyond kCachedBytesMax go back to the kernel") {
  if (kSanitized) {
    WARN("skipped: a sanitized build takes every buffer from operator new");
    return;
  }
  auto taken = DrainMappingCache();
  { HugeVector<uint8_t> huge(kCachedBytesMax + 1); }
  CHECK(CachedHugePageBytes() == 0);
  {
    std::vector<HugeVector<uint8_t>> many(kCachedBytesMax / kHugePageBytes + 3);
    for (auto& v : many) v.reserve(kHugePageBytes);
  }
  CHECK(CachedHugePageBytes() == kCachedBytesMax);
}

TEST_CASE("a HugeVector no kept mapping fits sends the kept ones back to the kernel first") {
  if (kSanitized) {
    WARN("skipped: a sanitized build takes every buffer from operator new");
    return;
  }
  auto taken = DrainMappingCache();
  { HugeVector<uint8_t> small(kHugePageBytes); }
  CHECK(CachedHugePageBytes() == kHugePageBytes);
  HugeVector<uint8_t> bigger(2 * kHugePageBytes);  // kept mappings too small: fresh, and they go
  CHECK(CachedHugePageBytes() == 0);
}
