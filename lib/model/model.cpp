#include "model/model.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "model/cache.h"

namespace stallprof::model {

const char* ToString(Bottleneck b) {
  switch (b) {
    case Bottleneck::kCompute: return "compute";
    case Bottleneck::kPrep: return "cpu prep";
    case Bottleneck::kFetch: return "storage";
    case Bottleneck::kHandoff: return "handoff";  // analyze's name for the cause
    case Bottleneck::kBlocking: return "blocking";
  }
  return "?";
}

bool ParallelStep(const LoaderProfile& p);
bool ParallelStepOversubscribed(const LoaderProfile& p);

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMinUsableCores = 0.05;  // the main process never leaves the workers literally nothing

double Rate(double batch, double seconds) { return seconds > 0 ? batch / seconds : kInf; }

Status Validate(const LoaderProfile& p, const Scenario& s) {
  const std::string loader = "loader '" + p.name + "'";
  if (!(s.machine.cores > 0)) return UsageError("--cores must be > 0, got " + std::to_string(s.machine.cores));
  if (!(s.accel_speedup > 0)) return UsageError("--accel-speedup must be > 0");
  if (s.storage_bandwidth < 0) return UsageError("--disk-bw must be > 0");
  if (!(p.batch_size > 0)) return UnsupportedError(loader + " has no batch size; record it with the Python hook");
  if (p.batches == 0)
    return UnsupportedError(loader + " has no steady-state batches; record more iterations than --warmup per epoch");
  if (p.prefetch_thread_tid != 0)
    return UnsupportedError(fmt::format(
        "{} is iterated on a prefetch thread (tid {}), not in the training loop: its steps are that thread's "
        "hand-offs, and the training step itself is not measured, so it cannot be predicted; analyze says whether "
        "the loop or the data sets the pace (iterate the loader in the training loop to predict it)",
        loader, p.prefetch_thread_tid));
  for (double v : {p.compute_s_per_batch, p.cpu_s_per_batch, p.delay_s_per_batch, p.io_s_per_batch})
    if (!(v >= 0) || std::isinf(v)) return InputError(loader + " has a negative or non-finite time per batch");
  if (p.workers > 0 && p.cpu_s_per_batch + p.io_s_per_batch + p.delay_s_per_batch <= 0)
    return UnsupportedError(loader + " has no worker fetch spans; record with the Python hook loaded in the workers");
  if (s.step_threads >= 0) {
    if (s.step_threads < 1) return UsageError("--step-threads must be >= 1");
    if (p.intra_op_threads == 0)
      return UnsupportedError(loader + ": the trace does not record the step's intra-op threads "
                                       "(torch.get_num_threads()); profile with this version's hook to use --step-threads");
    if (static_cast<uint32_t>(s.step_threads) > p.intra_op_threads)
      return UsageError(fmt::format("--step-threads {}: more than the {} intra-op threads the step was profiled with; "
                                    "the profile cannot tell how it scales beyond them",
                                    s.step_threads, p.intra_op_threads));
    if (ParallelStepOversubscribed(p))
      return UnsupportedError(fmt::format(
          "{}: --step-threads: the profile's step ran its {} intra-op threads beside {} workers on {:g} cores, so its "
          "CPU includes their waiting for each other; profile with num_workers=0, or with "
          "torch.set_num_threads({}), to predict other step threads",
          loader, p.intra_op_threads, p.workers, p.profiled_cores, StepThreadsBesideWorkers(p.profiled_cores, p.workers)));
  }
  return Status::Ok();
}

struct Terms {
  double r_compute, r_main, r_prep, r_workers, r_fetch, samples_per_s;
};

// Rates of a pipelined loader (W >= 1) for given per-batch worker CPU and io
// (the CPU at the scenario's miss ratio, CpuSecondsAtMiss) and loop CPU (a
// thread of its own per worker), without run-queue delay: the analytic check
// of the simulation, which predicts the delay.
// `main_cpu`: the main process's CPU per batch (the step's and receiving),
// < 0 when not measured: then it keeps its profiled share of the cores.
Terms Pipelined(const LoaderProfile& p, double cpu, double loop, double main_cpu, double compute, double cores,
                double workers, double io, double bandwidth, double miss) {
  const double b = p.SamplesPerBatch();
  Terms t{};
  t.r_compute = Rate(b, compute);
  t.r_main = Rate(b, compute + MainReceiveSeconds(p));
  // The cores, and each of a worker's two threads at most one core.
  const double r_cores = main_cpu >= 0 ? cores * Rate(b, cpu + loop + main_cpu)
                                       : std::max(kMinUsableCores, cores - p.main_cpu_cores) * Rate(b, cpu + loop);
  t.r_prep = std::min({r_cores, workers * Rate(b, cpu), workers * Rate(b, loop)});
  t.r_workers = workers * Rate(b, std::max(cpu + io + p.worker_gap_s_per_batch.value, loop));
  const double bytes = p.bytes_per_sample.value * miss;
  t.r_fetch = (bandwidth > 0 && bytes > 0) ? bandwidth / bytes : kInf;
  t.samples_per_s = std::min({t.r_main, t.r_prep, t.r_workers, t.r_fetch});
  return t;
}

// The step as the simulation runs it, from its measured wall time w, CPU c
// and run-queue delay d per batch: where its main thread's CPU m was measured
// apart, m is its serial part and the process's other threads' c - m run
// beside it (threads c / m), and alone it would take w less the main
// thread's delay; otherwise runnable thread-seconds c + d over w give its
// threads (at least one), and alone it would take w less the delay.
struct Step {
  double cpu = 0, threads = 1, off = 0;
  double main_cpu = 0;  // of cpu, the main thread's (0: not measured apart)
  // A parallel step's intra-op threads in the scenario (0: not parallel). Above
  // one, its threads wait for each other at every operator (SimConfig::compute_parallel).
  uint32_t parallel_threads = 0;
};

// The step's runnable threads: its process's CPU and delay over its wall time.
Step RunnableStep(const LoaderProfile& p) {
  const double w = p.compute_s_per_batch;
  Step step;
  if (!p.compute_cpu_s_per_batch.measured) {
    step.off = w;  // unknown: off CPU, never competing for cores (the first model's assumption)
    return step;
  }
  step.cpu = std::min(p.compute_cpu_s_per_batch.value, 64 * w);
  const double runnable = step.cpu + p.compute_delay_s_per_batch;
  if (runnable <= w) step.off = w - runnable;
  else step.threads = w > 0 ? runnable / w : 1;
  return step;
}

Step MeasuredStep(const LoaderProfile& p) {
  Step step = RunnableStep(p);
  // A step that is not parallel over intra-op threads, its main thread
  // measured apart: the other threads' CPU is not the step's time (a fast
  // loader's 2 index queue feeders took 62 us a batch beside a 250 us step,
  // which as one step on 1.2 threads predicted it 11 us short without
  // workers). A parallel step keeps the runnable measure (StepOf).
  const double m = std::min(p.compute_main_thread_cpu_s_per_batch, step.cpu);
  if (m <= 0 || ParallelStep(p)) return step;
  step.main_cpu = m;
  step.threads = step.cpu / m;
  step.off = std::max(0.0, p.compute_s_per_batch - m - std::max(0.0, p.compute_main_thread_delay_s_per_batch));
  return step;
}

// `step` with the received batch's first read and free (BatchTouchSeconds)
// taken out or put in: the main thread's work, its serial part.
Step StepWithWorkers(const LoaderProfile& p, uint32_t workers, Step step) {
  const double touch = BatchTouchSeconds(p, workers);
  if (step.main_cpu <= 0) {
    step.cpu = std::max(0.0, step.cpu + touch);
    return step;
  }
  const double others = std::max(0.0, step.cpu - step.main_cpu);
  step.main_cpu = std::max(0.0, step.main_cpu + touch);
  step.cpu = step.main_cpu + others;
  step.threads = step.main_cpu > 0 ? step.cpu / step.main_cpu : 1;
  return step;
}

// Whether a parallel step of `threads` intra-op threads on `cores` is held up
// when other threads take its cores. libgomp's threads spin at barriers while
// the team fits the process's CPUs (do_spin: the throttled count once
// gomp_managed_threads > gomp_available_cpus), then wait for a preempted one;
// with more threads than CPUs they soon sleep and share the cores as any
// threads do. Measured with 2 threads on 1 core (taskset): the step took
// 23 ms, fluid sharing predicts 16.6 ms and holding up 33 ms.
bool HeldUpByOthers(uint32_t threads, double cores) { return threads > 1 && threads <= cores + 1e-9; }

// The step of a scenario with `step_threads` intra-op threads (-1: as profiled).
// A parallel step profiled with cores to itself does its work, the wall time
// alone times the threads it ran on (at most k: beyond that its CPU is threads
// spinning at barriers), over the scenario's threads. With fewer threads this
// assumes linear scaling, for one thread an upper bound (a parallel step's
// thread-time only grows with its threads).
Step StepOf(const LoaderProfile& p, double speedup, int32_t step_threads) {
  Step step = MeasuredStep(p);
  if (ParallelStep(p) && !ParallelStepOversubscribed(p)) {
    const double k = p.intra_op_threads;
    const double alone = step.cpu / step.threads;
    const double ran_on = std::min(step.threads, k);
    const uint32_t threads = step_threads > 0 ? std::min<uint32_t>(static_cast<uint32_t>(step_threads), p.intra_op_threads)
                                              : p.intra_op_threads;
    step.cpu = alone * ran_on;
    step.threads = std::min(ran_on, static_cast<double>(threads));
    step.parallel_threads = threads;
  }
  step.cpu /= speedup;
  step.main_cpu /= speedup;
  step.off /= speedup;
  return step;
}

// At most this many batches per simulation: beyond it the steady state is
// long reached and a profile's costs are subsampled evenly.
constexpr size_t kMaxSimBatches = 4000;
constexpr size_t kMinSimBatches = 400;

// The fetches' costs a simulation draws from: every fetch of the run (an
// epoch from its start, the whole run), or those of the steady iterations
// alone (the steady state, as analyze measures it), where the profile marks
// them and they are enough to draw from.
enum class Draw { kWholeRun, kSteady };

std::vector<BatchCost> SimCosts(const LoaderProfile& p, Draw draw) {
  if (p.batch_costs.empty()) {
    if (p.cpu_s_per_batch + p.io_s_per_batch <= 0) return {};
    return {{static_cast<float>(p.cpu_s_per_batch), static_cast<float>(p.io_s_per_batch)}};
  }
  constexpr size_t kMinSteadyCosts = 8;
  const auto& marks = p.batch_cost_steady;
  const size_t marked = marks.size() == p.batch_costs.size() ? static_cast<size_t>(std::count(marks.begin(), marks.end(), true)) : 0;
  const bool steady_only = draw == Draw::kSteady && marked >= kMinSteadyCosts;
  // The drawn costs, every `stride`-th of them past kMaxSimBatches, in one
  // pass: a trace's million fetches are not copied for each prediction.
  const size_t drawn = steady_only ? marked : p.batch_costs.size();
  const size_t take = std::min(drawn, kMaxSimBatches);
  const double stride = static_cast<double>(drawn) / static_cast<double>(take);
  std::vector<BatchCost> out;
  out.reserve(take);
  for (size_t i = 0, j = 0; i < p.batch_costs.size() && out.size() < take; ++i) {
    if (steady_only && !marks[i]) continue;
    if (j++ == static_cast<size_t>(static_cast<double>(out.size()) * stride)) out.push_back(p.batch_costs[i]);
  }
  return out;
}

// The costs a steady-state simulation with `workers` draws from: the steady
// fetches, or every fetch where the stream splits unevenly over the workers
// (the simulation runs it epoch by epoch and takes its steady window inside).
std::vector<BatchCost> SteadySimCosts(const LoaderProfile& p, uint32_t workers) {
  return SimCosts(p, StreamQuota(p, workers).empty() ? Draw::kSteady : Draw::kWholeRun);
}

// `steady` shortened to one epoch of `per_epoch` batches (one epoch of an
// uneven split, shrunk as the steady simulation's).
SimConfig OneEpoch(const SimConfig& steady, double per_epoch) {
  SimConfig epoch = steady;
  epoch.batches = static_cast<uint64_t>(std::min(per_epoch, static_cast<double>(kMaxSimBatches)));
  if (!epoch.worker_quota.empty())
    epoch.batches = std::accumulate(epoch.worker_quota.begin(), epoch.worker_quota.end(), uint64_t{0});
  return epoch;
}

// An epoch from an empty pipeline, simulated from each part of the run's
// costs in turn (part k from cost k x size / parts): the mean of its time and
// its steps' time. Drawn from the run's first costs alone, every epoch took
// the first epoch's (a loop that evaluated the training set before training,
// 13% faster a batch, put the predicted whole run 15% above its own measured one).
struct EpochMean {
  double seconds = 0, compute_s = 0;
};
EpochMean SimulateEpoch(const SimConfig& epoch) {
  constexpr size_t kMaxParts = 32;
  const size_t size = epoch.costs.size();
  const size_t parts = epoch.batches == 0 || size <= epoch.batches
                           ? 1
                           : std::min<size_t>((size + epoch.batches - 1) / epoch.batches, kMaxParts);
  EpochMean mean;
  SimConfig part = epoch;
  for (size_t k = 0; k < parts; ++k) {
    part.cost_offset = k * size / parts;
    const SimResult r = SimulateLoader(part);
    mean.seconds += r.seconds / static_cast<double>(parts);
    mean.compute_s += r.compute_s / static_cast<double>(parts);
  }
  return mean;
}

// The epochs of a run of `epochs` that start their workers: every one
// without persistent workers; with them, one per DataLoader object (they die
// with it).
uint32_t StartingEpochs(const LoaderProfile& p, bool persistent, uint32_t epochs) {
  return persistent ? std::clamp<uint32_t>(p.objects, 1, epochs) : epochs;
}

// SimulateEpoch over a run of `epochs`: those that start their workers
// (StartingEpochs) pay each worker's set-up in its first fetches
// (LoaderProfile::worker_setup_by_fetch), the others begin with warm workers.
EpochMean SimulateRunEpoch(const LoaderProfile& p, SimConfig epoch, bool persistent, uint32_t epochs) {
  if (epoch.workers == 0 || !(p.WorkerSetupSeconds() > 0)) return SimulateEpoch(epoch);
  const double starting = static_cast<double>(StartingEpochs(p, persistent, epochs)) / std::max(1u, epochs);
  const EpochMean warm = starting < 1 ? SimulateEpoch(epoch) : EpochMean{};
  epoch.worker_setup = p.worker_setup_by_fetch;
  const EpochMean fresh = SimulateEpoch(epoch);
  return {starting * fresh.seconds + (1 - starting) * warm.seconds,
          starting * fresh.compute_s + (1 - starting) * warm.compute_s};
}

std::vector<uint64_t> StreamCounts(const LoaderProfile& p) {
  std::vector<uint64_t> counts;
  for (double c : p.stream_worker_batches) counts.push_back(static_cast<uint64_t>(std::llround(c)));
  return counts;
}
}  // namespace

uint64_t StreamPartBatches(const LoaderProfile& p) {
  uint64_t part = 0, total = 0;
  for (uint64_t c : StreamCounts(p)) {
    part = std::gcd(part, c);
    total += c;
  }
  if (part == 0) return 0;
  const uint64_t parts = total / part;
  return parts >= 2 && parts <= 1024 ? part : 0;
}

std::vector<uint64_t> StreamQuota(const LoaderProfile& p, uint32_t workers) {
  if (p.stream_worker_batches.empty() || workers == 0) return {};
  std::vector<uint64_t> quota = StreamCounts(p);
  if (workers != p.workers) {
    // The split's code is unknown. Streams are mostly split by whole parts
    // (shards) dealt to the workers in turn (shards[worker::num_workers]).
    const uint64_t part = StreamPartBatches(p);
    if (part == 0) return {};  // no telling parts: an even split
    const uint64_t parts = std::accumulate(quota.begin(), quota.end(), uint64_t{0}) / part;
    quota.assign(workers, 0);
    for (uint32_t w = 0; w < workers; ++w) quota[w] = part * (parts / workers + (w < parts % workers ? 1 : 0));
  }
  if (*std::max_element(quota.begin(), quota.end()) == *std::min_element(quota.begin(), quota.end())) return {};
  return quota;
}

namespace {
// An uneven split's epochs for the simulation: at least 4 of them (its steady
// state is over whole epochs after the first), shrunk in proportion to fit.
void SetStreamEpochs(SimConfig& c, std::vector<uint64_t> quota) {
  uint64_t epoch = 0;
  for (uint64_t q : quota) epoch += q;
  if (epoch == 0) return;
  if (4 * epoch > kMaxSimBatches) {
    const double shrink = static_cast<double>(kMaxSimBatches) / (4.0 * static_cast<double>(epoch));
    epoch = 0;
    for (auto& q : quota) epoch += q = q > 0 ? std::max<uint64_t>(1, std::llround(q * shrink)) : 0;
  }
  c.worker_quota = std::move(quota);
  c.batches = epoch * std::max<uint64_t>(4, (kMinSimBatches + epoch - 1) / epoch);
}

// The simulation of `p` with `workers` on `cores`, worker CPU and io scaled
// (a cache), under a background load.
SimConfig SimFor(const LoaderProfile& p, const std::vector<BatchCost>& costs, uint32_t workers, double cores,
                 double speedup, double cpu_scale, double io_scale, double background, int32_t step_threads = -1) {
  SimConfig c;
  c.workers = workers;
  c.prefetch_factor = std::max<uint32_t>(1, p.prefetch_factor);
  c.cores = cores;
  c.background_threads = background;
  const Step step = StepWithWorkers(p, workers, StepOf(p, speedup, step_threads));
  c.compute_cpu_s = step.cpu;
  c.compute_threads = step.threads;
  c.compute_parallel = HeldUpByOthers(step.parallel_threads, cores);
  c.compute_off_s = step.off;
  c.receive_cpu_s = workers > 0 ? MainReceiveSeconds(p) : p.next_overhead_s_per_batch.value;
  c.worker_loop_cpu_s = workers > 0 ? p.worker_loop_cpu_s_per_batch.value : 0;
  c.worker_gap_s = workers > 0 ? p.worker_gap_s_per_batch.value : 0;
  c.fetch_holds_gil = workers > 0 && p.fetch_holds_gil.value > 0.5;
  c.fetch_extra_cpu_s = ShmCollateSeconds(p, workers);
  c.costs = costs;
  c.cpu_scale = cpu_scale;
  c.io_scale = io_scale;
  c.batches = std::clamp(costs.size(), kMinSimBatches, kMaxSimBatches);
  SetStreamEpochs(c, StreamQuota(p, workers));
  c.steady_skip_first = p.warmup;
  c.steady_skip_last = workers * c.prefetch_factor;  // analyze's drain (LoaderAnalysis::drain_iterations)
  return c;
}
}  // namespace

bool ParallelStep(const LoaderProfile& p) {
  return p.intra_op_threads > 1 && RunnableStep(p).threads >= kParallelStepThreads;
}

// The profile's parallel step shared the cores with its workers: its CPU
// includes its threads' waiting for each other, which no scenario can take out.
bool ParallelStepOversubscribed(const LoaderProfile& p) {
  return ParallelStep(p) && p.workers > 0 && p.profiled_cores > 0 && p.intra_op_threads + p.workers > p.profiled_cores;
}

double StepWorkSeconds(const LoaderProfile& p, double speedup) { return StepOf(p, speedup, -1).cpu; }

double UncontendedComputeSeconds(const LoaderProfile& p) {
  const Step step = StepOf(p, 1, -1);
  return step.cpu / std::max(1.0, step.threads) + step.off;
}

double MainReceiveSeconds(const LoaderProfile& p) {
  return p.main_receive_s >= 0 ? p.main_receive_s : std::max(p.handoff_s_per_batch, p.receive_s_per_batch);
}

namespace {
// A cost only batches made by workers pay, timed after the run: added where
// the profile had no workers and the scenario has them, taken out (negative)
// where the profile had them and the scenario has none.
double OnlyFromWorkers(const LoaderProfile& p, uint32_t workers, const Input& cost) {
  if (workers > 0 && p.workers == 0) return cost.value;
  if (workers == 0 && p.workers > 0) return -cost.value;
  return 0;
}
}  // namespace

double ShmCollateSeconds(const LoaderProfile& p, uint32_t workers) {
  return OnlyFromWorkers(p, workers, p.shm_collate_cpu_s_per_batch);
}

double BatchTouchSeconds(const LoaderProfile& p, uint32_t workers) {
  return OnlyFromWorkers(p, workers, p.batch_touch_cpu_s_per_batch);
}

double FetchCpuWithWorkers(const LoaderProfile& p, uint32_t workers, double fetch_cpu_s) {
  return std::max(0.0, fetch_cpu_s + ShmCollateSeconds(p, workers));
}

double StepCpuWithWorkers(const LoaderProfile& p, uint32_t workers, double step_cpu_s) {
  return std::max(0.0, step_cpu_s + BatchTouchSeconds(p, workers));
}

double CpuSecondsAtMiss(const LoaderProfile& p, double miss) {
  const double profiled_miss = 1 - std::clamp(p.cold_hit_ratio, 0.0, 1.0);
  if (profiled_miss <= 0) return p.cpu_s_per_batch;  // no misses measured: none to scale
  const double miss_cpu = std::min(p.cpu_s_per_batch, p.cpu_s_per_storage_byte.value * p.storage_bytes_per_batch);
  return std::max(0.0, p.cpu_s_per_batch - miss_cpu * (1 - miss / profiled_miss));
}

double IoScaleAtMiss(const LoaderProfile& p, double miss) {
  const double profiled_miss = 1 - std::clamp(p.cold_hit_ratio, 0.0, 1.0);
  if (profiled_miss <= 0) return 1;
  const double storage = std::clamp(p.io_storage_share, 0.0, 1.0);
  return (1 - storage) + storage * miss / profiled_miss;
}

double FitDelayBackground(const LoaderProfile& p) {
  // A CPU quota throttles the job's threads all at once when its period's
  // time is spent, however many ran, and the kernel counts the throttled
  // time as run-queue delay: more than processor sharing over the quota's
  // cores shows, which fitted a load of no process (2 or 3 workers in a
  // 1-core quota on 2 cores, nothing else running: 0.16 threads, baselines
  // -8.6% to -10.0%; without the fit -1.0% to -3.0% over 8 quota profiles).
  // Other processes are then /proc/stat's alone (OutsideCompetingCores).
  if (p.profiled_cores <= 0 || p.profiled_in_cpu_quota) return 0;
  const double measured = p.delay_s_per_batch + p.compute_delay_s_per_batch;  // per batch, job threads
  // A delay under 1% of the batch's CPU is wake-up latency, not a load: on a
  // job that leaves a core idle, any delay at all would fit "one more busy
  // thread than the idle cores" (the demo's 11 us a batch read as 1.00).
  const double cpu = p.cpu_s_per_batch + (p.compute_cpu_s_per_batch.measured ? p.compute_cpu_s_per_batch.value : 0);
  if (measured <= 0 || measured < 0.01 * cpu) return 0;
  const auto costs = SimCosts(p, Draw::kWholeRun);
  // The measured delay covers every batch of the run, so the simulation runs
  // an epoch as profiled: from an empty pipeline, which all workers fill at
  // once. Epochs shorter than the prefetch window are all that burst (8
  // persistent workers, prefetch 2, 16 batches an epoch: 121 ms of delay a
  // fetch, which a long steady simulation put down to 1.33 threads of
  // outside load on a quiet machine, and the baseline at -18%).
  const size_t epoch_batches =
      p.batches_per_epoch >= 1 ? static_cast<size_t>(std::llround(p.batches_per_epoch)) : kMinSimBatches;
  const size_t sim_batches = std::min(epoch_batches, kMinSimBatches);
  const auto sim_at = [&](double background) {
    SimConfig c = SimFor(p, costs, p.workers, p.profiled_cores, 1, 1, 1, background);
    c.batches = sim_batches;
    return SimulateLoader(c);
  };
  const auto delay_at = [&](double background) {
    const SimResult r = sim_at(background);
    return (r.worker_delay_s + r.compute_delay_s + (p.workers == 0 ? r.job_delay_s - r.compute_delay_s : 0)) /
           static_cast<double>(sim_batches);
  };
  // Delay grows with the load: bisect for the load that shows the measured delay.
  const auto fit = [](const auto& delay, double target, double hi) {
    double lo = 0;
    if (delay(lo) >= target) return 0.0;
    if (delay(hi) <= target) return hi;
    for (int i = 0; i < 24; ++i) {
      const double mid = (lo + hi) / 2;
      (delay(mid) < target ? lo : hi) = mid;
    }
    return (lo + hi) / 2;
  };
  const double joint = fit(delay_at, measured, 4 * p.profiled_cores);
  // An outside load delays the step as it delays the workers. Where the
  // step ran on the CPU beside workers and waited for a core less than the
  // load fitted to the whole job would make it, the kernel favoured it over
  // the workers (an imagefolder CNN beside 8 workers on 2 cores: the workers
  // waited 83 ms a batch, the step 1.2 ms of 75): the workers' extra wait is
  // theirs, and as a load that slows the step it read as 0.85 threads and
  // the baseline at -19%. The step's own delay bounds the load.
  if (joint <= 0 || p.workers == 0 || !p.compute_cpu_s_per_batch.measured || p.StepCores() < kStepBoundsLoad)
    return joint;
  const auto step_delay_at = [&](double background) {
    return sim_at(background).compute_delay_s / static_cast<double>(sim_batches);
  };
  return std::min(joint, fit(step_delay_at, p.compute_delay_s_per_batch, joint));
}

namespace {
double BackgroundFromDelay(const LoaderProfile& p) {
  return p.delay_background_threads >= 0 ? p.delay_background_threads : FitDelayBackground(p);
}
}  // namespace

double CalibrateMainReceive(const LoaderProfile& p) {
  LoaderProfile uncalibrated = p;
  uncalibrated.main_receive_s = -1;
  const double lo = p.receive_s_per_batch, hi = MainReceiveSeconds(uncalibrated), measured = p.handoff_s_per_batch;
  if (p.workers == 0 || !(hi > lo) || !(p.profiled_cores > 0)) return hi;
  // The profiled configuration as the uncalibrated profile sees it: its outside
  // load is fitted from the measured delays with the receive taken whole,
  // and fitting it again with each receive tried would chase its own tail.
  SimConfig c = SimFor(uncalibrated, SteadySimCosts(p, p.workers), p.workers, p.profiled_cores, 1, 1, 1,
                       BackgroundThreads(uncalibrated));
  if (c.worker_quota.empty()) c.batches = kMinSimBatches;
  const auto handoff_at = [&](double receive) {
    c.receive_cpu_s = receive;
    return SimulateLoader(c).handoff_s / static_cast<double>(c.batches);
  };
  // The simulated handoff grows with the receive: bisect for the measured one.
  if (handoff_at(hi) <= measured) return hi;
  double low = lo, high = hi;
  if (handoff_at(low) >= measured) return lo;
  for (int i = 0; i < 20; ++i) {
    const double mid = (low + high) / 2;
    (handoff_at(mid) < measured ? low : high) = mid;
  }
  return (low + high) / 2;
}

double BackgroundThreads(const LoaderProfile& p) {
  // A busy process on a core the job left idle delays none of the job's
  // threads; /proc/stat's busy time less the job's own sees it. Below half a
  // core it is the launcher and the machine's housekeeping.
  const double outside = p.OutsideCompetingCores() >= kOutsideCoresSeen ? p.OutsideCompetingCores() : 0;
  return std::max(BackgroundFromDelay(p), outside + p.sibling_busy_threads);
}

double OwnDelayThreads(const LoaderProfile& p) {
  // The loaders iterated with this one are the job's: always kept; the rest
  // of the fit as before.
  const double siblings = p.sibling_busy_threads;
  if (!p.outside_busy_measured || p.OutsideCompetingCores() >= kOutsideCoresSeen) return siblings;
  const double excess = std::max(0.0, BackgroundFromDelay(p) - siblings);
  return siblings + std::min(excess, kOwnDelayThreadsMost);
}

double ScenarioBackground(const LoaderProfile& p, double requested) {
  if (requested >= 0) return requested;
  return requested == Scenario::kOthersAway ? OwnDelayThreads(p) : BackgroundThreads(p);
}

BusyShift CompareBusyCores(const Prediction& profiled, const Prediction& scenario) {
  if (scenario.busy_cores >= profiled.busy_cores + kBusyCoresApart) return BusyShift::kBusier;
  if (scenario.busy_cores <= profiled.busy_cores - kBusyCoresApart && scenario.waiting_threads <= profiled.waiting_threads)
    return BusyShift::kLessBusy;
  return BusyShift::kAsProfiled;
}

namespace {
// The loop's own work at epoch starts over a run of `epochs` epochs of
// `per_epoch` batches (LoaderProfile::warmup_extra_*), less the compute the
// simulation of the profiled configuration already gives an epoch's start
// beyond its steady steps (the step sharing the cores with workers filling
// their queues): work no DataLoader setting changes, so every scenario's
// whole run carries it as measured.
// `refork`: the scenario's later epochs that fork workers against the
// profile's (LoaderProfile::fork_refault_later_s is paid that much).
double SimulatedEpochStart(const LoaderProfile& p, const std::vector<BatchCost>& costs, uint32_t epochs,
                           double per_epoch) {
  // The profiled configuration, steady and from an empty pipeline.
  const SimConfig steady = SimFor(p, costs, p.workers, p.profiled_cores, 1, 1, 1, BackgroundThreads(p));
  const SimConfig epoch = OneEpoch(steady, per_epoch);
  const SimResult steady_sim = SimulateLoader(steady);
  const EpochMean epoch_sim = SimulateRunEpoch(p, epoch, p.persistent_workers, epochs);
  // SimFor runs at least kMinSimBatches.
  return std::max(
      0.0, epoch_sim.compute_s - static_cast<double>(epoch.batches) * steady_sim.compute_s / static_cast<double>(steady.batches));
}

double LoopWorkSeconds(const LoaderProfile& p, const std::vector<BatchCost>& costs, uint32_t epochs, double per_epoch,
                       double refork) {
  if (!(p.warmup_extra_first_s > 0) && !(p.warmup_extra_later_s > 0)) return 0;
  const double later = std::max(0.0, p.warmup_extra_later_s - p.fork_refault_later_s * std::max(0.0, 1 - refork));
  if (costs.empty() || !(p.profiled_cores > 0)) return p.warmup_extra_first_s + (epochs - 1) * later;
  // Simulated where the profile was built, for its own epochs (per_epoch is
  // the profile's unless it has none: then the scenario's simulated batches).
  const double simulated = p.epoch_start_simulated_s >= 0 && p.batches_per_epoch > 0
                               ? p.epoch_start_simulated_s
                               : SimulatedEpochStart(p, costs, epochs, per_epoch);
  return std::max(0.0, p.warmup_extra_first_s - simulated) + (epochs - 1) * std::max(0.0, later - simulated);
}

// The profile's epochs and batches per epoch as Predict takes them.
uint32_t ProfiledEpochs(const LoaderProfile& p) { return std::max<uint32_t>(1, p.epochs); }
double ProfiledBatchesPerEpoch(const LoaderProfile& p, double simulated_batches) {
  return std::max(1.0, std::round(p.batches_per_epoch > 0 ? p.batches_per_epoch : simulated_batches));
}
}  // namespace

double SimulateEpochStart(const LoaderProfile& p) {
  if ((!(p.warmup_extra_first_s > 0) && !(p.warmup_extra_later_s > 0)) || !(p.profiled_cores > 0) ||
      !(p.batches_per_epoch > 0))
    return -1;
  const auto costs = SimCosts(p, Draw::kWholeRun);
  if (costs.empty()) return -1;
  return SimulatedEpochStart(p, costs, ProfiledEpochs(p), ProfiledBatchesPerEpoch(p, 0));
}

Result<Prediction> Predict(const LoaderProfile& p, const Scenario& s) {
  if (Status st = Validate(p, s); !st.ok()) return st.error();
  Prediction out;
  const double b = p.SamplesPerBatch();
  const double cores = p.RankCores(s.machine.cores);
  const uint32_t workers = s.workers >= 0 ? static_cast<uint32_t>(s.workers) : p.workers;
  out.workers = workers;
  // The step alone: as measured, or on the scenario's fewer intra-op threads.
  const Step step = StepOf(p, s.accel_speedup, s.step_threads);
  const double alone = step.parallel_threads > 0 && step.parallel_threads < p.intra_op_threads
                           ? step.cpu / step.threads + step.off
                           : p.compute_s_per_batch / s.accel_speedup;
  const double compute = StepCpuWithWorkers(p, workers, alone);
  out.compute_s = compute;

  // Hit ratio and the io and CPU it leaves (the misses' share is scaled by the
  // miss ratio against the profiled run's).
  const double profiled_hit = std::clamp(p.cold_hit_ratio, 0.0, 1.0);
  double hit = profiled_hit;
  if (s.first_epoch) {
    hit = 0;  // a cold cache, whatever its size: every item is read once
  } else if (s.cache_bytes >= kCacheAll) {
    hit = 1;
  } else if (s.cache_bytes >= 0) {
    auto h = CacheHitRatio(p, static_cast<uint64_t>(s.cache_bytes), s.cache_policy, false);
    if (!h.ok()) return h.error();
    hit = *h;
  }
  out.hit_ratio = hit;
  out.hit_ratio_known = p.bytes_per_sample.value > 0 || (!s.first_epoch && s.cache_bytes >= 0);
  const double miss = 1 - hit;
  const double fetch_cpu = CpuSecondsAtMiss(p, miss);  // the measured fetches' CPU at this miss ratio
  const double cpu = FetchCpuWithWorkers(p, workers, fetch_cpu);
  out.cpu_s = cpu;
  const double io_scale = IoScaleAtMiss(p, miss);
  const double io = p.io_s_per_batch * io_scale;
  out.io_s = io;
  const double cpu_scale = p.cpu_s_per_batch > 0 ? fetch_cpu / p.cpu_s_per_batch : 1;
  const double bandwidth = s.storage_bandwidth > 0 ? s.storage_bandwidth : p.storage_bandwidth.value;
  const double bytes = p.bytes_per_sample.value * miss * p.device_bytes_per_missed_byte;
  const double r_bandwidth = (bandwidth > 0 && bytes > 0) ? bandwidth / bytes : kInf;
  const double background = ScenarioBackground(p, s.background_threads);
  out.background_threads = background;

  // The analytic rates: the sanity check of the simulation, and its terms for the reports.
  const double main_cpu = p.compute_cpu_s_per_batch.measured
                              ? StepWithWorkers(p, workers, step).cpu + p.receive_s_per_batch
                              : -1;
  const Terms t = Pipelined(p, cpu, p.worker_loop_cpu_s_per_batch.value, main_cpu, compute, cores, std::max(1u, workers), io,
                            bandwidth, miss);
  out.r_compute = t.r_compute;
  out.r_main = workers > 0 ? t.r_main : t.r_compute;
  out.r_prep = workers > 0 ? t.r_prep : Rate(b, cpu);
  out.r_workers = workers > 0 ? t.r_workers : Rate(b, cpu + io);
  out.r_fetch = workers > 0 ? t.r_fetch : (std::isinf(r_bandwidth) ? Rate(b, io) : r_bandwidth);
  out.analytic_samples_per_s = workers > 0 ? t.samples_per_s : Rate(b, compute + cpu + io + p.next_overhead_s_per_batch.value);
  out.handoff_s = workers > 0 ? MainReceiveSeconds(p) : p.next_overhead_s_per_batch.value;

  // Steady state: the simulation over the measured per-batch costs.
  SimConfig config = SimFor(p, SteadySimCosts(p, workers), workers, cores, s.accel_speedup, cpu_scale, io_scale, background,
                            s.step_threads);
  out.step_threads = step.parallel_threads;
  out.step_oversubscribed = HeldUpByOthers(out.step_threads, cores) && out.step_threads + workers + background > cores;
  if (s.prefetch_factor > 0) config.prefetch_factor = static_cast<uint32_t>(s.prefetch_factor);
  const SimResult sim = SimulateLoader(config);
  if (!(sim.steady_step_s > 0))
    return UnsupportedError("loader '" + p.name + "' has no measured cost per batch (compute, CPU and io are all 0)");
  const double n = static_cast<double>(config.batches);
  out.samples_per_s = std::min(b / sim.steady_step_s, r_bandwidth);
  out.step_s = b / out.samples_per_s;
  out.compute_step_s = sim.compute_s / n;
  out.delay_s = (workers > 0 ? sim.worker_delay_s : sim.job_delay_s - sim.compute_delay_s) / n;
  out.waiting_threads = sim.seconds > 0 ? sim.job_delay_s / sim.seconds : 0;
  out.busy_cores = sim.seconds > 0 ? sim.job_cpu_s / sim.seconds : 0;

  // T_prep: the same with everything cached (no io, no miss CPU).
  SimConfig cached = config;
  cached.io_scale = IoScaleAtMiss(p, 0);  // blocking that is not storage stays, as in analyze's T_prep
  cached.cpu_scale = p.cpu_s_per_batch > 0 ? CpuSecondsAtMiss(p, 0) / p.cpu_s_per_batch : 1;
  const SimResult cached_sim = SimulateLoader(cached);
  out.prep_step_s = cached_sim.steady_step_s > 0 ? cached_sim.steady_step_s : out.step_s;

  // What bounds the predicted step: storage bandwidth when it caps the rate;
  // else the main loop when it never waits for a batch (compute, or the
  // handoff when receiving costs more than computing: recommend's "model
  // ingest" binds then, and the handoff column says how much of the step it
  // takes); else what the workers spend most on.
  const double waiting = std::max(0.0, 1 - (sim.compute_s + sim.receive_s) / std::max(sim.seconds, 1e-12));
  if (r_bandwidth <= out.samples_per_s * (1 + 1e-9)) out.bottleneck = Bottleneck::kFetch;
  else if (waiting < kModeratelyInputBound)
    out.bottleneck = out.handoff_s > out.compute_step_s ? Bottleneck::kHandoff : Bottleneck::kCompute;
  else if (io > cpu + out.delay_s) {
    // Of the io, what the cache leaves of the storage part against the blocking every fetch does.
    const double blocking = p.io_s_per_batch * IoScaleAtMiss(p, 0);
    const bool storage = (p.storage_bytes_per_batch > 0 || p.bytes_per_sample.value > 0) && io - blocking > blocking;
    out.bottleneck = storage ? Bottleneck::kFetch : Bottleneck::kBlocking;
  }
  else out.bottleneck = Bottleneck::kPrep;

  // The whole run: per epoch the start-up, the pipeline filling from empty,
  // and the epoch's batches. Workers start in parallel, each start a fixed
  // amount of work (spawn: an interpreter importing torch), so start-up
  // grows with the workers per core, except the part __iter__ spent starting
  // them one after another (startup_serial_share), which grows with the
  // workers; persistent workers start once.
  const uint32_t epochs = ProfiledEpochs(p);
  const double per_epoch = ProfiledBatchesPerEpoch(p, n);
  double startup_first = 0, startup_later = 0;
  const bool persistent = s.persistent_workers >= 0 ? s.persistent_workers > 0 : p.persistent_workers;
  out.startup_measured = workers == 0 || p.workers > 0 || p.startup_timed;
  const auto waves = [](double w, double c) { return std::max(1.0, w / std::max(c, 1.0)); };
  if (workers > 0 && (p.workers > 0 || p.startup_timed)) {
    // The timing after a run without workers started one worker.
    const double profiled_waves = p.workers > 0 ? waves(p.workers, p.profiled_cores > 0 ? p.profiled_cores : cores) : 1;
    // The serial part grows with the workers, the parallel part with the waves.
    // (Timed after a run without workers: the serial part is the job's fork.)
    const double serial = p.workers > 0 || p.startup_timed ? std::clamp(p.startup_serial_share, 0.0, 1.0) : 0;
    const double scale = serial * workers / std::max(1u, p.workers) + (1 - serial) * waves(workers, cores) / profiled_waves;
    startup_first = p.startup_first_s * scale;
    // Workers restart with each epoch, or with persistent_workers=True with
    // each DataLoader object only (they die with it: a loader built anew each
    // epoch restarts them every epoch all the same).
    auto restarts = [&](bool persists) { return static_cast<double>(StartingEpochs(p, persists, epochs) - 1); };
    const double profiled_restarts = restarts(p.persistent_workers);
    const double per_restart = profiled_restarts > 0 ? p.startup_later_s * (epochs - 1) / profiled_restarts : p.startup_first_s;
    startup_later = epochs > 1 ? restarts(persistent) * per_restart * scale / (epochs - 1) : 0;
  }
  const auto all_costs = SimCosts(p, Draw::kWholeRun);
  SimConfig epoch = OneEpoch(config, per_epoch);
  epoch.costs = all_costs;
  const EpochMean epoch_sim = SimulateRunEpoch(p, epoch, persistent, epochs);
  // An epoch's reads take at least its bytes over the storage bandwidth (the
  // simulation's workers read independently; the cap is the shared device).
  // An epoch's samples: a partial last batch counts as such. Per batch
  // simulated: the profile's stepped batches per epoch may fall short of the
  // whole batches simulated (a read-ahead loop's last step, after its
  // StopIteration, unseen: 23 of 24 batches over 6 epochs put the whole run
  // 4% low, 3.83 batches' samples in the time of 4).
  const double epoch_samples = p.samples_per_epoch > 0
                                   ? p.samples_per_epoch * (p.batches_per_epoch > 0 ? per_epoch / p.batches_per_epoch : 1)
                                   : per_epoch * b;
  const auto epoch_seconds = [&](const EpochMean& simulated) {
    return std::max(simulated.seconds + (per_epoch - static_cast<double>(epoch.batches)) * sim.steady_step_s,
                    epoch_samples / r_bandwidth);
  };
  const double epoch_s = epoch_seconds(epoch_sim);
  // Workers that do not persist are joined at each epoch's end, a cost per
  // worker (measured where the profile had them; else unknown, 0).
  double shutdowns = 0;
  if (workers > 0) {
    shutdowns = persistent ? 0
                           : epochs * (p.shutdown_s_per_worker * workers +
                                       p.shutdown_exit_extra_s * waves(workers, cores));
  }
  // Later epochs that fork workers, the scenario's against the profile's.
  const double profiled_reforks = static_cast<double>(StartingEpochs(p, p.persistent_workers, epochs)) - 1;
  const double refork = !(profiled_reforks > 0) ? 1
                        : workers == 0          ? 0
                                                : (static_cast<double>(StartingEpochs(p, persistent, epochs)) - 1) / profiled_reforks;
  const double loop_work = LoopWorkSeconds(p, all_costs, epochs, per_epoch, refork);
  // The sampler's first draw of each epoch: main-thread work before any batch, whatever the workers.
  const double sampler = epochs * p.sampler_s_per_epoch;
  double epochs_s = epochs * epoch_s;
  if (p.iterator_kept && persistent && epochs > 1) {
    // One iterator for every epoch fills its pipeline once: the first epoch
    // as simulated from empty, the later ones at the steady step (their
    // first batches were made during the pause before them). As an average
    // epoch (epoch_s) every later epoch refilled: 6% slow on a 4-epoch
    // InfiniteDataLoader run.
    epochs_s = epoch_seconds(SimulateRunEpoch(p, epoch, persistent, 1)) +
               (epochs - 1) * std::max(per_epoch * sim.steady_step_s, epoch_samples / r_bandwidth);
  }
  const double total = epochs_s + startup_first + (epochs - 1) * startup_later + shutdowns + sampler + loop_work;
  out.startup_s_per_epoch = (startup_first + (epochs - 1) * startup_later + shutdowns + sampler) / epochs;
  out.loop_work_s_per_epoch = loop_work / epochs;
  out.whole_run_samples_per_s = total > 0 ? std::min(epochs * epoch_samples / total, r_bandwidth) : 0;

  // The DS-Analyzer split of the predicted step, as analyze's account splits
  // the measured one: ingest (compute) | handoff | prep | fetch. The main
  // loop pays the handoff after each batch is ready, so it is stall even when
  // the batch was (analyze: "handoff"); what else caching would not remove is prep.
  out.prep_step_s = std::clamp(out.prep_step_s, std::min(out.compute_step_s, out.step_s), out.step_s);
  if (out.step_s > 0) {
    out.stall_fraction = std::max(0.0, 1 - out.compute_step_s / out.step_s);
    const double cached_stall = std::max(0.0, out.prep_step_s - out.compute_step_s);
    const double handoff = std::min(out.handoff_s, cached_stall);
    out.handoff_stall_fraction = handoff / out.step_s;
    out.prep_stall_fraction = (cached_stall - handoff) / out.step_s;
    out.fetch_stall_fraction = (out.step_s - out.prep_step_s) / out.step_s;
  }
  return out;
}

Result<LoaderProfile> MoveStagesToWorkers(const LoaderProfile& profile, const std::vector<std::string>& names) {
  LoaderProfile p = profile;
  for (const std::string& name : names) {
    auto it = std::find_if(p.main_stages.begin(), p.main_stages.end(), [&](const MainStageProfile& m) { return m.name == name; });
    if (it == p.main_stages.end()) {
      std::string known;
      for (const auto& m : p.main_stages) known += (known.empty() ? "" : ", ") + m.name;
      return UsageError(fmt::format("--move-to-workers {}: loader '{}' has no stage '{}' on its main thread ({})", name, p.name,
                                    name, known.empty() ? "it has none: mark one with `with stallprof.stage(\"name\"):`"
                                                        : "its stages: " + known));
    }
    const double cpu = it->cpu_s_per_batch, off_cpu = std::max(0.0, it->wall_s_per_batch - cpu);
    p.compute_s_per_batch = std::max(0.0, p.compute_s_per_batch - it->wall_s_per_batch);
    if (p.compute_cpu_s_per_batch.measured)
      p.compute_cpu_s_per_batch.value = std::max(0.0, p.compute_cpu_s_per_batch.value - cpu);
    if (p.compute_main_thread_cpu_s_per_batch >= 0)  // the stage ran on the main thread
      p.compute_main_thread_cpu_s_per_batch = std::max(0.0, p.compute_main_thread_cpu_s_per_batch - cpu);
    p.cpu_s_per_batch += cpu;
    p.io_s_per_batch += off_cpu;
    p.produce_s_per_batch += it->wall_s_per_batch;
    p.produce_p99_s += it->wall_s_per_batch;
    for (BatchCost& b : p.batch_costs) {
      b.cpu_s += static_cast<float>(cpu);
      b.io_s += static_cast<float>(off_cpu);
    }
    const double b = p.SamplesPerBatch() > 0 ? p.SamplesPerBatch() : 1;
    p.stages.push_back({name, cpu / b, it->wall_s_per_batch / b, 0, true});
    p.main_stages.erase(it);
  }
  return p;
}

int32_t StepThreadsBesideWorkers(double cores, uint32_t workers) {
  return std::max(1, static_cast<int32_t>(std::floor(cores)) - static_cast<int32_t>(workers));
}

std::optional<Prediction> PredictWithFewerStepThreads(const LoaderProfile& p, const Scenario& s, const Prediction& r) {
  if (!r.step_oversubscribed) return std::nullopt;
  Scenario fewer = s;
  fewer.step_threads = StepThreadsBesideWorkers(p.RankCores(s.machine.cores), r.workers);
  auto f = Predict(p, fewer);
  if (!f.ok() || f->step_threads >= r.step_threads) return std::nullopt;
  return *f;
}

bool MissCpuIsEstimated(const LoaderProfile& p) {
  return !p.cpu_s_per_storage_byte.measured && p.cpu_s_per_storage_byte.value > 0;
}

std::optional<Prediction> PredictMissCpuFloor(LoaderProfile& p, const Scenario& s, const Prediction& r) {
  if (!MissCpuIsEstimated(p)) return std::nullopt;
  const double estimate = p.cpu_s_per_storage_byte.value;
  p.cpu_s_per_storage_byte.value = 0;
  auto floor = Predict(p, s);
  p.cpu_s_per_storage_byte.value = estimate;
  if (!floor.ok() || std::abs(floor->samples_per_s - r.samples_per_s) <= 0.01 * r.samples_per_s) return std::nullopt;
  return *floor;
}

}  // namespace stallprof::model
