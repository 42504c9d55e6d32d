// stallprof recommend [trace.pb] [--cores N] [--memory 64G] [--json]: the
// DataLoader settings, cores and cache plan that maximize throughput (GLPK LP).
#include <fmt/core.h>

#include <cmath>
#include <memory>

#include "analysis/profile.h"
#include "cli.h"
#include "common/units.h"
#include "model/cache.h"
#include "model/lp.h"

namespace stallprof::cli {

namespace {

enum class Output { kText, kJson };

struct RecommendFlags {
  std::string trace = kDefaultTrace;
  std::string cores;
  std::string memory;
  std::string loader;
  Output output = Output::kText;
  uint32_t warmup = 5;
};

std::string DataLoaderLine(const model::Recommendation& r) {
  return fmt::format(
      "DataLoader(..., num_workers={}, prefetch_factor={}, pin_memory=torch.cuda.is_available(), persistent_workers=True)",
      r.workers, r.prefetch_factor);
}

std::string CacheLine(const model::Recommendation& r, const model::LoaderProfile& p) {
  const auto& c = r.cache;
  switch (c.point) {
    case model::CachePoint::kNone:
      return p.dataset_bytes > 0 ? fmt::format("no cache needed beyond what the run had (hit ratio {:.0f}%)", c.hit_ratio * 100)
                                 : "none (the dataset size is unknown, so no cache was planned)";
    case model::CachePoint::kRawFiles:
      return c.policy == model::CachePolicy::kLru
                 ? fmt::format("leave {} of page cache to the dataset's files (LRU under shuffling: hit ratio {:.0f}%)",
                               FormatBytes(static_cast<double>(c.bytes)), c.hit_ratio * 100)
                 : fmt::format("keep a fixed {} of the raw files in memory (static cache, MinIO-like: hit ratio {:.0f}%)",
                               FormatBytes(static_cast<double>(c.bytes)), c.hit_ratio * 100);
    case model::CachePoint::kDecoded:
      return fmt::format("keep {} of decoded samples after stage '{}' in memory (static: hit ratio {:.0f}%)",
                         FormatBytes(static_cast<double>(c.bytes)), c.stage, c.hit_ratio * 100);
  }
  return "";
}

int RunRecommend(const RecommendFlags& f) {
  model::RecommendOptions options;
  if (!f.cores.empty()) {
    char* end = nullptr;
    options.cores = std::strtod(f.cores.c_str(), &end);
    if (end == f.cores.c_str() || *end != '\0' || !std::isfinite(options.cores))
      return ReportError(UsageError("--cores '" + f.cores + "': not a number, expected e.g. --cores 16"));
    if (options.cores <= 0) return ReportError(UsageError("--cores " + f.cores + ": needs at least a fraction of a core (> 0)"));
  }
  if (!f.memory.empty()) {
    auto bytes = ParseBytes(f.memory, "--memory");
    if (!bytes.ok()) return ReportError(bytes.error());
    if (*bytes == 0) return ReportError(UsageError("--memory 0: a memory budget must be > 0, e.g. --memory 64G"));
    options.memory_bytes = *bytes;
  }
  analysis::ProfileOptions profile_options;
  profile_options.warmup = f.warmup;
  auto run = analysis::LoadProfiledRun(f.trace, profile_options, f.loader);
  if (!run.ok()) return ReportError(run.error());
  if (f.cores.empty()) options.cores = run->machine.cores;
  if (f.memory.empty()) options.memory_bytes = run->machine.memory_bytes;
  const auto* loaders = &run->loaders;

  std::string json = "{\"trace\": " + JsonString(f.trace) + fmt::format(", \"cores\": {:g}, \"memory_bytes\": {}, \"loaders\": [",
                                                                   options.cores, options.memory_bytes);
  for (size_t i = 0; i < loaders->size(); ++i) {
    const auto& p = (*loaders)[i];
    auto r = model::Recommend(p, options);
    if (!r.ok()) return ReportError(r.error());
    const double speedup = r->measured_samples_per_s > 0 ? r->predicted.samples_per_s / r->measured_samples_per_s : 0;
    if (f.output == Output::kJson) {
      json += fmt::format(
          "{}{{\"loader\": {}, \"num_workers\": {}, \"prefetch_factor\": {}, \"dataloader\": {}, "
          "\"cache\": {{\"point\": {}, \"policy\": {}, \"bytes\": {}, \"hit_ratio\": {:.6g}}}, "
          "\"predicted_samples_per_s\": {:.6g}, \"lp_samples_per_s\": {:.6g}, \"measured_samples_per_s\": {}, "
          "\"speedup\": {}, \"bottleneck\": {}, \"binding\": {{\"constraint\": {}, \"kind\": {}, \"shadow_price\": {:.6g}}}, "
          "\"advice\": {}, \"prefetch_concurrency\": {:.6g}, \"constraints\": [",
          i ? ", " : "", JsonString(p.name), r->workers, r->prefetch_factor, JsonString(DataLoaderLine(*r)),
          JsonString(model::ToString(r->cache.point)), JsonString(model::ToString(r->cache.policy)), r->cache.bytes,
          r->cache.hit_ratio, r->predicted.samples_per_s, r->lp_samples_per_s,
          r->measured_samples_per_s > 0 ? fmt::format("{:.6g}", r->measured_samples_per_s) : "null",
          speedup > 0 ? fmt::format("{:.6g}", speedup) : "null", JsonString(model::ToString(r->predicted.bottleneck)),
          JsonString(r->binding.name), JsonString(model::ToString(r->binding.kind)), r->binding.dual, JsonString(r->advice),
          r->prefetch_concurrency);
      for (size_t j = 0; j < r->lp.rows.size(); ++j) {
        const auto& row = r->lp.rows[j];
        json += fmt::format("{}{{\"name\": {}, \"activity\": {:.6g}, \"bound\": {:.6g}, \"shadow_price\": {:.6g}}}",
                            j ? ", " : "", JsonString(row.name), row.activity, row.bound, row.dual);
      }
      json += "], \"assumptions\": [";
      for (size_t j = 0; j < r->assumptions.size(); ++j) json += (j ? ", " : "") + JsonString(r->assumptions[j]);
      json += "]}";
      continue;
    }
    if (i) fmt::print("\n");
    fmt::print("stallprof recommend: loader '{}' on {:g} cores, {} memory ({})\n\n", p.name, options.cores,
               options.memory_bytes ? FormatBytes(static_cast<double>(options.memory_bytes)) : "unknown", f.trace);
    fmt::print("  {}\n\n", DataLoaderLine(*r));
    fmt::print("cache plan:   {}\n", CacheLine(*r, p));
    fmt::print("throughput:   {:.1f} samples/s predicted (LP optimum {:.1f} with fractional workers), {} bound",
               r->predicted.samples_per_s, r->lp_samples_per_s, model::ToString(r->predicted.bottleneck));
    if (speedup > 0)
      fmt::print("; measured {:.1f} samples/s: {:.2f}x\n", r->measured_samples_per_s, speedup);
    else
      fmt::print("\n");
    fmt::print("binding:      {} ({}): {}\n", r->binding.name.empty() ? "none" : r->binding.name,
               model::ToString(r->binding.kind), r->advice);
    const double rate_b = r->lp_samples_per_s / p.batch_size;
    fmt::print("prefetch:     Little's law: {:.2f} batches/s x p99 batch latency {} = {:.1f} batches in flight over {} "
               "workers -> prefetch_factor={}\n",
               rate_b, FormatSeconds(p.produce_p99_s > 0 ? p.produce_p99_s : p.produce_s_per_batch),
               r->prefetch_concurrency, r->workers, r->prefetch_factor);
    fmt::print("shadow prices: ");
    bool first = true;
    for (const auto& row : r->lp.rows) {
      if (row.dual <= 1e-6) continue;  // slack, or only the LP's tiny cost per core and worker
      fmt::print("{}{} (shadow price {:.4g})", first ? "" : ", ", row.name, row.dual);
      first = false;
    }
    fmt::print("{}\n", first ? "none" : "");
    for (const auto& a : r->assumptions) fmt::print("assumed:      {}\n", a);
  }
  if (f.output == Output::kJson) fmt::print("{}]}}\n", json);
  return 0;
}

}  // namespace

void RegisterRecommend(CLI::App& app, Action& action) {
  auto f = std::make_shared<RecommendFlags>();
  auto* sub = app.add_subcommand("recommend", "DataLoader settings, cores and cache plan that maximize throughput (an LP)");
  sub->add_option("trace", f->trace, "trace file (default ./trace.pb)");
  sub->add_option("--cores", f->cores, "cores of the machine to plan for (default: the profiled machine's)");
  sub->add_option("--memory", f->memory, "memory budget for cache, workers and prefetch buffers, e.g. 64G (default: the machine's)");
  sub->add_option("--loader", f->loader, "only this loader (default: 'train' if present, else all)");
  sub->add_flag_callback("--json", [f] { f->output = Output::kJson; }, "print the plan as JSON");
  sub->add_option("--warmup", f->warmup, "iterations skipped at the start of each epoch")->default_val(5);
  sub->callback([&action, f] { action = [f] { return RunRecommend(*f); }; });
}

}  // namespace stallprof::cli
