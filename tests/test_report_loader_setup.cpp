// LoaderSetupLine: the loader's settings as analyze's section shows them.
#include <catch2/catch.hpp>

#include "analysis/analysis.h"
#include "report/analysis_report.h"

using stallprof::analysis::LoaderConfig;
using stallprof::report::LoaderSetupLine;

namespace {
// A loader whose batch size came from its getitem spans: batches of 64 set,
// 63.97 on average (the last batches partial).
LoaderConfig StreamedBatches(uint32_t workers, std::string sampler) {
  LoaderConfig c;
  c.batch_size_known = true;
  c.batch_size_from = "getitem spans";
  c.batch_size_set = 64;
  c.batch_size = 63.97;
  c.num_workers = workers;
  c.prefetch_factor = 2;
  c.sampler = std::move(sampler);
  return c;
}
}  // namespace

TEST_CASE("An IterableDataset's loader is named as such, not by torch's placeholder sampler") {
  const std::string line = LoaderSetupLine(StreamedBatches(2, "_InfiniteConstantSampler"));
  CHECK_THAT(line, Catch::EndsWith("an IterableDataset (no sampler)"));
  CHECK_THAT(line, !Catch::Contains("_InfiniteConstantSampler"));
  CHECK_THAT(LoaderSetupLine(StreamedBatches(2, "random")), Catch::EndsWith(", random"));
}

TEST_CASE("A mean batch below the set size blames the workers' last batches only where there are workers") {
  CHECK_THAT(LoaderSetupLine(StreamedBatches(2, "random")),
             Catch::StartsWith("batch 64, 64 samples a batch on average (from getitem spans: the workers' last "
                               "batches partial), 2 workers"));
  CHECK_THAT(LoaderSetupLine(StreamedBatches(0, "random")),
             Catch::StartsWith("batch 64, 64 samples a batch on average (from getitem spans: each epoch's last batch "
                               "partial), 0 workers"));
}
