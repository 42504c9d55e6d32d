// The drain visitor: lane generations become trace threads, per-lane name ids
// become trace-global strings, records land in the right columns, configs and
// drops become their chunks. Fed directly, then read back with LoadTrace.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstring>

#include "collect/drain.h"
#include "trace/reader.h"

using namespace stallprof;
using namespace stallprof::collect;

namespace {

sp_record Span(uint32_t name, uint64_t start, uint64_t duration, uint64_t arg, uint16_t scope = 0) {
  sp_record r{};
  r.kind = SP_KIND_SPAN;
  r.name = name;
  r.start_ns = start;
  r.duration_ns = duration;
  r.arg = arg;
  r.scope = scope;
  return r;
}

}  // namespace

TEST_CASE("the drainer maps lanes, generations and per-lane names into one consistent trace") {
  const std::string path = "/tmp/stallprof-test-drain-" + std::to_string(getpid()) + ".pb";
  pb::TraceHeader header;
  header.set_version_major(kTraceVersionMajor);
  auto writer = TraceWriter::Create(path, header);
  REQUIRE(writer.ok());
  TraceSink sink(std::move(*writer));
  LiveCounters live;
  live.main_pid = getpid();
  Drainer drainer(sink, live);

  const uint32_t me = static_cast<uint32_t>(getpid());
  ring::LaneOwner a{.lane = 0, .generation = 1, .pid = me, .tid = me, .flags = SP_LANE_FLAG_PYTHON_CEXT};
  ring::LaneOwner b{.lane = 1, .generation = 1, .pid = me, .tid = me, .flags = 0};
  ring::LaneOwner a2{.lane = 0, .generation = 2, .pid = me, .tid = me, .flags = SP_LANE_FLAG_PYTHON_CTYPES};

  drainer.OnLaneOwner(a);
  drainer.OnLaneOwner(b);
  // The same text under different per-lane ids on two lanes is one trace string.
  drainer.OnName(a, 1, names::kWait);
  drainer.OnName(b, 5, names::kWait);
  drainer.OnName(b, 6, "custom");
  drainer.OnName(b, 7, "RandomSampler");
  drainer.OnRecord(a, Span(1, 1000, 400, 0, 3));
  drainer.OnRecord(b, Span(5, 2000, 100, 1));
  sp_record cpu = Span(6, 3000, 50, 2);
  cpu.flags = SP_SPAN_HAS_CPU;
  cpu.cpu_ns = 40;
  cpu.delay_ns = 5;
  drainer.OnRecord(b, cpu);
  sp_record instant{};
  instant.kind = SP_KIND_INSTANT;
  instant.name = 6;
  instant.start_ns = 3500;
  instant.duration_ns = 999;  // ignored for instants
  drainer.OnRecord(b, instant);
  sp_record cfg{};
  cfg.kind = SP_KIND_CONFIG_STR;
  cfg.name = 6;  // key "custom"
  cfg.arg = 7;   // value: per-lane name 7
  cfg.scope = 3;
  drainer.OnRecord(b, cfg);
  sp_record cfg_f{};
  cfg_f.kind = SP_KIND_CONFIG_F64;
  cfg_f.name = 6;
  double half = 0.5;
  std::memcpy(&cfg_f.arg, &half, sizeof(half));
  drainer.OnRecord(b, cfg_f);
  drainer.OnLaneReleased(a, 3);
  // Lane 0 claimed again by another thread: a new trace thread, fresh names.
  drainer.OnLaneOwner(a2);
  drainer.OnName(a2, 1, "other");
  drainer.OnRecord(a2, Span(1, 4000, 10, 9));
  drainer.FlushAll();
  CHECK(drainer.spans() == 5);
  CHECK(live.iterations.load() == 2);
  CHECK(live.records.load() == 5);
  pb::Chunk footer;
  footer.mutable_footer()->set_spans(5);
  sink.Write(footer);
  REQUIRE(sink.Close().ok());

  auto t = LoadTrace(path);
  REQUIRE(t.ok());
  REQUIRE(t->threads.size() == 3);
  CHECK(t->threads[0].client == ClientKind::kPythonCext);
  CHECK(t->threads[0].dropped == 3);
  CHECK(t->threads[1].client == ClientKind::kC);
  CHECK(t->threads[2].client == ClientKind::kPythonCtypes);
  CHECK(t->threads[2].lane_generation == 2);
  CHECK_FALSE(t->threads[0].name.empty());  // comm of this test process
  REQUIRE(t->processes.size() == 1);
  CHECK(t->processes[0].pid == me);
  REQUIRE(t->spans.size() == 5);
  auto wait = t->FindString(names::kWait);
  REQUIRE(wait.has_value());
  // Spans by thread: a's wait, then b's wait, cpu span, instant, then a2's.
  std::vector<std::string> got;
  for (size_t i = 0; i < t->spans.size(); ++i) got.push_back(t->strings[t->spans.name[i]]);
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<std::string>{"custom", "custom", names::kWait, names::kWait, "other"});
  for (size_t i = 0; i < t->spans.size(); ++i) {
    if (t->spans.start_ns[i] == 3000) {
      CHECK(t->spans.has_cpu[i] == 1);
      CHECK(t->spans.cpu_ns[i] == 40);
      CHECK(t->spans.delay_ns[i] == 5);
    }
    if (t->spans.start_ns[i] == 3500) {
      CHECK(t->spans.kind[i] == SpanKind::kInstant);
      CHECK(t->spans.duration_ns[i] == 0);
    }
    if (t->spans.start_ns[i] == 1000) CHECK(t->spans.scope[i] == 3);
  }
  REQUIRE(t->configs.size() == 2);
  CHECK(t->configs[0].key == "custom");
  CHECK(t->configs[0].scope == 3);
  CHECK(t->configs[0].type == ConfigValue::Type::kStr);
  CHECK(t->configs[0].str == "RandomSampler");
  CHECK(t->configs[1].type == ConfigValue::Type::kF64);
  CHECK(t->configs[1].f64 == 0.5);
  std::remove(path.c_str());
}

TEST_CASE("the live stall percentage is the main process's wait over the recent window") {
  LiveCounters live;
  live.main_pid = 42;
  CHECK(live.RecentStallPercent(1'000'000'000) < 0);  // no data yet
  // Main process: 10 steps of 100 ms, each waiting 25 ms.
  for (uint64_t i = 1; i <= 10; ++i) live.AddWait(42, i * 100'000'000, 25'000'000);
  live.AddWait(7, 900'000'000, 90'000'000);  // another process: ignored
  CHECK(live.RecentStallPercent(1'000'000'000) == Approx(250.0 / 925.0 * 100).epsilon(0.01));
}
