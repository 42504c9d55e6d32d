// Several traces (the ranks and nodes of one job) analyzed in parallel: each
// trace is streamed (LoadForAnalysis) and analyzed in a task of its own, on a
// bounded pool of threads. A trace's digest lives only while its task runs,
// so memory holds at most `jobs` digests at once plus the analyses kept.
#pragma once

#include <string>
#include <vector>

#include "analysis.h"
#include "common/result.h"

namespace stallprof::analysis {

// Threads for `jobs` = 0: the cores this process may run on.
unsigned DefaultJobs();

// LoadForAnalysis + Analyze of every path, at most `jobs` (>= 1; 0 =
// DefaultJobs()) at a time, never more threads than paths. The analyses are
// in the order of `paths` and identical to analyzing the paths one by one.
// On failure: the error of the first failing path in `paths` order, as the
// one-by-one loop would have stopped there (no new trace is started once one
// has failed).
Result<std::vector<TraceAnalysis>> AnalyzeTraces(const std::vector<std::string>& paths, const AnalysisOptions& options,
                                                 unsigned jobs);

}  // namespace stallprof::analysis
