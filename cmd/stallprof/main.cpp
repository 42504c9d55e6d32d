#include <fmt/core.h>

#include "cli.h"

namespace stallprof::cli {
int ReportError(const Error& error) {
  fmt::print(stderr, "stallprof: error: {}\n", error.message);
  return static_cast<int>(error.kind);
}
}  // namespace stallprof::cli

namespace {
// "stallprof analyze": the words of the command line parsed so far, whose
// --help a usage error points to ("stallprof" before a subcommand).
std::string CommandWords(CLI::App& app) {
  std::string words = "stallprof";
  for (const CLI::App* sub : app.get_subcommands()) words += " " + sub->get_name();
  return words;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace stallprof::cli;
  CLI::App app{
      "stallprof: find and fix data stalls in deep-learning training.\n"
      "  stallprof run -- python3 train.py     record ./trace.pb (train.py unchanged)\n"
      "  stallprof analyze                     where the step time goes, fetch vs prep stall\n"
      "  stallprof whatif --cores 48 --cache 200G   predict another machine\n"
      "  stallprof recommend                   DataLoader settings, cores and cache from an LP",
      "stallprof"};
  app.set_version_flag("--version", "stallprof 0.1.0");
  app.require_subcommand(1);
  Action action;
  RegisterRun(app, action);
  RegisterAnalyze(app, action);
  RegisterReport(app, action);
  RegisterExport(app, action);
  RegisterWhatif(app, action);
  RegisterRecommend(app, action);
  // CLI11 reports a word that is no subcommand, or an option before any (not
  // --help or --version), as "A subcommand is required"; name the word and
  // the choices instead.
  if (argc >= 2) {
    const std::string first = argv[1];
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      found = found || sub->get_name() == first;
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    const bool app_option = first == "--help" || first == "-h" || first == "--version";
    if (!found && !app_option) {
      fmt::print(stderr, "stallprof: error: {} '{}': use one of {} (see 'stallprof --help')\n",
                 first[0] == '-' ? "unknown option before a subcommand" : "unknown subcommand", first, known);
      return static_cast<int>(stallprof::ErrorKind::kUsage);
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    // CLI11 lists the extras last to first ("0 --prefetch"): name the first
    // one, as given, and the subcommand's own help.
    const std::string where = CommandWords(app);
    std::vector<std::string> extras = app.remaining();
    for (const CLI::App* sub : app.get_subcommands())
      if (extras.empty()) extras = sub->remaining();
    if (extras.empty()) {
      fmt::print(stderr, "stallprof: error: {} (see '{} --help')\n", e.what(), where);
    } else {
      const std::string& first = extras.front();
      fmt::print(stderr, "stallprof: error: {} '{}' for '{}' (see '{} --help')\n",
                 first.size() > 1 && first[0] == '-' ? "unknown option" : "unexpected argument", first, where, where);
    }
    return static_cast<int>(stallprof::ErrorKind::kUsage);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "stallprof: error: {} (see '{} --help')\n", e.what(), CommandWords(app));
    return static_cast<int>(stallprof::ErrorKind::kUsage);
  }
  return action ? action() : 0;
}
