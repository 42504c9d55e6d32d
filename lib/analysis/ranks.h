// The job view (docs/analysis.md "Ranks and processes"): the processes of one
// or more traces that iterated DataLoaders, split into ranks (processes with
// rank identity) and other processes (hogwild trainers, subprocess pools);
// per loader, identified across ranks by its name, the ranks side by side,
// global against local throughput, and the stragglers with their measured
// cause. Pure computation over TraceAnalysis: no I/O, no printing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis.h"
#include "common/result.h"

namespace stallprof::analysis {

// A straggler is a rank whose steady time (RankLoaderStats::steady_time_s)
// exceeds the median of the other ranks' by more than
// max(kStragglerMinMargin, kStragglerSpreadFactor x the others' MAD / median):
// slower than their run-to-run spread, and never for a few percent (ranks that
// run the same script on the same data differ by a few percent from
// scheduling and page-cache luck alone).
inline constexpr double kStragglerMinMargin = 0.05;
inline constexpr double kStragglerSpreadFactor = 3;

// Above this many ranks the text report gives each loader one line with the
// distribution over the ranks; the per-rank table is printed on request.
inline constexpr size_t kManyRanks = 8;

// One loader (all the loaders of that name in the process, merged) on one rank.
struct RankLoaderStats {
  int32_t rank = -1;
  std::string trace_path;
  std::string hostname;
  uint32_t pid = 0;
  uint64_t steps = 0;              // next() calls, warm-up included
  double samples = 0;
  double epoch_time_s = 0;         // sum of its epoch durations
  double samples_per_s = 0;        // samples / epoch_time_s
  double stall_fraction = 0;       // steady state, the loader's (the account's), weighted by steady step time
  double fetch_stall_fraction = 0, prep_stall_fraction = 0;
  Cause bottleneck = Cause::kCompute;  // its most iterated loader's of that name (the account's largest cause)
  // Per step in the steady state (the first --warmup iterations of each epoch
  // left out).
  double wait_per_step_s = 0;
  double compute_per_step_s = 0;
  // steps x (wait + compute) per steady step: the epoch time at the rank's
  // steady pace. What ranks are compared on: the measured epoch time also
  // holds when each rank started its epoch and how long its workers took to
  // start, which differ between ranks in lock step (DDP) that run equally fast.
  double steady_time_s = 0;
  double start_realtime_s = 0;     // first epoch start, aligned across hosts (CLOCK_REALTIME)
  double end_realtime_s = 0;       // last return of next()
  bool straggler = false;
};

enum class StragglerCause { kMoreWait, kMoreCompute, kMoreWork };
// "more wait", "more compute per step", "more samples or steps"
const char* ToString(StragglerCause cause);

struct Straggler {
  int32_t rank = -1;
  double steady_time_s = 0;
  double others_steady_time_s = 0;  // median of the other ranks'
  double slower_by = 0;             // steady_time_s / others_steady_time_s - 1
  double margin = 0;                // the relative margin it exceeded
  // Its extra steady time over the others' median split by cause (seconds):
  // steps x (its wait per step - theirs), steps x (its compute per step -
  // theirs), (its steps - theirs) x their step time. The largest is the cause.
  double extra_wait_s = 0, extra_compute_s = 0, extra_work_s = 0;
  StragglerCause cause = StragglerCause::kMoreWait;
  std::string reason;              // the cause with its figures, for people
};

struct Spread {
  double min = 0, median = 0, max = 0;
};

// One loader, by name, across the ranks that iterated it.
struct JobLoader {
  std::string name;
  std::vector<RankLoaderStats> ranks;  // ordered by rank
  Spread samples_per_s, epoch_time_s, steady_time_s, stall_fraction, wait_per_step_s, compute_per_step_s;
  double global_samples_per_s = 0;     // all ranks' samples / the slowest rank's epoch time
  double sum_local_samples_per_s = 0;
  double scaling_efficiency = 0;       // global / sum of local
  double aligned_span_s = 0;           // earliest start to latest end, host clocks aligned
  // The slowest rank against the others, straggler or not: what the margin
  // was compared with (0 with a single rank).
  int32_t slowest_rank = -1;
  double slowest_slower_by = 0;        // its steady time / the others' median - 1
  double slowest_margin = 0;
  std::vector<Straggler> stragglers;   // ranks beyond the margin, ordered by rank; empty when none
};

// A process without rank identity that iterated loaders: shown as itself,
// never compared as a rank.
struct ProcessLoaderStats {
  std::string name;
  uint64_t steps = 0;
  double samples = 0;
  double samples_per_s = 0;
  double stall_fraction = 0;
};

struct JobProcess {
  std::string trace_path;
  std::string hostname;
  uint32_t pid = 0;
  uint32_t ppid = 0;
  int32_t inherited_rank = -1;     // RANK it shares with other processes of the trace, none of them a rank; -1 none
  std::string command;
  std::vector<ProcessLoaderStats> loaders;
};

struct JobAnalysis {
  std::vector<int32_t> ranks;          // the ranks found, ascending
  std::vector<JobLoader> loaders;      // by name; most steps first; empty without ranks
  std::vector<JobProcess> processes;   // processes without rank identity, by trace and pid
};

// Combines the analyses of one or more traces of one job. A process is a rank
// when it has rank identity (ProcessSummary::rank) and no process of the trace
// that iterated loaders and is its ancestor has the same rank (a rank's own
// subprocesses inherit its RANK). Fails with an UnsupportedError when the
// traces hold fewer than two processes that iterated a loader.
Result<JobAnalysis> AnalyzeJob(const std::vector<TraceAnalysis>& traces);

namespace internal {
// Fills analysis.processes from the trace's process table and sets each
// loader's and each uncaught error's rank to its process's rank identity
// (called by AnalyzeCore once analysis.loaders and analysis.quality are known).
void DescribeProcesses(const Trace& trace, TraceAnalysis& analysis);
}  // namespace internal

}  // namespace stallprof::analysis
