// stallprof analyze [trace.pb ...] [--json] [--warmup N] [--ranks] [--jobs N]: where the step time goes.
#include <fmt/core.h>
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "analysis/analysis.h"
#include "analysis/parallel.h"
#include "analysis/ranks.h"
#include "cli.h"
#include "report/analysis_report.h"
#include "trace/reader.h"

namespace stallprof::cli {

namespace {

enum class Output { kText, kJson };

struct AnalyzeOptions {
  std::vector<std::string> traces;
  Output output = Output::kText;
  uint32_t warmup = 5;
  uint32_t jobs = 0;  // 0 = one per core
  report::RankTable rank_table = report::RankTable::kAuto;
};

// Analysis allocates and frees tables of a row per iteration or batch, trace
// after trace: keep freed memory in the process for the next table instead of
// handing it back to the kernel and faulting it in again page by page (page
// faults were a third of analyze's time on a VM). Blocks above 32 MiB (the
// streamed span columns) still come from mmap and go back when freed.
void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

int RunAnalyze(const AnalyzeOptions& options) {
  KeepFreedMemory();
  std::vector<std::string> paths = options.traces;
  if (paths.empty()) paths.push_back(kDefaultTrace);
  analysis::AnalysisOptions analysis_options;
  analysis_options.warmup = options.warmup;
  std::vector<analysis::TraceAnalysis> analyses;
  // Several traces on a terminal: how many are done, on one line of stderr
  // redrawn at most 10 times a second and cleared at the end (a 256-rank job
  // takes seconds). Not in logs or pipes.
  std::function<void(size_t)> progress;
  const bool show_progress = paths.size() > 1 && isatty(STDERR_FILENO);
  auto last_drawn = std::chrono::steady_clock::now();
  if (show_progress)
    progress = [&](size_t done) {
      const auto now = std::chrono::steady_clock::now();
      if (done < paths.size() && now - last_drawn < std::chrono::milliseconds(100)) return;
      last_drawn = now;
      fmt::print(stderr, "\rstallprof: analyzed {} of {} traces", done, paths.size());
      std::fflush(stderr);
    };
  auto outcomes = analysis::AnalyzeTraces(paths, analysis_options, options.jobs, progress);
  if (show_progress) fmt::print(stderr, "\r\033[K");
  for (auto& outcome : outcomes) {
    if (const auto& w = outcome.write_failed)
      fmt::print(stderr,
                 "stallprof: warning: trace '{}' is incomplete, writing it failed {:.1f} s into the run (disk full?), "
                 "{} events after that were lost: the figures cover the part before\n",
                 outcome.path, w->after_s, w->events_lost);
    if (!outcome.analysis->ok()) return ReportError(outcome.analysis->error());
    analyses.push_back(std::move(**outcome.analysis));
  }
  // Several training processes in the traces: compare the ranks, list the others.
  auto job = analysis::AnalyzeJob(analyses);
  const analysis::JobAnalysis* job_ptr = job.ok() ? &*job : nullptr;
  if (options.output == Output::kJson) {
    fmt::print("{}", report::AnalysisJson(analyses, job_ptr, options.warmup));
  } else {
    bool colour = isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
    fmt::print("{}", report::AnalysisText(analyses, job_ptr, options.warmup,
                                          colour ? report::Colour::kOn : report::Colour::kOff, options.rank_table));
  }
  return 0;
}

}  // namespace

void RegisterAnalyze(CLI::App& app, Action& action) {
  auto options = std::make_shared<AnalyzeOptions>();
  auto* sub = app.add_subcommand("analyze", "Where the step time goes: stall fraction, fetch vs prep stall, bottleneck");
  sub->add_option("traces", options->traces, "trace files (default ./trace.pb); several = ranks of one job");
  sub->add_flag_callback("--json", [options] { options->output = Output::kJson; },
                         "print the same facts as JSON (schema in docs/analysis.md)");
  sub->add_flag_callback("--ranks", [options] { options->rank_table = report::RankTable::kAlways; },
                         "one row and the full detail per rank even with many ranks (beyond " +
                             std::to_string(analysis::kManyRanks) +
                             " the text gives each loader one line: min, median, max, stragglers; and details only its "
                             "first and slowest rank and its stragglers)");
  AddWarmup(sub, options->warmup);
  AddWholeNumber(sub, "-j,--jobs", options->jobs,
                 "traces analyzed at once, each on its own thread (default: one per core; memory grows with it)", 1, 4096);
  sub->callback([&action, options] { action = [options] { return RunAnalyze(*options); }; });
}

}  // namespace stallprof::cli
