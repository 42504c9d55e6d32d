// Step and stall decomposition of a loaded trace (DESIGN.md "Definitions"):
// per loader its iterations, step/wait/compute statistics, the DS-Analyzer
// fetch/prep split, epochs, workers, Plumber stages; per trace the system
// series and data quality. The job view across processes and ranks is
// ranks.h.
// Pure computation over Trace: no I/O, no printing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/fit.h"
#include "model/model.h"
#include "model/simulate.h"
#include "trace/trace.h"

namespace stallprof::analysis {

struct AnalysisOptions {
  uint32_t warmup = 5;  // iterations skipped at the start of each epoch for "steady" figures
  // Predict the worker counts the advice points to with the model
  // (LoaderAnalysis::worker_predictions); off where only the model's inputs are wanted.
  bool predict_advice = true;
};

// TF input-pipeline analyzer classes: >= 20% highly, 5-20% moderately, < 5% not.
enum class Verdict { kNotInputBound, kModeratelyInputBound, kHighlyInputBound };
Verdict Classify(double stall_fraction);
const char* ToString(Verdict verdict);  // "not input-bound", "MODERATELY input-bound", "HIGHLY input-bound"

// Mean and percentiles (linear interpolation between order statistics) of a
// sample; all zero when empty.
struct Summary {
  uint64_t count = 0;
  double total = 0, mean = 0, p50 = 0, p90 = 0, p99 = 0, min = 0, max = 0;
};
Summary Summarize(std::vector<double> values);
// The same, sorting `values` in place (no copy of a million-row sample).
Summary SummarizeInPlace(std::span<double> values);
// The q-quantile (0..1) of `sorted` (ascending); 0 when empty.
double Quantile(std::span<const double> sorted, double q);

// One next() of a loader in its main process and the main loop's work on the
// batch it returned: step = wait + compute, from this next() call to the next
// one (for the last batch of an epoch, the next() that raised StopIteration).
struct Iteration {
  uint32_t epoch = 0;            // index into LoaderAnalysis::epochs
  uint32_t index_in_epoch = 0;   // 0 = first batch of the epoch
  // The batch's index in its iterator, as its fetch span records it: the
  // index in the epoch, except in an epoch of a kept iterator
  // (names::kKeptEpoch), where it goes on from the epoch before.
  uint32_t batch_index = 0;
  uint64_t wait_start_ns = 0;    // next() called
  uint64_t return_ns = 0;        // next() returned
  uint64_t compute_end_ns = 0;   // the following next() called; = return_ns when unknown
  double step_s = 0, wait_s = 0, compute_s = 0;
  bool steady = false;           // past the warm-up and before the drain (LoaderAnalysis::drain_iterations)
  // The loop was left after this batch without another next() (break, crash):
  // its compute is unknown, so it is left out of the step and compute figures.
  bool compute_unknown = false;
  // Seconds of other loaders' whole epochs inside this compute (a validation
  // pass every N steps): left out of compute_s and step_s (TakeOutNestedLoaders).
  float nested_s = 0;
  int32_t ready_batches = -1;    // batches produced by workers and not yet consumed when next() was called; -1 unknown
  // The batch this next() returns was finished by a worker that has gone idle
  // since (so it could hand it over) before next() was called: the wait is the
  // main process receiving it (handoff), not production. See docs/analysis.md.
  bool batch_deliverable = false;
  // The main thread's CPU time and run-queue delay inside this next() (wait
  // spans with CPU): its own work receiving the batch, measurable even when the
  // batch was late. -1 when the wait span carried no CPU time. A float, so the
  // struct stays 80 bytes (a trace can hold millions of iterations).
  float receive_s = -1;
  // Of it, the run-queue delay: the main thread runnable but not running in
  // next() (a busy machine), CPU contention rather than handoff. 0 when unknown.
  float receive_delay_s = 0;
};

struct EpochStats {
  uint32_t index = 0;            // epoch number as the hook reported it
  // start: DataLoader.__iter__ called (an old trace's epoch instant: iterator
  // created); end: the StopIteration next() returned, else the last return.
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t iterator_ready_ns = 0;  // __iter__ returned (= start_ns for an epoch instant)
  // When the iterator this epoch drew from was made: start_ns, or for an
  // epoch of an iterator kept from before (names::kKeptEpoch:
  // InfiniteDataLoader) that one's. Its batches' fetches carry the
  // iterator's running batch index (Iteration::batch_index).
  uint64_t iterator_start_ns = 0;
  // The last of the workers that started in this epoch began its first fetch
  // (every worker up); 0 when none started in it (persistent, or no workers).
  // Workers start one after another (spawn: each waits for the one before to
  // read its pickled dataset), so later batches wait for later workers.
  uint64_t workers_ready_ns = 0;
  // The part of the time to workers_ready_ns spent inside __iter__ (0 when no
  // worker started in the epoch): where spawn and forkserver start the
  // workers one after another.
  double StartupInsideIterS() const {
    if (workers_ready_ns <= start_ns) return 0;
    return static_cast<double>(std::clamp(iterator_ready_ns, start_ns, workers_ready_ns) - start_ns) * 1e-9;
  }
  // The sampler's first draw of the epoch (the hook's dataloader.sampler_first
  // span), where its per-epoch work runs: inside the first next() without
  // workers, inside the iterator's creation with them. 0 = not recorded.
  uint64_t sampler_first_ns = 0;
  double sampler_first_s = 0;
  bool has_end_call = false;       // the next() that raised StopIteration was recorded
  uint64_t end_call_ns = 0;        // ... and was called then (old traces: the raise)
  // Instead of StopIteration, the iterator's deletion shutting its workers
  // down ended the epoch (has_end_call set, end_call_ns the shutdown's call).
  bool ended_by_deletion = false;
  // An iterator per step (next(iter(loader)), LoaderAnalysis::IteratorPerStep):
  // the temporary iterator is deleted as next() returns, so its workers shut
  // down before the step, which runs from the shutdown's return to the next
  // iterator's creation; a loop reading a batch ahead (LoaderAnalysis::
  // reads_ahead) steps on its last batch after the StopIteration. That
  // time, in the last batch's compute and in the epoch's seconds; 0 otherwise.
  uint64_t step_after_end_ns = 0;
  uint64_t iterations = 0;
  // A batch taken as the loop left the epoch (for ... break without workers,
  // an iterator kept to the exit): its step is not in the epoch's time, so
  // it is not counted in `samples` (nor in the model's batches per epoch).
  uint64_t unstepped = 0;
  double samples = 0;             // the stepped batches' samples
  double seconds = 0;             // end - start, less nested_s
  double nested_s = 0;           // other loaders' whole epochs inside its computes (Iteration::nested_s)
  double samples_per_s = 0;
  double stall_fraction = 0;
  // Its whole-run account's storage line (before the hook's own cost is taken
  // out): where a warm page cache leaves it in the first epoch only.
  double storage_s = 0;
  bool has_system = false;       // the sampler covered it (the two fields below are meaningful)
  double page_cache_growth_bytes = 0;
  double disk_read_bytes = 0;
  // Means over its stepped iterations (0 without any): the step between
  // next() calls, and next()'s wait.
  double compute_per_batch_s = 0, wait_per_batch_s = 0;
  uint64_t Stepped() const { return iterations - std::min(unstepped, iterations); }
};

// The first epoch against the later ones together (a run of two epochs or
// more), and what differed where they differ by more than 10%: the page
// cache (the first read from the device what the later ones did not), the
// training step warming up (its steps slower), or the wait for data.
struct FirstEpochComparison {
  bool available = false;
  double first_samples_per_s = 0, later_samples_per_s = 0;
  std::string why;  // e.g. "later 2.30x faster: the steps took 24.8 ms a batch in the first epoch, 8.8 ms later (...)"
};

struct WorkerStats {
  uint32_t pid = 0, tid = 0;
  uint32_t thread = 0;           // index into Trace::threads
  bool in_main_process = false;  // num_workers = 0: the main process fetches
  uint64_t batches = 0;
  double window_s = 0;           // the epochs it was active in
  double produce_s = 0, cpu_s = 0, delay_s = 0, io_s = 0;
  double busy_fraction = 0, cpu_fraction = 0, io_fraction = 0, delay_fraction = 0;  // of window_s
  double mean_produce_s = 0;
  bool straggler = false;        // mean produce time over 4 batches or more > 1.5 x the other workers' median
};

// measured: every span's own CPU time; estimated: the sampled spans' CPU scaled
// by wall time to the spans the counter budget skipped (docs/analysis.md
// "Sampled counters"); attributed: no span measured, wall x the loader's fetch
// CPU/wall ratio.
enum class CpuSource { kMeasured, kAttributed, kEstimated };

// A Plumber stage: one named span kind in the loader's pipeline. Rates are
// in samples per second (every stage handles every sample once).
struct StageStats {
  std::string name;
  uint64_t count = 0;
  double wall_s = 0, cpu_s = 0;
  CpuSource cpu_source = CpuSource::kMeasured;
  uint32_t parallelism = 0;      // the most threads that ran it at once
  double elapsed_s = 0;          // first start to last end
  double per_core_rate = 0;      // samples / cpu_s
  double observed_rate = 0;      // samples / elapsed_s
  double parallel_rate = 0;      // per_core_rate x parallelism
  double utilization = 0;        // cpu_s / (parallelism x elapsed_s)
  bool bottleneck = false;       // lowest parallel_rate
};

// Where a loader's wall time went (DESIGN.md "Definitions", docs/analysis.md
// "The account"): every nanosecond of the loader's wall time goes to exactly
// one cause.
enum class Cause { kCompute, kPrep, kContention, kStorage, kOtherBlocking, kHandoff, kStartup, kStallprof };
inline constexpr size_t kCauseCount = 8;
const char* ToString(Cause cause);  // for people: "compute", "worker CPU (prep)", "CPU contention", ...
// The same for a loader with `num_workers`: "prep CPU (no workers)" where the main process makes the batches.
const char* ToString(Cause cause, int32_t num_workers);
const char* CauseId(Cause cause);   // for programs: "compute", "prep", "contention", "storage", "other_blocking", ...

struct AccountLine {
  Cause cause = Cause::kCompute;
  double seconds = 0;
  double share = 0;       // of the account's wall_s
  std::string evidence;   // what the figure rests on, e.g. "0 bytes read from the device"
  bool estimated = false; // rests partly on estimates for spans the counter budget skipped (evidence says how much)
};

struct Account {
  bool available = false;
  double wall_s = 0;                            // the loader's measured wall time; the lines sum to it
  uint64_t batches = 0;                         // next() calls that returned a batch, accounted
  std::vector<AccountLine> lines;               // one per Cause, in Cause order
  // Of the handoff line, the main thread on CPU in those next() calls
  // (receiving: unpickling, rebuilding the batch); the rest waited for the
  // worker to send. 0 without workers or without the waits' CPU.
  double handoff_receive_cpu_s = 0;
  const AccountLine& Line(Cause cause) const { return lines.at(static_cast<size_t>(cause)); }
  double Seconds(Cause cause) const { return lines.empty() ? 0 : Line(cause).seconds; }
};

// DS-Analyzer split from one run, as a view of the steady-state account:
// fetch stall = storage, prep stall = worker CPU + contention, handoff as is.
struct StallSplit {
  bool available = false;
  std::string unavailable_reason;  // when !available
  double step_s = 0;               // T = the steady account's wall time
  double ingest_s = 0;             // T_ingest = its compute line
  double cached_s = 0;             // T_prep = T - fetch stall (the fully-cached time)
  double measured_stall_s = 0;     // T - compute - stallprof's own cost
  double prep_stall_s = 0, fetch_stall_s = 0;
  bool scaled = false;             // kept for the JSON schema; always false (the account needs no scaling)
  // Waits at next() calls that found a batch already produced by a worker: the
  // main process receiving it (IPC, unpickling, pinning), not storage or worker
  // CPU. Taken out of the fetch stall, which would otherwise absorb it.
  double handoff_s = 0;
  double contention_s = 0;         // the account's CPU contention line (part of the prep stall)
  // Worker CPU per batch that storage misses cost (fitted from the read spans,
  // model::CpuSecondsAtMiss): part of the fetch stall, not prep. 0 = none or not fitted.
  double miss_cpu_s_per_batch = 0;
};

struct PrefetchStats {
  uint32_t capacity = 0;           // num_workers x prefetch_factor
  double mean_ready = 0;
  uint32_t max_ready = 0;
  double starved_fraction = 0;     // next() calls that found no batch ready
  bool ever_full = false;          // max_ready >= capacity: workers were idle, the pipeline outran the model
  // A worker's time between two fetches while it held the next one's index
  // (sent as the main loop took the batch workers x prefetch_factor before):
  // the part of its loop that runs serially with its fetching, not beside it
  // (putting the batch, taking the next index, the GIL its sending thread
  // holds while pickling). The median over such gaps; `serial_gaps` of them,
  // 0 = none seen.
  double serial_gap_s = 0;
  uint64_t serial_gaps = 0;
  // Whether a worker's fetch holds the GIL its sending thread needs: of the
  // next() calls that came after their batch's fetch ended while its worker
  // was inside a later fetch, those whose batch arrived only as that fetch
  // ended (`held`) and those that found it sent (`free`). See docs/model.md
  // "A fetch that holds the GIL".
  uint64_t sends_held = 0, sends_free = 0;
  // The handoff of those calls (steady ones, all of them, told or not): each
  // call's wait from when its batch could be received (held: the later
  // fetch's end; free: the call) to its return, in total. Where the fetch
  // holds the GIL this is the receive the worker waits on for its next index
  // (the fd round trips with its sharer thread); the batch-ready handoff
  // misses it, since the worker was busy at the call.
  double held_handoff_s = 0;
  static constexpr uint64_t kMinSends = 10;  // next() calls that told, for an answer either way
  bool SendsTold() const { return sends_held + sends_free >= kMinSends; }
  // Held where at least two in three were: a fetch that let a third of the
  // sends out gives the GIL up as it runs (torch ops release it), and the
  // simulation's held worker (every send and receive waiting for the fetch's
  // end) then predicts far too slow (the MLP of validate_model.sh, 11 of 18
  // held: 1 worker predicted 30k samples/s, measured 44k; taken as running
  // beside, 42k). Pure-Python fetches hold nearly all (144 of 145).
  bool SendsHeld() const { return SendsTold() && 3 * sends_held >= 2 * (sends_held + sends_free); }
  // The same question without workers: the hook's probe thread asked for the
  // GIL as a main-process fetch began (names::kGilProbe), up to 16 times as
  // a sending thread does. Held: its waits summed to half or more of the time
  // from its first ask to the fetch's end, or to half the switch interval
  // (when the interpreter forces the holder to let go). Probes asked within
  // 200 us of the fetch's end tell neither.
  uint64_t gil_probes_held = 0, gil_probes_free = 0;
};

// Spans of one kind whose counters (CPU time, run-queue delay) the hook's
// budget sampled: how many were measured, and what was estimated for the rest
// with its 95% error bound (sampling.h).
struct SampledSums {
  uint64_t spans = 0, measured = 0, estimated = 0;  // estimated: skipped spans given an estimate
  double cpu_estimated_s = 0, cpu_error_s = 0;      // the estimated CPU and its 95% bound
  double delay_estimated_s = 0, delay_error_s = 0;
};

struct CounterSampling {
  double share = 1;        // the trace's counter_share: 1 = every span measured
  SampledSums fetches;     // the loader's fetch spans (workers, or the main thread with num_workers = 0)
  SampledSums waits;       // its next() calls
  bool Sampled() const { return fetches.estimated + waits.estimated > 0; }
};

struct LoaderConfig {
  std::string name;
  double batch_size = 1;
  bool batch_size_known = false;
  // How batch_size was found when the loader's config had none: "first batch"
  // (the hook measured the leading dimension of a batch_size=None loader's
  // first batch), "getitem spans" (their mean count per fetch span; also
  // where an IterableDataset's batches fell short of its batch_size, which
  // batch_size_set keeps); empty = the config's batch_size, or unknown.
  std::string batch_size_from;
  uint32_t num_workers = 0;
  // The loader's batch_size where the batches' mean replaced it
  // (batch_size_from "getitem spans": an IterableDataset's workers each
  // ending on a partial batch); 0 otherwise.
  double batch_size_set = 0;
  uint32_t prefetch_factor = 2;
  bool pin_memory = false;
  bool pin_memory_unavailable = false;  // pin_memory=True where torch saw no CUDA device (it pins nothing)
  bool persistent_workers = false;
  // The DataLoader subclass whose own __iter__ draws every epoch from one
  // iterator made once (the hook's "iterator_kept_by": YOLOv5's
  // InfiniteDataLoader, timm's MultiEpochsDataLoader); empty otherwise. Its
  // workers outlive the epochs as persistent ones do: persistent_workers is
  // set with it, and the text says which.
  std::string iterator_kept_by;
  // The sampler's kind (hook.py _sampler_kind): "_InfiniteConstantSampler" for an IterableDataset.
  std::string sampler;
  // A shuffling sampler with set_epoch (DistributedSampler) whose epoch did
  // not move between two iterators (the hook's "sampler_order_repeats"): every
  // epoch drew the same permutation.
  bool sampler_order_repeats = false;
  bool Iterable() const { return sampler == "_InfiniteConstantSampler"; }
  uint64_t dataset_len = 0;
  // The indices the loader's sampler yields an epoch, 0 = not recorded: a
  // rank's share under a DistributedSampler, a subset's length.
  uint64_t sampler_len = 0;
  // The samples an epoch holds: the sampler's, else the dataset's; 0 = unknown.
  uint64_t SamplesPerEpoch() const { return sampler_len > 0 ? sampler_len : dataset_len; }
  uint64_t dataset_bytes = 0;
  // The files its dataset reads from, found by the hook in its attributes
  // after a fetch, in the process that fetched (a worker, for a dataset that
  // opens them lazily): numpy memmaps, LMDB environments, h5py objects and
  // paths to single-file containers (HDF5, numpy, zip). Their size, whether
  // or not the page cache held them; 0 = none. held_kinds names the kinds
  // ("HDF5", "numpy memmap", ...).
  uint64_t held_bytes = 0;
  uint32_t held_files = 0;
  std::string held_kinds;
  // The dataset's size: its listed files', else the files it reads from; 0 = unknown.
  uint64_t DatasetBytes() const { return dataset_bytes > 0 ? dataset_bytes : held_bytes; }
  std::string multiprocessing_context;
  // torch.multiprocessing's sharing strategy at iterator creation:
  // "file_descriptor" (Linux's default), "file_system"; empty = not recorded.
  std::string sharing_strategy;
  // The process's malloc when the loader was created: "glibc", "glibc fixed
  // thresholds" (the environment sets mmap_threshold at glibc's largest, 32
  // MiB), or a preloaded caching allocator's library
  // (libtcmalloc_minimal.so.4); empty = not recorded.
  std::string allocator;
  // The name of the loader's own worker_init_fn; empty = none.
  std::string worker_init_fn;
  // The first batch's tensors (loaders without workers; 0 = unknown).
  uint32_t batch_tensors = 0;
  uint64_t batch_bytes = 0;
  // What a worker's handoff of such a batch costs, timed after the run by
  // `stallprof run` (collect/handoff.h); -1 = not timed.
  double ipc_loop_cpu_s = -1;
  double ipc_receive_cpu_s = -1;
  // The wall time of the timing's next() calls that found their batch made:
  // its CPU and its waits on the worker (each tensor's file descriptor
  // fetched from a thread in the worker process).
  double ipc_receive_wall_s = -1;
  double ipc_collate_shm_cpu_s = -1;  // a worker's collate into shared memory beyond the heap's
  double ipc_touch_cpu_s = -1;        // the step's first read of a received batch (its pages faulted in)
  double ipc_free_cpu_s = -1;         // the step's free of a received batch beyond a heap batch's (unmapping it)
  uint32_t ipc_batches = 0;
  double ipc_pace_s = 0;  // seconds a batch the timing's worker was paced at, as the job's loop (0: back to back)
  double ipc_startup_s = -1;  // the timing's forked worker started, to its first batch beyond a later one's
  double ipc_shutdown_s = -1;  // the timing's worker joined (_shutdown_workers)
  // A loader that would spawn its workers (or fork them from a fork server):
  // the timing's worker started that way, and joined; -1 not timed.
  double ipc_context_startup_s = -1, ipc_context_shutdown_s = -1;
  double ipc_rss_bytes = -1;   // the timing process's resident memory as it forked its worker
  double ipc_fork_s_per_mib = -1;  // a fork's cost to the parent per MiB resident (the page tables it copies)
  double ipc_exit_s_per_mib = -1;  // the forked child's exit per MiB resident (tearing them down)
  // The iterator's own code in a next() without workers (sampler, bookkeeping),
  // timed for a loader that ran with them (its profile cannot tell it from receiving).
  double ipc_next_own_cpu_s = -1;
  uint32_t intra_op_threads = 0;  // torch.get_num_threads() at iterator creation; 0 = not recorded
};

// Another loader run whole inside this one's computes (Iteration::nested_s).
struct NestedLoader {
  std::string name;
  uint32_t runs = 0;     // its epochs inside
  double seconds = 0;    // their time, left out of this loader's
};

// Another loader iterated in the same steps as this one on its thread, none
// of its epochs whole inside one step (zipped: `for a, b in zip(la, lb)`):
// its next() calls are inside this loader's computes. They stay there (the
// step does wait for them), named, so that they are not read as the model's.
struct ZippedLoader {
  std::string name;
  double seconds = 0;         // its waits inside this loader's computes, whole run
  double steady_seconds = 0;  // of them, inside this loader's steady-state steps
};

// A loader iterated by a thread other than its process's main thread: a
// prefetch thread handing each batch on to the training loop (DataLoaderX,
// prefetch_generator's BackgroundGenerator; HandsOn), or the training loop on
// a thread of its own. The loader's steps are that
// thread's, and its compute line is the hand-off; where the thread waited,
// off CPU, the training loop had not taken the batch before: the loop, not
// the data, set the pace then. The loop's own waits are not recorded.
struct PrefetchThread {
  bool present = false;
  uint32_t tid = 0;
  uint64_t handouts = 0;          // handout spans (names::kHandout)
  double handout_s = 0;           // their wall time, whole run
  double cpu_s = 0, delay_s = 0;  // their CPU and run-queue delay (measured or estimated by the budget)
  // The rest: off CPU, waiting for the training loop.
  double BlockedS() const { return std::max(0.0, handout_s - cpu_s - delay_s); }
  // The blocked share of the steady compute line (its hand-offs), as a share
  // of the steady wall time: from 5%, the training loop is the bottleneck.
  double steady_blocked_share = 0;
  // The thread hands its batches on: under 1 ms of CPU between its next()
  // calls (a queue put: 0.03-0.1 ms). More is a training loop run on a thread
  // of its own (a framework may run it so), whose steps are the training steps.
  bool HandsOn() const { return present && handouts > 0 && cpu_s / static_cast<double>(handouts) < 1e-3; }
  bool LoopBound() const { return HandsOn() && steady_blocked_share >= 0.05; }
};

struct WorkersPrediction {
  uint32_t workers = 0;
  double samples_per_s = 0;  // steady state (whole run where the loader has none: steady_fallback)
  double change = 0;         // against the measured steady state (whole run), as whatif's change column
  std::string bottleneck;    // the model's, in that scenario ("compute", "cpu prep", ...)
  double handoff_s = 0;      // the main process receiving a batch from a worker, per batch
  double waiting_threads = 0;  // the job's threads runnable without a core, on average (model::Prediction's)
  // The whole run (each epoch from iterator creation, start-up included) and
  // its change against the measured whole run; 0 where either is unknown.
  double whole_run_samples_per_s = 0;
  double whole_run_change = 0;
};

struct LoaderAnalysis {
  uint32_t pid = 0;
  uint16_t scope = 0;
  // Its DataLoader objects: `scope` and any created anew under the same name
  // after it was last iterated (a loader per epoch or per evaluation), in order.
  std::vector<uint16_t> scopes;
  int32_t rank = -1;               // its process's rank identity (ProcessSummary::rank), -1 none
  LoaderConfig config;
  HugeVector<Iteration> iterations;
  bool steady_fallback = false;    // no iteration past warm-up: "steady" figures use all iterations
  // The loop reads a batch ahead (a prefetcher wrapper: apex's
  // data_prefetcher, timm's PrefetchLoader): each epoch's second next()
  // follows its first at once, and its last batch's step runs after the
  // StopIteration (EpochStats::step_after_end_ns, up to the next iter()).
  bool reads_ahead = false;
  // The last batches of each epoch left out of the steady state besides the
  // warm-up: num_workers x prefetch_factor, in flight when the sampler ran out.
  uint32_t drain_iterations = 0;
  Summary step_all, wait_all, compute_all;
  Summary step_steady, wait_steady, compute_steady;
  // From the account: (wall - compute - stallprof) / (wall - stallprof).
  double stall_fraction = 0;       // steady state
  double stall_fraction_all = 0;   // whole run (warm-up and epoch start-up included)
  Verdict verdict = Verdict::kNotInputBound;
  // The largest non-compute cause of the steady account when input-bound, else compute.
  Cause bottleneck = Cause::kCompute;
  // The bottleneck is the workers' stages (their CPU, its contention,
  // storage, other blocking): the slowest stage is the loader's bottleneck,
  // not merely the pipeline's slowest part.
  bool StagesBound() const {
    return bottleneck == Cause::kPrep || bottleneck == Cause::kContention || bottleneck == Cause::kStorage ||
           bottleneck == Cause::kOtherBlocking;
  }
  Account account_all;             // whole run: every epoch from __iter__ to the StopIteration next()
  Account account_steady;          // iterations past the warm-up (the whole run when steady_fallback)
  // What persistent_workers=True would save (non-persistent loaders with
  // workers), 0 otherwise: a floor. It counts the waits the trace shows
  // (start-up, the first batch's set-up, shutdown) and each later epoch's
  // copy-on-write refault after its workers' fork (fork_refault_s_per_epoch),
  // not the rest of the step running faster beside warm workers (an
  // ImageFolder trainer: 1.1 s counted, a median 3.5 s measured, before the
  // refault was counted).
  double persistent_saving_s = 0;
  // The training process's kernel CPU in a later epoch's warm-up steps beyond
  // its steady rate, per later epoch, where each epoch forked its workers
  // anew (copy-on-write faults of the pages the step writes); 0 otherwise.
  double fork_refault_s_per_epoch = 0;
  // An IterableDataset's stream, which its own code splits over the workers
  // (shards by worker id): the batches each worker made an epoch, most first,
  // when the split was uneven (max > 1.1 x min, a worker without any
  // counting 0); empty otherwise. Each epoch's end then runs on fewer workers.
  std::vector<double> stream_worker_batches;
  // The whole run's epoch start-up split by what it paid for: epochs that
  // started workers (every epoch without persistent workers; with them, each
  // DataLoader object's first) and the later epochs of persistent workers
  // (the wait for the first batch only).
  struct StartupSplit {
    double starting_s = 0;
    uint32_t starting_epochs = 0;
    double later_s = 0;
    uint32_t later_epochs = 0;
  } startup_split;
  // Of the fetch spans' off-CPU time, the share the account calls storage
  // (beyond what fetches without device reads spend off CPU), over the
  // fetches with CPU and read spans; 1 without any, as every off-CPU second
  // was taken before.
  double fetch_off_cpu_storage_share = 1;
  // The fetching threads' CPU in the kernel (system CPU of the fetch spans, the
  // hook's system_cpu spans), as a share of their CPU; -1 when not recorded.
  double fetch_kernel_share = -1;
  // Their kernel CPU per fetch, in seconds; -1 when not recorded.
  double fetch_kernel_s = -1;
  // Minor page faults of the worker processes per batch they fetched (/proc
  // sampler); -1 without workers or where the trace has no fault counts.
  double worker_faults_per_batch = -1;
  // The profiled machine's page size (trace header; 4096 where not recorded):
  // how many pages a batch spans, which its collation faults in.
  uint32_t page_bytes = 4096;
  // The worker processes' CPU per batch outside their fetch spans (/proc
  // sampler less the fetch spans' CPU): the worker loop's own work (indices,
  // pickling and sending the batch). Seconds; -1 when unknown.
  double worker_cpu_outside_fetch_s = -1;
  // Minor page faults of the loader's own process per step (next() + compute);
  // -1 where the trace has no fault counts.
  double main_faults_per_batch = -1;
  // The kernel's share of that process's CPU over the same steps (page
  // faults, syscalls); -1 where the trace has no kernel CPU (before 2026-11-27).
  double main_kernel_share = -1;
  // The kernel's share of the steps' own CPU: without workers, the process's
  // less its fetches' (their spans' CPU and kernel CPU); with workers, the
  // process's. -1 where not measured.
  double step_kernel_share = -1;
  // The workers' own reads from the storage device over the steady
  // iterations: bytes/s (0 = none) and the reads in flight on average (their
  // fetches' off-CPU time over the same time). More than one in flight: the
  // workers shared the storage, and this rate is what it gave them.
  double storage_read_rate = 0;
  double storage_reads_in_flight = 0;
  std::vector<std::string> advice; // one per significant cause, bottleneck first
  StallSplit split;
  double samples = 0;              // iterations x batch_size, less what each epoch's partial last batch lacked
  double active_s = 0;             // sum of epoch durations
  double samples_per_s = 0;        // whole run: samples / active_s (start-up included)
  // Steady state: the steady iterations' samples over their steps, the figure
  // whatif's and recommend's "measured" use. A partial last batch counts its
  // own samples: with short epochs the steady iterations are the epochs'
  // tails, and a 9-batch epoch of 130 samples (batch 16) read 900 samples/s
  // as full batches where the job measured 740.
  double steady_samples_per_s = 0;
  // The steady compute per batch weighed the same way (full and partial
  // batches as often as they came in the run): the model's compute per
  // batch, against its samples per batch (the run's). 0 when unknown.
  double steady_compute_per_batch_s = 0;
  std::vector<EpochStats> epochs;
  // The iteration is its epoch's last and lacked samples (the dataset's
  // length not a multiple of the batch size, drop_last off).
  bool PartialLastBatch(const Iteration& it) const;
  FirstEpochComparison first_epoch;
  // The iterations whose step lies in their epoch's time (EpochStats::unstepped).
  uint64_t SteppedIterations() const {
    uint64_t unstepped = 0;
    for (const auto& e : epochs) unstepped += e.unstepped;
    return iterations.size() - std::min<uint64_t>(unstepped, iterations.size());
  }
  // The loop creates an iterator per step (next(iter(loader))): 3 epochs or
  // more, every one left after at most two batches of the more its dataset
  // holds, none by StopIteration.
  bool IteratorPerStep() const;
  // The sampler's first draw (EpochStats::sampler_first_s), mean per epoch.
  double SamplerFirstPerEpochS() const {
    double sum = 0;
    for (const auto& e : epochs) sum += e.sampler_first_s;
    return epochs.empty() ? 0 : sum / static_cast<double>(epochs.size());
  }
  std::vector<WorkerStats> workers;
  double worker_imbalance = 0;     // max / min batches - 1 among workers that fetched at the same time (0 with one)
  PrefetchStats prefetch;
  Summary produce;                 // fetch span wall times
  // Fetch spans with CPU whose thread recorded the bytes it read (the hook's
  // read spans): the rows of model::FitReadCost. Empty when not recorded.
  std::vector<model::ReadSample> fetch_reads;
  // The most bytes per sample the fetches of one complete epoch (run to
  // StopIteration over the whole dataset) read from the device, as far as
  // the counter budget measured them. A memory-mapped dataset's
  // reads are page faults, not read calls: this, from a cold epoch, is its
  // size per sample. 0 when unknown.
  double complete_epoch_device_bytes_per_sample = 0;
  // Every fetch span's CPU and off-CPU time (produce - cpu - delay), in start
  // order: the per-batch costs the model's simulation draws from.
  HugeVector<model::BatchCost> batch_costs;
  // Per batch cost: its fetch made the batch of a steady iteration. Empty when
  // there is no steady state (every iteration counts then).
  std::vector<bool> batch_cost_steady;
  // A fresh worker's set-up, paid in its first fetches: its one-time
  // set-up in its first item (lazy imports, a file or database opened on
  // first use), and its caches and copy-on-write pages warming over the
  // next ones. MeasureWorkerSetup takes it out of batch_costs, so they are
  // a warm worker's, and the model pays it on each worker start (every
  // epoch without persistent workers, once with them). Empty when not
  // measured (no getitem spans in workers, and no worker made more than
  // kSetupFetches fetches to tell a warm one by).
  struct WorkerSetup {
    // Per fetch of a worker's life (its first, second, ...): the mean cost
    // beyond a warm worker's fetch (CPU and off CPU).
    std::vector<model::BatchCost> by_fetch;
    // Their sums: what one worker start costs, on and off CPU.
    double WallS() const { return model::SumSeconds(by_fetch); }
    double CpuS() const { return model::SumCpuSeconds(by_fetch); }
    double first_item_s = 0;       // the first item beyond the worker's others (their mean: item_s)
    double item_s = 0;
    double warm_fetch_s = -1;      // a warm worker's fetch (median), -1 = not measured
    uint32_t starts = 0;           // worker processes that fetched
  } worker_setup;
  // Per batch cost: its fetch's place in its worker's life (0 = the
  // worker's first), UINT32_MAX for a fetch in the loader's own process.
  std::vector<uint32_t> worker_fetch_position;
  // The main process (all its threads, /proc sampler) over the steps after
  // each epoch's first, less its main thread's CPU and delay in next() (wait
  // spans): what the training step itself uses. main_step_compute_s = 0 when
  // not measured (no sampler series, or wait spans without CPU).
  double main_step_cpu_s = 0, main_step_delay_s = 0, main_step_compute_s = 0;
  // Of it, the main thread's own over the same steps from next()'s return to
  // the following call (its schedstat series), where the loader is iterated
  // on the main thread: the step's serial part, beside which the process's
  // other threads (queue feeders, intra-op threads) ran. -1 when not measured
  // (traces before 2026-12-06, a loader iterated on another thread).
  double main_thread_step_cpu_s = -1, main_thread_step_delay_s = -1;
  // Bytes the main process read from the storage device over those steps
  // (/proc/<pid>/io read_bytes): its own pages read back (code, mapped data
  // evicted under memory pressure). -1 when not measured, and without workers
  // (its fetches read in the same process).
  double main_step_read_bytes = -1;
  // And what its read calls moved meanwhile (rchar: files, page cache hits,
  // pipes and sockets): device reads beyond it came in through page faults.
  double main_step_read_call_bytes = -1;
  std::vector<StageStats> stages;
  // The user's stages its training loop ran outside every fetch (between
  // next() calls, e.g. an augmentation after the batch arrived): time of the
  // compute line, not of the pipeline. Rates and parallelism are not set.
  std::vector<StageStats> main_stages;
  std::vector<NestedLoader> nested_loaders;  // run inside this one's computes, left out of its times
  std::vector<ZippedLoader> zipped_loaders;  // waited on inside this one's computes, kept in them
  PrefetchThread prefetch_thread;  // iterated off the main thread: present
  CounterSampling counters;        // what the hook's counter budget sampled, and the estimates for the rest
  // The model's prediction for each worker count the advice points to (more
  // workers for the prep or other blocking, none for a handoff that costs
  // more than making the batch): the figures `stallprof whatif --workers N`
  // prints, so the advice says whether acting on it would help. Empty where
  // no advice points to a worker count or the model could not predict.
  std::vector<WorkersPrediction> worker_predictions;
};

// A zipped loader's next() calls inside the whole run's or the steady state's computes.
inline double ZippedSeconds(const LoaderAnalysis& l, const ZippedLoader& z, bool whole_run) {
  return whole_run || l.steady_fallback ? z.seconds : z.steady_seconds;
}
// Their share of the steady state: the headline and the advice name them from 5%.
inline double ZippedShare(const LoaderAnalysis& l, const ZippedLoader& z) {
  return l.account_steady.wall_s > 0 ? ZippedSeconds(l, z, false) / l.account_steady.wall_s : 0;
}
inline constexpr double kZippedNamedShare = 0.05;

struct SystemStats {
  bool available = false;          // the sampler recorded at least two ticks
  double seconds = 0;
  double machine_cpu_fraction = 0;  // busy / total over all CPUs
  // Of it, the hypervisor's: time it ran other guests while this machine's
  // CPUs had work (/proc/stat steal). A vCPU it deschedules runs the job's
  // threads late and wakes its sleepers late.
  double steal_fraction = 0;
  bool steal_measured = false;      // the trace has the steal column (from 2026-12-03)
  double job_cpu_cores = 0;         // cores the traced processes kept busy on average
  double job_cpu_fraction = 0;      // job_cpu_cores / usable cores
  double outside_busy_cores = 0;    // other processes' busy cores over the job's first process's span
  bool outside_busy_measured = false;  // the sampler read /proc/stat and the job's processes over that span
  double outside_steal_cores = -1;  // of outside_busy_cores, steal; -1 unknown
  // The machine's cores the job could not use (outside its CPU affinity,
  // beyond its CPU quota): other processes busy on them took nothing from it.
  double unusable_cores = 0;
  double disk_read_bytes = 0;
  double disk_read_bytes_per_s = 0;
  double page_cache_start = 0, page_cache_end = 0, page_cache_max = 0;
  double mem_available_min = 0;
  double memory_bytes = 0;
  double job_rss_max = 0;
  uint64_t dataset_bytes = 0;       // largest dataset among the loaders, 0 = unknown
  bool dataset_fits_in_memory = false;
};

// An exception that ended a process (or a thread of it), as the hook recorded
// it: config "uncaught_error" (docs/analysis.md "How the job ended").
struct UncaughtError {
  uint32_t pid = 0;
  int32_t rank = -1;    // its process's rank identity, -1 none
  std::string thread;   // a thread's that did not end the process (threading.excepthook): its name; "" = the process's
  std::string loader;   // the loader whose iterator the traceback passed through; "" = none
  int64_t batch = -1;   // that iterator's batch index in its epoch (the one it was getting); -1 = unknown
  std::string message;  // "RuntimeError: DataLoader worker (pid 1240) is killed by signal: Segmentation fault."
};

struct DataQuality {
  uint64_t spans = 0;
  uint64_t dropped = 0;
  // Of them, records of threads that found every ring lane taken (the
  // footer's total beyond the threads' own counts).
  uint64_t laneless_dropped = 0;
  double dropped_share = 0;         // dropped / (spans + dropped)
  uint32_t lanes_used = 0;
  uint32_t ring_lanes = 0;
  bool truncated = false;
  bool footer_present = false;
  int32_t exit_code = 0;
  int32_t term_signal = 0;  // the signal that killed the profiled command, 0 = none
  std::vector<UncaughtError> uncaught_errors;  // in pid order
  uint64_t invalid_records = 0;
  std::vector<std::string> clients;  // distinct client kinds
  uint64_t clock_resolution_ns = 0;
  // How spans were timed: "CLOCK_MONOTONIC", or "TSC 2.99 GHz, drift ..."
  // (converted to CLOCK_MONOTONIC by the launcher).
  std::string clock = "CLOCK_MONOTONIC";
  std::string clock_source = "monotonic";  // the trace header's: "monotonic" or "tsc"
  // Non-empty when the TSC drifted from CLOCK_MONOTONIC by more than
  // kMaxTscDriftNsPerS, or a converted time may be off by more than kMaxTscErrorNs.
  std::string clock_warning;
};

// How the profiled command ended when not cleanly, one clause without a
// final period ("" when it exited 0 with no uncaught exception): the exit
// code or the signal, and each uncaught exception with its process, loader
// and batch ("...exited with code 1; pid 812 raised RuntimeError: DataLoader
// worker (pid(s) 815) exited unexpectedly, waiting for batch 3 of loader train").
std::string DescribeEnding(const DataQuality& q);
// The line over the figures for a trace whose command did not end cleanly
// ("" when it did, or when the trace has no footer to say): "ended: <the
// ending> (the figures cover the run up to it)", or where it still exited 0
// past a thread's exception, "uncaught exception, the job went on: <...>".
std::string EndingLine(const DataQuality& q);
// A trace that lost records: how many, that counts read from spans may be
// off, and the run flag that keeps them; "" when none was lost.
std::string LostRecordsLine(const DataQuality& q);

// An invariant TSC and CLOCK_MONOTONIC agree to a few ppm; more means the TSC
// is not what the CPU claims (or NTP slews the clock hard).
inline constexpr double kMaxTscDriftNsPerS = 1000;
// Re-anchored every drain, a converted time is off by tens of ns; 10 us would
// reorder spans the hook nests (a fetch inside its read span).
inline constexpr uint64_t kMaxTscErrorNs = 10'000;

// A process of the trace, as the job view (ranks.h) needs it.
struct ProcessSummary {
  uint32_t pid = 0, ppid = 0;
  // Rank identity: RANK from its environment, else the rank torch.distributed
  // gave it (the hook's "rank" config), else LOCAL_RANK; -1 when none.
  int32_t rank = -1;
  std::string command;           // command line, else comm
};

// Where the run's time was against the loaders' epochs: the verdicts cover
// the epochs only. Time after the last epoch (or between epochs) with the
// training going on drew from no traced loader: itertools.cycle(loader)
// replays the first epoch's batches, and evaluation or checkpoints without
// a DataLoader run there too. 0 throughout without a footer's end time.
struct RunCoverage {
  double in_epochs_s = 0;  // the union of every loader's epochs
  double before_s = 0;     // from the run's start (the interpreter's, imports included) to the first epoch
  double between_s = 0;    // gaps between epochs
  double after_s = 0;      // from the last epoch's end to the run's end
  // What the job did before the first epoch, from the /proc sampler (-1 where
  // it has no ticks there): a cold start reads the interpreter's libraries
  // and often a dataset's index from the device; set-up in Python keeps a
  // core busy.
  double before_job_cores = -1;       // cores the job's processes kept busy
  double before_disk_read_bytes = -1;  // the machine's device reads
};

struct TraceAnalysis {
  std::string path;
  std::string hostname;
  uint64_t start_monotonic_ns = 0;
  int64_t start_realtime_ns = 0;
  double duration_s = 0;
  RunCoverage coverage;
  uint32_t usable_cores = 0;
  double cpu_quota_cores = 0;  // the CPU cgroup's quota where below usable_cores (TraceHeader), else 0
  std::vector<LoaderAnalysis> loaders;  // ordered by (rank, pid, scope)
  std::vector<ProcessSummary> processes;  // every process of the trace
  SystemStats system;
  DataQuality quality;
};

// Time outside every epoch after the first began (between and after them)
// worth a note beside the verdicts: as long as the epochs or longer (half the
// time from the first epoch's start on), and a second or more; else 0. The
// time before the first epoch (the interpreter's start, imports: 1 to 5 s for
// torch, by host) says nothing about what the verdicts miss, so it is not in
// the comparison.
double TimeOutsideEpochs(const TraceAnalysis& analysis);

// The System section's line on the dataset's size beside the memory
// ("fits in memory: caching it would remove fetch stalls"), or "" without a
// dataset size. A dataset that fits and cost no loader 1% of its time in
// storage is said to be served from memory already: no stall to remove; one
// whose stalls were all the first epoch's, to be held in memory after it.
std::string DatasetMemoryNote(const TraceAnalysis& analysis);

// The storage line was paid in the first epoch: two epochs or more, and the
// later ones' storage at most a tenth of the first's each (they found its
// reads in memory, the page cache), so a longer run pays it once.
bool StoragePaidInFirstEpoch(const LoaderAnalysis& loader);

// The whole run's epoch start-up as a share of its wall time, when it is
// worth telling beside the steady verdict (>= 5%, the loader has a steady
// state and start-up is not already its bottleneck); else 0.
double WholeRunStartupShare(const LoaderAnalysis& loader);

// Analyzes one trace. Fails with an UnsupportedError when the trace holds no
// DataLoader iterations (e.g. a plain C program traced with spans only).
Result<TraceAnalysis> Analyze(const Trace& trace, const AnalysisOptions& options);

// Totals of the spans of one name on one thread: what stage statistics need
// of the spans analysis does not look at one by one (the decoder folds them).
using StageTotals = SpanTotals;

// A trace read for analysis only: `trace` holds every table and series but, of
// the spans, only those analysis reads one by one (waits, epoch instants,
// fetches); the others are folded into `stages` while streaming.
struct TraceDigest {
  Trace trace;
  std::vector<StageTotals> stages;
};

// Streams `path` chunk by chunk into a TraceDigest, so memory grows with
// iterations and batches, not with the span count. Same InputErrors as
// LoadTrace (missing, empty, not a trace, corrupt, newer major version); a
// truncated file loads up to its last complete chunk with trace.truncated set.
Result<TraceDigest> LoadForAnalysis(const std::string& path);

// Analyze over a digest: the same results as Analyze over the full trace.
Result<TraceAnalysis> Analyze(const TraceDigest& digest, const AnalysisOptions& options);

// The realtime (ns since the epoch) of a monotonic instant of `trace`, from
// the header's pair recorded at the same instant.
int64_t ToRealtime(const TraceAnalysis& trace, uint64_t monotonic_ns);

}  // namespace stallprof::analysis
