#include "ranks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "common/units.h"

namespace stallprof::analysis {

namespace {

constexpr double kNs = 1e-9;

// Median of `values` (copied, so callers keep their order); 0 when empty.
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return Quantile(values, 0.5);
}

Spread SpreadOf(const std::vector<double>& values) {
  Spread s;
  if (values.empty()) return s;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  s.median = Median(values);
  return s;
}

// The relative margin a rank must exceed against `others` (their steady times):
// max(5%, 3 x MAD / median).
double MarginOf(const std::vector<double>& others, double median) {
  if (others.empty() || median <= 0) return kStragglerMinMargin;
  std::vector<double> deviations;
  for (double v : others) deviations.push_back(std::fabs(v - median));
  return std::max(kStragglerMinMargin, kStragglerSpreadFactor * Median(deviations) / median);
}

std::string Percent(double f) { return fmt::format("{:.0f}%", f * 100); }

// One process's loaders merged by name (a loader re-created each epoch under
// the same variable is one loader).
struct Merged {
  RankLoaderStats stats;
  uint64_t steady_steps = 0;
  double steady_wait_s = 0, steady_compute_s = 0, steady_step_s = 0;
  double fetch_s = 0, prep_s = 0, split_step_s = 0;
  double weighted_stall = 0;       // the loaders' stall fractions x their steady step time
  uint64_t most_steps = 0;
  double start_realtime_s = std::numeric_limits<double>::infinity(), end_realtime_s = 0;
};

std::map<std::string, Merged> MergeByName(const TraceAnalysis& t, uint32_t pid) {
  std::map<std::string, Merged> by_name;
  for (const auto& l : t.loaders) {
    if (l.pid != pid) continue;
    Merged& m = by_name[l.config.name];
    m.stats.steps += l.iterations.size();
    m.stats.samples += l.samples;
    m.stats.epoch_time_s += l.active_s;
    m.steady_steps += l.step_steady.count;
    m.steady_compute_s += l.compute_steady.total;
    m.steady_wait_s += l.wait_steady.total;
    m.steady_step_s += l.step_steady.total;
    m.weighted_stall += l.stall_fraction * l.step_steady.total;
    if (l.iterations.size() >= m.most_steps) {
      m.most_steps = l.iterations.size();
      m.stats.bottleneck = l.bottleneck;
    }
    if (l.split.available) {
      m.fetch_s += l.split.fetch_stall_s;
      m.prep_s += l.split.prep_stall_s;
      m.split_step_s += l.split.step_s;
    }
    if (!l.epochs.empty()) {
      m.start_realtime_s = std::min(m.start_realtime_s, ToRealtime(t, l.epochs.front().start_ns) * kNs);
      m.end_realtime_s = std::max(m.end_realtime_s, ToRealtime(t, l.iterations.back().return_ns) * kNs);
    }
  }
  for (auto& [name, m] : by_name) {
    auto& r = m.stats;
    r.trace_path = t.path;
    r.hostname = t.hostname;
    r.pid = pid;
    r.samples_per_s = r.epoch_time_s > 0 ? r.samples / r.epoch_time_s : 0;
    r.stall_fraction = m.steady_step_s > 0 ? m.weighted_stall / m.steady_step_s : 0;
    r.fetch_stall_fraction = m.split_step_s > 0 ? m.fetch_s / m.split_step_s : 0;
    r.prep_stall_fraction = m.split_step_s > 0 ? m.prep_s / m.split_step_s : 0;
    r.wait_per_step_s = m.steady_steps ? m.steady_wait_s / m.steady_steps : 0;
    r.compute_per_step_s = m.steady_steps ? m.steady_compute_s / m.steady_steps : 0;
    r.steady_time_s = r.steps * (r.wait_per_step_s + r.compute_per_step_s);
    if (m.end_realtime_s > 0) {
      r.start_realtime_s = m.start_realtime_s;
      r.end_realtime_s = m.end_realtime_s;
    }
  }
  return by_name;
}

std::string CommandOf(const TraceAnalysis& t, uint32_t pid) {
  for (const auto& p : t.processes)
    if (p.pid == pid) return p.command;
  return {};
}

// Rank identity of each process of `t` that iterated a loader: its rank, or -1
// for a plain process. `inherited` gets the RANK of processes that share it
// without being a rank.
std::map<uint32_t, int32_t> RanksOfProcesses(const TraceAnalysis& t, std::map<uint32_t, int32_t>& inherited) {
  std::unordered_map<uint32_t, const ProcessSummary*> by_pid;
  for (const auto& p : t.processes) by_pid[p.pid] = &p;
  std::set<uint32_t> iterating;
  for (const auto& l : t.loaders) iterating.insert(l.pid);
  auto rank_of = [&](uint32_t pid) {
    auto it = by_pid.find(pid);
    return it == by_pid.end() ? -1 : it->second->rank;
  };
  std::map<uint32_t, int32_t> rank;
  std::map<int32_t, std::vector<uint32_t>> claimants;  // rank -> processes that are it
  for (uint32_t pid : iterating) {
    const int32_t r = rank_of(pid);
    rank[pid] = -1;
    if (r < 0) continue;
    // A subprocess of a rank (it inherited RANK) is not that rank again.
    bool under_same_rank = false;
    uint32_t current = pid;
    for (int depth = 0; depth < 64; ++depth) {
      auto it = by_pid.find(current);
      if (it == by_pid.end() || it->second->ppid == current || it->second->ppid == 0) break;
      current = it->second->ppid;
      if (iterating.count(current) && rank_of(current) == r) {
        under_same_rank = true;
        break;
      }
    }
    if (under_same_rank) {
      inherited[pid] = r;
    } else {
      claimants[r].push_back(pid);
    }
  }
  for (const auto& [r, pids] : claimants) {
    if (pids.size() == 1) {
      rank[pids.front()] = r;
    } else {
      // Siblings sharing one RANK (a rank's process pool, its parent iterating
      // nothing): none of them is the rank.
      for (uint32_t pid : pids) inherited[pid] = r;
    }
  }
  return rank;
}

void FindStragglers(JobLoader& loader) {
  const auto& ranks = loader.ranks;
  if (ranks.size() < 2) return;
  size_t slowest = 0;
  for (size_t i = 1; i < ranks.size(); ++i)
    if (ranks[i].steady_time_s > ranks[slowest].steady_time_s) slowest = i;
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::vector<double> time, wait, compute, steps;
    for (size_t j = 0; j < ranks.size(); ++j) {
      if (j == i) continue;
      time.push_back(ranks[j].steady_time_s);
      wait.push_back(ranks[j].wait_per_step_s);
      compute.push_back(ranks[j].compute_per_step_s);
      steps.push_back(static_cast<double>(ranks[j].steps));
    }
    const auto& r = ranks[i];
    const double others = Median(time);
    const double margin = MarginOf(time, others);
    const double slower_by = others > 0 ? r.steady_time_s / others - 1 : 0;
    if (i == slowest) {
      loader.slowest_rank = r.rank;
      loader.slowest_slower_by = slower_by;
      loader.slowest_margin = margin;
    }
    if (others <= 0 || slower_by <= margin) continue;
    Straggler s;
    s.rank = r.rank;
    s.steady_time_s = r.steady_time_s;
    s.others_steady_time_s = others;
    s.slower_by = slower_by;
    s.margin = margin;
    const double others_wait = Median(wait), others_compute = Median(compute), others_steps = Median(steps);
    const double steps_i = static_cast<double>(r.steps);
    s.extra_wait_s = steps_i * (r.wait_per_step_s - others_wait);
    s.extra_compute_s = steps_i * (r.compute_per_step_s - others_compute);
    s.extra_work_s = (steps_i - others_steps) * (others_wait + others_compute);
    const double largest = std::max({s.extra_wait_s, s.extra_compute_s, s.extra_work_s});
    s.cause = largest == s.extra_wait_s      ? StragglerCause::kMoreWait
              : largest == s.extra_compute_s ? StragglerCause::kMoreCompute
                                             : StragglerCause::kMoreWork;
    std::string figures;
    switch (s.cause) {
      case StragglerCause::kMoreWait:
        figures = fmt::format("{} waiting for data per step against {} on the others (stall {}, fetch {}, prep {})",
                              FormatSeconds(r.wait_per_step_s), FormatSeconds(others_wait), Percent(r.stall_fraction),
                              Percent(r.fetch_stall_fraction), Percent(r.prep_stall_fraction));
        break;
      case StragglerCause::kMoreCompute:
        figures = fmt::format("{} of compute per step against {} on the others", FormatSeconds(r.compute_per_step_s),
                              FormatSeconds(others_compute));
        break;
      case StragglerCause::kMoreWork:
        figures = fmt::format("{} steps ({:.0f} samples) against {:.0f} steps on the others", r.steps, r.samples, others_steps);
        break;
    }
    s.reason = fmt::format("{}: {}; steady time {} against the others' median {} (+{:.1f}%, margin {:.1f}%)", ToString(s.cause),
                           figures, FormatSeconds(r.steady_time_s), FormatSeconds(others), slower_by * 100, margin * 100);
    loader.stragglers.push_back(std::move(s));
  }
}

}  // namespace

const char* ToString(StragglerCause cause) {
  switch (cause) {
    case StragglerCause::kMoreWait: return "more wait";
    case StragglerCause::kMoreCompute: return "more compute per step";
    case StragglerCause::kMoreWork: return "more samples or steps";
  }
  return "?";
}

Result<JobAnalysis> AnalyzeJob(const std::vector<TraceAnalysis>& traces) {
  JobAnalysis job;
  std::map<std::string, JobLoader> loaders;
  std::map<std::string, uint64_t> steps_of_loader;
  std::set<int32_t> ranks;
  size_t iterating_processes = 0;
  for (const auto& t : traces) {
    std::map<uint32_t, int32_t> inherited;
    const auto rank_of_pid = RanksOfProcesses(t, inherited);
    for (const auto& [pid, rank] : rank_of_pid) {
      ++iterating_processes;
      auto merged = MergeByName(t, pid);
      if (rank < 0) {
        JobProcess p;
        p.trace_path = t.path;
        p.hostname = t.hostname;
        p.pid = pid;
        for (const auto& s : t.processes)
          if (s.pid == pid) p.ppid = s.ppid;
        if (auto it = inherited.find(pid); it != inherited.end()) p.inherited_rank = it->second;
        p.command = CommandOf(t, pid);
        for (const auto& [name, m] : merged)
          p.loaders.push_back({name, m.stats.steps, m.stats.samples, m.stats.samples_per_s, m.stats.stall_fraction});
        job.processes.push_back(std::move(p));
        continue;
      }
      ranks.insert(rank);
      for (auto& [name, m] : merged) {
        m.stats.rank = rank;
        auto& loader = loaders[name];
        loader.name = name;
        loader.ranks.push_back(m.stats);
        steps_of_loader[name] += m.stats.steps;
      }
    }
  }
  if (iterating_processes < 2)
    return UnsupportedError("the traces hold " + std::to_string(iterating_processes) +
                            " process(es) that iterated a DataLoader, so there is no job to compare; pass one trace per "
                            "rank (rank*.pb) or record the job under torchrun");
  job.ranks.assign(ranks.begin(), ranks.end());
  for (auto& [name, loader] : loaders) {
    std::sort(loader.ranks.begin(), loader.ranks.end(),
              [](const RankLoaderStats& a, const RankLoaderStats& b) { return std::tie(a.rank, a.pid) < std::tie(b.rank, b.pid); });
    std::vector<double> rate, time, steady, stall, wait, compute;
    double total_samples = 0, slowest = 0, earliest = std::numeric_limits<double>::infinity(), latest = 0;
    for (const auto& r : loader.ranks) {
      rate.push_back(r.samples_per_s);
      time.push_back(r.epoch_time_s);
      steady.push_back(r.steady_time_s);
      stall.push_back(r.stall_fraction);
      wait.push_back(r.wait_per_step_s);
      compute.push_back(r.compute_per_step_s);
      total_samples += r.samples;
      loader.sum_local_samples_per_s += r.samples_per_s;
      slowest = std::max(slowest, r.epoch_time_s);
      if (r.end_realtime_s > 0) {
        earliest = std::min(earliest, r.start_realtime_s);
        latest = std::max(latest, r.end_realtime_s);
      }
    }
    loader.samples_per_s = SpreadOf(rate);
    loader.epoch_time_s = SpreadOf(time);
    loader.steady_time_s = SpreadOf(steady);
    loader.stall_fraction = SpreadOf(stall);
    loader.wait_per_step_s = SpreadOf(wait);
    loader.compute_per_step_s = SpreadOf(compute);
    loader.global_samples_per_s = slowest > 0 ? total_samples / slowest : 0;
    loader.scaling_efficiency =
        loader.sum_local_samples_per_s > 0 ? loader.global_samples_per_s / loader.sum_local_samples_per_s : 0;
    loader.aligned_span_s = latest > earliest ? latest - earliest : 0;
    FindStragglers(loader);
    for (auto& r : loader.ranks)
      for (const auto& s : loader.stragglers) r.straggler |= s.rank == r.rank;
    job.loaders.push_back(std::move(loader));
  }
  std::stable_sort(job.loaders.begin(), job.loaders.end(), [&](const JobLoader& a, const JobLoader& b) {
    return steps_of_loader[a.name] > steps_of_loader[b.name];
  });
  return job;
}

namespace internal {

void DescribeProcesses(const Trace& trace, TraceAnalysis& analysis) {
  // torch.distributed's rank, when the hook recorded it for a loader of the process.
  std::unordered_map<uint32_t, int32_t> distributed_rank;
  for (const auto& c : trace.configs)
    if (c.key == "rank" && c.type == ConfigValue::Type::kU64) distributed_rank[c.pid] = static_cast<int32_t>(c.u64);
  for (const auto& p : trace.processes) {
    ProcessSummary s;
    s.pid = p.pid;
    s.ppid = p.ppid;
    if (p.rank >= 0) s.rank = p.rank;
    else if (auto it = distributed_rank.find(p.pid); it != distributed_rank.end()) s.rank = it->second;
    else s.rank = p.local_rank;
    for (const auto& arg : p.cmdline) s.command += (s.command.empty() ? "" : " ") + arg;
    if (s.command.empty()) s.command = p.comm;
    analysis.processes.push_back(std::move(s));
  }
  // A loader's rank is its process's rank identity (a process ranked by
  // torch.distributed has no RANK to read): keep the (rank, pid, scope) order.
  std::unordered_map<uint32_t, int32_t> rank_of_pid;
  for (const auto& p : analysis.processes) rank_of_pid[p.pid] = p.rank;
  for (auto& l : analysis.loaders)
    if (auto it = rank_of_pid.find(l.pid); it != rank_of_pid.end()) l.rank = it->second;
  for (auto& e : analysis.quality.uncaught_errors)  // a job of many ranks asks which rank failed
    if (auto it = rank_of_pid.find(e.pid); it != rank_of_pid.end()) e.rank = it->second;
  std::stable_sort(analysis.loaders.begin(), analysis.loaders.end(), [](const LoaderAnalysis& a, const LoaderAnalysis& b) {
    return std::tie(a.rank, a.pid, a.scope) < std::tie(b.rank, b.pid, b.scope);
  });
}

}  // namespace internal

}  // namespace stallprof::analysis
