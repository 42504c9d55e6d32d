// What the client writes: every record kind, names across NAME_PART records,
// CPU spans, client kind flags, loader ids across processes.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <set>

#include "stallprof/client.h"
#include "tools/client_test_util.h"
#include "tools/test_producer.h"

using stallprof::ring::Segment;
using stallprof::testing::MakeSegment;
using stallprof::testing::RecordingVisitor;
using stallprof::testing::RunInChild;

TEST_CASE("Spans, instants, counters and configs arrive with their names and values", "[client]") {
  auto segment = MakeSegment();
  RecordingVisitor visitor;
  const std::string long_name(250, 'n');
  auto result = RunInChild(segment.get(), &visitor, segment->EnvValue(), [&] {
    if (stallprof_attach() != STALLPROF_OK) return 10;
    const uint32_t wait = stallprof_name("dataloader.wait");
    if (stallprof_name("dataloader.wait") != wait) return 11;
    const uint32_t longer = stallprof_name(long_name.c_str());
    stallprof_span_complete(wait, 100, 50, 7, 2);
    stallprof_span_complete(longer, 200, 60, 8, 2);
    stallprof_instant(stallprof_name("dataloader.epoch"), 1, 2);
    stallprof_counter(stallprof_name("queue"), 42);
    stallprof_config_u64(2, "batch_size", 64);
    stallprof_config_f64(2, "ratio", 0.25);
    stallprof_config_str(2, "sampler", "random");
    return 0;
  });
  REQUIRE(result.exit_code == 0);
  REQUIRE(visitor.events.size() == 7);
  auto& e = visitor.events;
  CHECK(e[0].name == "dataloader.wait");
  CHECK(e[0].record.kind == SP_KIND_SPAN);
  CHECK(e[0].record.start_ns == 100);
  CHECK(e[0].record.duration_ns == 50);
  CHECK(e[0].record.arg == 7);
  CHECK(e[0].record.scope == 2);
  CHECK(e[1].name == long_name);
  CHECK(e[2].record.kind == SP_KIND_INSTANT);
  CHECK(e[2].name == "dataloader.epoch");
  CHECK(e[3].record.kind == SP_KIND_COUNTER);
  CHECK(e[3].record.arg == 42);
  CHECK(e[4].record.kind == SP_KIND_CONFIG_U64);
  CHECK(e[4].name == "batch_size");
  CHECK(e[4].record.arg == 64);
  CHECK(e[5].record.kind == SP_KIND_CONFIG_F64);
  double ratio = 0;
  std::memcpy(&ratio, &e[5].record.arg, sizeof ratio);
  CHECK(ratio == 0.25);
  CHECK(e[6].record.kind == SP_KIND_CONFIG_STR);
  CHECK(e[6].name == "sampler");
  auto& names = visitor.names[{e[6].owner.lane, e[6].owner.generation}];
  CHECK(names[static_cast<uint32_t>(e[6].record.arg)] == "random");
}

TEST_CASE("A CPU span carries the thread CPU time burned inside it, a wall span does not", "[client]") {
  // One child: a 30 ms busy span, an "outer" span around it, a 10 ms sleep span.
  auto measure = [](RecordingVisitor& visitor) {
    auto segment = MakeSegment();
    auto result = RunInChild(segment.get(), &visitor, segment->EnvValue(), [] {
      stallprof_span span;
      // The span's CPU and run-queue readings are taken just outside its wall
      // clock readings (before start, after end): "outer" is the wall time
      // that holds all of them, which bounds CPU + delay by definition, however
      // long the thread waits for a core between two readings.
      const uint64_t outer_start = stallprof_now_ns();
      stallprof_span_begin(&span, stallprof_name("burn"), 1, STALLPROF_SPAN_CPU);
      volatile uint64_t x = 0;
      const uint64_t until = stallprof_now_ns() + 30'000'000;
      while (stallprof_now_ns() < until) x = x + 1;
      stallprof_span_end(&span, 5);
      const uint64_t outer_end = stallprof_now_ns();
      stallprof_span_complete(stallprof_name("outer"), outer_start, outer_end - outer_start, 0, 0);
      stallprof_span_begin(&span, stallprof_name("sleep"), 1, STALLPROF_SPAN_WALL);
      usleep(10'000);
      stallprof_span_end(&span, 6);
      return 0;
    });
    REQUIRE(result.exit_code == 0);
    REQUIRE(visitor.events.size() == 3);
    REQUIRE(visitor.events[1].name == "outer");
  };
  // schedstat counts on the scheduler's clock, not CLOCK_MONOTONIC: 1 ms
  // covers their difference over 30 ms; counting the burn twice does not fit.
  auto within_outer = [](const sp_record& burn, const sp_record& outer) {
    return burn.cpu_ns + burn.delay_ns <= outer.duration_ns + 1'000'000;
  };
  // A loaded machine can still put a clock hiccup in one run; a real
  // accounting error shows in every run, so the bound gets three tries.
  RecordingVisitor visitor;
  measure(visitor);
  for (int retry = 0; retry < 2 && !within_outer(visitor.events[0].record, visitor.events[1].record); ++retry) {
    visitor = RecordingVisitor{};
    measure(visitor);
  }
  const sp_record& burn = visitor.events[0].record;
  const sp_record& outer = visitor.events[1].record;
  CHECK((burn.flags & SP_SPAN_HAS_CPU) != 0);
  CHECK(burn.duration_ns >= 30'000'000);
  // A busy thread is either running or waiting to run: on a shared machine the
  // split varies, the sum does not (schedstat missing would leave delay 0).
  CHECK(burn.cpu_ns > 0);
  CHECK(burn.cpu_ns <= burn.duration_ns + 1'000'000);
  // (CFS quota throttling is in neither, hence the slack.)
  CHECK(burn.cpu_ns + burn.delay_ns >= burn.duration_ns * 3 / 4);
  CHECK(within_outer(burn, outer));
  CHECK(burn.arg == 5);
  const sp_record& sleep = visitor.events[2].record;
  CHECK((sleep.flags & SP_SPAN_HAS_CPU) == 0);
  CHECK(sleep.duration_ns >= 10'000'000);
  CHECK(sleep.cpu_ns == 0);
}

TEST_CASE("Back-to-back CPU spans read their counters on a sample, spans longer than the budget's pause on every one",
          "[client]") {
  auto segment = MakeSegment();
  RecordingVisitor visitor;
  auto result = RunInChild(segment.get(), &visitor, segment->EnvValue(), [] {
    stallprof_span span;
    const uint32_t fast = stallprof_name("fast"), slow = stallprof_name("slow"), forced = stallprof_name("forced");
    // What one span's counter reads cost here (they vary with the host; a
    // sanitizer slows the spans around them too): 200 spans that read them
    // less 200 that do not, the fastest of 5 rounds each (a preemption only
    // adds). Then the budget back to its start: a fresh thread's credit.
    const uint32_t probe = stallprof_name("probe");
    const auto time_spans = [&](uint32_t flags) {
      uint64_t fastest = UINT64_MAX;
      for (int round = 0; round < 5; ++round) {
        const uint64_t from = stallprof_now_ns();
        for (int i = 0; i < 200; ++i) {
          stallprof_span_begin(&span, probe, 0, flags);
          stallprof_span_end(&span, 0);
        }
        fastest = std::min(fastest, stallprof_now_ns() - from);
      }
      return fastest;
    };
    const uint64_t without = time_spans(0), with = time_spans(STALLPROF_SPAN_CPU_ALWAYS);
    stallprof_counter(stallprof_name("read_cost_ns"), with > without ? (with - without) / 200 : 0);
    stallprof_counter_budget_reset();
    uint64_t start = stallprof_now_ns();
    for (int i = 0; i < 2000; ++i) {
      stallprof_span_begin(&span, fast, 0, STALLPROF_SPAN_CPU);
      stallprof_span_end(&span, 0);
    }
    stallprof_counter(stallprof_name("fast_loop_ns"), stallprof_now_ns() - start);
    // A span of 30 ms outlasts the pause any counter read earns at 0.5%
    // (30 ms / 200 = 150 us of reads), even on a loaded machine.
    for (int i = 0; i < 4; ++i) {
      usleep(30'000);
      stallprof_span_begin(&span, slow, 0, STALLPROF_SPAN_CPU);
      usleep(30'000);
      stallprof_span_end(&span, 0);
    }
    for (int i = 0; i < 3; ++i) {
      stallprof_span_begin(&span, forced, 0, STALLPROF_SPAN_CPU_ALWAYS);
      stallprof_span_end(&span, 0);
    }
    return 0;
  });
  REQUIRE(result.exit_code == 0);
  std::map<std::string, std::pair<int, int>> spans_and_measured;
  std::map<std::string, uint64_t> counters;
  int share_configs = 0;
  for (const auto& e : visitor.events) {
    if (e.record.kind == SP_KIND_COUNTER) counters[e.name] = e.record.arg;
    if (e.record.kind == SP_KIND_CONFIG_F64 && e.name == "counter_share") {
      share_configs++;
      double share = 0;
      std::memcpy(&share, &e.record.arg, sizeof share);
      CHECK(share == STALLPROF_DEFAULT_COUNTER_SHARE);
    }
    if (e.record.kind != SP_KIND_SPAN) continue;
    auto& [spans, measured] = spans_and_measured[e.name];
    spans++;
    measured += (e.record.flags & SP_SPAN_HAS_CPU) != 0;
  }
  for (const auto& [name, counts] : spans_and_measured) UNSCOPED_INFO(name << ": " << counts.first << " spans, " << counts.second << " measured");
  CHECK(spans_and_measured["fast"].first == 2000);
  CHECK(spans_and_measured["fast"].second >= 1);
  // The budget's bound: a fresh thread's credit (20 ms of wall time) and the
  // loop's own wall time, at the default share, over what one span's reads
  // cost. The probe's difference holds a little more than the reads the
  // budget charges (measured 0.95-1.1x the bound here, up to 1.6x under
  // TSan), so 2x and 4 spans of slack; a budget with 4x the credit measured
  // 3x the bound, and reading on every span would measure all 2000. Under
  // TSan, whose instrumentation makes one probe a poor guide to the reads'
  // cost (2.9x the bound in a CI run on 2026-12-08), 4x: the plain and ASan
  // builds keep the 2x that tells the 4x credit apart.
#if defined(__SANITIZE_THREAD__)
  constexpr double kSlack = 4;
#else
  constexpr double kSlack = 2;
#endif
  REQUIRE(counters.count("read_cost_ns"));
  REQUIRE(counters.count("fast_loop_ns"));
  const double read_cost_ns = std::max<double>(1, static_cast<double>(counters["read_cost_ns"]));
  const double allowed = (20e6 + static_cast<double>(counters["fast_loop_ns"])) * STALLPROF_DEFAULT_COUNTER_SHARE / read_cost_ns;
  INFO("one span's counter reads " << read_cost_ns << " ns, loop " << counters["fast_loop_ns"] << " ns: at most "
                                   << allowed << " measured");
  CHECK(spans_and_measured["fast"].second <= kSlack * allowed + 4);
  CHECK(allowed < 200);  // the check above still tells a budget from none
  CHECK(spans_and_measured["slow"] == std::make_pair(4, 4));
  CHECK(spans_and_measured["forced"] == std::make_pair(3, 3));
  CHECK(share_configs == 1);  // the trace says spans were skipped, once
}

TEST_CASE("The client kind set before the first record is recorded in the lane flags", "[client]") {
  auto segment = MakeSegment();
  RecordingVisitor visitor;
  auto result = RunInChild(segment.get(), &visitor, segment->EnvValue(), [] {
    stallprof_set_client_kind(STALLPROF_CLIENT_PYTHON_CTYPES);
    stallprof_instant(stallprof_name("x"), 0, 0);
    return 0;
  });
  REQUIRE(result.exit_code == 0);
  REQUIRE(visitor.owners.size() == 1);
  CHECK(visitor.owners[0].flags == SP_LANE_FLAG_PYTHON_CTYPES);
}

TEST_CASE("Loader scopes are unique across processes and start at 1", "[client]") {
  auto segment = MakeSegment();
  std::set<uint32_t> seen;
  for (int child = 0; child < 3; ++child) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    auto result = RunInChild(nullptr, nullptr, segment->EnvValue(), [&] {
      uint16_t ids[2] = {stallprof_new_scope(), stallprof_new_scope()};
      return write(fds[1], ids, sizeof ids) == sizeof ids ? 0 : 1;
    });
    REQUIRE(result.exit_code == 0);
    uint16_t ids[2] = {0, 0};
    REQUIRE(read(fds[0], ids, sizeof ids) == sizeof ids);
    seen.insert(ids[0]);
    seen.insert(ids[1]);
    close(fds[0]);
    close(fds[1]);
  }
  CHECK(seen == std::set<uint32_t>{1, 2, 3, 4, 5, 6});
}
