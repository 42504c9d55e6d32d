#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "analysis/analysis.h"
#include "analysis/internal.h"
#include "analysis/profile.h"
#include "test_analysis_trace_builder.h"

using namespace stallprof;
using namespace stallprof::analysis;
using namespace stallprof::testing;

namespace {
const LoaderAnalysis& OnlyLoader(const Result<TraceAnalysis>& result) {
  REQUIRE(result.ok());
  REQUIRE(result->loaders.size() == 1);
  return result->loaders.front();
}
}  // namespace

namespace {
// The q-quantile of `sorted` by hand: interpolating between the order
// statistics either side of q * (n - 1).
double InterpolatedQuantile(const std::vector<double>& sorted, double q) {
  const size_t n = sorted.size();
  const double pos = q * static_cast<double>(n - 1);
  const size_t lo = static_cast<size_t>(pos);
  return sorted[lo] + (sorted[std::min(lo + 1, n - 1)] - sorted[lo]) * (pos - static_cast<double>(lo));
}
}  // namespace

TEST_CASE("Percentiles interpolate between order statistics") {
  std::vector<double> values;
  for (int i = 100; i >= 1; --i) values.push_back(i);
  Summary s = Summarize(values);
  CHECK(s.count == 100);
  CHECK(s.mean == Approx(50.5));
  CHECK(s.p50 == Approx(50.5));
  CHECK(s.p90 == Approx(90.1));
  CHECK(s.p99 == Approx(99.01));
  CHECK(s.min == 1);
  CHECK(s.max == 100);
  CHECK(Summarize({}).count == 0);
}

TEST_CASE("Percentiles of many values, selected, are those of std::sort's order") {
  // Summarize selects the order statistics; the expected figures come
  // from std::sort of a copy and interpolating by hand.
  std::mt19937_64 rng(7);
  for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{10}, size_t{101}, size_t{1025}, size_t{100003}}) {
    std::vector<double> values(n);
    for (double& v : values) v = static_cast<double>(rng() % 977) * 1e-3;  // many ties
    values[n / 3] = 42.0;                                                  // one outlier
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    auto at = [&](double q) { return InterpolatedQuantile(sorted, q); };
    const Summary s = Summarize(values);
    INFO("n = " << n);
    CHECK(s.count == n);
    CHECK(s.p50 == at(0.50));
    CHECK(s.p90 == at(0.90));
    CHECK(s.p99 == at(0.99));
    CHECK(s.min == sorted.front());
    CHECK(s.max == 42.0);
    CHECK(s.mean == Approx(std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n)));
  }
}

TEST_CASE("Percentiles of many equal, negative or widely spread values are those of std::sort's order") {
  std::mt19937_64 rng(11);
  std::vector<std::vector<double>> cases;
  cases.push_back(std::vector<double>(50000, 0.25));  // one key: a range of none
  std::vector<double> spread(60001);
  for (double& v : spread) v = std::ldexp(static_cast<double>(rng() % 1000) - 500.0, static_cast<int>(rng() % 60) - 40);
  cases.push_back(spread);  // signs and exponents mixed, -0 and +0 among them
  std::vector<double> bimodal(70000);
  for (size_t i = 0; i < bimodal.size(); ++i) bimodal[i] = (i % 3 == 0 ? 5.08e-3 : 0.52e-3) + static_cast<double>(rng() % 4) * 1e-9;
  cases.push_back(bimodal);  // most values in a few buckets
  for (std::vector<double>& values : cases) {
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = values.size();
    auto at = [&](double q) { return InterpolatedQuantile(sorted, q); };
    const Summary s = Summarize(values);
    INFO("n = " << n);
    CHECK(s.p50 == at(0.50));
    CHECK(s.p90 == at(0.90));
    CHECK(s.p99 == at(0.99));
    CHECK(s.min == sorted.front());
    CHECK(s.max == sorted.back());
  }
}

TEST_CASE("Verdict thresholds follow the TF input-pipeline analyzer") {
  CHECK(Classify(0.20) == Verdict::kHighlyInputBound);
  CHECK(Classify(0.1999) == Verdict::kModeratelyInputBound);
  CHECK(Classify(0.05) == Verdict::kModeratelyInputBound);
  CHECK(Classify(0.0499) == Verdict::kNotInputBound);
}

TEST_CASE("Stall fraction is sum of waits over sum of steps, steady state excludes warm-up") {
  TraceBuilder b;
  b.Process(100, 1);
  uint32_t main = b.Thread(100, 100);
  b.Config(100, 1, "name", "train");
  b.Config(100, 1, "batch_size", 8);
  LoopSpec spec;
  spec.thread = main;
  spec.iterations = 25;
  spec.warmup_wait_iters = 5;
  spec.warmup_wait = 100 * kMs;
  AddLoop(b, spec);
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  CHECK(loader.config.name == "train");
  REQUIRE(loader.iterations.size() == 25);
  // Steady: 20 steps of 30 ms compute + 10 ms wait.
  CHECK(loader.step_steady.count == 20);
  CHECK(loader.step_steady.mean == Approx(0.040));
  CHECK(loader.wait_steady.p99 == Approx(0.010));
  CHECK(loader.compute_steady.mean == Approx(0.030));
  CHECK(loader.stall_fraction == Approx(0.25));
  CHECK(loader.verdict == Verdict::kHighlyInputBound);
  // With warm-up: steps 0-4 wait 100 ms; every step, the last one of the epoch
  // included, computes 30 ms on the batch it got.
  double waits = 5 * 0.100 + 20 * 0.010;
  double steps = 5 * 0.130 + 20 * 0.040;
  CHECK(loader.stall_fraction_all == Approx(waits / steps));
  CHECK(loader.iterations[0].step_s == Approx(0.130));
  CHECK(loader.iterations[0].compute_s == Approx(0.030));
  CHECK(loader.iterations.back().compute_s == Approx(0.030));
}

TEST_CASE("A loader whose epochs are shorter than the warm-up falls back to all iterations") {
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 3;
  spec.epochs = 2;
  AddMainProcessLoader(b, spec);
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  CHECK(loader.steady_fallback);
  CHECK(loader.step_steady.count == 6);
}

namespace {
// Appends `epochs` epochs of `iterations` next() calls of loader 1 on
// `thread`, the i-th of each epoch waiting wait_of(i), each followed by
// compute_of(i) of compute; epochs 50 ms apart.
template <typename WaitOf, typename ComputeOf>
void AddEpochsOfSteps(TraceBuilder& b, uint32_t thread, uint32_t epochs, uint32_t iterations, WaitOf wait_of,
                      ComputeOf compute_of) {
  uint64_t t = 1000 * kMs;
  for (uint32_t e = 0; e < epochs; ++e) {
    b.Instant(thread, names::kEpoch, t, 1, e);
    for (uint32_t i = 0; i < iterations; ++i) {
      const uint64_t wait = wait_of(i);
      b.Span(thread, names::kWait, t, wait, 1, i);
      t += wait + compute_of(i);
    }
    b.Instant(thread, names::kEpochEnd, t, 1, iterations);
    t += 50 * kMs;
  }
}

// 4 epochs of `batches` next() calls of loader 1 (batch 256, `dataset_len`
// samples, no workers), each waiting 10 ms; the full batches compute 60 ms,
// the epoch's last (partial) one 18 ms.
TraceBuilder PartialBatchEpochs(uint64_t dataset_len, uint32_t batches) {
  TraceBuilder b;
  b.Process(100, 1);
  const uint32_t main = b.Thread(100, 100);
  b.Config(100, 1, "batch_size", 256);
  b.Config(100, 1, "dataset_len", dataset_len);
  AddEpochsOfSteps(b, main, 4, batches, [](uint32_t) { return 10 * kMs; },
                   [=](uint32_t i) { return i + 1 == batches ? 18 * kMs : 60 * kMs; });
  return b;
}

// The same, every step computing 5 ms.
template <typename WaitOf>
void AddEpochsOfWaits(TraceBuilder& b, uint32_t thread, uint32_t epochs, uint32_t iterations, WaitOf wait_of) {
  AddEpochsOfSteps(b, thread, epochs, iterations, wait_of, [](uint32_t) { return 5 * kMs; });
}
}  // namespace

TEST_CASE("A loader whose only batches past the warm-up are partial last batches falls back to all iterations") {
  // 1354 samples, batch 256: 5 full batches and one of 74 an epoch, so the
  // warm-up of 5 leaves each epoch's partial batch alone. Full batches
  // compute 60 ms, the partial one 18 ms: taken as the steady state, a
  // batch's compute would be 18 ms against 226 samples a batch.
  const TraceBuilder b = PartialBatchEpochs(1354, 6);
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  CHECK(loader.steady_fallback);
  CHECK(loader.compute_steady.count == 24);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK_FALSE(profiles->front().steady_state_measured);
  CHECK(profiles->front().compute_s_per_batch == Approx((5 * 0.060 + 0.018) / 6));
  CHECK(profiles->front().SamplesPerBatch() == Approx(1354.0 / 6));
}

TEST_CASE("The model's compute per batch weighs a partial last batch as often as it came in the run") {
  // 1610 samples, batch 256: 6 full batches and one of 74 an epoch; the
  // steady iterations (5, 6) are a full batch (60 ms of compute) and the
  // partial one (18 ms), which is 1 of 7 batches in the run, not 1 of 2.
  const TraceBuilder b = PartialBatchEpochs(1610, 7);
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  REQUIRE_FALSE(loader.steady_fallback);
  CHECK(loader.compute_steady.mean == Approx(0.039));
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().compute_s_per_batch == Approx(6.0 / 7 * 0.060 + 1.0 / 7 * 0.018));
  CHECK(profiles->front().SamplesPerBatch() == Approx(1610.0 / 7));
}

TEST_CASE("Steady samples per second count a partial last batch as the samples it held, as often as it came") {
  // 130 samples, batch 16: 8 full batches and one of 2 an epoch, no workers.
  // A full batch's step is 21 ms (16 ms wait, 5 ms compute), the partial
  // one's 7 ms. The steady iterations (5..8) are each epoch's tail, where the
  // partial batch is 1 of 4 against 1 of 9 in the run: the steady rate is
  // 130 samples per 8 x 21 + 7 ms, not 16 per mean step (914) nor the
  // tail's own 50 per 70 ms (714).
  TraceBuilder b;
  b.Process(100, 1);
  const uint32_t main = b.Thread(100, 100);
  b.Config(100, 1, "batch_size", 16);
  b.Config(100, 1, "dataset_len", 130);
  AddEpochsOfWaits(b, main, 4, 9, [](uint32_t i) { return i == 8 ? 2 * kMs : 16 * kMs; });
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  REQUIRE(loader.step_steady.count == 16);
  CHECK(loader.steady_samples_per_s == Approx(130 / (8 * 0.021 + 0.007)));
  CHECK(loader.samples == 4 * 130);
  // whatif's and recommend's measured baseline is the same figure, and the
  // model's rates count the samples a batch carried on average.
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().measured_samples_per_s == Approx(loader.steady_samples_per_s));
  CHECK(profiles->front().SamplesPerBatch() == Approx(130.0 / 9));
}

TEST_CASE("The last batches of an epoch, in flight when the sampler ran out, are not the steady state") {
  // One worker, prefetch 2: each epoch's last 2 batches come out as the
  // worker drains (1 ms waits) where the rest waited 15 ms: the steady state
  // is the 20 ms steps between the warm-up and them.
  TraceBuilder b;
  b.Process(100, 1);
  b.Process(201, 100);
  const uint32_t main = b.Thread(100, 100);
  b.Config(100, 1, "batch_size", 4);
  b.Config(100, 1, "num_workers", 1);
  AddEpochsOfWaits(b, main, 2, 12, [](uint32_t i) { return i >= 10 ? kMs : 15 * kMs; });
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  CHECK(loader.drain_iterations == 2);
  CHECK(loader.step_steady.count == 2 * (12 - 5 - 2));
  CHECK(loader.step_steady.mean == Approx(0.020));
  CHECK(loader.steady_samples_per_s == Approx(4 / 0.020));
}

TEST_CASE("Epochs report samples per second and exclude the time between epochs") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "batch_size", 10);
  b.Config(100, 1, "dataset_len", 195);  // 20 batches, the last one of 5 samples
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.epochs = 3;
  spec.iterations = 20;
  spec.gap_between_epochs = 5000 * kMs;
  AddLoop(b, spec);
  b.trace.system.t_ns = {0, 1000 * kMs, 100000 * kMs};
  b.trace.system.page_cache_bytes = {100, 100, 100 + 99000};
  b.trace.system.disk_read_bytes = {0, 0, 990000};
  b.trace.system.cpu_busy_ns = {0, 0, 0};
  b.trace.system.cpu_total_ns = {0, 1, 2};
  b.trace.system.mem_available_bytes = {1, 1, 1};
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  REQUIRE(loader.epochs.size() == 3);
  // From the epoch start to the next() that raised StopIteration, after the last step.
  double epoch_s = 20 * (0.010 + 0.030);
  for (const auto& e : loader.epochs) {
    CHECK(e.iterations == 20);
    CHECK(e.samples == 195);
    CHECK(e.seconds == Approx(epoch_s));
    CHECK(e.samples_per_s == Approx(195 / epoch_s));
  }
  CHECK(loader.samples == 3 * 195);
  CHECK(loader.active_s == Approx(3 * epoch_s));
  // Series grow linearly 1 unit per ms after t = 1000 ms for disk reads (x10) and the page cache.
  CHECK(loader.epochs[0].disk_read_bytes == Approx(epoch_s * 1000 * 10));
  CHECK(loader.epochs[1].page_cache_growth_bytes == Approx(epoch_s * 1000));
  CHECK(loader.epochs[1].index == 1);
}

namespace {
// A loop of 20 batches an epoch, 10 ms waits: one epoch of `first_compute`
// steps, then two of 10 ms ones; the device read `first_read` bytes over the
// first epoch and `later_read` over the other two (no system samples when
// both are negative).
LoaderAnalysis FirstAndLaterEpochs(uint64_t first_compute, double first_read, double later_read) {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "batch_size", 10);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.compute = first_compute;
  const uint64_t second = AddLoop(b, spec);
  spec.start = second;
  spec.epochs = 2;
  spec.first_epoch = 1;
  spec.compute = 10 * kMs;
  const uint64_t end = AddLoop(b, spec);
  if (first_read >= 0) {
    b.trace.system.t_ns = {0, 1000 * kMs, second, end + kMs};
    b.trace.system.page_cache_bytes = {0, 0, 0, 0};
    b.trace.system.disk_read_bytes = {0, 0, static_cast<uint64_t>(first_read),
                                      static_cast<uint64_t>(first_read + later_read)};
    b.trace.system.cpu_busy_ns = {0, 0, 0, 0};
    b.trace.system.cpu_total_ns = {0, 1, 2, 3};
    b.trace.system.mem_available_bytes = {1, 1, 1, 1};
  }
  return OnlyLoader(Analyze(b.trace, {}));
}
}  // namespace

TEST_CASE("A last epoch left after a few batches is not compared with the first") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "batch_size", 10);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.compute = 10 * kMs;
  uint64_t t = AddLoop(b, spec);  // 20 batches
  // The run ends 2 batches into the next epoch, whose steps take 30 ms.
  const auto left_after = [&](uint32_t batches) {
    TraceBuilder run = b;
    uint64_t at = t;
    run.Instant(spec.thread, names::kEpoch, at, spec.scope, 1);
    for (uint32_t i = 0; i < batches; ++i) {
      run.Span(spec.thread, names::kWait, at, 10 * kMs, spec.scope, i);
      at += 40 * kMs;
    }
    return OnlyLoader(Analyze(run.trace, {})).first_epoch;
  };
  CHECK_FALSE(left_after(2).available);
  // Half the first epoch's batches or more: compared.
  const auto half = left_after(10);
  REQUIRE(half.available);
  // The first: 200 samples in 20 x 20 ms, 500/s. The left one's last batch
  // is not stepped: 90 samples from its start to its last return, 9 x 40 +
  // 10 ms, 243.2/s.
  CHECK_THAT(half.why, Catch::StartsWith("later 2.06x slower"));
}

TEST_CASE("A first epoch slower than the later ones says whether its steps or its reads made the difference") {
  const LoaderAnalysis warming = FirstAndLaterEpochs(30 * kMs, -1, -1);
  REQUIRE(warming.first_epoch.available);
  CHECK(warming.epochs[0].compute_per_batch_s == Approx(0.030));
  CHECK(warming.epochs[1].compute_per_batch_s == Approx(0.010));
  CHECK(warming.epochs[1].wait_per_batch_s == Approx(0.010));
  CHECK(warming.first_epoch.later_samples_per_s / warming.first_epoch.first_samples_per_s == Approx(2.0).epsilon(0.01));
  CHECK_THAT(warming.first_epoch.why, Catch::StartsWith("later 2.00x faster: the steps took 30.00 ms a batch in the "
                                                        "first epoch, 10.00 ms later (the training step warming up"));
  CHECK_THAT(warming.first_epoch.why, !Catch::Contains("page cache"));
  // The same steps, the first epoch reading 64 MiB from the device and the later ones nothing.
  const LoaderAnalysis cold = FirstAndLaterEpochs(10 * kMs, 64 << 20, 0);
  CHECK(cold.first_epoch.why == "about the same");  // the steps and waits are the same: no faster
  const LoaderAnalysis cold_and_slow = FirstAndLaterEpochs(30 * kMs, 64 << 20, 0);
  // The reads cost the loop no time (no fetch waited on the device): the steps
  // made the difference, and the reads come after them, with their cost.
  CHECK_THAT(cold_and_slow.first_epoch.why,
             Catch::StartsWith("later 2.00x faster: the steps took 30.00 ms a batch in the first epoch, 10.00 ms later"));
  CHECK_THAT(cold_and_slow.first_epoch.why,
             Catch::EndsWith("; the first epoch read 64.0 MiB from the device, the later ones 0 B each (the page cache "
                             "warmed), which cost little: storage 0 ns in the first epoch, 0 ns a later one"));
  // Reads of under 1 MiB say nothing about the page cache.
  CHECK_THAT(FirstAndLaterEpochs(30 * kMs, 512 << 10, 0).first_epoch.why, !Catch::Contains("from the device"));
}

namespace {
// A loop of `batches` 100 ms steps (no wait) whose batch i worker process
// 201 + worker_of(i) fetches, on CPU throughout, in produce_ms[that worker]
// starting at the step's start, one getitem span in each fetch; `num_workers`
// as configured.
Result<TraceAnalysis> WorkersTaking(const std::vector<uint64_t>& produce_ms, uint64_t batches, int64_t num_workers,
                            const std::function<size_t(uint64_t)>& worker_of) {
  TraceBuilder b;
  b.Config(100, 1, "num_workers", num_workers);
  LoopSpec spec;
  spec.iterations = static_cast<uint32_t>(batches);
  spec.wait = 0;
  spec.compute = 100 * kMs;
  AddMainProcessLoader(b, spec);
  std::vector<uint32_t> threads;
  for (uint32_t k = 0; k < produce_ms.size(); ++k) {
    b.Process(201 + k, 100);
    threads.push_back(b.Thread(201 + k, 201 + k));
  }
  for (uint64_t i = 0; i < batches; ++i) {
    const size_t k = worker_of(i);
    b.Span(threads[k], names::kFetch, spec.start + i * 100 * kMs, produce_ms[k] * kMs, 1, i, produce_ms[k] * kMs, 0);
    b.Span(threads[k], names::kGetitem, spec.start + i * 100 * kMs, produce_ms[k] * kMs, 1, i);
  }
  return Analyze(b.trace, {});
}

// The stragglers' pids of WorkersTaking's loader.
std::vector<uint32_t> Stragglers(const std::vector<uint64_t>& produce_ms, uint64_t batches, int64_t num_workers,
                                 const std::function<size_t(uint64_t)>& worker_of) {
  const auto result = WorkersTaking(produce_ms, batches, num_workers, worker_of);
  std::vector<uint32_t> out;
  for (const auto& w : OnlyLoader(result).workers)
    if (w.straggler) out.push_back(w.pid);
  return out;
}
}  // namespace

TEST_CASE("Of two workers one 1.7x slower than the other is a straggler, of three one slower than 1.5x the others' median") {
  // The workers take batches in turn.
  const auto stragglers = [](std::vector<uint64_t> produce_ms, uint64_t batches = 12) {
    const size_t n = produce_ms.size();
    return Stragglers(produce_ms, batches, static_cast<int64_t>(n), [n](uint64_t i) { return i % n; });
  };
  // A skewed shard: 41 against 24 ms (the median of both, 32.5 ms, would hide it).
  CHECK(stragglers({24, 41}) == std::vector<uint32_t>{202});
  CHECK(stragglers({24, 30}).empty());
  // Three: 41 > 1.5 x 24; 30 is not over 1.5 x the others' median (32.5).
  CHECK(stragglers({24, 24, 41}) == std::vector<uint32_t>{203});
  CHECK(stragglers({24, 30, 35}).empty());
  // One batch each (short epochs, non-persistent workers): noise, not a slow worker.
  CHECK(stragglers({24, 41}, 2).empty());
  CHECK(stragglers({24, 41}, 8) == std::vector<uint32_t>{202});
}

TEST_CASE("A worker is a straggler against the workers that fetched beside it, not those of another epoch") {
  // Non-persistent workers: two in the first half of the run (pids 201, 202),
  // two others in the second (203, 204), 8 batches each; the first pair 3x
  // slower than the second (an epoch that shared the cores with more).
  const auto stragglers = [](std::vector<uint64_t> produce_ms) {
    return Stragglers(produce_ms, 32, 2, [](uint64_t i) { return (i < 16 ? 0 : 2) + i % 2; });
  };
  CHECK(stragglers({60, 60, 20, 20}).empty());
  // Within its own half a worker 2x slower than its peer still is one.
  CHECK(stragglers({60, 30, 20, 20}) == std::vector<uint32_t>{201});
}

TEST_CASE("Workers of different epochs are not unbalanced against each other, and a stage's parallelism counts threads at once") {
  // Non-persistent workers: 201 and 202 take batches 0-27 in turn (14 each),
  // then 203 and 204 take batches 28-31 in 150 ms each (so that they fetch at
  // the same time); the run ends there (a loop left early).
  const auto in_pairs = [](uint64_t second_pair_first) {
    return [second_pair_first](uint64_t i) -> size_t { return i < 28 ? i % 2 : 2 + (i >= second_pair_first); };
  };
  const auto even = WorkersTaking({20, 20, 150, 150}, 32, 2, in_pairs(30));  // 203: 28, 29; 204: 30, 31
  const auto& loader = OnlyLoader(even);
  REQUIRE(loader.workers.size() == 4);
  CHECK(loader.worker_imbalance == Approx(0.0));  // 14 against 2 across the epochs
  REQUIRE(loader.stages.size() == 1);
  CHECK(loader.stages[0].parallelism == 2);  // 4 threads, 2 at a time
  CHECK(loader.stages[0].parallel_rate == Approx(2 * loader.stages[0].per_core_rate));
  // Within the second pair 3 against 1 batch is an imbalance of 200%.
  CHECK(OnlyLoader(WorkersTaking({20, 20, 150, 150}, 32, 2, in_pairs(31))).worker_imbalance == Approx(2.0));
}

TEST_CASE("Workers get busy, CPU, I/O and run-queue shares and the slow one is a straggler") {
  TraceBuilder b;
  AddTwoWorkerProcesses(b);
  b.Config(100, 1, "batch_size", 4);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 10;
  spec.wait = 0;
  spec.compute = 100 * kMs;  // epoch: 0 .. 1000 ms after start (the last batch's step included)
  AddLoop(b, spec);
  uint32_t w1 = b.Thread(201, 201), w2 = b.Thread(202, 202);
  for (int i = 0; i < 5; ++i) {
    // Fast worker: 20 ms per batch = 10 ms CPU + 2 ms delay + 8 ms I/O.
    b.Span(w1, names::kFetch, spec.start + i * 100 * kMs, 20 * kMs, 1, 2 * i, 10 * kMs, 2 * kMs);
    // Slow worker: 80 ms per batch, all CPU.
    b.Span(w2, names::kFetch, spec.start + i * 100 * kMs, 80 * kMs, 1, 2 * i + 1, 80 * kMs, 0);
  }
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  REQUIRE(loader.workers.size() == 2);
  const auto& fast = loader.workers[0].pid == 201 ? loader.workers[0] : loader.workers[1];
  const auto& slow = loader.workers[0].pid == 202 ? loader.workers[0] : loader.workers[1];
  CHECK(fast.batches == 5);
  CHECK(fast.window_s == Approx(1.0));
  CHECK(fast.busy_fraction == Approx(0.1 / 1.0));
  CHECK(fast.cpu_fraction == Approx(0.05 / 1.0));
  CHECK(fast.delay_fraction == Approx(0.01 / 1.0));
  CHECK(fast.io_fraction == Approx(0.04 / 1.0));
  CHECK_FALSE(fast.straggler);
  CHECK(slow.straggler);  // 80 ms > 1.5 x the other worker's 20 ms
  CHECK(loader.worker_imbalance == Approx(0.0));
  CHECK(loader.produce.count == 10);
}

TEST_CASE("Prefetch occupancy counts batches produced but not yet consumed at each next()") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Process(201, 100);
  b.Config(100, 1, "num_workers", 1);
  b.Config(100, 1, "prefetch_factor", 2);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 6;
  spec.wait = 0;
  spec.compute = 100 * kMs;
  AddLoop(b, spec);
  uint32_t w = b.Thread(201, 201);
  // The worker produces all 6 batches in the first 60 ms: every next() finds the rest ready.
  for (int i = 0; i < 6; ++i) b.Span(w, names::kFetch, spec.start + i * 10 * kMs, 10 * kMs, 1, i, 10 * kMs, 0);
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  // next() i is called at start + 100 i ms: batches ended by then: i=0 -> 0, i>=1 -> 6.
  CHECK(loader.iterations[0].ready_batches == 0);
  CHECK(loader.iterations[1].ready_batches == 5);
  CHECK(loader.iterations[5].ready_batches == 1);
  CHECK(loader.prefetch.max_ready == 5);
  CHECK(loader.prefetch.capacity == 2);
  CHECK(loader.prefetch.ever_full);
  CHECK(loader.prefetch.starved_fraction == Approx(1.0 / 6));
}

TEST_CASE("A batch a later fetch of its worker held back until it ended counts as held, one found sent as free") {
  // 1 worker making a batch in 5 ms with 0.5 ms between fetches; the main
  // loop calls next() for batch i 3 ms after its fetch ended, while the
  // worker is 2.5 ms into the next fetch, and spends 0.3 ms of CPU in it.
  // Held: next() returns as that fetch ends (5.5 ms after), plus the 0.3 ms.
  // Sent: it returns after the 0.3 ms alone.
  // Ahead: the call comes 8 ms after, while the worker runs the fetch after
  // the next (a deeper prefetch), and returns as that one ends.
  for (int mode : {0, 1, 2}) {
    const bool held = mode != 1, ahead = mode == 2;
    INFO((ahead ? "held, two fetches ahead" : held ? "held" : "sent"));
    TraceBuilder b;
    const auto [main, w] = OneWorkerPrefetch2(b);
    constexpr uint64_t kUs = 1000;
    const uint64_t start = 1000 * kMs, period = 5500 * kUs;
    b.Instant(main, names::kEpoch, start, 1, 0);
    const int n = 20;
    for (int i = 0; i < n; ++i) b.Span(w, names::kFetch, start + i * period, 5 * kMs, 1, i, 5 * kMs, 0);
    for (int i = 0; i < n - 1; ++i) {
      const uint64_t end = start + i * period + 5 * kMs, call = end + (ahead ? 8 : 3) * kMs;
      const uint64_t back = held ? end + (ahead ? 2 : 1) * period + 300 * kUs : call + 300 * kUs;
      b.Span(main, names::kWait, call, back - call, 1, i, 300 * kUs, 0);
    }
    const auto result = Analyze(b.trace, {});
    const auto& loader = OnlyLoader(result);
    // Every call but the first (its epoch's) tells, while a fetch runs 2.5 ms
    // on; two ahead, the last batch's call has no fetch after the next.
    const uint64_t telling = ahead ? n - 3 : n - 2;
    CHECK(loader.prefetch.sends_held == (held ? telling : 0u));
    CHECK(loader.prefetch.sends_free == (held ? 0u : telling));
    // The handoff line says where the batch waited: in its worker, not in the main process.
    CHECK(loader.prefetch.SendsHeld() == held);
    const std::string& evidence = loader.account_all.Line(Cause::kHandoff).evidence;
    CHECK((evidence.find("held in its worker") != std::string::npos) == held);
    CHECK((evidence.find("the main process receiving it") != std::string::npos) == !held);
    // Each steady call's receive from when the batch could go (held: the
    // later fetch's end; sent: the call) is 0.3 ms; the profile's handoff
    // takes them only where the fetch holds the GIL (the worker was busy at
    // each call, so no batch was ready in the usual sense).
    size_t steady = 0, told = 0;
    for (const auto& it : loader.iterations) {
      steady += it.steady;
      told += it.steady && it.batch_index >= 1 && it.batch_index <= telling;
    }
    REQUIRE(told >= 10);
    CHECK(loader.prefetch.held_handoff_s == Approx(told * 300e-6).epsilon(1e-6));
    const auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    CHECK(profiles->front().handoff_s_per_batch == Approx(held ? told * 300e-6 / steady : 0).margin(1e-9));
  }
}

TEST_CASE("Stages get Plumber rates and the lowest parallel rate is the bottleneck") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Process(201, 100);
  b.Process(202, 100);
  b.Config(100, 1, "batch_size", 2);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 4;
  AddLoop(b, spec);
  uint32_t w1 = b.Thread(201, 201), w2 = b.Thread(202, 202);
  uint64_t t = spec.start;
  for (uint32_t w : {w1, w2}) {
    for (int batch = 0; batch < 2; ++batch) {
      uint64_t s0 = t + batch * 100 * kMs;
      // fetch: 100 ms wall, 50 ms CPU (CPU/wall = 0.5, used to attribute getitem CPU)
      b.Span(w, names::kFetch, s0, 100 * kMs, 1, batch, 50 * kMs, 0);
      b.Span(w, names::kGetitem, s0, 40 * kMs, 1, 0);
      b.Span(w, names::kGetitem, s0 + 40 * kMs, 40 * kMs, 1, 1);
      b.Span(w, names::kCollate, s0 + 80 * kMs, 20 * kMs, 1, batch, 20 * kMs, 0);
    }
  }
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  REQUIRE(loader.stages.size() == 2);
  const auto& collate = loader.stages[0].name == names::kCollate ? loader.stages[0] : loader.stages[1];
  const auto& getitem = loader.stages[0].name == names::kGetitem ? loader.stages[0] : loader.stages[1];
  // 4 batches x 2 samples = 8 samples.
  CHECK(getitem.count == 8);
  CHECK(getitem.wall_s == Approx(0.32));
  CHECK(getitem.cpu_source == CpuSource::kAttributed);
  CHECK(getitem.cpu_s == Approx(0.16));
  CHECK(getitem.per_core_rate == Approx(8 / 0.16));
  CHECK(getitem.parallelism == 2);
  CHECK(getitem.parallel_rate == Approx(100.0));
  CHECK(collate.cpu_source == CpuSource::kMeasured);
  CHECK(collate.cpu_s == Approx(0.08));
  CHECK(collate.parallel_rate == Approx(200.0));
  CHECK(getitem.bottleneck);
  CHECK_FALSE(collate.bottleneck);
}

TEST_CASE("A trace without DataLoader iterations is an unsupported input, not a crash") {
  TraceBuilder b;
  b.Process(100, 1);
  uint32_t t = b.Thread(100, 100);
  b.Span(t, "work", 0, 10 * kMs);
  const auto result = Analyze(b.trace, {});
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().kind == ErrorKind::kUnsupported);
  CHECK_THAT(result.error().message, Catch::Contains("no DataLoader found in test.pb: it holds 1 span but no "
                                                     "'dataloader.wait' iterations"));
  CHECK_THAT(result.error().message, !Catch::Contains("exited"));
  // Nothing recorded at all (a script without a DataLoader): said plainly.
  TraceBuilder bare;
  bare.Process(100, 1);
  const auto none = Analyze(bare.trace, {});
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error().message, Catch::Contains("it holds no spans, so there are no steps to analyze"));
  // A Python program that ran to its end with the hook loaded and took no
  // batch (pytorch/examples' word_language_model slices its tensors): said
  // so, with how long it ran, not "no spans".
  bare.Thread(100, 100);
  bare.trace.header.start_monotonic_ns = 1'000'000'000;
  bare.trace.footer.emplace();
  bare.trace.footer->end_monotonic_ns = 58'330'000'000;
  const auto unfed = Analyze(bare.trace, {});
  REQUIRE_FALSE(unfed.ok());
  CHECK_THAT(unfed.error().message,
             Catch::Contains("ran 57.33 s and exited 0 with stallprof's hook loaded in 1 Python process, but never took "
                             "a batch from a torch.utils.data.DataLoader"));
  // A program that failed before its first batch: the error says so.
  b.trace.footer.emplace();
  b.trace.footer->exit_code = 1;
  CHECK_THAT(Analyze(b.trace, {}).error().message,
             Catch::Contains("before it took a batch, the profiled command exited with code 1 (see its output)"));
  // With the exception that ended it, as the hook recorded it.
  b.trace.configs.push_back({.pid = 100, .scope = 0, .key = "uncaught_error", .type = ConfigValue::Type::kStr,
                             .str = "FileNotFoundError: [Errno 2] No such file or directory: 'data/train'"});
  CHECK_THAT(Analyze(b.trace, {}).error().message,
             Catch::Contains("exited with code 1; pid 100 raised FileNotFoundError: [Errno 2] No such file or "
                             "directory: 'data/train' (see its output)"));
  b.trace.footer->term_signal = 9;
  CHECK_THAT(Analyze(b.trace, {}).error().message, Catch::Contains("killed by SIGKILL (signal 9)"));
  TraceBuilder empty;
  CHECK_FALSE(Analyze(empty.trace, {}).ok());
}

TEST_CASE("A failed job's ending names its signal and each uncaught exception with its loader and batch") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "name", "train");
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 8;
  AddLoop(b, spec);
  b.trace.footer.emplace();
  const auto ending = [&] {
    auto a = Analyze(b.trace, {});
    REQUIRE(a.ok());
    return DescribeEnding(a->quality);
  };
  CHECK(ending().empty());  // exited 0, nothing raised
  b.trace.footer->exit_code = 1;
  CHECK(ending() == "the profiled command exited with code 1");
  // Raised out of train's next() while it waited for batch 8 (the hook's
  // configs: the loader's scope, the batch index), and in a thread of
  // another process outside any loader.
  b.Config(100, 1, "uncaught_error", "RuntimeError: DataLoader worker (pid(s) 105) exited unexpectedly");
  b.Config(100, 1, "uncaught_error_batch", uint64_t{8});
  b.Config(90, 0, "uncaught_error", "OSError: [Errno 28] No space left on device");
  CHECK(ending() == "the profiled command exited with code 1; pid 90 raised OSError: [Errno 28] No space left on "
                    "device; pid 100 raised RuntimeError: DataLoader worker (pid(s) 105) exited unexpectedly, waiting "
                    "for batch 8 of loader train");
  // The signal by name, instead of 128 + N; a loader without a name or batch.
  b.trace.footer->term_signal = 11;
  b.trace.footer->exit_code = 139;
  b.trace.configs.erase(std::remove_if(b.trace.configs.begin(), b.trace.configs.end(),
                                       [](const auto& c) { return c.key == "name" || c.key == "uncaught_error_batch"; }),
                        b.trace.configs.end());
  CHECK_THAT(ending(), Catch::StartsWith("the profiled command was killed by SIGSEGV (signal 11); pid 90 raised"));
  CHECK_THAT(ending(), Catch::EndsWith("exited unexpectedly, in loader loader1"));
  // Many ranks that failed alike: the first three, then a count.
  for (uint32_t pid = 200; pid < 210; ++pid) b.Config(pid, 0, "uncaught_error", "KeyError: 'label'");
  CHECK_THAT(ending(), Catch::EndsWith("pid 200 raised KeyError: 'label'; 9 more uncaught exceptions"));
  // A thread's exception (the hook's "[thread NAME] " ahead of it): named by the thread.
  b.Config(300, 0, "uncaught_error", "[thread producer] ValueError: boom (at t.py:5 in produce)");
  auto threaded = Analyze(b.trace, {});
  REQUIRE(threaded.ok());
  REQUIRE(threaded->quality.uncaught_errors.back().pid == 300);
  CHECK(threaded->quality.uncaught_errors.back().thread == "producer");
  DataQuality alone;
  alone.uncaught_errors = {threaded->quality.uncaught_errors.back()};
  CHECK(DescribeEnding(alone) == "pid 300 (thread producer) raised ValueError: boom (at t.py:5 in produce)");
  // A rank's process is named by its rank too (here torch.distributed's, as the hook recorded it).
  b.Config(100, 1, "rank", uint64_t{3});
  CHECK_THAT(ending(), Catch::Contains("; pid 100 (rank 3) raised RuntimeError: DataLoader worker"));
}

TEST_CASE("Two loaders of one process are analyzed apart, each with its own workers") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Process(201, 100);
  b.Process(301, 100);
  b.Config(100, 1, "name", "train");
  b.Config(100, 2, "name", "val");
  uint32_t main = b.Thread(100, 100);
  LoopSpec train;
  train.thread = main;
  uint64_t end = AddLoop(b, train);
  LoopSpec val;
  val.thread = main;
  val.scope = 2;
  val.wait = 30 * kMs;
  val.compute = 10 * kMs;
  val.start = end;
  AddLoop(b, val);
  b.Span(b.Thread(201, 201), names::kFetch, train.start, 5 * kMs, 1, 0, 1 * kMs, 0);
  b.Span(b.Thread(301, 301), names::kFetch, val.start, 5 * kMs, 2, 0, 1 * kMs, 0);
  const auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  REQUIRE(result->loaders.size() == 2);
  CHECK(result->loaders[0].config.name == "train");
  CHECK(result->loaders[0].stall_fraction == Approx(0.25));
  CHECK(result->loaders[0].workers.size() == 1);
  CHECK(result->loaders[0].workers[0].pid == 201);
  CHECK(result->loaders[1].config.name == "val");
  CHECK(result->loaders[1].stall_fraction == Approx(0.75));
  CHECK(result->loaders[1].workers[0].pid == 301);
}

namespace {
// Two DataLoader objects of process 100 (scopes 1 and 2), one after the other
// (scope 2 starts `gap` after scope 1's last step, a negative gap overlaps
// them), each with a worker (201, 301) and 20 steps of 10 ms wait + 30 ms compute.
Result<TraceAnalysis> TwoObjects(const std::string& name1, const std::string& name2, uint64_t batch2, int64_t gap_ms) {
  TraceBuilder b;
  b.Process(100, 1);
  b.Process(201, 100);
  b.Process(301, 100);
  for (uint16_t scope : {1, 2}) b.Config(100, scope, "num_workers", 1);
  if (!name1.empty()) b.Config(100, 1, "name", name1);
  if (!name2.empty()) b.Config(100, 2, "name", name2);
  b.Config(100, 1, "batch_size", 8);
  b.Config(100, 2, "batch_size", batch2);
  const uint32_t main = b.Thread(100, 100);
  LoopSpec first;
  first.thread = main;
  const uint64_t end = AddLoop(b, first);
  LoopSpec second;
  second.thread = main;
  second.scope = 2;
  second.start = static_cast<uint64_t>(static_cast<int64_t>(end) + gap_ms * static_cast<int64_t>(kMs));
  AddLoop(b, second);
  b.Span(b.Thread(201, 201), names::kFetch, first.start, 5 * kMs, 1, 0, 1 * kMs, 0);
  b.Span(b.Thread(301, 301), names::kFetch, second.start, 5 * kMs, 2, 0, 1 * kMs, 0);
  return Analyze(b.trace, {});
}
}  // namespace

TEST_CASE("A DataLoader created anew under the same name after the last one is one loader with both epochs") {
  const auto merged = TwoObjects("train", "train", 8, 100);
  REQUIRE(merged.ok());
  REQUIRE(merged->loaders.size() == 1);
  const auto& l = merged->loaders.front();
  CHECK(l.scopes == std::vector<uint16_t>{1, 2});
  REQUIRE(l.epochs.size() == 2);
  CHECK(l.epochs[0].index == 0);
  CHECK(l.epochs[1].index == 1);
  CHECK(l.iterations.size() == 40);
  CHECK(l.workers.size() == 2);  // each object's worker
  CHECK(l.stall_fraction == Approx(0.25));
  // Apart: objects used at the same time, without a recorded name, or with
  // other settings.
  CHECK(TwoObjects("train", "train", 8, -500)->loaders.size() == 2);
  CHECK(TwoObjects("", "", 8, 100)->loaders.size() == 2);
  CHECK(TwoObjects("train", "val", 8, 100)->loaders.size() == 2);
  CHECK(TwoObjects("train", "train", 16, 100)->loaders.size() == 2);
}

TEST_CASE("Loaders of one process that keep one name after the merge are told apart by a suffix") {
  // Two DataLoaders built on one line and iterated together (zip): the hook
  // names both by that line.
  const auto together = TwoObjects("train.py:9", "train.py:9", 8, -500);
  REQUIRE(together.ok());
  REQUIRE(together->loaders.size() == 2);
  CHECK(together->loaders[0].config.name == "train.py:9");
  CHECK(together->loaders[1].config.name == "train.py:9#2");
  // One after the other they are one loader, under the plain name.
  const auto rebuilt = TwoObjects("train.py:9", "train.py:9", 8, 100);
  REQUIRE(rebuilt->loaders.size() == 1);
  CHECK(rebuilt->loaders[0].config.name == "train.py:9");
}

TEST_CASE("Data quality reports drops, truncation and the client kind") {
  TraceBuilder b;
  LoopSpec spec;
  AddMainProcessLoader(b, spec);
  b.trace.threads[0].dropped = 10;
  b.trace.truncated = true;
  const auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  CHECK(result->quality.dropped == 10);
  CHECK(result->quality.truncated);
  CHECK_FALSE(result->quality.footer_present);
  CHECK(result->quality.dropped_share == Approx(10.0 / (b.trace.spans.size() + 10)));
  REQUIRE(result->quality.clients.size() == 1);
  CHECK(result->quality.clients[0] == "python-cext");
  CHECK(result->quality.laneless_dropped == 0);
  CHECK_THAT(LostRecordsLine(result->quality),
             Catch::StartsWith("10 records lost (") &&
                 Catch::Contains("): 10 in full lanes (a larger `stallprof run --ring-size`); the figures cover"));
}

TEST_CASE("Records lost by threads that found every lane taken are the footer's beyond the threads' counts, named apart") {
  TraceBuilder b;
  LoopSpec spec;
  AddMainProcessLoader(b, spec);
  b.trace.threads[0].dropped = 10;
  b.trace.header.ring_lanes = 4;
  b.trace.footer.emplace();
  b.trace.footer->dropped = 25;  // 15 lane-less
  const auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  CHECK(result->quality.dropped == 25);
  CHECK(result->quality.laneless_dropped == 15);
  CHECK_THAT(LostRecordsLine(result->quality),
             Catch::StartsWith("25 records lost (") &&
                 Catch::Contains("): 15 from threads that found all 4 ring lanes taken (`stallprof run --lanes 256`), "
                                 "10 in full lanes"));
  // The suggestion doubles the lanes, at least 256, never past what `run --lanes` takes.
  for (const auto& [lanes, suggested] : {std::pair{200u, "--lanes 400`"}, std::pair{40000u, "--lanes 65536`"}}) {
    b.trace.header.ring_lanes = lanes;
    const auto more = Analyze(b.trace, {});
    REQUIRE(more.ok());
    CHECK_THAT(LostRecordsLine(more->quality), Catch::Contains(suggested));
  }
  b.trace.threads[0].dropped = 0;
  b.trace.footer->dropped = 0;
  const auto whole = Analyze(b.trace, {});
  REQUIRE(whole.ok());
  CHECK(LostRecordsLine(whole->quality).empty());
}

TEST_CASE("Data quality names the span clock and warns when the TSC drifted beyond its bound") {
  TraceBuilder b;
  LoopSpec spec;
  AddMainProcessLoader(b, spec);
  auto quality = [&] {
    const auto result = Analyze(b.trace, {});
    REQUIRE(result.ok());
    return result->quality;
  };
  CHECK(quality().clock == "CLOCK_MONOTONIC");  // an older trace, or STALLPROF_CLOCK=monotonic
  CHECK(quality().clock_source == "monotonic");
  CHECK(quality().clock_warning.empty());

  b.trace.header.clock_source = ClockSource::kTsc;
  b.trace.header.tsc_hz = 2.5e9;
  b.trace.footer = TraceFooter{};
  b.trace.footer->tsc_drift_ns = 400;                    // 0.4 us over 10 s: within 1 us/s
  b.trace.footer->tsc_drift_over_ns = 10'000'000'000ull;
  b.trace.footer->tsc_max_error_ns = 60;
  CHECK(quality().clock_source == "tsc");
  CHECK(quality().clock == "TSC 2.500 GHz converted to CLOCK_MONOTONIC, drift +400 ns over 10.0 s, worst error 60 ns");
  CHECK(quality().clock_warning.empty());

  b.trace.footer->tsc_drift_ns = -20'000;  // 2 us/s
  CHECK(quality().clock_warning.find("drifted from CLOCK_MONOTONIC by -2.0 us/s") != std::string::npos);

  b.trace.footer->tsc_drift_ns = 0;
  b.trace.footer->tsc_max_error_ns = 25'000;  // 25 us: spans could be misordered
  CHECK(quality().clock_warning.find("off by up to 25.0 us") != std::string::npos);
}

TEST_CASE("Two loaders fetching on the same main thread keep their own stages") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "name", "train");
  b.Config(100, 2, "name", "val");
  b.Config(100, 1, "batch_size", 2);
  b.Config(100, 2, "batch_size", 2);
  uint32_t main = b.Thread(100, 100);
  LoopSpec train;
  train.thread = main;
  train.iterations = 6;
  uint64_t end = AddLoop(b, train);
  LoopSpec val = train;
  val.scope = 2;
  val.iterations = 3;
  val.start = end;
  AddLoop(b, val);
  for (const LoopSpec* spec : {&train, &val})
    for (uint32_t i = 0; i < spec->iterations; ++i) {
      uint64_t t = spec->start + i * (spec->wait + spec->compute);
      b.Span(main, names::kGetitem, t, 4 * kMs, spec->scope, 2 * i);
      b.Span(main, names::kGetitem, t + 4 * kMs, 4 * kMs, spec->scope, 2 * i + 1);
      b.Span(main, names::kFetch, t, 10 * kMs, spec->scope, i, 5 * kMs, 0);
    }
  const auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  REQUIRE(result->loaders.size() == 2);
  for (const auto& l : result->loaders) {
    REQUIRE(l.stages.size() == 1);
    CHECK(l.stages[0].count == (l.config.name == "train" ? 12u : 6u));
    CHECK(l.workers.size() == 1);
    CHECK(l.workers[0].in_main_process);
  }
}

TEST_CASE("Steady-state summaries of many iterations are those of the steady values alone, repeated values included") {
  // 3 epochs of 700 iterations (past the selection's small-input path): the first 5
  // of each epoch wait 50 ms + i us, the others (i * 7919 mod 997 + 1) us, and
  // iteration 100 of each epoch waits exactly what warm-up iteration 2 did (a
  // value in both sets).
  TraceBuilder b;
  b.Process(100, 1);
  const uint32_t main = b.Thread(100, 100);
  std::vector<double> all_waits, steady_waits;
  uint64_t t = 1000 * kMs;
  for (uint32_t e = 0; e < 3; ++e) {
    b.Instant(main, names::kEpoch, t, 1, e);
    for (uint32_t i = 0; i < 700; ++i) {
      uint64_t wait = i < 5 ? 50 * kMs + i * 1000 : (i * 7919 % 997 + 1) * 1000;
      if (i == 100) wait = 50 * kMs + 2 * 1000;
      b.Span(main, names::kWait, t, wait, 1, i);
      all_waits.push_back(wait * 1e-9);
      if (i >= 5) steady_waits.push_back(wait * 1e-9);
      t += wait + 30 * kMs;
    }
  }
  const auto result = Analyze(b.trace, {});
  const auto& loader = OnlyLoader(result);
  auto check = [](const Summary& got, std::vector<double> values) {
    std::sort(values.begin(), values.end());
    double total = 0;
    for (double v : values) total += v;
    auto quantile = [&](double q) {
      const double pos = q * (values.size() - 1);
      const size_t lo = static_cast<size_t>(pos);
      return values[lo] + (values[std::min(lo + 1, values.size() - 1)] - values[lo]) * (pos - lo);
    };
    CHECK(got.count == values.size());
    CHECK(got.total == Approx(total).epsilon(1e-12));  // summed in another order
    CHECK(got.min == values.front());
    CHECK(got.max == values.back());
    CHECK(got.p50 == quantile(0.50));
    CHECK(got.p90 == quantile(0.90));
    CHECK(got.p99 == quantile(0.99));
  };
  check(loader.wait_all, all_waits);
  check(loader.wait_steady, steady_waits);
  CHECK(loader.step_steady.count == 3 * 695 - 3);  // each epoch's last step has no end (no StopIteration call): not counted
}

TEST_CASE("RadixSortBy orders rows by key as a stable sort does, small inputs and large") {
  struct Row {
    uint64_t key = 0;
    uint32_t added = 0;  // its place before sorting: rows of equal keys keep that order
  };
  for (const size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{1024}, size_t{5000}}) {
    INFO(n << " rows");
    HugeVector<Row> rows;
    std::vector<std::pair<uint64_t, uint32_t>> want;
    for (uint32_t i = 0; i < n; ++i) {
      // Keys differing in low, middle and top bytes, each one ~8 times (ties), one byte the same in all.
      const uint64_t k = (i * 2654435761u) % (n / 8 + 1);
      const uint64_t key = (k & 0xff) | (k >> 8) << 24 | (k % 3) << 62 | uint64_t{0x5a} << 40;
      rows.push_back({key, i});
      want.emplace_back(key, i);
    }
    std::sort(want.begin(), want.end());  // by key, then by the order added
    internal::RadixSortBy(rows, [](const Row& r) { return r.key; });
    REQUIRE(rows.size() == want.size());
    for (size_t i = 0; i < n; ++i) {
      INFO("row " << i);
      CHECK(rows[i].key == want[i].first);
      CHECK(rows[i].added == want[i].second);
    }
  }
}

TEST_CASE("FetchesByBatch finds a batch's earliest fetch at or after a time, the first added among equal starts") {
  for (const uint64_t stride : {uint64_t{1}, uint64_t{1'000'000}}) {  // dense batch indices, then sparse
    INFO("batch stride " << stride);
    struct Fetch {
      uint64_t batch, start;
      uint32_t id;
    };
    std::vector<Fetch> added;
    internal::FetchesByBatch fetches;
    // 50 batches x 4 fetches, added in a scrambled order; in each batch two start at the same time.
    for (uint32_t k = 0; k < 200; ++k) {
      const uint32_t i = k * 37 % 200;
      const uint64_t batch = (i % 50) * stride;
      const uint32_t j = i / 50 == 3 ? i % 50 : i;  // the 4th of a batch starts with its 1st
      const uint64_t start = 1000 + (j * 7919) % 500;
      const uint32_t id = 10'000 + k;
      fetches.Add(batch, start, id);
      added.push_back({batch, start, id});
    }
    fetches.Sort();
    for (uint64_t b = 0; b < 52; ++b)
      for (uint64_t t : {uint64_t{0}, uint64_t{1000}, uint64_t{1020}, uint64_t{1300}, uint64_t{2000}}) {
        int64_t want = internal::FetchesByBatch::kNoBatch;
        const Fetch* best = nullptr;
        for (const Fetch& f : added) {
          if (f.batch != b * stride) continue;
          if (want == internal::FetchesByBatch::kNoBatch) want = -1;
          if (f.start >= t && (!best || f.start < best->start)) best = &f;  // strict: the first added wins ties
        }
        if (best) want = best->id;
        INFO("batch " << b << " at " << t);
        CHECK(fetches.FirstAtOrAfter(b * stride, t) == want);
      }
  }
}

TEST_CASE("The run's time is split into the loaders' epochs, before, between and after them") {
  TraceBuilder b;
  b.Process(100, 1);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.epochs = 2;
  spec.gap_between_epochs = 500 * kMs;
  AddLoop(b, spec);  // epochs of 20 x 40 ms from 1000 ms: 1000-1800, 2300-3100 ms
  b.trace.footer.emplace();
  b.trace.footer->end_monotonic_ns = 10000 * kMs;  // the job ran on 6.9 s after them (itertools.cycle)
  auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  const auto& c = result->coverage;
  CHECK(result->duration_s == Approx(10.0));
  CHECK(c.before_s == Approx(1.0));
  CHECK(c.in_epochs_s == Approx(1.6));
  CHECK(c.between_s == Approx(0.5));
  CHECK(c.after_s == Approx(6.9));
  CHECK(TimeOutsideEpochs(*result) == Approx(7.4));
  // Ending at 4 s, 1.4 s outside against the epochs' 1.6 s: no note.
  b.trace.footer->end_monotonic_ns = 4000 * kMs;
  auto shorter = Analyze(b.trace, {});
  REQUIRE(shorter.ok());
  CHECK(shorter->coverage.after_s == Approx(0.9));
  CHECK(TimeOutsideEpochs(*shorter) == 0);
  // Ending at 5 s, 2.4 s outside is more than the epochs' 1.6 s: a note,
  // although under half of the 5 s run (the first second was before them).
  b.trace.footer->end_monotonic_ns = 5000 * kMs;
  auto at5 = Analyze(b.trace, {});
  REQUIRE(at5.ok());
  CHECK(TimeOutsideEpochs(*at5) == Approx(2.4));
}

TEST_CASE("A long interpreter start before the first epoch does not hide the time after the last") {
  TraceBuilder b;
  b.Process(100, 1);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.start = 6000 * kMs;  // torch's import on a slow host: 6 s before the loader's first epoch
  AddLoop(b, spec);         // one epoch of 20 x 40 ms: 6000-6800 ms
  b.trace.footer.emplace();
  b.trace.footer->end_monotonic_ns = 9700 * kMs;  // 2.9 s of replay by itertools.cycle after it
  auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  CHECK(result->coverage.before_s == Approx(6.0));
  CHECK(result->coverage.in_epochs_s == Approx(0.8));
  CHECK(TimeOutsideEpochs(*result) == Approx(2.9));
  // No sampler ticks: what the job did before is unknown, and the line says nothing of it.
  CHECK(result->coverage.before_job_cores == -1);
  CHECK(result->coverage.before_disk_read_bytes == -1);
}

TEST_CASE("The time before the first epoch says how busy the job was and what it read from the device") {
  TraceBuilder b;
  b.Process(100, 1);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.start = 4000 * kMs;  // a cold start: 4 s of imports and a dataset index read before the first epoch
  AddLoop(b, spec);
  // Sampled every second from 0: 300 MiB read by 3 s, 2.4 s of the job's CPU in its first 4 s (0.6 cores).
  b.trace.system.t_ns = {0, 1000 * kMs, 2000 * kMs, 3000 * kMs, 4000 * kMs, 5000 * kMs};
  b.trace.system.disk_read_bytes = {0, 100ull << 20, 200ull << 20, 300ull << 20, 300ull << 20, 301ull << 20};
  ProcessSeries p;
  p.pid = 100;
  p.t_ns = b.trace.system.t_ns;
  p.cpu_ns = {0, 600 * kMs, 1200 * kMs, 1800 * kMs, 2400 * kMs, 3400 * kMs};
  b.trace.process_series.push_back(p);
  auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  CHECK(result->coverage.before_s == Approx(4.0));
  CHECK(result->coverage.before_job_cores == Approx(0.6));
  CHECK(result->coverage.before_disk_read_bytes == Approx(300.0 * (1 << 20)));
}

namespace {
// 2 worker processes, each making `fetch_ms.size()` fetches of 4 items in
// turn, on CPU throughout: fetch k takes fetch_ms[k], its items evenly but
// the worker's first item `first_item_extra_ms` more.
Result<TraceAnalysis> FreshWorkers(const std::vector<uint64_t>& fetch_ms, uint64_t first_item_extra_ms) {
  TraceBuilder b;
  b.Config(100, 1, "num_workers", 2);
  b.Config(100, 1, "batch_size", 4);
  LoopSpec spec;
  spec.iterations = static_cast<uint32_t>(2 * fetch_ms.size());
  spec.wait = 0;
  spec.compute = 200 * kMs;
  AddMainProcessLoader(b, spec);
  for (uint32_t w = 0; w < 2; ++w) {
    b.Process(201 + w, 100);
    const uint32_t thread = b.Thread(201 + w, 201 + w);
    for (uint64_t k = 0; k < fetch_ms.size(); ++k) {
      const uint64_t batch = 2 * k + w, start = spec.start + batch * 200 * kMs;
      const uint64_t extra = k == 0 ? first_item_extra_ms * kMs : 0;
      const uint64_t fetch = fetch_ms[k] * kMs + extra;
      b.Span(thread, names::kFetch, start, fetch, 1, batch, fetch, 0);
      uint64_t t = start;
      for (int item = 0; item < 4; ++item) {
        const uint64_t d = fetch_ms[k] * kMs / 4 + (item == 0 ? extra : 0);
        b.Span(thread, names::kGetitem, t, d, 1, item);
        t += d;
      }
    }
  }
  return Analyze(b.trace, {});
}
}  // namespace

TEST_CASE("A worker's first item beyond its others is its set-up, taken out of its first fetch's cost") {
  // 4 batches a worker of 4 items of 10 ms, each worker's first 60 ms (imports,
  // a file opened on first use): too few fetches to tell a warm worker by.
  const auto result = FreshWorkers({40, 40, 40, 40}, 50);
  const auto& loader = OnlyLoader(result);
  const auto& setup = loader.worker_setup;
  CHECK(setup.starts == 2);
  CHECK(setup.item_s == Approx(0.010));
  CHECK(setup.first_item_s == Approx(0.050));
  CHECK(setup.warm_fetch_s < 0);
  REQUIRE(setup.by_fetch.size() == 1);
  CHECK(setup.WallS() == Approx(0.050));
  CHECK(setup.CpuS() == Approx(0.050));  // items without CPU: as their fetch's split (all CPU)
  // Every fetch now costs a warm worker's 40 ms.
  REQUIRE(loader.batch_costs.size() == 8);
  for (const auto& cost : loader.batch_costs) CHECK(cost.cpu_s == Approx(0.040));
  CHECK_THAT(loader.account_all.Line(Cause::kStartup).evidence,
             Catch::Contains("a fresh worker's first fetch took 50.0 ms more than a warm one's, its first item 50.0 ms "
                             "more than its others' 10.0 ms"));
}

TEST_CASE("A fresh worker's first fetches beyond its later ones are its set-up, however its items split it") {
  // 8 fetches a worker: 100, 60, then 40 ms (caches warming), items even.
  const auto result = FreshWorkers({100, 60, 40, 40, 40, 40, 40, 40}, 0);
  const auto& loader = OnlyLoader(result);
  const auto& setup = loader.worker_setup;
  CHECK(setup.warm_fetch_s == Approx(0.040));
  // The first item 25 ms against the others' 375 ms over 31 items: within the fetch's excess.
  CHECK(setup.first_item_s == Approx(0.025 - 0.375 / 31));
  REQUIRE(setup.by_fetch.size() == 2);
  CHECK(setup.by_fetch[0].cpu_s == Approx(0.060));
  CHECK(setup.by_fetch[1].cpu_s == Approx(0.020));
  CHECK(setup.WallS() == Approx(0.080));
  for (const auto& cost : loader.batch_costs) CHECK(cost.cpu_s == Approx(0.040));
  // A first item slower than the fetch's excess sets the first fetch's.
  CHECK(OnlyLoader(FreshWorkers({100, 60, 40, 40, 40, 40, 40, 40}, 90)).worker_setup.by_fetch[0].cpu_s == Approx(0.150));
}

namespace {
// One epoch of 8 batches (batch_size 32) from two workers, each streaming 100
// items: 3 full batches and a last one of 4 (getitem spans, one per item).
// `sampler`: the hook's sampler kind; `dropped`: records one worker's lane
// lost; `laneless`: records lost by a thread that found no free lane (only the
// footer's total counts them).
LoaderAnalysis TwoStreams(const std::string& sampler, uint64_t dropped, uint64_t laneless = 0) {
  TraceBuilder b;
  AddTwoWorkerProcesses(b);
  b.Config(100, 1, "batch_size", 32);
  b.Config(100, 1, "sampler", sampler);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 8;
  spec.wait = kMs;
  spec.compute = 20 * kMs;
  AddLoop(b, spec);
  const uint32_t workers[] = {b.Thread(201, 201), b.Thread(202, 202)};
  b.trace.threads[workers[1]].dropped = dropped;
  if (laneless > 0) {
    b.trace.footer.emplace();
    b.trace.footer->dropped = dropped + laneless;
  }
  for (uint32_t k = 0; k < 2; ++k)
    for (uint64_t batch = 0; batch < 4; ++batch) {
      const uint64_t s0 = spec.start + (2 * batch + k) * 21 * kMs;
      const uint64_t items = batch < 3 ? 32 : 4;
      b.Span(workers[k], names::kFetch, s0, 10 * kMs, 1, 2 * batch + k, 9 * kMs, 0);
      for (uint64_t i = 0; i < items; ++i) b.Span(workers[k], names::kGetitem, s0 + i * 100000, 50000, 1, i);  // 0.1 ms apart, 50 us each
    }
  return OnlyLoader(Analyze(b.trace, {}));
}
}  // namespace

TEST_CASE("An IterableDataset's samples are its getitem spans where its workers' last batches were partial") {
  const LoaderAnalysis stream = TwoStreams("_InfiniteConstantSampler", 0);
  CHECK(stream.samples == Approx(200));  // not 8 x 32 = 256
  CHECK(stream.config.batch_size == Approx(25));
  CHECK(stream.config.batch_size_set == 32);
  CHECK(stream.config.batch_size_from == "getitem spans");
  // A map-style loader's samples come from its dataset's length; a trace that
  // lost spans cannot count them: both keep the batch size.
  for (const auto& other : {TwoStreams("random", 0), TwoStreams("_InfiniteConstantSampler", 5),
                            TwoStreams("_InfiniteConstantSampler", 0, 13)}) {
    CHECK(other.config.batch_size == 32);
    CHECK(other.config.batch_size_set == 0);
    CHECK(other.samples == Approx(256));
  }
}

TEST_CASE("A dataset fits in memory against the machine's, or its memory cgroup's limit where the job ran under one") {
  TraceBuilder b;
  LoopSpec spec;
  AddMainProcessLoader(b, spec);
  b.Config(100, 1, "dataset_bytes", 600ull << 20);
  b.trace.header.memory_bytes = 16ull << 30;
  b.trace.header.page_cache_bytes = 1ull << 30;
  b.trace.system.t_ns = {0, 1000 * kMs};
  b.trace.system.mem_available_bytes = {10ull << 30, 9ull << 30};
  const auto machine = Analyze(b.trace, {});
  REQUIRE(machine.ok());
  CHECK(machine->system.memory_bytes == Approx(16.0 * (1ull << 30)));
  CHECK(machine->system.dataset_fits_in_memory);
  // A 400 MiB container: the 600 MiB dataset cannot stay cached whatever the host has.
  b.trace.header.memory_limit_bytes = 400ull << 20;
  const auto limited = Analyze(b.trace, {});
  REQUIRE(limited.ok());
  CHECK(limited->system.memory_bytes == Approx(400.0 * (1ull << 20)));
  CHECK_FALSE(limited->system.dataset_fits_in_memory);
}

TEST_CASE("The dataset's memory note promises fewer fetch stalls only where storage cost a loader time") {
  TraceAnalysis analysis;
  CHECK(DatasetMemoryNote(analysis).empty());  // no dataset size
  analysis.system.dataset_bytes = 16ull << 20;
  analysis.system.dataset_fits_in_memory = true;
  LoaderAnalysis loader;
  loader.account_all.available = true;
  loader.account_all.wall_s = 100;
  for (int cause = 0; cause <= static_cast<int>(Cause::kStallprof); ++cause)
    loader.account_all.lines.push_back({static_cast<Cause>(cause), 0, 0, "", false});
  loader.account_all.lines[static_cast<size_t>(Cause::kStorage)].seconds = 0.5;  // 0.5% of the wall time
  analysis.loaders.push_back(loader);
  CHECK_THAT(DatasetMemoryNote(analysis), Catch::Contains("16.0 MiB") && Catch::Contains("memory served it"));
  analysis.loaders.front().account_all.lines[static_cast<size_t>(Cause::kStorage)].seconds = 5;
  CHECK_THAT(DatasetMemoryNote(analysis), Catch::Contains("caching it would remove fetch stalls"));
  // Its 5 s of storage in the first of two epochs, none in the second: the
  // page cache held the dataset after it.
  auto& epochs = analysis.loaders.front().epochs;
  epochs.resize(2);
  epochs[0].storage_s = 5;
  CHECK(StoragePaidInFirstEpoch(analysis.loaders.front()));
  CHECK_THAT(DatasetMemoryNote(analysis), Catch::Contains("the page cache held it after the first epoch"));
  epochs[1].storage_s = 0.6;  // more than a tenth of the first's: the later epoch read too
  CHECK_FALSE(StoragePaidInFirstEpoch(analysis.loaders.front()));
  CHECK_THAT(DatasetMemoryNote(analysis), Catch::Contains("caching it would remove fetch stalls"));
  epochs[1].storage_s = 0.5;  // a tenth: still the first epoch's
  CHECK(StoragePaidInFirstEpoch(analysis.loaders.front()));
  analysis.system.dataset_fits_in_memory = false;
  CHECK_THAT(DatasetMemoryNote(analysis), Catch::Contains("does not fit"));
}
