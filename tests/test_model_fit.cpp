// Eigen least-squares fits: exact lines, noisy lines, and too little data.
#include <catch2/catch.hpp>

#include "model/fit.h"

using namespace stallprof::model;

TEST_CASE("A line through exact points is recovered with r2 of one") {
  auto f = FitLine({1, 2, 4, 8}, {3, 5, 9, 17});
  REQUIRE(f.ok());
  CHECK(f->intercept == Approx(1));
  CHECK(f->slope == Approx(2));
  CHECK(f->r2 == Approx(1));
}

TEST_CASE("A noisy line is fitted by least squares") {
  auto f = FitLine({0, 1, 2, 3}, {0.1, 0.9, 2.1, 2.9});
  REQUIRE(f.ok());
  CHECK(f->slope == Approx(0.96));
  CHECK(f->intercept == Approx(0.06));
  CHECK(f->r2 < 1);
  CHECK(f->r2 > 0.98);
}

TEST_CASE("CPU per batch against batch size splits per-batch and per-sample cost") {
  std::vector<LoaderProfile> loaders(3);
  loaders[0].batch_size = 16, loaders[0].cpu_s_per_batch = 0.002 + 16 * 0.001;
  loaders[1].batch_size = 64, loaders[1].cpu_s_per_batch = 0.002 + 64 * 0.001;
  loaders[2].batch_size = 32, loaders[2].cpu_s_per_batch = 0;  // no fetch spans: left out
  auto f = FitCpuAgainstBatchSize(loaders);
  REQUIRE(f.ok());
  CHECK(f->points == 2);
  CHECK(f->slope == Approx(0.001));
  CHECK(f->intercept == Approx(0.002));
}

TEST_CASE("A fit with one distinct setting asks for more data") {
  auto f = FitLine({4, 4, 4}, {1, 2, 3});
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().kind == stallprof::ErrorKind::kUnsupported);
}
