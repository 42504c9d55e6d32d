#include "parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

namespace stallprof::analysis {

unsigned DefaultJobs() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

Result<std::vector<TraceAnalysis>> AnalyzeTraces(const std::vector<std::string>& paths, const AnalysisOptions& options,
                                                 unsigned jobs) {
  const size_t n = paths.size();
  std::vector<std::optional<Result<TraceAnalysis>>> results(n);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  // Paths are taken in order, so when one fails every earlier path has been
  // taken and finishes: the first failure in path order is among the results.
  auto work = [&] {
    for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
      auto digest = LoadForAnalysis(paths[i]);
      results[i] = digest.ok() ? Analyze(*digest, options) : Result<TraceAnalysis>(digest.error());
      if (!results[i]->ok()) failed = true;
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
  std::vector<TraceAnalysis> out;
  out.reserve(n);
  for (auto& r : results) {
    if (!r) break;  // not started after a failure, which comes first
    if (!r->ok()) return r->error();
    out.push_back(std::move(**r));
  }
  return out;
}

}  // namespace stallprof::analysis
