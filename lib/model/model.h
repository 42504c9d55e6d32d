// The throughput model (DESIGN.md "The model"). One model serves analyze (the
// DS-Analyzer fetch/prep split), whatif and recommend, so they never disagree.
// It knows nothing of protobuf or /proc: analysis measures a LoaderProfile from
// the trace, the model predicts from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/huge_pages.h"
#include "common/result.h"
#include "model/simulate.h"

namespace stallprof::model {

enum class AccessOrder { kRandom, kSequential };
// kPageCache: Linux's page cache (its active and inactive lists, refaults
// activated: docs/model.md "Cache hit ratio"); kLru: a plain LRU cache;
// kStatic: a fixed subset kept.
enum class CachePolicy { kPageCache, kLru, kStatic };
// kHandoff: the main process receiving batches from the workers (IPC,
// unpickling) costs more per step than computing: neither more workers nor
// faster storage helps; fewer, larger or cheaper-to-transfer batches do.
// kFetch: the workers' off-CPU time with reads from the device (or the
// device's bandwidth); kBlocking: off-CPU time without them (sleeps, network,
// locks): analyze's "other blocking", never called storage.
enum class Bottleneck { kCompute, kPrep, kFetch, kHandoff, kBlocking };

// Stall fractions that make a loader input-bound (the TensorFlow input-pipeline
// analyzer's thresholds): analyze's verdict and the model's bottleneck agree on them.
inline constexpr double kModeratelyInputBound = 0.05;
inline constexpr double kHighlyInputBound = 0.20;

const char* ToString(Bottleneck b);  // "compute", "cpu prep", "storage", "handoff", "blocking"

// A measured quantity or an assumption the user should know about.
struct Input {
  double value = 0;
  bool measured = false;  // false: assumed default or user override
  std::string source;     // how it was obtained, e.g. "fetch spans", "--disk-bw", "default"
};

// One stage of the input pipeline (Plumber): a named span kind in the workers.
struct StageProfile {
  std::string name;
  double cpu_s_per_sample = 0;   // CPU seconds per sample
  double wall_s_per_sample = 0;  // wall seconds per sample
  double output_bytes_per_sample = 0;  // size of what the stage produces, 0 = unknown
  bool random = false;           // output depends on a random transform (never cache after it)
};

// A user's stage the training loop ran on the main thread between next()
// calls (analysis LoaderAnalysis::main_stages): part of compute.
struct MainStageProfile {
  std::string name;
  double cpu_s_per_batch = 0;
  double wall_s_per_batch = 0;
};

// Everything the model needs about one DataLoader, measured from a trace.
struct LoaderProfile {
  std::string name;
  double batch_size = 1;         // as configured (or the mean a batch sampler gave)
  // The mean samples a batch carried over the run, what the per-batch costs
  // average over: below batch_size by each epoch's partial last batch. 0 =
  // batch_size. The rates the model predicts use it (SamplesPerBatch).
  double samples_per_batch = 0;
  double SamplesPerBatch() const { return samples_per_batch > 0 ? samples_per_batch : batch_size; }
  uint32_t workers = 0;          // num_workers; 0 = the main process fetches
  uint32_t prefetch_factor = 2;
  uint64_t batches = 0;          // steady-state batches measured
  double compute_s_per_batch = 0;   // mean(step - wait), steady state
  // The step's CPU over its time (compute_cpu_s_per_batch, below): the cores it ran on.
  double StepCores() const { return compute_s_per_batch > 0 ? compute_cpu_s_per_batch.value / compute_s_per_batch : 0; }
  double cpu_s_per_batch = 0;       // mean worker thread CPU per batch (fetch spans)
  double delay_s_per_batch = 0;     // mean run-queue delay per batch
  double io_s_per_batch = 0;        // mean io_b = produce - cpu - delay
  // Of io_s_per_batch, the share spent on storage misses (a cache removes
  // it); the rest is blocking every fetch does (a sleep, a lock, a network
  // call), kept whatever the cache. 1: all of it, as profiles had it.
  double io_storage_share = 1;
  double produce_s_per_batch = 0;   // mean fetch span wall time
  double produce_p99_s = 0;         // p99 of the fetch span wall time
  double main_cpu_cores = 0;        // cores the main process itself keeps busy
  double outside_busy_cores = 0;    // other processes' CPU during the run, in cores (/proc/stat less the job's)
  bool outside_busy_measured = false;  // outside_busy_cores read from samples (else 0: unknown)
  double outside_steal_cores = -1;  // of outside_busy_cores, the hypervisor's steal (-1: not recorded)
  // The machine's cores the job could not use: outside its CPU affinity or
  // beyond its CPU quota (0 where it could use all). /proc/stat is the
  // machine's: a process busy on those takes nothing from the job (a 1-core
  // quota on 2 cores beside a busy loop read 1.00 threads of outside load
  // against its 1 core, and the baseline at -34.8%). OutsideCompetingCores.
  double unusable_cores = 0;
  // Whether the usable cores were a CPU quota's (a container's CPU limit):
  // its throttling is run-queue delay, and no outside load is fitted to it
  // (FitDelayBackground).
  bool profiled_in_cpu_quota = false;
  double OutsideCompetingCores() const { return std::max(0.0, outside_busy_cores - unusable_cores); }
  double steal_fraction = -1;       // of the machine's CPU time, steal, as analyze's System line (-1: not recorded)
  // The job's other loaders iterated with this one (zip): their workers' CPU
  // during this loader's epochs, in cores (/proc sampler). The job's own load,
  // not another process's: every scenario keeps it, as it changes this loader
  // alone (two zipped loaders of a worker each on 2 cores: the other's worker
  // fitted as 1.05 threads of outside load, taken away, and 2 workers
  // predicted +41.9% where they measured -5%).
  double sibling_busy_threads = 0;
  double worker_rss_bytes = 0;      // mean RSS of one worker
  double main_rss_bytes = 0;        // peak RSS of the loader's (training) process, 0 = not sampled
  double batch_bytes = 0;           // bytes of one collated batch in memory (prefetch buffers), 0 = unknown
  Input bytes_per_sample;           // storage bytes read per sample
  Input storage_bandwidth;          // bytes/s
  uint64_t dataset_bytes = 0;
  bool dataset_bytes_estimated = false;  // from the fetches' reads (bytes_per_sample's source), not the files' sizes
  uint64_t dataset_items = 0;
  // An IterableDataset has no len: dataset_items counted from an epoch run to StopIteration.
  bool dataset_items_counted = false;
  AccessOrder order = AccessOrder::kRandom;
  // Why the order is what it is where the sampler's kind does not say (a
  // shuffle repeated every epoch); empty otherwise.
  std::string order_note;
  std::vector<uint64_t> item_bytes;  // per item sizes when known (file-backed datasets)
  double cold_hit_ratio = 0;         // page-cache hit ratio seen in the measured run
  std::vector<StageProfile> stages;
  std::vector<MainStageProfile> main_stages;  // in compute_s_per_batch, most time first
  // Added by the model engineer (0 = unknown; the model then says so):
  bool steady_state_measured = true;     // false: no full batch past any epoch's warm-up
  uint32_t warmup = 5;                   // analyze's --warmup: iterations of each epoch before its steady state
  double measured_samples_per_s = 0;     // analyze's steady samples/s: the baseline whatif and recommend compare to
  // Other loaders iterated with this one (zip), whose next() calls are in its
  // compute: held as profiled (a scenario changes this loader alone).
  double zipped_s_per_batch = 0;
  std::string zipped_with;  // their names, "'slow'" or "'a', 'b'"
  // Iterated on a prefetch thread, not the training loop's (tid, 0 = the main
  // thread): its steps are that thread's hand-offs and the training step is
  // not measured, so nothing about it can be predicted (PrefetchThreadError).
  uint32_t prefetch_thread_tid = 0;
  double measured_wait_s_per_batch = 0;  // mean(wait), steady state
  double profiled_cores = 0;             // usable cores of the profiled machine (decides when the
                                         // measured run-queue delay applies as is); a rank's share
                                         // of them when ranks_on_host > 1
  // Ranks of the job on this host running this loader (torchrun's processes
  // on one machine, one per accelerator), 1 = none or one. They share the
  // host's cores, each running the same loop with the same settings: the
  // model gives each its share (host cores / ranks), so a scenario's --cores
  // is the host's and its --workers each rank's. Without this the other ranks'
  // threads read as outside load, which the default scenario then takes away
  // (2 ranks on 2 cores: 2 workers a rank predicted at +100%).
  uint32_t ranks_on_host = 1;
  double RankCores(double host_cores) const { return host_cores / std::max(1u, ranks_on_host); }
  double handoff_s_per_batch = 0;        // mean wait in next() while a batch was already ready: the
                                         // main process's serial cost of receiving a batch (IPC); without
                                         // workers, the timing's (stallprof.calibrate_ipc) receive wall time
  double receive_s_per_batch = 0;        // the main thread's CPU in next(), per batch (its delay: predicted)
  // The main loop's receive per batch, calibrated (CalibrateMainReceive) so
  // that the simulation of the profile reproduces its handoff; -1 = not
  // calibrated, the larger of handoff and receive.
  double main_receive_s = -1;
  // The outside load fitted to the profiled run's run-queue delay
  // (FitDelayBackground: a bisection of 26 simulations of the profiled
  // configuration), fitted once where the profile is built and shared by
  // every prediction from it (recommend made 16 such fits a loader, 89% of
  // its simulations); -1 = fitted on each use. Both fits here describe the
  // run as profiled: a copy changed for a scenario (MoveStagesToWorkers,
  // PredictMissCpuFloor) keeps them, as it keeps the delays they fit.
  double delay_background_threads = -1;
  std::string receive_source;            // how receive was obtained when not from wait spans (no workers)
                                         // (wait spans with CPU); measurable when batches were late, where
                                         // handoff is not. 0 = not recorded
  // CPU a worker spends per batch outside its fetch span (the worker loop:
  // taking indices, pickling and sending the batch): /proc sampler less the
  // fetch spans. Not measured (0) in a profile without workers.
  Input worker_loop_cpu_s_per_batch;
  // What a worker's batch costs beyond the same batch fetched in the main
  // thread, timed after the run. A worker collates into a fresh shared-memory
  // segment each batch (created, mapped, faulted in page by page) where the
  // main thread reuses its heap, and the step faults in the received
  // segment's pages at its first read and unmaps them when it lets the batch
  // go (beyond freeing a heap batch). A profile without workers adds them to
  // predict workers; one with workers paid them in its fetches and steps, and
  // takes them out to predict none.
  Input shm_collate_cpu_s_per_batch;  // worker CPU per batch, in its fetch
  Input batch_touch_cpu_s_per_batch;  // the step's CPU per batch
  double storage_bytes_per_batch = 0;    // bytes one fetch read from storage (the hook's read spans)
  double device_bytes_per_missed_byte = 1;  // readahead: device bytes a byte missed in the page cache cost
  Input cpu_s_per_storage_byte;          // worker CPU per byte read from storage (model::FitReadCost):
                                         // the part of cpu_s_per_batch a cache removes. 0 = not fitted
  // The simulation's inputs (docs/model.md "Simulation"):
  HugeVector<BatchCost> batch_costs;     // every fetch span's CPU and off-CPU seconds, in start order
  std::vector<bool> batch_cost_steady;   // per cost: it made a steady iteration's batch; empty = all count
  // What the step itself uses of the CPU: the main process's threads' CPU and
  // run-queue delay per batch during compute (sampler less the wait spans).
  // Not measured: the step is taken as off CPU (it never competes for cores).
  Input compute_cpu_s_per_batch;
  double compute_delay_s_per_batch = 0;
  // Of it, the main thread's own CPU and delay per batch from next()'s return
  // to the following call: the step's serial part; the rest is the process's
  // other threads beside it (queue feeders, a pin-memory thread, intra-op
  // threads). -1 = not measured apart (MeasuredStep then infers the step's
  // threads from its runnable time over its wall time).
  double compute_main_thread_cpu_s_per_batch = -1;
  double compute_main_thread_delay_s_per_batch = -1;
  // torch's intra-op threads (torch.get_num_threads()) at iterator creation,
  // 0 = not recorded. A step measured on more than one core with k > 1 of
  // them is parallel over barrier-synchronised threads (StepOf).
  uint32_t intra_op_threads = 0;
  // Epochs: the time from iterator creation to the first batch beyond one
  // batch's production (worker start-up: fork or spawn, imports,
  // worker_init_fn), in the first epoch and on average in the later ones.
  double startup_first_s = 0, startup_later_s = 0;
  // A fresh worker's set-up per fetch of its life (its first, second, ...),
  // beyond a warm worker's fetch: its one-time set-up in its first item
  // (lazy imports, files opened on first use), caches and copy-on-write
  // pages warming in the next (analysis::LoaderAnalysis::worker_setup).
  // batch_costs and the per-batch means leave it out (they are a warm
  // worker's), and the start-up above ends where the first fetch begins:
  // each epoch that starts workers simulates it on each worker's first
  // fetches, so more workers pay it more times, and persistent workers once.
  std::vector<BatchCost> worker_setup_by_fetch;
  double WorkerSetupSeconds() const { return SumSeconds(worker_setup_by_fetch); }
  // The share of that start-up the main thread spent inside __iter__ starting
  // the workers one after another: spawn and forkserver write each worker its
  // pickled dataset through a pipe, and past the pipe's 64 KiB the parent
  // waits until the child, having imported the main module, reads it. That
  // part grows with the workers whatever the cores (a 200 KB dataset, 2
  // cores: 0.93 s a worker, 3.74 s for 4); the rest runs in parallel.
  double startup_serial_share = 0;
  // The sampler's first draw of each epoch, on the main thread (mean per
  // epoch): its per-epoch work (a permutation, a sort by length) runs there
  // before any batch, in the iterator's creation with workers, in the first
  // next() without. Serial and the same whatever the workers or cores, so
  // the start-up above leaves it out and every scenario pays it per epoch.
  double sampler_s_per_epoch = 0;
  // The loop's own work at an epoch's start beyond its steady step, in the
  // first epoch and on average in the later ones: the warm-up iterations'
  // compute beyond the steady mean (a first step's lazy set-up, images or
  // logs written every N steps from step 0, an evaluation at step 0). The
  // whole-run prediction carries it into every scenario, net of what the
  // simulation itself puts there (model.cpp LoopWorkSeconds).
  double warmup_extra_first_s = 0, warmup_extra_later_s = 0;
  // What the simulation of the profiled configuration itself puts into an
  // epoch's start beyond its steady steps (SimulatedEpochStartSeconds: the
  // step sharing the cores with workers filling their queues), taken out of
  // the two above; simulated once where the profile is built (about 6
  // simulations, which every prediction repeated); -1 = simulated on use.
  double epoch_start_simulated_s = -1;
  // Of warmup_extra_later_s, what each later epoch's fork of its workers
  // cost the training process: its kernel CPU in those steps beyond its
  // steady rate (copy-on-write faults of the pages it writes). A scenario
  // pays it per later epoch that forks workers (none with persistent
  // workers or without workers); 0 = not measured or not forked.
  double fork_refault_later_s = 0;
  // An IterableDataset's uneven split over the workers: the batches each
  // worker made an epoch, most first (analysis::LoaderAnalysis); empty when
  // even. The last part of each epoch then runs on fewer workers (3 shards
  // over 2 workers: 30 and 15 batches).
  std::vector<double> stream_worker_batches;
  uint32_t epochs = 0;
  double batches_per_epoch = 0;          // mean iterations per epoch
  double samples_per_epoch = 0;          // mean samples per epoch (a partial last batch counted as such); 0 = batches x batch size
  bool persistent_workers = false;
  // One iterator for every epoch (analysis LoaderConfig::iterator_kept_by:
  // InfiniteDataLoader): the pipeline fills once, and a later epoch finds its
  // first batches queued. Its workers persist (persistent_workers is set).
  bool iterator_kept = false;
  // DataLoader objects the epochs ran in: more than one when the script
  // builds its loader anew (each epoch, each evaluation), and persistent
  // workers then restart with each object.
  uint32_t objects = 1;
  // The loop creates an iterator per step (next(iter(loader)),
  // analysis::LoaderAnalysis::IteratorPerStep): each "epoch" is a step, and
  // no DataLoader setting removes its start; one iterator does.
  bool iterator_per_step = false;
  // The DataLoader's own code in a next() without workers, outside the fetch
  // span (sampler, bookkeeping): main-thread CPU serial with the step when
  // the main process fetches. Profiled without workers, the account's
  // handoff line; with them, timed after the run (stallprof.calibrate_ipc),
  // since receiving hides it. Left out, a fast loader (batch 1, a 1.8 us
  // fetch, 3.8 us of this a batch) was predicted 48% faster than it ran.
  Input next_overhead_s_per_batch{0, false, "not timed: taken as 0"};
  // A worker's time between its fetches when it already had the next index:
  // its loop's serial part, measured as the median such gap in a profile
  // with workers (analysis PrefetchStats::serial_gap_s).
  Input worker_gap_s_per_batch;
  // 1: a worker's fetch holds the GIL while on CPU (pure-Python work), so its
  // sending thread sends a finished batch only when the next fetch gives the
  // GIL up (SimConfig::fetch_holds_gil); measured in a profile with workers
  // (analysis PrefetchStats::sends_held), or without them by the hook's GIL
  // probe (gil_probes_held). 0: it runs beside the fetch.
  Input fetch_holds_gil;
  // Profiled without workers: start-up is that of the worker `stallprof run`
  // started after the job to time its handoff (forked from a fresh process,
  // so a floor for the job's), not measured in the job.
  bool startup_timed = false;
  // How that worker was started: "fork" (or empty: from a fresh process, a floor by the
  // job's larger fork, below), "spawn" or "forkserver" (a fresh interpreter
  // importing torch: a floor by the job's own imports and its dataset's pickle).
  std::string startup_timed_method;
  // The loader's own worker_init_fn (its name; empty = none), which that
  // timing did not run: its start-up is a floor by that function's time too.
  std::string worker_init_fn;
  // Of that timed start-up: the job's process forks slower than the timing's
  // by its extra resident memory (a fork copies the page tables), priced at
  // the timing's fork cost a MiB; the start-up above includes it, and its
  // share of the start-up that is the job's whole fork
  // (startup_serial_share) grows with the workers. 0 / -1: not timed.
  double startup_fork_extra_s = 0;
  double job_rss_bytes = -1, timing_rss_bytes = -1, fork_s_per_mib = -1;
  // Likewise a worker's exit tears down the job's larger page tables: the
  // timed shutdown's growth (exit cost a MiB x the extra MiB). The workers
  // exit at once when told, so it is paid per wave of workers over the cores,
  // on top of shutdown_s_per_worker x workers.
  double shutdown_exit_extra_s = 0;
  // Seconds the next() that raised StopIteration took to shut the workers
  // down (joining them), per worker and epoch: measured on non-persistent
  // workers, which do it every epoch; 0 = not measured (persistent, or none).
  double shutdown_s_per_worker = 0;
  double measured_whole_run_samples_per_s = 0;  // samples / sum of epoch wall times (start-up included)
};

// The main process's serial cost per batch besides compute: the calibrated
// receive where the profile has one (main_receive_s), else the larger of the
// waits seen for ready batches (handoff) and its own CPU in next() (receive).
double MainReceiveSeconds(const LoaderProfile& profile);

// The receive CPU per batch, between the main thread's measured CPU in next()
// and the handoff, at which the simulation of the profiled configuration
// shows the handoff the profile measured. The handoff's wall time holds the
// main thread's run-queue delay and the worker sending the batch, which the
// simulation predicts from the cores they share: taken as CPU, a profile
// with more threads than cores (2 workers on 1 core) paid them twice, and its
// own baseline was predicted 25% slow.
double CalibrateMainReceive(const LoaderProfile& profile);

// What a batch costs only because a worker made it (LoaderProfile::shm_collate_cpu_s_per_batch,
// batch_touch_cpu_s_per_batch): the worker's collate into shared memory, and
// the step's first read and free of the received pages. Positive when the
// profile had no workers and the scenario has `workers`, negative (taken out
// of the profile's fetch and step) when the profile had workers and the
// scenario has none, 0 otherwise.
double ShmCollateSeconds(const LoaderProfile& profile, uint32_t workers);
double BatchTouchSeconds(const LoaderProfile& profile, uint32_t workers);
// A fetch's or a step's CPU as the profile measured it, with those costs
// added or taken out for `workers`: never below 0.
double FetchCpuWithWorkers(const LoaderProfile& profile, uint32_t workers, double fetch_cpu_s);
double StepCpuWithWorkers(const LoaderProfile& profile, uint32_t workers, double step_cpu_s);

// A worker count (or prefetch depth) predicted within this share of a larger
// one's throughput is as good: recommend and analyze's advice both name the
// fewest such workers, each costing a process's memory and start-up (they
// named 1 and 2 workers for one profile, predicted 0.5% apart).
inline constexpr double kAsGoodAsMore = 0.01;
// The fewest batches per worker recommend proposes: torch's default. At 1 a
// worker starts each batch only once the main loop has received the one
// before (its index is sent then), so every batch waits in turn for the
// index to wake the worker, the sending thread to pickle the batch and the
// main thread to wake for it, wake-ups the model does not price: PyTorch's
// text classification tutorial with 1 worker ran 14% slower at 1 than at 2
// (medians of two series of 6 alternated rounds, 2026-12-07; 17% with
// persistent workers too, recommend's proposal) where both were predicted
// alike. One batch fewer per worker saves little beside a worker's memory.
inline constexpr uint32_t kFewestPrefetchFactor = 2;

// A step runnable on at least this many threads, with torch's intra-op
// threads above one, is parallel over them.
inline constexpr double kParallelStepThreads = 1.5;

// Whether the profile's step is parallel over torch's intra-op threads
// (intra_op_threads > 1, runnable on kParallelStepThreads or more), and
// whether it ran so beside workers that oversubscribed the profiled cores.
// An uneven IterableDataset split (stream_worker_batches) for `workers`: the
// batches each worker's stream yields an epoch. With the profiled workers, as
// measured; with others, whole parts dealt in turn, the part the greatest
// common divisor of the measured counts (assumed); empty when the split is
// even or no parts tell.
std::vector<uint64_t> StreamQuota(const LoaderProfile& p, uint32_t workers);
// The part (batches) StreamQuota deals for other worker counts; 0 = none.
uint64_t StreamPartBatches(const LoaderProfile& p);

bool ParallelStep(const LoaderProfile& profile);
bool ParallelStepOversubscribed(const LoaderProfile& profile);

// The step's CPU work per batch as the simulation runs it (a parallel step's
// without its threads' spinning), after an accelerator `speedup`.
double StepWorkSeconds(const LoaderProfile& profile, double speedup);

// The step's wall time per batch with the cores to itself: the measured
// compute less the run-queue delay it waited for them (the simulation's step).
double UncontendedComputeSeconds(const LoaderProfile& profile);

// Worker CPU per batch at a miss ratio: the CPU storage misses cost the
// reading thread scales with the misses against the profiled run's.
double CpuSecondsAtMiss(const LoaderProfile& profile, double miss);

// The share of the profiled io (io_s_per_batch) still paid at a miss ratio:
// its storage part scales with the misses against the profiled run's, the
// rest stays. With no misses profiled all of it stays (it is not misses).
double IoScaleAtMiss(const LoaderProfile& profile, double miss);

// The machine the profile was taken on, or the one to predict for.
struct Machine {
  double cores = 1;              // usable cores
  bool cpu_limited = false;       // cores is a CPU cgroup's quota, below the cores the job could run on
  uint64_t memory_bytes = 0;
  bool memory_limited = false;    // memory_bytes is a memory cgroup's limit, below the machine's
  uint64_t page_cache_bytes = 0;  // cache available to the dataset
  std::string page_reclaim;       // the kernel's: "lists", "mglru", "" = not recorded (TraceHeader)
};

// Scenario::cache_bytes at or above this means "everything cached" (hit ratio
// 1) even when the dataset size is unknown: the DS-Analyzer fully-cached run.
inline constexpr int64_t kCacheAll = INT64_MAX / 2;

struct Scenario {
  Machine machine;
  int32_t workers = -1;           // -1: as profiled
  int32_t prefetch_factor = -1;   // -1: as profiled
  int32_t persistent_workers = -1;  // -1: as profiled, 0 or 1: persistent_workers=False/True
  int64_t cache_bytes = -1;       // -1: as profiled
  CachePolicy cache_policy = CachePolicy::kPageCache;
  double accel_speedup = 1;
  double storage_bandwidth = 0;   // 0: as profiled
  bool first_epoch = false;       // predict the cold first epoch instead of steady state
  // Runnable threads beside the job's, on average. kAsProfiled: the load
  // fitted from the profiled run's run-queue delay (BackgroundThreads);
  // kOthersAway: that less other processes' load (ScenarioBackground); a
  // number: that many (0: a machine to itself, with no delay the simulation
  // does not make).
  double background_threads = kAsProfiled;
  static constexpr double kAsProfiled = -1;
  static constexpr double kOthersAway = -2;
  // The step's intra-op threads (torch.set_num_threads): -1 as profiled.
  // Only for a parallel step profiled with its threads on cores of their own.
  int32_t step_threads = -1;
};

struct Prediction {
  double samples_per_s = 0;
  double step_s = 0;              // predicted time per batch
  double stall_fraction = 0;      // predicted wait / step
  double fetch_stall_fraction = 0;
  double prep_stall_fraction = 0;
  double handoff_stall_fraction = 0;  // the main loop receiving ready batches (analyze's handoff)
  double r_compute = 0, r_prep = 0, r_fetch = 0;  // samples/s
  double hit_ratio = 0;
  // False where the profile's fetches read no bytes (an in-memory dataset)
  // and the scenario sets no cache: there is no ratio, and hit_ratio's 0
  // would read as a cold cache.
  bool hit_ratio_known = true;
  Bottleneck bottleneck = Bottleneck::kCompute;
  // Added by the model engineer:
  double r_workers = 0;           // samples/s the workers can produce (Little's law, latency-bound io)
  uint32_t workers = 0;           // workers the scenario uses
  double compute_s = 0;           // compute per batch after --accel-speedup (T_ingest per batch)
  double prep_step_s = 0;         // predicted step with io = 0 (DS-Analyzer T_prep per batch)
  double io_s = 0;                // io per batch used (scaled by the miss ratio)
  double handoff_s = 0;           // main-process receive cost per batch (serial with compute)
  double cpu_s = 0;               // worker CPU per batch used (storage-miss CPU scaled by the miss ratio)
  double r_main = 0;              // samples/s the main loop allows: B / (compute + handoff)
  double delay_s = 0;             // run-queue delay per batch used
  double compute_step_s = 0;      // the step's wall time per batch beside the workers (stretched when it shares cores)
  double background_threads = 0;  // the outside load the prediction assumed (runnable threads)
  // A parallel step (LoaderProfile::intra_op_threads): its threads in the
  // scenario, and whether they and the workers want more than the cores
  // (the step then progresses as one thread: see docs/model.md). 0 = not parallel.
  uint32_t step_threads = 0;
  bool step_oversubscribed = false;
  // The job's threads that were runnable without a core, on average over the
  // simulation: processor sharing lets them progress at their share, but the
  // kernel schedules them in slices and per-CPU queues (a core left idle
  // while a thread waits on the other, a woken step run first), which it
  // does not model: from kTimeSlicedThreads on, whatif says the figure may be
  // off either way (scripts/bench_sched_idle.sh: +9% to +11% with 2 busy
  // workers beside a busy step on 2 cores, -7% with 3).
  double waiting_threads = 0;
  // The cores the job's threads kept busy, on average over the simulation.
  // CPU work measured with more (or fewer) cores busy than a scenario keeps
  // ran slower (or faster) than it will there, where busy cores slow each
  // other (shared caches, memory bandwidth, vCPUs on shared cores): whatif
  // says so from kBusyCoresApart on (docs/model.md "What the misses say").
  double busy_cores = 0;
  // Whole run: per epoch the start-up, the pipeline filling and the batches,
  // over the profiled epochs and batches per epoch.
  double whole_run_samples_per_s = 0;
  double startup_s_per_epoch = 0;  // mean over the epochs
  double loop_work_s_per_epoch = 0;  // the loop's own work at epoch starts (LoopWorkSeconds), mean over the epochs
  bool startup_measured = false;   // false: no workers in the profile to measure it from, nor a timing after it (taken as 0)
  double analytic_samples_per_s = 0;  // min(R_main, R_prep, R_workers, R_fetch): the sanity check of the simulation
};

// Threads waiting for a core on average from which whatif says how far the
// kernel's scheduling may move a figure: 0.1 is a tenth of the run with one
// thread time-sliced.
inline constexpr double kTimeSlicedThreads = 0.1;

// How the cores a scenario keeps busy compare with the profiled run's
// (Prediction::busy_cores), kBusyCoresApart or more apart: CPU per batch
// measured with fewer cores busy runs slower where more are, and the
// reverse, on hosts where busy cores slow each other (docs/model.md "What
// the misses say"). Fewer busy cores with more threads waiting for one (the
// same threads time-sliced on fewer cores) is not less busy.
inline constexpr double kBusyCoresApart = 0.5;
enum class BusyShift { kAsProfiled, kBusier, kLessBusy };
BusyShift CompareBusyCores(const Prediction& profiled, const Prediction& scenario);

// Runnable threads from outside the job in the profiled run: the background
// load with which the simulation of the profiled configuration shows the
// run-queue delay the job's threads measured (docs/model.md "Background
// load"), or the other processes' busy cores (outside_busy_cores) when they
// are kOutsideCoresSeen or more, whichever is larger. 0 when the job's own
// oversubscription explains the delay and nothing else ran.
inline constexpr double kOutsideCoresSeen = 0.5;
// The share of the machine's CPU time the hypervisor took (steal) from which
// a profile's costs are a slowed host's: a descheduled vCPU runs the job's
// threads late and wakes its sleepers late (a sleep-bound 2-worker stream
// measured 645-773 samples/s in such a stretch, 1100-1300 quiet).
inline constexpr double kStealSlowsHost = 0.05;
double BackgroundThreads(const LoaderProfile& profile);
// The outside load with which the simulation of the profiled configuration
// shows the run-queue delay its threads measured: a bisection, whatever
// delay_background_threads holds (BackgroundThreads takes that where set).
double FitDelayBackground(const LoaderProfile& profile);
// LoaderProfile::epoch_start_simulated_s for `profile` (-1 where a prediction
// would not simulate it: no warm-up work, no costs, no epochs).
double SimulateEpochStart(const LoaderProfile& profile);

// The fitted load a scenario keeps when it takes other processes' away
// (Scenario::kOthersAway, the default of whatif, recommend and analyze's
// advice): where /proc/stat saw other processes use under
// kOutsideCoresSeen, up to kOwnDelayThreadsMost of it, else 0. On a
// machine nothing else used, run-queue delay beyond the simulation's is the
// job's own: its threads' wake-ups and placement on this machine, which
// processor sharing does not have (2 spawned workers and the loop on 2
// cores: 0.29 threads; 4 workers with blocked fetches: 0.48; 4 workers
// beside a resnet step: 1.05); taking it away predicted the profiled
// configuration itself 4-14% faster than measured. More than a thread with
// nothing else busy is taken as partly another tenant's (the host's), so
// the scenarios keep one: a cap, not a cut-off, which had flipped the
// resnet loader's "as run" row from 0 to +6.2% at 1.05. An unmeasured
// /proc/stat cannot tell, and keeps none.
inline constexpr double kOwnDelayThreadsMost = 1.0;
// A step on at least this many cores (its CPU over its time) beside workers
// bounds the outside load fitted to the job's delay by its own delay
// (BackgroundThreads): a step that waited little for a core saw little load.
inline constexpr double kStepBoundsLoad = 0.5;
double OwnDelayThreads(const LoaderProfile& profile);
// The background a scenario runs with: `requested` threads, or the profile's
// load (kAsProfiled), or its own delay (kOthersAway).
double ScenarioBackground(const LoaderProfile& profile, double requested);

// Predicted throughput and stalls of `profile` under `scenario`. Fails when a
// needed measurement is missing (the message names it and how to record it).
Result<Prediction> Predict(const LoaderProfile& profile, const Scenario& scenario);

// `profile` with its main-thread stages `names` done in the workers instead
// (in the Dataset's transform or the collate_fn): their wall time leaves the
// step and their CPU the step's CPU; every batch's fetch gains their CPU, and
// the rest of their wall time off CPU. UsageError naming the loader's stages
// when one of `names` is not among them.
Result<LoaderProfile> MoveStagesToWorkers(const LoaderProfile& profile, const std::vector<std::string>& names);

// The intra-op threads that leave `workers` a core each: torch.set_num_threads(max(1, cores - workers)).
int32_t StepThreadsBesideWorkers(double cores, uint32_t workers);

// `scenario` (predicted as `prediction`) with a parallel step whose threads and
// the workers oversubscribe the cores, predicted again with the step on
// StepThreadsBesideWorkers; nullopt when it is not oversubscribed, that is no
// fewer threads, or Predict fails.
std::optional<Prediction> PredictWithFewerStepThreads(const LoaderProfile& profile, const Scenario& scenario,
                                                      const Prediction& prediction);

// Whether the CPU a storage miss costs was estimated from system time, not
// fitted over the fetch spans, and is not 0.
bool MissCpuIsEstimated(const LoaderProfile& profile);

// `scenario` (predicted as `prediction`) with storage misses costing no CPU
// beyond their I/O: the floor of a miss cost estimated from system time
// (EstimateReadCostFromSystemTime: it counts the fetches' other kernel work
// as miss CPU, but not how much slower their other CPU ran while they waited
// on storage, so it errs either way; a cached fetch never costs more CPU than
// a cold one, so the floor is a bound). nullopt
// when !MissCpuIsEstimated, or the floor is within 1% of
// `prediction`. Sets the profile's miss cost to 0 for the call and restores
// it: its batch costs are large to copy.
std::optional<Prediction> PredictMissCpuFloor(LoaderProfile& profile, const Scenario& scenario,
                                              const Prediction& prediction);

}  // namespace stallprof::model
