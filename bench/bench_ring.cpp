// Ring benchmark (prints, never asserts): cost of a span from C with 1 and 2
// producer threads while a consumer drains concurrently, and drain throughput.
//
// usage: bench_ring [spans_per_thread]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "ring/consumer.h"
#include "stallprof/client.h"

namespace {
using Clock = std::chrono::steady_clock;

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

enum class SpanStyle { kComplete, kCompleteNoClock, kBeginEnd };

// ns per span per thread, with a concurrent draining consumer.
double SpanCost(stallprof::ring::Segment& segment, int threads, uint64_t spans, SpanStyle style, uint64_t& dropped) {
  CountingVisitor visitor;
  std::atomic<bool> done{false};
  std::thread consumer([&] {
    while (!done.load(std::memory_order_relaxed)) {
      if (segment.DrainOnce(visitor).records == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  const uint64_t dropped_before = segment.TotalDropped();
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> ns(threads);
  std::vector<std::thread> producers;
  for (int t = 0; t < threads; ++t) {
    producers.emplace_back([&, t] {
      const uint32_t name = stallprof_name(style == SpanStyle::kBeginEnd ? "bench.begin_end" : "bench.complete");
      stallprof_instant(name, 0, 0);  // claim the lane outside the timed loop
      ready.fetch_add(1);
      while (!go.load()) {
      }
      const auto start = Clock::now();
      if (style == SpanStyle::kComplete) {
        for (uint64_t i = 0; i < spans; ++i) stallprof_span_complete(name, stallprof_now_ns(), 100, i, 1);
      } else if (style == SpanStyle::kCompleteNoClock) {
        for (uint64_t i = 0; i < spans; ++i) stallprof_span_complete(name, i, 100, i, 1);
      } else {
        stallprof_span s;
        for (uint64_t i = 0; i < spans; ++i) {
          stallprof_span_begin(&s, name, 1, STALLPROF_SPAN_WALL);
          stallprof_span_end(&s, i);
        }
      }
      ns[t] = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / spans;
      stallprof_thread_release();
    });
  }
  while (ready.load() < threads) {
  }
  go.store(true);
  for (auto& p : producers) p.join();
  done.store(true);
  consumer.join();
  segment.ReclaimLanes(visitor);
  dropped = segment.TotalDropped() - dropped_before;
  double sum = 0;
  for (double v : ns) sum += v;
  return sum / threads;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t spans = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 5'000'000;
  // 16 lanes of 2^18 records: large enough that a producer outrunning the
  // consumer for a few ms does not drop.
  auto created = stallprof::ring::Segment::Create(256ull << 20, 16);
  if (!created.ok()) {
    std::fprintf(stderr, "bench_ring: %s\n", created.error().message.c_str());
    return 1;
  }
  auto& segment = **created;
  setenv(SP_RING_ENV, segment.EnvValue().c_str(), 1);
  if (stallprof_attach() != STALLPROF_OK) {
    std::fprintf(stderr, "bench_ring: the client could not attach\n");
    return 1;
  }
  std::printf("lane capacity %u records, %llu spans per thread\n", segment.header()->lane_capacity,
              static_cast<unsigned long long>(spans));
  {
    // The clock read alone, for context: every span needs at least one.
    const auto start = Clock::now();
    uint64_t sink = 0;
    for (uint64_t i = 0; i < spans; ++i) sink += stallprof_now_ns();
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / spans;
    std::printf("clock: stallprof_now_ns()                          : %6.1f ns/call (%llu)\n", ns,
                static_cast<unsigned long long>(sink & 1));
  }
  {
    // Producer alone: the lane's pages already touched (a first lap is drained
    // before timing, so no page faults), no consumer touching the lane's cache
    // lines while timing, no drops (each timed run fits in the lane). Best of 5.
    const uint64_t capacity = segment.header()->lane_capacity;
    double best_clock = 1e9, best_given = 1e9;
    for (int round = 0; round < 5; ++round) {
      std::atomic<int> phase{0};
      std::thread producer([&] {
        const uint32_t name = stallprof_name("bench.alone");
        for (uint64_t i = 0; i + 1 < capacity; ++i) stallprof_span_complete(name, i, 100, i, 1);  // first lap
        phase.store(1);
        while (phase.load() != 2) {
        }
        const uint64_t n = capacity / 2;
        auto start = Clock::now();
        for (uint64_t i = 0; i < n; ++i) stallprof_span_complete(name, stallprof_now_ns(), 100, i, 1);
        best_clock = std::min(best_clock, std::chrono::duration<double, std::nano>(Clock::now() - start).count() / n);
        phase.store(3);
        while (phase.load() != 4) {
        }
        start = Clock::now();
        for (uint64_t i = 0; i < n; ++i) stallprof_span_complete(name, i, 100, i, 1);
        best_given = std::min(best_given, std::chrono::duration<double, std::nano>(Clock::now() - start).count() / n);
      });
      CountingVisitor visitor;
      while (phase.load() != 1) {
      }
      segment.DrainOnce(visitor);
      phase.store(2);
      while (phase.load() != 3) {
      }
      segment.DrainOnce(visitor);
      phase.store(4);
      producer.join();
      segment.ReclaimLanes(visitor);
    }
    std::printf("C span, producer alone (warm lane, no concurrent drain): now_ns() + span_complete %5.1f ns, "
                "span_complete %5.1f ns\n",
                best_clock, best_given);
  }
  for (int threads : {1, 2}) {
    for (SpanStyle style : {SpanStyle::kComplete, SpanStyle::kCompleteNoClock, SpanStyle::kBeginEnd}) {
      uint64_t dropped = 0;
      const double ns = SpanCost(segment, threads, spans, style, dropped);
      std::printf("C span %-38s %d thread%s: %6.1f ns/span (dropped %llu)\n",
                  style == SpanStyle::kComplete          ? "span_complete(now_ns(), ...)"
                  : style == SpanStyle::kCompleteNoClock ? "span_complete(given times)"
                                                         : "span_begin/span_end (wall)",
                  threads,
                  threads == 1 ? " " : "s", ns, static_cast<unsigned long long>(dropped));
    }
  }

  // Drain throughput: 4 lanes filled to capacity (no consumer), then drained.
  const uint64_t capacity = segment.header()->lane_capacity;
  double best = 0;
  uint64_t total_records = 0, dropped_total = 0;
  const uint64_t dropped_before = segment.TotalDropped();
  for (int round = 0; round < 5; ++round) {
    std::vector<std::thread> fillers;
    for (int t = 0; t < 4; ++t) {
      fillers.emplace_back([&] {
        const uint32_t name = stallprof_name("bench.fill");
        for (uint64_t i = 0; i + 1 < capacity; ++i) stallprof_span_complete(name, i, 1, i, 2);
      });
    }
    for (auto& f : fillers) f.join();  // lanes RELEASED, full
    CountingVisitor visitor;
    const auto start = Clock::now();
    segment.DrainOnce(visitor);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    segment.ReclaimLanes(visitor);
    total_records += visitor.records;
    const double rate = visitor.records / seconds;
    if (rate > best) best = rate;
  }
  dropped_total = segment.TotalDropped() - dropped_before;
  std::printf("drain: %.1f M spans/s on one core (best of 5 rounds of %llu spans, dropped %llu)\n", best / 1e6,
              static_cast<unsigned long long>(total_records / 5), static_cast<unsigned long long>(dropped_total));
  return 0;
}
