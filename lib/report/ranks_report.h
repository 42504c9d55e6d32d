// The job view's rendering, shared by the text, JSON and HTML reports.
// Rendering only: every number comes from analysis/ranks.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/ranks.h"
#include "analysis_report.h"
#include "json_writer.h"

namespace stallprof::report {

// Whether the process `pid` of the trace at `trace_path` is a rank of `job`.
bool IsRankProcess(const analysis::JobAnalysis& job, const std::string& trace_path, uint32_t pid);

// With many ranks the text details a few of them (RankTable::kAuto): each
// loader's first and slowest rank and its stragglers, ascending.
std::vector<int32_t> DetailedRanks(const analysis::JobAnalysis& job);
// Whether the process `pid` of the trace at `trace_path` is a rank of `job`
// among `detailed` (DetailedRanks).
bool DetailedRank(const analysis::JobAnalysis& job, const std::vector<int32_t>& detailed, const std::string& trace_path,
                  uint32_t pid);

// "[rank R] " for a loader of a rank of `job`, else "[pid P] ": what tells
// apart the verdict lines of loaders that share a name.
std::string WhoInJob(const analysis::JobAnalysis& job, const std::string& trace_path, const analysis::LoaderAnalysis& loader);

// One headline per loader over all ranks (verdicts counted, stall spread):
// what replaces one verdict line per rank when there are many ranks.
std::string JobHeadlines(const analysis::JobAnalysis& job);

// The "Ranks" section (with two ranks or more) and the "Processes" section
// (processes without rank identity), each starting with a blank line.
std::string JobText(const analysis::JobAnalysis& job, RankTable table, Colour colour);

// The "job" object of analyze --json.
void WriteJobJson(JsonWriter& w, const analysis::JobAnalysis& job);

}  // namespace stallprof::report
