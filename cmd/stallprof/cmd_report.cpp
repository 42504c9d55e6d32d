// stallprof report [trace.pb] -o report.html: one self-contained page with plots.
#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "analysis/analysis.h"
#include "cli.h"
#include "report/chart_library.h"
#include "report/html.h"
#include "trace/reader.h"

namespace stallprof::cli {

namespace {

struct ReportOptions {
  std::string trace = kDefaultTrace;
  std::string output = "report.html";
  uint32_t warmup = 5;
};

int RunReport(const ReportOptions& options) {
  auto digest = analysis::LoadForAnalysis(options.trace);
  if (!digest.ok()) return ReportError(digest.error());
  analysis::AnalysisOptions analysis_options;
  analysis_options.warmup = options.warmup;
  auto result = analysis::Analyze(*digest, analysis_options);
  if (!result.ok()) return ReportError(result.error());
  // A report never fails for want of a chart library: without uPlot its charts are static SVG.
  auto charts = report::LoadChartLibrary();
  if (!charts.ok())
    fmt::print(stderr, "stallprof: note: {}: the charts are static (no zoom); scripts/setup.sh installs uPlot\n", charts.error().message);
  std::string page = report::ReportHtml(digest->trace, *result, charts.ok() ? &*charts : nullptr);
  std::FILE* file = std::fopen(options.output.c_str(), "wb");
  if (!file)
    return ReportError(RuntimeError("cannot create '" + options.output + "', " + std::strerror(errno) + ", choose a writable path with -o"));
  bool ok = std::fwrite(page.data(), 1, page.size(), file) == page.size();
  ok = (std::fclose(file) == 0) && ok;
  if (!ok) return ReportError(RuntimeError("cannot write '" + options.output + "', " + std::strerror(errno) + ", check the disk space"));
  fmt::print(stderr, "stallprof: wrote {} ({} KiB, self-contained)\n", options.output, page.size() / 1024);
  return 0;
}

}  // namespace

void RegisterReport(CLI::App& app, Action& action) {
  auto options = std::make_shared<ReportOptions>();
  auto* sub = app.add_subcommand("report", "One self-contained HTML page: verdict, timeline, stall breakdown, workers, system");
  sub->add_option("trace", options->trace, "trace file")->default_val(kDefaultTrace);
  sub->add_option("-o,--output", options->output, "output HTML file")->default_val("report.html");
  AddWarmup(sub, options->warmup);
  sub->callback([&action, options] { action = [options] { return RunReport(*options); }; });
}

}  // namespace stallprof::cli
