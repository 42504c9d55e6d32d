#include <catch2/catch.hpp>

#include "analysis/analysis.h"
#include "test_analysis_trace_builder.h"

using namespace stallprof;
using namespace stallprof::analysis;
using namespace stallprof::testing;

namespace {
// One rank = one main process with its own loader and one worker.
void AddRank(TraceBuilder& b, uint32_t pid, int32_t rank, uint64_t wait) {
  b.Process(pid, 1, rank);
  b.Process(pid + 1, pid, rank);
  b.Config(pid, 1, "name", "train");
  b.Config(pid, 1, "batch_size", 10);
  LoopSpec spec;
  spec.pid = pid;
  spec.thread = b.Thread(pid, pid);
  spec.iterations = 20;
  spec.wait = wait;
  spec.compute = 30 * kMs;
  AddLoop(b, spec);
  uint32_t w = b.Thread(pid + 1, pid + 1);
  for (int i = 0; i < 20; ++i) b.Span(w, names::kFetch, spec.start + i * 40 * kMs, 35 * kMs, 1, i, 1 * kMs, 0);
}
}  // namespace

TEST_CASE("Ranks in one trace are compared and the slow input-bound rank is the straggler") {
  TraceBuilder b;
  AddRank(b, 100, 0, 1 * kMs);
  AddRank(b, 200, 1, 40 * kMs);
  const auto analysis = Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const auto job = AnalyzeJob({*analysis});
  REQUIRE(job.ok());
  REQUIRE(job->ranks.size() == 2);
  CHECK(job->ranks[0].rank == 0);
  CHECK(job->ranks[1].rank == 1);
  CHECK(job->straggler_rank == 1);
  CHECK_THAT(job->straggler_reason, Catch::Contains("input-bound"));
  // Epochs end at the StopIteration next(), after the last batch's step.
  double t0 = 20 * (0.001 + 0.030), t1 = 20 * (0.040 + 0.030);
  CHECK(job->ranks[0].epoch_time_s == Approx(t0));
  CHECK(job->ranks[1].epoch_time_s == Approx(t1));
  CHECK(job->global_samples_per_s == Approx(400 / t1));
  CHECK(job->sum_local_samples_per_s == Approx(200 / t0 + 200 / t1));
  CHECK(job->scaling_efficiency == Approx((400 / t1) / (200 / t0 + 200 / t1)));
}

TEST_CASE("Traces from different hosts are aligned on their realtime clocks") {
  TraceBuilder a, b;
  AddRank(a, 100, 0, 1 * kMs);
  AddRank(b, 100, 1, 1 * kMs);
  // Host b's monotonic clock is 500 s ahead; both started at the same wall-clock instant.
  b.trace.header.start_monotonic_ns = 500000 * kMs;
  for (auto& s : b.trace.spans.start_ns) s += 500000 * kMs;
  const auto ra = Analyze(a.trace, {});
  const auto rb = Analyze(b.trace, {});
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  const auto job = AnalyzeJob({*ra, *rb});
  REQUIRE(job.ok());
  CHECK(job->ranks[0].start_realtime_s == Approx(job->ranks[1].start_realtime_s));
  CHECK(job->aligned_span_s == Approx(20 * 0.001 + 19 * 0.030));
}

TEST_CASE("A single process is not a job") {
  TraceBuilder b;
  AddRank(b, 100, 0, 1 * kMs);
  const auto analysis = Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const auto job = AnalyzeJob({*analysis});
  REQUIRE_FALSE(job.ok());
  CHECK(job.error().kind == ErrorKind::kUnsupported);
}
