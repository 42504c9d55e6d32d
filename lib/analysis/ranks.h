// The job view: the ranks of one job across one or more traces.
// Pure computation over TraceAnalysis: no I/O, no printing.
#pragma once

#include <string>
#include <vector>

#include "analysis.h"
#include "common/result.h"

namespace stallprof::analysis {

// One rank of a job: its main (most iterated) loader.
struct RankStats {
  int32_t rank = -1;
  std::string trace_path;
  std::string hostname;
  uint32_t pid = 0;
  std::string loader;
  double samples = 0;
  double epoch_time_s = 0;         // sum of its epoch durations
  double samples_per_s = 0;
  double stall_fraction = 0;
  double fetch_stall_fraction = 0, prep_stall_fraction = 0;
  double mean_compute_s = 0;
  double start_realtime_s = 0;     // first epoch start, aligned across hosts (CLOCK_REALTIME)
  double end_realtime_s = 0;       // last return
};

struct JobAnalysis {
  std::vector<RankStats> ranks;    // ordered by rank
  double global_samples_per_s = 0; // total samples / slowest rank's epoch time
  double sum_local_samples_per_s = 0;
  double scaling_efficiency = 0;   // global / sum of local
  double aligned_span_s = 0;       // earliest start to latest end, host clocks aligned
  int32_t straggler_rank = -1;
  std::string straggler_reason;
};

// Combines the analyses of one or more traces of one job. Fails with an
// UnsupportedError when fewer than two ranks are found.
Result<JobAnalysis> AnalyzeJob(const std::vector<TraceAnalysis>& traces);

}  // namespace stallprof::analysis
