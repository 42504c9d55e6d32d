// TSC ticks -> CLOCK_MONOTONIC ns: the conversion, the consumer converting
// SP_SPAN_TSC spans once, the fallback without a calibration, re-anchoring.
#include <catch2/catch.hpp>

#include "ring/consumer.h"
#include "ring/tsc_clock.h"
#include "tools/test_producer.h"

using stallprof::ring::Segment;
using stallprof::ring::TscClock;
using stallprof::ring::TscReading;
using stallprof::testing::RecordingVisitor;
using stallprof::testing::TestProducer;

namespace {

// A 3 GHz TSC whose tick 1'000'000 was CLOCK_MONOTONIC 5 s.
TscClock ThreeGhz() { return TscClock::FromRate(1'000'000, 5'000'000'000ull, 1.0 / 3.0); }

std::unique_ptr<Segment> MakeSegment(const TscClock& tsc) {
  auto segment = Segment::Create(1 << 20, 4, tsc);
  REQUIRE(segment.ok());
  return std::move(segment).value();
}

sp_record TscSpan(uint32_t name, uint64_t start_ticks, uint64_t duration_ticks) {
  sp_record r{};
  r.kind = SP_KIND_SPAN;
  r.name = name;
  r.flags = SP_SPAN_TSC;
  r.start_ns = start_ticks;
  r.duration_ns = duration_ticks;
  return r;
}

}  // namespace

TEST_CASE("A set mult and shift convert set ticks to the expected ns within 1 ns per ms", "[ring][tsc]") {
  const TscClock c = ThreeGhz();
  REQUIRE(c.valid());
  CHECK(c.Hz() == Approx(3e9).epsilon(1e-9));
  // 1 ms, 1 s and 1 hour of ticks after the base, and 1 s before it.
  CHECK(c.ToNs(1'000'000 + 3'000'000) == Approx(5'001'000'000.0).margin(1));
  CHECK(c.ToNs(1'000'000 + 3'000'000'000ull) == Approx(6'000'000'000.0).margin(1000));
  CHECK(c.ToNs(1'000'000 + 3'000'000'000ull * 3600) == Approx(5e9 + 3600e9).margin(3'600'000));
  CHECK(c.ToNs(1'000'000 - 3'000) == Approx(4'999'999'000.0).margin(1));
  CHECK(c.DeltaToNs(3'000'000'000ull) == Approx(1e9).margin(1000));
  CHECK(c.DeltaToNs(3) == 1);
  // Ticks long before the base clamp at 0 instead of wrapping.
  CHECK(TscClock::FromRate(1ull << 62, 1000, 1.0).ToNs(5) == 0);
  // A TSC slower than 1 GHz (more than 1 ns per tick) converts as well.
  const TscClock slow = TscClock::FromRate(0, 0, 2.5);
  CHECK(slow.ToNs(4'000'000) == Approx(10'000'000.0).margin(10));
  CHECK_FALSE(TscClock{}.valid());
}

TEST_CASE("The clock through two readings has their rate and passes through both", "[ring][tsc]") {
  const TscReading first{1000, 2000, 20};
  const TscReading last{1000 + 2'500'000'000ull, 2000 + 1'000'000'000ull, 20};
  auto c = stallprof::ring::ClockThrough(first, last);
  REQUIRE(c.has_value());
  CHECK(c->Hz() == Approx(2.5e9).epsilon(1e-9));
  CHECK(c->ToNs(first.ticks) == first.ns);
  CHECK(c->ToNs(last.ticks) == Approx(static_cast<double>(last.ns)).margin(1));
  CHECK_FALSE(stallprof::ring::ClockThrough(last, first).has_value());
}

TEST_CASE("A TSC span and a CLOCK_MONOTONIC span in one lane both come out in CLOCK_MONOTONIC ns", "[ring][tsc]") {
  auto segment = MakeSegment(ThreeGhz());
  const sp_ring_header* h = segment->header();
  CHECK(h->abi_minor >= 1);
  CHECK(h->tsc_mult == ThreeGhz().mult);
  CHECK(h->tsc_shift == 32);
  CHECK(h->tsc_base_ticks == 1'000'000);
  CHECK(h->tsc_base_ns == 5'000'000'000ull);
  TestProducer p(segment->base(), 0);
  REQUIRE(p.claimed());
  p.Name(1, "fetch");
  p.Push(TscSpan(1, 1'000'000 + 3'000'000, 600));  // 1 ms after the base, 200 ns long
  sp_record plain{};
  plain.kind = SP_KIND_SPAN;
  plain.name = 1;
  plain.start_ns = 5'000'500'000ull;
  plain.duration_ns = 70;
  plain.flags = SP_SPAN_HAS_CPU;
  p.Push(plain);
  RecordingVisitor visitor;
  segment->DrainOnce(visitor);
  REQUIRE(visitor.events.size() == 2);
  CHECK(visitor.events[0].record.start_ns == Approx(5'001'000'000.0).margin(1));
  CHECK(visitor.events[0].record.duration_ns == 200);
  CHECK(visitor.events[0].record.flags == 0);  // ns now: the flag is gone
  CHECK(visitor.events[1].record.start_ns == 5'000'500'000ull);
  CHECK(visitor.events[1].record.duration_ns == 70);
  CHECK(visitor.events[1].record.flags == SP_SPAN_HAS_CPU);
  CHECK(segment->TotalInvalid() == 0);
}

TEST_CASE("Without a calibration the header offers no TSC and a span claiming ticks is rejected", "[ring][tsc]") {
  auto segment = MakeSegment(TscClock{});
  CHECK(segment->header()->tsc_mult == 0);
  CHECK_FALSE(segment->tsc_clock().valid());
  TestProducer p(segment->base(), 0);
  REQUIRE(p.claimed());
  p.Name(1, "fetch");
  p.Push(TscSpan(1, 123, 4));
  p.Span(1, 9);
  RecordingVisitor visitor;
  segment->DrainOnce(visitor);
  REQUIRE(visitor.events.size() == 1);
  CHECK(visitor.events[0].record.arg == 9);
  CHECK(segment->TotalInvalid() == 1);
  segment->ReanchorTsc(TscReading{1000, 1000, 10});  // nothing to re-anchor
  CHECK(segment->tsc_report().reanchors == 0);
}

TEST_CASE("Re-anchoring makes the conversion exact at the reading and reports the start calibration's drift",
          "[ring][tsc]") {
  // 1 tick = 1 ns at start; 1 s of ticks later CLOCK_MONOTONIC says 500 ns more.
  auto segment = MakeSegment(TscClock::FromRate(0, 1'000'000'000ull, 1.0));
  const TscReading reading{1'000'000'000ull, 2'000'000'500ull, 30};
  segment->ReanchorTsc(reading);
  const auto& report = segment->tsc_report();
  CHECK(report.reanchors == 1);
  CHECK(report.drift_ns == -500);
  CHECK(report.over_ns == 1'000'000'500ull);
  CHECK(report.max_step_ns == 500);
  CHECK(segment->tsc_clock().ToNs(reading.ticks) == reading.ns);
  // Another second at the new rate (1 + 500e-9 ns per tick).
  CHECK(segment->tsc_clock().ToNs(2'000'000'000ull) == Approx(3'000'001'000.0).margin(2));
  // A preempted reading (bracket over 2 us) is not trusted.
  segment->ReanchorTsc(TscReading{3'000'000'000ull, 9'000'000'000ull, 5000});
  CHECK(report.reanchors == 1);

  TestProducer p(segment->base(), 0);
  REQUIRE(p.claimed());
  p.Name(1, "fetch");
  p.Push(TscSpan(1, 1'500'000'000ull, 1000));
  RecordingVisitor visitor;
  segment->DrainOnce(visitor);
  REQUIRE(visitor.events.size() == 1);
  CHECK(visitor.events[0].record.start_ns == Approx(2'500'000'750.0).margin(2));
  CHECK(visitor.events[0].record.duration_ns == 1000);
}
