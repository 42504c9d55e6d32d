// stallprof whatif [trace.pb] --cores 2,4 --workers auto --cache 0,50G ...:
// predicted throughput, stall and bottleneck of other machines and settings.
#include <fmt/core.h>

#include <cstdio>
#include <memory>

#include "analysis/profile.h"
#include "cli.h"
#include "common/units.h"
#include "model/cache.h"
#include "model/fit.h"
#include "model/whatif.h"

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

std::string CacheText(const model::Scenario& s) {
  return s.cache_bytes < 0 ? "as run" : FormatBytes(static_cast<double>(s.cache_bytes));
}

std::string PredictionJson(const model::Prediction& p) {
  return fmt::format(
      "{{\"samples_per_s\": {:.6g}, \"step_s\": {:.6g}, \"stall_fraction\": {:.6g}, \"fetch_stall_fraction\": {:.6g}, "
      "\"prep_stall_fraction\": {:.6g}, \"bottleneck\": {}, \"workers\": {}, \"hit_ratio\": {:.6g}, "
      "\"r_compute\": {:.6g}, \"r_prep\": {:.6g}, \"r_workers\": {:.6g}, \"r_fetch\": {:.6g}, \"delay_s\": {:.6g}, "
      "\"delay_measured\": {}, \"handoff_s\": {:.6g}, \"r_main\": {:.6g}}}",
      p.samples_per_s, p.step_s, p.stall_fraction, p.fetch_stall_fraction, p.prep_stall_fraction,
      JsonString(model::ToString(p.bottleneck)), p.workers, p.hit_ratio, std::isinf(p.r_compute) ? -1 : p.r_compute,
      std::isinf(p.r_prep) ? -1 : p.r_prep, std::isinf(p.r_workers) ? -1 : p.r_workers,
      std::isinf(p.r_fetch) ? -1 : p.r_fetch, p.delay_s, p.delay_measured ? "true" : "false", p.handoff_s,
      std::isinf(p.r_main) ? -1 : p.r_main);
}

void PrintText(const model::WhatIfResult& r, const model::Sweep& sweep, const std::string& path) {
  fmt::print("stallprof whatif: loader '{}' ({})\n", r.loader, path);
  fmt::print("baseline, as profiled ({:g} cores, {} workers): predicted {:.1f} samples/s, step {}", r.profiled.cores,
             r.baseline.workers, r.baseline.samples_per_s, FormatSeconds(r.baseline.step_s));
  if (r.measured_samples_per_s > 0)
    fmt::print("; measured {:.1f} samples/s: model error {:+.1f}%\n", r.measured_samples_per_s, r.model_error * 100);
  else
    fmt::print("; measured throughput unknown\n");
  fmt::print("scenario: cache policy {}{}{}{}\n\n", model::ToString(sweep.cache_policy),
             sweep.accel_speedup != 1 ? fmt::format(", accelerator {:g}x faster", sweep.accel_speedup) : "",
             sweep.storage_bandwidth > 0 ? ", storage " + FormatBytes(sweep.storage_bandwidth) + "/s" : "",
             sweep.first_epoch ? ", first epoch (cold cache)" : ", steady state");
  fmt::print("{:>6} {:>7} {:>10} {:>6} {:>11} {:>10} {:>6} {:>6} {:>6}  {:<10} {:>8}\n", "cores", "workers", "cache",
             "hit", "samples/s", "step", "stall", "fetch", "prep", "bottleneck", "change");
  for (const auto& row : r.rows) {
    const auto& p = row.prediction;
    fmt::print("{:>6g} {:>7} {:>10} {:>5.0f}% {:>11.1f} {:>10} {:>5.0f}% {:>5.0f}% {:>5.0f}%  {:<10} {:>+7.1f}%\n",
               row.scenario.machine.cores, p.workers, CacheText(row.scenario), p.hit_ratio * 100, p.samples_per_s,
               FormatSeconds(p.step_s), p.stall_fraction * 100, p.fetch_stall_fraction * 100,
               p.prep_stall_fraction * 100, model::ToString(p.bottleneck), row.change * 100);
    if (row.other_epoch)
      fmt::print("{:>31} {}: {:.1f} samples/s, hit {:.0f}%, {}\n", "",
                 sweep.first_epoch ? "steady state" : "first epoch (cold cache)", row.other_epoch->samples_per_s,
                 row.other_epoch->hit_ratio * 100, model::ToString(row.other_epoch->bottleneck));
  }
  fmt::print("\nchange is against the {} baseline. Inputs:\n",
             r.measured_samples_per_s > 0 ? "measured" : "predicted");
  for (const auto& line : r.inputs) fmt::print("  {}\n", line);
}

int RunWhatif(const WhatifOptions& o) {
  auto sweep = model::ParseSweep(o.flags);
  if (!sweep.ok()) return ReportError(sweep.error());
  analysis::ProfileOptions profile_options;
  profile_options.warmup = o.warmup;
  auto profiled = analysis::LoadProfiledRun(o.trace, profile_options, o.loader);
  if (!profiled.ok()) return ReportError(profiled.error());
  std::vector<model::WhatIfResult> results;
  for (const auto& loader : profiled->loaders) {
    auto r = model::WhatIf(loader, profiled->machine, *sweep);
    if (!r.ok()) return ReportError(r.error());
    results.push_back(std::move(*r));
  }
  std::string fit_line;
  if (auto fit = model::FitCpuAgainstBatchSize(profiled->loaders); fit.ok())
    fit_line = fmt::format("worker CPU per batch = {} + {} x batch size (least squares over {} loaders, r2 {:.2f})",
                           FormatSeconds(fit->intercept), FormatSeconds(fit->slope), fit->points, fit->r2);
  if (!o.plot.empty()) {
    std::FILE* f = std::fopen(o.plot.c_str(), "w");
    if (!f) return ReportError(RuntimeError("--plot " + o.plot + ": cannot write the file, check the directory exists"));
    const std::string svg = model::RenderWhatIfSvg(results.front());
    std::fwrite(svg.data(), 1, svg.size(), f);
    std::fclose(f);
  }
  if (o.output == Output::kJson) {
    std::string out = fmt::format("{{\"trace\": {}, \"loaders\": [", JsonString(o.trace));
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      out += fmt::format("{}{{\"loader\": {}, \"profiled_cores\": {:g}, \"measured_samples_per_s\": {}, "
                         "\"baseline\": {}, \"model_error\": {}, \"swept\": {}, \"scenarios\": [",
                         i ? ", " : "", JsonString(r.loader), r.profiled.cores,
                         r.measured_samples_per_s > 0 ? fmt::format("{:.6g}", r.measured_samples_per_s) : "null",
                         PredictionJson(r.baseline),
                         r.measured_samples_per_s > 0 ? fmt::format("{:.6g}", r.model_error) : "null", JsonString(r.swept));
      for (size_t j = 0; j < r.rows.size(); ++j) {
        const auto& row = r.rows[j];
        out += fmt::format("{}{{\"cores\": {:g}, \"workers\": {}, \"cache_bytes\": {}, \"cache_policy\": {}, "
                           "\"accel_speedup\": {:g}, \"first_epoch\": {}, \"change\": {:.6g}, \"prediction\": {}{}}}",
                           j ? ", " : "", row.scenario.machine.cores, row.prediction.workers,
                           row.scenario.cache_bytes < 0 ? "null" : std::to_string(row.scenario.cache_bytes),
                           JsonString(model::ToString(row.scenario.cache_policy)), row.scenario.accel_speedup,
                           row.scenario.first_epoch ? "true" : "false", row.change, PredictionJson(row.prediction),
                           row.other_epoch ? ", \"other_epoch\": " + PredictionJson(*row.other_epoch) : "");
      }
      out += "], \"inputs\": [";
      for (size_t j = 0; j < r.inputs.size(); ++j) out += (j ? ", " : "") + JsonString(r.inputs[j]);
      out += "]}";
    }
    out += fmt::format("], \"cpu_fit\": {}}}\n", fit_line.empty() ? "null" : JsonString(fit_line));
    fmt::print("{}", out);
    return 0;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (i) fmt::print("\n");
    PrintText(results[i], *sweep, o.trace);
  }
  if (!fit_line.empty()) fmt::print("  {}\n", fit_line);
  if (!o.plot.empty()) fmt::print("plot: {} (loader '{}')\n", o.plot, results.front().loader);
  return 0;
}

}  // namespace

void RegisterWhatif(CLI::App& app, Action& action) {
  auto o = std::make_shared<WhatifOptions>();
  auto* sub = app.add_subcommand("whatif", "Predict throughput, stalls and the bottleneck on other cores, workers, cache, accelerator");
  sub->add_option("trace", o->trace, "trace file (default ./trace.pb)");
  sub->add_option("--cores", o->flags.cores, "usable cores, or a list to sweep: 2,4,8");
  sub->add_option("--workers", o->flags.workers, "num_workers: N, a list, or auto (the fewest that remove the prep bottleneck, <= cores-1)");
  sub->add_option("--cache", o->flags.cache, "cache for the dataset (K/M/G/T, binary), or a list: 0,50G,200G");
  sub->add_option("--cache-policy", o->flags.cache_policy, "lru (the OS page cache, default) or static (a fixed subset, MinIO-like)");
  sub->add_option("--accel-speedup", o->flags.accel_speedup, "how many times faster the training step is (e.g. 2)");
  sub->add_option("--disk-bw", o->flags.disk_bw, "storage bandwidth, e.g. 2G/s (default: the measured peak)");
  sub->add_flag("--first-epoch", o->flags.first_epoch, "predict the cold first epoch instead of the steady state");
  sub->add_option("--loader", o->loader, "only this loader (default: 'train' if present, else all)");
  sub->add_option("--plot", o->plot, "write an SVG of samples/s against the swept variable, bottleneck regions marked");
  sub->add_flag_callback("--json", [o] { o->output = Output::kJson; }, "print the predictions as JSON");
  sub->add_option("--warmup", o->warmup, "iterations skipped at the start of each epoch")->default_val(5);
  sub->callback([&action, o] { action = [o] { return RunWhatif(*o); }; });
}

}  // namespace stallprof::cli
