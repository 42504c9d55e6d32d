#include "profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>
#include <set>

#include "common/units.h"
#include "internal.h"
#include "model/whatif.h"

namespace stallprof::analysis {

namespace internal {

// The workers' CPU of the loaders iterated with `loader` (zip), in cores over
// its epochs (/proc sampler): the job's own load beside it
// (LoaderProfile::sibling_busy_threads).
double SiblingBusyThreads(const Trace& trace, const TraceAnalysis& analysis, const LoaderAnalysis& loader) {
  constexpr double kNs = 1e-9;
  std::set<uint32_t> pids;
  for (const auto& z : loader.zipped_loaders)
    for (const auto& other : analysis.loaders)
      if (&other != &loader && other.pid == loader.pid && other.config.name == z.name)
        for (const auto& w : other.workers)
          if (!w.in_main_process) pids.insert(w.pid);
  if (pids.empty()) return 0;
  double cpu_s = 0, wall_s = 0;
  for (const auto& e : loader.epochs) {
    if (e.end_ns <= e.start_ns) continue;
    wall_s += (e.end_ns - e.start_ns) * kNs;
    for (const auto& series : trace.process_series)
      if (pids.count(series.pid) && series.t_ns.size() >= 2 && series.cpu_ns.size() == series.t_ns.size())
        cpu_s += (SeriesAt(series.t_ns, series.cpu_ns, e.end_ns) - SeriesAt(series.t_ns, series.cpu_ns, e.start_ns)) * kNs;
  }
  return wall_s > 0 ? std::max(0.0, cpu_s / wall_s) : 0;
}

// The loader's process's resident bytes as its epochs began (the mean over
// them; /proc sampler), where a fork of its workers would copy its page
// tables; 0 when not sampled.
double MainRssAtEpochStarts(const Trace& trace, const LoaderAnalysis& loader) {
  for (const auto& series : trace.process_series) {
    if (series.pid != loader.pid || series.t_ns.empty() || series.rss_bytes.size() != series.t_ns.size()) continue;
    double sum = 0;
    uint32_t n = 0;
    for (const auto& e : loader.epochs) {
      sum += SeriesAt(series.t_ns, series.rss_bytes, e.start_ns);
      n++;
    }
    return n > 0 ? sum / n : 0;
  }
  return 0;
}

namespace {
// What a profile takes from a loader's iterations, in one pass over them (a
// trace has hundreds of thousands: four passes were 3% of analyze).
struct IterationSums {
  double handoff = 0;                // steady waits at next() calls that found their batch ready
  double receive = 0;                // steady main-thread CPU in next(), less its run-queue delay
  uint64_t received = 0;             // the steady iterations with a receive
  std::vector<double> warmup_extra;  // per epoch: its warm-up iterations' compute beyond `steady_compute`
  std::vector<size_t> epoch_firsts;  // the iterations that opened an epoch
};

IterationSums SumIterations(const LoaderAnalysis& loader, double steady_compute) {
  IterationSums sums;
  sums.warmup_extra.assign(loader.epochs.size(), 0.0);
  for (size_t i = 0; i < loader.iterations.size(); ++i) {
    const Iteration& it = loader.iterations[i];
    if (it.index_in_epoch == 0) sums.epoch_firsts.push_back(i);
    if (it.steady || loader.steady_fallback) {
      if (it.batch_deliverable) sums.handoff += it.wait_s;
      if (it.receive_s >= 0) {
        sums.receive += it.receive_s - it.receive_delay_s;
        sums.received++;
      }
    } else if (!it.compute_unknown && it.epoch < sums.warmup_extra.size()) {
      sums.warmup_extra[it.epoch] += it.compute_s - steady_compute;
    }
  }
  return sums;
}
}  // namespace

model::LoaderProfile BuildProfile(const Trace& trace, const TraceAnalysis& analysis, const LoaderAnalysis& loader,
                                  ProfileFits fits) {
  constexpr double kNs = 1e-9;
  constexpr double kMiB = 1048576.0;
  model::LoaderProfile p;
  p.name = loader.config.name;
  p.outside_busy_cores = analysis.system.outside_busy_cores;
  p.outside_busy_measured = analysis.system.outside_busy_measured;
  p.outside_steal_cores = analysis.system.outside_steal_cores;
  p.unusable_cores = analysis.system.unusable_cores;
  p.steal_fraction = analysis.system.steal_measured ? analysis.system.steal_fraction : -1;
  p.batch_size = loader.config.batch_size;
  if (loader.SteppedIterations() > 0 && loader.samples > 0) p.samples_per_batch = loader.samples / loader.SteppedIterations();
  p.workers = loader.config.num_workers;
  p.prefetch_factor = loader.config.prefetch_factor;
  p.batches = loader.compute_steady.count;
  // Weighed as the run had full and partial batches, as samples_per_batch is.
  p.compute_s_per_batch = loader.steady_compute_per_batch_s;
  if (loader.prefetch_thread.HandsOn()) p.prefetch_thread_tid = loader.prefetch_thread.tid;
  for (const auto& z : loader.zipped_loaders) {
    if (loader.compute_steady.count > 0) p.zipped_s_per_batch += ZippedSeconds(loader, z, false) / loader.compute_steady.count;
    p.zipped_with += (p.zipped_with.empty() ? "'" : ", '") + z.name + "'";
  }
  // Every epoch ended within the warm-up (an evaluation loader of a few
  // batches): its mean step holds each epoch's first batch, which the steady
  // simulation leaves out (an eval loader of 4 batches: predicted 64873
  // samples/s against 19672 measured so), so no steady figure is compared;
  // the whole run is.
  p.steady_state_measured = !loader.steady_fallback;
  p.measured_samples_per_s = loader.steady_fallback ? 0 : loader.steady_samples_per_s;
  p.measured_wait_s_per_batch = loader.wait_steady.mean;
  const IterationSums sums = SumIterations(loader, p.compute_s_per_batch);
  // Waits at next() calls that found a batch ready: the main process
  // receiving it, as the wall time it took (with the scheduler's latency to
  // run the main thread, which fluid sharing does not see: taking the delay
  // out made the compute case +6%).
  p.handoff_s_per_batch = loader.compute_steady.count ? sums.handoff / loader.compute_steady.count : 0;
  // The DataLoader's own code in a next() without workers, outside the fetch
  // span (the sampler, the iterator's bookkeeping): without workers the
  // account's handoff line; with them timed after the run, since the main
  // thread's next() receives too and the profile cannot tell the two apart
  // (a 2-worker profile of fast_loader.py otherwise planned its run without
  // workers 10-20% fast on 2026-12-04).
  const auto& steady = loader.account_steady;
  if (loader.config.num_workers == 0 && steady.available && steady.batches > 0)
    p.next_overhead_s_per_batch = {steady.Seconds(analysis::Cause::kHandoff) / static_cast<double>(steady.batches), true,
                                   "the account's handoff line"};
  else if (loader.config.num_workers > 0 && loader.config.ipc_next_own_cpu_s >= 0)
    p.next_overhead_s_per_batch = {loader.config.ipc_next_own_cpu_s, true,
                                   "timed after the run (stallprof.calibrate_ipc): a RandomSampler's next() without "
                                   "workers at this loader's batch size, its fetch left out"};
  else if (loader.config.num_workers > 0)
    p.next_overhead_s_per_batch.source =
        "not timed after the run (--no-handoff-timing, or a trace from before 2026-12-05): taken as 0, so a "
        "prediction without workers is that much high";
  else
    p.next_overhead_s_per_batch.source = "not measured (no steady state to account): taken as 0";
  // The main thread's own CPU in next() (with workers: receiving; without, it
  // fetches too). Its run-queue delay there is left out: the simulation
  // predicts delay from the cores it shares, and carrying the profile's along
  // charged it twice (a cold profile under memory pressure: 1.40 ms of CPU
  // and 0.86 ms of delay a batch, and the all-cached prediction -15%).
  if (loader.config.num_workers > 0) p.receive_s_per_batch = sums.received ? sums.receive / sums.received : 0;
  // Ranks on this host with this loader: their processes are in this trace.
  std::set<int32_t> ranks;
  for (const auto& other : analysis.loaders)
    if (other.rank >= 0 && other.config.name == loader.config.name) ranks.insert(other.rank);
  p.ranks_on_host = std::max<uint32_t>(1, static_cast<uint32_t>(ranks.size()));
  p.profiled_cores = p.RankCores(MeasuredMachine(trace).cores);
  p.profiled_in_cpu_quota = CpuQuotaLimits(trace.header);

  uint64_t batches = 0, batches_with_cpu = 0;
  double cpu = 0, delay = 0, io = 0, produce = 0;
  std::set<uint32_t> worker_pids;
  for (const auto& w : loader.workers) {
    batches += w.batches;
    produce += w.produce_s;
    if (w.cpu_s > 0 || w.delay_s > 0) {
      batches_with_cpu += w.batches;
      cpu += w.cpu_s;
      delay += w.delay_s;
      io += w.io_s;
    }
    if (!w.in_main_process) worker_pids.insert(w.pid);
  }
  // A warm worker's batch: each worker's set-up is paid apart.
  const auto& setup = loader.worker_setup;
  p.worker_setup_by_fetch = setup.by_fetch;
  if (batches_with_cpu) {
    p.cpu_s_per_batch = std::max(0.0, cpu - setup.CpuS() * setup.starts) / batches_with_cpu;
    p.delay_s_per_batch = delay / batches_with_cpu;
    p.io_s_per_batch = std::max(0.0, io - (setup.WallS() - setup.CpuS()) * setup.starts) / batches_with_cpu;
    p.io_storage_share = loader.fetch_off_cpu_storage_share;
  }
  p.produce_s_per_batch = batches ? std::max(0.0, produce - setup.WallS() * setup.starts) / batches : 0;
  const LoaderConfig& c = loader.config;
  p.batch_bytes = static_cast<double>(c.batch_bytes);
  // One worker handing over this loader's first batch's tensors, timed after
  // the run: all of it for a loader without workers, the shared memory's
  // costs for one with them (collect::RecordHandoffTimings).
  const std::string timed = fmt::format(
      "timed after the run (stallprof.calibrate_ipc): one worker handing over {} batches of this loader's {} "
      "tensors, {}, {}",
      c.ipc_batches, c.batch_tensors, FormatBytes(static_cast<double>(c.batch_bytes)),
      c.ipc_pace_s > 0 ? fmt::format("one every {} as in the job", FormatSeconds(c.ipc_pace_s)) : "back to back");
  if (p.workers == 0 && c.ipc_loop_cpu_s >= 0) {
    // No worker ran: what one costs was timed after the run on the same batch.
    p.worker_loop_cpu_s_per_batch = {c.ipc_loop_cpu_s, true, timed};
    p.receive_s_per_batch = c.ipc_receive_cpu_s;
    p.receive_source = timed;
    // Its wall time for a batch already made is what a profile with workers
    // measures as its handoff: beyond the CPU, the main thread waits for the
    // worker process to send each tensor's file descriptor (a thread there
    // must wake and run). PyTorch's text classification tutorial (3 small
    // tensors a batch): 1.7-1.9 ms of CPU, 2.5-2.7 ms of wall time; the CPU
    // alone predicted 1 and 2 workers at +24% to +30%, the wall time at +12%
    // to +19%, measured +12% and +7.5% (medians; docs/validation.md).
    if (c.ipc_receive_wall_s >= 0) p.handoff_s_per_batch = c.ipc_receive_wall_s;
  } else if (p.workers == 0)
    p.worker_loop_cpu_s_per_batch = {0, false, "not measured (no workers in the profile): taken as 0"};
  else if (loader.worker_cpu_outside_fetch_s >= 0)
    p.worker_loop_cpu_s_per_batch = {loader.worker_cpu_outside_fetch_s, true,
                                     "the worker processes' CPU (/proc sampler) less their fetch spans', per batch"};
  else
    p.worker_loop_cpu_s_per_batch = {0, false, "not measured (no worker sampled over 8 of its fetches, or fetch spans without CPU): taken as 0"};
  double collate = 0;  // the collate stage's CPU per batch, in the main thread or the workers
  for (const auto& st : loader.stages)
    if (st.name == names::kCollate && st.count > 0) collate = st.cpu_s / static_cast<double>(st.count);
  if (c.ipc_collate_shm_cpu_s >= 0 && p.workers > 0) {
    // The workers' fetches collated into shared memory: a loop without them
    // collates into its heap for the timing's extra less, never more than
    // the workers' collate itself.
    const double extra = collate > 0 ? std::min(collate, c.ipc_collate_shm_cpu_s) : c.ipc_collate_shm_cpu_s;
    p.shm_collate_cpu_s_per_batch = {
        extra, true, extra < c.ipc_collate_shm_cpu_s
                         ? fmt::format("{}; the timing's {}, at most the workers' collate", timed,
                                       FormatSeconds(c.ipc_collate_shm_cpu_s))
                         : timed};
  } else if (c.ipc_collate_shm_cpu_s >= 0) {
    // The timing's heap collate reused warm memory, but the job's own may
    // have faulted its batch in afresh each time (glibc returning large
    // blocks to the kernel): those faults are in the profile's fetches
    // already, and a worker's collate into shared memory faults instead of
    // them, not beside them. They are at most the job's collate CPU, its
    // fetches' kernel time and the faulting of the batch's pages (the step's
    // read of a received batch, timed). Seen: 18.4 MiB batches, the job's
    // collate 24 ms, the timing's extra 57 ms, a worker's collate 32.5 ms
    // over the job's.
    double heap_faults = std::min(collate, std::max(0.0, c.ipc_touch_cpu_s));
    if (loader.fetch_kernel_share >= 0) heap_faults = std::min(heap_faults, loader.fetch_kernel_share * p.cpu_s_per_batch);
    const double extra = std::max(0.0, c.ipc_collate_shm_cpu_s - heap_faults);
    p.shm_collate_cpu_s_per_batch = {
        extra, true,
        heap_faults > 0 ? fmt::format("{}; the timing's {} less {} the job's own collate spent faulting in its heap "
                                      "(at most its collate CPU, its fetches' kernel time and the timed faulting of "
                                      "a batch's pages), which a worker's replaces",
                                      timed, FormatSeconds(c.ipc_collate_shm_cpu_s), FormatSeconds(heap_faults))
                        : timed};
  }
  // The step reads the received batch and, once its loop variable takes the
  // next one, frees it (unmapping the segments where a loop without workers
  // frees heap memory): both on the step's side of next(). Timed inside the
  // receive before, the free waited there for a fetch that held the GIL. A
  // profile with workers paid it in its steps, a scenario without takes it out.
  if (c.ipc_touch_cpu_s >= 0)
    p.batch_touch_cpu_s_per_batch = {
        c.ipc_touch_cpu_s + std::max(0.0, c.ipc_free_cpu_s), true,
        c.ipc_free_cpu_s >= 0 ? fmt::format("{}; reading it {}, freeing it {}", timed,
                                            FormatSeconds(c.ipc_touch_cpu_s), FormatSeconds(c.ipc_free_cpu_s))
                              : timed};
  // The loop's serial part: with 10 gaps or more seen while a worker held the
  // next index (a streaming text loader, one worker: 201 us, of 398 us of
  // loop CPU; the model without it 17% fast on its own baseline).
  // A gap is the worker's loop code, or its wait for the GIL its sending
  // thread holds while pickling: CPU outside the fetches, all of it in the
  // loop CPU above. What a gap measures beyond that is the worker waiting
  // for a core, the profile's own contention, which the simulation predicts
  // for a scenario's CPU work (fetches, sending), not for its gaps: the gap
  // is capped at the loop CPU. (The MLP of
  // validate_model.sh, 2 workers and the step on 2 cores: medians of 0.71
  // to 2.70 ms over profiles, against 0.52-0.58 ms of loop CPU, predicted 1
  // worker at 20k-42k samples/s where it ran 44k.)
  constexpr uint64_t kMinGaps = 10;
  if (p.workers > 0 && loader.prefetch.serial_gaps >= kMinGaps) {
    const double loop_cpu = p.worker_loop_cpu_s_per_batch.value;
    const bool capped = p.worker_loop_cpu_s_per_batch.measured && loader.prefetch.serial_gap_s > loop_cpu;
    p.worker_gap_s_per_batch = {
        capped ? loop_cpu : loader.prefetch.serial_gap_s, true,
        fmt::format("median of {} gaps between a worker's fetches while it held the next index{}",
                    loader.prefetch.serial_gaps,
                    capped ? fmt::format(", {}, capped at the loop CPU above: the rest is the worker waiting for a "
                                         "core in the profile",
                                         FormatSeconds(loader.prefetch.serial_gap_s))
                           : "")};
  } else
    p.worker_gap_s_per_batch = {0, false,
                                p.workers > 0 ? fmt::format("not measured ({} gaps seen while a worker held the next "
                                                            "index, {} needed): taken as 0",
                                                            loader.prefetch.serial_gaps, kMinGaps)
                                              : "not measured (no workers in the profile): taken as 0"};
  // Whether the fetch holds the GIL its worker's sending thread needs: seen
  // in when batches arrived (workers), else asked by the hook's probe thread
  // (in the workers, or in the main process without them).
  constexpr uint64_t kMinSends = PrefetchStats::kMinSends;
  const uint64_t sends = loader.prefetch.sends_held + loader.prefetch.sends_free;
  const uint64_t probes = loader.prefetch.gil_probes_held + loader.prefetch.gil_probes_free;
  if (loader.prefetch.SendsTold())
    p.fetch_holds_gil = {loader.prefetch.SendsHeld() ? 1.0 : 0.0, true,
                         fmt::format("{} of {} next() calls made while their batch's worker ran a later fetch found the "
                                     "batch held there until that fetch ended; held where two in three are",
                                     loader.prefetch.sends_held, sends)};
  else if (probes >= kMinSends)
    p.fetch_holds_gil = {2 * loader.prefetch.gil_probes_held >= probes ? 1.0 : 0.0, true,
                         fmt::format("a thread asking for the GIL as a fetch began waited half the rest of the fetch "
                                     "(or of the switch interval) in {} of {} probes{}",
                                     loader.prefetch.gil_probes_held, probes,
                                     p.workers > 0 ? fmt::format(" in the workers ({} next() calls told by when their "
                                                                 "batch came, {} needed)",
                                                                 sends, kMinSends)
                                                   : "")};
  else
    p.fetch_holds_gil = {0, false,
                         p.workers > 0 ? fmt::format("not measured ({} next() calls while a worker ran a later fetch "
                                                     "and {} GIL probes in the workers, {} of either needed): the "
                                                     "sending thread taken to run beside the fetch",
                                                     sends, probes, kMinSends)
                                       : fmt::format("not measured ({} GIL probes of the fetches, {} needed: the hook "
                                                     "probes only fetches of 1 ms or more, and not through its ctypes "
                                                     "fallback): the sending thread taken to run beside the fetch",
                                                     probes, kMinSends)};
  // Where the fetch holds the GIL, a batch is ready to receive when the fetch
  // holding it ends, and its worker waits for the receive to get its next
  // index: those receives are handoff too (the simulation counts them alike).
  // A 1-worker text tokenizer: 0.87 ms from the fetch's end to next()'s
  // return against 0.52 ms of the main thread's CPU (the fd round trips with
  // the worker's sharer thread), and left out its baseline erred +19%.
  if (p.workers > 0 && p.fetch_holds_gil.value > 0.5 && loader.compute_steady.count > 0)
    p.handoff_s_per_batch += loader.prefetch.held_handoff_s / static_cast<double>(loader.compute_steady.count);
  p.batch_costs = loader.batch_costs;
  p.batch_cost_steady = loader.batch_cost_steady;
  p.intra_op_threads = c.intra_op_threads;

  // The step's own CPU: cores the main process used during compute, times the steady compute.
  if (loader.main_step_compute_s > 0) {
    const double cores_used = loader.main_step_cpu_s / loader.main_step_compute_s;
    p.compute_cpu_s_per_batch = {cores_used * p.compute_s_per_batch, true,
                                 "main process CPU during the steps (/proc sampler) less its CPU in next()"};
    p.compute_delay_s_per_batch = loader.main_step_delay_s / loader.main_step_compute_s * p.compute_s_per_batch;
    if (loader.main_thread_step_cpu_s >= 0) {
      const double per_batch = p.compute_s_per_batch / loader.main_step_compute_s;
      p.compute_main_thread_cpu_s_per_batch = loader.main_thread_step_cpu_s * per_batch;
      p.compute_main_thread_delay_s_per_batch = std::max(0.0, loader.main_thread_step_delay_s) * per_batch;
      p.compute_cpu_s_per_batch.source +=
          fmt::format("; of it the main thread's {} and run-queue delay {} (its schedstat), the other threads' {} "
                      "beside it",
                      FormatSeconds(p.compute_main_thread_cpu_s_per_batch),
                      FormatSeconds(p.compute_main_thread_delay_s_per_batch),
                      FormatSeconds(std::max(0.0, p.compute_cpu_s_per_batch.value - p.compute_main_thread_cpu_s_per_batch)));
    }
  } else {
    p.compute_cpu_s_per_batch = {0, false,
                                 "not measured (no sampler series of the main process, or wait spans without CPU): "
                                 "the step is taken as off CPU"};
  }

  // Epochs: start-up = the first step of each epoch beyond one batch's
  // production and receipt (what a running pipeline would have taken), or
  // until the last of its workers began its first fetch when that is later.
  p.epochs = static_cast<uint32_t>(loader.epochs.size());
  p.persistent_workers = loader.config.persistent_workers;
  p.iterator_kept = !loader.config.iterator_kept_by.empty();
  p.objects = static_cast<uint32_t>(std::max<size_t>(1, loader.scopes.size()));
  p.iterator_per_step = loader.IteratorPerStep();
  if (!loader.epochs.empty()) {
    p.batches_per_epoch = static_cast<double>(loader.SteppedIterations()) / loader.epochs.size();
    p.samples_per_epoch = loader.samples / static_cast<double>(loader.epochs.size());
    const double one_batch = p.cpu_s_per_batch + p.io_s_per_batch + p.delay_s_per_batch;
    double later = 0, serial = 0, started = 0;
    uint32_t later_count = 0;
    p.sampler_s_per_epoch = loader.SamplerFirstPerEpochS();
    for (const size_t first_of_epoch : sums.epoch_firsts) {
      const Iteration& it = loader.iterations[first_of_epoch];
      // From the __iter__ call to the first batch's return (iterator creation
      // and the first wait), less the sampler's first draw (paid apart).
      const auto& epoch = loader.epochs[it.epoch];
      const double first = (it.return_ns - std::min(it.return_ns, epoch.start_ns)) * 1e-9 - epoch.sampler_first_s;
      // Workers that started in this epoch: their first fetches paid their set-up (simulated apart).
      const double setup_s = epoch.workers_ready_ns > epoch.start_ns && !p.worker_setup_by_fetch.empty()
                                 ? p.worker_setup_by_fetch[0].Seconds()
                                 : 0;
      double startup = std::max(0.0, first - one_batch - setup_s - std::max(0.0, static_cast<double>(it.receive_s)));
      // Workers that start one after another: the later batches wait for the last.
      if (epoch.workers_ready_ns > epoch.start_ns) {
        startup = std::max(startup, (epoch.workers_ready_ns - epoch.start_ns) * 1e-9 - epoch.sampler_first_s);
        // Workers started in this epoch: the part inside __iter__ was serial.
        serial += std::max(0.0, epoch.StartupInsideIterS() - epoch.sampler_first_s);
        started += startup;
      }
      if (it.epoch == 0) {
        p.startup_first_s = p.workers > 0 ? startup : 0;
      } else {
        later += p.workers > 0 ? startup : 0;
        later_count++;
      }
    }
    p.startup_later_s = later_count ? later / later_count : p.startup_first_s * (p.persistent_workers ? 0 : 1);
    if (p.workers > 0 && started > 0) p.startup_serial_share = std::clamp(serial / started, 0.0, 1.0);
    // The warm-up iterations' compute beyond the steady mean, per epoch
    // (none without a steady state: the mean is then the warm-up's own).
    const std::vector<double>& extra = sums.warmup_extra;
    p.warmup_extra_first_s = std::max(0.0, extra.front());
    if (extra.size() > 1) {
      p.warmup_extra_later_s = std::max(0.0, std::accumulate(extra.begin() + 1, extra.end(), 0.0) / (extra.size() - 1));
      p.fork_refault_later_s = std::min(p.warmup_extra_later_s, loader.fork_refault_s_per_epoch);
    }
  }
  p.stream_worker_batches = loader.stream_worker_batches;
  // Non-persistent workers are joined by every epoch's last next().
  if (p.workers > 0 && !p.persistent_workers) {
    double shutdown = 0;
    uint32_t shutdowns = 0;
    for (const auto& epoch : loader.epochs)
      if (epoch.has_end_call && epoch.end_ns > epoch.end_call_ns) {
        shutdown += (epoch.end_ns - epoch.end_call_ns) * 1e-9;
        shutdowns++;
      }
    if (shutdowns > 0) p.shutdown_s_per_worker = shutdown / shutdowns / p.workers;
  }
  // No worker started in the run: the handoff timing after it started one,
  // forked from a fresh process (smaller than the job's: a floor).
  if (p.workers == 0 && loader.config.ipc_startup_s >= 0 && loader.config.multiprocessing_context == "fork") {
    p.startup_first_s = p.startup_later_s = loader.config.ipc_startup_s;
    p.startup_timed = true;
    p.startup_timed_method = "fork";
    p.worker_init_fn = loader.config.worker_init_fn;
    // A fork copies the page tables of the whole process: the job's, larger
    // than the timing's, forks slower by its extra resident MiB at the cost a
    // MiB timed there. The forks run one after another in __iter__, so that
    // part grows with the workers (startup_serial_share).
    const double job_rss = MainRssAtEpochStarts(trace, loader);
    if (job_rss > 0 && loader.config.ipc_rss_bytes >= 0 && loader.config.ipc_fork_s_per_mib >= 0) {
      p.job_rss_bytes = job_rss;
      p.timing_rss_bytes = loader.config.ipc_rss_bytes;
      p.fork_s_per_mib = loader.config.ipc_fork_s_per_mib;
      const double extra_mib = std::max(0.0, job_rss - loader.config.ipc_rss_bytes) / kMiB;
      p.startup_fork_extra_s = extra_mib * p.fork_s_per_mib;
      p.startup_first_s += p.startup_fork_extra_s;
      p.startup_later_s += p.startup_fork_extra_s;
      if (p.startup_first_s > 0)
        p.startup_serial_share = std::clamp(job_rss / kMiB * p.fork_s_per_mib / p.startup_first_s, 0.0, 1.0);
      if (loader.config.ipc_exit_s_per_mib >= 0 && loader.config.ipc_shutdown_s >= 0)
        p.shutdown_exit_extra_s = extra_mib * loader.config.ipc_exit_s_per_mib;
    }
    // Its join, which a non-persistent loader pays in each epoch's last next().
    if (loader.config.ipc_shutdown_s >= 0) p.shutdown_s_per_worker = loader.config.ipc_shutdown_s;
  }
  // A loader that would spawn its workers (or fork them from a fork server):
  // the timing started one that way, a fresh interpreter importing torch, about
  // 0.7 s where a fork takes 0.02 (the DDP tutorial's mp.spawn ranks start
  // their loaders' workers so). The workers import side by side over the
  // cores (no serial part: a floor, as the dataset's pickle, written to each in
  // turn, is not in it), and exit so: their join is paid per wave of them.
  const std::string& context = loader.config.multiprocessing_context;
  if (p.workers == 0 && loader.config.ipc_context_startup_s >= 0 && (context == "spawn" || context == "forkserver")) {
    p.startup_first_s = p.startup_later_s = loader.config.ipc_context_startup_s;
    p.startup_timed = true;
    p.startup_timed_method = context;
    p.worker_init_fn = loader.config.worker_init_fn;
    p.startup_serial_share = 0;
    if (loader.config.ipc_context_shutdown_s >= 0) p.shutdown_exit_extra_s = loader.config.ipc_context_shutdown_s;
  }
  if (loader.active_s > 0) p.measured_whole_run_samples_per_s = loader.samples / loader.active_s;
  p.produce_p99_s = loader.produce.p99;
  if (p.workers == 0 && !worker_pids.empty()) p.workers = static_cast<uint32_t>(worker_pids.size());

  // The main process's own CPU use over the loader's active time.
  uint64_t from = loader.epochs.empty() ? 0 : loader.epochs.front().start_ns;
  uint64_t to = loader.iterations.empty() ? 0 : loader.iterations.back().return_ns;
  double worker_rss_sum = 0;
  uint32_t worker_rss_count = 0;
  double worker_read_bytes = 0;
  for (const auto& series : trace.process_series) {
    if (series.t_ns.size() < 2) continue;
    if (series.pid == loader.pid && !series.rss_bytes.empty())
      p.main_rss_bytes = static_cast<double>(*std::max_element(series.rss_bytes.begin(), series.rss_bytes.end()));
    if (series.pid == loader.pid && to > from && series.cpu_ns.size() == series.t_ns.size()) {
      double cpu_s = (SeriesAt(series.t_ns, series.cpu_ns, to) - SeriesAt(series.t_ns, series.cpu_ns, from)) * kNs;
      double span = std::min(to, series.t_ns.back()) > std::max(from, series.t_ns.front())
                        ? (std::min(to, series.t_ns.back()) - std::max(from, series.t_ns.front())) * kNs
                        : 0;
      if (span > 0) p.main_cpu_cores = cpu_s / span;
    }
    if (worker_pids.count(series.pid)) {
      if (!series.rss_bytes.empty()) {
        worker_rss_sum += *std::max_element(series.rss_bytes.begin(), series.rss_bytes.end());
        worker_rss_count++;
      }
      if (series.read_bytes.size() >= 2) worker_read_bytes += static_cast<double>(series.read_bytes.back()) - series.read_bytes.front();
    }
  }
  if (worker_rss_count) p.worker_rss_bytes = worker_rss_sum / worker_rss_count;
  p.sibling_busy_threads = SiblingBusyThreads(trace, analysis, loader);

  double samples = batches > 0 ? batches * loader.config.batch_size : loader.samples;
  p.dataset_bytes = loader.config.dataset_bytes;
  p.dataset_items = loader.config.dataset_len;
  if (p.dataset_items == 0) {
    // An IterableDataset has no len: its items are the samples an epoch run
    // to StopIteration delivered (a tar-shard stream: 512 of them).
    double most = 0;
    for (const auto& e : loader.epochs)
      if (e.has_end_call && !e.ended_by_deletion && e.unstepped == 0) most = std::max(most, e.samples);
    p.dataset_items = static_cast<uint64_t>(std::llround(most));
    p.dataset_items_counted = p.dataset_items > 0;
  }
  if (p.dataset_bytes > 0 && p.dataset_items > 0) {
    p.bytes_per_sample = {static_cast<double>(p.dataset_bytes) / p.dataset_items, true, "dataset_bytes / dataset_len"};
  } else {
    // A dataset that opens its files by index lists none: its size is
    // estimated from what its fetches read through read syscalls (the hook's
    // read_calls spans count the fetching thread alone, during the fetch).
    // Worker-process rchar is not used: it counts the index queue's pipe reads too.
    // The hook's own /proc reads add ~150 bytes a fetch: below kMinReadBytes
    // a fetch read no files. Each thread's first fetch is left out where
    // there are later ones: a fresh worker imports modules on first use
    // (PIL's image plugins: 400 KiB of .pyc files), and with non-persistent
    // workers making two batches an epoch those were half the fetches. The
    // median, so that a few later fetches importing modules do not make a
    // dataset of files either.
    constexpr double kMinReadBytes = 4096;
    const bool later_fetches = std::any_of(loader.fetch_reads.begin(), loader.fetch_reads.end(),
                                           [](const model::ReadSample& r) { return !r.first_of_thread; });
    std::vector<double> call_bytes;
    for (const auto& r : loader.fetch_reads)
      if (!later_fetches || !r.first_of_thread) call_bytes.push_back(r.call_bytes);
    std::sort(call_bytes.begin(), call_bytes.end());
    const double per_fetch = Quantile(call_bytes, 0.5);
    const double per_sample = per_fetch / p.batch_size;
    // The files the dataset reads from, as the hook found them, are its size
    // where they hold at least what a fetch reads: a small file it names
    // beside the ones it reads (labels) is not the dataset. Read calls
    // re-read an HDF5 file's metadata on every open: 51 MiB were estimated
    // at 786 MiB from them.
    if (loader.config.held_bytes > 0 && loader.config.held_bytes >= per_fetch && p.dataset_items > 0) {
      p.dataset_bytes = loader.config.held_bytes;
      p.bytes_per_sample = {static_cast<double>(p.dataset_bytes) / p.dataset_items, true,
                            fmt::format("the size of the {} the dataset reads from ({}: found by the hook in its "
                                        "attributes) / {}",
                                        loader.config.held_files == 1
                                            ? std::string("file")
                                            : fmt::format("{} files", loader.config.held_files),
                                        loader.config.held_kinds,
                                        p.dataset_items_counted ? "the samples of an epoch" : "dataset_len")};
    } else if (per_fetch >= kMinReadBytes && p.dataset_items > 0) {
      p.bytes_per_sample = {per_sample, false,
                            "estimated: the bytes each fetch read through read syscalls (the hook's read spans) per "
                            "sample, the median over " + std::to_string(call_bytes.size()) + " fetches" +
                                (later_fetches && call_bytes.size() < loader.fetch_reads.size()
                                     ? " (each thread's first left out: a fresh worker imports modules)"
                                     : "")};
      p.dataset_bytes = static_cast<uint64_t>(per_sample * static_cast<double>(p.dataset_items));
      p.dataset_bytes_estimated = true;
    } else if (const double per_sample_read = loader.complete_epoch_device_bytes_per_sample;
               per_sample_read * p.batch_size >= kMinReadBytes && p.dataset_items > 0) {
      // No read calls, but a whole epoch's fetches read from the device: a
      // memory-mapped dataset (numpy memmap, Arrow, LMDB) faulting its pages in.
      p.dataset_bytes = static_cast<uint64_t>(per_sample_read * static_cast<double>(p.dataset_items));
      p.dataset_bytes_estimated = true;
      p.bytes_per_sample = {per_sample_read, false,
                            "estimated: the bytes one complete epoch's fetches read from the device (page faults of a "
                            "memory-mapped dataset: no read calls), per sample; a lower bound if the page cache "
                            "already held part of it"};
    } else {
      // Reads from the device without read calls, short of a whole epoch: a
      // memory-mapped dataset profiled over part of an epoch.
      double device_bytes = 0;
      for (const auto& r : loader.fetch_reads) device_bytes += r.storage_bytes;
      p.bytes_per_sample = {0, false,
                            device_bytes > 0
                                ? "unknown: the loader reported no dataset_bytes, its fetches read no files through "
                                  "read calls, and no epoch was fetched whole, whose reads from the device would "
                                  "size a memory-mapped dataset: profile a whole epoch"
                                : "unknown: the loader reported no dataset_bytes and its fetches read no files"};
    }
  }

  // Storage bandwidth: the fastest disk read rate the sampler saw.
  const auto& sys = trace.system;
  double peak = 0;
  for (size_t i = 1; i < sys.t_ns.size() && i < sys.disk_read_bytes.size(); ++i) {
    double dt = (sys.t_ns[i] - sys.t_ns[i - 1]) * kNs;
    if (dt > 0 && sys.disk_read_bytes[i] >= sys.disk_read_bytes[i - 1])
      peak = std::max(peak, (sys.disk_read_bytes[i] - sys.disk_read_bytes[i - 1]) / dt);
  }
  // Workers that read from the device more than one at a time on average
  // shared its bandwidth: what they got is the rate to plan with, not the
  // disk's burst peak (a throttled or networked volume, another job's reads).
  if (loader.storage_reads_in_flight >= 1 && loader.storage_read_rate > 0)
    p.storage_bandwidth = {loader.storage_read_rate, true,
                           fmt::format("the workers' own reads from the device over the steady state, {:.1f} in flight "
                                       "on average: the bandwidth they shared (peak disk read rate {:.1f} MiB/s)",
                                       loader.storage_reads_in_flight, peak / (1 << 20))};
  else if (loader.config.num_workers == 0 && loader.storage_reads_in_flight >= 0.5 && loader.storage_read_rate > 0 &&
           (peak <= 0 || loader.storage_read_rate / loader.storage_reads_in_flight < peak))
    // The main process waited on the device most of the steady time: the rate
    // it got while waiting is what the device gave, not a burst's peak (a
    // throttled volume: 67 MiB/s got against a 158 MiB/s peak, and 4 workers
    // ran no faster than none where the peak predicted 3.7x).
    p.storage_bandwidth = {
        loader.storage_read_rate / loader.storage_reads_in_flight, true,
        fmt::format("the main process's own reads from the device over the steady state, waiting on it {:.0f}% of the "
                    "time: what one reader at a time got (peak disk read rate {:.1f} MiB/s); a device that serves "
                    "reads in parallel gives workers more (`--disk-bw` to plan with more)",
                    loader.storage_reads_in_flight * 100, peak / (1 << 20))};
  else if (peak > 0)
    p.storage_bandwidth = {
        peak, true,
        loader.config.num_workers > 0 && loader.storage_reads_in_flight < 0.5
            ? fmt::format("peak disk read rate (/proc/diskstats); a lower bound: the workers waited on the device {:.0f}% "
                          "of the steady time, so it may serve more",
                          loader.storage_reads_in_flight * 100)
            : "peak disk read rate (/proc/diskstats)"};
  else
    p.storage_bandwidth = {0, false, "not measured: no disk reads during the run (data was in the page cache)"};

  // The hook records "sequential" / "random" or the sampler's type name
  // ("SequentialSampler" from a C client or an older hook).
  std::string sampler = loader.config.sampler;
  std::transform(sampler.begin(), sampler.end(), sampler.begin(), [](unsigned char c) { return std::tolower(c); });
  // An IterableDataset streams in its own order, taken as the same each
  // epoch (files read one after another): a page cache smaller than the
  // stream keeps none of it. A stream that shuffles its shards fares better.
  // A shuffle repeated every epoch is a cycle too: each item comes back
  // after every other one.
  p.order = sampler.find("sequential") != std::string::npos || loader.config.Iterable() ||
                    loader.config.sampler_order_repeats
                ? model::AccessOrder::kSequential
                : model::AccessOrder::kRandom;
  if (loader.config.sampler_order_repeats)
    p.order_note = "the same shuffle every epoch: the sampler's set_epoch was not called, so a page cache smaller than "
                   "the dataset keeps none of it";

  // Share of the bytes the loader needed that came from the page cache; only
  // known for file-backed datasets (otherwise 0: io is taken as storage misses).
  double needed = p.bytes_per_sample.measured ? p.bytes_per_sample.value * samples : 0;
  double from_disk = worker_read_bytes;
  if (from_disk <= 0 && sys.t_ns.size() >= 2 && to > from)
    from_disk = SeriesAt(sys.t_ns, sys.disk_read_bytes, to) - SeriesAt(sys.t_ns, sys.disk_read_bytes, from);
  // The hook's read spans count each fetch's own storage reads, exactly.
  double storage = 0;
  for (const auto& r : loader.fetch_reads) storage += r.storage_bytes;
  if (!loader.fetch_reads.empty()) {
    p.storage_bytes_per_batch = storage / loader.fetch_reads.size();
    if (p.bytes_per_sample.value > 0) {
      needed = p.bytes_per_sample.value * p.batch_size * loader.fetch_reads.size();
      from_disk = storage;
    }
  }
  if (needed > 0) p.cold_hit_ratio = std::clamp(1.0 - from_disk / needed, 0.0, 1.0);
  // The device bytes a missed byte cost: readahead beyond the items' bytes
  // (SQLite's 4 KiB page reads of a row: 226 KiB from the device a sample for
  // 77 KiB of read calls), which the storage bandwidth must carry.
  if (p.bytes_per_sample.value > 0 && p.storage_bytes_per_batch > 0 && p.batch_size > 0 && p.cold_hit_ratio < 0.95) {
    const double missed = p.bytes_per_sample.value * p.batch_size * (1 - p.cold_hit_ratio);
    const double per_missed = p.storage_bytes_per_batch / missed;
    if (per_missed > 1.1) p.device_bytes_per_missed_byte = std::min(per_missed, 64.0);
  }
  if (auto fit = model::FitReadCost(loader.fetch_reads); fit.ok()) {
    char r2[16];
    std::snprintf(r2, sizeof r2, "%.2f", fit->r2);
    p.cpu_s_per_storage_byte = {fit->cpu_s_per_storage_byte, true,
                                "least squares over " + std::to_string(fit->points) + " fetch spans, R^2 " + r2};
  } else if (auto estimate =
                 model::EstimateReadCostFromSystemTime(loader.fetch_reads, trace.header.page_cache_copy_ns_per_byte);
             estimate.ok() && storage > 0) {
    char copy[32];
    std::snprintf(copy, sizeof copy, "%.3f", trace.header.page_cache_copy_ns_per_byte);
    p.cpu_s_per_storage_byte = {*estimate, false,
                                "estimated: the fetches' system CPU time less a page-cache copy of the bytes they "
                                "read (" + std::string(copy) + " ns/byte, timed at start); not fitted because " +
                                    fit.error().message};
  } else {
    p.cpu_s_per_storage_byte = {0, false,
                                loader.fetch_reads.empty()
                                    ? "not recorded (no read spans: a kernel without per-thread io accounting, or "
                                      "an older hook): storage misses are taken to cost no worker CPU"
                                    : "not fitted, taken as 0: " + fit.error().message +
                                          (estimate.ok() ? "" : "; not estimated: " + estimate.error().message)};
  }

  for (const auto& st : loader.stages) {
    model::StageProfile sp;
    sp.name = st.name;
    sp.cpu_s_per_sample = samples > 0 ? st.cpu_s / samples : 0;
    sp.wall_s_per_sample = samples > 0 ? st.wall_s / samples : 0;
    p.stages.push_back(sp);
  }
  const double iterations = static_cast<double>(loader.iterations.size());
  for (const auto& st : loader.main_stages)
    if (iterations > 0) p.main_stages.push_back({st.name, st.cpu_s / iterations, st.wall_s / iterations});
  if (fits == ProfileFits::kMeasured) return p;
  p.main_receive_s = model::CalibrateMainReceive(p);
  // Last: these simulate the profiled configuration, calibrated receive
  // included; without its cores, a caller that sets them fits on use.
  if (p.profiled_cores > 0) p.delay_background_threads = model::FitDelayBackground(p);
  p.epoch_start_simulated_s = model::SimulateEpochStart(p);
  return p;
}

void PredictAdvisedWorkers(const Trace& trace, TraceAnalysis& analysis) {
  const model::Machine machine = MeasuredMachine(trace);
  const double cores = machine.cores;
  for (LoaderAnalysis& loader : analysis.loaders) {
    loader.worker_predictions.clear();
    const std::vector<int32_t> counts = WorkerCountsToPredict(loader, cores);
    if (counts.empty()) continue;
    auto rows = model::PredictWorkerCounts(BuildProfile(trace, analysis, loader), machine, counts);
    if (!rows.ok()) continue;  // the advice stays as it was, without figures
    // Without a steady state the change compares whole runs: so does the figure.
    for (const model::WhatIfRow& row : *rows) {
      const double whole = row.prediction.whole_run_samples_per_s;
      const bool whole_known = whole > 0 && loader.samples_per_s > 0;
      loader.worker_predictions.push_back({static_cast<uint32_t>(row.scenario.workers),
                                           loader.steady_fallback ? whole : row.prediction.samples_per_s, row.change,
                                           model::ToString(row.prediction.bottleneck), row.prediction.handoff_s,
                                           row.prediction.waiting_threads, whole_known ? whole : 0,
                                           whole_known ? whole / loader.samples_per_s - 1 : 0});
    }
    WriteAdvice(loader, cores);
  }
}

}  // namespace internal

namespace {
Result<std::vector<model::LoaderProfile>> Measure(const Trace& trace, const std::vector<StageTotals>& folded,
                                                  const ProfileOptions& options) {
  AnalysisOptions analysis_options;
  analysis_options.warmup = options.warmup;
  analysis_options.predict_advice = false;  // the model's inputs only
  auto analysis = internal::AnalyzeCore(trace, analysis_options, folded);
  if (!analysis.ok()) return analysis.error();
  std::vector<model::LoaderProfile> profiles;
  uint64_t iterations = 0;
  for (const auto& loader : analysis->loaders) {
    iterations += loader.iterations.size();
    if (loader.compute_steady.count == 0) continue;
    profiles.push_back(internal::BuildProfile(trace, *analysis, loader));
    profiles.back().warmup = options.warmup;
  }
  const std::string where = trace.path.empty() ? std::string("the trace") : trace.path;
  // A step is known from one next() to the next on the same iterator, or to the
  // StopIteration: iterators left after their only batch (next(iter(loader))
  // in the loop) have none.
  if (profiles.empty() && iterations > 0)
    return UnsupportedError(fmt::format("no DataLoader in {} has a step of known length: each of its {} iterations was the "
                                        "last its iterator delivered before the loop left it (next(iter(loader)) in the "
                                        "loop?); `stallprof analyze` says more",
                                        where, iterations));
  if (profiles.empty())
    return UnsupportedError("no DataLoader in " + where + " completed an iteration, so nothing can be measured; record a longer run");
  return profiles;
}
}  // namespace

Result<std::vector<model::LoaderProfile>> MeasureProfiles(const Trace& trace, const ProfileOptions& options) {
  return Measure(trace, {}, options);
}

Result<std::vector<model::LoaderProfile>> MeasureProfiles(const TraceDigest& digest, const ProfileOptions& options) {
  return Measure(digest.trace, digest.stages, options);
}

model::Machine MeasuredMachine(const Trace& trace) {
  model::Machine m;
  // A CPU quota (a container's) below the cores: its threads share that much CPU time.
  const double cores = UsableCores(trace.header);
  m.cores = cores > 0 ? cores : 1;
  m.cpu_limited = CpuQuotaLimits(trace.header);
  // A memory cgroup's limit (a container's) is the memory the job and its page cache share.
  m.memory_bytes = MemoryBytes(trace.header);
  m.memory_limited = m.memory_bytes < trace.header.memory_bytes;
  // Cache the dataset could use: the larger of the page cache at start and the
  // memory available at the first sampler tick (available includes reclaimable cache).
  uint64_t available = trace.system.mem_available_bytes.empty() ? 0 : trace.system.mem_available_bytes.front();
  m.page_cache_bytes = std::max(trace.header.page_cache_bytes, available);
  if (m.memory_limited) m.page_cache_bytes = std::min(m.page_cache_bytes, m.memory_bytes);
  m.page_reclaim = trace.header.page_reclaim;
  return m;
}

}  // namespace stallprof::analysis

namespace stallprof::analysis {

Result<ProfiledRun> LoadProfiledRun(const std::string& path, const ProfileOptions& options, const std::string& only) {
  auto digest = LoadForAnalysis(path);
  if (!digest.ok()) return digest.error();
  auto profiles = MeasureProfiles(*digest, options);
  if (!profiles.ok()) return profiles.error();
  ProfiledRun run;
  run.machine = MeasuredMachine(digest->trace);
  std::string names;
  const bool all = only == "all";
  for (auto& p : *profiles) {
    names += (names.empty() ? "" : ", ") + p.name;
    if (all || (only.empty() ? p.name == "train" : p.name == only)) run.loaders.push_back(p);
    else run.left_out.push_back(p.name);
  }
  if (!only.empty() && run.loaders.empty())
    return UsageError("--loader " + only + ": no such loader in " + path + ", it has: " + names + " (or all)");
  if (run.loaders.empty()) {
    run.loaders = std::move(*profiles);
    run.left_out.clear();
  }
  return run;
}

}  // namespace stallprof::analysis
