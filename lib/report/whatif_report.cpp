#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/units.h"
#include "json_writer.h"
#include "model/cache.h"
#include "model_report.h"
#include "terminal.h"

namespace stallprof::report {

namespace {

std::string CacheText(const model::Scenario& s) {
  if (s.cache_bytes >= model::kCacheAll) return "all";
  return s.cache_bytes < 0 ? "as run" : FormatBytes(static_cast<double>(s.cache_bytes));
}

// The hit column: "-" where the profile read no bytes (no ratio to give).
std::string HitText(const model::Prediction& p) {
  return p.hit_ratio_known ? fmt::format("{:.0f}%", p.hit_ratio * 100) : "-";
}

// JSON has no infinity: a rate nothing bounds is written as -1.
double Rate(double samples_per_s) { return std::isinf(samples_per_s) ? -1 : samples_per_s; }

void WritePrediction(JsonWriter& w, const model::Prediction& p) {
  w.BeginObject();
  w.Field("samples_per_s", p.samples_per_s).Field("step_s", p.step_s).Field("stall_fraction", p.stall_fraction);
  w.Field("fetch_stall_fraction", p.fetch_stall_fraction).Field("prep_stall_fraction", p.prep_stall_fraction);
  w.Field("handoff_stall_fraction", p.handoff_stall_fraction);
  w.Field("bottleneck", model::ToString(p.bottleneck)).Field("workers", p.workers);
  w.Key("hit_ratio");
  if (p.hit_ratio_known) w.Number(p.hit_ratio); else w.Null();
  w.Field("r_compute", Rate(p.r_compute)).Field("r_prep", Rate(p.r_prep)).Field("r_workers", Rate(p.r_workers));
  w.Field("r_fetch", Rate(p.r_fetch)).Field("cpu_s", p.cpu_s).Field("io_s", p.io_s).Field("delay_s", p.delay_s);
  w.Field("background_threads", p.background_threads);
  w.Field("handoff_s", p.handoff_s).Field("r_main", Rate(p.r_main));
  w.Field("compute_step_s", p.compute_step_s).Field("whole_run_samples_per_s", p.whole_run_samples_per_s);
  w.Field("startup_s_per_epoch", p.startup_s_per_epoch).Field("startup_measured", p.startup_measured);
  w.Field("loop_work_s_per_epoch", p.loop_work_s_per_epoch);
  w.Field("analytic_samples_per_s", Rate(p.analytic_samples_per_s));
  w.Field("step_threads", p.step_threads).Field("step_oversubscribed", p.step_oversubscribed);
  w.Field("waiting_threads", p.waiting_threads).Field("busy_cores", p.busy_cores);
  w.EndObject();
}

// `value` when the measured throughput is known, else null.
void NumberIfMeasured(JsonWriter& w, const char* key, const model::WhatIfResult& r, double value) {
  w.Key(key);
  if (r.measured_samples_per_s > 0) w.Number(value); else w.Null();
}

// The rows' outside load when it is less than the profile's: then even the
// profiled configuration's row gains over the measured baseline (a profile
// beside 2.3 busy threads predicted the demo's own configuration +64%).
std::string QuieterMachine(const model::WhatIfResult& r) {
  if (r.profiled_background_threads - r.scenario_background_threads < model::kOutsideCoresSeen) return "";
  return fmt::format(", {:.3g} busy threads of other processes where the profile ran beside {:.2f}: every row, the "
                     "profiled configuration's too, gains what that load took (--background-load profiled keeps it)",
                     r.scenario_background_threads, r.profiled_background_threads);
}

// The sentence whatif prints (with a leading space) when the profile spent
// its CPU quota (kQuotaSpent of it busy or more: the kernel throttled the job)
// and a scenario gives the job more CPU: throttled work may run slower per op
// than free; "" otherwise.
constexpr double kQuotaSpent = 0.9;
std::string ThrottledProfileNote(const model::WhatIfResult& r) {
  // The quota spent (its threads throttled) and a scenario with more CPU time.
  if (!r.profiled.cpu_limited || r.baseline.busy_cores < kQuotaSpent * r.profiled.cores) return "";
  const bool more_cpu = std::any_of(r.rows.begin(), r.rows.end(), [&](const model::WhatIfRow& row) {
    return row.scenario.machine.cores > r.profiled.cores || !row.scenario.machine.cpu_limited;
  });
  if (!more_cpu) return "";
  // scripts/bench_quota_throttle.sh on this project's 2-vCPU VM (2026-12-07):
  // one CPU-bound process in a 0.5-core quota took +6% to +42% CPU per op
  // (median +14.5%) against itself unthrottled, +3% with a quota that never
  // bit; the validation's quota case predicted 2 free cores 4-21% low.
  return fmt::format(" The profile spent its CPU quota ({:.2f} cores busy of a {:g}-core quota): the kernel throttled the job's "
                     "threads, and a host whose cores idle between the bursts (frequency, caches, other tenants) runs "
                     "throttled work slower per op, so the CPU per batch measured here may exceed what the same work "
                     "takes without the quota, and figures with more CPU than the quota are then low by up to that "
                     "much (`scripts/bench_quota_throttle.sh` measures it on a host; docs/model.md).",
                     r.baseline.busy_cores, r.profiled.cores);
}

}  // namespace

std::string WhatIfLoaderText(const model::WhatIfResult& r, const model::Sweep& sweep, const std::string& trace) {
  std::string out = fmt::format("stallprof whatif: loader '{}' ({})\n", r.loader, trace);
  out += fmt::format("baseline, as profiled ({:g} core{}{}, {} worker{}): predicted {:.1f} samples/s, step {}",
                     r.profiled.cores, r.profiled.cores == 1 ? "" : "s", r.profiled.cpu_limited ? " of CPU quota" : "",
                     r.baseline.workers, r.baseline.workers == 1 ? "" : "s", r.baseline.samples_per_s,
                     FormatSeconds(r.baseline.step_s));
  if (r.measured_samples_per_s > 0)
    out += fmt::format("; measured {:.1f} samples/s: model error {:+.1f}%\n", r.measured_samples_per_s, r.model_error * 100);
  else if (!r.steady_state_measured)
    out += "; measured: no steady state (no full batch past any epoch's warm-up): compare the whole run\n";
  else
    out += "; measured throughput unknown\n";
  out += fmt::format("  steady state above (past the warm-up); whole run, every epoch from iterator creation: predicted "
                     "{:.1f} samples/s (start-up {} per epoch{})",
                     r.baseline.whole_run_samples_per_s, FormatSeconds(r.baseline.startup_s_per_epoch),
                     r.baseline.loop_work_s_per_epoch > 0
                         ? fmt::format(", the loop's own work at epoch starts {}", FormatSeconds(r.baseline.loop_work_s_per_epoch))
                         : "");
  if (r.measured_whole_run_samples_per_s > 0)
    out += fmt::format("; measured {:.1f} samples/s: error {:+.1f}%", r.measured_whole_run_samples_per_s,
                       r.whole_run_model_error * 100);
  out += "\n";
  if (r.profiled_steal_fraction >= model::kStealSlowsHost)
    out += fmt::format("  the host took {:.1f}% of this machine's CPU time (steal: the hypervisor running other guests) while it "
                       "was profiled: the measured costs are a slowed host's, and every row carries them; profile again "
                       "when analyze's System line shows little steal\n",
                       r.profiled_steal_fraction * 100);
  out += fmt::format("scenario: cache policy {}{}{}{}{}{}\n\n", model::ToString(sweep.cache_policy),
                     sweep.prefetch_factor > 0 ? fmt::format(", prefetch_factor {}", sweep.prefetch_factor) : "",
                     sweep.accel_speedup != 1 ? fmt::format(", accelerator {:g}x faster", sweep.accel_speedup) : "",
                     sweep.storage_bandwidth > 0 ? ", storage " + FormatBytes(sweep.storage_bandwidth) + "/s" : "",
                     sweep.first_epoch ? ", first epoch (cold cache)" : ", steady state", QuieterMachine(r));
  out += fmt::format("{:>6} {:>7} {:>10} {:>6} {:>11} {:>10} {:>10} {:>6} {:>6} {:>6} {:>7}  {:<10} {:>8}\n", "cores",
                     "workers", "cache", "hit", "samples/s", "whole run", "step", "stall", "fetch", "prep", "handoff",
                     "bottleneck", "change");
  for (const auto& row : r.rows) {
    const auto& p = row.prediction;
    out += fmt::format("{:>6g} {:>7} {:>10} {:>6} {:>11.1f} {:>10.1f} {:>10} {:>5.0f}% {:>5.0f}% {:>5.0f}% {:>6.0f}%  {:<10} {:>+7.1f}%\n",
                       row.scenario.machine.cores, row.auto_workers ? fmt::format("auto {}", p.workers) : std::to_string(p.workers),
                       CacheText(row.scenario), HitText(p), p.samples_per_s,
                       p.whole_run_samples_per_s, FormatSeconds(p.step_s), p.stall_fraction * 100,
                       p.fetch_stall_fraction * 100, p.prep_stall_fraction * 100, p.handoff_stall_fraction * 100,
                       model::ToString(p.bottleneck),
                       row.change * 100);
    if (row.other_epoch)
      out += fmt::format("{:>31} {}: {:.1f} samples/s, hit {}, {}\n", "",
                         sweep.first_epoch ? "steady state" : "first epoch (cold cache)", row.other_epoch->samples_per_s,
                         HitText(*row.other_epoch), model::ToString(row.other_epoch->bottleneck));
    if (row.without_miss_cpu)
      out += fmt::format("{:>31} the CPU a storage miss costs is estimated from a cold profile (not fitted), and CPU "
                         "measured while workers wait on storage runs slower than on a warm cache, so this figure may be "
                         "off by up to a third either way; with misses costing no CPU beyond their I/O (the floor): {:.1f} "
                         "samples/s (docs/model.md)\n",
                         "", row.without_miss_cpu->samples_per_s);
    if (row.unpriced_serial_handoff)
      out += fmt::format("{:>31} at prefetch_factor=1 each batch's fetch begins only once the previous batch is "
                         "received: the wake-ups on that path are not modelled, so this figure may be high (a text "
                         "classifier's 1 worker measured 14% slower at 1 than at 2, predicted alike; docs/model.md)\n",
                         "");
    // A TensorDataset MLP profiled with 2 workers: 29203 samples/s predicted
    // without workers, 39376 measured (docs/model.md "recommend").
    if (p.workers == 0 && r.baseline.workers > 0 && !r.shared_memory_timed)
      out += fmt::format("{:>31} profiled with workers: its fetches include collating into shared memory and its step "
                         "the first touch of each received batch, which fetching in the main process does not pay, so "
                         "this figure is low (it was not timed after the run); profile with num_workers=0 to measure "
                         "it (docs/model.md)\n",
                         "");
    if (p.step_oversubscribed)
      out += fmt::format("{:>31} the step's {} intra-op threads and {} worker(s) oversubscribe {:g} cores: its threads "
                         "hold each other up, and this figure is an upper bound (docs/model.md){}\n",
                         "", p.step_threads, p.workers, row.scenario.machine.cores,
                         row.fewer_step_threads
                             ? fmt::format("; with torch.set_num_threads({}): {:.1f} samples/s (--step-threads {})",
                                           row.fewer_step_threads->step_threads, row.fewer_step_threads->samples_per_s,
                                           row.fewer_step_threads->step_threads)
                             : "");
    else if (p.waiting_threads >= model::kTimeSlicedThreads)
      out += fmt::format("{:>31} {:.2f} of the job's threads wait for a core on average: the kernel's scheduling of "
                         "them is not modelled (it leaves a core idle while a thread waits, or favours the step), so "
                         "this figure may be off by up to 40% either way, most often high (docs/model.md)\n",
                         "", p.waiting_threads);
  }
  if (!r.steady_state_measured)
    out += fmt::format("\nsamples/s is the steady state, whole run includes each epoch's start-up; change is the whole "
                       "run against the {} baseline's (no steady state was measured: no full batch past the warm-up).",
                       r.measured_whole_run_samples_per_s > 0 ? "measured" : "predicted");
  else
    out += fmt::format("\nsamples/s is the steady state, whole run includes each epoch's start-up; change is the steady "
                       "state against the {} baseline.",
                       r.measured_samples_per_s > 0 ? "measured" : "predicted");
  // Workers added to a profile that could not measure their start-up.
  const bool adds_workers = std::any_of(r.rows.begin(), r.rows.end(), [](const auto& row) {
    return row.prediction.workers > 0 && !row.prediction.startup_measured;
  });
  // The scenarios furthest from the profile's busy cores, each way.
  const model::WhatIfRow* busiest = nullptr;
  const model::WhatIfRow* least_busy = nullptr;
  for (const auto& row : r.rows) {
    const auto shift = model::CompareBusyCores(r.baseline, row.prediction);
    if (shift == model::BusyShift::kBusier && (!busiest || row.prediction.busy_cores > busiest->prediction.busy_cores))
      busiest = &row;
    if (shift == model::BusyShift::kLessBusy &&
        (!least_busy || row.prediction.busy_cores < least_busy->prediction.busy_cores))
      least_busy = &row;
  }
  out += ThrottledProfileNote(r);
  if (busiest) out += BusyCoresNote(r.baseline, busiest->prediction, "the scenarios above up to");
  if (least_busy) out += BusyCoresNote(r.baseline, least_busy->prediction, "the scenarios above as few as");
  if (r.baseline.workers == 0 && adds_workers)
    out += " Whole run with workers leaves out their start-up at each epoch (fork or spawn, the first batch), which a "
           "profile without workers cannot measure: with short epochs it can cost more than workers save; profile "
           "with workers, or keep them with persistent_workers=True.";
  out += " Inputs:\n";
  for (const auto& line : r.inputs) out += fmt::format("  {}\n", line);
  return out;
}

std::string CpuFitLine(const model::LinearFit& fit) {
  return fmt::format("worker CPU per batch = {} + {} x batch size (least squares over {} loaders, r2 {:.2f})",
                     FormatSeconds(fit.intercept), FormatSeconds(fit.slope), fit.points, fit.r2);
}

std::string BusyCoresNote(const model::Prediction& profiled, const model::Prediction& scenario,
                          const std::string& subject) {
  // Busy cores slow each other (shared caches and memory bandwidth, vCPUs on
  // shared physical cores): on this project's 2-vCPU host a decode step and
  // its worker took 23-28% more CPU a batch than alone at times, and a
  // 2-worker profile of the decode case predicted 0 workers 10.8% low
  // (docs/model.md). Printed figures come from the trace, so the examples
  // stay here.
  switch (model::CompareBusyCores(profiled, scenario)) {
    case model::BusyShift::kBusier:
      return fmt::format(" The profile kept {:.1f} cores busy on average and {} {:.1f}: the model takes a thread to "
                         "run as fast with more cores busy as the profile measured it. A host whose busy cores slow "
                         "each other (vCPUs sharing physical cores, another tenant, shared caches and memory "
                         "bandwidth) runs them slower, and such figures are then high by that slowdown (docs/model.md "
                         "\"What the misses say\"); profile nearer the configuration you predict to measure it.",
                         profiled.busy_cores, subject, scenario.busy_cores);
    case model::BusyShift::kLessBusy:
      return fmt::format(" The profile kept {:.1f} cores busy on average and {} {:.1f}, with no more threads waiting "
                         "for a core: the model takes a thread to run as fast with fewer cores busy as the profile "
                         "measured it. Where busy cores slow each other (shared caches and memory bandwidth, vCPUs "
                         "sharing physical cores), or where threads that wait between batches (the step in next(), "
                         "a worker for its next index) and batches mapped from shared memory leave caches and TLB "
                         "cold for the work after them, its work runs faster there, and such figures are then low "
                         "(docs/model.md \"What the misses say\"); profile nearer the configuration you predict "
                         "(num_workers=0 measures the work alone).",
                         profiled.busy_cores, subject, scenario.busy_cores);
    case model::BusyShift::kAsProfiled: break;
  }
  return "";
}

std::string OtherLoadersLine(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::string list;
  for (const auto& name : names) list += (list.empty() ? "" : ", ") + TerminalSafe(name);
  return fmt::format("\nother loaders in the trace: {} (--loader NAME or --loader all for them)\n", list);
}

std::string WhatIfText(const WhatIfReport& report) {
  std::string out;
  for (size_t i = 0; i < report.loaders.size(); ++i) {
    if (i) out += "\n";
    out += WhatIfLoaderText(report.loaders[i], report.sweep, report.trace);
  }
  for (const auto& [loader, why] : report.not_predicted) out += fmt::format("\nnot predicted: {}\n", why);
  out += OtherLoadersLine(report.other_loaders);
  if (report.cpu_fit) out += fmt::format("  {}\n", CpuFitLine(*report.cpu_fit));
  if (!report.plot.empty() && !report.loaders.empty())
    out += fmt::format("plot: {} (loader '{}')\n", report.plot, report.loaders.front().loader);
  return out;
}

std::string WhatIfJson(const WhatIfReport& report) {
  std::string out;
  JsonWriter w(out, kSpacedJson);
  w.BeginObject();
  w.Field("trace", report.trace);
  w.Key("loaders").BeginArray();
  for (const auto& r : report.loaders) {
    w.BeginObject();
    w.Field("loader", r.loader).Field("profiled_cores", r.profiled.cores);
    NumberIfMeasured(w, "measured_samples_per_s", r, r.measured_samples_per_s);
    w.Key("baseline");
    WritePrediction(w, r.baseline);
    NumberIfMeasured(w, "model_error", r, r.model_error);
    w.Key("measured_whole_run_samples_per_s");
    if (r.measured_whole_run_samples_per_s > 0) w.Number(r.measured_whole_run_samples_per_s); else w.Null();
    w.Key("whole_run_model_error");
    if (r.measured_whole_run_samples_per_s > 0) w.Number(r.whole_run_model_error); else w.Null();
    // What the rows' change compares: "steady_state", or "whole_run" where no steady state was measured.
    w.Field("change_of", r.steady_state_measured ? "steady_state" : "whole_run");
    w.Field("profiled_background_threads", r.profiled_background_threads);
    w.Field("profiled_steal_fraction",  // null where the trace did not record steal
            r.profiled_steal_fraction >= 0 ? r.profiled_steal_fraction : std::numeric_limits<double>::quiet_NaN());
    w.Field("scenario_background_threads", r.scenario_background_threads);
    w.Field("swept", r.swept);
    w.Key("scenarios").BeginArray();
    for (const auto& row : r.rows) {
      const auto& s = row.scenario;
      w.BeginObject();
      w.Field("cores", s.machine.cores).Field("workers", row.prediction.workers).Field("auto_workers", row.auto_workers);
      w.Key("cache_bytes");  // null: as run, or everything cached (cache_all)
      if (s.cache_bytes < 0 || s.cache_bytes >= model::kCacheAll) w.Null(); else w.Int(s.cache_bytes);
      w.Field("cache_all", s.cache_bytes >= model::kCacheAll);
      w.Field("cache_policy", model::ToString(s.cache_policy)).Field("accel_speedup", s.accel_speedup);
      w.Field("first_epoch", s.first_epoch).Field("change", row.change);
      w.Field("unpriced_serial_handoff", row.unpriced_serial_handoff);
      w.Key("prediction");
      WritePrediction(w, row.prediction);
      if (row.other_epoch) {
        w.Key("other_epoch");
        WritePrediction(w, *row.other_epoch);
      }
      if (row.fewer_step_threads) {
        w.Key("fewer_step_threads");
        WritePrediction(w, *row.fewer_step_threads);
      }
      if (row.without_miss_cpu) {
        w.Key("without_miss_cpu");
        WritePrediction(w, *row.without_miss_cpu);
      }
      w.EndObject();
    }
    w.EndArray();
    w.Key("inputs").BeginArray();
    for (const auto& line : r.inputs) w.String(line);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("not_predicted").BeginArray();
  for (const auto& [loader, why] : report.not_predicted) {
    w.BeginObject();
    w.Field("loader", loader).Field("reason", why);
    w.EndObject();
  }
  w.EndArray();
  w.Key("other_loaders").BeginArray();
  for (const auto& name : report.other_loaders) w.String(name);
  w.EndArray();
  w.Key("cpu_fit");
  if (report.cpu_fit) w.String(CpuFitLine(*report.cpu_fit)); else w.Null();
  w.EndObject();
  out += '\n';
  return out;
}

}  // namespace stallprof::report
