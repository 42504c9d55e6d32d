#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/cache.h"

namespace stallprof::model {

const char* ToString(Bottleneck b) {
  switch (b) {
    case Bottleneck::kCompute: return "compute";
    case Bottleneck::kPrep: return "cpu prep";
    case Bottleneck::kFetch: return "storage";
    case Bottleneck::kHandoff: return "main-process handoff";
  }
  return "?";
}

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMinUsableCores = 0.05;  // the main process never leaves the workers literally nothing

double Rate(double batch, double seconds) { return seconds > 0 ? batch / seconds : kInf; }

Status Validate(const LoaderProfile& p, const Scenario& s) {
  const std::string loader = "loader '" + p.name + "'";
  if (!(s.machine.cores > 0)) return UsageError("--cores must be > 0, got " + std::to_string(s.machine.cores));
  if (!(s.accel_speedup > 0)) return UsageError("--accel-speedup must be > 0");
  if (s.storage_bandwidth < 0) return UsageError("--disk-bw must be > 0");
  if (!(p.batch_size > 0)) return UnsupportedError(loader + " has no batch size; record it with the Python hook");
  if (p.batches == 0)
    return UnsupportedError(loader + " has no steady-state batches; record more iterations than --warmup per epoch");
  for (double v : {p.compute_s_per_batch, p.cpu_s_per_batch, p.delay_s_per_batch, p.io_s_per_batch})
    if (!(v >= 0) || std::isinf(v)) return InputError(loader + " has a negative or non-finite time per batch");
  if (p.workers > 0 && p.cpu_s_per_batch + p.io_s_per_batch + p.delay_s_per_batch <= 0)
    return UnsupportedError(loader + " has no worker fetch spans; record with the Python hook loaded in the workers");
  return Status::Ok();
}

struct Terms {
  double r_compute, r_main, r_prep, r_workers, r_fetch, samples_per_s;
};

// Rates of a pipelined loader (W >= 1) for given per-batch worker CPU, io
// and delay (the CPU at the scenario's miss ratio, CpuSecondsAtMiss).
Terms Pipelined(const LoaderProfile& p, double cpu, double compute, double cores, double workers, double io,
                double delay, double bandwidth, double miss) {
  const double b = p.batch_size;
  const double usable = std::max(kMinUsableCores, cores - p.main_cpu_cores);
  Terms t{};
  t.r_compute = Rate(b, compute);
  t.r_main = Rate(b, compute + MainReceiveSeconds(p));
  t.r_prep = cpu > 0 ? std::min(workers, usable) * b / cpu : kInf;
  t.r_workers = workers * Rate(b, cpu + io + delay);
  const double bytes = p.bytes_per_sample.value * miss;
  t.r_fetch = (bandwidth > 0 && bytes > 0) ? bandwidth / bytes : kInf;
  t.samples_per_s = std::min({t.r_main, t.r_prep, t.r_workers, t.r_fetch});
  return t;
}

// Run-queue delay per batch from oversubscription (docs/model.md "Delay"):
// workers that are busy demand u = cpu / (cpu + io) of a core each, but no
// more than the pipeline's rate lets them use; with D = demand + the main
// process's cores, processor sharing stretches each CPU burst by D / cores.
double PredictedDelay(const LoaderProfile& p, double cpu, double compute, double cores, double workers, double io,
                      double bandwidth, double miss) {
  if (cpu <= 0) return 0;
  if (workers == 0) return cpu * std::max(0.0, (1.0 + 0.0) / cores - 1);  // one serial thread
  const Terms free = Pipelined(p, cpu, compute, kInf, workers, io, 0, bandwidth, miss);
  const double rate_batches = std::min({free.r_main, free.r_workers, free.r_fetch}) / p.batch_size;
  const double demand = std::min(workers * cpu / (cpu + io), rate_batches * cpu);
  return cpu * std::max(0.0, (demand + p.main_cpu_cores) / cores - 1);
}
}  // namespace

double MainReceiveSeconds(const LoaderProfile& p) { return std::max(p.handoff_s_per_batch, p.receive_s_per_batch); }

double CpuSecondsAtMiss(const LoaderProfile& p, double miss) {
  const double profiled_miss = 1 - std::clamp(p.cold_hit_ratio, 0.0, 1.0);
  if (profiled_miss <= 0) return p.cpu_s_per_batch;  // no misses measured: none to scale
  const double miss_cpu = std::min(p.cpu_s_per_batch, p.cpu_s_per_storage_byte.value * p.storage_bytes_per_batch);
  return std::max(0.0, p.cpu_s_per_batch - miss_cpu * (1 - miss / profiled_miss));
}

double ExternalDelayStretch(const LoaderProfile& p) {
  if (p.profiled_cores <= 0 || p.cpu_s_per_batch <= 0) return 0;
  const double profiled_miss = 1 - std::clamp(p.cold_hit_ratio, 0.0, 1.0);
  const double own = PredictedDelay(p, p.cpu_s_per_batch, p.compute_s_per_batch, p.profiled_cores, p.workers,
                                    p.io_s_per_batch, p.storage_bandwidth.value, profiled_miss);
  return std::max(0.0, p.delay_s_per_batch - own) / p.cpu_s_per_batch;
}

Result<Prediction> Predict(const LoaderProfile& p, const Scenario& s) {
  if (Status st = Validate(p, s); !st.ok()) return st.error();
  Prediction out;
  const double b = p.batch_size;
  const double cores = s.machine.cores;
  const uint32_t workers = s.workers >= 0 ? static_cast<uint32_t>(s.workers) : p.workers;
  out.workers = workers;
  const double compute = p.compute_s_per_batch / s.accel_speedup;
  out.compute_s = compute;

  // Hit ratio and the io and CPU it leaves (the misses' share is scaled by the
  // miss ratio against the profiled run's).
  const double profiled_hit = std::clamp(p.cold_hit_ratio, 0.0, 1.0);
  double hit = profiled_hit;
  if (s.first_epoch) hit = 0;
  if (s.cache_bytes >= kCacheAll && !s.first_epoch) {
    hit = 1;
  } else if (s.cache_bytes >= 0 || s.first_epoch) {
    auto h = CacheHitRatio(p, static_cast<uint64_t>(std::max<int64_t>(s.cache_bytes, 0)), s.cache_policy,
                           s.first_epoch);
    if (s.cache_bytes >= 0 && !h.ok()) return h.error();
    if (h.ok()) hit = *h;
  }
  out.hit_ratio = hit;
  const double miss = 1 - hit, profiled_miss = 1 - profiled_hit;
  const double cpu = CpuSecondsAtMiss(p, miss);
  out.cpu_s = cpu;
  double io = p.io_s_per_batch;
  if (profiled_miss > 0) io *= miss / profiled_miss;  // else io is not storage misses (e.g. a sleep): keep it
  out.io_s = io;
  const double bandwidth = s.storage_bandwidth > 0 ? s.storage_bandwidth : p.storage_bandwidth.value;

  const bool as_profiled = workers == p.workers && (p.profiled_cores <= 0 || std::abs(cores - p.profiled_cores) < 1e-9);
  out.delay_measured = as_profiled;
  const double external_stretch = as_profiled ? 0 : ExternalDelayStretch(p);
  out.external_delay_stretch = external_stretch;
  auto delay_for = [&](double cpu_used, double io_used, double miss_used) {
    return as_profiled ? p.delay_s_per_batch
                       : PredictedDelay(p, cpu_used, compute, cores, workers, io_used, bandwidth, miss_used) +
                             cpu_used * external_stretch;
  };
  const double delay = delay_for(cpu, io, miss);
  out.delay_s = delay;

  if (workers == 0) {
    // The main process fetches each batch itself, serially: nothing overlaps.
    const double prep = cpu + delay;
    out.step_s = compute + prep + io;
    out.prep_step_s = compute + prep;
    out.samples_per_s = Rate(b, out.step_s);
    out.r_compute = Rate(b, compute);
    out.r_prep = Rate(b, prep);
    out.r_workers = out.samples_per_s;
    const double bytes = p.bytes_per_sample.value * miss;
    out.r_fetch = (bandwidth > 0 && bytes > 0) ? bandwidth / bytes : Rate(b, io);
    // As analyze names it: compute unless input-bound, else the larger stall.
    if ((prep + io) / out.step_s < kModeratelyInputBound) out.bottleneck = Bottleneck::kCompute;
    else out.bottleneck = io > prep ? Bottleneck::kFetch : Bottleneck::kPrep;
  } else {
    const Terms t = Pipelined(p, cpu, compute, cores, workers, io, delay, bandwidth, miss);
    out.r_compute = t.r_compute;
    out.r_main = t.r_main;
    out.handoff_s = MainReceiveSeconds(p);
    out.r_prep = t.r_prep;
    out.r_workers = t.r_workers;
    out.r_fetch = t.r_fetch;
    out.samples_per_s = t.samples_per_s;
    if (std::isinf(out.samples_per_s))
      return UnsupportedError("loader '" + p.name + "' has no measured cost per batch (compute, CPU and io are all 0)");
    out.step_s = b / out.samples_per_s;
    // The main loop binds: compute, unless receiving batches (IPC) costs it more than computing.
    if (t.r_main <= t.samples_per_s)
      out.bottleneck = compute >= out.handoff_s ? Bottleneck::kCompute : Bottleneck::kHandoff;
    else if (t.r_fetch <= t.samples_per_s) out.bottleneck = Bottleneck::kFetch;
    else if (t.r_workers <= t.samples_per_s && io > cpu + delay) out.bottleneck = Bottleneck::kFetch;
    else out.bottleneck = Bottleneck::kPrep;
    // T_prep: the same prediction with everything cached (no io, no miss CPU).
    const double cached_cpu = CpuSecondsAtMiss(p, 0);
    const Terms cached =
        Pipelined(p, cached_cpu, compute, cores, workers, 0, delay_for(cached_cpu, 0, 0), bandwidth, 0);
    out.prep_step_s = b / cached.samples_per_s;
  }
  // The DS-Analyzer split of the predicted step: ingest (compute) | prep | fetch.
  out.prep_step_s = std::clamp(out.prep_step_s, compute, out.step_s);
  if (out.step_s > 0) {
    out.stall_fraction = std::max(0.0, 1 - compute / out.step_s);
    out.prep_stall_fraction = (out.prep_step_s - compute) / out.step_s;
    out.fetch_stall_fraction = (out.step_s - out.prep_step_s) / out.step_s;
  }
  return out;
}

}  // namespace stallprof::model
