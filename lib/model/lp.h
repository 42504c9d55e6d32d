// The pipeline LP behind `stallprof recommend` (docs/model.md "recommend"):
// maximize throughput over cores per stage and threads per pool, subject to
// CPU, total cores, worker occupancy (Little's law), storage bandwidth,
// memory and what the model can ingest. Solved with GLPK's simplex.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/model.h"

namespace stallprof::model {

struct LpStage {
  std::string name;
  double cpu_s_per_sample = 0;  // CPU seconds one sample costs in this stage
  uint32_t pool = 0;            // index into PipelineLp::pools
};

// A set of threads or processes (a DataLoader's workers; one pool per stage
// when stages run in separate pools). Each member uses at most one core.
struct LpPool {
  std::string name;
  double latency_s_per_sample = 0;  // wall time a member is busy per sample (cpu + io): Little's law
  double memory_bytes_per_member = 0;
};

struct PipelineLp {
  std::vector<LpStage> stages;
  std::vector<LpPool> pools;
  double cores = 0;                 // cores the pools may use in total
  double max_samples_per_s = std::numeric_limits<double>::infinity();  // what the model can ingest
  double storage_bandwidth = 0;     // bytes/s, 0 = no limit known
  double storage_bytes_per_sample = 0;  // bytes read from storage per sample (the uncached share)
  double memory_bytes = std::numeric_limits<double>::infinity();  // for pool members (budget - cache)
};

enum class RowKind { kStageCpu, kCores, kPoolCores, kOccupancy, kBandwidth, kMemory, kIngest };
const char* ToString(RowKind kind);

struct LpRow {
  RowKind kind = RowKind::kCores;
  std::string name;   // e.g. "cores", "cpu[decode]", "occupancy[workers]"
  double activity = 0;
  double bound = 0;
  double dual = 0;    // GLPK's shadow price: samples/s per unit of the bound
};

struct LpSolution {
  double samples_per_s = 0;
  std::vector<double> stage_cores;   // per LpStage
  std::vector<double> pool_members;  // per LpPool
  std::vector<LpRow> rows;
  // The row that limits throughput: the ingest row when tight, else the first
  // row with a positive dual in the order cores, bandwidth, memory, occupancy,
  // stage CPU; nullptr when none has a dual.
  const LpRow* Binding() const;
};

// Solves `lp`. Fails (RuntimeError) only when nothing bounds the throughput
// (no measured cost at all) or GLPK fails; a zero optimum is returned as is.
Result<LpSolution> SolvePipelineLp(const PipelineLp& lp);

enum class CachePoint { kNone, kRawFiles, kDecoded };
const char* ToString(CachePoint point);  // "none", "raw files", "decoded samples"

struct CachePlan {
  CachePoint point = CachePoint::kNone;
  CachePolicy policy = CachePolicy::kPageCache;
  uint64_t bytes = 0;
  double hit_ratio = 0;
  std::string stage;  // the decoded stage's name for kDecoded
};

struct RecommendOptions {
  double cores = 0;           // cores of the machine to plan for (> 0)
  // The machine's memory (or the job's memory cgroup's): the training
  // processes' own RSS is taken from it, the rest is for cache, workers and
  // prefetch buffers; 0 = unknown (no memory row).
  uint64_t memory_bytes = 0;
  // Busy threads beside the job's the prediction assumes, as whatif's
  // scenarios (Sweep::background_threads).
  double background_threads = Scenario::kOthersAway;
};

struct Recommendation {
  std::string loader;
  uint32_t workers = 1;
  uint32_t prefetch_factor = 2;
  double prefetch_concurrency = 0;  // batches in flight Little's law asks for (rate x p99)
  // Little's prefetch_factor (ceil(concurrency / workers)); prefetch_factor is
  // the smallest the simulation predicts within 1% of it (deeper buffers cost
  // memory and pay only against a tail the in-order delivery cannot hide).
  uint32_t littles_prefetch_factor = 2;
  double lp_samples_per_s = 0;      // the LP optimum (fractional workers)
  Prediction predicted;             // model::Predict at the recommended integer settings
  Prediction as_profiled;           // model::Predict of the profiled configuration on its cores (how busy it kept them)
  // torch.set_num_threads for a parallel step whose threads the workers would
  // oversubscribe, when fewer are predicted faster; 0 = leave them as profiled.
  uint32_t step_threads = 0;
  double measured_samples_per_s = 0;  // 0 = the profile has no measured step
  // workers = 0: the main process fetching its own batches was predicted
  // faster than the LP's workers (their handoff costs more than the fetch);
  // these are the LP's plan, predicted, for the text.
  // The LP's integer pool, when the simulation predicted fewer workers within
  // 1% of it (in-order delivery, a stream split over fewer parts); 0 = the same.
  uint32_t lp_pool_workers = 0;
  double lp_pool_samples_per_s = 0;
  uint32_t lp_workers = 0;
  double lp_workers_samples_per_s = 0;
  // Of the memory, what the training processes hold themselves (each rank's
  // peak RSS on the host; Recommend refuses a memory it fills).
  uint64_t job_memory_bytes = 0;
  // What that leaves of `memory` (RecommendOptions::memory_bytes) for cache,
  // workers and prefetch buffers; 0 = no memory limit.
  uint64_t PlanMemoryBytes(uint64_t memory) const { return memory > job_memory_bytes ? memory - job_memory_bytes : 0; }
  CachePlan cache;
  LpSolution lp;
  LpRow binding;                    // the limiting row (kind kIngest when compute binds)
  std::string advice;               // "one more core adds 12.3 samples/s", ...
  std::vector<std::string> assumptions;  // inputs that were not measured
  // The profiled DataLoader settings predicted on the plan's machine and load
  // (steady state and whole run; 0 when they could not be).
  double profiled_settings_samples_per_s = 0;
  double profiled_settings_whole_run_samples_per_s = 0;
  // Whether the plan beats those settings by more than kWorthChanging in the
  // steady state or over the whole run (persistent workers on short epochs
  // gain only there): a smaller gain is within the model's error, and the
  // settings as profiled are the advice. True when they could not be predicted.
  bool WorthChanging() const;
};

// The least predicted gain over the profiled settings that recommend calls a
// change: the validation's errors reach 10% (docs/model.md), so a plan that
// predicts +0.5% is no evidence of a gain (a compute-bound text classifier
// was proposed num_workers=1 for +0.5% and measured no faster).
inline constexpr double kWorthChanging = 0.05;

// The best settings for `profile` on a machine of `options.cores` cores and
// `options.memory_bytes` memory: one LP per cache choice, the best kept.
// Fails with an explanation (not a solver status) when no configuration can
// run: no cores left after the main process, a memory budget below one
// worker, nothing measured.
Result<Recommendation> Recommend(const LoaderProfile& profile, const RecommendOptions& options);

}  // namespace stallprof::model
