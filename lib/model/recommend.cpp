#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/units.h"
#include "model/cache.h"
#include "model/lp.h"

namespace stallprof::model {
namespace {
constexpr double kMinUsableCores = 0.05;

struct Candidate {
  CachePlan plan;
  double cpu_scale_until = 1;  // decoded cache: share of cached stages' CPU still paid
  size_t cached_stages = 0;    // decoded cache: stages [0, cached_stages) are skipped on a hit
  double io_scale = 1;         // share of the profiled io still paid
  double miss = 1;             // share of bytes still read from storage
};

std::vector<Candidate> CacheCandidates(const LoaderProfile& p, uint64_t memory_budget) {
  const double profiled_hit = std::clamp(p.cold_hit_ratio, 0.0, 1.0);
  const double profiled_miss = 1 - profiled_hit;
  std::vector<Candidate> out;
  Candidate none;
  none.plan.hit_ratio = profiled_hit;
  none.miss = profiled_miss;
  out.push_back(none);
  const auto fits = [&](uint64_t bytes) { return memory_budget == 0 || bytes <= memory_budget; };
  if (p.dataset_bytes > 0) {
    for (double fraction : {0.25, 0.5, 0.75, 1.0}) {
      const auto bytes = static_cast<uint64_t>(fraction * static_cast<double>(p.dataset_bytes));
      if (!fits(bytes)) continue;
      for (CachePolicy policy : {CachePolicy::kPageCache, CachePolicy::kStatic}) {
        auto hit = CacheHitRatio(p, bytes, policy, false);
        if (!hit.ok()) continue;
        Candidate c;
        c.plan = {CachePoint::kRawFiles, policy, bytes, *hit, ""};
        c.miss = 1 - *hit;
        c.io_scale = IoScaleAtMiss(p, c.miss);
        out.push_back(c);
      }
    }
  }
  // Decoded samples: only after a deterministic stage whose output size the trace shows.
  const uint64_t items = p.dataset_items;
  for (size_t s = 0; s < p.stages.size() && items > 0; ++s) {
    const StageProfile& stage = p.stages[s];
    if (stage.random) break;  // nothing after a random transform may be cached
    if (stage.output_bytes_per_sample <= 0) continue;
    const double decoded = stage.output_bytes_per_sample * static_cast<double>(items);
    for (double fraction : {0.25, 0.5, 0.75, 1.0}) {
      const auto bytes = static_cast<uint64_t>(fraction * decoded);
      if (!fits(bytes)) continue;
      Candidate c;
      c.plan = {CachePoint::kDecoded, CachePolicy::kStatic, bytes, fraction, stage.name};
      c.cached_stages = s + 1;
      c.cpu_scale_until = 1 - fraction;
      c.io_scale = 1 - fraction;
      c.miss = profiled_miss * (1 - fraction);
      out.push_back(c);
    }
  }
  return out;
}

PipelineLp BuildLp(const LoaderProfile& p, const Candidate& c, double usable_cores, uint64_t memory_budget,
                   uint32_t prefetch, double accel_speedup) {
  const double b = p.SamplesPerBatch();
  PipelineLp lp;
  lp.cores = usable_cores;
  lp.pools.push_back({"workers", 0, 0});  // pool 0; its latency and memory are set below
  // As the simulation runs the step; with workers, whose batches the step
  // first reads in shared memory (timed for a profile without workers).
  const double compute = UncontendedComputeSeconds(p) / accel_speedup + BatchTouchSeconds(p, 1);
  if (compute + MainReceiveSeconds(p) > 0) lp.max_samples_per_s = b / (compute + MainReceiveSeconds(p));
  lp.storage_bandwidth = p.storage_bandwidth.value;
  lp.storage_bytes_per_sample = p.bytes_per_sample.value * c.miss * p.device_bytes_per_missed_byte;
  // A raw-file cache shrinks the CPU storage misses cost with the misses;
  // which stage reads is not known, so every stage's CPU shrinks in
  // proportion. (A decoded-sample cache already skips the cached stages.)
  const double miss_scale =
      c.cached_stages == 0 && p.cpu_s_per_batch > 0 ? CpuSecondsAtMiss(p, c.miss) / p.cpu_s_per_batch : 1;
  double staged_cpu = 0, cpu_per_sample = 0;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const double scale = (s < c.cached_stages ? c.cpu_scale_until : 1) * miss_scale;
    const double cpu = p.stages[s].cpu_s_per_sample * scale;
    lp.stages.push_back({p.stages[s].name, cpu, 0});
    staged_cpu += p.stages[s].cpu_s_per_sample;
    cpu_per_sample += cpu;
  }
  const double rest = std::max(0.0, p.cpu_s_per_batch / b - staged_cpu) * miss_scale;
  lp.stages.push_back({p.stages.empty() ? "fetch" : "fetch (rest)", rest, 0});
  cpu_per_sample += rest;
  // Each batch also costs its worker CPU outside the fetch (taking indices,
  // pickling and sending), as the simulation charges it: no cache saves it.
  if (const double loop = p.worker_loop_cpu_s_per_batch.value / b; loop > 0) {
    lp.stages.push_back({"worker loop", loop, 0});
    cpu_per_sample += loop;
  }
  // A profile without workers: collating into shared memory, which a worker
  // pays in its fetch and the main thread did not.
  if (const double shm = ShmCollateSeconds(p, 1) / b; shm > 0) {
    lp.stages.push_back({"collate to shared memory", shm, 0});
    cpu_per_sample += shm;
  }
  // The main process's CPU a sample, where measured: the step's work (on any
  // intra-op threads: core time) and receiving the batch. It grows with the
  // throughput, where a fixed share of the cores (the profile's) would not,
  // and a profile without workers counted its fetches in that share too.
  if (p.compute_cpu_s_per_batch.measured) {
    const double step = (StepWorkSeconds(p, accel_speedup) + BatchTouchSeconds(p, 1) + p.receive_s_per_batch) / b;
    lp.pools.push_back({"main process", 0, 0});
    lp.stages.push_back({"training step (main process)", step, 1});
  }
  const double io_per_sample = p.io_s_per_batch * c.io_scale / b;
  // The LP plans for a machine to itself; Predict checks its proposal with
  // the simulation, contention included.
  const double member_memory = p.worker_rss_bytes + prefetch * p.batch_bytes;
  lp.pools[0].latency_s_per_sample = cpu_per_sample + io_per_sample;
  lp.pools[0].memory_bytes_per_member = member_memory;
  if (memory_budget > 0) lp.memory_bytes = static_cast<double>(memory_budget) - static_cast<double>(c.plan.bytes);
  return lp;
}

std::string Advice(const LpRow& row) {
  switch (row.kind) {
    case RowKind::kIngest:
      return "the model is now the bottleneck: faster input will not help";
    case RowKind::kCores:
      return fmt::format("one more core adds {:.1f} samples/s", row.dual);
    case RowKind::kStageCpu:
      return fmt::format("one more core for {} adds {:.1f} samples/s", row.name, row.dual);
    case RowKind::kBandwidth:
      return fmt::format("100 MiB/s more storage bandwidth adds {:.1f} samples/s", row.dual * 100 * 1024 * 1024);
    case RowKind::kMemory:
      return fmt::format("1 GiB more memory adds {:.1f} samples/s", row.dual * 1024 * 1024 * 1024);
    case RowKind::kOccupancy:
    case RowKind::kPoolCores:
      return fmt::format("one more worker adds {:.1f} samples/s", row.dual);
  }
  return "";
}
}  // namespace

bool Recommendation::WorthChanging() const {
  if (!(profiled_settings_samples_per_s > 0)) return true;
  const auto gains = [](double plan, double kept) { return kept > 0 && plan > (1 + kWorthChanging) * kept; };
  return gains(predicted.samples_per_s, profiled_settings_samples_per_s) ||
         gains(predicted.whole_run_samples_per_s, profiled_settings_whole_run_samples_per_s);
}

Result<Recommendation> Recommend(const LoaderProfile& p, const RecommendOptions& o) {
  if (!(o.cores > 0)) return UsageError("--cores must be > 0");
  Scenario as_profiled;
  as_profiled.machine.cores = o.cores;
  if (auto check = Predict(p, as_profiled); !check.ok()) return check.error();
  // Without the step's CPU measured, the main process keeps the share of the
  // cores it had in the profile.
  const double rank_cores = p.RankCores(o.cores);
  const double usable = p.compute_cpu_s_per_batch.measured ? rank_cores : rank_cores - p.main_cpu_cores;
  if (usable < kMinUsableCores)
    return UnsupportedError(fmt::format(
        "no cores are left for DataLoader workers: the main process of '{}' keeps {:.2f} of the {:.2f} cores busy; "
        "plan for more cores with --cores",
        p.name, p.main_cpu_cores, rank_cores));
  Recommendation rec;
  rec.loader = p.name;
  // The training process holds its own memory (a rank each on the host): a
  // cache planned beside it competes with it for the same pages (in a 400 MiB
  // memory cgroup, a 300 MiB cache was planned beside a 250 MiB process).
  rec.job_memory_bytes = static_cast<uint64_t>(std::max(0.0, p.main_rss_bytes) * std::max(1u, p.ranks_on_host));
  if (o.memory_bytes > 0 && rec.job_memory_bytes >= o.memory_bytes)
    return UnsupportedError("the training process" + std::string(p.ranks_on_host > 1 ? "es" : "") + " alone hold" +
                            (p.ranks_on_host > 1 ? "" : "s") + " " + FormatBytes(static_cast<double>(rec.job_memory_bytes)) +
                            " (peak RSS) of the " + FormatBytes(static_cast<double>(o.memory_bytes)) +
                            " memory: nothing is left for a cache or workers; raise --memory");
  const uint64_t budget = rec.PlanMemoryBytes(o.memory_bytes);
  if (budget > 0 && p.worker_rss_bytes > static_cast<double>(budget))
    return UnsupportedError("the memory left beside the training process, " + FormatBytes(static_cast<double>(budget)) +
                            ", is below one DataLoader worker's RSS (" + FormatBytes(p.worker_rss_bytes) +
                            "), so no worker fits; raise --memory or make each worker hold less");
  const double b = p.SamplesPerBatch();
  if (!p.bytes_per_sample.measured && p.bytes_per_sample.value > 0)
    rec.assumptions.push_back("bytes per sample from " + p.bytes_per_sample.source);
  if (!p.storage_bandwidth.measured)
    rec.assumptions.push_back(p.storage_bandwidth.value > 0 ? "storage bandwidth from " + p.storage_bandwidth.source
                                                            : "storage bandwidth unknown: no bandwidth limit");
  if (p.worker_rss_bytes <= 0) rec.assumptions.push_back("worker RSS unknown: taken as 0");
  if (p.batch_bytes <= 0) rec.assumptions.push_back("batch size in memory unknown: prefetch buffers taken as 0 bytes");
  if (o.memory_bytes == 0) rec.assumptions.push_back("memory budget unknown: no memory limit");
  else if (p.main_rss_bytes <= 0) rec.assumptions.push_back("training process's RSS not sampled: the whole memory planned for cache and workers");
  if (p.dataset_bytes == 0) rec.assumptions.push_back("dataset size unknown: no cache plan considered");

  const auto candidates = CacheCandidates(p, budget);
  const double p99 = p.produce_p99_s > 0 ? p.produce_p99_s : p.produce_s_per_batch;
  if (p.produce_p99_s <= 0) rec.assumptions.push_back("p99 batch latency unknown: the mean is used");

  uint32_t prefetch = 2;  // first pass; then Little's law over the optimum
  const Candidate* best = nullptr;
  LpSolution best_lp;
  for (int pass = 0; pass < 2; ++pass) {
    best = nullptr;
    for (const Candidate& c : candidates) {
      const PipelineLp lp = BuildLp(p, c, usable, budget, prefetch, 1);
      if (!(lp.memory_bytes >= 0)) continue;
      auto solved = SolvePipelineLp(lp);
      if (!solved.ok()) return solved.error();
      if (!best || solved->samples_per_s > best_lp.samples_per_s * (1 + 1e-6)) {
        best = &c;
        best_lp = std::move(*solved);
      }
    }
    if (!best) return UnsupportedError("no cache plan fits the memory budget");
    const double members = best_lp.pool_members.empty() ? 1 : best_lp.pool_members[0];
    const uint32_t workers = std::max<uint32_t>(1, static_cast<uint32_t>(std::ceil(members - 1e-6)));
    rec.prefetch_concurrency = best_lp.samples_per_s / b * p99;
    if (pass == 1) break;  // the second pass solves with Little's prefetch
    rec.littles_prefetch_factor =
        std::max<uint32_t>(1, static_cast<uint32_t>(std::ceil(rec.prefetch_concurrency / workers - 1e-9)));
    const auto next = std::max(kFewestPrefetchFactor, rec.littles_prefetch_factor);
    if (next == prefetch) break;
    prefetch = next;
  }
  if (best_lp.samples_per_s <= 0)
    return UnsupportedError("no configuration of '" + p.name + "' makes progress within the budget (" +
                            (budget > 0 ? "memory " + FormatBytes(static_cast<double>(budget)) + " beside the training process" : "") +
                            "); raise --memory or --cores");

  rec.cache = best->plan;
  rec.lp = best_lp;
  rec.lp_samples_per_s = best_lp.samples_per_s;
  const double members = best_lp.pool_members.empty() ? 1 : best_lp.pool_members[0];
  uint32_t workers = std::max<uint32_t>(1, static_cast<uint32_t>(std::ceil(members - 1e-6)));
  // Integer workers must still fit the memory the LP shared out fractionally.
  const double member_memory = p.worker_rss_bytes + prefetch * p.batch_bytes;
  if (budget > 0 && member_memory > 0) {
    const double room = (static_cast<double>(budget) - static_cast<double>(rec.cache.bytes)) / member_memory;
    workers = std::max<uint32_t>(1, std::min<uint32_t>(workers, static_cast<uint32_t>(std::floor(room + 1e-9))));
  }
  rec.workers = workers;
  rec.prefetch_factor = prefetch;

  if (const LpRow* row = best_lp.Binding()) {
    rec.binding = *row;
    rec.advice = Advice(*row);
  } else {
    rec.advice = "no constraint binds";
  }

  Scenario chosen;
  chosen.machine.cores = o.cores;
  chosen.workers = static_cast<int32_t>(workers);
  chosen.prefetch_factor = static_cast<int32_t>(prefetch);
  chosen.persistent_workers = 1;  // what the printed DataLoader line sets
  chosen.background_threads = ScenarioBackground(p, o.background_threads);
  if (const double outside = BackgroundThreads(p); outside > 0.05)
    rec.assumptions.push_back(fmt::format(
        "the profiled run had {:.2f} busy threads of outside load (fitted from its run-queue delay); the prediction "
        "assumes {}",
        outside, o.background_threads == Scenario::kAsProfiled ? "the same"
                 : o.background_threads >= 0 || chosen.background_threads == 0
                     ? fmt::format("{:g}", chosen.background_threads)
                     : fmt::format("the same: other processes used under {:g} of the cores the job could use, so it is the job's own delay",
                                   kOutsideCoresSeen)));
  if (rec.cache.point == CachePoint::kRawFiles) {
    chosen.cache_bytes = static_cast<int64_t>(rec.cache.bytes);
    chosen.cache_policy = rec.cache.policy;
  }
  // The simulation's steady samples/s of the chosen scenario with fewer
  // workers or buffers (0 when it cannot predict).
  const auto rate_with = [&](uint32_t w, uint32_t depth) {
    Scenario s = chosen;
    s.workers = static_cast<int32_t>(w);
    s.prefetch_factor = static_cast<int32_t>(depth);
    auto r = Predict(p, s);
    return r.ok() ? r->samples_per_s : 0.0;
  };
  // The LP sizes the pool by its rates; the simulation (in-order delivery, a
  // stream split over fewer parts than workers) may reach as much with fewer:
  // the fewest within 1% of the LP's count, each worker being memory.
  if (workers > 1) {
    const double full = rate_with(workers, prefetch);
    for (uint32_t w = 1; w < workers; ++w)
      if (rate_with(w, prefetch) >= (1 - kAsGoodAsMore) * full) {
        rec.lp_pool_workers = workers;
        rec.lp_pool_samples_per_s = full;
        workers = w;
        break;
      }
    rec.workers = workers;
    chosen.workers = static_cast<int32_t>(workers);
  }
  if (prefetch > kFewestPrefetchFactor) {
    // Little's law over the p99 latency sizes the buffers for a tail on every
    // batch; the simulation, drawing the measured costs in order, says how
    // much of that depth pays (a memory-mapped dataset asked for 34).
    const double deepest = rate_with(workers, prefetch);
    for (uint32_t depth = kFewestPrefetchFactor; depth < prefetch; depth = depth < 4 ? depth + 1 : depth * 2)
      if (rate_with(workers, depth) >= (1 - kAsGoodAsMore) * deepest) {
        prefetch = depth;
        break;
      }
    rec.prefetch_factor = prefetch;
    chosen.prefetch_factor = static_cast<int32_t>(prefetch);
  }
  auto predicted = Predict(p, chosen);
  if (!predicted.ok()) return predicted.error();
  rec.predicted = *predicted;
  std::optional<Prediction> fewer;
  if (predicted->step_oversubscribed) fewer = PredictWithFewerStepThreads(p, chosen, *predicted);
  // The LP sees core time, not a parallel step held up by its own threads.
  if (fewer && fewer->samples_per_s > predicted->samples_per_s) {
    rec.predicted = *fewer;
    rec.step_threads = fewer->step_threads;
  }
  // Workers are not always worth their handoff: on a fast loader the main
  // process fetching each batch itself can beat receiving it from a worker
  // (unpickling, file descriptors), which the LP, a model of worker pools,
  // cannot propose. The simulation predicts it on the same scenario; a 2%
  // margin keeps a tie with workers.
  if (rec.cache.point != CachePoint::kDecoded) {
    Scenario in_process = chosen;
    in_process.workers = 0;
    in_process.prefetch_factor = -1;
    if (auto w0 = Predict(p, in_process); w0.ok() && w0->samples_per_s > rec.predicted.samples_per_s * 1.02) {
      rec.lp_workers = workers;
      rec.lp_workers_samples_per_s = rec.predicted.samples_per_s;
      rec.workers = 0;
      rec.step_threads = 0;
      rec.predicted = *w0;
      chosen = in_process;
    }
  }
  if (predicted->step_oversubscribed && rec.workers > 0 && rec.step_threads == 0)
    rec.assumptions.push_back(fmt::format(
        "the step's {} intra-op threads and {} workers oversubscribe {:g} cores: its threads hold each other up, "
        "and the prediction is an upper bound (docs/model.md)",
        predicted->step_threads, workers, p.RankCores(o.cores)));
  if (rec.cache.point == CachePoint::kRawFiles && MissCpuIsEstimated(p)) {  // give the cache plan's floor
    LoaderProfile copy = p;  // only then: the batch costs are large to copy
    if (auto f = PredictMissCpuFloor(copy, chosen, rec.predicted))
      rec.assumptions.push_back(fmt::format(
          "the CPU a storage miss costs is estimated from a cold profile (not fitted), so the plan's figure may be off "
          "by up to a third either way; with misses costing no CPU beyond their I/O (the floor) the plan predicts {:.1f} "
          "samples/s (docs/model.md)",
          f->samples_per_s));
  }
  if (rec.cache.point == CachePoint::kDecoded) {  // Predict has no decoded cache: take the LP's rate
    rec.predicted.samples_per_s = rec.lp_samples_per_s;
    rec.predicted.step_s = b / rec.lp_samples_per_s;
  }
  if (p.measured_samples_per_s > 0) rec.measured_samples_per_s = p.measured_samples_per_s;
  // The settings as profiled, on the same machine, load and cache as the
  // plan's own prediction (Recommendation::WorthChanging).
  Scenario profiled_settings;
  profiled_settings.machine = chosen.machine;
  profiled_settings.background_threads = chosen.background_threads;
  if (auto kept = Predict(p, profiled_settings); kept.ok() && kept->samples_per_s > 0) {
    rec.profiled_settings_samples_per_s = kept->samples_per_s;
    rec.profiled_settings_whole_run_samples_per_s = kept->whole_run_samples_per_s;
  }
  Scenario profiled_run;
  profiled_run.machine.cores = p.profiled_cores > 0 ? p.profiled_cores * std::max(1u, p.ranks_on_host) : o.cores;
  profiled_run.background_threads = Scenario::kAsProfiled;
  if (auto run = Predict(p, profiled_run); run.ok()) rec.as_profiled = *run;
  return rec;
}

}  // namespace stallprof::model
