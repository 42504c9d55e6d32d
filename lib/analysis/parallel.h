// Several traces (the ranks and nodes of one job) analyzed in parallel: each
// trace is streamed (LoadForAnalysis) and analyzed in a task of its own, on a
// bounded pool of threads. A trace's digest lives only while its task runs,
// so memory holds at most `jobs` digests at once plus the analyses kept.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis.h"
#include "common/result.h"

namespace stallprof::analysis {

// Threads for `jobs` = 0: the cores this process may run on.
unsigned DefaultJobs();

// Writing the trace failed (disk full) this long into the run; the events
// after it were lost, so its figures cover the part before.
struct WriteFailure {
  double after_s = 0;
  uint64_t events_lost = 0;
};

// One trace's outcome: what its footer says of its completeness (known once
// it is loaded, even when its analysis then fails), and its analysis or the
// error that stopped it (loading or analyzing).
struct TraceOutcome {
  std::string path;
  std::optional<WriteFailure> write_failed;
  std::optional<Result<TraceAnalysis>> analysis;
};

// LoadForAnalysis + Analyze of every path, at most `jobs` at a time (0 =
// DefaultJobs()), never on more threads than paths. The outcomes are in the
// order of `paths` and identical to analyzing the paths one by one, which
// stops at the first failure: they end with the first failing path's
// (no trace is started once one has failed, and the outcomes of later
// traces that had already started are dropped). Beyond kManyRanks paths the
// analyses make no predictions for their advice (predict_advice).
// `on_done`, when set, is called with the number of traces finished so far
// after each one, one call at a time (from the worker threads): a progress line.
std::vector<TraceOutcome> AnalyzeTraces(const std::vector<std::string>& paths, const AnalysisOptions& options,
                                        unsigned jobs, const std::function<void(size_t done)>& on_done = {});

}  // namespace stallprof::analysis
