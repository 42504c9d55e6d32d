// Placeholder until the subcommand lands.
#include "cli.h"

namespace stallprof::cli {
void RegisterExport(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("export", "(not built yet)");
  sub->callback([&action] { action = [] { return ReportError(RuntimeError("'export' is not built yet")); }; });
}
}  // namespace stallprof::cli
