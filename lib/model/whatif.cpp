#include "model/whatif.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "common/units.h"
#include "model/cache.h"

namespace stallprof::model {

Result<double> ParseBackgroundLoad(const std::string& text) {
  if (text.empty()) return Scenario::kOthersAway;
  if (text == "profiled") return Scenario::kAsProfiled;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v >= 0) || !(v <= 4096))
    return UsageError("--background-load '" + text +
                      "': expected 'profiled' or a number of busy threads from other processes, e.g. 0 or 1.5");
  return v;
}

Result<double> ParseCores(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v))
    return UsageError("--cores '" + text + "': not a number, expected e.g. --cores 8");  // recommend takes no list
  if (v <= 0) return UsageError("--cores " + text + ": needs at least a fraction of a core (> 0)");
  if (v > kMaxWhatifCores)
    return UsageError(fmt::format("--cores {}: more than {:g} cores, the model covers one machine; use at most {:g}",
                                  text, kMaxWhatifCores, kMaxWhatifCores));
  return v;
}

namespace {
// A whole number from 1 to `most` given to `flag` (`what` it counts, for the error).
Result<int32_t> ParseCount(const std::string& text, const char* flag, long most, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || v < 1 || v > most)
    return UsageError(fmt::format("{} '{}': expected {}, 1 to {}", flag, text, what, most));
  return static_cast<int32_t>(v);
}
}  // namespace

Result<Sweep> ParseSweep(const SweepFlags& f) {
  Sweep s;
  if (f.cores_given && f.cores.empty())
    return UsageError("--cores '': empty, give a number of cores, e.g. --cores 8 or --cores 2,4,8");
  if (!f.cores.empty()) {
    auto parts = SplitList(f.cores, "--cores");
    if (!parts.ok()) return parts.error();
    for (const auto& part : *parts) {
      auto v = ParseCores(part);
      if (!v.ok()) return v.error();
      s.cores.push_back(*v);
    }
  }
  if (!f.workers.empty()) {
    auto parts = SplitList(f.workers, "--workers");
    if (!parts.ok()) return parts.error();
    for (const auto& part : *parts) {
      if (part == "auto") {
        s.workers.push_back(kAutoWorkers);
        continue;
      }
      char* end = nullptr;
      const long v = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || *end != '\0' || v < 0 || v > 4096)
        return UsageError("--workers '" + part + "': expected 'auto' or a worker count from 0 to 4096");
      s.workers.push_back(static_cast<int32_t>(v));
    }
  }
  if (!f.cache.empty()) {
    auto parts = SplitList(f.cache, "--cache");
    if (!parts.ok()) return parts.error();
    for (const auto& part : *parts) {
      if (part == "all") {  // everything cached: no dataset size needed
        s.cache_bytes.push_back(kCacheAll);
        continue;
      }
      auto bytes = ParseBytes(part, "--cache");
      if (!bytes.ok()) return bytes.error();
      if (*bytes >= static_cast<uint64_t>(kCacheAll)) return UsageError("--cache " + part + ": too large");
      s.cache_bytes.push_back(static_cast<int64_t>(*bytes));
    }
  }
  if (!f.cache_policy.empty()) {
    if (f.cache_policy == "pagecache") s.cache_policy = CachePolicy::kPageCache;
    else if (f.cache_policy == "lru") s.cache_policy = CachePolicy::kLru;
    else if (f.cache_policy == "static") s.cache_policy = CachePolicy::kStatic;
    else return UsageError("--cache-policy '" + f.cache_policy + "': expected pagecache (Linux's page cache), lru or static");
    s.cache_policy_given = true;
  }
  if (!f.accel_speedup.empty()) {
    char* end = nullptr;
    s.accel_speedup = std::strtod(f.accel_speedup.c_str(), &end);
    if (end == f.accel_speedup.c_str() || *end != '\0' || !(s.accel_speedup > 0) || !std::isfinite(s.accel_speedup))
      return UsageError("--accel-speedup '" + f.accel_speedup + "': expected a factor > 0, e.g. 2");
  }
  if (!f.disk_bw.empty()) {
    auto bw = ParseBandwidth(f.disk_bw, "--disk-bw");
    if (!bw.ok()) return bw.error();
    s.storage_bandwidth = *bw;
  }
  s.first_epoch = f.first_epoch;
  if (f.persistent_workers == "true" || f.persistent_workers == "True" || f.persistent_workers == "1")
    s.persistent_workers = 1;
  else if (f.persistent_workers == "false" || f.persistent_workers == "False" || f.persistent_workers == "0")
    s.persistent_workers = 0;
  else if (!f.persistent_workers.empty())
    return UsageError("--persistent-workers '" + f.persistent_workers + "': expected true or false");
  if (!f.step_threads.empty()) {
    auto threads = ParseCount(f.step_threads, "--step-threads", 4096, "the step's intra-op threads");
    if (!threads.ok()) return threads.error();
    s.step_threads = *threads;
  }
  if (!f.prefetch_factor.empty()) {
    auto depth = ParseCount(f.prefetch_factor, "--prefetch-factor", 1024, "batches each worker keeps ahead");
    if (!depth.ok()) return depth.error();
    s.prefetch_factor = *depth;
  }
  if (f.move_to_workers_given) {
    auto names = SplitList(f.move_to_workers, "--move-to-workers");
    if (!names.ok()) return names.error();
    s.move_to_workers = *names;
  }
  auto background = ParseBackgroundLoad(f.background_load);
  if (!background.ok()) return background.error();
  s.background_threads = *background;
  return s;
}

uint32_t AutoWorkers(const LoaderProfile& profile, const Scenario& scenario) {
  const auto cpu_cap = static_cast<uint32_t>(std::max(1.0, std::floor(profile.RankCores(scenario.machine.cores)) - 1));
  std::vector<double> rates;
  double best = 0;
  for (uint32_t w = 1; w <= std::max(cpu_cap, kMaxAutoWorkers); ++w) {
    Scenario s = scenario;
    s.workers = static_cast<int32_t>(w);
    auto r = Predict(profile, s);
    const double rate = r.ok() ? r->samples_per_s : 0;
    // Past cores - 1 only workers that wait off CPU (storage, network,
    // sleeps) can add: go on while each adds more than 0.5%.
    if (w > cpu_cap && rate <= best * 1.005) break;
    rates.push_back(rate);
    best = std::max(best, rate);
  }
  for (uint32_t w = 1; w <= rates.size(); ++w)
    if (rates[w - 1] >= best * (1 - kAsGoodAsMore)) return w;
  return cpu_cap;
}

namespace {
std::string Described(const char* what, double value, const std::string& formatted, bool measured,
                      const std::string& source) {
  (void)value;
  return fmt::format("{}: {} ({}{})", what, formatted, measured ? "measured" : "assumed",
                     source.empty() ? "" : ", " + source);
}

std::vector<std::string> Inputs(const LoaderProfile& p, const Machine& m) {
  std::vector<std::string> in;
  // A mean batch (an IterableDataset's partial last batches, variable sizes) to a tenth.
  const std::string batch_size = p.batch_size == std::floor(p.batch_size) ? fmt::format("{:g}", p.batch_size)
                                                                          : fmt::format("{:.1f} on average", p.batch_size);
  in.push_back(fmt::format("batch size: {}, workers: {}, steady-state batches: {} (measured, loader config and trace)",
                           batch_size, p.workers, p.batches));
  if (p.ranks_on_host > 1)
    in.push_back(fmt::format("ranks on this host: {} (measured: their processes in this trace), each running this loader "
                             "with the same settings: each gets its share of the cores, {:g} of the profiled {:g}, and of "
                             "every scenario's (--cores is the host's, --workers each rank's)",
                             p.ranks_on_host, p.profiled_cores, p.profiled_cores * p.ranks_on_host));
  in.push_back(fmt::format("compute per batch: {} (measured, mean step - wait){}", FormatSeconds(p.compute_s_per_batch),
                           p.zipped_with.empty()
                               ? ""
                               : fmt::format("; of it, {} in the next() of loader {}, iterated with this one (zip): held "
                                             "as profiled, the scenario changes this loader alone",
                                             FormatSeconds(p.zipped_s_per_batch), p.zipped_with)));
  const double step_cores = p.StepCores();
  // More cores than the step has threads: CPU that is not the step's work.
  const double step_thread_cap = p.intra_op_threads > 0 ? p.intra_op_threads : 1;
  in.push_back(p.compute_cpu_s_per_batch.measured
                   ? fmt::format("the step's own CPU per batch: {} on {:.2f} cores, run-queue delay {} (measured, {}): "
                                 "it shares the cores with the workers{}",
                                 FormatSeconds(p.compute_cpu_s_per_batch.value), step_cores,
                                 FormatSeconds(p.compute_delay_s_per_batch), p.compute_cpu_s_per_batch.source,
                                 step_cores > step_thread_cap * 1.05
                                     ? fmt::format("; more than its {:g} intra-op thread{}: the process's other "
                                                   "threads count in it{}{}",
                                                   step_thread_cap, step_thread_cap == 1 ? "" : "s",
                                                   p.workers == 0 ? ", their CPU during the fetches too (no workers: "
                                                                    "the intra-op threads of the collate's or the "
                                                                    "transforms' operators)"
                                                                  : "",
                                                   ParallelStep(p) && !ParallelStepOversubscribed(p)
                                                       ? fmt::format("; the model runs the step on at most {:g}",
                                                                     step_thread_cap)
                                                       : "")
                                     : "")
                   : "the step's own CPU: " + p.compute_cpu_s_per_batch.source);
  if (p.intra_op_threads > 0) {
    const double ran_on = p.compute_s_per_batch > 0 && p.compute_cpu_s_per_batch.measured
                              ? (p.compute_cpu_s_per_batch.value + p.compute_delay_s_per_batch) / p.compute_s_per_batch
                              : 0;
    in.push_back(fmt::format(
        "the step's intra-op threads: {} (measured, torch.get_num_threads() at iterator creation); {}",
        p.intra_op_threads,
        !ParallelStep(p) ? "the step is not parallel over them (runnable on "
                               + fmt::format("{:.2f}", ran_on) + " threads)"
        : ParallelStepOversubscribed(p)
            ? fmt::format("the step ran beside {} workers on {:g} cores: its threads waited for each other, which its "
                          "measured CPU includes (--step-threads needs a profile without workers)",
                          p.workers, p.profiled_cores)
            : "parallel: its threads wait for each other at every operator, so beside workers that oversubscribe "
              "the cores it progresses as one thread (docs/model.md)"));
  }
  in.push_back(fmt::format("per-batch worker costs: {} fetch spans, p99 {} (measured; the simulation draws from them in order){}",
                           p.batch_costs.size(), FormatSeconds(p.produce_p99_s),
                           p.workers == 0 ? "; measured in the main thread (num_workers=0), taken as a worker's: a worker "
                                            "may need more beside the step (caches and memory shared with it; see "
                                            "the decode case in docs/model.md); a profile with one worker measures it"
                                          : ""));
  if (p.workers > 0)
    in.push_back(fmt::format("worker start-up: {} in the first epoch, {} in each later one ({} epochs, {} workers{}) "
                             "(measured: the first step beyond one batch's production and a worker's set-up, or until the last worker's "
                             "first fetch){}{}",
                             FormatSeconds(p.startup_first_s), FormatSeconds(p.startup_later_s), p.epochs,
                             p.persistent_workers ? "persistent" : "non-persistent",
                             p.objects > 1 ? fmt::format(", {} DataLoader objects: workers restart with each, persistent or not", p.objects) : "",
                             p.startup_serial_share >= 0.05
                                 ? fmt::format("; {:.0f}% of it inside __iter__, starting the workers one after another "
                                               "(each waits for the one before to read its pickled dataset): that part "
                                               "grows with the workers, the rest with the workers per core",
                                               p.startup_serial_share * 100)
                                 : "",
                             p.shutdown_s_per_worker > 0
                                 ? fmt::format("; shutdown {} per worker each epoch without persistent workers (measured: "
                                               "the StopIteration next() joining them)",
                                               FormatSeconds(p.shutdown_s_per_worker))
                                 : ""));
  else if (p.startup_timed && (p.startup_timed_method == "spawn" || p.startup_timed_method == "forkserver"))
    in.push_back(fmt::format("worker start-up: {} an epoch{} (timed after the run: one worker started by {}, a fresh "
                             "interpreter importing torch, to its first batch beyond a later one's; the workers start "
                             "side by side over the cores; a floor: the job's workers also import its main module's "
                             "imports and unpickle its dataset{})",
                             FormatSeconds(p.startup_first_s),
                             p.shutdown_exit_extra_s > 0
                                 ? fmt::format(", and {} for each wave of workers' exits each epoch without persistent "
                                               "workers (their join, timed there)",
                                               FormatSeconds(p.shutdown_exit_extra_s))
                                 : "",
                             p.startup_timed_method,
                             p.worker_init_fn.empty()
                                 ? ""
                                 : fmt::format(", and each runs the loader's worker_init_fn ({}), which the timing did "
                                               "not: a profile with workers times it",
                                               p.worker_init_fn)));
  else if (p.startup_timed)
    in.push_back(fmt::format("worker start-up: {} an epoch{} (timed after the run: one worker forked from a fresh "
                             "process, to its first batch beyond a later one's{}{}; a floor: its steps then write pages "
                             "copy-on-write while the workers live{})",
                             FormatSeconds(p.startup_first_s),
                             p.shutdown_s_per_worker > 0
                                 ? fmt::format(", shutdown {} per worker each epoch without persistent workers",
                                               FormatSeconds(p.shutdown_s_per_worker))
                                 : "",
                             p.shutdown_s_per_worker > 0 ? ", and joined" : "",
                             p.fork_s_per_mib >= 0
                                 ? fmt::format("; with {} for the job's process of {} forking each worker where the "
                                               "timing's had {} ({} a MiB, timed there; the forks run one after another, "
                                               "so {:.0f}% of it grows with the workers){}",
                                               FormatSeconds(p.startup_fork_extra_s), FormatBytes(p.job_rss_bytes),
                                               FormatBytes(p.timing_rss_bytes), FormatSeconds(p.fork_s_per_mib),
                                               p.startup_serial_share * 100,
                                               p.shutdown_exit_extra_s > 0
                                                   ? fmt::format(", and {} for each wave of workers' exits over the "
                                                                 "cores (tearing down the larger page tables)",
                                                                 FormatSeconds(p.shutdown_exit_extra_s))
                                                   : "")
                                 : "; the job's larger process forks slower (not timed)",
                             p.worker_init_fn.empty()
                                 ? ""
                                 : fmt::format(", and each worker runs the loader's worker_init_fn ({}), which the "
                                               "timing did not: a profile with workers times it",
                                               p.worker_init_fn)));
  else
    in.push_back("worker start-up: not measured (no workers in the profile), taken as 0 for scenarios with workers");
  if (p.workers > 0 && p.WorkerSetupSeconds() > 0) {
    std::string fetches;
    for (const auto& c : p.worker_setup_by_fetch)
      fetches += fmt::format("{}{}", fetches.empty() ? "" : ", ", FormatSeconds(c.Seconds()));
    in.push_back(fmt::format("a fresh worker's set-up: {} ({} on CPU) in its {} beyond a warm worker's "
                             "({}) (measured: the workers' first fetches against their later ones, the first at least its "
                             "first item beyond the others: imports, files opened on first use, caches warming); the "
                             "per-batch costs leave it out, and each worker that starts pays it: every epoch without "
                             "persistent workers, once per DataLoader object with them",
                             FormatSeconds(p.WorkerSetupSeconds()), FormatSeconds(SumCpuSeconds(p.worker_setup_by_fetch)),
                             FirstOf(p.worker_setup_by_fetch.size(), "fetch", "fetches"), fetches));
  }
  if (p.sampler_s_per_epoch > 0)
    in.push_back(fmt::format("the sampler's first draw: {} an epoch (measured: its per-epoch work, such as a "
                             "permutation, on the main thread before any batch; every scenario pays it per epoch, "
                             "apart from the start-up above)",
                             FormatSeconds(p.sampler_s_per_epoch)));
  if (p.warmup_extra_first_s > 0 || p.warmup_extra_later_s > 0)
    in.push_back(fmt::format("the loop's own work at an epoch's start beyond its steady step: {} in the first epoch, {} "
                             "in each later one (measured: the warm-up iterations' compute beyond the steady mean; the "
                             "whole run carries it into every scenario, less the workers' contention the simulation "
                             "already puts there){}",
                             FormatSeconds(p.warmup_extra_first_s), FormatSeconds(p.warmup_extra_later_s),
                             p.fork_refault_later_s > 0
                                 ? fmt::format("; of the later, {} is the fork of each epoch's workers (measured: the "
                                               "training process's kernel CPU in those steps beyond its steady rate, "
                                               "copy-on-write faults of the pages it writes), paid only by epochs that "
                                               "fork workers (none later with persistent workers)",
                                               FormatSeconds(p.fork_refault_later_s))
                                 : ""));
  if (!p.stream_worker_batches.empty()) {
    const uint64_t part = StreamPartBatches(p);
    in.push_back(fmt::format("the IterableDataset's stream over the workers: {:.1f} batches an epoch (measured: its own "
                             "code splits it unevenly, so each epoch ends on fewer workers); with other worker counts: {}",
                             fmt::join(p.stream_worker_batches, ", "),
                             part > 0 ? fmt::format("whole parts of {} batches dealt to the workers in turn (assumed, the "
                                                    "measured counts' common part, as shards[worker::num_workers] splits)",
                                                    part)
                                      : std::string("an even split (assumed: the measured counts share no part)")));
  }
  in.push_back(fmt::format("worker CPU / io / run-queue delay per batch: {} / {} / {} (measured, fetch spans)",
                           FormatSeconds(p.cpu_s_per_batch), FormatSeconds(p.io_s_per_batch),
                           FormatSeconds(p.delay_s_per_batch)));
  in.push_back(Described("worker loop CPU per batch, outside the fetch span (taking indices, pickling and sending the batch)",
                         p.worker_loop_cpu_s_per_batch.value, FormatSeconds(p.worker_loop_cpu_s_per_batch.value),
                         p.worker_loop_cpu_s_per_batch.measured, p.worker_loop_cpu_s_per_batch.source));
  in.push_back(Described("a worker's time between its fetches when it held the next index (its loop's serial part: "
                         "putting the batch, taking the index, the GIL its sending thread holds)",
                         p.worker_gap_s_per_batch.value, FormatSeconds(p.worker_gap_s_per_batch.value),
                         p.worker_gap_s_per_batch.measured, p.worker_gap_s_per_batch.source));
  in.push_back(fmt::format("a worker's sending thread {} ({}, {})",
                           p.fetch_holds_gil.value > 0.5
                               ? "waits for the GIL while the worker's next fetch runs Python: a finished batch goes out "
                                 "when that fetch ends, and the main thread's receive waits for it too"
                               : "runs beside the worker's next fetch",
                           p.fetch_holds_gil.measured ? "measured" : "assumed", p.fetch_holds_gil.source));
  in.push_back(fmt::format("main process CPU: {:.2f} cores (measured, /proc sampler)", p.main_cpu_cores));
  in.push_back(fmt::format("the DataLoader's own code in next() outside the fetch (sampler, bookkeeping): {} per "
                           "batch ({}, {}; paid by the main thread without workers)",
                           FormatSeconds(p.next_overhead_s_per_batch.value),
                           p.next_overhead_s_per_batch.measured ? "measured" : "assumed", p.next_overhead_s_per_batch.source));
  if (p.workers > 0)
    in.push_back(fmt::format("handoff per batch (waiting in next() for a batch already produced{}): {} (measured)",
                             p.fetch_holds_gil.value > 0.5
                                 ? "; a batch held by its worker's later fetch from that fetch's end"
                                 : "",
                             FormatSeconds(p.handoff_s_per_batch)));
  if (p.workers == 0) {
    in.push_back(p.receive_source.empty()
                     ? "main thread CPU to receive a batch from a worker: not measured (no workers in the profile): "
                       "taken as 0"
                     : fmt::format("main thread CPU to receive a batch from a worker: {} (measured, {})",
                                   FormatSeconds(p.receive_s_per_batch), p.receive_source));
    if (p.handoff_s_per_batch > p.receive_s_per_batch)
      in.push_back(fmt::format("the main loop's receive per batch: {}, its wall time for a batch already made (measured, "
                               "the same timing): the CPU above and its waits for the worker to send each tensor's file "
                               "descriptor",
                               FormatSeconds(p.handoff_s_per_batch)));
    if (!p.shm_collate_cpu_s_per_batch.measured)
      in.push_back("a worker's collate into shared memory: not measured (no workers in the profile): taken as 0");
    if (!p.batch_touch_cpu_s_per_batch.measured)
      in.push_back("the step's first read of a batch received from a worker: not measured (no workers in the "
                   "profile): taken as 0");
  } else {
    in.push_back(p.receive_s_per_batch > 0
                     ? fmt::format("main thread CPU in next() per batch: {} (measured, wait spans; its run-queue delay "
                                   "is predicted)",
                                   FormatSeconds(p.receive_s_per_batch))
                     : "main thread CPU in next(): not recorded (wait spans without CPU time)");
    const double main = MainReceiveSeconds(p);
    const char* how =
        p.handoff_s_per_batch <= p.receive_s_per_batch ? "the main thread's CPU: the handoff measured no longer"
        : main >= p.handoff_s_per_batch ? "the handoff as measured: simulated at it, the handoff came out no longer"
        : main > p.receive_s_per_batch
            ? "calibrated: the simulation of the profiled configuration shows the measured handoff at this CPU; the "
              "rest of the handoff is run-queue delay and the worker sending the batch, which it predicts"
            : "calibrated to the main thread's CPU: simulated at it, the handoff came out at least as long as measured";
    in.push_back(fmt::format("the main loop's receive per batch: {} ({})", FormatSeconds(main), how));
  }
  // The batch in shared memory, timed after the run: a profile without
  // workers adds it to predict them, one with workers paid it in its fetches
  // and steps and takes it out to predict none.
  const char* paid = p.workers == 0 ? "" : " (in the measured figures above; none without workers)";
  if (p.shm_collate_cpu_s_per_batch.measured)
    in.push_back(fmt::format("a worker's collate into shared memory, beyond the main thread's into its heap: {} of "
                             "worker CPU per batch{} (measured, {})",
                             FormatSeconds(p.shm_collate_cpu_s_per_batch.value), paid,
                             p.shm_collate_cpu_s_per_batch.source));
  if (p.batch_touch_cpu_s_per_batch.measured)
    in.push_back(fmt::format("the step's first read and its free of a batch received from a worker (faulting in its "
                             "pages, unmapping them): {} of CPU per batch{} (measured, {})",
                             FormatSeconds(p.batch_touch_cpu_s_per_batch.value), paid,
                             p.batch_touch_cpu_s_per_batch.source));
  if (p.storage_bytes_per_batch > 0 || p.cpu_s_per_storage_byte.measured)
    in.push_back(Described("worker CPU per MiB read from storage", p.cpu_s_per_storage_byte.value,
                           fmt::format("{} ({} of the {} per batch, for {} read from storage)",
                                       FormatSeconds(p.cpu_s_per_storage_byte.value * 1048576.0),
                                       FormatSeconds(p.cpu_s_per_storage_byte.value * p.storage_bytes_per_batch),
                                       FormatSeconds(p.cpu_s_per_batch), FormatBytes(p.storage_bytes_per_batch)),
                           p.cpu_s_per_storage_byte.measured, p.cpu_s_per_storage_byte.source));
  in.push_back(fmt::format("profiled machine: {:g} usable core{}{}, {} memory{} (measured, trace header)", m.cores,
                           m.cores == 1 ? "" : "s",
                           m.cpu_limited ? " (its CPU cgroup's quota: the job's threads share that much CPU time, and "
                                           "wait in the run queue past it)"
                                         : "",
                           FormatBytes(static_cast<double>(m.memory_bytes)),
                           m.memory_limited ? " (its memory cgroup's limit: the job, its workers and its page cache share it)"
                                            : ""));
  // The pagecache policy is the kernel's classic lists; MGLRU ages pages otherwise.
  if (m.page_reclaim == "mglru")
    in.push_back("page reclaim: MGLRU (multi-generational LRU; measured, trace header): --cache-policy pagecache "
                 "models the kernel's active and inactive lists, not MGLRU's generations, so a partial cache's hit "
                 "ratio may be off (--cache-policy static gives the most any cache keeps, lru a plain LRU's)");
  else if (m.page_reclaim == "lists")
    in.push_back("page reclaim: the kernel's active and inactive lists, as --cache-policy pagecache models them "
                 "(measured, trace header: MGLRU off)");
  in.push_back(Described("bytes read per sample", p.bytes_per_sample.value, FormatBytes(p.bytes_per_sample.value),
                         p.bytes_per_sample.measured, p.bytes_per_sample.source));
  if (p.device_bytes_per_missed_byte > 1)
    in.push_back(fmt::format("device bytes per byte missed: {:.2f} (measured: the fetches read {} a batch from the device "
                             "for {} of their items' bytes that missed the page cache: readahead beyond them, which the "
                             "storage bandwidth carries)",
                             p.device_bytes_per_missed_byte, FormatBytes(p.storage_bytes_per_batch),
                             FormatBytes(p.storage_bytes_per_batch / p.device_bytes_per_missed_byte)));
  in.push_back(Described("storage bandwidth", p.storage_bandwidth.value,
                         p.storage_bandwidth.value > 0 ? FormatBytes(p.storage_bandwidth.value) + "/s" : "no limit",
                         p.storage_bandwidth.measured, p.storage_bandwidth.source));
  in.push_back(p.dataset_bytes > 0
                   ? fmt::format("dataset: {} in {} items, {} order{} ({}{})",
                                 FormatBytes(static_cast<double>(p.dataset_bytes)), p.dataset_items,
                                 p.order == AccessOrder::kRandom ? "random" : "sequential",
                                 p.order_note.empty() ? "" : " (" + p.order_note + ")",
                                 p.dataset_bytes_estimated ? "estimated: bytes read per sample x dataset length"
                                                           : "measured, loader config",
                                 p.dataset_items_counted
                                     ? "; the items: an epoch's samples to StopIteration, the dataset has no len"
                                     : "")
                   : "dataset size: unknown (the dataset lists no files and its fetches read none): --cache cannot be predicted");
  // Without the bytes a sample needs there is no ratio (analysis leaves it
  // 0), and "0% (measured)" read as a cold cache.
  if (p.bytes_per_sample.value <= 0)
    in.push_back("page-cache hit ratio in the profiled run: unknown (the bytes a sample needs are unknown: above)");
  else
    in.push_back(fmt::format("page-cache hit ratio in the profiled run: {:.0f}% (measured, {} vs bytes needed)",
                             p.cold_hit_ratio * 100,
                             p.storage_bytes_per_batch > 0 ? "fetches' storage reads" : "disk reads"));
  return in;
}

Scenario Base(const Machine& profiled, const Sweep& sweep) {
  Scenario s;
  s.machine = profiled;
  s.cache_policy = sweep.cache_policy;
  s.accel_speedup = sweep.accel_speedup;
  s.storage_bandwidth = sweep.storage_bandwidth;
  s.first_epoch = sweep.first_epoch;
  s.background_threads = sweep.background_threads;
  s.persistent_workers = sweep.persistent_workers;
  s.step_threads = sweep.step_threads;
  s.prefetch_factor = sweep.prefetch_factor;
  return s;
}
// What a row's change compares: the steady state against the measured
// one; without a steady state (no full batch past the warm-up) the whole run
// against the measured whole run, as such short epochs are full of start-up
// that the steady figures leave out (the speech-command tutorial's 6-batch
// epochs: 1 worker +11.7% steady against a 0-worker whole run, +2.5% whole
// run to whole run, +5.9% measured). The baseline's prediction stands in
// for a measurement missing (ChangeNeedsBaseline).
struct ChangeReference {
  bool whole_run = false;
  double samples_per_s = 0;
  double Of(const Prediction& p) const {
    return (whole_run ? p.whole_run_samples_per_s : p.samples_per_s) / samples_per_s - 1;
  }
};

double MeasuredReference(const LoaderProfile& p) {
  return p.steady_state_measured ? p.measured_samples_per_s : p.measured_whole_run_samples_per_s;
}

bool ChangeNeedsBaseline(const LoaderProfile& p) { return !(MeasuredReference(p) > 0); }

ChangeReference ReferenceFor(const LoaderProfile& p, const Prediction& baseline) {
  const bool whole_run = !p.steady_state_measured;
  return {whole_run, !ChangeNeedsBaseline(p) ? MeasuredReference(p)
                     : whole_run             ? baseline.whole_run_samples_per_s
                                             : baseline.samples_per_s};
}
}  // namespace

Result<std::vector<WhatIfRow>> PredictWorkerCounts(const LoaderProfile& profile_in, const Machine& profiled,
                                                   const std::vector<int32_t>& workers) {
  LoaderProfile profile = profile_in;
  if (profile.profiled_cores <= 0) profile.profiled_cores = profile.RankCores(profiled.cores);
  Prediction base;
  if (ChangeNeedsBaseline(profile)) {  // whatif's reference without a measured one: its baseline
    Scenario baseline;
    baseline.machine = profiled;
    baseline.background_threads = Scenario::kAsProfiled;
    auto predicted = Predict(profile, baseline);
    if (!predicted.ok()) return predicted.error();
    base = *predicted;
  }
  const ChangeReference reference = ReferenceFor(profile, base);
  std::vector<WhatIfRow> rows;
  const double background = ScenarioBackground(profile, Sweep{}.background_threads);  // fitted once
  for (int32_t w : workers) {
    Scenario s = Base(profiled, Sweep{});
    s.background_threads = background;
    s.workers = w;
    auto r = Predict(profile, s);
    if (!r.ok()) return r.error();
    rows.push_back({s, false, *r, std::nullopt, reference.Of(*r), std::nullopt, std::nullopt});
  }
  return rows;
}

Result<WhatIfResult> WhatIf(const LoaderProfile& profile_in, const Machine& profiled, const Sweep& sweep) {
  LoaderProfile profile = profile_in;
  if (profile.profiled_cores <= 0) profile.profiled_cores = profile.RankCores(profiled.cores);
  WhatIfResult out;
  out.loader = profile.name;
  out.profiled = profiled;
  out.inputs = Inputs(profile, profiled);
  Scenario baseline;
  baseline.machine = profiled;
  baseline.background_threads = Scenario::kAsProfiled;  // the run as it was, to measure the model's error
  auto base = Predict(profile, baseline);
  if (!base.ok()) return base.error();
  out.baseline = *base;
  out.profiled_background_threads = base->background_threads;
  out.profiled_steal_fraction = profile.steal_fraction;
  const double assumed = ScenarioBackground(profile, sweep.background_threads);
  out.scenario_background_threads = assumed;
  out.inputs.push_back(fmt::format(
      "outside load in the profiled run: {:.2f} busy threads (the larger of: fitted to the run-queue delay the job's "
      "own threads do not explain{}; the other processes' busy cores by /proc/stat, {}{}, counted from {:g}); the "
      "scenarios assume {}",
      out.profiled_background_threads,
      profile.profiled_in_cpu_quota ? " (not fitted under a CPU quota: its throttling is run-queue delay of another shape)" : "",
      !profile.outside_busy_measured ? std::string("not sampled")
      : profile.outside_steal_cores >= 0.005
          ? fmt::format("{:.2f}, {:.2f} of it steal (the hypervisor running other guests: this machine's host, not its "
                        "processes)",
                        profile.outside_busy_cores, profile.outside_steal_cores)
          : fmt::format("{:.2f}", profile.outside_busy_cores),
      profile.unusable_cores > 0 && profile.outside_busy_measured
          ? fmt::format(" less the {:g} the job could not use (its CPU quota or affinity): {:.2f}",
                        profile.unusable_cores, profile.OutsideCompetingCores())
          : std::string(),
      kOutsideCoresSeen,
      sweep.background_threads == Scenario::kAsProfiled ? "the same (--background-load profiled)"
      : sweep.background_threads >= 0 ? fmt::format("{:g} (--background-load)", sweep.background_threads)
      : assumed > 0 ? fmt::format("{:.2f}: other processes used under {:g} of the cores the job could use, so the delay is the job's own (its "
                                  "threads' wake-ups and placement, beyond the simulation's), kept (--background-load "
                                  "0 takes it away)",
                                  assumed, kOutsideCoresSeen)
                    : "0 (other processes' load taken away; --background-load profiled keeps it)"));
  if (profile.sibling_busy_threads > 0)
    out.inputs.push_back(fmt::format(
        "the workers of the loaders iterated with this one ({}): {:.2f} busy threads during its epochs (measured, /proc "
        "sampler): the job's own, part of the fit above and kept in every scenario",
        profile.zipped_with, profile.sibling_busy_threads));
  // Beside another process's busy threads, a thread waiting for the GIL wakes
  // at once and wins the fetch's brief releases (a torch op's dispatch): the
  // probe and the sending threads find it free where a quiet machine holds it.
  if (out.profiled_background_threads >= kOutsideCoresSeen && profile.fetch_holds_gil.measured &&
      profile.fetch_holds_gil.value == 0 && assumed < out.profiled_background_threads)
    out.inputs.push_back(fmt::format(
        "other processes kept {:.2f} threads busy in the profiled run, and beside such load a thread waiting for the "
        "GIL wins a fetch's brief releases of it: the fetch was found to let the GIL go, which a quiet machine may "
        "not confirm (workers would then deliver less than predicted; docs/model.md \"A fetch that holds the GIL\")",
        out.profiled_background_threads));
  // torch's _reset of a persistent iterator waits for every worker to
  // acknowledge it, after the indices queued before it: the previous
  // iterator's prefetched batches are made, received and dropped at each
  // iter(). The simulation starts each epoch with the workers idle.
  if (profile.iterator_per_step && profile.workers > 0)
    out.inputs.push_back(fmt::format(
        "the loop creates an iterator per step (next(iter(loader))?: {} iterators of one batch each): every row keeps "
        "that; with persistent workers each iter() resets the one iterator, which first waits for the workers to make "
        "the {} batches the step before left queued (dropped), which the model leaves out: its whole run with "
        "persistent_workers=True is an upper bound; one iterator (it = iter(loader), next(it)) gives the steady state",
        profile.epochs, profile.workers * profile.prefetch_factor));
  out.steady_state_measured = profile.steady_state_measured;
  out.shared_memory_timed = profile.shm_collate_cpu_s_per_batch.measured && profile.batch_touch_cpu_s_per_batch.measured;
  if (profile.measured_samples_per_s > 0) {
    out.measured_samples_per_s = profile.measured_samples_per_s;
    out.model_error = (out.baseline.samples_per_s - out.measured_samples_per_s) / out.measured_samples_per_s;
  }
  if (profile.measured_whole_run_samples_per_s > 0) {
    out.measured_whole_run_samples_per_s = profile.measured_whole_run_samples_per_s;
    out.whole_run_model_error = (out.baseline.whole_run_samples_per_s - out.measured_whole_run_samples_per_s) /
                                out.measured_whole_run_samples_per_s;
  }
  const ChangeReference reference = ReferenceFor(profile, out.baseline);
  if (!sweep.move_to_workers.empty()) {  // the scenarios only: the baseline is the run as it was
    auto moved = MoveStagesToWorkers(profile, sweep.move_to_workers);
    if (!moved.ok()) return moved.error();
    for (const std::string& name : sweep.move_to_workers)
      for (const auto& m : profile.main_stages)
        if (m.name == name)
          out.inputs.push_back(fmt::format(
              "--move-to-workers {}: {} a batch ({} CPU) leaves the step for every batch's fetch in the workers "
              "(assumed to let the GIL go, as torch and PIL calls do: pure-Python code holds its worker's GIL and "
              "delays each batch's send, not foreseen; docs/model.md)",
              name,
              FormatSeconds(m.wall_s_per_batch), FormatSeconds(m.cpu_s_per_batch)));
    profile = std::move(*moved);
  }

  const std::vector<double> cores = sweep.cores.empty() ? std::vector<double>{profiled.cores} : sweep.cores;
  const std::vector<int32_t> workers = sweep.workers.empty() ? std::vector<int32_t>{-1} : sweep.workers;
  const std::vector<int64_t> caches = sweep.cache_bytes.empty() ? std::vector<int64_t>{-1} : sweep.cache_bytes;
  if (cores.size() > 1) out.swept = "cores";
  else if (workers.size() > 1) out.swept = "workers";
  else if (caches.size() > 1) out.swept = "cache";

  for (double c : cores)
    for (int32_t w : workers)
      for (int64_t cache : caches) {
        Scenario s = Base(profiled, sweep);
        s.background_threads = assumed;  // fitted on the profile as run, before any --move-to-workers
        s.machine.cores = c;
        s.cache_bytes = cache;
        s.workers = w == kAutoWorkers ? static_cast<int32_t>(AutoWorkers(profile, s)) : w;
        auto r = Predict(profile, s);
        if (!r.ok()) return r.error();
        WhatIfRow row{s, w == kAutoWorkers, *r, std::nullopt, reference.Of(*r), std::nullopt, std::nullopt};
        if (cache >= 0) {  // a cache changes the cold first epoch against the steady state
          Scenario other = s;
          other.first_epoch = !s.first_epoch;
          auto o = Predict(profile, other);
          if (o.ok() && std::abs(o->samples_per_s - r->samples_per_s) > 0.01 * r->samples_per_s) row.other_epoch = *o;
        }
        if (sweep.step_threads < 0) row.fewer_step_threads = PredictWithFewerStepThreads(profile, s, *r);
        if (cache >= 0) row.without_miss_cpu = PredictMissCpuFloor(profile, s, *r);
        const uint32_t depth = s.prefetch_factor > 0 ? static_cast<uint32_t>(s.prefetch_factor) : profile.prefetch_factor;
        row.unpriced_serial_handoff = r->workers > 0 && depth == 1 && !(profile.workers > 0 && profile.prefetch_factor == 1);
        out.rows.push_back(std::move(row));
      }
  return out;
}

}  // namespace stallprof::model
