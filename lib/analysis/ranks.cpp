#include "ranks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace stallprof::analysis {

namespace {
constexpr double kNs = 1e-9;
}  // namespace

Result<JobAnalysis> AnalyzeJob(const std::vector<TraceAnalysis>& traces) {
  JobAnalysis job;
  int32_t next_unranked = 0;
  for (const auto& t : traces) {
    std::map<uint32_t, const LoaderAnalysis*> main_of_pid;
    for (const auto& l : t.loaders) {
      auto& best = main_of_pid[l.pid];
      if (!best || l.iterations.size() > best->iterations.size()) best = &l;
    }
    for (const auto& [pid, l] : main_of_pid) {
      RankStats r;
      r.rank = l->rank >= 0 ? l->rank : 1000000 + next_unranked++;
      r.trace_path = t.path;
      r.hostname = t.hostname;
      r.pid = pid;
      r.loader = l->config.name;
      r.samples = l->samples;
      r.epoch_time_s = l->active_s;
      r.samples_per_s = l->samples_per_s;
      r.stall_fraction = l->stall_fraction;
      if (l->split.available && l->split.step_s > 0) {
        r.fetch_stall_fraction = l->split.fetch_stall_s / l->split.step_s;
        r.prep_stall_fraction = l->split.prep_stall_s / l->split.step_s;
      }
      r.mean_compute_s = l->compute_steady.mean;
      if (!l->epochs.empty()) {
        r.start_realtime_s = ToRealtime(t, l->epochs.front().start_ns) * kNs;
        r.end_realtime_s = ToRealtime(t, l->iterations.back().return_ns) * kNs;
      }
      job.ranks.push_back(r);
    }
  }
  if (job.ranks.size() < 2)
    return UnsupportedError("the traces hold " + std::to_string(job.ranks.size()) +
                            " training process(es), so there is no per-rank comparison; pass one trace per rank "
                            "(rank*.pb) or record the job under torchrun");
  std::sort(job.ranks.begin(), job.ranks.end(), [](const RankStats& a, const RankStats& b) { return a.rank < b.rank; });
  for (auto& r : job.ranks)
    if (r.rank >= 1000000) r.rank = -1;
  double total_samples = 0, slowest = 0, earliest = std::numeric_limits<double>::infinity(), latest = 0;
  const RankStats* straggler = nullptr;
  for (const auto& r : job.ranks) {
    total_samples += r.samples;
    job.sum_local_samples_per_s += r.samples_per_s;
    if (r.epoch_time_s > slowest) {
      slowest = r.epoch_time_s;
      straggler = &r;
    }
    earliest = std::min(earliest, r.start_realtime_s);
    latest = std::max(latest, r.end_realtime_s);
  }
  job.global_samples_per_s = slowest > 0 ? total_samples / slowest : 0;
  job.scaling_efficiency = job.sum_local_samples_per_s > 0 ? job.global_samples_per_s / job.sum_local_samples_per_s : 0;
  job.aligned_span_s = latest > earliest ? latest - earliest : 0;
  if (straggler) {
    job.straggler_rank = straggler->rank;
    std::vector<double> other_stall, other_compute;
    for (const auto& r : job.ranks)
      if (&r != straggler) {
        other_stall.push_back(r.stall_fraction);
        other_compute.push_back(r.mean_compute_s);
      }
    std::sort(other_stall.begin(), other_stall.end());
    std::sort(other_compute.begin(), other_compute.end());
    double stall_others = Quantile(other_stall, 0.5), compute_others = Quantile(other_compute, 0.5);
    auto pct = [](double f) { return std::to_string(static_cast<int>(std::lround(f * 100))) + "%"; };
    if (straggler->stall_fraction - stall_others >= 0.05) {
      job.straggler_reason = "input-bound: " + pct(straggler->stall_fraction) + " of its step time waiting for data (fetch " +
                             pct(straggler->fetch_stall_fraction) + ", prep " + pct(straggler->prep_stall_fraction) +
                             ") against " + pct(stall_others) + " on the other ranks";
    } else if (compute_others > 0 && straggler->mean_compute_s > 1.1 * compute_others) {
      job.straggler_reason = "slower compute: " + std::to_string(straggler->mean_compute_s * 1e3).substr(0, 6) +
                             " ms per step against " + std::to_string(compute_others * 1e3).substr(0, 6) +
                             " ms on the other ranks, with a similar stall";
    } else {
      job.straggler_reason = "longest epoch time with a stall and compute like the other ranks (more samples or more steps)";
    }
  }
  return job;
}

}  // namespace stallprof::analysis
