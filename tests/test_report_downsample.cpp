#include <catch2/catch.hpp>

#include <algorithm>

#include "report/downsample.h"

using namespace stallprof::report;

namespace {

std::vector<double> Indices(size_t n) {
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<double>(i);
  return x;
}

}  // namespace

TEST_CASE("A one-iteration spike in a million iterations survives downsampling to 2000 points") {
  const size_t n = 1'000'000, spike = 654'321;
  std::vector<double> step(n, 10.0), wait(n, 1.0);
  step[spike] = 900.0;
  wait[spike + 1] = 0.0;  // a one-iteration dip in another series survives too
  const Downsampled d = DownsampleMinMax(Indices(n), {step, wait}, 2000);
  REQUIRE(d.x.size() <= 2000);
  REQUIRE(d.y.size() == 2);
  REQUIRE(d.y[0].size() == d.x.size());
  CHECK(d.per_bucket == 1000);
  CHECK(*std::max_element(d.y[0].begin(), d.y[0].end()) == 900.0);
  CHECK(*std::min_element(d.y[0].begin(), d.y[0].end()) == 10.0);
  CHECK(*std::min_element(d.y[1].begin(), d.y[1].end()) == 0.0);
  // The spike is drawn within the bucket that holds its iteration (at its
  // first or middle x: the series share their x).
  const auto at = std::max_element(d.y[0].begin(), d.y[0].end()) - d.y[0].begin();
  CHECK(d.x[at] >= 654'000);
  CHECK(d.x[at] < 655'000);
}

TEST_CASE("Each bucket keeps its extremes in the order they occurred") {
  // Bucket 0 = {5, 1, 9, 3}: the minimum (1) comes before the maximum (9);
  // bucket 1 = {8, 2, 7, 7}: the maximum (8) comes first.
  const Downsampled d = DownsampleMinMax(Indices(8), {{5, 1, 9, 3, 8, 2, 7, 7}}, 4);
  CHECK(d.per_bucket == 4);
  CHECK(d.x == std::vector<double>{0, 2, 4, 6});
  CHECK(d.y[0] == std::vector<double>{1, 9, 8, 2});
}

TEST_CASE("A series that fits is returned unchanged") {
  const Downsampled d = DownsampleMinMax({0, 1, 2}, {{3, 1, 2}}, 2000);
  CHECK(d.per_bucket == 1);
  CHECK(d.x == std::vector<double>{0, 1, 2});
  CHECK(d.y[0] == std::vector<double>{3, 1, 2});
}

TEST_CASE("A last bucket of one point gives one point, not a pair") {
  const Downsampled d = DownsampleMinMax(Indices(5), {{1, 2, 3, 4, 5}}, 4);  // buckets of 3: {1,2,3}, {4,5}
  CHECK(d.per_bucket == 3);
  CHECK(d.x == std::vector<double>{0, 1, 3, 4});
  CHECK(d.y[0] == std::vector<double>{1, 3, 4, 5});
  const Downsampled odd = DownsampleMinMax(Indices(7), {{1, 2, 3, 4, 5, 6, 7}}, 4);  // {1..4}, {5,6,7}... and none left over
  CHECK(odd.x.size() == odd.y[0].size());
  CHECK(odd.y[0].back() == 7);
}
