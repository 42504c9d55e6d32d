// TraceWriter -> LoadTrace round trips: every chunk type comes back as written.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <random>

#include "trace/reader.h"
#include "trace/writer.h"

using namespace stallprof;

namespace {

std::string TempPath(const char* tag) {
  return std::string("/tmp/stallprof-test-") + tag + "-" + std::to_string(getpid()) + ".pb";
}

pb::TraceHeader TestHeader() {
  pb::TraceHeader h;
  h.set_version_major(kTraceVersionMajor);
  h.set_version_minor(kTraceVersionMinor);
  h.set_tool_version("test");
  h.add_command("python3");
  h.add_command("train.py");
  h.set_hostname("host");
  h.set_kernel("Linux 6.1");
  h.set_cwd("/work");
  h.set_usable_cores(2);
  h.set_online_cores(4);
  h.set_memory_bytes(1ull << 34);
  h.set_start_monotonic_ns(1000);
  h.set_start_realtime_ns(-5);
  h.set_page_cache_bytes(123);
  h.set_ring_bytes(64ull << 20);
  h.set_ring_lanes(128);
  h.set_sample_period_ms(100);
  h.set_clock_resolution_ns(1);
  h.set_run_id(0xabcdef);
  h.set_page_cache_copy_ns_per_byte(0.125);
  return h;
}

void WriteStrings(TraceWriter& w, uint32_t first, std::initializer_list<const char*> values) {
  pb::Chunk c;
  c.mutable_strings()->set_first_id(first);
  for (auto* v : values) c.mutable_strings()->add_value(v);
  REQUIRE(w.Write(c).ok());
}

void WriteThread(TraceWriter& w, uint32_t id, uint32_t tid, uint32_t name) {
  pb::Chunk c;
  auto* t = c.mutable_thread();
  t->set_thread_id(id);
  t->set_pid(100);
  t->set_tid(tid);
  t->set_lane(id);
  t->set_lane_generation(7);
  t->set_name(name);
  t->set_client(1);
  REQUIRE(w.Write(c).ok());
}

}  // namespace

TEST_CASE("every chunk type written by TraceWriter loads back unchanged") {
  const std::string path = TempPath("roundtrip");
  {
    auto w = TraceWriter::Create(path, TestHeader());
    REQUIRE(w.ok());
    WriteStrings(**w, 1, {"dataloader.wait", "worker", "batch_size"});
    pb::Chunk proc;
    proc.mutable_process()->set_pid(100);
    proc.mutable_process()->set_ppid(1);
    proc.mutable_process()->set_rank(3);
    proc.mutable_process()->set_local_rank(1);
    proc.mutable_process()->set_world_size(8);
    proc.mutable_process()->set_comm("python3");
    proc.mutable_process()->add_cmdline("python3");
    proc.mutable_process()->set_first_seen_ns(42);
    REQUIRE((*w)->Write(proc).ok());
    WriteThread(**w, 0, 101, 2);

    SpanBatchBuilder b(0);
    b.Add({.start_ns = 5000, .duration_ns = 100, .name = 1, .arg = 9, .scope = 2, .kind = 1});
    b.Add({.start_ns = 5200, .duration_ns = 0, .name = 1, .arg = 1, .scope = 2, .kind = 4,
           .has_cpu = CpuMeasured::kYes, .cpu_ns = 70, .delay_ns = 3});
    pb::Chunk spans;
    b.TakeInto(spans);
    REQUIRE((*w)->Write(spans).ok());

    pb::Chunk cfg;
    cfg.mutable_config()->set_pid(100);
    cfg.mutable_config()->set_scope(2);
    cfg.mutable_config()->set_key(3);
    cfg.mutable_config()->set_u64(64);
    REQUIRE((*w)->Write(cfg).ok());
    cfg.mutable_config()->set_f64(0.5);
    REQUIRE((*w)->Write(cfg).ok());
    cfg.mutable_config()->set_str("RandomSampler");
    REQUIRE((*w)->Write(cfg).ok());

    pb::Chunk ps;
    auto* p = ps.mutable_process_samples();
    p->set_pid(100);
    for (uint64_t i = 0; i < 3; ++i) {
      p->add_t_ns(i * 10);
      p->add_cpu_ns(i * 20);
      p->add_read_bytes(i * 30);
      p->add_rchar(i * 40);
      p->add_rss_bytes(i * 50);
      p->add_delay_ns(i * 60);
      p->add_threads(static_cast<uint32_t>(i + 1));
      p->add_minor_faults(i * 70);
      p->add_system_cpu_ns(i * 5);
      p->add_main_thread_cpu_ns(i * 15);
      p->add_main_thread_delay_ns(i * 2);
    }
    REQUIRE((*w)->Write(ps).ok());
    REQUIRE((*w)->Write(ps).ok());  // a second chunk of the same pid appends
    // Another pid: its first chunk has fault counts and kernel CPU, its second (an older writer's) none.
    p->set_pid(200);
    REQUIRE((*w)->Write(ps).ok());
    p->clear_minor_faults();
    p->clear_system_cpu_ns();
    p->clear_main_thread_cpu_ns();
    p->clear_main_thread_delay_ns();
    REQUIRE((*w)->Write(ps).ok());

    pb::Chunk ss;
    auto* s = ss.mutable_system_samples();
    s->add_t_ns(1);
    s->add_cpu_busy_ns(2);
    s->add_cpu_total_ns(3);
    s->add_page_cache_bytes(4);
    s->add_disk_read_bytes(5);
    s->add_mem_available_bytes(6);
    REQUIRE((*w)->Write(ss).ok());

    pb::Chunk drops;
    drops.mutable_drops()->set_thread_id(0);
    drops.mutable_drops()->set_dropped(17);
    REQUIRE((*w)->Write(drops).ok());

    pb::Chunk footer;
    auto* f = footer.mutable_footer();
    f->set_exit_code(137);
    f->set_term_signal(9);
    f->set_end_monotonic_ns(99999);
    f->set_spans(2);
    f->set_dropped(17);
    f->set_invalid_records(1);
    REQUIRE((*w)->Write(footer).ok());
    REQUIRE((*w)->Close().ok());
  }

  auto loaded = LoadTrace(path);
  REQUIRE(loaded.ok());
  const Trace& t = *loaded;
  CHECK_FALSE(t.truncated);
  CHECK(t.header.version_major == kTraceVersionMajor);
  CHECK(t.header.command == std::vector<std::string>{"python3", "train.py"});
  CHECK(t.header.hostname == "host");
  CHECK(t.header.start_realtime_ns == -5);
  CHECK(t.header.run_id == 0xabcdef);
  CHECK(t.header.page_cache_copy_ns_per_byte == 0.125);
  CHECK(t.header.ring_lanes == 128);
  REQUIRE(t.strings.size() == 4);
  CHECK(t.strings[0].empty());
  CHECK(t.FindString("batch_size") == 3u);
  REQUIRE(t.processes.size() == 1);
  CHECK(t.processes[0].rank == 3);
  CHECK(t.processes[0].world_size == 8);
  CHECK(t.processes[0].cmdline == std::vector<std::string>{"python3"});
  REQUIRE(t.threads.size() == 1);
  CHECK(t.threads[0].name == "worker");
  CHECK(t.threads[0].client == ClientKind::kPythonCext);
  CHECK(t.threads[0].dropped == 17);
  REQUIRE(t.spans.size() == 2);
  CHECK(t.spans.start_ns == std::vector<uint64_t>{5000, 5200});
  CHECK(t.spans.duration_ns == std::vector<uint64_t>{100, 0});
  CHECK(t.spans.arg == std::vector<uint64_t>{9, 1});
  CHECK(t.spans.scope == std::vector<uint16_t>{2, 2});
  CHECK(t.spans.kind == std::vector<SpanKind>{SpanKind::kSpan, SpanKind::kInstant});
  CHECK(t.spans.has_cpu == std::vector<uint8_t>{0, 1});
  CHECK(t.spans.cpu_ns == std::vector<uint64_t>{0, 70});
  CHECK(t.spans.delay_ns == std::vector<uint64_t>{0, 3});
  CHECK(t.spans.thread == std::vector<uint32_t>{0, 0});
  REQUIRE(t.configs.size() == 3);
  CHECK(t.configs[0].key == "batch_size");
  CHECK(t.configs[0].type == ConfigValue::Type::kU64);
  CHECK(t.configs[0].u64 == 64);
  CHECK(t.configs[1].f64 == 0.5);
  CHECK(t.configs[2].str == "RandomSampler");
  REQUIRE(t.process_series.size() == 2);
  CHECK(t.process_series[0].t_ns.size() == 6);
  CHECK(t.process_series[0].threads[2] == 3);
  CHECK(t.process_series[0].rss_bytes[1] == 50);
  CHECK(t.process_series[0].minor_faults == std::vector<uint64_t>{0, 70, 140, 0, 70, 140});
  CHECK(t.process_series[1].t_ns.size() == 6);
  CHECK(t.process_series[0].system_cpu_ns == std::vector<uint64_t>{0, 5, 10, 0, 5, 10});
  CHECK(t.process_series[1].minor_faults.empty());  // not every chunk had them: none, rather than a misaligned column
  CHECK(t.process_series[1].system_cpu_ns.empty());
  CHECK(t.process_series[0].main_thread_cpu_ns == std::vector<uint64_t>{0, 15, 30, 0, 15, 30});
  CHECK(t.process_series[0].main_thread_delay_ns == std::vector<uint64_t>{0, 2, 4, 0, 2, 4});
  CHECK(t.process_series[1].main_thread_cpu_ns.empty());
  CHECK(t.process_series[1].main_thread_delay_ns.empty());
  CHECK(t.system.mem_available_bytes == std::vector<uint64_t>{6});
  REQUIRE(t.footer.has_value());
  CHECK(t.footer->exit_code == 137);
  CHECK(t.footer->term_signal == 9);
  CHECK(t.footer->invalid_records == 1);
  std::remove(path.c_str());
}

TEST_CASE("spans in any order, with large gaps and mixed columns, round trip exactly") {
  const std::string path = TempPath("order");
  std::mt19937_64 rng(7);
  std::vector<SpanRow> rows;
  for (int i = 0; i < 1000; ++i) {
    SpanRow r;
    r.start_ns = (rng() % 3 == 0) ? rng() : 1'000'000'000ull + rng() % 1'000'000;  // out of order, huge jumps
    r.duration_ns = rng() % 5 == 0 ? rng() >> 1 : rng() % 100000;
    r.name = 1 + static_cast<uint32_t>(rng() % 2);
    r.arg = rng();
    r.scope = (i > 500) ? static_cast<uint32_t>(rng() % 3) : 0;
    r.kind = (i % 7 == 0) ? 5 : 1;
    if (i % 3 == 0) {
      r.has_cpu = CpuMeasured::kYes;
      r.cpu_ns = rng();
      r.delay_ns = rng() % 1000;
    }
    rows.push_back(r);
  }
  {
    auto w = TraceWriter::Create(path, TestHeader());
    REQUIRE(w.ok());
    WriteStrings(**w, 1, {"a", "b"});
    WriteThread(**w, 0, 1, 0);
    WriteThread(**w, 1, 2, 0);
    SpanBatchBuilder b(1);
    pb::Chunk c;
    for (size_t i = 0; i < rows.size(); ++i) {
      b.Add(rows[i]);
      if (i == 99 || i == 700) {  // batches of different shapes, reusing the builder
        b.TakeInto(c);
        REQUIRE((*w)->Write(c).ok());
      }
    }
    b.TakeInto(c);
    REQUIRE((*w)->Write(c).ok());
  }
  auto t = LoadTrace(path);
  REQUIRE(t.ok());
  REQUIRE(t->spans.size() == rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO("span " << i);
    CHECK(t->spans.start_ns[i] == rows[i].start_ns);
    CHECK(t->spans.duration_ns[i] == rows[i].duration_ns);
    CHECK(t->spans.name[i] == rows[i].name);
    CHECK(t->spans.arg[i] == rows[i].arg);
    CHECK(t->spans.scope[i] == rows[i].scope);
    CHECK(static_cast<uint32_t>(t->spans.kind[i]) == rows[i].kind);
    CHECK(t->spans.has_cpu[i] == (rows[i].has_cpu == CpuMeasured::kYes));
    CHECK(t->spans.cpu_ns[i] == rows[i].cpu_ns);
    CHECK(t->spans.delay_ns[i] == rows[i].delay_ns);
    CHECK(t->spans.thread[i] == 1);
  }
  std::remove(path.c_str());
}

TEST_CASE("a batch whose spans share name, scope and kind stores those columns once") {
  SpanBatchBuilder b(0);
  for (uint64_t i = 0; i < 100; ++i) b.Add({.start_ns = 1000 + i * 50, .duration_ns = 40, .name = 3, .arg = i});
  pb::Chunk c;
  b.TakeInto(c);
  CHECK(c.spans().name_size() == 1);
  CHECK(c.spans().scope_size() == 0);
  CHECK(c.spans().kind_size() == 0);
  CHECK(c.spans().has_cpu_bits_size() == 0);
  // Back-to-back spans: each start is 10 ns after the previous end.
  CHECK(c.spans().start_delta_ns(5) == 10);
  CHECK(b.empty());
}

TEST_CASE("the clock source, TSC rate and drift round trip, and a trace without them reads as CLOCK_MONOTONIC") {
  const std::string path = TempPath("clock");
  auto write = [&](bool tsc) {
    pb::TraceHeader h = TestHeader();
    if (tsc) {
      h.set_clock_source("tsc");
      h.set_tsc_hz(2.995e9);
    }
    auto w = TraceWriter::Create(path, h);
    REQUIRE(w.ok());
    pb::Chunk footer;
    auto* f = footer.mutable_footer();
    f->set_spans(0);
    if (tsc) {
      f->set_tsc_drift_ns(-1234);
      f->set_tsc_drift_over_ns(60'000'000'000ull);
      f->set_tsc_max_error_ns(85);
    }
    REQUIRE((*w)->Write(footer).ok());
    REQUIRE((*w)->Close().ok());
  };
  write(true);
  auto loaded = LoadTrace(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->header.clock_source == ClockSource::kTsc);
  CHECK(loaded->header.tsc_hz == 2.995e9);
  REQUIRE(loaded->footer.has_value());
  CHECK(loaded->footer->tsc_drift_ns == -1234);
  CHECK(loaded->footer->tsc_drift_over_ns == 60'000'000'000ull);
  CHECK(loaded->footer->tsc_max_error_ns == 85);

  write(false);  // as an older launcher wrote it: no clock fields
  loaded = LoadTrace(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->header.clock_source == ClockSource::kMonotonic);
  CHECK(loaded->header.tsc_hz == 0);
  CHECK(loaded->footer->tsc_drift_ns == 0);
  std::remove(path.c_str());
}

TEST_CASE("the machine's page size round trips, and a trace without it reads 0") {
  const std::string path = TempPath("page");
  auto write = [&](uint32_t page_bytes) {
    pb::TraceHeader h = TestHeader();
    if (page_bytes) h.set_page_bytes(page_bytes);
    auto w = TraceWriter::Create(path, h);
    REQUIRE(w.ok());
    REQUIRE((*w)->Close().ok());
  };
  write(65536);
  auto loaded = LoadTrace(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->header.page_bytes == 65536);
  write(0);  // as a launcher before trace version 1.5 wrote it
  loaded = LoadTrace(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->header.page_bytes == 0);
  std::remove(path.c_str());
}

TEST_CASE("the kernel's page reclaim round trips, and a trace without it reads empty") {
  const std::string path = TempPath("reclaim");
  auto write = [&](const std::string& reclaim) {
    pb::TraceHeader h = TestHeader();
    if (!reclaim.empty()) h.set_page_reclaim(reclaim);
    auto w = TraceWriter::Create(path, h);
    REQUIRE(w.ok());
    REQUIRE((*w)->Close().ok());
  };
  write("mglru");
  auto loaded = LoadTrace(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->header.page_reclaim == "mglru");
  write("");  // as a launcher before trace version 1.7 wrote it
  loaded = LoadTrace(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->header.page_reclaim.empty());
  std::remove(path.c_str());
}

TEST_CASE("the machine's steal column round trips while every system chunk has it, and is dropped otherwise") {
  const std::string path = TempPath("steal");
  // Chunks of two ticks each; `with_steal` says which carry the steal column.
  auto write = [&](std::vector<bool> with_steal) {
    auto w = TraceWriter::Create(path, TestHeader());
    REQUIRE(w.ok());
    uint64_t t = 0;
    for (bool steal : with_steal) {
      pb::Chunk ss;
      auto* s = ss.mutable_system_samples();
      for (int i = 0; i < 2; ++i, ++t) {
        s->add_t_ns(t);
        s->add_cpu_busy_ns(10 * t);
        s->add_cpu_total_ns(20 * t);
        s->add_page_cache_bytes(0);
        s->add_disk_read_bytes(0);
        s->add_mem_available_bytes(0);
        if (steal) s->add_cpu_steal_ns(3 * t);
      }
      REQUIRE((*w)->Write(ss).ok());
    }
    REQUIRE((*w)->Close().ok());
    auto loaded = LoadTrace(path);
    REQUIRE(loaded.ok());
    CHECK(loaded->system.t_ns.size() == 2 * with_steal.size());
    return loaded->system.cpu_steal_ns;
  };
  CHECK(write({true, true}) == std::vector<uint64_t>{0, 3, 6, 9});
  CHECK(write({true, false}).empty());  // a misaligned column would pair steal with the wrong ticks
  CHECK(write({false, true}).empty());
  CHECK(write({false}).empty());  // a launcher before 2026-12-03
  std::remove(path.c_str());
}

TEST_CASE("numbers of every varint length, 1 to 10 bytes, round trip exactly") {
  // The decoder reads a varint of up to 8 bytes in one step and longer ones
  // byte by byte: each length on both sides of its boundary, in every column.
  const std::string path = TempPath("varint");
  std::vector<uint64_t> values;
  for (int bits = 7; bits < 64; bits += 7) {
    values.push_back((uint64_t{1} << bits) - 1);  // the longest of bits / 7 bytes
    values.push_back(uint64_t{1} << bits);        // the shortest of one byte more
  }
  values.push_back(0);
  values.push_back(UINT64_MAX);
  std::vector<SpanRow> rows;
  for (size_t i = 0; i < values.size(); ++i) {
    SpanRow r;
    r.start_ns = 1000 + i;
    r.duration_ns = values[i] >> 1;  // start + duration stays in range
    r.name = 1;
    r.arg = values[i];
    r.has_cpu = CpuMeasured::kYes;
    r.cpu_ns = values[i];
    r.delay_ns = values[values.size() - 1 - i];
    rows.push_back(r);
  }
  {
    auto w = TraceWriter::Create(path, TestHeader());
    REQUIRE(w.ok());
    WriteStrings(**w, 1, {"a"});
    WriteThread(**w, 0, 1, 0);
    SpanBatchBuilder b(0);
    pb::Chunk c;
    for (const auto& r : rows) b.Add(r);
    b.TakeInto(c);
    REQUIRE((*w)->Write(c).ok());
  }
  auto t = LoadTrace(path);
  REQUIRE(t.ok());
  REQUIRE(t->spans.size() == rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO("value " << values[i]);
    CHECK(t->spans.start_ns[i] == rows[i].start_ns);
    CHECK(t->spans.duration_ns[i] == rows[i].duration_ns);
    CHECK(t->spans.arg[i] == rows[i].arg);
    CHECK(t->spans.cpu_ns[i] == rows[i].cpu_ns);
    CHECK(t->spans.delay_ns[i] == rows[i].delay_ns);
  }
  std::remove(path.c_str());
}
