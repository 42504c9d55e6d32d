// stallprof export [trace.pb] --format chrome -o timeline.json[.gz]: a timeline
// for ui.perfetto.dev and chrome://tracing (gzipped when the name ends in .gz).
#include <fmt/core.h>

#include "cli.h"
#include "common/units.h"
#include "report/chrome.h"

namespace stallprof::cli {

namespace {

struct ExportOptions {
  std::string trace = kDefaultTrace;
  std::string format = "chrome";
  std::string output = "timeline.json";
};

int RunExport(const ExportOptions& options) {
  auto stats = report::ExportChrome(options.trace, options.output);
  if (!stats.ok()) return ReportError(stats.error());
  if (options.output != "-")
    fmt::print(stderr, "stallprof: wrote {} ({} spans, {} instants, {} counters; {}{}); open it in ui.perfetto.dev\n", options.output,
               stats->spans, stats->instants, stats->counters, FormatBytes(static_cast<double>(stats->bytes_written)),
               stats->gzip ? ", gzip of " + FormatBytes(static_cast<double>(stats->json_bytes)) + " of JSON" : "");
  if (stats->truncated)
    fmt::print(stderr, "stallprof: warning: '{}' is truncated (the run was killed?): exported up to its last complete chunk\n",
               options.trace);
  return 0;
}

}  // namespace

void RegisterExport(CLI::App& app, Action& action) {
  auto options = std::make_shared<ExportOptions>();
  auto* sub = app.add_subcommand("export", "Timeline of the trace for ui.perfetto.dev / chrome://tracing");
  sub->add_option("trace", options->trace, "trace file")->default_val(kDefaultTrace);
  sub->add_option("--format", options->format, "output format")->check(CLI::IsMember({"chrome"}))->default_val("chrome");
  sub->add_option("-o,--output", options->output, "output file (gzip when it ends in .gz), - for stdout")->default_val("timeline.json");
  sub->callback([&action, options] { action = [options] { return RunExport(*options); }; });
}

}  // namespace stallprof::cli
