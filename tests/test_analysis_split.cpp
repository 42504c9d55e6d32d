#include <catch2/catch.hpp>

#include "analysis/analysis.h"
#include "test_analysis_trace_builder.h"

using namespace stallprof;
using namespace stallprof::analysis;
using namespace stallprof::testing;

namespace {
// num_workers = 0: each next() waits for the main process to fetch the batch
// itself (cpu + io, reading 256 KiB from the device), then the step computes for 20 ms.
Trace SerialLoader(uint64_t cpu, uint64_t io) {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "name", "train");
  b.Config(100, 1, "batch_size", 4);
  b.Config(100, 1, "num_workers", 0);
  uint32_t main = b.Thread(100, 100);
  LoopSpec spec;
  spec.thread = main;
  spec.iterations = 25;
  spec.wait = cpu + io;
  spec.compute = 20 * kMs;
  AddLoop(b, spec);
  uint64_t t = spec.start;
  for (uint32_t i = 0; i < spec.iterations; ++i) {
    b.Span(main, names::kFetch, t, cpu + io, 1, i, static_cast<int64_t>(cpu), 0);
    b.Span(main, names::kReadStorage, t, cpu + io, 1, 256 << 10);
    b.Span(main, names::kReadCalls, t, cpu + io, 1, 256 << 10);
    t += cpu + io + spec.compute;
  }
  return b.trace;
}
}  // namespace

TEST_CASE("The split of a serial loader puts the CPU part in prep stall and the device-reading rest in fetch stall") {
  const Trace trace = SerialLoader(10 * kMs, 30 * kMs);
  const auto result = Analyze(trace, {});
  REQUIRE(result.ok());
  const auto& l = result->loaders.at(0);
  const auto& s = l.split;
  REQUIRE(s.available);
  // 20 steady steps of 20 ms compute + 10 ms CPU + 30 ms I/O.
  CHECK(s.step_s == Approx(20 * 0.060));
  CHECK(s.ingest_s == Approx(20 * 0.020));
  CHECK(s.cached_s == Approx(20 * 0.030));
  CHECK(s.prep_stall_s == Approx(20 * 0.010));
  CHECK(s.fetch_stall_s == Approx(20 * 0.030));
  CHECK(s.handoff_s == 0);
  CHECK_FALSE(s.scaled);
  CHECK(l.verdict == Verdict::kHighlyInputBound);
  CHECK(l.bottleneck == Cause::kStorage);
}

TEST_CASE("A CPU-heavy serial loader is named prep-bound") {
  const auto result = Analyze(SerialLoader(30 * kMs, 5 * kMs), {});
  REQUIRE(result.ok());
  const auto& l = result->loaders.at(0);
  CHECK(l.split.prep_stall_s == Approx(20 * 0.030));
  CHECK(l.split.fetch_stall_s == Approx(20 * 0.005));
  CHECK(l.bottleneck == Cause::kPrep);
}

TEST_CASE("A loader that barely waits is compute-bound whatever its split") {
  const auto result = Analyze(SerialLoader(0, 500000), {});  // 0.5 ms of I/O per 20.5 ms step
  REQUIRE(result.ok());
  const auto& l = result->loaders.at(0);
  CHECK(l.verdict == Verdict::kNotInputBound);
  CHECK(l.bottleneck == Cause::kCompute);
}

TEST_CASE("Waits at next() calls that found a batch ready are handoff, not fetch stall") {
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 10;
  spec.wait = 5 * kMs;
  spec.compute = 20 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  // The worker finished every batch long before it was asked for.
  for (int i = 0; i < 10; ++i) b.Span(w, names::kFetch, spec.start + i * kMs / 10, kMs / 20, 1, i, kMs / 20, 0);
  const auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  const auto& s = result->loaders.at(0).split;
  REQUIRE(s.available);
  CHECK(s.handoff_s == Approx(s.measured_stall_s));
  CHECK(s.fetch_stall_s == Approx(0).margin(1e-12));
  CHECK(s.prep_stall_s + s.fetch_stall_s + s.handoff_s <= Approx(s.measured_stall_s));
  CHECK(result->loaders.at(0).bottleneck == Cause::kHandoff);
}

TEST_CASE("A batch finished by a worker that went straight on to the next is not handoff") {
  // One worker, slower than the model: it finishes batch i just before next()
  // asks for it but is already busy with batch i+1 (a CPU-bound Python worker
  // then holds the GIL and the finished batch is not sent yet): prep, not handoff.
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 12;
  spec.wait = 30 * kMs;
  spec.compute = 30 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  b.Span(w, names::kFetch, spec.start, kMs, 1, 0, kMs, 0);
  for (uint64_t i = 1; i < 12; ++i) {
    const uint64_t next_call = spec.start + i * 60 * kMs;
    b.Span(w, names::kFetch, next_call - 61 * kMs, 60 * kMs, 1, i, 60 * kMs, 0);
  }
  const auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  const auto& l = result->loaders.at(0);
  CHECK(l.iterations.at(6).ready_batches == 1);  // finished, by the span times...
  CHECK_FALSE(l.iterations.at(6).batch_deliverable);  // ...but its worker was busy
  // Only the last batch counts: after it the worker idles and can send it.
  // It is in the epoch's drain (in flight when the sampler ran out), outside
  // the steady state the split views.
  CHECK(l.iterations.back().batch_deliverable);
  CHECK(l.account_all.Seconds(Cause::kHandoff) == Approx(0.030));
  CHECK(l.split.handoff_s == 0);
  CHECK(l.bottleneck != Cause::kHandoff);
}

TEST_CASE("Handoff and a real fetch stall in one loader stay apart in the split") {
  // One worker. Even batches are produced long before next() asks (a 3 ms
  // handoff); odd batches are produced during a 20 ms wait, 2 ms on CPU and
  // 18 ms off CPU reading 1 MiB from the device (fetch stall). A split that
  // folded the handoff into the fetch stall, or left it out of the view, fails.
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 25;
  spec.compute = 10 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  b.trace.spans = {};  // the loop is rebuilt below with its two kinds of waits
  const uint32_t main = 0;
  uint64_t t = spec.start;
  b.Instant(main, names::kEpoch, t, 1, 0);
  for (uint64_t i = 0; i < 25; ++i) {
    const uint64_t wait = i % 2 ? 20 * kMs : 3 * kMs;
    if (i % 2) {
      b.Span(w, names::kFetch, t, wait, 1, i, 2 * kMs, 0);
      b.Span(w, names::kReadStorage, t, wait, 1, 1 << 20);
      b.Span(w, names::kReadCalls, t, wait, 1, 1 << 20);
    } else {
      b.Span(w, names::kFetch, t - 5 * kMs, kMs, 1, i, kMs, 0);
      b.Span(w, names::kReadStorage, t - 5 * kMs, kMs, 1, 0);
      b.Span(w, names::kReadCalls, t - 5 * kMs, kMs, 1, 0);
    }
    b.Span(main, names::kWait, t, wait, 1, i);
    t += wait + spec.compute;
  }
  b.Instant(main, names::kEpochEnd, t, 1, 25);
  const auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  const auto& l = result->loaders.at(0);
  const auto& s = l.split;
  // Steady: iterations 5..22 (the last 2 drain), 9 odd (fetch) and 9 even (handoff).
  CHECK(s.handoff_s == Approx(9 * 0.003));
  CHECK(s.prep_stall_s == Approx(9 * 0.002));
  CHECK(s.fetch_stall_s == Approx(9 * 0.018));
  CHECK(s.measured_stall_s == Approx(s.handoff_s + s.prep_stall_s + s.fetch_stall_s));
  CHECK(l.bottleneck == Cause::kStorage);
}
