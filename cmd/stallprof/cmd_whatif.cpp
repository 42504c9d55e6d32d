// stallprof whatif [trace.pb] --cores 2,4 --workers auto --cache 0,50G ...:
// predicted throughput, stall and bottleneck of other machines and settings.
#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "analysis/profile.h"
#include "cli.h"
#include "model/fit.h"
#include "model/whatif.h"
#include "report/model_report.h"

namespace stallprof::cli {

namespace {

enum class Output { kText, kJson };

struct WhatifOptions {
  std::string trace = kDefaultTrace;
  model::SweepFlags flags;
  std::string loader;
  std::string plot;
  Output output = Output::kText;
  uint32_t warmup = 5;
};

int RunWhatif(const WhatifOptions& o) {
  auto sweep = model::ParseSweep(o.flags);
  if (!sweep.ok()) return ReportError(sweep.error());
  analysis::ProfileOptions profile_options;
  profile_options.warmup = o.warmup;
  auto profiled = analysis::LoadProfiledRun(o.trace, profile_options, o.loader);
  if (!profiled.ok()) return ReportError(profiled.error());
  report::WhatIfReport out;
  out.trace = o.trace;
  out.sweep = *sweep;
  out.plot = o.plot;
  out.other_loaders = profiled->left_out;
  // A loader the scenario does not apply to (no dataset size for --cache) is
  // named beside the others' predictions; with none predicted, its error is the answer.
  std::optional<Error> first_error;
  for (const auto& loader : profiled->loaders) {
    auto r = model::WhatIf(loader, profiled->machine, *sweep);
    if (r.ok()) {
      out.loaders.push_back(std::move(*r));
      continue;
    }
    if (r.error().kind != ErrorKind::kUnsupported) return ReportError(r.error());
    if (!first_error) first_error = r.error();
    out.not_predicted.emplace_back(loader.name, r.error().message);
  }
  if (out.loaders.empty()) return ReportError(*first_error);
  if (auto fit = model::FitCpuAgainstBatchSize(profiled->loaders); fit.ok()) out.cpu_fit = *fit;
  if (!o.plot.empty()) {
    std::FILE* f = std::fopen(o.plot.c_str(), "w");
    if (!f) return ReportError(RuntimeError("--plot " + o.plot + ": cannot write the file, check the directory exists"));
    const std::string svg = report::WhatIfSvg(out.loaders.front());
    std::fwrite(svg.data(), 1, svg.size(), f);
    std::fclose(f);
  }
  fmt::print("{}", o.output == Output::kJson ? report::WhatIfJson(out) : report::WhatIfText(out));
  return 0;
}

}  // namespace

void RegisterWhatif(CLI::App& app, Action& action) {
  auto o = std::make_shared<WhatifOptions>();
  auto* sub = app.add_subcommand("whatif", "Predict throughput, stalls and the bottleneck on other cores, workers, cache, accelerator");
  sub->add_option("trace", o->trace, "trace file (default ./trace.pb)");
  auto* cores = sub->add_option("--cores", o->flags.cores, "usable cores (at most 4096), or a list to sweep: 2,4,8");
  sub->add_option("--workers", o->flags.workers, "num_workers: N, a list, or auto (the fewest within 1% of the best predicted rate: up to cores-1, and more while workers blocked off CPU still add)");
  sub->add_option("--cache", o->flags.cache,
                  "cache for the dataset (K/M/G/T, binary), or a list: 0,50G,200G; 'all' for everything cached "
                  "(needs no dataset size)");
  sub->add_option("--cache-policy", o->flags.cache_policy, "pagecache (Linux's page cache: active and inactive lists, recent refaults activated; default), lru (a plain LRU cache) or static (a fixed subset, MinIO-like)");
  sub->add_option("--accel-speedup", o->flags.accel_speedup, "how many times faster the training step is (e.g. 2)");
  sub->add_option("--disk-bw", o->flags.disk_bw, "storage bandwidth, e.g. 2G/s (default: the measured peak)");
  sub->add_flag("--first-epoch", o->flags.first_epoch, "predict the cold first epoch instead of the steady state");
  sub->add_option("--persistent-workers", o->flags.persistent_workers,
                  "true or false: predict persistent_workers (workers started once, not every epoch; "
                  "the whole-run column shows the difference)");
  sub->add_option("--prefetch-factor", o->flags.prefetch_factor,
                  "batches each worker keeps ahead (DataLoader prefetch_factor), 1 to 1024 (default: as profiled)");
  sub->add_option("--step-threads", o->flags.step_threads,
                  "the training step's intra-op threads (torch.set_num_threads), at most as profiled: predict a "
                  "parallel step with fewer (needs a profile whose step had cores of its own)");
  sub->add_option("--background-load", o->flags.background_load,
                  "busy threads from other processes to assume: by default other processes' load is taken away and the "
                  "job's own run-queue delay kept (all of it where other processes used under half a core); 0 (the "
                  "machine to itself, no delay beyond the model's), 'profiled' (the load fitted from the profile's "
                  "run-queue delay), or a number");
  auto* move = sub->add_option("--move-to-workers", o->flags.move_to_workers,
                               "stages you marked with stallprof.stage on the main thread between next() calls (analyze lists "
                               "them), done in the DataLoader's workers instead: a name or a list, e.g. augment,crop");
  sub->add_option("--loader", o->loader, "only this loader, or all (default: 'train' if present, else all; the output names the others)");
  sub->add_option("--plot", o->plot, "write an SVG of samples/s against the swept variable, bottleneck regions marked, the whole run dashed beside the steady state where start-up makes them differ");
  sub->add_flag_callback("--json", [o] { o->output = Output::kJson; }, "print the predictions as JSON");
  AddWarmup(sub, o->warmup);
  sub->callback([&action, o, cores, move] {
    o->flags.cores_given = cores->count() > 0;
    o->flags.move_to_workers_given = move->count() > 0;
    action = [o] { return RunWhatif(*o); };
  });
}

}  // namespace stallprof::cli
