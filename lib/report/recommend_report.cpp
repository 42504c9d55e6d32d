#include <fmt/format.h>

#include "common/units.h"
#include "json_writer.h"
#include "model/cache.h"
#include "model_report.h"
#include "terminal.h"

namespace stallprof::report {

namespace {

// Predicted over measured samples/s, 0 when the run's throughput is unknown.
double Speedup(const model::Recommendation& r) {
  return r.measured_samples_per_s > 0 ? r.predicted.samples_per_s / r.measured_samples_per_s : 0;
}

// The proposal over the whole run, each epoch's start-up included: what a
// loader of short epochs gains is decided there, not in the steady state.
std::string WholeRunLine(const model::Recommendation& r, const model::LoaderProfile& p) {
  const auto& w = r.predicted;
  std::string out = fmt::format("whole run:    {:.1f} samples/s predicted", w.whole_run_samples_per_s);
  if (!w.startup_measured)
    out += " without the workers' start-up (the profile had no workers to time it)";
  else if (r.workers > 0 && p.startup_timed)
    out += fmt::format(" with start-up {} per epoch (a floor: the worker timed after the run{})",
                       FormatSeconds(w.startup_s_per_epoch),
                       p.fork_s_per_mib >= 0 ? ", its fork scaled to the job's process" : "");
  else
    out += fmt::format(" with start-up {} per epoch", FormatSeconds(w.startup_s_per_epoch));
  if (w.loop_work_s_per_epoch > 0)
    out += fmt::format(" and the loop's own work at epoch starts {}", FormatSeconds(w.loop_work_s_per_epoch));
  if (p.measured_whole_run_samples_per_s > 0)
    out += fmt::format("; measured {:.1f} samples/s whole run", p.measured_whole_run_samples_per_s);
  out += "\n";
  if (r.workers > 0 && p.objects > 1)
    out += fmt::format("rebuilt:      the DataLoader was built {} times under this name, and persistent workers die with "
                       "it: build it once, before the loop, for its workers to start once\n",
                       p.objects);
  if (p.iterator_per_step)
    out += fmt::format("per step:     the loop creates an iterator per step (next(iter(loader))?), and each one starts "
                       "the pipeline anew, persistent workers too (they refill their queues at each iter()): create it "
                       "once (it = iter(loader)), call next(it), and a new one at StopIteration, for the steady state's "
                       "{:.1f} samples/s\n",
                       r.predicted.samples_per_s);
  return out;
}

// The DataLoader settings of the profiled run, as the line recommend prints.
std::string ProfiledDataLoaderLine(const model::LoaderProfile& p) {
  if (p.workers == 0) return "num_workers=0";
  return fmt::format("num_workers={}, prefetch_factor={}, persistent_workers={}", p.workers, p.prefetch_factor,
                     p.persistent_workers ? "True" : "False");
}

}  // namespace

std::string DataLoaderLine(const model::Recommendation& r) {
  // torch refuses prefetch_factor and persistent_workers without workers.
  if (r.workers == 0) return "DataLoader(..., num_workers=0, pin_memory=torch.cuda.is_available())";
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
      if (c.policy == model::CachePolicy::kLru)  // recommend plans the page cache or a static one
        return fmt::format("an LRU cache of {} over the dataset's files (hit ratio {:.0f}%)",
                           FormatBytes(static_cast<double>(c.bytes)), c.hit_ratio * 100);
      return c.policy == model::CachePolicy::kPageCache
                 ? fmt::format("leave {} of page cache to the dataset's files (Linux's page cache under shuffling: hit ratio {:.0f}%)",
                               FormatBytes(static_cast<double>(c.bytes)), c.hit_ratio * 100)
                 : fmt::format("keep a fixed {} of the raw files in memory (static cache, MinIO-like: hit ratio {:.0f}%)",
                               FormatBytes(static_cast<double>(c.bytes)), c.hit_ratio * 100);
    case model::CachePoint::kDecoded:
      return fmt::format("keep {} of decoded samples after stage '{}' in memory (static: hit ratio {:.0f}%)",
                         FormatBytes(static_cast<double>(c.bytes)), c.stage, c.hit_ratio * 100);
  }
  return "";
}

std::string RecommendLoaderText(const RecommendedLoader& loader, const model::RecommendOptions& options,
                                const std::string& trace) {
  const auto& p = loader.profile;
  const auto& r = loader.plan;
  const double speedup = Speedup(r);
  std::string out = fmt::format(
      "stallprof recommend: loader '{}' on {:g} core{}, {} memory{} ({})\n\n", TerminalSafe(p.name), options.cores,
      options.cores == 1 ? "" : "s",
      options.memory_bytes ? FormatBytes(static_cast<double>(options.memory_bytes)) : "unknown",
      options.memory_bytes && r.job_memory_bytes
          ? fmt::format(", {} of it held by the training process{} (peak RSS): {} left for cache and workers",
                        FormatBytes(static_cast<double>(r.job_memory_bytes)), p.ranks_on_host > 1 ? "es" : "",
                        FormatBytes(static_cast<double>(r.PlanMemoryBytes(options.memory_bytes))))
          : "",
      trace);
  if (!r.WorthChanging())
    out += fmt::format("  keep the DataLoader as profiled ({}): the best plan found predicts {:.1f} samples/s against "
                       "{:.1f} for the profiled settings on this machine ({:+.1f}%{}), under the "
                       "{:.0f}% the model can tell from no change\n  the best plan found, not worth a change: ",
                       ProfiledDataLoaderLine(p), r.predicted.samples_per_s, r.profiled_settings_samples_per_s,
                       (r.predicted.samples_per_s / r.profiled_settings_samples_per_s - 1) * 100,
                       r.profiled_settings_whole_run_samples_per_s > 0 && r.predicted.whole_run_samples_per_s > 0
                           ? fmt::format("; whole run {:+.1f}%", (r.predicted.whole_run_samples_per_s /
                                                                   r.profiled_settings_whole_run_samples_per_s - 1) * 100)
                           : std::string(),
                       model::kWorthChanging * 100);
  else
    out += "  ";
  out += fmt::format("{}\n", DataLoaderLine(r));
  if (r.step_threads > 0)
    out += fmt::format("  torch.set_num_threads({})  # the step's intra-op threads ({} now): fewer hold each other up less "
                       "beside the workers\n",
                       r.step_threads, p.intra_op_threads);
  out += "\n";
  out += fmt::format("cache plan:   {}\n", CacheLine(r, p));
  out += fmt::format("throughput:   {:.1f} samples/s predicted, steady state (simulated; LP optimum {:.1f} with "
                     "fractional workers), {} bound",
                     r.predicted.samples_per_s, r.lp_samples_per_s, model::ToString(r.predicted.bottleneck));
  if (speedup > 0)
    out += fmt::format("; measured {:.1f} samples/s steady state: {:.2f}x\n", r.measured_samples_per_s, speedup);
  else
    out += "\n";
  // As under whatif's rows: the kernel's scheduling of an oversubscribed job is not modelled.
  if (r.predicted.waiting_threads >= model::kTimeSlicedThreads && !r.predicted.step_oversubscribed)
    out += fmt::format("              {:.2f} of the job's threads wait for a core on average: the kernel's scheduling "
                       "of them is not modelled (it leaves a core idle while a thread waits, or favours the step), so "
                       "this figure may be off by up to 40% either way, most often high; a host whose vCPUs slow when "
                       "all are busy makes it high (docs/model.md)\n",
                       r.predicted.waiting_threads);
  if (const std::string busy = BusyCoresNote(r.as_profiled, r.predicted, "the recommended configuration"); !busy.empty())
    out += "             " + busy + "\n";
  out += WholeRunLine(r, p);
  if (r.lp_pool_workers > 0 && r.workers > 0)
    out += fmt::format("workers:      {} predicted within {:g}% of the LP's {} ({:.1f} samples/s): more would only hold "
                       "memory{}\n",
                       r.workers, model::kAsGoodAsMore * 100, r.lp_pool_workers, r.lp_pool_samples_per_s,
                       p.stream_worker_batches.empty() ? "" : " (the stream's split leaves the others without data)");
  if (r.workers == 0)
    out += fmt::format("workers:      none: fetching in the main process is predicted at {:.1f} samples/s, the LP's {} "
                       "worker(s) at {:.1f}: a batch costs {} of CPU to fetch and {} to receive from a worker, and the "
                       "main loop pays one or the other{}\n",
                       r.predicted.samples_per_s, r.lp_workers, r.lp_workers_samples_per_s,
                       FormatSeconds(model::FetchCpuWithWorkers(p, 0, p.cpu_s_per_batch)),
                       FormatSeconds(model::MainReceiveSeconds(p)),
                       p.workers > 0 && !p.shm_collate_cpu_s_per_batch.measured
                           ? "; profiled with workers, the first figure is low (the fetch measured in a worker "
                             "includes collating into shared memory, which was not timed)"
                           : "");
  // The LP sees rates only; the simulation may find the proposal bound
  // elsewhere (in-order delivery, a stream's split): say so, not two answers.
  const bool lp_says_model = r.binding.kind == model::RowKind::kIngest && !r.binding.name.empty();
  const bool simulated_input = r.predicted.bottleneck != model::Bottleneck::kCompute &&
                               r.predicted.bottleneck != model::Bottleneck::kHandoff;
  // The row's kind in brackets where its name does not say it ("cpu[decode]" (stage cpu), not "cores" (cores)).
  const std::string kind = model::ToString(r.binding.kind);
  out += fmt::format("binding:      {}{}{}: {}{}\n", r.workers == 0 ? "in the LP's plan with workers, " : "",
                     r.binding.name.empty() ? "none" : TerminalSafe(r.binding.name),
                     r.binding.name == kind ? "" : fmt::format(" ({})", kind), TerminalSafe(r.advice),
                     r.workers > 0 && lp_says_model && simulated_input
                         ? fmt::format("; so says the LP, which sees rates only: simulated batch by batch, the "
                                       "proposal is {} bound (the throughput line)",
                                       model::ToString(r.predicted.bottleneck))
                         : "");
  const double rate_b = r.lp_samples_per_s / p.SamplesPerBatch();
  if (r.workers == 0)
    out += "prefetch:     none without workers (the main process fetches each batch when it asks for it)\n";
  else
    out += fmt::format("prefetch:     Little's law: {:.2f} batches/s x p99 batch latency {} = {:.1f} batches in flight over {} "
                       "worker{} -> prefetch_factor={}{}\n",
                       rate_b, FormatSeconds(p.produce_p99_s > 0 ? p.produce_p99_s : p.produce_s_per_batch),
                       r.prefetch_concurrency, r.workers, r.workers == 1 ? "" : "s", r.littles_prefetch_factor,
                       r.prefetch_factor < r.littles_prefetch_factor
                           ? fmt::format("; the simulation predicts prefetch_factor={} within {:g}% of it (fewer "
                                         "buffers in memory)",
                                         r.prefetch_factor, model::kAsGoodAsMore * 100)
                       : r.prefetch_factor > r.littles_prefetch_factor
                           ? fmt::format(", raised to {} (torch's default, the fewest proposed: at 1 each batch's "
                                         "fetch waits for the previous batch's handoff, wake-ups the model does not "
                                         "price)",
                                         r.prefetch_factor)
                           : "");
  out += "shadow prices: ";
  bool first = true;
  for (const auto& row : r.lp.rows) {
    if (row.dual <= 1e-6) continue;  // slack, or only the LP's tiny cost per core and worker
    out += fmt::format("{}{} (shadow price {:.4g})", first ? "" : ", ", TerminalSafe(row.name), row.dual);
    first = false;
  }
  out += first ? "none\n" : "\n";
  for (const auto& a : r.assumptions) out += fmt::format("assumed:      {}\n", TerminalSafe(a));
  return out;
}

std::string RecommendText(const RecommendReport& report) {
  std::string out;
  for (size_t i = 0; i < report.loaders.size(); ++i) {
    if (i) out += "\n";
    out += RecommendLoaderText(report.loaders[i], report.options, report.trace);
  }
  for (const auto& [loader, why] : report.not_planned) out += fmt::format("\nnot planned: {}\n", TerminalSafe(why));
  out += OtherLoadersLine(report.other_loaders);
  return out;
}

std::string RecommendJson(const RecommendReport& report) {
  std::string out;
  JsonWriter w(out, kSpacedJson);
  w.BeginObject();
  w.Field("trace", report.trace).Field("cores", report.options.cores).Field("memory_bytes", report.options.memory_bytes);
  w.Key("loaders").BeginArray();
  for (const auto& [p, r] : report.loaders) {
    const double speedup = Speedup(r);
    w.BeginObject();
    w.Field("loader", p.name).Field("num_workers", r.workers);
    w.Key("prefetch_factor");
    if (r.workers > 0) w.Int(r.prefetch_factor); else w.Null();
    w.Key("lp_pool_workers");  // the LP's pool, when fewer workers were predicted within 1% of it
    if (r.lp_pool_workers > 0) w.BeginObject().Field("num_workers", r.lp_pool_workers).Field("predicted_samples_per_s", r.lp_pool_samples_per_s).EndObject();
    else w.Null();
    w.Key("lp_workers");  // the LP's plan, when fetching without workers was predicted faster
    if (r.workers == 0) w.BeginObject().Field("num_workers", r.lp_workers).Field("predicted_samples_per_s", r.lp_workers_samples_per_s).EndObject();
    else w.Null();
    w.Field("dataloader", DataLoaderLine(r));
    // Of the memory: the training processes' peak RSS, and the rest the plan shared out.
    w.Field("job_memory_bytes", r.job_memory_bytes).Field("plan_memory_bytes", r.PlanMemoryBytes(report.options.memory_bytes));
    // false: the plan predicts under kWorthChanging over the profiled
    // settings (predicted alike), and the text says to keep them.
    w.Field("worth_changing", r.WorthChanging());
    w.Key("profiled_settings_samples_per_s");
    if (r.profiled_settings_samples_per_s > 0) w.Number(r.profiled_settings_samples_per_s); else w.Null();
    w.Key("profiled_settings_whole_run_samples_per_s");
    if (r.profiled_settings_whole_run_samples_per_s > 0) w.Number(r.profiled_settings_whole_run_samples_per_s); else w.Null();
    w.Key("step_threads");
    if (r.step_threads > 0) w.Int(r.step_threads); else w.Null();
    w.Key("cache").BeginObject();
    w.Field("point", model::ToString(r.cache.point)).Field("policy", model::ToString(r.cache.policy));
    w.Field("bytes", r.cache.bytes).Field("hit_ratio", r.cache.hit_ratio);
    w.EndObject();
    w.Field("predicted_samples_per_s", r.predicted.samples_per_s).Field("lp_samples_per_s", r.lp_samples_per_s);
    w.Field("predicted_whole_run_samples_per_s", r.predicted.whole_run_samples_per_s);
    w.Field("predicted_startup_s_per_epoch", r.predicted.startup_s_per_epoch).Field("startup_predicted", r.predicted.startup_measured);
    w.Field("predicted_loop_work_s_per_epoch", r.predicted.loop_work_s_per_epoch);
    w.Key("measured_whole_run_samples_per_s");
    if (p.measured_whole_run_samples_per_s > 0) w.Number(p.measured_whole_run_samples_per_s); else w.Null();
    w.Field("dataloader_objects", p.objects).Field("iterator_per_step", p.iterator_per_step);
    w.Key("measured_samples_per_s");
    if (r.measured_samples_per_s > 0) w.Number(r.measured_samples_per_s); else w.Null();
    w.Key("speedup");
    if (speedup > 0) w.Number(speedup); else w.Null();
    w.Field("bottleneck", model::ToString(r.predicted.bottleneck));
    // What the text's caveats rest on: threads waiting for a core, and the
    // cores the proposal and the profiled configuration keep busy.
    w.Field("waiting_threads", r.predicted.waiting_threads).Field("busy_cores", r.predicted.busy_cores);
    w.Field("profiled_busy_cores", r.as_profiled.busy_cores);
    w.Key("binding").BeginObject();
    w.Field("constraint", r.binding.name).Field("kind", model::ToString(r.binding.kind));
    w.Field("shadow_price", r.binding.dual);
    w.EndObject();
    w.Field("advice", r.advice).Field("prefetch_concurrency", r.prefetch_concurrency);
    w.Field("littles_prefetch_factor", r.littles_prefetch_factor);
    w.Key("constraints").BeginArray();
    for (const auto& row : r.lp.rows) {
      w.BeginObject();
      w.Field("name", row.name).Field("activity", row.activity).Field("bound", row.bound).Field("shadow_price", row.dual);
      w.EndObject();
    }
    w.EndArray();
    w.Key("assumptions").BeginArray();
    for (const auto& a : r.assumptions) w.String(a);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("not_planned").BeginArray();
  for (const auto& [loader, why] : report.not_planned) w.BeginObject().Field("loader", loader).Field("reason", why).EndObject();
  w.EndArray();
  w.Key("other_loaders").BeginArray();
  for (const auto& name : report.other_loaders) w.String(name);
  w.EndArray();
  w.EndObject();
  out += '\n';
  return out;
}

}  // namespace stallprof::report
