#include "account.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "common/units.h"
#include "model/model.h"
#include "model/whatif.h"

namespace stallprof::analysis {

const char* ToString(Cause cause) {
  switch (cause) {
    case Cause::kCompute: return "compute";
    case Cause::kPrep: return "worker CPU (prep)";
    case Cause::kContention: return "CPU contention";
    case Cause::kStorage: return "storage";
    case Cause::kOtherBlocking: return "other blocking";
    case Cause::kHandoff: return "handoff";
    case Cause::kStartup: return "epoch start-up";
    case Cause::kStallprof: return "stallprof's own cost";
  }
  return "?";
}

const char* ToString(Cause cause, int32_t num_workers) {
  // Without workers the main process makes each batch: there is no worker's CPU to name.
  if (cause == Cause::kPrep && num_workers == 0) return "prep CPU (no workers)";
  return ToString(cause);
}

const char* CauseId(Cause cause) {
  switch (cause) {
    case Cause::kCompute: return "compute";
    case Cause::kPrep: return "prep";
    case Cause::kContention: return "contention";
    case Cause::kStorage: return "storage";
    case Cause::kOtherBlocking: return "other_blocking";
    case Cause::kHandoff: return "handoff";
    case Cause::kStartup: return "startup";
    case Cause::kStallprof: return "stallprof";
  }
  return "?";
}

namespace internal {

std::vector<bool> CalibrationNames(const Trace& trace) {
  std::vector<bool> out(trace.strings.size(), false);
  for (size_t i = 0; i < trace.strings.size(); ++i) out[i] = trace.strings[i].rfind(names::kCalibrationPrefix, 0) == 0;
  return out;
}

HookCost ReadHookCost(const Trace& trace, uint32_t pid) {
  HookCost cost;
  for (const auto& c : trace.configs) {
    if (c.pid != pid || c.scope != 0) continue;
    double v = c.type == ConfigValue::Type::kU64 ? static_cast<double>(c.u64)
               : c.type == ConfigValue::Type::kF64 ? c.f64
                                                   : std::atof(c.str.c_str());
    double* field = c.key == "hook_ns_wait"      ? &cost.wait_ns
                    : c.key == "hook_ns_fetch"   ? &cost.fetch_ns
                    : c.key == "hook_ns_sample"  ? &cost.sample_ns
                    : c.key == "hook_ns_collate" ? &cost.collate_ns
                    : c.key == "hook_ns_wait_counters"  ? &cost.wait_counters_ns
                    : c.key == "hook_ns_fetch_counters" ? &cost.fetch_counters_ns
                                                        : nullptr;
    if (field && v >= 0) {
      *field = v;
      cost.measured = true;
    }
  }
  return cost;
}

namespace {

constexpr double kNs = 1e-9;
constexpr size_t kN = kCauseCount;
// Worker CPU with at least this kernel share and this many page faults per
// batch (4 MiB of 4 KiB pages faulted each batch) gets the allocator advice.
// Measured on this VM: the ImageFolder decode's worker 31-35% kernel and
// 4200-5400 faults per batch in its slow runs, 11-22% and 200-860 in its fast
// ones; the demo's val worker with fixed thresholds 26% and 404 (collating
// into a new shared-memory segment faults the batch's own pages each time,
// which no allocator setting removes).
constexpr double kKernelHeavyShare = 0.25;
constexpr double kFaultsHeavyPerBatch = 1024;
// A step that faults this many pages (8 MiB) gets the allocator advice on its
// compute line, where at least kKernelHeavyShare of the training process's
// CPU is the kernel's (or the trace does not say). The bundled demo's CNN step:
// 2.5x faster with fixed malloc thresholds (1135 against 446 samples/s,
// bench_overhead.sh 6 demo). A torchvision FakeData CNN (batch 64, 2 workers):
// 2900-3850 faults and 31% kernel a step, mean step 56-71 -> 35-37 ms with
// the thresholds (its slow steps gone), still 1330-1520 faults and 26-28%
// kernel then (the batches' shared memory, mapped afresh each time).
constexpr double kMainFaultsHeavyPerBatch = 2048;
// Under glibc's dynamic thresholds (the hook recorded plain "glibc") with the
// kernel share known, from this many: the refaulting is what those
// thresholds do, and a step's few big buffers cost more than their page
// count says (unmapping them stops the process's other threads). A text
// classifier (EmbeddingBag + MLP, 64 padded sequences a step, 2 workers):
// 720 faults and 33% kernel a step, its first epoch 2.3x slower than its
// second; with the thresholds fixed 60 faults, 22%, and the whole run 2.1x
// faster (3182 -> 6800 samples/s).
// The text classification tutorial without workers: 344 faults a step, its
// steps 28-30% in the kernel (StepKernelShare), 1.3-1.5x faster fixed; 251
// faults in one of its runs, 106-110 with 2 workers (whose kernel time is
// unmapping the received batches, which no malloc setting keeps).
constexpr double kMainFaultsHeavyPerBatchDynamic = 200;
// Under glibc's dynamic thresholds, a step that faults kMainFaultsHeavyPerBatch
// or more pages beyond its received batch's own (the shared memory a worker
// sent, which no malloc setting keeps) is refaulting its freed tensors, and
// fixing the thresholds saves about the kernel's share of the step: from this
// share on. pytorch/examples' siamese_network (resnet18 on MNIST pairs, no
// workers, 2 intra-op threads): 31068 faults and 16.5% kernel a step, its
// step 284 -> 241 ms with the thresholds fixed (1513 faults, 0.9% kernel), the
// run 1.18-1.25x faster (2 alternated pairs, 2026-12-06).
constexpr double kStepKernelChurnShare = 0.10;
// A cause other than the bottleneck gets its advice from this share of the time.
constexpr double kAdvisedShare = 0.05;
// A worker's set-up in its first item worth naming in the start-up's evidence.
constexpr double kSetupShownS = 1e-3;
using Weights = std::array<double, kN>;
size_t I(Cause c) { return static_cast<size_t>(c); }

// Nanoseconds per cause, and the tallies the evidence strings need.
struct Ledger {
  std::array<int64_t, kN> ns{};
  uint64_t batches = 0;
  uint64_t stepped = 0;              // batches whose step was seen (not taken as the loop left an epoch)
  uint64_t waits_by_fetch = 0;       // split by their own fetch span
  uint64_t waits_by_mean = 0;        // no matching fetch span: the loader's mean proportions
  uint64_t waits_handoff = 0;        // the batch was ready
  int64_t handoff_receive_cpu = 0;   // of the handoff, the main thread on CPU in those next() calls (receiving)
  int64_t before_first_next = 0;     // compute between __iter__'s return and the first next()
  int64_t startup_create = 0, startup_first = 0, startup_shutdown = 0;
  uint64_t epochs = 0;

  // Adds `d` ns over the causes in proportion to `w`; integer ns, the
  // remainder to the largest weight, so nothing is lost or made up.
  void Spread(int64_t d, const Weights& w) {
    if (d <= 0) return;
    double sum = 0;
    size_t largest = 0;
    for (size_t k = 0; k < kN; ++k) {
      sum += w[k];
      if (w[k] > w[largest]) largest = k;
    }
    if (sum <= 0) {
      ns[I(Cause::kOtherBlocking)] += d;
      return;
    }
    int64_t given = 0;
    for (size_t k = 0; k < kN; ++k) {
      if (k == largest) continue;
      const int64_t part = static_cast<int64_t>(std::floor(d * (w[k] / sum)));
      ns[k] += part;
      given += part;
    }
    ns[largest] += d - given;
  }
  void Add(Cause c, int64_t d) { ns[I(c)] += d; }
  Ledger& operator+=(const Ledger& o) {
    for (size_t k = 0; k < kN; ++k) ns[k] += o.ns[k];
    batches += o.batches;
    stepped += o.stepped;
    waits_by_fetch += o.waits_by_fetch;
    waits_by_mean += o.waits_by_mean;
    waits_handoff += o.waits_handoff;
    handoff_receive_cpu += o.handoff_receive_cpu;
    before_first_next += o.before_first_next;
    startup_create += o.startup_create;
    startup_first += o.startup_first;
    startup_shutdown += o.startup_shutdown;
    epochs += o.epochs;
    return *this;
  }
};

struct Context {
  const LoaderAnalysis& loader;
  const FetchFactList& fetches;
  HookCost hook{};
  double miss_cpu_ns_per_byte = 0;
  // The median off-CPU time of the loader's measured fetches that read
  // nothing from the device (a sleep, a lock, a network call every fetch
  // makes); 0 with too few of them. A fetch that also read the device spent
  // that much of its off-CPU time the same way, the rest on the device.
  double off_cpu_without_device_ns = 0;
  FetchesByBatch worker_fetch_of_batch{};                                    // batch -> fetch indices
  std::vector<uint32_t> main_fetches{};                                      // num_workers = 0, by start
  Weights mean{};                                                            // the loader's mean proportions
  bool has_mean = false;
  double samples_per_batch = 1;

  int64_t WrapperInside() const { return static_cast<int64_t>(hook.wait_ns / 2); }
  int64_t WrapperOutside() const { return static_cast<int64_t>(hook.wait_ns) - WrapperInside(); }
  double WorkerHookNs() const { return hook.fetch_ns + samples_per_batch * hook.sample_ns + hook.collate_ns; }

  // Proportions of one fetch span: CPU (less what storage misses cost),
  // run-queue delay, off CPU (storage only with device bytes). False without
  // CPU. `miss_out`: the storage weight's CPU part (the rest is off CPU).
  bool WeightsOf(const FetchFact& f, Weights& w, double* miss_out = nullptr) const {
    if (!f.has_cpu || f.end_ns <= f.start_ns) return false;
    w.fill(0);
    const double produce = static_cast<double>(f.end_ns - f.start_ns);
    double cpu = static_cast<double>(f.cpu_ns), delay = static_cast<double>(f.delay_ns);
    if (cpu + delay > produce) {  // clocks of different resolution: keep the ratio
      const double scale = produce / (cpu + delay);
      cpu *= scale;
      delay *= scale;
    }
    const double io = std::max(0.0, produce - cpu - delay);
    const double miss = f.device_bytes > 0 ? std::min(cpu, miss_cpu_ns_per_byte * f.device_bytes) : 0;
    if (miss_out) *miss_out = miss;
    w[I(Cause::kPrep)] = cpu - miss;
    w[I(Cause::kContention)] = delay;
    // Off CPU beyond what fetches without device reads spend, as often as
    // this fetch (or its stratum's sampled fetches) read the device.
    const double other = io - f.reading * (io - std::min(io, off_cpu_without_device_ns));
    w[I(Cause::kOtherBlocking)] += other;
    w[I(Cause::kStorage)] += io - other + miss;
    return true;
  }
};

int64_t Ns(uint64_t from, uint64_t to) { return to > from ? static_cast<int64_t>(to - from) : 0; }

// The main loop after next() returned, less other loaders run whole inside it.
int64_t ComputeNs(const Iteration& it) {
  return std::max<int64_t>(0, Ns(it.return_ns, it.compute_end_ns) - static_cast<int64_t>(std::llround(it.nested_s * 1e9)));
}

// The main loop after next() returned: compute, less the next() wrapper's part outside the wait.
void AccountCompute(const Context& c, int64_t d, Ledger& l) {
  const int64_t hook = std::min(d, c.WrapperOutside());
  l.Add(Cause::kStallprof, hook);
  l.Add(Cause::kCompute, d - hook);
}

void AccountWait(const Context& c, const Iteration& it, bool startup, Ledger& l, uint64_t workers_ready_ns = 0) {
  const auto& loader = c.loader;
  int64_t wait = Ns(it.wait_start_ns, it.return_ns);
  l.batches++;
  l.stepped += !it.compute_unknown;
  // A later batch's wait for a worker still starting (its epoch's workers
  // start one after another) is start-up up to the last worker's start.
  if (!startup && workers_ready_ns > it.wait_start_ns) {
    const int64_t starting = Ns(it.wait_start_ns, std::min(it.return_ns, workers_ready_ns));
    l.Add(Cause::kStartup, starting);
    l.startup_first += starting;
    wait -= starting;
  }
  const int64_t inside = std::min(wait, c.WrapperInside());
  if (startup) {
    l.Add(Cause::kStallprof, inside);
    l.Add(Cause::kStartup, wait - inside);
    l.startup_first += wait - inside;
    return;
  }
  if (loader.config.num_workers > 0) {
    if (it.batch_deliverable) {
      l.waits_handoff++;
      l.Add(Cause::kStallprof, inside);
      // The main thread's run-queue delay in this next() is contention, not receiving.
      const int64_t queued = std::min(wait - inside, static_cast<int64_t>(it.receive_delay_s * 1e9));
      l.Add(Cause::kContention, queued);
      l.Add(Cause::kHandoff, wait - inside - queued);
      if (it.receive_s >= 0)
        l.handoff_receive_cpu += std::clamp<int64_t>(static_cast<int64_t>((it.receive_s - it.receive_delay_s) * 1e9), 0,
                                                     wait - inside - queued);
      return;
    }
    // The awaited batch: the first fetch of its index since its iterator was made.
    const int64_t found = c.worker_fetch_of_batch.FirstAtOrAfter(it.batch_index, loader.epochs[it.epoch].iterator_start_ns);
    const FetchFact* fetch = found >= 0 ? &c.fetches[found] : nullptr;
    Weights w{};
    l.Add(Cause::kStallprof, inside);
    const int64_t rest = wait - inside;
    if (fetch && c.WeightsOf(*fetch, w)) {
      // The worker's hook events are part of the production this wait covers:
      // all of them when it covers the whole fetch span, in proportion when less.
      const double produce = static_cast<double>(fetch->end_ns - fetch->start_ns);
      const int64_t hook = std::min<int64_t>(rest, static_cast<int64_t>(c.WorkerHookNs() * std::min(1.0, rest / produce)));
      l.waits_by_fetch++;
      l.Add(Cause::kStallprof, hook);
      l.Spread(rest - hook, w);
    } else {
      l.waits_by_mean++;
      l.Spread(rest, c.has_mean ? c.mean : Weights{});
    }
    return;
  }
  // num_workers = 0: the fetch spans inside this wait; the rest is the
  // DataLoader's own per-batch code (handoff). The hook's cost of this wait
  // comes out of both parts in proportion to their length.
  auto first = std::lower_bound(c.main_fetches.begin(), c.main_fetches.end(), it.wait_start_ns,
                                [&](uint32_t f, uint64_t t) { return c.fetches[f].start_ns < t; });
  int64_t fetch_ns = 0, fetch_delay_ns = 0;
  Weights w{};
  bool by_fetch = false;
  uint64_t fetch_count = 0;
  for (auto f = first; f != c.main_fetches.end() && c.fetches[*f].start_ns < it.return_ns; ++f) {
    const FetchFact& x = c.fetches[*f];
    fetch_ns += Ns(x.start_ns, std::min(x.end_ns, it.return_ns));
    fetch_delay_ns += static_cast<int64_t>(x.delay_ns);
    fetch_count++;
    Weights one{};
    if (c.WeightsOf(x, one)) {
      by_fetch = true;
      for (size_t k = 0; k < kN; ++k) w[k] += one[k];
    }
  }
  fetch_ns = std::min(fetch_ns, wait);
  const double hook_ns = c.hook.wait_ns / 2 + (fetch_count ? c.WorkerHookNs() * fetch_count : 0);
  const int64_t hook = std::min(wait, static_cast<int64_t>(hook_ns));
  const int64_t hook_in_fetch = wait > 0 ? static_cast<int64_t>(static_cast<double>(hook) * fetch_ns / wait) : 0;
  l.Add(Cause::kStallprof, hook);
  // Outside the fetch spans: the main thread's run-queue delay there (the wait
  // span's delay less the fetch spans') is contention, the rest handoff.
  const int64_t outside = wait - fetch_ns - (hook - hook_in_fetch);
  const int64_t queued = std::clamp<int64_t>(static_cast<int64_t>(it.receive_delay_s * 1e9) - fetch_delay_ns, 0, std::max<int64_t>(0, outside));
  l.Add(Cause::kContention, queued);
  // The epoch's first next() draws the sampler's first indices: its per-epoch
  // work (a permutation, a sort) is the epoch's start-up, not per-batch code.
  int64_t sampler = 0;
  if (const EpochStats& epoch = loader.epochs[it.epoch]; epoch.sampler_first_ns >= it.wait_start_ns && epoch.sampler_first_ns < it.return_ns)
    sampler = std::min<int64_t>(outside - queued, std::llround(epoch.sampler_first_s * 1e9));
  l.Add(Cause::kStartup, sampler);
  l.Add(Cause::kHandoff, outside - queued - sampler);
  if (fetch_ns > 0) {
    if (by_fetch) l.waits_by_fetch++;
    else l.waits_by_mean++;
    l.Spread(fetch_ns - hook_in_fetch, by_fetch ? w : c.has_mean ? c.mean : Weights{});
  }
}

// Means over the loader's fetch spans, for the evidence strings.
struct FetchMeans {
  uint64_t fetches = 0, with_cpu = 0, with_reads = 0;
  double produce = 0, cpu = 0, delay = 0, io = 0, io_no_device = 0;  // ns per fetch with CPU
  double no_device = 0;                     // fetches without device reads (a skipped one in part)
  double device_bytes = 0, call_bytes = 0;  // totals over fetches with read spans
  double fetches_with_device_bytes = 0;     // likewise: a skipped fetch counts as its stratum's share
};

FetchMeans MeansOf(const FetchFactList& fetches) {
  FetchMeans m;
  for (const auto& f : fetches) {
    m.fetches++;
    if (f.device_bytes >= 0) {
      m.with_reads++;
      m.device_bytes += static_cast<double>(f.device_bytes);
      m.call_bytes += std::max<double>(0, static_cast<double>(f.call_bytes));
      m.fetches_with_device_bytes += f.reading;
    }
    if (!f.has_cpu) continue;
    m.with_cpu++;
    const double produce = static_cast<double>(f.end_ns - f.start_ns);
    const double io = std::max(0.0, produce - f.cpu_ns - f.delay_ns);
    m.produce += produce;
    m.cpu += f.cpu_ns;
    m.delay += f.delay_ns;
    m.io += io;
    m.io_no_device += io * (1 - f.reading);
    m.no_device += 1 - f.reading;
  }
  if (m.with_cpu) {
    m.produce /= m.with_cpu;
    m.cpu /= m.with_cpu;
    m.delay /= m.with_cpu;
    m.io /= m.with_cpu;
  }
  if (m.no_device > 0) m.io_no_device /= m.no_device;
  return m;
}

// The CPU and kernel CPU (ns) of the fetches that recorded both, summed, and how many did.
struct FetchKernelCpu {
  double cpu_ns = 0, kernel_ns = 0;
  uint64_t fetches = 0;
};
FetchKernelCpu KernelCpuOf(const FetchFactList& fetches) {
  FetchKernelCpu sums;
  for (const auto& f : fetches)
    if (f.has_cpu && f.system_ns >= 0) {
      sums.cpu_ns += static_cast<double>(f.cpu_ns);
      sums.kernel_ns += static_cast<double>(f.system_ns);
      ++sums.fetches;
    }
  return sums;
}

// The fetching threads' CPU in the kernel as a share of their CPU, and per
// fetch in seconds, over the fetches that recorded both; -1 each when none did.
std::pair<double, double> KernelShare(const FetchKernelCpu& sums) {
  if (sums.cpu_ns <= 0) return {-1, -1};
  return {std::min(1.0, sums.kernel_ns / sums.cpu_ns),
          std::min(sums.kernel_ns, sums.cpu_ns) / static_cast<double>(sums.fetches) * kNs};
}

// A sampled counter of the worker processes per batch they fetched, summed
// over the workers the sampler saw at least twice (it finds a new process
// within a second, so a short-lived worker may have one sample or none).
// Whole window: each worker's counter between its first and last sample (a
// worker only fetches, pickles and sends; idle, it blocks) over the fetches in
// it (whole fetches only). Fetch window: the counter between its first sample
// at or after the start of its first fetch and its last at or before the end
// of its last, so a start-up that costs (spawn imports torch) and a shutdown
// stay out; the fetches count, and `less` is taken off, by the share of each
// inside that window. Interpolating the counter at the fetches' ends instead
// takes a sampler period's uneven work for even: with 100 ms between samples
// and a worker idle for part of them, the loop's CPU read 96 us a batch in a
// run with a validation pass every 20 steps and 254 us without (442 and 336
// us between samples). Only a worker with fewer than two samples among its
// fetches (short-lived) is interpolated. A worker needs `min_batches` there.
// -1 when no worker qualified, or without workers or the counter.
enum class Window { kWhole, kFetches };
template <typename Counter, typename Less>
double WorkerCounterPerBatch(const Trace& trace, const FetchFactList& fetches, uint32_t loader_pid, Counter counter,
                             Less less, Window window = Window::kWhole, uint64_t min_batches = 1) {
  std::unordered_map<uint32_t, const ProcessSeries*> series_of;
  for (const auto& f : fetches) {
    if (f.pid == loader_pid || series_of.count(f.pid)) continue;
    series_of[f.pid] = nullptr;
    for (const auto& s : trace.process_series)
      if (s.pid == f.pid && counter(s).size() >= 2 && counter(s).size() == s.t_ns.size()) series_of[f.pid] = &s;
  }
  double total = 0, batches = 0;
  for (const auto& [worker_pid, series] : series_of) {
    if (!series) continue;
    const uint32_t pid = worker_pid;  // a copy: lambdas cannot capture a structured binding before C++20 (clang)
    const auto& t = series->t_ns;
    const auto& values = counter(*series);
    // The fetches (by their share) in [from, to], and the counter's change over it.
    auto count = [&](uint64_t from, uint64_t to, bool whole_fetches, double delta) {
      double in_window = 0, taken_off = 0;
      for (const auto& f : fetches) {
        if (f.pid != pid || f.end_ns < from || f.start_ns > to) continue;
        const uint64_t lo = std::max(f.start_ns, from), hi = std::min(f.end_ns, to);
        const bool inside = lo == f.start_ns && hi == f.end_ns;
        if (whole_fetches && !inside) continue;
        const double share = inside ? 1 : static_cast<double>(hi - lo) / static_cast<double>(f.end_ns - f.start_ns);
        in_window += share;
        taken_off += share * less(f);
      }
      if (in_window <= 0 || in_window < static_cast<double>(min_batches)) return false;
      total += delta - taken_off;
      batches += in_window;
      return true;
    };
    if (window == Window::kWhole) {
      count(t.front(), t.back(), true, static_cast<double>(values.back() - std::min(values.back(), values.front())));
      continue;
    }
    uint64_t first = UINT64_MAX, last = 0;
    for (const auto& f : fetches)
      if (f.pid == pid && f.start_ns >= t.front() && f.end_ns <= t.back()) {
        first = std::min(first, f.start_ns);
        last = std::max(last, f.end_ns);
      }
    if (first > last) continue;
    const size_t from_i = static_cast<size_t>(std::lower_bound(t.begin(), t.end(), first) - t.begin());
    const size_t to_i = static_cast<size_t>(std::upper_bound(t.begin(), t.end(), last) - t.begin()) - 1;
    if (from_i < to_i &&
        count(t[from_i], t[to_i], false, static_cast<double>(values[to_i] - std::min(values[to_i], values[from_i]))))
      continue;
    // Fewer than two samples among the fetches (a short-lived worker), or too
    // few fetches between them: interpolated at the fetches' ends.
    count(first, last, true, std::max(0.0, SeriesAt(t, values, last) - SeriesAt(t, values, first)));
  }
  return batches > 0 ? total / batches : -1;
}

// Minor page faults of the worker processes per batch they fetched.
double WorkerFaultsPerBatch(const Trace& trace, const FetchFactList& fetches, uint32_t loader_pid) {
  return WorkerCounterPerBatch(
      trace, fetches, loader_pid, [](const ProcessSeries& s) -> const std::vector<uint64_t>& { return s.minor_faults; },
      [](const FetchFact&) { return 0.0; });
}

// The worker processes' CPU per batch outside their fetch spans (the worker
// loop: taking indices, pickling and sending batches, sharing their memory),
// in seconds; -1 when unknown (no worker sampled over 8 of its fetches, or a fetch in the
// window without CPU).
constexpr uint64_t kMinWorkerLoopBatches = 8;  // per worker: fewer and one sampler tick's error dominates
double WorkerCpuOutsideFetchPerBatch(const Trace& trace, const FetchFactList& fetches, uint32_t loader_pid) {
  bool complete = true;
  const double ns = WorkerCounterPerBatch(
      trace, fetches, loader_pid, [](const ProcessSeries& s) -> const std::vector<uint64_t>& { return s.cpu_ns; },
      [&](const FetchFact& f) {
        complete = complete && f.has_cpu;
        return static_cast<double>(f.cpu_ns);
      },
      Window::kFetches, kMinWorkerLoopBatches);
  return complete && ns >= 0 ? std::max(0.0, ns) * kNs : -1;
}

// A column of the loader's own process's samples (a cumulative counter): its
// rise over the iterations between the process's first and last sample,
// interpolated at their ends, and the steps (next() plus the compute after it)
// in that window; it includes whatever else the process's threads did
// meanwhile. Fewer than 2 steps where the column is missing.
struct MainRise {
  double rise = 0;
  uint64_t steps = 0;
};
MainRise MainCounterRise(const Trace& trace, const LoaderAnalysis& loader,
                         std::vector<uint64_t> ProcessSeries::*column) {
  const ProcessSeries* series = nullptr;
  for (const auto& s : trace.process_series)
    if (s.pid == loader.pid && (s.*column).size() >= 2 && (s.*column).size() == s.t_ns.size()) series = &s;
  if (!series || loader.iterations.empty()) return {};
  uint64_t from = 0, to = 0, steps = 0;
  for (const Iteration& it : loader.iterations) {
    if (it.wait_start_ns < series->t_ns.front() || it.compute_end_ns > series->t_ns.back() || it.compute_unknown) continue;
    if (steps == 0) from = it.wait_start_ns;
    to = it.compute_end_ns;
    ++steps;
  }
  if (steps < 2) return {};
  const auto& values = series->*column;
  return {std::max(0.0, SeriesAt(series->t_ns, values, to) - SeriesAt(series->t_ns, values, from)), steps};
}

// Minor page faults of the loader's own process per step; -1 without fault counts.
double MainFaultsPerBatch(const Trace& trace, const LoaderAnalysis& loader) {
  const MainRise faults = MainCounterRise(trace, loader, &ProcessSeries::minor_faults);
  return faults.steps >= 2 ? faults.rise / static_cast<double>(faults.steps) : -1;
}

// The kernel's share of the loader's own process's CPU over the same steps
// (LoaderAnalysis::main_kernel_share), and of the steps' own CPU
// (step_kernel_share, for the allocator advice); -1 each without kernel CPU
// in the samples (older traces) or without CPU. Without workers the process's
// CPU over the steps holds its fetches too, often Python with little kernel
// time, which dilutes the share (PyTorch's text classification tutorial,
// tokenizing in collate_fn: 20% for the process, 30% for its steps, 344
// faults a step; 1.3-1.5x faster with fixed malloc thresholds): the steps'
// share takes out the fetch spans' CPU and kernel CPU at their mean per fetch
// (`fetch_cpu`), -1 where no fetch recorded both. With workers it is the
// process's.
std::pair<double, double> MainKernelShares(const Trace& trace, const LoaderAnalysis& loader,
                                           const FetchKernelCpu& fetch_cpu) {
  const MainRise kernel = MainCounterRise(trace, loader, &ProcessSeries::system_cpu_ns);
  const MainRise cpu = MainCounterRise(trace, loader, &ProcessSeries::cpu_ns);
  if (kernel.steps < 2 || !(cpu.rise > 0)) return {-1, -1};
  const double process = std::min(1.0, kernel.rise / cpu.rise);
  if (loader.config.num_workers > 0) return {process, process};
  if (fetch_cpu.fetches == 0) return {process, -1};
  const double per_fetch = 1 / static_cast<double>(fetch_cpu.fetches);
  const double step_kernel = kernel.rise - fetch_cpu.kernel_ns * per_fetch * static_cast<double>(kernel.steps);
  const double step_cpu = cpu.rise - fetch_cpu.cpu_ns * per_fetch * static_cast<double>(cpu.steps);
  return {process, step_cpu > 0 ? std::clamp(step_kernel / step_cpu, 0.0, 1.0) : -1};
}

std::string Ms(double ns) { return fmt::format("{:.1f} ms", ns * 1e-6); }

// The training process's own device reads per step (LoaderAnalysis::
// main_step_read_bytes at the steady mean compute), and what its read calls
// moved; -1 when not measured.
double StepReadBytes(const LoaderAnalysis& l) {
  if (l.main_step_read_bytes < 0 || l.main_step_compute_s <= 0) return -1;
  return l.main_step_read_bytes / l.main_step_compute_s * l.compute_steady.mean;
}
double StepReadCallBytes(const LoaderAnalysis& l) {
  if (l.main_step_read_call_bytes < 0 || l.main_step_compute_s <= 0) return -1;
  return l.main_step_read_call_bytes / l.main_step_compute_s * l.compute_steady.mean;
}
// The share of the steps' wall time the training loop's thread spent neither
// on CPU nor waiting for one: I/O, sleeps, an accelerator. Its main thread's
// own where measured: other threads busy beside a step (a worker's index
// queue feeders) do not make the step run; else the process's.
double StepOffCpuShare(const LoaderAnalysis& l) {
  if (l.main_step_compute_s <= 0) return 0;
  const double on = l.main_thread_step_cpu_s >= 0 ? l.main_thread_step_cpu_s + std::max(0.0, l.main_thread_step_delay_s)
                                                  : l.main_step_cpu_s + l.main_step_delay_s;
  return std::clamp(1 - on / l.main_step_compute_s, 0.0, 1.0);
}

// A user's stage on the training loop's thread that works on the CPU: CPU at
// least half its wall time, as an augmentation does and a stage waiting for
// an accelerator does not.
bool OnCpu(const StageStats& st) { return st.cpu_s >= 0.5 * st.wall_s; }

// The CPU stages of LoaderAnalysis::main_stages, per batch of the whole run.
double MainCpuStagesSecondsPerBatch(const LoaderAnalysis& l) {
  double wall = 0;
  for (const auto& st : l.main_stages)
    if (OnCpu(st)) wall += st.wall_s;
  return l.iterations.empty() ? 0 : wall / static_cast<double>(l.iterations.size());
}

// "; of it, your stages on the main thread: augment 6.0 ms per batch", or empty.
std::string MainStagesEvidence(const LoaderAnalysis& l) {
  if (l.main_stages.empty() || l.iterations.empty()) return {};
  std::string out = "; of it, your stages on the main thread:";
  const double batches = static_cast<double>(l.iterations.size());
  for (size_t i = 0; i < l.main_stages.size() && i < 3; ++i)
    out += fmt::format("{} {} {} per batch", i ? "," : "", l.main_stages[i].name, Ms(l.main_stages[i].wall_s / batches * 1e9));
  if (l.main_stages.size() > 3) out += fmt::format(" and {} more", l.main_stages.size() - 3);
  return out;
}

// Compute taken mostly by the user's CPU stages on the main thread: the
// workers could run them beside the step. Empty when they are under 10% of it.
std::string MainStagesAdvice(const LoaderAnalysis& l, const Account& a) {
  const double stages = MainCpuStagesSecondsPerBatch(l);
  const double compute = a.batches ? a.Seconds(Cause::kCompute) / static_cast<double>(a.batches) : 0;
  if (compute <= 0 || stages < 0.1 * compute) return {};
  std::string names;
  for (const auto& st : l.main_stages)
    if (OnCpu(st)) names += (names.empty() ? "" : ",") + st.name;
  const uint32_t workers = l.config.num_workers;
  return fmt::format(
      "{} of the step is your stage {} on the main thread ({} per batch, on CPU): in the Dataset (a transform) or the "
      "collate_fn instead, {} would run it beside the step; predict it with `stallprof whatif --move-to-workers {}{}`",
      fmt::format("{:.0f}%", std::min(1.0, stages / compute) * 100), names, FormatSeconds(stages),
      workers ? fmt::format("the DataLoader's {} workers", workers) : std::string("DataLoader workers (num_workers > 0)"), names,
      workers ? "" : " --workers N");
}
std::string Us(double ns) { return fmt::format("{:.1f} us", ns * 1e-3); }

// Loaders iterated with this one whose next() takes 5% of its steady state or
// more: "loader 'slow''s next() takes 64% of the step ...", else empty. Their
// waits sit in this loader's compute line; the fix is in their own accounts.
std::string ZippedAdvice(const LoaderAnalysis& l) {
  std::string out;
  for (const auto& z : l.zipped_loaders) {
    const double share = ZippedShare(l, z);
    if (share < kZippedNamedShare) continue;
    out += fmt::format("{}loader '{}''s next() takes {:.0f}% of the step (iterated with this one, inside its compute "
                       "line): that loader's account says what it waits for",
                       out.empty() ? "" : "; ", z.name, share * 100);
  }
  return out;
}

// The compute line of a loader iterated on a prefetch thread: its hand-offs,
// split into waiting for the training loop (off CPU) and its own work.
std::string PrefetchComputeEvidence(const PrefetchThread& p, double ns_per_batch, uint64_t batches) {
  const double handouts = std::max<uint64_t>(1, p.handouts);
  return fmt::format("the prefetch thread (tid {}, not the main thread: the training loop takes the batches from it) "
                     "between its next() calls, {} per batch x {} batches: handing the batch on, off CPU {} per "
                     "batch (waiting for the training loop to take it) and on CPU {}",
                     p.tid, Ms(ns_per_batch), batches, Ms(p.BlockedS() * 1e9 / handouts), Ms(p.cpu_s * 1e9 / handouts));
}

// A prefetch thread held up by the training loop: the loop sets the pace.
std::string PrefetchLoopBoundAdvice(const LoaderAnalysis& l) {
  return fmt::format("compute: the training loop sets the pace: the prefetch thread that iterates this loader waited "
                     "{:.0f}% of the steady state for the loop to take its batches, so more workers or a faster "
                     "pipeline would not speed training up; speed up the training step itself",
                     l.prefetch_thread.steady_blocked_share * 100);
}

Account Finish(const Ledger& l, const Context& c, const FetchMeans& m, const LoaderAnalysis& loader, bool whole_run,
               double persistent_saving_s, double miss_cpu_s_per_batch, double cores) {
  Account a;
  a.available = l.batches > 0;
  a.batches = l.batches;
  a.handoff_receive_cpu_s = loader.config.num_workers > 0 ? l.handoff_receive_cpu * kNs : 0;
  int64_t wall = 0;
  for (int64_t v : l.ns) wall += v;
  a.wall_s = wall * kNs;
  const double per_batch = l.batches ? 1.0 / l.batches : 0;
  const SampledSums& fetches = loader.counters.fetches;
  const std::string mean_note =
      l.waits_by_mean ? fmt::format("; {} wait(s) without a matching fetch span split by the loader's mean", l.waits_by_mean) : "";
  for (size_t k = 0; k < kN; ++k) {
    AccountLine line;
    line.cause = static_cast<Cause>(k);
    line.seconds = l.ns[k] * kNs;
    line.share = wall > 0 ? static_cast<double>(l.ns[k]) / wall : 0;
    const double ns_per_batch = l.ns[k] * per_batch;
    switch (line.cause) {
      case Cause::kCompute:
        line.evidence = loader.prefetch_thread.HandsOn()
                            ? PrefetchComputeEvidence(loader.prefetch_thread, ns_per_batch, l.batches)
                            : fmt::format("main loop between next() calls{}, {} per batch x {} batches{}",
                                          loader.prefetch_thread.present
                                              ? fmt::format(" (on thread tid {}, not the process's main thread)", loader.prefetch_thread.tid)
                                              : "",
                                          Ms(l.stepped ? static_cast<double>(l.ns[k]) / l.stepped : 0), l.stepped,
                                          l.stepped < l.batches
                                              ? (loader.reads_ahead
                                                     ? fmt::format(" (and {} the last of an epoch, its step not seen)",
                                                                   l.batches - l.stepped)
                                                     : fmt::format(" (and {} taken as the loop left its epoch, their "
                                                                   "steps not seen)",
                                                                   l.batches - l.stepped))
                                              : "");
        if (loader.reads_ahead)
          line.evidence += "; the loop reads a batch ahead (a prefetcher: each epoch's second next() comes as its first "
                           "returns), so an epoch's last step runs after its StopIteration, counted up to the next iter()";
        if (whole_run && l.before_first_next > 0)
          line.evidence += fmt::format(", {} between __iter__ and the first next()", Ms(static_cast<double>(l.before_first_next)));
        if (loader.main_faults_per_batch >= 0)
          line.evidence += fmt::format("; the training process faulted {:.0f} pages per step{}{}", loader.main_faults_per_batch,
                                       loader.config.num_workers == 0 ? " (its fetches included: no workers)" : "",
                                       loader.main_kernel_share >= 0
                                           ? fmt::format(", {:.0f}% of its CPU in the kernel", loader.main_kernel_share * 100)
                                           : "");
        if (const double read = StepReadBytes(loader); read >= 0)
          line.evidence += fmt::format("; it read {} from the device a step ({} through read calls), its steps {:.0f}% off CPU",
                                       FormatBytes(read), FormatBytes(std::max(0.0, StepReadCallBytes(loader))),
                                       StepOffCpuShare(loader) * 100);
        line.evidence += MainStagesEvidence(loader);
        for (const auto& n : loader.nested_loaders)
          line.evidence += fmt::format("; less loader '{}', run whole inside it {} time(s) ({})", n.name, n.runs,
                                       FormatSeconds(n.seconds));
        for (const auto& z : loader.zipped_loaders)
          line.evidence += fmt::format("; of it, loader '{}''s next() (iterated with this one: waiting for its data) {} per batch",
                                       z.name, Ms(ZippedSeconds(loader, z, whole_run) * 1e9 * per_batch));
        break;
      case Cause::kPrep:
        line.evidence = m.with_cpu ? fmt::format("{} on CPU: fetch spans {} CPU of {} per batch{}",
                                                 loader.config.num_workers == 0 ? "the main process fetching (no workers)"
                                                                                : "awaited batches' workers",
                                                 Ms(m.cpu), Ms(m.produce),
                                                 miss_cpu_s_per_batch > 0 ? " (less the CPU storage misses cost)" : "")
                                   : "no fetch span with CPU time";
        if (m.with_cpu && loader.fetch_kernel_share >= 0) {
          line.evidence += fmt::format("; {:.0f}% of it in the kernel", loader.fetch_kernel_share * 100);
          if (loader.worker_faults_per_batch >= 0)
            line.evidence += fmt::format(" ({:.0f} page faults per batch)", loader.worker_faults_per_batch);
        }
        line.evidence += mean_note;
        if (fetches.estimated) {
          line.estimated = true;
          line.evidence += fmt::format("; estimated: CPU measured on {} of {} fetch spans (counter budget {:.2g}%), the rest's "
                                       "{} +- {} (95%) scaled from them",
                                       fetches.measured, fetches.spans, loader.counters.share * 100,
                                       FormatSeconds(fetches.cpu_estimated_s), FormatSeconds(fetches.cpu_error_s));
        }
        break;
      case Cause::kContention:
        line.evidence = fmt::format("run-queue delay {} per batch in the fetch spans, and the main thread's in next() outside "
                                    "them; {} workers on {} usable cores",
                                    Ms(m.delay), loader.config.num_workers, cores);
        if (fetches.estimated || loader.counters.waits.estimated) {
          line.estimated = true;
          line.evidence += fmt::format("; estimated: delay measured on {} of {} fetch spans and {} of {} next() calls, the "
                                       "rest's {} +- {} (95%) scaled from them",
                                       fetches.measured, fetches.spans, loader.counters.waits.measured, loader.counters.waits.spans,
                                       FormatSeconds(fetches.delay_estimated_s + loader.counters.waits.delay_estimated_s),
                                       FormatSeconds(std::hypot(fetches.delay_error_s, loader.counters.waits.delay_error_s)));
        }
        break;
      case Cause::kStorage:
        if (m.with_reads == 0)
          line.evidence = "device reads not recorded (no read spans): nothing is called storage";
        else if (m.device_bytes <= 0)
          line.evidence = "0 bytes read from the device";
        else
          line.evidence = fmt::format("{} read from the device by {} of {} fetches{}", FormatBytes(m.device_bytes),
                                      std::llround(m.fetches_with_device_bytes), m.with_reads,
                                      miss_cpu_s_per_batch > 0
                                          ? fmt::format(", worker CPU on misses {} per batch", Ms(miss_cpu_s_per_batch * 1e9))
                                          : "");
        if (m.fetches_with_device_bytes > 0 && c.off_cpu_without_device_ns > 0)
          line.evidence += fmt::format("; of their off-CPU time, the {} the fetches without device reads spend (median) "
                                       "is other blocking",
                                       Ms(c.off_cpu_without_device_ns));
        if (fetches.estimated && m.with_reads) {
          line.estimated = true;
          line.evidence += fmt::format("; estimated: bytes read on {} of {} fetches, the rest given the mean of their thread's sampled fetches nearest in time",
                                       fetches.measured, fetches.spans);
        }
        break;
      case Cause::kOtherBlocking:
        line.evidence = fmt::format("off CPU {} per batch, {} from the device, {} through read syscalls: sleep, lock or network{}",
                                    Ms(m.io_no_device), m.with_reads ? FormatBytes(m.device_bytes) : "? bytes (not recorded)",
                                    m.with_reads ? FormatBytes(m.call_bytes) : "? bytes", mean_note);
        if (fetches.estimated) {
          line.estimated = true;
          line.evidence += "; estimated: wall time less the estimated CPU and delay of the fetch spans the budget skipped";
        }
        break;
      case Cause::kHandoff:
        line.evidence = loader.config.num_workers == 0
                            ? "the DataLoader's own per-batch code in next() outside the fetch span (sampler, collation "
                              "bookkeeping)"
                        : loader.prefetch.SendsHeld()
                            ? fmt::format("{} of {} next() calls found their batch made, its worker between fetches; of "
                                          "the {} calls made while the batch's worker ran a later fetch, {} found it held "
                                          "in its worker until that fetch ended (it holds the GIL the worker's sending "
                                          "thread needs)",
                                          l.waits_handoff, l.batches,
                                          loader.prefetch.sends_held + loader.prefetch.sends_free,
                                          loader.prefetch.sends_held)
                            : fmt::format("{} of {} next() calls found their batch ready: the main process receiving it "
                                          "(IPC, unpickling, pinning)",
                                          l.waits_handoff, l.batches);
        if (loader.config.num_workers > 0 && l.handoff_receive_cpu > 0)
          line.evidence += fmt::format("; the main thread was on CPU for {} of it, {} per batch (receiving: unpickling, "
                                       "rebuilding the batch's tensors)",
                                       FormatSeconds(a.handoff_receive_cpu_s), Ms(l.handoff_receive_cpu * per_batch));
        break;
      case Cause::kStartup: {
        if (!whole_run) {
          line.evidence = "not in the steady state";
          break;
        }
        const double epochs = std::max<uint64_t>(1, l.epochs);
        const bool workers = loader.config.num_workers > 0;
        const std::string method =
            !workers ? ", no workers" : loader.config.multiprocessing_context.empty() ? "" : ", " + loader.config.multiprocessing_context;
        const auto& split = loader.startup_split;
        if (split.later_epochs > 0 && split.starting_epochs > 0)
          // Persistent workers start once per DataLoader object: a mean over
          // epochs would blame every epoch for the first one's start.
          line.evidence = fmt::format("{} at the workers' start x {}{}, then {} per later epoch x {} (persistent workers: "
                                      "the wait for the first batch)",
                                      Ms(split.starting_s / split.starting_epochs * 1e9), split.starting_epochs, method,
                                      Ms(split.later_s / split.later_epochs * 1e9), split.later_epochs);
        else
          line.evidence = fmt::format("{} per epoch x {} epochs{}", Ms(l.ns[k] / epochs), l.epochs, method);
        if (workers)
          line.evidence += fmt::format(" (iterator creation {}, first batches until every worker ran {}, shutdown {} per epoch)",
                                       Ms(l.startup_create / epochs), Ms(l.startup_first / epochs),
                                       Ms(l.startup_shutdown / epochs));
        else
          line.evidence += fmt::format(" (iterator creation {}, the StopIteration next() {} per epoch)",
                                       Ms(l.startup_create / epochs), Ms(l.startup_shutdown / epochs));
        if (const auto& setup = loader.worker_setup; workers && setup.WallS() >= kSetupShownS) {
          line.evidence += fmt::format("; a fresh worker's {} took {} more than a warm one's{}", FirstOf(setup.by_fetch.size(), "fetch", "fetches"),
                                       Ms(setup.WallS() * 1e9),
                                       setup.warm_fetch_s > 0 ? fmt::format(" ({} each)", Ms(setup.warm_fetch_s * 1e9)) : "");
          if (setup.first_item_s >= kSetupShownS)
            line.evidence += fmt::format(", its first item {} more than its others' {} (a one-time set-up: imports, files "
                                         "opened on first use)",
                                         Ms(setup.first_item_s * 1e9), Ms(setup.item_s * 1e9));
          line.evidence += fmt::format(" ({} worker starts)", setup.starts);
        }
        if (const double sampler = loader.SamplerFirstPerEpochS(); sampler > 0)
          line.evidence += fmt::format("; the sampler's first draw {} per epoch ({})", Ms(sampler * 1e9),
                                       loader.config.num_workers > 0 ? "in the iterator creation, priming the workers" : "in the first next()");
        if (persistent_saving_s > 0)
          line.evidence += fmt::format("; persistent_workers=True would save at least {}", FormatSeconds(persistent_saving_s));
        break;
      }
      case Cause::kStallprof:
        line.evidence = c.hook.measured
                            ? fmt::format("measured at start: wait {}, fetch {}, sample {}, collate {} per event; {} per batch "
                                          "on the critical path",
                                          Us(c.hook.wait_ns), Us(c.hook.fetch_ns), Us(c.hook.sample_ns), Us(c.hook.collate_ns),
                                          Us(ns_per_batch))
                            : "not measured (a trace from an older hook): taken as 0";
        if (c.hook.measured && loader.counters.share < 1)
          line.evidence += fmt::format(" (counters read on {} of {} fetch spans and {} of {} next() calls, budget {:.2g}% of "
                                       "each thread's time)",
                                       fetches.measured, fetches.spans, loader.counters.waits.measured,
                                       loader.counters.waits.spans, loader.counters.share * 100);
        break;
    }
    a.lines.push_back(line);
  }
  return a;
}

// The stall fraction of an account: (wall - compute - stallprof) / (wall - stallprof).
double StallOf(double wall, double compute, double stallprof) {
  const double denominator = wall - stallprof;
  return denominator > 0 ? std::max(0.0, (wall - compute - stallprof) / denominator) : 0;
}
double StallOf(const Account& a) { return StallOf(a.wall_s, a.Seconds(Cause::kCompute), a.Seconds(Cause::kStallprof)); }
double StallOf(const Ledger& l) {
  int64_t wall = 0;
  for (int64_t v : l.ns) wall += v;
  return StallOf(static_cast<double>(wall), static_cast<double>(l.ns[I(Cause::kCompute)]), static_cast<double>(l.ns[I(Cause::kStallprof)]));
}

// How to keep freed memory from going back to the kernel: glibc's fixed
// thresholds keep blocks up to its largest mmap threshold (32 MiB on 64-bit);
// larger ones (a step's activations: pytorch/examples' super_resolution maps
// 118 MiB tensors) glibc maps afresh whatever the thresholds, and a caching
// allocator keeps them (that example: 16.8 s -> 11.8 s an epoch, system
// time 6.1 -> 1.3 s; the thresholds alone 17.4 s). The caching allocator
// comes first: on every job where both were tried it did at least as well
// (a FakeData CNN 784-910 samples/s against 603-727 with the thresholds;
// the torchaudio tutorial's step 129 ms against 199 ms, 236 ms bare:
// docs/validation.md), and the thresholds need nothing installed.
// The advice follows what the process runs already: none under a caching
// allocator (its faults are memory mapped afresh, not freed blocks refaulted),
// only the caching allocator where glibc's thresholds are fixed.
bool CachingAllocator(const LoaderConfig& c) {
  return !c.allocator.empty() && c.allocator.rfind("glibc", 0) != 0;
}
std::string KeepFreedMemory(const LoaderConfig& c) {
  constexpr const char* kCaching = "LD_PRELOAD=libtcmalloc_minimal.so.4 (Debian's libtcmalloc-minimal4)";
  if (c.allocator == "glibc fixed thresholds")
    return fmt::format("the allocator maps blocks over 32 MiB afresh each time (glibc, its thresholds fixed already "
                       "in the environment: GLIBC_TUNABLES or MALLOC_MMAP_THRESHOLD_), and one that caches them keeps them: {}",
                       kCaching);
  return fmt::format("the allocator returns freed buffers to the kernel and faults them back in (glibc malloc's "
                     "dynamic thresholds); an allocator that caches freed blocks of every size keeps them: {}; "
                     "with nothing installed, fixed thresholds keep blocks up to 32 MiB (glibc maps larger tensors "
                     "afresh whatever the thresholds): "
                     "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912",
                     kCaching);
}

// A worker collates each batch into a fresh shared-memory segment, faulted in
// page by page (12-16 us a fault on this VM), and the step faults the
// received segment in again at its first read: no allocator setting keeps
// it, fewer bytes a batch do. Where the workers' faults per batch are at
// least most of the batch's pages and their fetches spend a heavy share in
// the kernel, those faults are the segment's. A memory-mapped uint8 dataset
// sent as float32 (3 MiB batches, 2 workers on 2 cores, fixed malloc
// thresholds): 795 faults a batch, 48% of the workers' CPU in the kernel;
// sent as uint8 and converted in the step, an epoch took 12.7-13.4 s against
// 25.4-27.1 s (4 alternated pairs).
constexpr uint64_t kSegmentBytesHeavy = 1 << 20;
constexpr double kSegmentFaultsShare = 0.8;
double BatchPages(const LoaderAnalysis& l) { return static_cast<double>(l.config.batch_bytes) / l.page_bytes; }
bool BatchSegmentFaultsHeavy(const LoaderAnalysis& l) {
  const double pages = BatchPages(l);
  return l.config.num_workers > 0 && l.config.batch_bytes >= kSegmentBytesHeavy && l.fetch_kernel_share >= kKernelHeavyShare &&
         l.worker_faults_per_batch >= kSegmentFaultsShare * pages;
}
// Whether the workers' CPU costs the step anything: it waits on the pipeline
// (storage, worker CPU, contention, other blocking, handoff: 5% of the
// account), or its own threads wait for a core 5% of the steps' time.
bool WorkersCostTheStep(const LoaderAnalysis& l, const Account& a) {
  double waiting = 0;
  for (const Cause c : {Cause::kPrep, Cause::kContention, Cause::kStorage, Cause::kOtherBlocking, Cause::kHandoff})
    waiting += a.Line(c).share;
  return waiting >= kAdvisedShare ||
         (l.main_step_compute_s > 0 && l.main_step_delay_s >= kAdvisedShare * l.main_step_compute_s);
}
std::string BatchSegmentAdvice(const LoaderAnalysis& l) {
  return fmt::format(
      "each batch ({}) is collated by a worker into fresh shared memory: the workers fault {:.0f} pages a batch (the "
      "batch spans {:.0f}) and spend {:.0f}% of their fetches' CPU in the kernel, and the step faults the batch in again "
      "at its first read; send fewer bytes a batch: keep samples in their stored dtype (uint8 images, int token ids) "
      "and convert them in the step, crop or downsample in the worker",
      FormatBytes(static_cast<double>(l.config.batch_bytes)), l.worker_faults_per_batch, BatchPages(l),
      l.fetch_kernel_share * 100);
}

// Without workers the process's page faults per step include its fetches':
// where a fetch spends longer in the kernel than a whole step takes, they are
// mostly the fetches' (a collate into fresh memory: 41 ms of kernel CPU a
// fetch beside a 9.6 ms step), and the advice goes with the prep.
bool FetchFaultsInMain(const LoaderAnalysis& l) {
  return l.config.num_workers == 0 && !CachingAllocator(l.config) && l.main_faults_per_batch >= kFaultsHeavyPerBatch &&
         l.fetch_kernel_s > 0 && l.fetch_kernel_s >= l.compute_steady.mean;
}

std::string FetchFaultsInMainAdvice(const LoaderAnalysis& l) {
  return fmt::format(
      "{:.0f}% of the fetches' CPU is the kernel's, and the training process (its fetches and its steps: no workers) "
      "faults {:.0f} pages per step: {}",
      l.fetch_kernel_share * 100, l.main_faults_per_batch, KeepFreedMemory(l.config));
}

// Workers forked for every step (an iterator per step, the fork start
// method): after each fork the training process copies every page it writes
// (copy-on-write), which no allocator setting changes. A user's loop of
// next(iter(loader)) with 2 workers faulted 7849 pages a step; with
// GLIBC_TUNABLES set it ran at 200.9 and 203.8 samples/s against 206.9 and
// 210.5 without (alternated), and 614-644 with persistent workers.
bool ForkedEachStep(const LoaderAnalysis& l) {
  const std::string& method = l.config.multiprocessing_context;
  return l.config.num_workers > 0 && !l.config.persistent_workers && (method.empty() || method == "fork") &&
         l.IteratorPerStep();
}

// The kernel's share of the steps' CPU: their own where measured, else the process's (-1: neither).
double StepKernelShareOrProcess(const LoaderAnalysis& l) {
  return l.step_kernel_share >= 0 ? l.step_kernel_share : l.main_kernel_share;
}

bool StepFaultsHeavy(const LoaderAnalysis& l) {
  if (CachingAllocator(l.config) || ForkedEachStep(l)) return false;
  const double kernel = StepKernelShareOrProcess(l);
  const bool dynamic_thresholds = l.config.allocator == "glibc" && kernel >= 0;
  const double beyond_batch = l.main_faults_per_batch - (l.config.num_workers > 0 ? BatchPages(l) : 0);
  if (dynamic_thresholds && beyond_batch >= kMainFaultsHeavyPerBatch && kernel >= kStepKernelChurnShare) return true;
  return l.main_faults_per_batch >= (dynamic_thresholds ? kMainFaultsHeavyPerBatchDynamic : kMainFaultsHeavyPerBatch) &&
         (kernel < 0 || kernel >= kKernelHeavyShare);
}

// The training step refaulting its freed tensors: worth acting on whatever the bottleneck is.
// Without workers the faults may be the fetches' too (FetchFaultsInMain
// tells only where they must be): the advice says so.
std::string StepFaultsAdvice(const LoaderAnalysis& l) {
  return fmt::format(
      "the training process{} faults {:.0f} pages per step{}: {}",
      l.config.num_workers == 0 ? " (its steps and its fetches: no workers)" : "", l.main_faults_per_batch,
      StepKernelShareOrProcess(l) < 0 ? ""
      : l.config.num_workers == 0 && l.step_kernel_share >= 0
          ? fmt::format(" (the steps alone: {:.0f}% of their CPU in the kernel)", l.step_kernel_share * 100)
          : fmt::format(" ({:.0f}% of its CPU in the kernel)", StepKernelShareOrProcess(l) * 100),
      KeepFreedMemory(l.config));
}

// The training process reading from the device in its steps while they wait
// off CPU, more than its read calls moved: page faults reading its own pages
// back after the kernel evicted them (a loop reading files itself reads
// through read calls). Seen in a 400 MiB memory cgroup whose page cache a
// memory-mapped 800 MiB dataset filled: a 1 ms linear step took 5.3 s, 98%
// off CPU, 1.6 GiB read a step.
constexpr double kStepReadsHeavyBytes = 1 << 20;
constexpr double kStepOffCpuHeavyShare = 0.25;
bool StepReadsHeavy(const LoaderAnalysis& l) {
  const double read = StepReadBytes(l);
  return read >= kStepReadsHeavyBytes && read > StepReadCallBytes(l) && StepOffCpuShare(l) >= kStepOffCpuHeavyShare;
}
std::string StepReadsAdvice(const LoaderAnalysis& l) {
  return fmt::format("the training process itself read {} from the device a step, beyond its read calls, and its "
                     "steps were {:.0f}% off CPU: page faults reading its own memory (code, mapped files) back after "
                     "eviction, the machine or its memory cgroup "
                     "short of memory for the job and the page cache it fills (in a cgroup the dataset's page "
                     "cache counts against the limit): give the job more memory",
                     FormatBytes(StepReadBytes(l)), StepOffCpuShare(l) * 100);
}

// A step parallel over torch's intra-op threads beside workers that want the
// same cores: whenever one of its threads loses its core the others wait for
// it at the next operator, so the step stretches far beyond its share
// (docs/model.md "A parallel step beside workers"). Empty when that is not the case.
std::string ParallelStepAdvice(const LoaderAnalysis& l, const Account& a, double cores) {
  const uint32_t threads = l.config.intra_op_threads, workers = l.config.num_workers;
  if (threads < 2 || workers == 0 || threads + workers <= cores || l.main_step_compute_s <= 0 || a.batches == 0) return {};
  if ((l.main_step_cpu_s + l.main_step_delay_s) / l.main_step_compute_s < model::kParallelStepThreads) return {};
  if (l.main_step_delay_s < 0.25 * l.main_step_compute_s) return {};  // rarely held up: the workers mostly idle
  const double compute_per_batch = a.Seconds(Cause::kCompute) / static_cast<double>(a.batches);
  return fmt::format(
      "the step runs {} intra-op threads (torch.get_num_threads()) beside {} workers on {} cores, and its "
      "threads waited {} a step for a core: a parallel step's threads hold each other up when one loses its core; "
      "try torch.set_num_threads({}) against fewer workers: a profile with num_workers=0 predicts both "
      "(`stallprof whatif --workers N`, with and without --step-threads)",
      threads, workers, cores, FormatSeconds(l.main_step_delay_s / l.main_step_compute_s * compute_per_batch),
      model::StepThreadsBesideWorkers(cores, workers));
}

// The step's own thread waited for a core a quarter of its time or more
// (run-queue delay): the job's cores were spent (on its workers, its other
// threads, other processes, or a CPU quota's periods), so the step's compute
// is part waiting, which a faster model alone would not remove. A 2-worker
// decode loader in a 1-core quota waited 80 ms of its 165 ms steps, and
// "speed up the model step itself" was all analyze said. Empty otherwise.
std::string StepWaitedForCoreAdvice(const LoaderAnalysis& l, const Account& a, double cores) {
  const double delay = l.main_thread_step_delay_s;
  if (!(delay >= 0.25 * l.main_step_compute_s) || l.main_step_compute_s <= 0 || a.batches == 0) return {};
  const double compute_per_batch = a.Seconds(Cause::kCompute) / static_cast<double>(a.batches);
  return fmt::format(
      "its thread waited for a core {} a step ({:.0f}% of it: run-queue delay) while {} kept the {:g} usable core{} "
      "busy: more cores (or a larger CPU quota) or less CPU a batch, the step's or the workers', shorten it; predict "
      "more cores with `stallprof whatif --cores N`",
      FormatSeconds(delay / l.main_step_compute_s * compute_per_batch), delay / l.main_step_compute_s * 100,
      l.config.num_workers > 0 ? fmt::format("its {} worker{}", l.config.num_workers, l.config.num_workers == 1 ? "" : "s")
                               : std::string("other threads or processes"),
      cores, cores == 1 ? "" : "s");
}

// A step on more intra-op threads than the job has cores, by itself: its
// threads past the cores hold each other up at every operator, and an idle
// OpenMP thread spins on a core for a while after each one, taking it from
// the thread with work. torch sizes its pool from the machine's cores, not a
// container's CPU quota. Measured: the decode CNN on 2 threads in a 1-core
// quota without workers ran 93-98 samples/s, on 1 thread 121-123, and
// analyze named only "CPU contention: the 0 workers and the training step
// share the 1 usable cores". Empty when the threads fit the cores.
std::string StepThreadsOverCoresAdvice(const LoaderAnalysis& l, double cores) {
  const uint32_t threads = l.config.intra_op_threads;
  if (threads < 2 || !(cores > 0) || threads <= cores) return {};
  return fmt::format(
      "the step runs {} intra-op threads (torch.get_num_threads()) on {:g} usable core{}: threads past the cores hold "
      "each other up at every operator, and an idle OpenMP thread spins on a core for a while after each one; try "
      "torch.set_num_threads({}) (torch's default comes from the machine's cores, never from a CPU quota)",
      threads, cores, cores == 1 ? "" : "s", std::max(1.0, std::floor(cores)));
}

// The fetch spans' mean wall time per batch (what making a batch takes), 0 without any.
double MeanProduceSeconds(const LoaderAnalysis& l) {
  double produce_s = 0;
  uint64_t batches = 0;
  for (const auto& worker : l.workers) {
    produce_s += worker.produce_s;
    batches += worker.batches;
  }
  return batches ? produce_s / static_cast<double>(batches) : 0;
}

// An iterator per step (`next(iter(loader))` in the loop,
// LoaderAnalysis::IteratorPerStep): the start-up advice leads with it. Empty
// when that is not the case. (A loader of 4096 samples, batch 64, 2 workers:
// 2099 samples/s so, 15148 with persistent_workers=True; a user's step loop
// with a small CNN: 161-210 samples/s, 614-644 with persistent workers,
// 703-2518 with one iterator over 60 steps, its one start included.)
std::string IteratorPerStepAdvice(const LoaderAnalysis& l) {
  if (!l.IteratorPerStep()) return {};
  const double batches_per_epoch = static_cast<double>(l.config.SamplesPerEpoch()) / l.config.batch_size;
  uint64_t batches = 0;
  for (const auto& e : l.epochs) batches += e.iterations;
  const double per_iterator = static_cast<double>(batches) / static_cast<double>(l.epochs.size());
  return fmt::format("each of the {} iterators delivered {:.1f} of the {:.0f} batches an epoch holds: the loop creates "
                     "an iterator per step (next(iter(loader))?); create it once (it = iter(loader)) and call next(it), "
                     "starting a new one at StopIteration{}",
                     l.epochs.size(), per_iterator, std::ceil(batches_per_epoch),
                     ForkedEachStep(l) && l.main_faults_per_batch >= kMainFaultsHeavyPerBatchDynamic
                         ? fmt::format("; that also ends the copy-on-write after each fork of the workers: the training "
                                       "process copies every page it writes then ({:.0f} page faults a step)",
                                       l.main_faults_per_batch)
                         : "");
}

// The start-up advice when the sampler's first draw of each epoch is half of
// the start-up or more: its per-epoch work (RandomSampler's randperm,
// DistributedSampler's shuffle, a sort by length) runs there on the main
// thread, before any worker can start a batch, whatever the workers. Empty
// when it is less.
std::string SamplerStartupAdvice(const LoaderAnalysis& l, const std::string& share, double startup_s) {
  const double per_epoch = l.SamplerFirstPerEpochS();
  const double epochs = static_cast<double>(std::max<size_t>(1, l.epochs.size()));
  if (startup_s <= 0 || per_epoch * epochs < 0.5 * startup_s) return {};
  return fmt::format("epoch start-up ({}): the sampler's first draw takes {} each epoch ({} of the {} start-up), on the "
                     "main thread before any batch, with or without workers: its __iter__ (a permutation or sort of "
                     "the whole dataset) runs there; make it cheaper, or compute it once in __init__",
                     share, FormatSeconds(per_epoch), FormatSeconds(per_epoch * epochs), FormatSeconds(startup_s));
}

// Workers started one after another inside __iter__: spawn and forkserver
// send each its pickled Dataset through a pipe, and past the pipe's 64 KiB
// the parent waits for the child to import the main module and read it (a
// Dataset holding 200 KB, 2 cores: 0.93 s a worker; 1 KB: 2 workers in 1 s).
// Empty unless __iter__ took half the workers' start-up or more.
std::string SerialStartAdvice(const LoaderAnalysis& l) {
  const std::string& method = l.config.multiprocessing_context;
  if (l.config.num_workers < 2 || method.empty() || method == "fork") return {};
  double inside = 0, until_ready = 0;
  uint32_t starts = 0;
  for (const auto& e : l.epochs)
    if (e.workers_ready_ns > e.start_ns) {
      inside += e.StartupInsideIterS();
      until_ready += (e.workers_ready_ns - e.start_ns) * 1e-9;
      starts++;
    }
  if (starts == 0 || inside < 0.5 * until_ready) return {};
  return fmt::format("; __iter__ took {} of each start, starting the {} workers one after another ({:.0f}% of the time "
                     "to the last one's first fetch): {} sends each worker the pickled Dataset, and one over a pipe's "
                     "64 KiB makes it wait for the worker before to import the script and read it; keep the Dataset "
                     "object small (open or load its data lazily, in the worker), or use fork",
                     FormatSeconds(inside / starts), l.config.num_workers, 100 * inside / until_ready, method);
}

// Each epoch's first batch is made while the loop waits. With epochs of a
// batch or two (an evaluation loader with a large batch) that wait, not the
// workers' start, is most of the start-up, and persistent workers keep it
// (pytorch/examples super_resolution, test batch 100 of 100 images, 4
// workers: 262 ms of a 327 ms start-up, one worker making the batch while
// three idled).
std::string FirstBatchAdvice(const LoaderAnalysis& l, double startup_s, double cores) {
  const uint32_t workers = l.config.num_workers;
  if (workers == 0 || l.epochs.empty() || l.produce.count == 0) return {};
  const double epochs = static_cast<double>(l.epochs.size());
  // Per epoch: what persistent workers would leave, or (persistent) a later epoch's.
  const auto& split = l.startup_split;
  const double rest = l.config.persistent_workers
                          ? (split.later_epochs > 0 ? split.later_s / split.later_epochs : 0)
                          : (startup_s - l.persistent_saving_s) / epochs;
  const double batch_s = l.produce.mean;
  if (rest < 0.5 * startup_s / epochs || batch_s < 0.5 * rest) return {};
  std::string advice = fmt::format("; the rest, {} an epoch, is the wait for its first batch, which a worker makes in {} "
                                   "({:g} samples one after another) while the loop has nothing to do: persistent "
                                   "workers keep it",
                                   FormatSeconds(rest), FormatSeconds(batch_s), l.config.batch_size);
  const double batches = static_cast<double>(l.SteppedIterations()) / epochs;
  const uint32_t side_by_side = std::min(workers, WholeCores(cores));
  if (batches < side_by_side && l.config.batch_size_known && l.config.batch_size >= 2 * side_by_side)
    advice += fmt::format("; an epoch has {:.1f} batches for {} workers, so {} of them idle: batch_size={} would let {} "
                          "workers make its samples side by side (its first batch in about {})",
                          batches, workers, workers - static_cast<uint32_t>(std::ceil(batches)),
                          std::ceil(l.config.batch_size / side_by_side), side_by_side,
                          FormatSeconds(batch_s / side_by_side));
  return advice;
}

// Persistent workers start once per DataLoader object: their start weighs on
// a short run only. (forkserver and spawn start each worker as a new Python
// that imports torch: 2 workers 0.5 s later than fork on the 2-core VM.)
std::string PersistentStartupAdvice(const LoaderAnalysis& l, const std::string& share) {
  const auto& split = l.startup_split;
  const std::string& method = l.config.multiprocessing_context;
  std::string advice = fmt::format("epoch start-up ({}): persistent workers start once per DataLoader object, and their "
                                   "start ({} x {}) weighs this much only because the run is short ({} of epochs): a "
                                   "longer run amortizes it",
                                   share, FormatSeconds(split.starting_s / split.starting_epochs), split.starting_epochs,
                                   FormatSeconds(l.active_s));
  if (l.scopes.size() > 1)
    advice += fmt::format("; the DataLoader was built {} times under this name: build it once", l.scopes.size());
  if (!method.empty() && method != "fork")
    advice += fmt::format("; start method fork starts workers faster than {} (a new Python importing torch each), where "
                          "the script allows it",
                          method);
  return advice;
}

// The batches each worker of an IterableDataset made an epoch, most first,
// when uneven (LoaderAnalysis::stream_worker_batches). Persistent workers make
// every epoch of their DataLoader object, others one epoch each (new processes
// each epoch); a worker whose stream was empty made no fetch span.
std::vector<double> StreamWorkerBatches(const LoaderAnalysis& l) {
  const uint32_t workers = l.config.num_workers;
  if (workers < 2 || !l.config.Iterable() || l.epochs.empty()) return {};
  const size_t lives = l.config.persistent_workers ? std::max<size_t>(1, l.scopes.size()) : l.epochs.size();
  std::vector<double> counts;
  for (const auto& w : l.workers)
    if (!w.in_main_process) counts.push_back(static_cast<double>(w.batches));
  if (counts.size() > workers * lives) return {};
  counts.resize(workers * lives, 0);
  std::sort(counts.begin(), counts.end(), std::greater<>());
  // The i-th most productive worker of each life, averaged over the lives, per epoch.
  std::vector<double> per_epoch(workers, 0);
  for (size_t i = 0; i < counts.size(); ++i) per_epoch[i / lives] += counts[i];
  for (auto& c : per_epoch) c /= static_cast<double>(l.epochs.size());
  if (per_epoch.front() <= 1.1 * per_epoch.back()) return {};
  return per_epoch;
}

// An uneven stream split (3 shards over 2 workers: 30 and 15 batches an
// epoch, 692 samples/s where an even split ran 1357 with 3 workers).
std::string UnevenStreamAdvice(const LoaderAnalysis& l) {
  const auto& split = l.stream_worker_batches;
  if (split.empty()) return {};
  return fmt::format("uneven stream: the workers made {:.0f} to {:.0f} batches an epoch{}: the IterableDataset's own code "
                     "splits its stream over them (shards by worker id?), so each epoch ends on the workers whose stream "
                     "lasts; split it evenly (shards a multiple of num_workers); `stallprof whatif --workers N` predicts "
                     "other counts",
                     split.back(), split.front(), split.back() <= 0 ? " (a worker made none)" : "");
}

// A predicted change this large is worth acting on: below it the model's
// own error (a few percent, docs/validation.md) could reverse it.
constexpr double kPredictedGainWorthIt = 0.05;

// The loader's predictions for workers in [from, to]: the fewest within
// kAsGoodAsMore of the best rate (as `whatif --workers auto` and recommend
// pick); null without any.
const WorkersPrediction* BestPredicted(const LoaderAnalysis& l, uint32_t from,
                                       uint32_t to = std::numeric_limits<uint32_t>::max()) {
  const WorkersPrediction* best = nullptr;
  for (const auto& p : l.worker_predictions)
    if (p.workers >= from && p.workers <= to && (!best || p.samples_per_s > best->samples_per_s)) best = &p;
  if (!best) return nullptr;
  for (const auto& p : l.worker_predictions)
    if (p.workers >= from && p.workers <= to && p.samples_per_s >= (1 - model::kAsGoodAsMore) * best->samples_per_s)
      return &p;
  return best;
}

// "1 to 2 workers" (the counts predicted in [from, to]).
std::string PredictedRange(const LoaderAnalysis& l, uint32_t from, uint32_t to = std::numeric_limits<uint32_t>::max()) {
  uint32_t lo = std::numeric_limits<uint32_t>::max(), hi = 0;
  for (const auto& p : l.worker_predictions)
    if (p.workers >= from && p.workers <= to) lo = std::min(lo, p.workers), hi = std::max(hi, p.workers);
  return lo == hi ? fmt::format("{} worker{}", lo, lo == 1 ? "" : "s") : fmt::format("{} to {} workers", lo, hi);
}

std::string PredictedChange(const WorkersPrediction& p) {
  return fmt::format("{:.1f} samples/s ({:+.1f}%)", p.samples_per_s, p.change * 100);
}

// Predicted from a profile without workers, a gain below this is within what
// a worker's own costs, which that profile does not measure, can take back:
// the CIFAR-10 tutorial on FakeData (docs/validation.md, 2026-12-04) made a
// batch in a worker with 1.2x to 1.5x the main thread's CPU, and its test
// loader, predicted +9% with a worker, ran 15-28% slower.
constexpr double kGainWorkerCostsCanTakeBack = 0.25;

// The caveat after a predicted gain from a profile without workers that such
// costs could take back; empty otherwise.
std::string UnmeasuredWorkerCosts(const LoaderAnalysis& l, const WorkersPrediction& best) {
  if (l.config.num_workers > 0 || best.change >= kGainWorkerCostsCanTakeBack) return "";
  return fmt::format("; a gain a worker's own costs could take back, and a profile without workers does not measure "
                     "them (a worker made a batch with up to 1.5x the main thread's CPU in docs/validation.md): try "
                     "num_workers={} and profile it before keeping it",
                     best.workers);
}

// The caveat after a predicted gain whose scenario keeps threads waiting for
// a core (whatif's line under such rows): the kernel's scheduling of them,
// which fluid sharing does not follow, made such figures high by up to 40%
// (docs/model.md: a batched loader's 2 workers beside a CPU step on 2 cores
// were predicted +26% to +28% over the runs, a streaming text pipeline's
// +30% to +36%); empty otherwise. Its callers give it gains only.
std::string KernelSchedulingCaveat(const WorkersPrediction& best) {
  if (best.waiting_threads < model::kTimeSlicedThreads) return "";
  return fmt::format("; {:.2f} of the job's threads would wait for a core on average there, and the kernel's "
                     "scheduling of them, which the model does not follow, made such figures up to 40% high "
                     "(docs/model.md)",
                     best.waiting_threads);
}

// Steady and whole-run gains this far apart are told apart in the advice.
constexpr double kWholeRunGainApart = 0.10;

// After a predicted gain whose whole run gains much less than its steady
// state (short epochs that each start their workers anew: a DataPipe loader
// of 25 batches an epoch, 2026-12-07, was predicted +28% steady and +7%
// whole run for 1 worker, and +23% whole run with persistent workers; four
// alternated rounds ran +25%, +5% and +21%, medians): the whole-run figure,
// and for workers that do not persist, what keeps the steady gain. Empty
// otherwise.
std::string WholeRunCaveat(const LoaderAnalysis& l, const WorkersPrediction& best) {
  if (l.steady_fallback || best.whole_run_samples_per_s <= 0 || best.change - best.whole_run_change < kWholeRunGainApart)
    return "";
  std::string out = fmt::format("; that is the steady state: over the whole run, each epoch's start-up included, "
                                "{:.1f} samples/s ({:+.1f}%)",
                                best.whole_run_samples_per_s, best.whole_run_change * 100);
  if (!l.config.persistent_workers)
    out += fmt::format(", as each epoch starts its workers anew (persistent_workers=True starts them once: "
                       "`stallprof whatif --workers {} --persistent-workers true`)",
                       best.workers);
  return out;
}

// Fewer workers start sooner: where the steps need fewer than an epoch
// starts anew, the count below the loader's with the best whole run among
// those that keep the steady state (within kAsGoodAsMore of it), when that
// gains kPredictedGainWorthIt. torchvision's reference classification
// trainer at its `-j 16` on 2 cores (2026-12-07): 16 workers spent 11% of
// the run starting each epoch; 2 were predicted at the steady rate and +14%
// over the whole run, and ran 110.3 and 108.2 samples/s whole run against
// 98.2 with 16 (persistent workers: 100.7, 99.1). Empty otherwise.
std::string FewerWorkersStartupAdvice(const LoaderAnalysis& l) {
  const uint32_t now = l.config.num_workers;
  if (now < 2 || l.config.persistent_workers) return "";
  const WorkersPrediction* best = nullptr;
  for (const auto& p : l.worker_predictions)
    if (p.workers > 0 && p.workers < now && p.whole_run_samples_per_s > 0 &&
        (l.steady_fallback || p.change >= -model::kAsGoodAsMore) &&
        (!best || p.whole_run_samples_per_s > best->whole_run_samples_per_s))
      best = &p;
  if (!best || best->whole_run_change < kPredictedGainWorthIt) return "";
  return fmt::format("; or start fewer: num_workers={}{} is predicted at {:.1f} samples/s over the whole run ({:+.1f}%; "
                     "`stallprof whatif --workers {}`)",
                     best->workers,
                     l.steady_fallback ? ""
                                       : fmt::format(" keeps up with the steps ({:.1f} samples/s steady, {:+.1f}%) and",
                                                     best->samples_per_s, best->change * 100),
                     best->whole_run_samples_per_s, best->whole_run_change * 100, best->workers);
}

// The advice's phrase for more workers, from the best of their predictions:
// `gain` with its figure where it gains kPredictedGainWorthIt, else
// `no_gain` with it and the counts weighed; `unpredicted` without any.
std::string MoreWorkersPredicted(const LoaderAnalysis& l, std::string_view gain, std::string_view no_gain,
                                 const std::string& unpredicted) {
  const WorkersPrediction* best = BestPredicted(l, l.config.num_workers + 1);
  if (!best) return unpredicted;
  if (best->change >= kPredictedGainWorthIt)
    return fmt::format("{}: num_workers={} is predicted at {} (then bound by {}; `stallprof whatif --workers {}`){}{}{}",
                       gain, best->workers, PredictedChange(*best), best->bottleneck, best->workers,
                       WholeRunCaveat(l, *best), UnmeasuredWorkerCosts(l, *best), KernelSchedulingCaveat(*best));
  return fmt::format("{}: num_workers={} is predicted at {} (then bound by {}), the best of {}", no_gain, best->workers,
                     PredictedChange(*best), best->bottleneck, PredictedRange(l, l.config.num_workers + 1));
}

// Without workers, a batch made faster than a worker's would be received
// (timed after the run): workers would slow it down (a TensorDataset MLP:
// 148 us to fetch, 364 us to receive; 38945 samples/s without workers, 24418
// with 2).
// The main thread's time to receive a batch from a worker, timed after a run
// without workers: the wall time where timed (the CPU and the waits on the
// worker's sending), else the CPU; -1 when not timed.
double TimedReceiveSeconds(const LoaderConfig& c) { return std::max(c.ipc_receive_wall_s, c.ipc_receive_cpu_s); }

bool WorkersWouldOnlyReceive(const LoaderAnalysis& l) {
  const double receive = TimedReceiveSeconds(l.config), produce = MeanProduceSeconds(l);
  return l.config.num_workers == 0 && receive > 0 && produce > 0 && produce <= receive;
}

double HandoffPerBatch(const LoaderAnalysis& l) {
  const Account& a = l.account_steady;
  return a.batches ? a.Seconds(Cause::kHandoff) / static_cast<double>(a.batches) : 0;
}

// Whether the handoff line is batches waiting in their workers for a fetch
// that holds the GIL (PrefetchStats::SendsHeld), not the main thread
// receiving them: held, and at least one batch in ten seen held. A text
// classifier's 2 workers (Python tokenizing, 0.5 ms of receiving a batch)
// had 8 of 11 telling next() calls held, and 2481 of its 2500 found the
// batch made with its worker idle: taken as held, the advice named the GIL
// and left out no workers, which ran 1.3x faster.
bool BatchesWaitInWorkers(const LoaderAnalysis& l) {
  return l.config.num_workers > 0 && l.prefetch.SendsHeld() && 10 * l.prefetch.sends_held >= l.iterations.size();
}

// A batch made faster than it is received: the main process fetching it
// itself may beat the workers (a fast loader ran 4832 samples/s without
// workers, 1586 with 2: docs/model.md "recommend"). Not where the batch
// waited in its worker (a fetch holding the GIL): receiving is not the cost.
bool NoWorkersMayBeFaster(const LoaderAnalysis& l) {
  const double produce = MeanProduceSeconds(l);
  return l.config.num_workers > 0 && !BatchesWaitInWorkers(l) && produce > 0 && produce < HandoffPerBatch(l);
}

// Where the first epoch paid nearly all of the storage line, and the later
// epochs next to nothing, says so with the figures (the profile of a few
// epochs overstates storage for a longer run: CosmoFlow's first vs later
// epochs); else empty.
std::string FirstEpochStorage(const LoaderAnalysis& l) {
  if (!StoragePaidInFirstEpoch(l)) return "";
  const double first = l.epochs[0].storage_s;
  double later = 0, later_seconds = 0;
  for (size_t e = 1; e < l.epochs.size(); ++e) {
    later += l.epochs[e].storage_s;
    later_seconds += l.epochs[e].seconds;
  }
  const double epochs_later = static_cast<double>(l.epochs.size() - 1);
  const std::string in_first = fmt::format("{} of the first epoch's {}", FormatSeconds(first), FormatSeconds(l.epochs[0].seconds));
  if (later <= 0) return fmt::format("all in the first epoch ({}), none in the later ones: they found what it read in memory", in_first);
  const double share = first / (first + later) * 100;
  return fmt::format("{} in the first epoch ({}; {} a later epoch, {:.1f}% of its time): the later ones found "
                     "what it read in memory",
                     share >= 99.5 ? std::string("nearly all") : fmt::format("{:.0f}%", share), in_first, FormatSeconds(later / epochs_later),
                     later_seconds > 0 ? later / later_seconds * 100 : 0.0);
}

std::string AdviceFor(Cause cause, const LoaderAnalysis& l, const Account& a, double cores) {
  const auto& line = a.Line(cause);
  const std::string share = fmt::format("{:.0f}%", line.share * 100);
  const double produce = MeanProduceSeconds(l);
  switch (cause) {
    case Cause::kPrep: {
      const char* prep = l.config.num_workers == 0 ? "prep CPU" : "worker CPU";
      const double receive = TimedReceiveSeconds(l.config);
      if (WorkersWouldOnlyReceive(l))
        return fmt::format("{} ({}): workers would not help: the main process would take {} to receive each "
                           "batch from a worker (timed after the run) against {} to make it here; make __getitem__ or "
                           "collate cheaper; predict with `stallprof whatif --workers N`",
                           prep, share, FormatSeconds(receive), FormatSeconds(produce));
      // Workers that already have every core only queue for them when added.
      std::string advice;
      if (l.config.num_workers >= cores && cores > 0)
        advice = fmt::format("{} ({}): num_workers={} already covers the {} usable cores (the step takes its "
                             "share): more cores, or cheaper work per sample (smaller images to decode, decoded "
                             "samples cached); more workers would only queue; predict with `stallprof whatif --cores N`",
                             prep, share, l.config.num_workers, cores);
      else if (const WorkersPrediction* best = BestPredicted(l, l.config.num_workers + 1); !best)
        advice = fmt::format("{} ({}): more workers or cores (num_workers={} now, {} usable cores); predict "
                             "with `stallprof whatif --workers N`",
                             prep, share, l.config.num_workers, cores);
      else if (best->change >= kPredictedGainWorthIt)
        advice = fmt::format("{} ({}): more workers: num_workers={} is predicted at {} (then bound by {}; "
                             "`stallprof whatif --workers {}`){}{}{}",
                             prep, share, best->workers, PredictedChange(*best), best->bottleneck, best->workers,
                             WholeRunCaveat(l, *best), UnmeasuredWorkerCosts(l, *best), KernelSchedulingCaveat(*best));
      else
        advice = fmt::format("{} ({}): more workers would not help on {}: num_workers={} is predicted at {} "
                             "(then bound by {}{}), the best of {}; make __getitem__ or collate cheaper, or more cores "
                             "(`stallprof whatif --cores N --workers N`)",
                             prep, share, cores == 1 ? std::string("this 1 core") : fmt::format("these {} cores", cores),
                             best->workers,
                             PredictedChange(*best), best->bottleneck,
                             l.config.num_workers == 0
                                 ? fmt::format(": receiving each batch from a worker, {}, and the step's share of the "
                                               "cores cost about what making it here, {}, saves",
                                               FormatSeconds(best->handoff_s), FormatSeconds(produce))
                                 : "",
                             PredictedRange(l, l.config.num_workers + 1));
      if (!CachingAllocator(l.config) && l.fetch_kernel_share >= kKernelHeavyShare &&
          l.worker_faults_per_batch - (BatchSegmentFaultsHeavy(l) ? BatchPages(l) : 0) >= kFaultsHeavyPerBatch)
        advice += fmt::format("; {:.0f}% of the workers' CPU is the kernel's, with {:.0f} page faults per batch: {}",
                              l.fetch_kernel_share * 100, l.worker_faults_per_batch, KeepFreedMemory(l.config));
      else if (FetchFaultsInMain(l))
        advice += "; " + FetchFaultsInMainAdvice(l);
      return advice;
    }
    case Cause::kContention:
      // Beyond the cores workers only queue; within them the wait is the
      // step's and the workers' share of too few cores, and fewer workers
      // would make less (the model says which wins).
      if (l.config.num_workers > cores) {
        const WorkersPrediction* best = BestPredicted(l, 1, l.config.num_workers - 1);
        return !best ? fmt::format("CPU contention ({}): the workers wait for a core; use fewer workers than cores ({} "
                                   "workers, {} usable cores) or a less busy machine; predict with `stallprof whatif "
                                   "--workers N`",
                                   share, l.config.num_workers, cores)
               : best->change >= kPredictedGainWorthIt
                   ? fmt::format("CPU contention ({}): the workers wait for a core ({} workers, {} usable cores); "
                                 "fewer workers: num_workers={} is predicted at {} (then bound by {}; `stallprof "
                                 "whatif --workers {}`)",
                                 share, l.config.num_workers, cores, best->workers, PredictedChange(*best),
                                 best->bottleneck, best->workers)
                   : fmt::format("CPU contention ({}): the workers wait for a core ({} workers, {} usable cores), but "
                                 "fewer would not help: num_workers={} is predicted at {} (then bound by {}), the "
                                 "best of {}; a less busy machine or more cores",
                                 share, l.config.num_workers, cores, best->workers, PredictedChange(*best),
                                 best->bottleneck, PredictedRange(l, 1, l.config.num_workers - 1));
      }
      if (const std::string threads = StepThreadsOverCoresAdvice(l, cores); !threads.empty() && l.config.num_workers == 0)
        return fmt::format("CPU contention ({}): {}", share, threads);
      return fmt::format("CPU contention ({}): {} and the training step share the {:g} usable core{} and wait for "
                         "one another (or for other processes): more cores or a less busy machine; predict {}more "
                         "cores with `stallprof whatif {}--cores N`",
                         share,
                         l.config.num_workers == 0 ? std::string("the main process's fetches")
                                                   : fmt::format("the {} workers", l.config.num_workers),
                         cores, cores == 1 ? "" : "s", l.config.num_workers == 0 ? "" : "fewer workers or ",
                         l.config.num_workers == 0 ? "" : "--workers N ");
    case Cause::kStorage:
      if (const std::string first = FirstEpochStorage(l); !first.empty())
        return fmt::format("storage ({}): {}; a longer run pays it once, so only a short one gains from warming the "
                           "page cache before training (read the files once) or caching the dataset; predict with "
                           "`stallprof whatif --cache SIZE`",
                           share, first);
      return fmt::format("storage ({}): cache the dataset (page cache, local SSD, in memory); predict with `stallprof whatif "
                         "--cache SIZE`",
                         share);
    case Cause::kOtherBlocking:
      return fmt::format("other blocking ({}): the workers are off CPU without reading the device (sleep, lock, network, "
                         "IPC); find it in __getitem__; {}",
                         share,
                         MoreWorkersPredicted(l, "more workers hide the latency", "more workers would not hide it",
                                              "more workers hide the latency (`stallprof whatif --workers N`)"));
    case Cause::kHandoff: {
      // Held in its worker (docs/model.md "A fetch that holds the GIL"):
      // more workers or GIL-free fetch work, predicted; cheaper receiving
      // only where the main thread's own CPU is most of the line.
      if (BatchesWaitInWorkers(l)) {
        std::string advice = fmt::format("handoff ({}): ", share);
        // Most of the line the main thread's own receiving: the batch's
        // tensors cost it, one receive each (about 0.2 ms a tensor on the
        // 2-core VM: 0.61 ms for 1 tensor a batch, 1.06 for 3, 1.97 for 8).
        if (const double handoff = a.Seconds(Cause::kHandoff); handoff > 0 && a.handoff_receive_cpu_s >= 0.5 * handoff) {
          const uint32_t tensors = l.config.batch_tensors;
          advice += fmt::format("{:.0f}% of it is the main thread on CPU receiving the batches{}: ",
                                a.handoff_receive_cpu_s / handoff * 100,
                                tensors ? fmt::format(" ({} tensor{} each)", tensors, tensors == 1 ? "" : "s") : "");
          // One tensor is the least a batch can be: what is left is a cost per batch.
          advice += tensors == 1 ? "larger batches, fewer of them (the cost is per batch, not per sample); "
                                 : "fewer tensors per batch (each tensor's storage is received apart, its file descriptor "
                                   "fetched from the worker over a socket); ";
        }
        advice += fmt::format(
            "the batches wait in their workers: a worker's next fetch holds the GIL (Python code in __getitem__ or "
            "collate) that its sending thread needs, so a finished batch goes out only when that fetch ends; {}; or "
            "fetch work that lets the GIL go (numpy or torch operations on whole arrays, I/O)",
            MoreWorkersPredicted(l, "more workers", "more workers would not help",
                                 fmt::format("more workers (num_workers={} now; predict with `stallprof whatif "
                                             "--workers N`)",
                                             l.config.num_workers)));
        return advice;
      }
      std::string advice = fmt::format("handoff ({}): the main process spends its time receiving batches; use larger or "
                                       "cheaper batches (fewer tensors and Python objects per batch: each tensor is "
                                       "received apart; pin_memory only when needed)",
                                       share);
      // No sharing-strategy advice: torch.multiprocessing's 'file_system'
      // moves receiving work into the workers (on the 2-core VM a batch of one
      // 64 KiB tensor: main-process CPU 0.24 -> 0.15 ms, pipeline 1646 -> 891
      // batches/s from one worker); a text classifier ran 20% faster with it
      // and a streaming text loader 17% slower (1 and 2 workers), and the
      // profile cannot price the workers' extra CPU (docs/analysis.md).
      // Fetching in the main process instead, predicted wherever the workers
      // send their batches at once (the text classifier of
      // BatchesWaitInWorkers: a worker made a batch in 0.7 ms and the main
      // process took 0.6 ms to receive it, yet no workers ran 1.3x faster,
      // the step no longer sharing the cores with them).
      const WorkersPrediction* none = BestPredicted(l, 0, 0);
      const std::string no_workers =
          fmt::format("; or no workers: a worker makes a batch in {} and the main process takes {} to receive it",
                      FormatSeconds(produce), FormatSeconds(HandoffPerBatch(l)));
      if (none && none->change >= kPredictedGainWorthIt)
        advice += no_workers + fmt::format(": num_workers=0 is predicted at {} (then bound by {}; `stallprof whatif "
                                           "--workers 0`)",
                                           PredictedChange(*none), none->bottleneck);
      else if (!none && NoWorkersMayBeFaster(l))
        advice += no_workers + ", so fetching in the main process (num_workers=0) may be faster; predict it with "
                               "`stallprof whatif --workers 0` or `stallprof recommend`";
      return advice;
    }
    case Cause::kStartup: {
      if (std::string sampler = SamplerStartupAdvice(l, share, line.seconds); !sampler.empty()) return sampler;
      // What persistent_saving_s counts.
      const auto saved = [&](std::string_view each) {
        return fmt::format("worker start-up{} and shutdown of every {}{}",
                           l.worker_setup.by_fetch.empty() ? "" : ", the first batch's wait for a worker's set-up,", each,
                           l.fork_refault_s_per_epoch > 0
                               ? fmt::format(", and the {} a later epoch's steps spent refaulting the training "
                                             "process's pages after its workers' fork (copy-on-write)",
                                             FormatSeconds(l.fork_refault_s_per_epoch))
                               : "");
      };
      if (std::string per_step = IteratorPerStepAdvice(l); !per_step.empty())
        return fmt::format("epoch start-up ({}): {}{}", share, per_step,
                           l.persistent_saving_s > 0
                               ? fmt::format("; persistent_workers=True alone saves at least {} ({})",
                                             FormatSeconds(l.persistent_saving_s), saved("iterator"))
                               : "");
      // Workers persist only within one DataLoader object: a loader built
      // anew for each epoch (an evaluation function's) must be built once.
      return (l.persistent_saving_s > 0 && l.scopes.size() > 1
                  ? fmt::format("epoch start-up ({}): the DataLoader was built {} times under this name, so its "
                                "workers start with each whatever persistent_workers says; building it once with "
                                "persistent_workers=True saves at least {} ({})",
                                share, l.scopes.size(), FormatSeconds(l.persistent_saving_s), saved("epoch"))
              : l.persistent_saving_s > 0
                  ? fmt::format("epoch start-up ({}): persistent_workers=True saves at least {} ({})", share,
                                FormatSeconds(l.persistent_saving_s), saved("epoch"))
              : l.config.persistent_workers && l.startup_split.starting_epochs > 0
                  ? PersistentStartupAdvice(l, share)
                  : fmt::format("epoch start-up ({}): longer epochs or fewer, cheaper workers to start (start method {})",
                                share, l.config.multiprocessing_context.empty() ? "?" : l.config.multiprocessing_context)) +
             SerialStartAdvice(l) + FirstBatchAdvice(l, line.seconds, cores) + FewerWorkersStartupAdvice(l);
    }
    case Cause::kStallprof:
      return fmt::format("stallprof's own cost ({}): the job is faster than the trace says, by {:.1f} us per batch", share,
                         a.batches ? line.seconds / a.batches * 1e6 : 0.0);
    case Cause::kCompute: {
      std::string advice = fmt::format("compute ({}): the input pipeline keeps up; ", share);
      const std::string stages = MainStagesAdvice(l, a);
      const std::string zipped = ZippedAdvice(l);
      advice += !zipped.empty() ? zipped + (stages.empty() ? "" : "; " + stages)
                : stages.empty() ? "speed up the model step itself"
                                 : stages;
      if (StepReadsHeavy(l)) advice = fmt::format("compute ({}): {}", share, StepReadsAdvice(l));
      if (StepFaultsHeavy(l) && !FetchFaultsInMain(l)) advice += "; " + StepFaultsAdvice(l);
      if (std::string parallel = ParallelStepAdvice(l, a, cores); !parallel.empty()) advice += "; " + parallel;
      else if (std::string threads = StepThreadsOverCoresAdvice(l, cores); !threads.empty()) advice += "; " + threads;
      else if (std::string waited = StepWaitedForCoreAdvice(l, a, cores); !waited.empty()) advice += "; " + waited;
      return advice;
    }
  }
  return {};
}

}  // namespace

// The steady iterations' device reads by the loader's fetches (its workers',
// or the main process's without workers): the rate and the reads in flight (a
// fetch counts where it ends: in a steady iteration's step).
void FillStorageRate(const FetchFactList& fetches, LoaderAnalysis& loader) {
  loader.storage_read_rate = loader.storage_reads_in_flight = 0;
  const bool in_main = loader.config.num_workers == 0;
  HugeVector<std::pair<uint64_t, uint64_t>> steps;  // [next() called, step end), by time
  steps.reserve(loader.iterations.size());
  double window_ns = 0;
  for (const Iteration& it : loader.iterations)
    if ((it.steady || loader.steady_fallback) && it.compute_end_ns > it.wait_start_ns) {
      steps.emplace_back(it.wait_start_ns, it.compute_end_ns);
      window_ns += static_cast<double>(it.compute_end_ns - it.wait_start_ns);
    }
  if (steps.empty() || window_ns <= 0) return;
  if (!std::is_sorted(steps.begin(), steps.end())) std::sort(steps.begin(), steps.end());  // iterations are by time
  double bytes = 0, off_cpu_ns = 0;
  for (const FetchFact& f : fetches) {
    if ((f.pid == loader.pid) != in_main || f.device_bytes <= 0 || !f.has_cpu) continue;
    auto step = std::upper_bound(steps.begin(), steps.end(), std::make_pair(f.end_ns, UINT64_MAX));
    if (step == steps.begin() || f.end_ns >= (step - 1)->second) continue;
    bytes += static_cast<double>(f.device_bytes);
    off_cpu_ns += std::max(0.0, static_cast<double>(f.end_ns - f.start_ns) - static_cast<double>(f.cpu_ns + f.delay_ns));
  }
  loader.storage_read_rate = bytes / (window_ns * kNs);
  loader.storage_reads_in_flight = off_cpu_ns / window_ns;
}

// EpochStats::workers_ready_ns: the latest of the first fetch starts of the
// workers that started in each epoch: every worker in each epoch without
// persistent workers (they start anew), a worker's first fetch of the run
// with them (they start once per DataLoader object).
void FillWorkersReady(const FetchFactList& fetches, LoaderAnalysis& loader) {
  auto& epochs = loader.epochs;  // in the order they started
  for (auto& epoch : epochs) epoch.workers_ready_ns = 0;
  if (loader.config.num_workers == 0 || epochs.empty()) return;
  const bool persistent = loader.config.persistent_workers;
  const auto epoch_of = [&](uint64_t t) -> int64_t {
    auto after = std::upper_bound(epochs.begin(), epochs.end(), t, [](uint64_t x, const EpochStats& e) { return x < e.start_ns; });
    return after == epochs.begin() || t > (after - 1)->end_ns ? -1 : after - 1 - epochs.begin();
  };
  std::unordered_map<uint64_t, std::pair<int64_t, uint64_t>> first;  // (epoch, pid) or pid -> (epoch, first fetch start)
  for (const FetchFact& f : fetches) {
    if (f.pid == loader.pid) continue;
    const int64_t e = epoch_of(f.start_ns);
    if (e < 0) continue;
    const uint64_t key = persistent ? f.pid : (static_cast<uint64_t>(e) << 32 | f.pid);
    auto [at, fresh] = first.try_emplace(key, e, f.start_ns);
    if (!fresh && f.start_ns < at->second.second) at->second = {e, f.start_ns};
  }
  for (const auto& [key, start] : first)
    epochs[start.first].workers_ready_ns = std::max(epochs[start.first].workers_ready_ns, start.second);
}

std::vector<int32_t> WorkerCountsToPredict(const LoaderAnalysis& l, double usable_cores) {
  const uint32_t cores = WholeCores(usable_cores);
  const Account& a = l.account_steady;
  if (!a.available || l.compute_steady.count == 0 || l.prefetch_thread.LoopBound()) return {};
  const auto advised = [&](Cause c) { return l.bottleneck == c || a.Line(c).share >= kAdvisedShare; };
  const uint32_t now = l.config.num_workers;
  std::vector<int32_t> counts;
  // One more, then doubling up to the cores (and the cores): each count a
  // prediction, a few milliseconds on a long trace.
  if (advised(Cause::kPrep) && now < cores && !WorkersWouldOnlyReceive(l))
    for (uint32_t w = now + 1; w <= cores; w = w == cores ? w + 1 : std::min(2 * w, cores))
      counts.push_back(static_cast<int32_t>(w));
  // Workers that wait off CPU overlap their waits beyond the cores.
  if (advised(Cause::kOtherBlocking))
    for (uint32_t w = now + 1; w <= std::max<uint32_t>(2 * cores, 2 * now + 2) && w <= model::kMaxAutoWorkers; w *= 2)
      counts.push_back(static_cast<int32_t>(w));
  if (advised(Cause::kHandoff) && now > 0 && !BatchesWaitInWorkers(l)) counts.push_back(0);
  // Batches held in their workers go out sooner with more workers ahead of the step.
  if (advised(Cause::kHandoff) && now > 0 && BatchesWaitInWorkers(l))
    for (uint32_t w : {now + 1, 2 * now, cores})
      if (w > now && w <= model::kMaxAutoWorkers) counts.push_back(static_cast<int32_t>(w));
  // Fewer workers where they outnumber the cores: halvings of the workers
  // down to the cores, and the cores; where they wait for a core, one less
  // too (a core for the step); where they start anew each epoch and
  // start-up is advised, these (FewerWorkersStartupAdvice).
  const bool outnumber = now > cores && cores > 0;
  const bool contended = outnumber && advised(Cause::kContention);
  const bool starting = outnumber && !l.config.persistent_workers &&
                        (WholeRunStartupShare(l) > 0 || l.bottleneck == Cause::kStartup);
  if (contended || starting) {
    for (uint32_t w = now / 2; w > cores; w /= 2) counts.push_back(static_cast<int32_t>(w));
    counts.push_back(static_cast<int32_t>(cores));
  }
  if (contended && cores > 1) counts.push_back(static_cast<int32_t>(cores - 1));
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

// Advice: the bottleneck first, then every other cause worth 5% of the wall
// time (stallprof's own cost from 1%: it changes how to read the figures).
void WriteAdvice(LoaderAnalysis& loader, double cores) {
  const Account& a = loader.account_steady;
  const bool loop_bound = loader.prefetch_thread.LoopBound();
  loader.advice.clear();
  if (a.available && loop_bound) {
    // The pipeline's lines are the prefetch thread's, which the loop does not wait for.
    loader.advice.push_back(PrefetchLoopBoundAdvice(loader));
    if (a.Line(Cause::kStallprof).share >= 0.01) loader.advice.push_back(AdviceFor(Cause::kStallprof, loader, a, cores));
  } else if (a.available) {
    loader.advice.push_back(AdviceFor(loader.bottleneck, loader, a, cores));
    for (size_t k = 0; k < kN; ++k) {
      const Cause cause = static_cast<Cause>(k);
      if (cause == loader.bottleneck || cause == Cause::kCompute) continue;
      const double share = a.Line(cause).share;
      if (share >= kAdvisedShare || (cause == Cause::kStallprof && share >= 0.01))
        loader.advice.push_back(AdviceFor(cause, loader, a, cores));
    }
    // Start-up over the whole run, first when it takes more of the run than
    // the steady bottleneck takes of the steady state.
    if (const double startup = WholeRunStartupShare(loader); startup > 0) {
      auto advice = AdviceFor(Cause::kStartup, loader, loader.account_all, cores) + " (whole run)";
      if (loader.bottleneck != Cause::kCompute && startup > a.Line(loader.bottleneck).share)
        loader.advice.insert(loader.advice.begin(), std::move(advice));
      else
        loader.advice.push_back(std::move(advice));
    }
    if (loader.bottleneck != Cause::kCompute)
      if (std::string zipped = ZippedAdvice(loader); !zipped.empty()) loader.advice.push_back("compute: " + zipped);
    // The step waiting for its own reads: first where it takes more than the bottleneck.
    if (loader.bottleneck != Cause::kCompute && StepReadsHeavy(loader)) {
      auto advice = "compute: " + StepReadsAdvice(loader);
      if (a.Line(Cause::kCompute).share > a.Line(loader.bottleneck).share)
        loader.advice.insert(loader.advice.begin(), std::move(advice));
      else
        loader.advice.push_back(std::move(advice));
    }
    // First where the workers' CPU, or the handoff, is what the step waits
    // for; not at all where the workers cost the step nothing (an LMDB
    // loader of 4 workers beside a 1.9 s step: 33% of their CPU faulting,
    // and the step waited 0.2% of its time on them and none for a core).
    if (BatchSegmentFaultsHeavy(loader) && WorkersCostTheStep(loader, a)) {
      auto advice = "prep: " + BatchSegmentAdvice(loader);
      if (loader.bottleneck == Cause::kPrep || loader.bottleneck == Cause::kContention ||
          loader.bottleneck == Cause::kHandoff)
        loader.advice.insert(loader.advice.begin(), std::move(advice));
      else
        loader.advice.push_back(std::move(advice));
    }
    if (FetchFaultsInMain(loader)) {
      if (loader.bottleneck != Cause::kPrep && a.Line(Cause::kPrep).share < kAdvisedShare)  // not in the prep's advice
        loader.advice.push_back("prep: " + FetchFaultsInMainAdvice(loader));
    } else if (loader.bottleneck != Cause::kCompute && StepFaultsHeavy(loader)) {
      // First where the kernel's part of the steps alone outweighs the bottleneck.
      auto advice = "compute: " + StepFaultsAdvice(loader);
      if (StepKernelShareOrProcess(loader) * a.Line(Cause::kCompute).share > a.Line(loader.bottleneck).share)
        loader.advice.insert(loader.advice.begin(), std::move(advice));
      else
        loader.advice.push_back(std::move(advice));
    }
    // Not where the workers lack CPU: moving work to them would add to it.
    // Without workers the prep runs on the main thread too, and workers
    // would take both off it.
    const bool workers_lack_cpu =
        loader.config.num_workers > 0 && (loader.bottleneck == Cause::kPrep || loader.bottleneck == Cause::kContention);
    if (loader.bottleneck != Cause::kCompute && !workers_lack_cpu)
      if (std::string advice = MainStagesAdvice(loader, a); !advice.empty()) loader.advice.push_back("compute: " + advice);
    if (loader.verdict != Verdict::kNotInputBound)
      if (std::string advice = UnevenStreamAdvice(loader); !advice.empty()) loader.advice.push_back(std::move(advice));
    // First: the step waiting for cores its own workers took is the larger lever.
    if (loader.bottleneck != Cause::kCompute)
      if (std::string advice = ParallelStepAdvice(loader, a, cores); !advice.empty())
        loader.advice.insert(loader.advice.begin(), "compute: " + advice);
  }
}

namespace {
// The training process's kernel CPU in later epochs' warm-up steps beyond its
// rate in the steady steps, per later epoch (LoaderProfile::
// fork_refault_later_s, LoaderAnalysis::fork_refault_s_per_epoch): where each epoch forks its workers anew, the parent's
// pages are shared copy-on-write and its first steps fault in every page they
// write (parameters, optimizer state: 41.8k faults in the first step of a
// 2048-wide MLP's epochs, 6 with persistent workers). 0 where the workers
// persist, are spawned (no shared pages) or the samples carry no kernel CPU.
double ForkRefaultLaterSeconds(const Trace& trace, const LoaderAnalysis& loader) {
  constexpr double kNs = 1e-9;
  const std::string& context = loader.config.multiprocessing_context;
  if (loader.config.num_workers == 0 || loader.config.persistent_workers || loader.epochs.size() < 2 ||
      !(context.empty() || context == "fork") || loader.steady_fallback)
    return 0;
  const ProcessSeries* series = nullptr;
  for (const auto& s : trace.process_series)
    if (s.pid == loader.pid && s.t_ns.size() >= 2 && s.system_cpu_ns.size() == s.t_ns.size()) series = &s;
  if (!series) return 0;
  const auto kernel_s = [&](const Iteration& it) {
    const uint64_t from = it.return_ns, to = it.compute_end_ns;
    return (SeriesAt(series->t_ns, series->system_cpu_ns, to) - SeriesAt(series->t_ns, series->system_cpu_ns, from)) * kNs;
  };
  const auto inside = [&](const Iteration& it) {
    return !it.compute_unknown && it.compute_end_ns > it.return_ns && it.return_ns >= series->t_ns.front() &&
           it.compute_end_ns <= series->t_ns.back();
  };
  double steady_kernel = 0, steady_s = 0;
  std::vector<double> warm_kernel(loader.epochs.size(), 0), warm_s(loader.epochs.size(), 0);
  for (const Iteration& it : loader.iterations) {
    if (!inside(it) || it.epoch >= loader.epochs.size()) continue;
    const double seconds = (it.compute_end_ns - it.return_ns) * kNs;
    if (it.steady) {
      steady_kernel += kernel_s(it);
      steady_s += seconds;
    } else if (it.epoch > 0) {  // warm-up and drain, as warmup_extra_* counts them
      warm_kernel[it.epoch] += kernel_s(it);
      warm_s[it.epoch] += seconds;
    }
  }
  if (!(steady_s > 0)) return 0;
  const double rate = steady_kernel / steady_s;
  double excess = 0;
  for (size_t e = 1; e < loader.epochs.size(); ++e) excess += std::max(0.0, warm_kernel[e] - rate * warm_s[e]);
  return excess / static_cast<double>(loader.epochs.size() - 1);
}

// Context::off_cpu_without_device_ns: over the fetches whose counters were
// read (not estimated), at least kMinFetches of them. A worker's first fetch
// faulting in a module after the page cache was dropped, beside a sleep in
// every fetch, is then storage for its faults alone, not for its sleep.
double MedianOffCpuWithoutDevice(const FetchFactList& fetches) {
  constexpr size_t kMinFetches = 8;
  std::vector<double> off_cpu;
  for (const auto& f : fetches)
    if (f.has_cpu && !f.estimated && f.device_bytes == 0 && f.end_ns > f.start_ns)
      off_cpu.push_back(std::max(0.0, static_cast<double>(f.end_ns - f.start_ns) - f.cpu_ns - f.delay_ns));
  if (off_cpu.size() < kMinFetches) return 0;
  auto mid = off_cpu.begin() + static_cast<std::ptrdiff_t>(off_cpu.size() / 2);
  std::nth_element(off_cpu.begin(), mid, off_cpu.end());
  return *mid;
}
}  // namespace

void FillAccount(const Trace& trace, const FetchFactList& fetches, LoaderAnalysis& loader) {
  FillWorkersReady(fetches, loader);
  FillStorageRate(fetches, loader);
  Context c{loader, fetches};
  c.hook = ReadHookCost(trace, loader.pid);
  // Reading the counters costs only on the spans the budget sampled: on
  // average, that share of what it adds per span.
  const auto share_of = [](const SampledSums& x) { return x.spans ? static_cast<double>(x.measured) / x.spans : 1.0; };
  c.hook.wait_ns += c.hook.wait_counters_ns * share_of(loader.counters.waits);
  c.hook.fetch_ns += c.hook.fetch_counters_ns * share_of(loader.counters.fetches);
  c.samples_per_batch = loader.config.batch_size > 0 ? loader.config.batch_size : 1;
  // Worker CPU per storage byte (the fit, or its estimate), as the model's profile has it.
  TraceAnalysis view;
  const model::LoaderProfile profile = BuildProfile(trace, view, loader, ProfileFits::kMeasured);
  c.miss_cpu_ns_per_byte = profile.cpu_s_per_storage_byte.value * 1e9;
  const double miss_cpu_s_per_batch = profile.cpu_s_per_batch - model::CpuSecondsAtMiss(profile, 0);
  c.off_cpu_without_device_ns = MedianOffCpuWithoutDevice(fetches);
  {
    double off_cpu = 0, storage = 0;
    for (const auto& f : fetches) {
      Weights w{};
      double miss = 0;
      // Without read spans nothing says whether it was storage: the share stays unknown (1).
      if (f.device_bytes < 0 || !c.WeightsOf(f, w, &miss)) continue;
      off_cpu += w[I(Cause::kOtherBlocking)] + w[I(Cause::kStorage)] - miss;
      storage += w[I(Cause::kStorage)] - miss;
    }
    loader.fetch_off_cpu_storage_share = off_cpu > 0 ? std::clamp(storage / off_cpu, 0.0, 1.0) : 1;
  }

  // The fetches by start (a fetch of several at the same start: in file order).
  HugeVector<std::pair<uint64_t, uint32_t>> by_start(fetches.size());
  for (uint32_t i = 0; i < by_start.size(); ++i) by_start[i] = {fetches[i].start_ns, i};
  RadixSortBy(by_start, [](const auto& fetch) { return fetch.first; });
  c.worker_fetch_of_batch.Reserve(by_start.size());
  for (const auto& fetch : by_start) {
    const uint32_t f = fetch.second;
    if (fetches[f].pid == loader.pid) c.main_fetches.push_back(f);
    else c.worker_fetch_of_batch.Add(fetches[f].batch, fetches[f].start_ns, f);
    Weights w{};
    if (c.WeightsOf(fetches[f], w)) {
      c.has_mean = true;
      for (size_t k = 0; k < kN; ++k) c.mean[k] += w[k];
    }
  }

  c.worker_fetch_of_batch.Sort();

  Ledger all, steady;
  // Each epoch's own whole-run account, for its stall fraction (start-up included).
  std::vector<Ledger> epochs(loader.epochs.size());
  // Each iteration's part is worked out once and added to every ledger it
  // counts in: ledgers hold integers, so the order of the sums does not matter.
  for (size_t i = 0; i < loader.iterations.size(); ++i) {
    const Iteration& it = loader.iterations[i];
    const EpochStats& epoch = loader.epochs[it.epoch];
    const bool first = it.index_in_epoch == 0;
    const bool last = i + 1 == loader.iterations.size() || loader.iterations[i + 1].epoch != it.epoch;
    const bool startup = first && loader.config.num_workers > 0;
    Ledger step;  // the next() call and the compute after it
    AccountWait(c, it, startup, step, epoch.workers_ready_ns);
    AccountCompute(c, ComputeNs(it) + (last ? static_cast<int64_t>(epoch.step_after_end_ns) : 0), step);
    Ledger whole = step;  // and, in the whole run's ledgers, the epoch's start-up and shutdown
    if (first) {
      whole.epochs++;
      const int64_t create = Ns(epoch.start_ns, std::min(epoch.iterator_ready_ns, it.wait_start_ns));
      whole.Add(Cause::kStartup, create);
      whole.startup_create += create;
      const int64_t before = Ns(std::max(epoch.start_ns, epoch.iterator_ready_ns), it.wait_start_ns);
      whole.Add(Cause::kCompute, before);
      whole.before_first_next += before;
    }
    if (last && epoch.has_end_call) {
      const int64_t shutdown = Ns(epoch.end_call_ns, epoch.end_ns);
      whole.Add(Cause::kStartup, shutdown);
      whole.startup_shutdown += shutdown;
    }
    all += whole;
    epochs[it.epoch] += whole;
    if (it.steady) {
      if (startup || epoch.workers_ready_ns > it.wait_start_ns) {  // steady from the first iteration (no warm-up): its wait is not start-up there
        step = Ledger{};
        AccountWait(c, it, false, step);
        AccountCompute(c, ComputeNs(it) + (last ? static_cast<int64_t>(epoch.step_after_end_ns) : 0), step);
      }
      steady += step;
    }
  }

  // What persistent_workers=True would save: each later epoch's wait for its
  // workers to start (epoch start to the last one's first fetch), every
  // shutdown, and each later fork's copy-on-write refault in the steps.
  loader.persistent_saving_s = 0;
  loader.fork_refault_s_per_epoch = ForkRefaultLaterSeconds(trace, loader);
  if (loader.epochs.size() > 1) loader.persistent_saving_s += loader.fork_refault_s_per_epoch * (loader.epochs.size() - 1);
  if (loader.config.num_workers > 0 && !loader.config.persistent_workers) {
    std::vector<uint64_t> first_return(loader.epochs.size(), 0);  // each epoch's first batch
    for (const Iteration& it : loader.iterations)
      if (it.index_in_epoch == 0 && it.epoch < first_return.size() && first_return[it.epoch] == 0)
        first_return[it.epoch] = it.return_ns;
    for (size_t e = 0; e < loader.epochs.size(); ++e) {
      const auto& epoch = loader.epochs[e];
      if (epoch.has_end_call) loader.persistent_saving_s += Ns(epoch.end_call_ns, epoch.end_ns) * kNs;
      // A persistent iterator's later epoch still draws the sampler's first indices (_reset).
      if (e > 0 && epoch.workers_ready_ns > epoch.start_ns) {
        loader.persistent_saving_s += std::max(0.0, Ns(epoch.start_ns, epoch.workers_ready_ns) * kNs - epoch.sampler_first_s);
        // and its first batch comes from a worker set up already: the wait
        // past the last worker's start, as far as a first fetch's set-up.
        if (const auto& setup = loader.worker_setup.by_fetch; !setup.empty() && first_return[e] > epoch.workers_ready_ns)
          loader.persistent_saving_s += std::min(setup[0].Seconds(),
                                                 Ns(epoch.workers_ready_ns, first_return[e]) * kNs);
      }
    }
  }

  const double cores = UsableCores(trace.header);
  const FetchMeans means = MeansOf(fetches);
  const FetchKernelCpu fetch_kernel_cpu = KernelCpuOf(fetches);
  std::tie(loader.fetch_kernel_share, loader.fetch_kernel_s) = KernelShare(fetch_kernel_cpu);
  loader.worker_faults_per_batch = WorkerFaultsPerBatch(trace, fetches, loader.pid);
  if (trace.header.page_bytes > 0) loader.page_bytes = trace.header.page_bytes;
  loader.worker_cpu_outside_fetch_s = WorkerCpuOutsideFetchPerBatch(trace, fetches, loader.pid);
  loader.main_faults_per_batch = MainFaultsPerBatch(trace, loader);
  std::tie(loader.main_kernel_share, loader.step_kernel_share) = MainKernelShares(trace, loader, fetch_kernel_cpu);
  loader.stream_worker_batches = StreamWorkerBatches(loader);
  loader.startup_split = {};
  for (size_t e = 0; e < epochs.size() && loader.config.num_workers > 0; ++e) {
    const double s = epochs[e].ns[I(Cause::kStartup)] * kNs;
    auto& split = loader.startup_split;
    if (!loader.config.persistent_workers || loader.epochs[e].index == 0) {  // the hook counts epochs per DataLoader object
      split.starting_s += s;
      split.starting_epochs++;
    } else {
      split.later_s += s;
      split.later_epochs++;
    }
  }
  loader.account_all = Finish(all, c, means, loader, true, loader.persistent_saving_s, miss_cpu_s_per_batch, cores);
  loader.account_steady = loader.steady_fallback ? loader.account_all
                                                 : Finish(steady, c, means, loader, false, 0, miss_cpu_s_per_batch, cores);
  const Account& a = loader.account_steady;
  for (size_t e = 0; e < epochs.size(); ++e) {
    loader.epochs[e].stall_fraction = StallOf(epochs[e]);
    loader.epochs[e].storage_s = epochs[e].ns[I(Cause::kStorage)] * kNs;
  }
  loader.stall_fraction = StallOf(a);
  loader.stall_fraction_all = StallOf(loader.account_all);
  loader.verdict = Classify(loader.stall_fraction);
  // A prefetch thread's steps are not the training loop's: the loop waited
  // for data only where the thread did not wait for the loop.
  const bool loop_bound = loader.prefetch_thread.LoopBound();
  if (loop_bound) loader.verdict = Verdict::kNotInputBound;

  // The bottleneck: the largest pipeline cause when input-bound.
  loader.bottleneck = Cause::kCompute;
  if (loader.verdict != Verdict::kNotInputBound && a.available) {
    double largest = 0;
    for (Cause cause : {Cause::kPrep, Cause::kContention, Cause::kStorage, Cause::kOtherBlocking, Cause::kHandoff, Cause::kStartup})
      if (a.Seconds(cause) > largest) {
        largest = a.Seconds(cause);
        loader.bottleneck = cause;
      }
  }
  WriteAdvice(loader, cores);

  // The DS-Analyzer split as a view of the steady account.
  auto& split = loader.split;
  split = StallSplit{};
  split.available = a.available;
  if (!a.available) split.unavailable_reason = "no iteration to account";
  split.step_s = a.wall_s;
  split.ingest_s = a.Seconds(Cause::kCompute);
  split.fetch_stall_s = a.Seconds(Cause::kStorage);
  split.prep_stall_s = a.Seconds(Cause::kPrep) + a.Seconds(Cause::kContention);
  split.contention_s = a.Seconds(Cause::kContention);
  split.handoff_s = a.Seconds(Cause::kHandoff);
  split.cached_s = a.wall_s - split.fetch_stall_s;
  split.measured_stall_s = a.wall_s - split.ingest_s - a.Seconds(Cause::kStallprof);
  split.miss_cpu_s_per_batch = std::max(0.0, miss_cpu_s_per_batch);
}

}  // namespace internal

// A later epoch's storage time at most this share of the first epoch's: the
// later epochs found the first epoch's reads in memory (the page cache).
constexpr double kLaterEpochStorageMost = 0.1;

bool StoragePaidInFirstEpoch(const LoaderAnalysis& loader) {
  if (loader.epochs.size() < 2 || loader.epochs[0].storage_s <= 0) return false;
  double later = 0;
  for (size_t e = 1; e < loader.epochs.size(); ++e) later += loader.epochs[e].storage_s;
  return later / static_cast<double>(loader.epochs.size() - 1) <= kLaterEpochStorageMost * loader.epochs[0].storage_s;
}

double WholeRunStartupShare(const LoaderAnalysis& loader) {
  const auto& a = loader.account_all;
  const double share = a.wall_s > 0 ? a.Seconds(Cause::kStartup) / a.wall_s : 0;
  return !loader.steady_fallback && loader.bottleneck != Cause::kStartup && share >= 0.05 ? share : 0;
}

}  // namespace stallprof::analysis
