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
