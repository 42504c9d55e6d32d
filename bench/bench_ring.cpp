// Ring benchmark (Google Benchmark; prints, never asserts): the cost of a span
// from C, alone on a warm lane and with 1 and 2 producer threads while a
// consumer drains concurrently, the clock read every span needs, and the
// consumer's drain throughput. One benchmark iteration is one span (one clock
// read, one drain of four full lanes), so the time per iteration is the figure.
//
// usage: bench_ring [--benchmark_repetitions=N] [--benchmark_format=json] ...
// scripts/bench_ring.sh runs it with repetitions and prints the figures.
// STALLPROF_BENCH_CLOCK=monotonic gives the client a ring without a TSC
// calibration (spans timed with clock_gettime); by default the ring carries
// one where the CPU has an invariant TSC, as under `stallprof run`.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ring/consumer.h"
#include "ring/tsc_clock.h"
#include "stallprof/client.h"

namespace {

// 16 lanes of 2^18 records: large enough that a producer outrunning the
// consumer for a few ms does not drop.
constexpr uint64_t kRingBytes = 256ull << 20;
constexpr uint32_t kLanes = 16;
stallprof::ring::Segment* g_segment = nullptr;

struct CountingVisitor : stallprof::ring::Visitor {
  uint64_t records = 0;
  uint64_t checksum = 0;
  void OnLaneOwner(const stallprof::ring::LaneOwner&) override {}
  void OnName(const stallprof::ring::LaneOwner&, uint32_t, std::string_view) override {}
  void OnRecord(const stallprof::ring::LaneOwner&, const sp_record& r) override {
    ++records;
    checksum += r.arg;
  }
  void OnRecords(const stallprof::ring::LaneOwner&, const sp_record* r, size_t n) override {
    records += n;
    for (size_t i = 0; i < n; ++i) checksum += r[i].arg;  // touch every record, like a real consumer
  }
  void OnLaneReleased(const stallprof::ring::LaneOwner&, uint64_t) override {}
};

uint64_t LaneCapacity() { return g_segment->header()->lane_capacity; }

// A consumer thread draining while the concurrent benchmarks run, as the
// launcher's drain loop does (it sleeps 200 us when the ring is empty).
class BackgroundDrain {
 public:
  static void Start(const benchmark::State&) { instance = std::make_unique<BackgroundDrain>(); }
  static void Stop(const benchmark::State&) { instance.reset(); }
  BackgroundDrain()
      : thread_([this] {
          CountingVisitor visitor;
          while (!done_.load(std::memory_order_relaxed)) {
            if (g_segment->DrainOnce(visitor).records == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
          }
          g_segment->ReclaimLanes(visitor);  // the lanes the producers released
        }) {}
  ~BackgroundDrain() {
    done_.store(true);
    thread_.join();
  }

 private:
  static std::unique_ptr<BackgroundDrain> instance;
  std::atomic<bool> done_{false};
  std::thread thread_;
};
std::unique_ptr<BackgroundDrain> BackgroundDrain::instance;

// Records this process dropped during the loop (thread 0 reports them: the
// loop ends on a barrier, so every thread's spans are in).
class DropCounter {
 public:
  DropCounter() : before_(stallprof_dropped()) {}
  void Report(benchmark::State& state) const {
    if (state.thread_index() == 0) state.counters["dropped"] = static_cast<double>(stallprof_dropped() - before_);
  }

 private:
  uint64_t before_;
};

void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(stallprof_now_ns());
}
BENCHMARK(BM_ClockRead);

void BM_TscRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(sp_read_tsc());
}
BENCHMARK(BM_TscRead);

// Producer alone: the lane's pages already touched (a first lap is drained
// before timing, so no page faults), no consumer touching the lane's cache
// lines while timing (the lane is drained with the timer paused every half
// lap), no drops.
enum class AloneStyle { kNowAndComplete, kComplete, kBeginEnd };
void BM_SpanAlone(benchmark::State& state, AloneStyle style) {
  const uint32_t name = stallprof_name("bench.alone");
  const uint64_t capacity = LaneCapacity();
  CountingVisitor visitor;
  for (uint64_t i = 0; i + 1 < capacity; ++i) stallprof_span_complete(name, i, 100, i, 1);  // first lap
  g_segment->DrainOnce(visitor);
  const DropCounter drops;
  uint64_t i = 0, in_lane = 0;
  for (auto _ : state) {
    if (in_lane == capacity / 2) {
      state.PauseTiming();
      g_segment->DrainOnce(visitor);
      in_lane = 0;
      state.ResumeTiming();
    }
    if (style == AloneStyle::kBeginEnd) {
      stallprof_span span;
      stallprof_span_begin(&span, name, 1, STALLPROF_SPAN_WALL);
      stallprof_span_end(&span, i);
    } else {
      stallprof_span_complete(name, style == AloneStyle::kNowAndComplete ? stallprof_now_ns() : i, 100, i, 1);
    }
    ++i;
    ++in_lane;
  }
  drops.Report(state);
  stallprof_thread_release();
  g_segment->ReclaimLanes(visitor);
}
BENCHMARK_CAPTURE(BM_SpanAlone, now_ns_and_span_complete, AloneStyle::kNowAndComplete);
BENCHMARK_CAPTURE(BM_SpanAlone, span_complete_given_times, AloneStyle::kComplete);
// The full C span: begin + end, both clock reads, no CPU counters.
BENCHMARK_CAPTURE(BM_SpanAlone, span_begin_end_wall, AloneStyle::kBeginEnd);

enum class SpanStyle { kComplete, kCompleteNoClock, kBeginEnd };

// ns per span per thread, with a concurrent draining consumer.
void BM_SpanDrained(benchmark::State& state, SpanStyle style) {
  const uint32_t name = stallprof_name(style == SpanStyle::kBeginEnd ? "bench.begin_end" : "bench.complete");
  stallprof_instant(name, 0, 0);  // claim the lane outside the timed loop
  const DropCounter drops;
  uint64_t i = 0;
  stallprof_span s;
  for (auto _ : state) {
    switch (style) {
      case SpanStyle::kComplete: stallprof_span_complete(name, stallprof_now_ns(), 100, i, 1); break;
      case SpanStyle::kCompleteNoClock: stallprof_span_complete(name, i, 100, i, 1); break;
      case SpanStyle::kBeginEnd:
        stallprof_span_begin(&s, name, 1, STALLPROF_SPAN_WALL);
        stallprof_span_end(&s, i);
        break;
    }
    ++i;
  }
  drops.Report(state);
  stallprof_thread_release();
}
#define STALLPROF_DRAINED(style, label)                                                                 \
  BENCHMARK_CAPTURE(BM_SpanDrained, label, style)->Setup(BackgroundDrain::Start)->Teardown(BackgroundDrain::Stop) \
      ->Threads(1)->Threads(2)->UseRealTime()
STALLPROF_DRAINED(SpanStyle::kComplete, span_complete_now_ns);
STALLPROF_DRAINED(SpanStyle::kCompleteNoClock, span_complete_given_times);
STALLPROF_DRAINED(SpanStyle::kBeginEnd, span_begin_end_wall);

// Drain throughput on one core: 4 lanes filled to capacity by threads that
// then exit (timer paused), drained in one DrainOnce (timed). items_per_second
// is over the draining thread's CPU time (Google Benchmark's default for rates).
void BM_DrainFullLanes(benchmark::State& state) {
  const uint64_t capacity = LaneCapacity();
  const DropCounter drops;
  uint64_t records = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<std::thread> fillers;
    for (int t = 0; t < 4; ++t) {
      fillers.emplace_back([&] {
        const uint32_t name = stallprof_name("bench.fill");
        for (uint64_t i = 0; i + 1 < capacity; ++i) stallprof_span_complete(name, i, 1, i, 2);
      });
    }
    for (auto& f : fillers) f.join();  // lanes RELEASED, full
    CountingVisitor visitor;
    state.ResumeTiming();
    g_segment->DrainOnce(visitor);
    state.PauseTiming();
    g_segment->ReclaimLanes(visitor);
    records += visitor.records;
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(records));
  drops.Report(state);
}
// Each iteration fills ~1M records untimed: a fixed count keeps the run short.
BENCHMARK(BM_DrainFullLanes)->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const char* clock = std::getenv("STALLPROF_BENCH_CLOCK");
  const bool monotonic = clock != nullptr && std::string(clock) == "monotonic";
  const auto tsc = monotonic ? std::nullopt : stallprof::ring::CalibrateTsc(10'000'000);
  auto created = stallprof::ring::Segment::Create(kRingBytes, kLanes, tsc.value_or(stallprof::ring::TscClock{}));
  if (!created.ok()) {
    std::fprintf(stderr, "bench_ring: %s\n", created.error().message.c_str());
    return 1;
  }
  g_segment = created->get();
  setenv(SP_RING_ENV, g_segment->EnvValue().c_str(), 1);
  if (stallprof_attach() != STALLPROF_OK) {
    std::fprintf(stderr, "bench_ring: the client could not attach\n");
    return 1;
  }
  benchmark::AddCustomContext("lane_capacity", std::to_string(LaneCapacity()));
  benchmark::AddCustomContext("span_clock", tsc ? "tsc" : "monotonic");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
