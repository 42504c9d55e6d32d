// stallprof recommend [trace.pb] [--cores N] [--memory 64G] [--json]: the
// DataLoader settings, cores and cache plan that maximize throughput (GLPK LP).
#include <fmt/core.h>

#include <memory>
#include <optional>

#include "analysis/profile.h"
#include "cli.h"
#include "common/units.h"
#include "model/lp.h"
#include "model/whatif.h"
#include "report/model_report.h"

namespace stallprof::cli {

namespace {

enum class Output { kText, kJson };

struct RecommendFlags {
  std::string trace = kDefaultTrace;
  std::string cores;
  std::string memory;
  std::string background_load;
  std::string loader;
  Output output = Output::kText;
  uint32_t warmup = 5;
};

int RunRecommend(const RecommendFlags& f) {
  model::RecommendOptions options;
  if (!f.cores.empty()) {
    auto cores = model::ParseCores(f.cores);
    if (!cores.ok()) return ReportError(cores.error());
    options.cores = *cores;
  }
  if (!f.memory.empty()) {
    auto bytes = ParseBytes(f.memory, "--memory");
    if (!bytes.ok()) return ReportError(bytes.error());
    if (*bytes == 0) return ReportError(UsageError("--memory 0: a memory budget must be > 0, e.g. --memory 64G"));
    options.memory_bytes = *bytes;
  }
  auto background = model::ParseBackgroundLoad(f.background_load);
  if (!background.ok()) return ReportError(background.error());
  options.background_threads = *background;
  analysis::ProfileOptions profile_options;
  profile_options.warmup = f.warmup;
  auto run = analysis::LoadProfiledRun(f.trace, profile_options, f.loader);
  if (!run.ok()) return ReportError(run.error());
  if (f.cores.empty()) options.cores = run->machine.cores;
  if (f.memory.empty()) options.memory_bytes = run->machine.memory_bytes;
  report::RecommendReport out;
  out.trace = f.trace;
  out.options = options;
  out.other_loaders = run->left_out;
  // A loader the model cannot predict (a prefetch thread's) is named beside
  // the others' plans; with none planned, its error is the answer.
  std::optional<Error> first_error;
  for (auto& p : run->loaders) {
    auto r = model::Recommend(p, options);
    if (r.ok()) {
      out.loaders.push_back({std::move(p), std::move(*r)});
      continue;
    }
    if (r.error().kind != ErrorKind::kUnsupported || run->loaders.size() == 1) return ReportError(r.error());
    if (!first_error) first_error = r.error();
    out.not_planned.emplace_back(p.name, r.error().message);
  }
  if (out.loaders.empty()) return ReportError(*first_error);
  fmt::print("{}", f.output == Output::kJson ? report::RecommendJson(out) : report::RecommendText(out));
  return 0;
}

}  // namespace

void RegisterRecommend(CLI::App& app, Action& action) {
  auto f = std::make_shared<RecommendFlags>();
  auto* sub = app.add_subcommand("recommend", "DataLoader settings, cores and cache plan that maximize throughput (an LP)");
  sub->add_option("trace", f->trace, "trace file (default ./trace.pb)");
  sub->add_option("--cores", f->cores, "cores of the machine to plan for, at most 4096 (default: the profiled machine's)");
  sub->add_option("--memory", f->memory, "memory of the machine to plan for, e.g. 64G (default: the profiled machine's, or the memory cgroup limit the job ran under where lower); the training process's own peak RSS is taken from it, the rest shared by cache, workers and prefetch buffers");
  sub->add_option("--background-load", f->background_load,
                  "busy threads from other processes to assume: by default other processes' load is taken away and the "
                  "job's own run-queue delay kept (all of it where other processes used under half a core); 0 (the "
                  "machine to itself, no delay beyond the model's), 'profiled' (the load fitted from the profile's "
                  "run-queue delay), or a number");
  sub->add_option("--loader", f->loader, "only this loader, or all (default: 'train' if present, else all; the output names the others)");
  sub->add_flag_callback("--json", [f] { f->output = Output::kJson; }, "print the plan as JSON");
  AddWarmup(sub, f->warmup);
  sub->callback([&action, f] { action = [f] { return RunRecommend(*f); }; });
}

}  // namespace stallprof::cli
