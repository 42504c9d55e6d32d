// Placeholder until the subcommand lands.
#include "cli.h"

namespace stallprof::cli {
void RegisterReport(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("report", "(not built yet)");
  sub->callback([&action] { action = [] { return ReportError(RuntimeError("'report' is not built yet")); }; });
}
}  // namespace stallprof::cli
