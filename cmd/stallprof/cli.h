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

// A whole-number option from `min` to `max`. CLI11's own messages for a bad
// value are "Could not convert: --warmup = -3" or a range up to 1.8e308; this
// one says what is expected: "--warmup: '-3' is not a whole number from 0 to
// 1000000".
inline CLI::Option* AddWholeNumber(CLI::App* sub, const std::string& name, uint32_t& target, const std::string& description,
                                   uint32_t min, uint32_t max) {
  const std::string expected = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  return sub->add_option(name, target, description)
      ->check(CLI::Validator(
          [min, max, expected](std::string& text) -> std::string {
            const bool digits = !text.empty() && text.size() <= 10 &&
                                text.find_first_not_of("0123456789") == std::string::npos;
            const unsigned long long value = digits ? std::stoull(text) : 0;
            return digits && value >= min && value <= max ? std::string() : "'" + text + "' is not " + expected;
          },
          "N"));
}

// Iterations skipped at the start of each epoch for steady-state figures:
// the same option in every offline subcommand.
inline CLI::Option* AddWarmup(CLI::App* sub, uint32_t& warmup) {
  return AddWholeNumber(sub, "--warmup", warmup,
                        "iterations skipped at the start of each epoch for steady-state figures", 0, 1000000)
      ->default_val(5);
}

// The trace argument of the offline subcommands: defaults to ./trace.pb.
inline constexpr const char* kDefaultTrace = "trace.pb";

void RegisterRun(CLI::App& app, Action& action);
void RegisterAnalyze(CLI::App& app, Action& action);
void RegisterReport(CLI::App& app, Action& action);
void RegisterExport(CLI::App& app, Action& action);
void RegisterWhatif(CLI::App& app, Action& action);
void RegisterRecommend(CLI::App& app, Action& action);

}  // namespace stallprof::cli
