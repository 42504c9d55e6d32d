// Spans the counter budget skipped (lib/analysis/sampling.cpp): estimates from
// the sampled spans of their thread, their 95% bound, and what the account
// makes of them.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "analysis/analysis.h"
#include "analysis/sampling.h"
#include "test_analysis_trace_builder.h"

using namespace stallprof;
using namespace stallprof::analysis;
using namespace stallprof::testing;

namespace {

constexpr uint64_t kUs = 1000;

void ShareConfig(TraceBuilder& b, uint32_t pid, double share) {
  ConfigValue c;
  c.pid = pid;
  c.scope = 0;
  c.key = "counter_share";
  c.type = ConfigValue::Type::kF64;
  c.f64 = share;
  b.trace.configs.push_back(c);
}

std::vector<uint32_t> AllSpans(const Trace& trace) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < trace.spans.size(); ++i) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("A span the budget skipped gets its thread's measured CPU and delay per wall second") {
  TraceBuilder b;
  const uint32_t a = b.Thread(1, 1), other = b.Thread(1, 2);
  for (int i = 0; i < 4; ++i) b.Span(a, "f", i * 20 * kMs, 10 * kMs, 0, 0, 6 * kMs, 1 * kMs);
  for (int i = 0; i < 4; ++i) b.Span(other, "f", i * 20 * kMs, 10 * kMs, 0, 0, 2 * kMs, 0);
  b.Span(a, "f", 100 * kMs, 20 * kMs);  // skipped: no CPU
  const uint32_t skipped = static_cast<uint32_t>(b.trace.spans.size() - 1);

  const CounterEstimator sampled(b.trace.spans, AllSpans(b.trace), true);
  const SpanCounters c = sampled.At(skipped);
  CHECK(c.known);
  CHECK(c.estimated);
  CHECK(c.cpu_ns == 12 * kMs);  // thread a's 60%, not the pooled 40%
  CHECK(c.delay_ns == 2 * kMs);
  CHECK_FALSE(sampled.At(0).estimated);
  CHECK(sampled.At(0).cpu_ns == 6 * kMs);
  CHECK(sampled.Sums().spans == 9);
  CHECK(sampled.Sums().measured == 8);
  CHECK(sampled.Sums().estimated == 1);
  CHECK(sampled.Sums().cpu_estimated_s == Approx(0.012));

  // An older trace: a span without CPU was not measurable, not skipped.
  const CounterEstimator old(b.trace.spans, AllSpans(b.trace), false);
  CHECK_FALSE(old.At(skipped).known);
  CHECK(old.Sums().estimated == 0);
}

TEST_CASE("A span the budget skipped takes the CPU per wall second of its thread's sampled spans nearest in time") {
  // A page cache that warms: 32 sampled cold fetches of 10 ms with 1 ms of
  // CPU, then 64 warm ones of 1 ms with 0.9 ms of CPU, each followed by a
  // skipped warm one. The run's ratio, 0.184, would give a skipped warm fetch
  // 0.18 ms; its stratum's gives the warm fetches' own 0.9 ms.
  TraceBuilder b;
  const uint32_t t = b.Thread(1, 1);
  uint64_t at = 0;
  for (int i = 0; i < 32; ++i, at += 20 * kMs) b.Span(t, "f", at, 10 * kMs, 0, 0, 1 * kMs, 0);
  std::vector<uint32_t> skipped;
  for (int i = 0; i < 64; ++i, at += 4 * kMs) {
    b.Span(t, "f", at, 1 * kMs, 0, 0, 900 * 1000, 0);
    b.Span(t, "f", at + 2 * kMs, 1 * kMs);
    skipped.push_back(static_cast<uint32_t>(b.trace.spans.size() - 1));
  }
  const CounterEstimator estimator(b.trace.spans, AllSpans(b.trace), true);
  for (uint32_t i : skipped) CHECK(estimator.At(i).cpu_ns == 900 * 1000);
  CHECK(estimator.Sums().estimated == 64);
  CHECK(estimator.Sums().cpu_estimated_s == Approx(64 * 0.0009));
  // Every skipped span is a warm one: the cold strata hold none of them.
  CHECK(estimator.StratumOf(skipped.front()) != estimator.StratumOf(0));
}

TEST_CASE("Skipped fetches of a later, warm epoch are given no device reads from the first epoch's cold ones") {
  // Batches 0-99 (a cold first epoch) read 1 MiB a fetch, all measured;
  // batches 100-399 read nothing, and the budget measured every other one.
  // The job read 100 MiB. The run's mean per sampled fetch (100 MiB / 250)
  // would give the 150 skipped ones 60 MiB more; strata of 16 sampled fetches
  // leak at most the one stratum that holds the change (11 skipped fetches
  // given 4/16 MiB each here).
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 400;
  spec.wait = 10 * kMs;
  spec.compute = 5 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (uint64_t i = 0; i < spec.iterations; ++i) {
    const uint64_t start = spec.start + i * 15 * kMs;
    const bool measured = i < 100 || i % 2 == 0;
    b.Span(w, names::kFetch, start, 10 * kMs, 1, i, measured ? 2 * static_cast<int64_t>(kMs) : -1, 0);
    if (!measured) continue;
    const uint64_t bytes = i < 100 ? 1 << 20 : 0;
    b.Span(w, names::kReadStorage, start, 10 * kMs + 1000, 1, bytes);
    b.Span(w, names::kReadCalls, start, 10 * kMs + 1000, 1, bytes);
  }
  ShareConfig(b, 201, 0.005);
  auto result = Analyze(b.trace, AnalysisOptions{});
  REQUIRE(result.ok());
  const AccountLine& storage = result->loaders.at(0).account_all.Line(Cause::kStorage);
  INFO(storage.evidence);
  REQUIRE(storage.evidence.find(" MiB read from the device by ") != std::string::npos);
  const double mib = std::stod(storage.evidence);
  CHECK(mib >= 100);
  CHECK(mib <= 103);
}

TEST_CASE("A warm second epoch's skipped fetches take nothing from the first epoch's cold reads across its start") {
  // One persistent worker, 2 epochs of 48 fetches of 10 ms: the first cold
  // (1 MiB read from the device each, 2 ms on CPU), the second warm (nothing
  // read, 9 ms on CPU).
  // The budget measured batches 0, 1, 2, 4, 8, 16, 32 and every third: 23
  // sampled fetches an epoch, 46 in all, so strata of 16 run-wide put the
  // first epoch's last 7 cold samples and the second's 23 warm ones in one
  // stratum, and the second epoch's skipped fetches were given 7/30 MiB each
  // (6-10% of the first epoch's storage in the e2e case of
  // test_analyze_account). Cut at the epoch's start, they are given none.
  // Likewise where the second epoch goes on with the first's iterator (a
  // kept_epoch span at its start: YOLOv5's InfiniteDataLoader).
  const bool kept = GENERATE(false, true);
  INFO((kept ? "kept iterator" : "an iterator an epoch"));
  TraceBuilder b;
  LoopSpec spec;
  spec.epochs = 2;
  spec.iterations = 48;
  spec.wait = 10 * kMs;
  spec.compute = 5 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  if (kept) {  // the second epoch's iter() made no iterator: a zero-length kept_epoch span
    const uint32_t epoch_name = b.Str(names::kEpoch), kept_name = b.Str(names::kKeptEpoch);
    const uint32_t wait_name = b.Str(names::kWait);
    uint32_t seen = 0;
    for (uint32_t i = 0; i < b.trace.spans.size(); ++i) {
      if (b.trace.spans.name[i] == epoch_name && ++seen == 2) {
        b.trace.spans.name[i] = kept_name;
        b.trace.spans.kind[i] = SpanKind::kSpan;
        b.trace.spans.duration_ns[i] = 0;
      }
      // The kept iterator's batch indices go on from the first epoch's.
      if (b.trace.spans.name[i] == wait_name && seen == 2) b.trace.spans.arg[i] += spec.iterations;
    }
    REQUIRE(seen == 2);
  }
  for (uint64_t e = 0; e < 2; ++e)
    for (uint64_t i = 0; i < spec.iterations; ++i) {
      const uint64_t start = spec.start + (e * spec.iterations + i) * 15 * kMs;
      const bool measured = (i & (i - 1)) == 0 || i % 3 == 0;
      const int64_t cpu = (e == 0 ? 2 : 9) * static_cast<int64_t>(kMs);
      b.Span(w, names::kFetch, start, 10 * kMs, 1, kept ? e * spec.iterations + i : i, measured ? cpu : -1, 0);
      if (!measured) continue;
      const uint64_t bytes = e == 0 ? 1 << 20 : 0;
      b.Span(w, names::kReadStorage, start, 10 * kMs + 1000, 1, bytes);
      b.Span(w, names::kReadCalls, start, 10 * kMs + 1000, 1, bytes);
    }
  ShareConfig(b, 201, 0.005);
  auto result = Analyze(b.trace, AnalysisOptions{});
  REQUIRE(result.ok());
  const LoaderAnalysis& l = result->loaders.at(0);
  REQUIRE(l.epochs.size() == 2);
  CHECK(l.epochs[0].storage_s > 0);
  CHECK(l.epochs[1].storage_s == 0);
  const AccountLine& storage = l.account_all.Line(Cause::kStorage);
  INFO(storage.evidence);
  REQUIRE(storage.evidence.find(" MiB read from the device by ") != std::string::npos);
  CHECK(std::stod(storage.evidence) == Approx(48).margin(0.05));
}

TEST_CASE("A skipped fetch beside one sampled fetch that read the device is not a storage fetch") {
  // An in-memory loader: 160 fetches of 1.5 ms, 1.4 of it on CPU; the budget
  // measured one in ten, and one measured fetch faulted 8 KiB in. The skipped
  // fetches of its stratum are given the mean bytes, but read the device as
  // often as their sampled neighbours did: one in 16 of them, not all.
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 160;
  spec.wait = 1500 * kUs;
  spec.compute = 500 * kUs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (uint64_t i = 0; i < spec.iterations; ++i) {
    const uint64_t start = spec.start + i * 2 * kMs;
    const bool measured = i % 10 == 0;
    b.Span(w, names::kFetch, start, 1500 * kUs, 1, i, measured ? 1400 * static_cast<int64_t>(kUs) : -1, 0);
    if (!measured) continue;
    const uint64_t bytes = i == 40 ? 8192 : 0;
    b.Span(w, names::kReadStorage, start, 1500 * kUs + 1000, 1, bytes);
    b.Span(w, names::kReadCalls, start, 1500 * kUs + 1000, 1, 160);
  }
  ShareConfig(b, 201, 0.005);
  auto result = Analyze(b.trace, AnalysisOptions{});
  REQUIRE(result.ok());
  const LoaderAnalysis& l = result->loaders.at(0);
  const AccountLine& storage = l.account_all.Line(Cause::kStorage);
  INFO(storage.evidence);
  // 16 sampled fetches in one stratum: 1 read; its 144 skipped ones count 1/16 each (9), with the one: 10.
  CHECK_THAT(storage.evidence, Catch::Contains("read from the device by 10 of 160 fetches"));
  CHECK(storage.share < 0.01);
  CHECK(l.bottleneck == Cause::kPrep);
}

TEST_CASE("The 95% bound of the estimated CPU holds the true CPU in about 95% of samplings") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> wall_ms(0.1, 0.5);
  std::normal_distribution<double> noise(0, 0.03);
  int held = 0;
  const int trials = 200;
  for (int trial = 0; trial < trials; ++trial) {
    TraceBuilder b;
    const uint32_t t = b.Thread(1, 1);
    double skipped_cpu = 0;
    for (int i = 0; i < 2000; ++i) {
      const double wall = wall_ms(rng);
      const double cpu = std::clamp(0.6 * wall + noise(rng), 0.0, wall);
      const bool measured = i % 10 == 0;  // one in ten, as a fast loader's budget gives
      b.Span(t, "f", i * kMs, static_cast<uint64_t>(wall * kMs), 0, 0, measured ? static_cast<int64_t>(cpu * kMs) : -1);
      if (!measured) skipped_cpu += cpu * 1e-3;
    }
    const SampledSums sums = CounterEstimator(b.trace.spans, AllSpans(b.trace), true).Sums();
    REQUIRE(sums.estimated == 1800);
    REQUIRE(sums.cpu_error_s > 0);
    held += std::abs(sums.cpu_estimated_s - skipped_cpu) <= sums.cpu_error_s;
  }
  CHECK(held >= trials * 88 / 100);
  CHECK(held <= trials * 99 / 100);  // a bound that always holds is too wide to be the 95% one
}

TEST_CASE("The trace's counter share is 1 without the config, else the smallest any process recorded") {
  TraceBuilder b;
  CHECK(CounterShare(b.trace) == 1);
  ShareConfig(b, 1, 0.01);
  ShareConfig(b, 2, 0.005);
  CHECK(CounterShare(b.trace) == 0.005);
}

TEST_CASE("A loader whose fetch spans were sampled has its worker CPU estimated and its account says so") {
  // One worker, 40 batches of 10 ms, 7 ms on CPU; the budget measured one in four.
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 40;
  spec.wait = 10 * kMs;
  spec.compute = 5 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (uint64_t i = 0; i < spec.iterations; ++i)
    b.Span(w, names::kFetch, spec.start + i * 15 * kMs, 10 * kMs, 1, i, i % 4 == 0 ? 7 * static_cast<int64_t>(kMs) : -1);
  ShareConfig(b, 201, 0.005);
  auto result = Analyze(b.trace, AnalysisOptions{});
  REQUIRE(result.ok());
  const LoaderAnalysis& l = result->loaders.at(0);
  REQUIRE(l.workers.size() == 1);
  CHECK(l.workers[0].cpu_s == Approx(40 * 0.007));
  CHECK(l.counters.fetches.measured == 10);
  CHECK(l.counters.fetches.estimated == 30);
  const AccountLine& prep = l.account_steady.Line(Cause::kPrep);
  CHECK(prep.estimated);
  CHECK(prep.evidence.find("10 of 40 fetch spans") != std::string::npos);
  CHECK(prep.share == Approx(l.account_steady.Line(Cause::kPrep).share));
  CHECK_FALSE(l.account_steady.Line(Cause::kCompute).estimated);

  // Without the config the same spans are unmeasured: the CPU is not made up.
  b.trace.configs.pop_back();
  auto old = Analyze(b.trace, AnalysisOptions{});
  REQUIRE(old.ok());
  CHECK(old->loaders.at(0).workers[0].cpu_s == Approx(10 * 0.007));
  CHECK_FALSE(old->loaders.at(0).account_steady.Line(Cause::kPrep).estimated);
}
