#include "parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "ranks.h"

namespace stallprof::analysis {

namespace {

std::optional<WriteFailure> WriteFailureOf(const Trace& trace) {
  if (!trace.footer || trace.footer->write_failed_ns == 0) return std::nullopt;
  const uint64_t failed = trace.footer->write_failed_ns, start = trace.header.start_monotonic_ns;
  return WriteFailure{failed > start ? static_cast<double>(failed - start) / 1e9 : 0, trace.footer->events_lost};
}

}  // namespace

unsigned DefaultJobs() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::vector<TraceOutcome> AnalyzeTraces(const std::vector<std::string>& paths, const AnalysisOptions& options_in,
                                        unsigned jobs, const std::function<void(size_t done)>& on_done) {
  const size_t n = paths.size();
  std::vector<TraceOutcome> outcomes(n);
  // Many traces are a job's ranks, alike: the advice's predictions (a few ms
  // of simulation per loader and count on a long trace) would double the
  // analysis of a 256-rank job for figures `stallprof whatif` gives on any one
  // rank's trace.
  AnalysisOptions options = options_in;
  if (n > kManyRanks) options.predict_advice = false;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex done_mutex;
  size_t done = 0;
  // Paths are taken in order, so when one fails every earlier path has been
  // taken and finishes: the first failure in path order is among the outcomes.
  auto work = [&] {
    for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
      TraceOutcome& out = outcomes[i];
      out.path = paths[i];
      auto digest = LoadForAnalysis(paths[i]);
      if (digest.ok()) {
        out.write_failed = WriteFailureOf(digest->trace);
        out.analysis = Analyze(*digest, options);
      } else {
        out.analysis = digest.error();
      }
      if (!out.analysis->ok()) failed = true;
      if (on_done) {
        std::lock_guard<std::mutex> lock(done_mutex);
        on_done(++done);
      }
    }
  };
  const size_t threads = std::min<size_t>(n, jobs == 0 ? DefaultJobs() : jobs);
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  for (size_t i = 0; i < n; ++i)
    if (!outcomes[i].analysis || !outcomes[i].analysis->ok()) {
      outcomes.resize(outcomes[i].analysis ? i + 1 : i);
      break;
    }
  return outcomes;
}

}  // namespace stallprof::analysis
