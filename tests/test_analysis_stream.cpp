#include <catch2/catch.hpp>

#include <cstdio>
#include <unistd.h>

#include "analysis/analysis.h"
#include "test_analysis_trace_builder.h"
#include "test_analysis_trace_file.h"
#include "trace/reader.h"

using namespace stallprof;
using namespace stallprof::analysis;
using namespace stallprof::testing;

namespace {

// `trace` written to a file and analyzed loaded whole, then streamed.
std::vector<TraceAnalysis> AnalyzedBothWays(const Trace& trace, const std::string& name) {
  const std::string path = WriteTrace(trace, name);
  auto whole = LoadTrace(path);
  REQUIRE(whole.ok());
  auto digest = LoadForAnalysis(path);
  REQUIRE(digest.ok());
  std::remove(path.c_str());
  std::vector<TraceAnalysis> out;
  for (bool streamed : {false, true}) {
    auto a = streamed ? Analyze(*digest, {}) : Analyze(*whole, {});
    REQUIRE(a.ok());
    out.push_back(std::move(*a));
  }
  return out;
}

}  // namespace


TEST_CASE("Streaming a trace for analysis gives the same results as loading it whole") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Process(201, 100);
  b.Config(100, 1, "name", "train");
  b.Config(100, 1, "batch_size", 2);
  b.Config(100, 1, "num_workers", 1);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 12;
  spec.epochs = 2;
  AddLoop(b, spec);
  uint32_t w = b.Thread(201, 201);
  for (int i = 0; i < 24; ++i) {
    uint64_t s0 = spec.start + i * 20 * kMs;
    b.Span(w, names::kGetitem, s0, 4 * kMs, 1, 2 * i);
    b.Span(w, names::kGetitem, s0 + 4 * kMs, 4 * kMs, 1, 2 * i + 1);
    b.Span(w, names::kCollate, s0 + 8 * kMs, 2 * kMs, 1, i, 2 * kMs, 0);
    b.Span(w, names::kFetch, s0, 10 * kMs, 1, i, 6 * kMs, 1 * kMs);
  }
  const std::string path = WriteTrace(b.trace, "stream");
  auto whole = LoadTrace(path);
  INFO((whole.ok() ? std::string() : whole.error().message));
  REQUIRE(whole.ok());
  auto digest = LoadForAnalysis(path);
  INFO((digest.ok() ? std::string() : digest.error().message));
  REQUIRE(digest.ok());
  CHECK(digest->trace.spans.size() < whole->spans.size());  // getitem/collate were folded
  auto a = Analyze(*whole, {});
  auto d = Analyze(*digest, {});
  REQUIRE(a.ok());
  REQUIRE(d.ok());
  REQUIRE(a->loaders.size() == 1);
  REQUIRE(d->loaders.size() == 1);
  const auto& la = a->loaders[0];
  const auto& ld = d->loaders[0];
  CHECK(ld.stall_fraction == Approx(la.stall_fraction));
  CHECK(ld.step_all.p99 == Approx(la.step_all.p99));
  CHECK(ld.epochs.size() == la.epochs.size());
  CHECK(ld.workers.size() == la.workers.size());
  CHECK(ld.workers[0].io_s == Approx(la.workers[0].io_s));
  CHECK(ld.split.fetch_stall_s == Approx(la.split.fetch_stall_s).margin(1e-12));
  REQUIRE(ld.stages.size() == 2);
  REQUIRE(la.stages.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(ld.stages[i].name == la.stages[i].name);
    CHECK(ld.stages[i].count == la.stages[i].count);
    CHECK(ld.stages[i].cpu_s == Approx(la.stages[i].cpu_s));
    CHECK(ld.stages[i].parallel_rate == Approx(la.stages[i].parallel_rate));
    CHECK(ld.stages[i].bottleneck == la.stages[i].bottleneck);
  }
  CHECK(d->quality.spans == a->quality.spans);
  std::remove(path.c_str());
}

TEST_CASE("Streaming a file that is not a trace fails with an input error naming it") {
  const std::string path = "/tmp/stallprof-test-" + std::to_string(getpid()) + "-junk.pb";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fputs("definitely not a trace", f);
  std::fclose(f);
  auto digest = LoadForAnalysis(path);
  REQUIRE_FALSE(digest.ok());
  CHECK(digest.error().kind == ErrorKind::kInput);
  CHECK_THAT(digest.error().message, Catch::Contains(path));
  std::remove(path.c_str());
}

namespace {
// The loader's main thread (process 100) and the thread its fetches run on:
// the main thread itself without workers, else one worker's (process 201).
std::pair<uint32_t, uint32_t> MainAndFetcher(TraceBuilder& b, uint32_t workers) {
  const uint32_t main = b.Thread(100, 100);
  if (!workers) return {main, main};
  b.Process(201, 100);
  return {main, b.Thread(201, 201)};
}
}  // namespace

TEST_CASE("A stage the training loop runs between next() calls is compute, apart from the pipeline's stages") {
  // Set costs, 20 iterations of 30 ms: a 1 ms next() whose fetch runs a
  // 0.5 ms "decode" stage (num_workers=0: on the main thread), then 29 ms of
  // compute, of which the user's "augment" stage takes 6 ms on CPU (21%).
  for (uint32_t workers : {0u, 1u}) {
    INFO("num_workers=" << workers);
    TraceBuilder b;
    b.Process(100, 1);
    b.Config(100, 1, "name", "train");
    b.Config(100, 1, "batch_size", 4);
    b.Config(100, 1, "num_workers", workers);
    const auto [main, fetcher] = MainAndFetcher(b, workers);
    uint64_t t = 1000 * kMs;
    b.Instant(main, names::kEpoch, t, 1, 0);
    const int iterations = 20;
    for (int i = 0; i < iterations; ++i) {
      // In the order the threads finish them: the stage inside the fetch, the
      // fetch, the wait around it, then the stage after it.
      b.Span(fetcher, "decode", t + kMs / 4, kMs / 2, 0, 0, kMs / 2);
      b.Span(fetcher, names::kFetch, t + kMs / 8, kMs * 3 / 4, 1, i, kMs * 3 / 4, 0);
      b.Span(main, names::kWait, t, kMs, 1, i, workers ? 0 : kMs, 0);
      b.Span(main, "augment", t + 5 * kMs, 6 * kMs, 0, 0, 6 * kMs);
      t += 30 * kMs;
    }
    b.Instant(main, names::kEpochEnd, t, 1, iterations);
    const auto analyses = AnalyzedBothWays(b.trace, "main-stages");
    for (size_t way = 0; way < analyses.size(); ++way) {
      INFO((way ? "streamed" : "loaded whole"));
      REQUIRE(analyses[way].loaders.size() == 1);
      const auto& l = analyses[way].loaders[0];
      REQUIRE(l.main_stages.size() == 1);
      CHECK(l.main_stages[0].name == "augment");
      CHECK(l.main_stages[0].count == iterations);
      CHECK(l.main_stages[0].wall_s == Approx(iterations * 0.006));
      CHECK(l.main_stages[0].cpu_s == Approx(iterations * 0.006));
      // The pipeline's stages: decode (inside the fetches) only.
      REQUIRE(l.stages.size() == 1);
      CHECK(l.stages[0].name == "decode");
      CHECK(l.stages[0].count == iterations);
      const auto& compute = l.account_all.Line(Cause::kCompute);
      CHECK(compute.evidence.find("your stages on the main thread: augment 6.0 ms per batch") != std::string::npos);
      REQUIRE_FALSE(l.advice.empty());
      CHECK(l.bottleneck == Cause::kCompute);
      CHECK(l.advice[0].find("21% of the step is your stage augment") != std::string::npos);
      CHECK(l.advice[0].find(workers ? "--move-to-workers augment`" : "--move-to-workers augment --workers N`") !=
            std::string::npos);
    }
  }
}

TEST_CASE("A main-thread stage is advised into workers when a loader without workers is input-bound on its prep") {
  // Set costs, 20 iterations of 10 ms: a 1 ms next() whose fetch takes
  // 0.75 ms of CPU (10% of the step waiting: moderately input-bound, worker
  // CPU the bottleneck), then 9 ms of compute, 4 ms of it the user's
  // "augment" stage on CPU (44%). Without workers, workers would take the
  // stage beside the step: the advice stands (a run on a slow host crossed
  // 5% and lost it). With 1 worker that lacks CPU, moving work to it would
  // add to its load: no such advice.
  for (uint32_t workers : {0u, 1u}) {
    INFO("num_workers=" << workers);
    TraceBuilder b;
    b.Process(100, 1);
    b.Config(100, 1, "num_workers", workers);
    const auto [main, fetcher] = MainAndFetcher(b, workers);
    uint64_t t = 1000 * kMs;
    b.Instant(main, names::kEpoch, t, 1, 0);
    for (int i = 0; i < 20; ++i) {
      b.Span(fetcher, names::kFetch, t + kMs / 8, kMs * 3 / 4, 1, i, kMs * 3 / 4, 0);
      b.Span(main, names::kWait, t, kMs, 1, i, workers ? 0 : kMs, 0);
      b.Span(main, "augment", t + 2 * kMs, 4 * kMs, 0, 0, 4 * kMs);
      t += 10 * kMs;
    }
    b.Instant(main, names::kEpochEnd, t, 1, 20);
    const auto analyses = AnalyzedBothWays(b.trace, "main-stage-prep");
    for (size_t way = 0; way < analyses.size(); ++way) {
      INFO((way ? "streamed" : "loaded whole"));
      REQUIRE(analyses[way].loaders.size() == 1);
      const auto& l = analyses[way].loaders[0];
      CHECK(l.verdict != Verdict::kNotInputBound);
      CHECK(l.bottleneck == Cause::kPrep);
      bool advised = false;
      for (const auto& advice : l.advice) advised = advised || advice.find("--move-to-workers augment") != std::string::npos;
      CHECK(advised == (workers == 0));
    }
  }
}

TEST_CASE("A main-thread stage whose CPU the counter budget skipped gets the measured spans' CPU per wall second") {
  // 0 workers, 20 batches: a 1 ms fetch, then an augment stage of 6 ms wall
  // on the main thread, 4.5 ms of it on CPU; every other augment span without
  // its CPU (the budget skipped it).
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "num_workers", 0);
  const uint32_t main = b.Thread(100, 100);
  uint64_t t = 1000 * kMs;
  b.Instant(main, names::kEpoch, t, 1, 0);
  for (int i = 0; i < 20; ++i) {
    b.Span(main, names::kFetch, t + kMs / 8, kMs * 3 / 4, 1, i, kMs * 3 / 4, 0);
    b.Span(main, names::kWait, t, kMs, 1, i, kMs, 0);
    b.Span(main, "augment", t + 2 * kMs, 6 * kMs, 0, 0, i % 2 ? -1 : static_cast<int64_t>(4500'000));
    t += 10 * kMs;
  }
  b.Instant(main, names::kEpochEnd, t, 1, 20);
  for (const auto& a : AnalyzedBothWays(b.trace, "main-stage-estimated")) {
    REQUIRE(a.loaders.size() == 1);
    const auto& l = a.loaders[0];
    REQUIRE(l.main_stages.size() == 1);
    CHECK(l.main_stages[0].cpu_source == CpuSource::kEstimated);
    CHECK(l.main_stages[0].wall_s == Approx(20 * 0.006));
    CHECK(l.main_stages[0].cpu_s == Approx(20 * 0.0045));
  }
}

TEST_CASE("Without workers a GIL probe that waited half the rest of its fetch or of the switch interval counts as held") {
  // 0 workers: each next() a 5 ms fetch on the main thread, then a 4 ms
  // step. The hook's probe thread asks for the GIL 10 us into some fetches.
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "num_workers", 0);
  const uint32_t main = b.Thread(100, 100), probe = b.Thread(100, 101);
  constexpr uint64_t kUs = 1000;
  const uint64_t start = 1000 * kMs, period = 9 * kMs;
  b.Instant(main, names::kEpoch, start, 1, 0);
  for (int i = 0; i < 8; ++i) {
    const uint64_t t = start + i * period;
    b.Span(main, names::kWait, t, 5 * kMs, 1, i, 5 * kMs, 0);
    b.Span(main, names::kFetch, t, 5 * kMs, 1, i, 5 * kMs, 0);
  }
  auto ask = [&](int i, uint64_t into, uint64_t waited, uint64_t switch_interval, uint16_t scope = 1) {
    b.Span(probe, names::kGilProbe, start + i * period + into, waited, scope, switch_interval, 0, 0);
  };
  ask(0, 10 * kUs, 4500 * kUs, 5 * kMs);  // held to near the fetch's end: held
  ask(1, 10 * kUs, 20 * kUs, 5 * kMs);    // let go at once: free
  ask(2, 4900 * kUs, 150 * kUs, 5 * kMs); // asked 100 us before the end: tells nothing
  ask(3, 10 * kUs, 1500 * kUs, 2 * kMs);  // past half a 2 ms switch interval: held
  ask(4, 10 * kUs, 1500 * kUs, 5 * kMs);  // under half of 5 ms and of the fetch's rest: free
  ask(5, 10 * kUs, 4500 * kUs, 5 * kMs, 2);  // another loader's
  ask(6, 6 * kMs, 10 * kUs, 5 * kMs);     // during the step, not a fetch
  const auto analyses = AnalyzedBothWays(b.trace, "gil-probes");
  for (size_t way = 0; way < analyses.size(); ++way) {
    INFO((way ? "streamed" : "loaded whole"));
    REQUIRE(analyses[way].loaders.size() == 1);
    const auto& l = analyses[way].loaders[0];
    CHECK(l.prefetch.gil_probes_held == 2u);
    CHECK(l.prefetch.gil_probes_free == 2u);
    for (const auto& st : l.stages) CHECK(st.name != names::kGilProbe);  // a measurement, not a stage
    for (const auto& st : l.main_stages) CHECK(st.name != names::kGilProbe);
  }
}
