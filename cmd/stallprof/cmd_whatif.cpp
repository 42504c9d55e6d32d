// Placeholder until the subcommand lands.
#include "cli.h"

namespace stallprof::cli {
void RegisterWhatif(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("whatif", "(not built yet)");
  sub->callback([&action] { action = [] { return ReportError(RuntimeError("'whatif' is not built yet")); }; });
}
}  // namespace stallprof::cli
