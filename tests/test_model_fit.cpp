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
  std::vector<LoaderProfile> loaders(4);
  loaders[0].batch_size = 16, loaders[0].cpu_s_per_batch = 0.002 + 16 * 0.001;
  loaders[1].batch_size = 64, loaders[1].cpu_s_per_batch = 0.002 + 64 * 0.001;
  loaders[2].batch_size = 32, loaders[2].cpu_s_per_batch = 0;  // no fetch spans: left out
  loaders[3].batch_size = 128, loaders[3].cpu_s_per_batch = 0.002 + 128 * 0.001;
  auto f = FitCpuAgainstBatchSize(loaders);
  REQUIRE(f.ok());
  CHECK(f->points == 3);
  CHECK(f->slope == Approx(0.001));
  CHECK(f->intercept == Approx(0.002));
}

TEST_CASE("CPU per batch is not fitted through two loaders, which any line passes through") {
  std::vector<LoaderProfile> loaders(3);
  loaders[0].batch_size = 32, loaders[0].cpu_s_per_batch = 0.0195;  // train: random crops
  loaders[1].batch_size = 128, loaders[1].cpu_s_per_batch = 0.0827; // val: resize and center crop
  loaders[2].batch_size = 128, loaders[2].cpu_s_per_batch = 0.0800; // the same batch size again
  auto f = FitCpuAgainstBatchSize(loaders);
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().kind == stallprof::ErrorKind::kUnsupported);
}

TEST_CASE("A fit with one distinct setting asks for more data") {
  auto f = FitLine({4, 4, 4}, {1, 2, 3});
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().kind == stallprof::ErrorKind::kUnsupported);
}

namespace {
// Fetch spans whose CPU is `base` plus `per_mib` per MiB read from storage;
// storage reads alternate between `low` and `high` MiB, reads through calls
// are `calls` MiB each.
std::vector<ReadSample> ReadRows(double base, double per_mib, double low, double high, double calls) {
  std::vector<ReadSample> rows;
  for (int i = 0; i < 40; ++i) {
    const double storage = (i % 2 ? high : low) * 1048576.0;
    rows.push_back({base + per_mib * storage / 1048576.0 + (i % 4 == 0 ? 1e-5 : -1e-5), storage, calls * 1048576.0});
  }
  return rows;
}
}  // namespace

TEST_CASE("The CPU a storage miss costs is the slope of fetch CPU against bytes read from storage") {
  const auto fit = FitReadCost(ReadRows(0.002, 0.0005, 2, 8, 8));
  REQUIRE(fit.ok());
  CHECK(fit->cpu_s_per_storage_byte * 1048576.0 == Approx(0.0005).epsilon(0.01));
  CHECK(fit->points == 40);
  CHECK(fit->r2 > 0.99);
}

TEST_CASE("CPU per byte read on every read is kept apart from the CPU of a miss") {
  // Item sizes vary (calls), misses vary independently: cpu = 1 ms + 0.2 ms/MiB read + 0.5 ms/MiB missed.
  std::vector<ReadSample> rows;
  for (int i = 0; i < 60; ++i) {
    const double calls = (4 + i % 5) * 1048576.0, storage = calls * ((i / 5) % 3) / 2.0;
    rows.push_back({0.001 + 0.0002 * calls / 1048576.0 + 0.0005 * storage / 1048576.0, storage, calls});
  }
  const auto fit = FitReadCost(rows);
  REQUIRE(fit.ok());
  CHECK(fit->cpu_s_per_storage_byte * 1048576.0 == Approx(0.0005).epsilon(0.01));
}

TEST_CASE("A read-cost fit refuses spans that cannot separate misses from the rest, saying why") {
  CHECK(FitReadCost(ReadRows(0.002, 0.0005, 2, 8, 8)).ok());
  const auto few = FitReadCost(std::vector<ReadSample>(3, ReadSample{0.001, 1e6, 1e6}));
  REQUIRE_FALSE(few.ok());
  CHECK_THAT(few.error().message, Catch::Contains("3 fetch spans"));
  const auto cached = FitReadCost(ReadRows(0.002, 0.0005, 0, 0, 8));
  REQUIRE_FALSE(cached.ok());
  CHECK_THAT(cached.error().message, Catch::Contains("page cache"));
  const auto flat = FitReadCost(ReadRows(0.002, 0.0005, 8, 8, 8));
  REQUIRE_FALSE(flat.ok());
  CHECK_THAT(flat.error().message, Catch::Contains("same bytes"));
  // Every batch missed at least half the mean: a miss's fixed cost would hide in the intercept.
  const auto all_missed = FitReadCost(ReadRows(0.002, 0.0005, 6, 8, 8));
  REQUIRE_FALSE(all_missed.ok());
  CHECK_THAT(all_missed.error().message, Catch::Contains("less than half the mean"));
  // A cold profile where a few batches missed less: too few to place the
  // intercept (each miss also costs a fixed 3 ms a batch here, which a line
  // through them would have put in the intercept).
  std::vector<ReadSample> mostly_cold(100, ReadSample{0.001 + 0.003 + 0.0005 * 8, 8 * 1048576.0, 8 * 1048576.0});
  for (int i = 0; i < 3; ++i) mostly_cold.push_back({0.001 + 0.0005 * 2, 2 * 1048576.0, 8 * 1048576.0});
  const auto few_low = FitReadCost(mostly_cold);
  REQUIRE_FALSE(few_low.ok());
  CHECK_THAT(few_low.error().message, Catch::Contains("only 3 of 103 batches"));
  // One batch that missed (a worker's first fetch reading its modules, slow
  // for other reasons) among 99 that did not: its slope is that batch's
  // alone, and 13 KiB a batch of the 8 MiB read is a sliver besides.
  std::vector<ReadSample> one_miss(99, ReadSample{0.005, 0, 8 * 1048576.0});
  one_miss.push_back({0.030, 1.3 * 1048576.0, 8 * 1048576.0});
  const auto single = FitReadCost(one_miss);
  REQUIRE_FALSE(single.ok());
  CHECK_THAT(single.error().message, Catch::Contains("13.3 KiB a batch from storage of the 8.00 MiB they read (0.16%, 5% needed)"));
  // Misses of a few KiB a batch that move with other work (metadata beside
  // a decode pipeline's first batches): 2.7 KiB of 1.6 MiB, the CPU 40 ms
  // more wherever they are, would fit 120 ms/MiB.
  std::vector<ReadSample> sliver;
  for (int i = 0; i < 100; ++i) {
    const double missed = (i % 4 == 0 ? 4 : i % 4 == 1 ? 2 : 0.5) * 2.7 * 1024;
    sliver.push_back({0.035 + 0.000117 * missed / 1024, missed, 1.6 * 1048576.0});
  }
  const auto slivers = FitReadCost(sliver);
  REQUIRE_FALSE(slivers.ok());
  CHECK_THAT(slivers.error().message, Catch::Contains("too little to fit what a miss costs"));
  // Five batches that missed all they read among 95 that missed nothing:
  // enough bytes (5%), too few batches to set a slope.
  std::vector<ReadSample> five_miss(95, ReadSample{0.005, 0, 8 * 1048576.0});
  for (int i = 0; i < 5; ++i) five_miss.push_back({0.009, 8 * 1048576.0, 8 * 1048576.0});
  const auto five = FitReadCost(five_miss);
  REQUIRE_FALSE(five.ok());
  CHECK_THAT(five.error().message, Catch::Contains("only 5 of 100 batches missed more than half"));
  // Every read missed: storage bytes move with the bytes read.
  std::vector<ReadSample> cold;
  for (int i = 0; i < 40; ++i) cold.push_back({0.001 * (1 + i % 4), (1 + i % 4) * 1e6, (1 + i % 4) * 1e6});
  const auto collinear = FitReadCost(cold);
  REQUIRE_FALSE(collinear.ok());
  CHECK_THAT(collinear.error().message, Catch::Contains("in step"));
}

TEST_CASE("A read-cost fit whose slope the CPU's noise hides is refused, not taken as its noisy value") {
  // 2 or 8 MiB from storage a batch, 0.5 ms per MiB missed, and +-8 ms of
  // CPU noise (a busy machine) that does not follow the misses.
  std::vector<ReadSample> rows;
  for (int i = 0; i < 40; ++i) {
    const double storage = (i % 2 ? 8 : 2) * 1048576.0;
    const double noise = (i % 3 == 0 ? 8e-3 : i % 3 == 1 ? -8e-3 : 0);
    rows.push_back({0.003 + 0.0005 * storage / 1048576.0 + noise, storage, 8 * 1048576.0});
  }
  const auto fit = FitReadCost(rows);
  REQUIRE_FALSE(fit.ok());
  CHECK_THAT(fit.error().message, Catch::Contains("not determined"));
  // The same misses without the noise: the slope is determined.
  for (int i = 0; i < 40; ++i) rows[static_cast<size_t>(i)].cpu_s = 0.003 + 0.0005 * rows[static_cast<size_t>(i)].storage_bytes / 1048576.0;
  REQUIRE(FitReadCost(rows).ok());
  CHECK(FitReadCost(rows)->cpu_s_per_storage_byte * 1048576.0 == Approx(0.0005));
}

TEST_CASE("A negative miss slope from noise is taken as misses costing no CPU") {
  const auto fit = FitReadCost(ReadRows(0.004, -0.0001, 2, 8, 8));
  REQUIRE(fit.ok());
  CHECK(fit->cpu_s_per_storage_byte == 0);
}

TEST_CASE("Without spread the miss CPU is estimated from system time less the page-cache copy") {
  // Every batch missed 8 MiB: cpu 4 ms, of which 3 ms system; copying 8 MiB from the page cache costs 0.8 ms.
  std::vector<ReadSample> cold(20, ReadSample{0.004, 8 * 1048576.0, 8 * 1048576.0, 0.003});
  REQUIRE_FALSE(FitReadCost(cold).ok());
  const double copy_ns_per_byte = 0.0008 * 1e9 / (8 * 1048576.0);
  const auto estimate = EstimateReadCostFromSystemTime(cold, copy_ns_per_byte);
  REQUIRE(estimate.ok());
  CHECK(*estimate * 8 * 1048576.0 == Approx(0.0022));  // 3 ms - 0.8 ms per batch
  // Never more than all the CPU, never negative.
  CHECK(*EstimateReadCostFromSystemTime(cold, 1e-6) * 8 * 1048576.0 <= 0.004);
  CHECK(*EstimateReadCostFromSystemTime(cold, 100) == 0);
  // What it needs: the copy cost, system time on every span, storage reads.
  CHECK_THAT(EstimateReadCostFromSystemTime(cold, 0).error().message, Catch::Contains("copy cost"));
  auto without = cold;
  without[3].system_s = -1;
  CHECK_THAT(EstimateReadCostFromSystemTime(without, copy_ns_per_byte).error().message, Catch::Contains("system CPU"));
  auto cached = cold;
  for (auto& r : cached) r.storage_bytes = 0;
  CHECK_FALSE(EstimateReadCostFromSystemTime(cached, copy_ns_per_byte).ok());
}

TEST_CASE("One or two fetches that read from storage price no miss, whatever their kernel time") {
  // An in-memory loader: one sampled fetch of 11 faulted 8 KiB in (a
  // module's code) and spent 2.5 ms in the kernel; the rest ~0.
  std::vector<ReadSample> rows(11, ReadSample{0.0015, 0, 160, 0.00001});
  rows[4] = ReadSample{0.004, 8192, 160, 0.0025};
  const auto one = EstimateReadCostFromSystemTime(rows, 0.1);
  REQUIRE_FALSE(one.ok());
  CHECK_THAT(one.error().message, Catch::Contains("only 1 fetch read from storage (3 needed"));
  rows[7] = rows[4];
  CHECK_FALSE(EstimateReadCostFromSystemTime(rows, 0.1).ok());
  rows[9] = rows[4];  // three: a miss is priced
  CHECK(EstimateReadCostFromSystemTime(rows, 0.1).ok());
}

TEST_CASE("Fetches without misses give the kernel time a miss is measured against") {
  // A warm decode pipeline: every fetch spends 2 ms in the kernel on page
  // faults (its collate) beside copying the 1 MiB it reads from the page
  // cache, and 4 of 64 fetches read 3 KiB of metadata from storage.
  const double copy_ns_per_byte = 0.1, calls = 1048576.0;
  const double copy_s = calls * copy_ns_per_byte * 1e-9;
  std::vector<ReadSample> warm;
  for (int i = 0; i < 64; ++i) {
    const double jitter = (i % 4) * 0.0001;  // 0-0.3 ms of noise
    warm.push_back(ReadSample{0.016, i % 20 == 0 ? 3072.0 : 0.0, calls, 0.002 + copy_s + jitter});
  }
  // Without the baseline all 2 ms a missing fetch spent were charged to 3 KiB.
  const auto warm_estimate = EstimateReadCostFromSystemTime(warm, copy_ns_per_byte);
  REQUIRE_FALSE(warm_estimate.ok());
  CHECK_THAT(warm_estimate.error().message, Catch::Contains("no more kernel time"));

  // Misses that did cost: 1 MiB from storage on 10 of 64 fetches, each 1.5 ms more in the kernel.
  std::vector<ReadSample> mixed = warm;
  for (int i = 0; i < 64; ++i) {
    mixed[i].storage_bytes = i % 6 == 0 ? calls : 0;
    if (mixed[i].storage_bytes > 0) mixed[i].system_s += 0.0015;
  }
  const auto mixed_estimate = EstimateReadCostFromSystemTime(mixed, copy_ns_per_byte);
  REQUIRE(mixed_estimate.ok());
  // 1.5 ms a missing MiB, give or take the jitter's share.
  CHECK(*mixed_estimate * calls == Approx(0.0015).margin(0.0002));
}

TEST_CASE("A few fetches without misses are baseline enough for the kernel time a miss costs") {
  // A validation loader of 12 batches: each fetch spends 20 ms in the kernel
  // on its collate's page faults beside copying the 5 MiB it reads; 8 of them
  // also missed 40 KiB, which cost 0.2 ms more each. 4 clean fetches make the
  // baseline (10 were needed before, and all 20.2 ms went to the 40 KiB).
  const double copy_ns_per_byte = 0.1, calls = 5 * 1048576.0;
  const double copy_s = calls * copy_ns_per_byte * 1e-9;
  std::vector<ReadSample> rows;
  for (int i = 0; i < 12; ++i) {
    const bool missed = i % 3 != 0;
    const double jitter = (i % 2) * 0.00002;
    rows.push_back(ReadSample{0.2, missed ? 40960.0 : 0.0, calls, 0.020 + copy_s + jitter + (missed ? 0.0002 : 0)});
  }
  const auto estimate = EstimateReadCostFromSystemTime(rows, copy_ns_per_byte);
  REQUIRE(estimate.ok());
  CHECK(*estimate * 40960.0 == Approx(0.0002).margin(0.00003));
}

TEST_CASE("Fetches that all missed a little of what they read give no miss cost from their kernel time") {
  // Every fetch missed 10% of its 5 MiB and spent 20 ms in the kernel, mostly
  // page faults: with no fetch that missed nothing, that time cannot be split.
  const double calls = 5 * 1048576.0;
  std::vector<ReadSample> rows(12, ReadSample{0.2, 0.1 * calls, calls, 0.020});
  const auto estimate = EstimateReadCostFromSystemTime(rows, 0.1);
  REQUIRE_FALSE(estimate.ok());
  CHECK_THAT(estimate.error().message, Catch::Contains("from the page cache"));
  // A cold profile (the misses all of what the fetches read) keeps the estimate.
  for (auto& r : rows) r.storage_bytes = calls;
  REQUIRE(EstimateReadCostFromSystemTime(rows, 0.1).ok());
}
