// trace_check: loads a trace with LoadTrace and prints a one-screen summary as
// key=value lines (for tests and benchmarks). --names adds per-name counts,
// --time adds load time, spans/s and peak RSS. Exit 0 when the trace loads,
// 3 with one error line otherwise.
#include <fmt/core.h>
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <ctime>
#include <cstring>
#include <map>

#include "trace/reader.h"

int main(int argc, char** argv) {
  bool names = false, timing = false;
  const char* path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--names") == 0) names = true;
    else if (std::strcmp(argv[i], "--time") == 0) timing = true;
    else path = argv[i];
  }
  if (!path) {
    fmt::print(stderr, "usage: trace_check [--names] [--time] trace.pb\n");
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
  fmt::print("run_id={:x}\nhostname={}\nusable_cores={}\nmemory_bytes={}\nbytes={}\n", t.header.run_id,
             t.header.hostname, t.header.usable_cores, t.header.memory_bytes, t.bytes);
  fmt::print("command={}\n", fmt::join(t.header.command, " "));
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
