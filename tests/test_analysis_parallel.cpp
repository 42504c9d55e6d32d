#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/parallel.h"
#include "analysis/ranks.h"
#include "test_analysis_trace_builder.h"
#include "test_analysis_trace_file.h"

using namespace stallprof;
using namespace stallprof::analysis;
using namespace stallprof::testing;

namespace {

// One rank's trace: a main process of rank `rank` waiting `wait` per step over
// 20 steps of 30 ms compute, and one worker fetching each batch; on `cores`
// usable cores (0: not recorded).
std::string WriteRank(int32_t rank, uint64_t wait, uint32_t cores = 0) {
  TraceBuilder b;
  b.trace.header.usable_cores = cores;
  const uint32_t pid = 100;
  b.Process(pid, 1, rank);
  b.Process(pid + 1, pid, rank);
  b.Config(pid, 1, "name", "train");
  b.Config(pid, 1, "batch_size", 10);
  b.Config(pid, 1, "num_workers", 1);
  LoopSpec spec;
  spec.pid = pid;
  spec.thread = b.Thread(pid, pid);
  spec.iterations = 20;
  spec.wait = wait;
  spec.compute = 30 * kMs;
  AddLoop(b, spec);
  const uint32_t w = b.Thread(pid + 1, pid + 1);
  for (int i = 0; i < 20; ++i) {
    const uint64_t s0 = spec.start + i * 40 * kMs;
    b.Span(w, names::kGetitem, s0, 20 * kMs, 1, i);
    b.Span(w, names::kFetch, s0, 35 * kMs, 1, i, 25 * kMs, 1 * kMs);
  }
  return WriteTrace(b.trace, "rank" + std::to_string(rank));
}

TraceAnalysis AnalyzeOne(const std::string& path) {
  auto digest = LoadForAnalysis(path);
  REQUIRE(digest.ok());
  auto a = Analyze(*digest, {});
  REQUIRE(a.ok());
  return std::move(*a);
}

}  // namespace

TEST_CASE("Traces analyzed in parallel give the analyses of one by one, in the order of the paths") {
  // Five ranks with different waits, so that a trace out of place shows.
  const std::vector<uint64_t> waits = {2 * kMs, 9 * kMs, 4 * kMs, 30 * kMs, 6 * kMs};
  std::vector<std::string> paths;
  for (size_t r = 0; r < waits.size(); ++r) paths.push_back(WriteRank(static_cast<int32_t>(r), waits[r]));
  std::vector<TraceAnalysis> one_by_one;
  for (const auto& p : paths) one_by_one.push_back(AnalyzeOne(p));

  for (unsigned jobs : {1u, 2u, 5u, 8u}) {
    INFO("jobs " << jobs);
    // The progress callback sees each count once, in order, up to every trace.
    std::vector<size_t> seen;
    auto outcomes = AnalyzeTraces(paths, {}, jobs, [&](size_t done) { seen.push_back(done); });
    REQUIRE(outcomes.size() == paths.size());
    CHECK(seen == std::vector<size_t>{1, 2, 3, 4, 5});
    std::vector<TraceAnalysis> parallel;
    for (auto& o : outcomes) {
      CHECK_FALSE(o.write_failed);
      REQUIRE(o.analysis);
      REQUIRE(o.analysis->ok());
      parallel.push_back(std::move(**o.analysis));
    }
    for (size_t i = 0; i < paths.size(); ++i) {
      const TraceAnalysis& a = one_by_one[i];
      const TraceAnalysis& b = parallel[i];
      CHECK(outcomes[i].path == paths[i]);
      CHECK(b.path == paths[i]);
      CHECK(b.quality.spans == a.quality.spans);
      REQUIRE(b.loaders.size() == 1);
      REQUIRE(a.loaders.size() == 1);
      const LoaderAnalysis& la = a.loaders[0];
      const LoaderAnalysis& lb = b.loaders[0];
      CHECK(lb.rank == static_cast<int32_t>(i));
      CHECK(lb.iterations.size() == la.iterations.size());
      CHECK(lb.wait_steady.mean == la.wait_steady.mean);  // same inputs, same code: equal, not close
      CHECK(lb.step_all.p99 == la.step_all.p99);
      CHECK(lb.stall_fraction == la.stall_fraction);
      CHECK(lb.split.fetch_stall_s == la.split.fetch_stall_s);
      REQUIRE(lb.stages.size() == la.stages.size());
      for (size_t s = 0; s < la.stages.size(); ++s) CHECK(lb.stages[s].count == la.stages[s].count);
    }
    // And so the job view over them: rank 3 (30 ms waits) is the straggler.
    auto job = AnalyzeJob(parallel);
    REQUIRE(job.ok());
    REQUIRE(job->loaders.size() == 1);
    REQUIRE(job->loaders[0].stragglers.size() == 1);
    CHECK(job->loaders[0].stragglers[0].rank == 3);
  }
  for (const auto& p : paths) std::remove(p.c_str());
}

TEST_CASE("Traces analyzed in parallel stop at the first failing path with its error, as one by one would") {
  const std::string good = WriteRank(0, 2 * kMs);
  const std::string missing_first = "/tmp/stallprof-test-no-such-trace-a.pb";
  const std::string missing_later = "/tmp/stallprof-test-no-such-trace-b.pb";
  for (unsigned jobs : {1u, 3u}) {
    INFO("jobs " << jobs);
    auto outcomes = AnalyzeTraces({good, good, missing_first, good, missing_later}, {}, jobs);
    // The outcomes end at the first failure, as the one-by-one loop stops there.
    REQUIRE(outcomes.size() == 3);
    CHECK(outcomes[0].analysis->ok());
    CHECK(outcomes[1].analysis->ok());
    CHECK(outcomes[2].path == missing_first);
    REQUIRE_FALSE(outcomes[2].analysis->ok());
    CHECK(outcomes[2].analysis->error().kind == ErrorKind::kInput);
    CHECK_THAT(outcomes[2].analysis->error().message, Catch::Contains(missing_first));
  }
  std::remove(good.c_str());
}

TEST_CASE("Beyond kManyRanks traces the advice quotes no predictions, and up to it as one by one") {
  // Each rank waits 30 ms for its one worker's 25 ms of CPU a batch beside a
  // 30 ms step on 4 cores: prep-bound, and more workers are predicted.
  std::vector<std::string> paths;
  for (size_t r = 0; r <= kManyRanks; ++r) paths.push_back(WriteRank(static_cast<int32_t>(r), 30 * kMs, 4));
  const TraceAnalysis alone = AnalyzeOne(paths[0]);
  REQUIRE(alone.loaders.size() == 1);
  REQUIRE(alone.loaders[0].bottleneck == Cause::kPrep);
  REQUIRE_FALSE(alone.loaders[0].worker_predictions.empty());
  const auto predictions = [](const std::vector<std::string>& of) {
    size_t n = 0;
    for (auto& o : AnalyzeTraces(of, {}, 2)) {
      REQUIRE(o.analysis->ok());
      for (const auto& l : (*o.analysis)->loaders) n += l.worker_predictions.size();
    }
    return n;
  };
  const std::vector<std::string> few(paths.begin(), paths.begin() + kManyRanks);
  CHECK(predictions(few) == kManyRanks * alone.loaders[0].worker_predictions.size());
  CHECK(predictions(paths) == 0);
  for (const auto& p : paths) std::remove(p.c_str());
}
