// Shared pieces of the thin CLI: each subcommand registers itself on the app
// and, when chosen, sets `action`; errors become one line and an exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace stallprof::cli {

using Action = std::function<int()>;

// Prints "stallprof: error: <message>" on stderr and returns the exit code of its kind.
int ReportError(const Error& error);

// The trace argument of the offline subcommands: defaults to ./trace.pb.
inline constexpr const char* kDefaultTrace = "trace.pb";

void RegisterRun(CLI::App& app, Action& action);
void RegisterAnalyze(CLI::App& app, Action& action);
void RegisterReport(CLI::App& app, Action& action);
void RegisterExport(CLI::App& app, Action& action);
void RegisterWhatif(CLI::App& app, Action& action);
void RegisterRecommend(CLI::App& app, Action& action);

}  // namespace stallprof::cli
