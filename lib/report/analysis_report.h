// Renders analysis results for people (text, optionally coloured) and for
// programs (JSON, schema in docs/analysis.md). Rendering only: every number
// comes from lib/analysis.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/ranks.h"

namespace stallprof::report {

enum class Colour { kOff, kOn };

// The per-rank table of the job view: kAuto prints it up to
// analysis::kManyRanks ranks and one line per loader beyond; kAlways always.
enum class RankTable { kAuto, kAlways };

// Schema id written as "schema" in the JSON; bump on incompatible changes
// (2: bottleneck is a cause of the account, "account" and "advice" added;
// the job view has loaders matched by name with per-rank rows, and processes).
inline constexpr const char* kAnalysisSchema = "stallprof.analysis/2";

// The one-line verdict of a loader, e.g. "train: HIGHLY input-bound: 41% of
// step time waiting for data (fetch 29%, prep 12%); bottleneck: storage".
std::string VerdictLine(const analysis::LoaderAnalysis& loader);

// A loader's settings as its text and HTML headers both show them, unescaped:
// "batch 64, 2 workers (fork), prefetch 2, pin_memory off, persistent workers,
// random" (without workers: "0 workers (the main process fetches)", as the
// start method and prefetch depth then set nothing).
std::string LoaderSetupLine(const analysis::LoaderConfig& config);

// A loader with workers: its prefetch queue at next(), as the text and HTML
// reports both say it (unescaped, no trailing period): the batches fetched and
// not yet taken, and, where a worker's fetch held the GIL its sending thread
// needed, that fetched was not yet sent.
std::string PrefetchQueueLine(const analysis::LoaderAnalysis& loader);

// Where the run's time went against the loaders' epochs ("run 14.75 s: in the
// loaders' epochs 12.40 s (84%), before the first ..."); empty without epochs.
std::string CoverageLine(const analysis::TraceAnalysis& trace);

// "min a, median b, max c" of `values` formatted by `format` ("-" when empty):
// the spread a folded list (epochs, workers, ranks) shows in its place.
template <typename Format>
std::string SpreadText(std::vector<double> values, Format format) {
  if (values.empty()) return "-";
  std::sort(values.begin(), values.end());
  return fmt::format("min {}, median {}, max {}", format(values.front()), format(values[values.size() / 2]), format(values.back()));
}

// "time min a, median b, max c; samples/s ...; stall ..." of `epochs`: the
// line a folded epoch table shows in its place, in the text and the HTML.
std::string EpochsSpread(std::span<const analysis::EpochStats> epochs);

// The note above the verdicts when the time outside the loaders' epochs
// (analysis::TimeOutsideEpochs) is worth one: the verdicts cover the epochs
// only; empty otherwise.
std::string OutsideEpochsNote(const analysis::TraceAnalysis& trace);

// The System section's note when the hypervisor took model::kStealSlowsHost
// of the machine's CPU time or more: every time in the trace is a slowed
// host's; empty otherwise (or steal not recorded).
std::string StealNote(const analysis::TraceAnalysis& trace);

// What the job's busy cores are a share of: "50% of 2 usable", or under a
// CPU quota below them "99% of its CPU quota of 1 core; 2 usable".
std::string UsableCoresText(const analysis::TraceAnalysis& trace, const std::string& share);

// Other processes' busy cores by /proc/stat, where they kept a twentieth of
// a core busy, and how many of them ran beyond the cores the job could not
// use (its CPU quota's or affinity's); empty otherwise.
std::string OtherProcessesText(const analysis::TraceAnalysis& trace);

// The System section's note when a CPU quota limited the job and it kept
// 90% of the quota busy or more: its threads waited for the
// quota, time the account shows as run-queue delay; empty otherwise.
std::string CpuQuotaNote(const analysis::TraceAnalysis& trace);

// The terminal report of `traces` (and of the job when there are several
// processes: ranks and others).
std::string AnalysisText(const std::vector<analysis::TraceAnalysis>& traces, const analysis::JobAnalysis* job,
                         uint32_t warmup, Colour colour, RankTable rank_table = RankTable::kAuto);

// The same facts as JSON (one object, newline-terminated).
std::string AnalysisJson(const std::vector<analysis::TraceAnalysis>& traces, const analysis::JobAnalysis* job,
                         uint32_t warmup);

}  // namespace stallprof::report
