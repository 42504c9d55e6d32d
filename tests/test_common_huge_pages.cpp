#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
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

TEST_CASE("a buffer no kept mapping fits grows the biggest kept one, its pages moved along, and the others go back") {
  if (kSanitized) {
    WARN("skipped: a sanitized build takes every buffer from operator new");
    return;
  }
  auto taken = DrainMappingCache();
  // Two kept mappings of 2 and 4 MiB, the 4 MiB one filled with 0xab.
  void* small = AllocateHugePages(kHugePageBytes);
  auto* filled = static_cast<uint8_t*>(AllocateHugePages(2 * kHugePageBytes));
  std::memset(filled, 0xab, 2 * kHugePageBytes);
  FreeHugePages(small, kHugePageBytes);
  FreeHugePages(filled, 2 * kHugePageBytes);
  CHECK(CachedHugePageBytes() == 3 * kHugePageBytes);
  // 6 MiB: too big for both; the 4 MiB one grows (its bytes still there, so
  // its pages were not faulted in again), the rest is fresh (zero), and the
  // 2 MiB one goes back to the kernel.
  auto* bigger = static_cast<uint8_t*>(AllocateHugePages(3 * kHugePageBytes));
  CHECK(reinterpret_cast<uintptr_t>(bigger) % kHugePageBytes == 0);
  CHECK(CachedHugePageBytes() == 0);
  CHECK(bigger[0] == 0xab);
  CHECK(bigger[2 * kHugePageBytes - 1] == 0xab);
  CHECK(bigger[2 * kHugePageBytes] == 0);
  CHECK(bigger[3 * kHugePageBytes - 1] == 0);
  std::memset(bigger, 1, 3 * kHugePageBytes);  // all of it writable
  CHECK(bigger[3 * kHugePageBytes - 1] == 1);
  FreeHugePages(bigger, 3 * kHugePageBytes);
  CHECK(CachedHugePageBytes() == 3 * kHugePageBytes);
}
