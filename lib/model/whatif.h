// What-if sweeps (`stallprof whatif`): scenarios built from flags, predicted
// with model::Predict against the measured baseline, and the SVG plot of
// throughput against the swept variable with bottleneck regions marked.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/model.h"

namespace stallprof::model {

// The raw flag texts; empty = not given.
struct SweepFlags {
  std::string cores;         // "2,4,8"
  bool cores_given = false;  // --cores was on the command line (even as '')
  std::string workers;       // "auto" | "N[,N]"
  std::string cache;         // "0,50G,200G"
  std::string cache_policy;  // "pagecache" | "lru" | "static"
  std::string accel_speedup; // "2"
  std::string disk_bw;       // "2G/s"
  bool first_epoch = false;
  std::string background_load;  // "0" (default), "profiled", or runnable threads
  std::string persistent_workers;  // "true" | "false"; empty: as profiled
  std::string step_threads;        // "1"; empty: as profiled
  std::string prefetch_factor;     // "4"; empty: as profiled
  std::string move_to_workers;     // "augment,crop"
  bool move_to_workers_given = false;
};

// The most cores a what-if accepts: beyond this the model (one machine, one
// DataLoader) says nothing useful, and a typo such as 1e9 is caught.
inline constexpr double kMaxWhatifCores = 4096;

// One --cores figure (whatif's list entries, recommend's machine): more than
// 0 and at most kMaxWhatifCores.
Result<double> ParseCores(const std::string& text);

inline constexpr int32_t kAutoWorkers = -2;  // Sweep::workers entry for --workers auto

struct Sweep {
  std::vector<double> cores;        // empty: as profiled
  std::vector<int32_t> workers;     // -1 as profiled, kAutoWorkers, or a count
  std::vector<int64_t> cache_bytes; // -1 as profiled
  CachePolicy cache_policy = CachePolicy::kPageCache;
  bool cache_policy_given = false;
  double accel_speedup = 1;
  double storage_bandwidth = 0;     // 0: as profiled
  bool first_epoch = false;
  // Runnable threads beside the job's the scenarios assume:
  // Scenario::kOthersAway (the default: other processes' load taken away,
  // the job's own delay kept), Scenario::kAsProfiled (the load fitted from
  // the profile) or a number. The baseline is always predicted as profiled.
  double background_threads = Scenario::kOthersAway;
  int32_t persistent_workers = -1;  // -1: as profiled
  int32_t step_threads = -1;        // -1: as profiled (Scenario::step_threads)
  int32_t prefetch_factor = -1;     // -1: as profiled
  // Main-thread stages the scenarios do in the workers (MoveStagesToWorkers).
  std::vector<std::string> move_to_workers;
};

// --background-load: "profiled" (Scenario::kAsProfiled), or a number of busy
// threads from other processes (0 to 4096). Empty: Scenario::kOthersAway.
// UsageError otherwise.
Result<double> ParseBackgroundLoad(const std::string& text);

// Parses and checks the flags (sizes via ParseBytes/ParseBandwidth; K/M/G/T
// binary). UsageError naming the flag on a bad value (--cores 0, -1G, 2X).
Result<Sweep> ParseSweep(const SweepFlags& flags);

// The fewest workers within 0.5% of the best rate Predict gives for up to
// cores - 1 workers, and beyond while each more worker adds over 0.5% (workers
// that wait off CPU overlap their waits; a sleeping loader on 2 cores wants
// more than one), up to kMaxAutoWorkers; at least 1.
inline constexpr uint32_t kMaxAutoWorkers = 64;
uint32_t AutoWorkers(const LoaderProfile& profile, const Scenario& scenario);

struct WhatIfRow {
  Scenario scenario;      // workers resolved (never auto)
  bool auto_workers = false;  // the workers were --workers auto's choice
  Prediction prediction;  // steady state, or the first epoch with --first-epoch
  std::optional<Prediction> other_epoch;  // the cold first epoch (or steady state) when the cache makes them differ
  double change = 0;      // samples/s against the measured baseline (or the predicted one), as a fraction
  // A parallel step whose threads and the workers oversubscribe the cores:
  // the same scenario with its intra-op threads cut to the cores the workers
  // leave (torch.set_num_threads), when --step-threads was not given.
  std::optional<Prediction> fewer_step_threads;
  // A cache scenario whose miss CPU rests on an estimate, not a fit (a cold
  // profile: EstimateReadCostFromSystemTime): the same scenario with misses
  // costing no CPU, a floor (a cached fetch never costs more CPU than a cold
  // one). The estimate itself can err either way (docs/model.md). Set when
  // the two differ by more than 1%.
  std::optional<Prediction> without_miss_cpu;
  // Workers at prefetch_factor=1 predicted from a profile that did not run
  // so: each batch's fetch then begins only once the previous batch is
  // received, and the wake-ups on that path are not modelled, so the figure
  // may be high (kFewestPrefetchFactor).
  bool unpriced_serial_handoff = false;
};

struct WhatIfResult {
  std::string loader;
  Machine profiled;
  Prediction baseline;                 // predicted for the profiled configuration
  double measured_samples_per_s = 0;   // steady state (mean step past the warm-up); 0 = unknown
  // false: no full batch past any epoch's warm-up; the rows' change then compares whole runs
  bool steady_state_measured = true;
  double model_error = 0;              // (predicted - measured) / measured at the baseline
  double measured_whole_run_samples_per_s = 0;  // samples / epoch wall times (start-up included); 0 = unknown
  double whole_run_model_error = 0;
  double profiled_background_threads = 0;       // the outside load fitted from the profile
  double scenario_background_threads = 0;       // the load every scenario assumed (ScenarioBackground)
  // Of the profiled machine's CPU time, the hypervisor's (steal), the figure
  // analyze's System line gives; -1 where the trace did not record it. From kStealSlowsHost the
  // measured costs are a slowed host's, and whatif says so.
  double profiled_steal_fraction = -1;
  // A profile with workers whose shared-memory costs were timed after the run
  // (LoaderProfile::shm_collate_cpu_s_per_batch): a row without workers takes
  // them out; untimed, its figure is low and whatif says so.
  bool shared_memory_timed = false;
  std::string swept;                   // "cores", "workers", "cache" or "" (a single scenario)
  std::vector<WhatIfRow> rows;
  std::vector<std::string> inputs;     // "compute per batch: 12.3 ms (measured, ...)" lines
};

// Predicts every scenario of `sweep` (the cross product of its lists) for
// `profile` measured on `profiled`. Fails like Predict.
Result<WhatIfResult> WhatIf(const LoaderProfile& profile, const Machine& profiled, const Sweep& sweep);

// The rows `WhatIf` gives for `--workers` each of `workers` and no other
// flag (the same predictions and changes), without its baseline's
// prediction (unless the profile has no measured steady state to compare
// with), inputs or extra rows: what analyze's advice quotes.
Result<std::vector<WhatIfRow>> PredictWorkerCounts(const LoaderProfile& profile, const Machine& profiled,
                                                   const std::vector<int32_t>& workers);

}  // namespace stallprof::model
