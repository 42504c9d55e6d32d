// The span clock of the client: TSC ticks when the ring carries a calibration,
// CLOCK_MONOTONIC otherwise; either way the drain hands on CLOCK_MONOTONIC ns.
#include <time.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "ring/tsc_clock.h"
#include "stallprof/client.h"
#include "tools/client_test_util.h"
#include "tools/test_producer.h"

using stallprof::ring::Segment;
using stallprof::ring::TscClock;
using stallprof::testing::RecordingVisitor;
using stallprof::testing::RunInChild;

namespace {

// Spans the child writes: "bounds" (CLOCK_MONOTONIC times taken around the
// timed span, given to span_complete), then "timed" (begin ... 2 ms ... end).
int TimedSpanBetweenBounds() {
  if (stallprof_attach() != STALLPROF_OK) return 10;
  const uint32_t timed = stallprof_name("timed");
  const uint32_t bounds = stallprof_name("bounds");
  const uint64_t before = stallprof_now_ns();
  stallprof_span span;
  stallprof_span_begin(&span, timed, 1, STALLPROF_SPAN_WALL);
  const timespec pause{0, 2'000'000};
  nanosleep(&pause, nullptr);
  stallprof_span_end(&span, 7);
  const uint64_t after = stallprof_now_ns();
  stallprof_span_complete(bounds, before, after - before, 0, 0);
  return 0;
}

// The raw SPAN records of the segment's only used lane, before any drain.
std::vector<sp_record> RawSpans(Segment& segment) {
  std::vector<sp_record> spans;
  for (uint32_t i = 0; i < segment.header()->lane_count; ++i) {
    sp_lane_control* lane = sp_lane_at(segment.base(), segment.header(), i);
    const uint64_t head = lane->head.load();
    for (uint64_t k = 0; k < head; ++k)
      if (sp_lane_records(lane)[k].kind == SP_KIND_SPAN) spans.push_back(sp_lane_records(lane)[k]);
  }
  return spans;
}

void CheckTimedWithinBounds(const RecordingVisitor& visitor) {
  REQUIRE(visitor.events.size() == 2);
  const auto& timed = visitor.events[0].record;
  const auto& bounds = visitor.events[1].record;
  CHECK(visitor.events[0].name == "timed");
  CHECK(timed.arg == 7);
  CHECK(timed.flags == 0);
  // A converted time is off by tens of ns at most; 20 us is room for a
  // 10 ms calibration on a loaded machine, and still catches a wrong rate.
  const double slack = 20'000;
  CHECK(static_cast<double>(timed.start_ns) >= static_cast<double>(bounds.start_ns) - slack);
  CHECK(static_cast<double>(timed.start_ns + timed.duration_ns) <=
        static_cast<double>(bounds.start_ns + bounds.duration_ns) + slack);
  CHECK(timed.duration_ns >= 2'000'000 - slack);
}

}  // namespace

TEST_CASE("With a TSC calibration in the ring, begin/end spans are sent as ticks and drained as CLOCK_MONOTONIC ns",
          "[client][tsc]") {
  const auto tsc = stallprof::ring::CalibrateTsc(10'000'000);
  if (!tsc) {
    WARN("skipped: this CPU has no invariant TSC");
    return;
  }
  auto created = Segment::Create(4 << 20, 4, *tsc);
  REQUIRE(created.ok());
  auto& segment = **created;
  auto result = RunInChild(nullptr, nullptr, segment.EnvValue(), TimedSpanBetweenBounds);
  REQUIRE(result.exit_code == 0);
  const auto raw = RawSpans(segment);
  REQUIRE(raw.size() == 2);
  CHECK((raw[0].flags & SP_SPAN_TSC) != 0);   // timed: ticks
  CHECK((raw[1].flags & SP_SPAN_TSC) == 0);   // bounds: the caller's CLOCK_MONOTONIC ns
  // At least 2 ms worth of ticks at the calibrated rate.
  CHECK(static_cast<double>(raw[0].duration_ns) >= 0.99 * 2e6 * tsc->Hz() / 1e9);
  segment.ReanchorTsc();
  RecordingVisitor visitor;
  segment.DrainOnce(visitor);
  CheckTimedWithinBounds(visitor);
}

TEST_CASE("Without a TSC calibration in the ring, begin/end spans are timed with CLOCK_MONOTONIC", "[client][tsc]") {
  auto created = Segment::Create(4 << 20, 4, TscClock{});
  REQUIRE(created.ok());
  auto& segment = **created;
  auto result = RunInChild(nullptr, nullptr, segment.EnvValue(), TimedSpanBetweenBounds);
  REQUIRE(result.exit_code == 0);
  const auto raw = RawSpans(segment);
  REQUIRE(raw.size() == 2);
  CHECK(raw[0].flags == 0);
  RecordingVisitor visitor;
  segment.DrainOnce(visitor);
  CheckTimedWithinBounds(visitor);
}
