// The job view for people (text) and programs (JSON): ranks side by side per
// loader, stragglers with their cause, and processes without rank identity.
#include "ranks_report.h"
#include "terminal.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/units.h"

namespace stallprof::report {

using namespace stallprof::analysis;

namespace {

std::string Pct(double fraction) { return fmt::format("{:.0f}%", fraction * 100); }

std::string Paint(Colour colour, const std::string& text, const char* code) {
  return colour == Colour::kOn ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : text;
}

// "0-3, 5, 7-8" from ascending rank numbers.
std::string RankList(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
    i = j + 1;
  }
  return out;
}

std::string MarginRule() {
  return fmt::format("max({:.0f}%, {:g} x the others' MAD / median)", kStragglerMinMargin * 100, kStragglerSpreadFactor);
}

const char* kSteadyTime = "steady time = steps x steady-state time per step, warm-up and start-up left out";

void StragglerLines(std::string& out, Colour colour, const JobLoader& l) {
  if (l.ranks.size() < 2) return;
  if (l.stragglers.empty()) {
    out += fmt::format("    no straggler: the slowest rank, {}, is {:+.1f}% against the others' median steady time, within the "
                       "margin {:.1f}% ({}; {})\n",
                       l.slowest_rank, l.slowest_slower_by * 100, l.slowest_margin * 100, MarginRule(), kSteadyTime);
    return;
  }
  for (const auto& s : l.stragglers)
    out += "    " + Paint(colour, fmt::format("straggler: rank {}", s.rank), "1;33") + ": " + s.reason + "\n";
  out += fmt::format("    (a straggler's steady time exceeds the other ranks' median by more than {}; {})\n", MarginRule(),
                     kSteadyTime);
}

void ThroughputLines(std::string& out, const JobLoader& l) {
  out += fmt::format("    global throughput {:.1f} samples/s (samples / the slowest rank's epoch time) vs sum of local {:.1f}: "
                     "scaling efficiency {}\n",
                     l.global_samples_per_s, l.sum_local_samples_per_s, Pct(l.scaling_efficiency));
  if (l.aligned_span_s > 0)
    out += fmt::format("    the ranks' loops span {} on clocks aligned by each host's realtime/monotonic pair\n",
                       FormatSeconds(l.aligned_span_s));
}

void RankTableRows(std::string& out, Colour colour, const JobLoader& l) {
  out += fmt::format("    {:>5} {:<12} {:>8} {:>10} {:>6} {:>6} {:>6} {:>7} {:>10} {:>13} {:>11} {:>11}\n", "rank", "host", "pid",
                     "samples/s", "stall", "fetch", "prep", "steps", "wait/step", "compute/step", "steady time", "epoch time");
  for (const auto& r : l.ranks)
    out += fmt::format("    {:>5} {:<12} {:>8} {:>10.1f} {:>6} {:>6} {:>6} {:>7} {:>10} {:>13} {:>11} {:>11}{}\n", r.rank,
                       TerminalSafe(r.hostname.substr(0, 12)), r.pid, r.samples_per_s, Pct(r.stall_fraction), Pct(r.fetch_stall_fraction),
                       Pct(r.prep_stall_fraction), r.steps, FormatSeconds(r.wait_per_step_s), FormatSeconds(r.compute_per_step_s),
                       FormatSeconds(r.steady_time_s), FormatSeconds(r.epoch_time_s),
                       r.straggler ? Paint(colour, "  <- straggler", "1;33") : "");
}

// One line: the loader's distribution over the ranks and its outliers.
std::string DistributionLine(const JobLoader& l) {
  std::vector<int32_t> stragglers;
  for (const auto& s : l.stragglers) stragglers.push_back(s.rank);
  return fmt::format("  {}, {} ranks: samples/s min {:.1f} median {:.1f} max {:.1f}; steady time min {} median {} max {}; "
                     "stall min {} median {} max {}; {}\n",
                     TerminalSafe(l.name), l.ranks.size(), l.samples_per_s.min, l.samples_per_s.median, l.samples_per_s.max,
                     FormatSeconds(l.steady_time_s.min), FormatSeconds(l.steady_time_s.median), FormatSeconds(l.steady_time_s.max),
                     Pct(l.stall_fraction.min), Pct(l.stall_fraction.median), Pct(l.stall_fraction.max),
                     stragglers.empty() ? std::string("no straggler") : "stragglers: rank " + RankList(stragglers));
}

}  // namespace

bool IsRankProcess(const JobAnalysis& job, const std::string& trace_path, uint32_t pid) {
  for (const auto& l : job.loaders)
    for (const auto& r : l.ranks)
      if (r.pid == pid && r.trace_path == trace_path) return true;
  return false;
}

std::vector<int32_t> DetailedRanks(const JobAnalysis& job) {
  std::set<int32_t> ranks;
  for (const auto& l : job.loaders) {
    if (l.ranks.empty()) continue;
    ranks.insert(l.ranks.front().rank);
    if (l.slowest_rank >= 0) ranks.insert(l.slowest_rank);
    for (const auto& s : l.stragglers) ranks.insert(s.rank);
  }
  return {ranks.begin(), ranks.end()};
}

bool DetailedRank(const JobAnalysis& job, const std::vector<int32_t>& detailed, const std::string& trace_path,
                  uint32_t pid) {
  for (const auto& l : job.loaders)
    for (const auto& r : l.ranks)
      if (r.pid == pid && r.trace_path == trace_path)
        return std::binary_search(detailed.begin(), detailed.end(), r.rank);
  return false;
}

std::string WhoInJob(const JobAnalysis& job, const std::string& trace_path, const LoaderAnalysis& loader) {
  return IsRankProcess(job, trace_path, loader.pid) ? fmt::format("[rank {}] ", loader.rank) : fmt::format("[pid {}] ", loader.pid);
}

std::string JobHeadlines(const JobAnalysis& job) {
  std::string out;
  for (const auto& l : job.loaders) {
    std::map<Verdict, size_t> verdicts;
    for (const auto& r : l.ranks) verdicts[Classify(r.stall_fraction)]++;
    std::string counts;
    for (auto v : {Verdict::kHighlyInputBound, Verdict::kModeratelyInputBound, Verdict::kNotInputBound})
      if (verdicts.count(v)) counts += fmt::format("{}{} on {}", counts.empty() ? "" : ", ", ToString(v), verdicts[v]);
    out += fmt::format("{}, {} ranks: {}; stall min {} median {} max {}; {}\n", TerminalSafe(l.name), l.ranks.size(), counts,
                       Pct(l.stall_fraction.min), Pct(l.stall_fraction.median), Pct(l.stall_fraction.max),
                       l.stragglers.empty() ? "no straggler" : fmt::format("{} straggler(s)", l.stragglers.size()));
  }
  return out;
}

std::string JobText(const JobAnalysis& job, RankTable table, Colour colour) {
  std::string out;
  if (job.ranks.size() >= 2) {
    const bool many = job.ranks.size() > kManyRanks;
    out += "\n" + Paint(colour, fmt::format("Ranks ({} ranks: {}; loaders matched by name)", job.ranks.size(), RankList(job.ranks)), "1") +
           "\n";
    for (const auto& l : job.loaders) {
      if (many && table == RankTable::kAuto) {
        out += DistributionLine(l);
      } else {
        out += fmt::format("  {}, {} rank(s)\n", TerminalSafe(l.name), l.ranks.size());
        RankTableRows(out, colour, l);
      }
      StragglerLines(out, colour, l);
      ThroughputLines(out, l);
    }
    if (many && table == RankTable::kAuto)
      out += fmt::format("  (the detail below is of rank {}: each loader's first and slowest rank and its stragglers; "
                         "one row and the detail per rank: stallprof analyze --ranks; all of it: --json)\n",
                         RankList(DetailedRanks(job)));
  }
  if (!job.processes.empty()) {
    out += "\n" + Paint(colour, "Processes (no rank identity: shown as themselves, never stragglers of a job)", "1") + "\n";
    out += fmt::format("  {:>8} {:>8} {:<16} {:>8} {:>11} {:>6}  {}\n", "pid", "ppid", "loader", "steps", "samples/s", "stall", "command");
    for (const auto& p : job.processes)
      for (const auto& l : p.loaders)
        out += fmt::format("  {:>8} {:>8} {:<16} {:>8} {:>11.1f} {:>6}  {}{}\n", p.pid, p.ppid, TerminalSafe(l.name.substr(0, 16)), l.steps,
                           l.samples_per_s, Pct(l.stall_fraction), TerminalSafe(p.command.substr(0, 60)),
                           p.inherited_rank >= 0 ? fmt::format(" (RANK={} inherited, shared)", p.inherited_rank) : "");
  }
  return out;
}

void WriteJobJson(JsonWriter& w, const JobAnalysis& job) {
  w.BeginObject();
  w.Key("ranks").BeginArray();
  for (int32_t r : job.ranks) w.Int(r);
  w.EndArray();
  w.Field("straggler_margin_rule", MarginRule());
  w.Key("loaders").BeginArray();
  for (const auto& l : job.loaders) {
    w.BeginObject();
    w.Field("name", l.name);
    w.Key("ranks").BeginArray();
    for (const auto& r : l.ranks) {
      w.BeginObject();
      w.Field("rank", r.rank).Field("trace", r.trace_path).Field("hostname", r.hostname).Field("pid", r.pid);
      w.Field("steps", r.steps).Field("samples", r.samples).Field("epoch_time_s", r.epoch_time_s);
      w.Field("samples_per_s", r.samples_per_s).Field("stall_fraction", r.stall_fraction);
      w.Field("fetch_stall_fraction", r.fetch_stall_fraction).Field("prep_stall_fraction", r.prep_stall_fraction);
      w.Field("bottleneck", CauseId(r.bottleneck));
      w.Field("wait_per_step_s", r.wait_per_step_s).Field("compute_per_step_s", r.compute_per_step_s);
      w.Field("steady_time_s", r.steady_time_s);
      w.Field("start_realtime_s", r.start_realtime_s).Field("end_realtime_s", r.end_realtime_s).Field("straggler", r.straggler);
      w.EndObject();
    }
    w.EndArray();
    auto spread = [&](const char* key, const Spread& s) {
      w.Key(key).BeginObject();
      w.Field("min", s.min).Field("median", s.median).Field("max", s.max);
      w.EndObject();
    };
    spread("samples_per_s", l.samples_per_s);
    spread("epoch_time_s", l.epoch_time_s);
    spread("steady_time_s", l.steady_time_s);
    spread("stall_fraction", l.stall_fraction);
    spread("wait_per_step_s", l.wait_per_step_s);
    spread("compute_per_step_s", l.compute_per_step_s);
    w.Field("global_samples_per_s", l.global_samples_per_s).Field("sum_local_samples_per_s", l.sum_local_samples_per_s);
    w.Field("scaling_efficiency", l.scaling_efficiency).Field("aligned_span_s", l.aligned_span_s);
    w.Field("slowest_rank", l.slowest_rank).Field("slowest_slower_by", l.slowest_slower_by).Field("slowest_margin", l.slowest_margin);
    w.Key("stragglers").BeginArray();
    for (const auto& s : l.stragglers) {
      w.BeginObject();
      w.Field("rank", s.rank).Field("cause", ToString(s.cause)).Field("reason", s.reason);
      w.Field("steady_time_s", s.steady_time_s).Field("others_steady_time_s", s.others_steady_time_s);
      w.Field("slower_by", s.slower_by).Field("margin", s.margin);
      w.Field("extra_wait_s", s.extra_wait_s).Field("extra_compute_s", s.extra_compute_s).Field("extra_work_s", s.extra_work_s);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("processes").BeginArray();
  for (const auto& p : job.processes) {
    w.BeginObject();
    w.Field("trace", p.trace_path).Field("hostname", p.hostname).Field("pid", p.pid).Field("ppid", p.ppid);
    w.Field("inherited_rank", p.inherited_rank).Field("command", p.command);
    w.Key("loaders").BeginArray();
    for (const auto& l : p.loaders) {
      w.BeginObject();
      w.Field("name", l.name).Field("steps", l.steps).Field("samples", l.samples);
      w.Field("samples_per_s", l.samples_per_s).Field("stall_fraction", l.stall_fraction);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace stallprof::report
