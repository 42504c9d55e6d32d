// trace_check: loads a trace with LoadTrace and prints a one-screen summary as
// key=value lines (for tests and benchmarks). --names adds per-name counts,
// --time adds load time, spans/s and peak RSS. --jsonl instead prints every
// record as one JSON line (thread, config, span/instant/counter, then one
// summary line with dropped and invalid counts) for tests/tools/check_capture.py.
// Exit 0 when the trace loads, 3 with one error line otherwise.
#include <fmt/core.h>
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <ctime>
#include <cstring>
#include <algorithm>
#include <map>
#include <string>

#include "report/json_writer.h"
#include "trace/reader.h"

namespace {

const char* KindName(stallprof::SpanKind kind) {
  switch (kind) {
    case stallprof::SpanKind::kInstant: return "instant";
    case stallprof::SpanKind::kCounter: return "counter";
    case stallprof::SpanKind::kSpan: break;
  }
  return "span";
}

// Lane flags the client set (SP_LANE_FLAG_PYTHON_CEXT = 1, _CTYPES = 2); the
// trace keeps them as ThreadInfo::client.
uint32_t LaneFlags(stallprof::ClientKind client) {
  switch (client) {
    case stallprof::ClientKind::kPythonCext: return 1;
    case stallprof::ClientKind::kPythonCtypes: return 2;
    case stallprof::ClientKind::kC: break;
  }
  return 0;
}

// One JSON object per line; fields as tests/tools/check_capture.py reads them.
void PrintJsonLines(const stallprof::Trace& t) {
  using stallprof::report::JsonWriter;
  std::string line;
  auto emit = [&line] {
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
    line.clear();
  };
  uint64_t dropped = 0;
  for (const auto& th : t.threads) {
    dropped += th.dropped;
    JsonWriter(line).BeginObject().Field("type", "thread").Field("lane", th.lane).Field("gen", th.lane_generation)
        .Field("pid", th.pid).Field("tid", th.tid).Field("flags", LaneFlags(th.client)).Field("name", th.name)
        .Field("dropped", th.dropped).EndObject();
    emit();
  }
  for (const auto& c : t.configs) {
    JsonWriter w(line);
    w.BeginObject().Field("type", "config").Field("pid", c.pid).Field("scope", c.scope).Field("key", c.key);
    switch (c.type) {
      case stallprof::ConfigValue::Type::kU64: w.Field("u64", c.u64); break;
      case stallprof::ConfigValue::Type::kF64: w.Field("f64", c.f64); break;
      case stallprof::ConfigValue::Type::kStr: w.Field("str", c.str); break;
    }
    w.EndObject();
    emit();
  }
  const auto& s = t.spans;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto& th = t.threads[s.thread[i]];
    JsonWriter(line).BeginObject().Field("type", KindName(s.kind[i])).Field("name", t.strings[s.name[i]])
        .Field("pid", th.pid).Field("tid", th.tid).Field("lane", th.lane).Field("flags", LaneFlags(th.client))
        .Field("start", s.start_ns[i]).Field("dur", s.duration_ns[i]).Field("cpu", s.cpu_ns[i])
        .Field("delay", s.delay_ns[i]).Field("has_cpu", s.has_cpu[i] != 0).Field("arg", s.arg[i])
        .Field("scope", s.scope[i]).EndObject();
    emit();
  }
  JsonWriter w(line);
  w.BeginObject().Field("type", "summary").Field("spans", static_cast<uint64_t>(s.size()))
      .Field("dropped", t.footer ? std::max(dropped, t.footer->dropped) : dropped)
      .Field("invalid", t.footer ? t.footer->invalid_records : 0).Field("footer", t.footer.has_value())
      .Field("truncated", t.truncated);
  if (t.footer) w.Field("exit_code", t.footer->exit_code).Field("term_signal", t.footer->term_signal);
  w.EndObject();
  emit();
}

}  // namespace

int main(int argc, char** argv) {
  bool names = false, timing = false, jsonl = false;
  const char* path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--names") == 0) names = true;
    else if (std::strcmp(argv[i], "--time") == 0) timing = true;
    else if (std::strcmp(argv[i], "--jsonl") == 0) jsonl = true;
    else path = argv[i];
  }
  if (!path) {
    fmt::print(stderr, "usage: trace_check [--names] [--time] [--jsonl] trace.pb\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const clock_t c0 = clock();
  auto trace = stallprof::LoadTrace(path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu_seconds = static_cast<double>(clock() - c0) / CLOCKS_PER_SEC;
  if (!trace.ok()) {
    fmt::print(stderr, "trace_check: error: {}\n", trace.error().message);
    return 3;
  }
  const auto& t = *trace;
  if (jsonl) {
    PrintJsonLines(t);
    return 0;
  }
  uint64_t dropped = 0;
  for (const auto& th : t.threads) dropped += th.dropped;
  fmt::print("spans={}\nthreads={}\nprocesses={}\nstrings={}\nconfigs={}\n", t.spans.size(), t.threads.size(),
             t.processes.size(), t.strings.size(), t.configs.size());
  size_t samples = 0;
  for (const auto& p : t.process_series) samples += p.t_ns.size();
  fmt::print("process_series={}\nprocess_samples={}\nsystem_samples={}\n", t.process_series.size(), samples,
             t.system.t_ns.size());
  fmt::print("truncated={}\nfooter={}\nthread_dropped={}\n", t.truncated ? 1 : 0, t.footer ? 1 : 0, dropped);
  if (t.footer)
    fmt::print("exit_code={}\nterm_signal={}\nfooter_spans={}\nfooter_dropped={}\ninvalid={}\n", t.footer->exit_code,
               t.footer->term_signal, t.footer->spans, t.footer->dropped, t.footer->invalid_records);
  if (t.footer)
    fmt::print("write_failed={}\nevents_lost={}\n", t.footer->write_failed_ns != 0 ? 1 : 0, t.footer->events_lost);
  fmt::print("run_id={:x}\nhostname={}\nusable_cores={}\nmemory_bytes={}\nbytes={}\n", t.header.run_id,
             t.header.hostname, t.header.usable_cores, t.header.memory_bytes, t.bytes);
  fmt::print("command={}\npage_bytes={}\npage_reclaim={}\n", fmt::join(t.header.command, " "), t.header.page_bytes,
             t.header.page_reclaim);
  fmt::print("clock_source={}\n", t.header.clock_source == stallprof::ClockSource::kTsc ? "tsc" : "monotonic");
  if (t.header.clock_source == stallprof::ClockSource::kTsc && t.footer)
    fmt::print("tsc_hz={:.0f}\ntsc_drift_ns={}\ntsc_drift_over_ns={}\ntsc_max_error_ns={}\n", t.header.tsc_hz,
               t.footer->tsc_drift_ns, t.footer->tsc_drift_over_ns, t.footer->tsc_max_error_ns);
  if (names) {
    std::map<std::string, uint64_t> count;
    for (uint32_t n : t.spans.name) ++count[t.strings[n]];
    for (const auto& [name, c] : count) fmt::print("name {} {}\n", name.empty() ? "-" : name, c);
    for (const auto& th : t.threads) fmt::print("thread pid={} tid={} name={} dropped={}\n", th.pid, th.tid, th.name, th.dropped);
    for (const auto& c : t.configs)
      fmt::print("config pid={} scope={} {}={}\n", c.pid, c.scope, c.key,
                 c.type == stallprof::ConfigValue::Type::kStr   ? c.str
                 : c.type == stallprof::ConfigValue::Type::kF64 ? fmt::format("{}", c.f64)
                                                                : fmt::format("{}", c.u64));
  }
  if (timing) {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    fmt::print("load_cpu_seconds={:.3f}\nspans_per_cpu_second={:.0f}\n", cpu_seconds,
               static_cast<double>(t.spans.size()) / cpu_seconds);
    fmt::print("load_seconds={:.3f}\nspans_per_second={:.0f}\nbytes_per_span={:.2f}\npeak_rss_bytes={}\n", seconds,
               static_cast<double>(t.spans.size()) / seconds,
               t.spans.size() ? static_cast<double>(t.bytes) / static_cast<double>(t.spans.size()) : 0.0,
               static_cast<uint64_t>(ru.ru_maxrss) * 1024);
  }
  return 0;
}
