// Placeholder until the subcommand lands.
#include "cli.h"
namespace stallprof::cli {
void RegisterRun(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("run", "(not built yet)");
  sub->callback([&action] { action = [] { return ReportError(RuntimeError("'run' is not built yet")); }; });
}
}  // namespace stallprof::cli
