// Placeholder until the subcommand lands.
#include "cli.h"

namespace stallprof::cli {
void RegisterRecommend(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("recommend", "(not built yet)");
  sub->callback([&action] { action = [] { return ReportError(RuntimeError("'recommend' is not built yet")); }; });
}
}  // namespace stallprof::cli
