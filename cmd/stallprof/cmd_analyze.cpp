// Placeholder until the subcommand lands.
#include "cli.h"

namespace stallprof::cli {
void RegisterAnalyze(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("analyze", "(not built yet)");
  sub->callback([&action] { action = [] { return ReportError(RuntimeError("'analyze' is not built yet")); }; });
}
}  // namespace stallprof::cli
