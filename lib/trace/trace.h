// The in-memory trace: what `stallprof run` recorded, columnar, as loaded from
// trace.pb. Analysis reads only this; it never sees protobuf or /proc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/huge_pages.h"
#include "trace/stage_place.h"

namespace stallprof {

// Span names the Python hook records (docs/trace-format.md is the full list).
// Analysis keys on these; the hook and the analysis must agree.
namespace names {
inline constexpr const char* kWait = "dataloader.wait";          // main: blocked in next(); arg = iteration in epoch; has cpu/delay
// main, span: DataLoader.__iter__ called to iterator created (worker start-up); arg = epoch index.
// Older traces: an instant when the iterator was created.
inline constexpr const char* kEpoch = "dataloader.epoch";
// main, zero-length span: an epoch of a DataLoader subclass whose own __iter__
// draws from one iterator made once (YOLOv5's InfiniteDataLoader, timm's
// MultiEpochsDataLoader): no iterator is made, its workers run on, and the
// batch indices (waits' and fetches' args) go on from the last epoch's.
// arg = the loop's epoch number. Its end is an epoch_end span (or a shutdown
// span where the loop left early).
inline constexpr const char* kKeptEpoch = "dataloader.kept_epoch";
// main, zero-length: the next() that raised StopIteration from a DataLoader
// subclass's own __iter__ that made an iterator. One that reads a batch
// ahead (accelerate's DataLoaderShard) meets its iterator's StopIteration
// (the epoch_end span) inside the next() returning the last batch: the
// last batch's step runs to this instead. arg = 0.
inline constexpr const char* kLoopEnd = "dataloader.loop_end";
// main, span: the next() that raised StopIteration (worker shutdown); arg = iterations.
// Older traces: an instant at the raise (read as a zero-length span).
inline constexpr const char* kEpochEnd = "dataloader.epoch_end";
// main, span: an iterator shutting its workers down (torch's
// _shutdown_workers): inside the epoch_end span when the epoch ran to its
// end; else as the iterator was deleted (for ... break, islice). arg = 0.
inline constexpr const char* kShutdown = "dataloader.shutdown";
// main, span: the first _next_index() after the iterator's __init__ or
// _reset, where the sampler's per-epoch work runs (the default BatchSampler's
// iter() is a generator: RandomSampler's randperm, a sort by length, run at
// its first draw): inside the first next() without workers, inside the
// iterator's creation with workers (_reset primes them). arg = 0.
inline constexpr const char* kSamplerFirst = "dataloader.sampler_first";
inline constexpr const char* kFetch = "dataloader.fetch";        // worker (or main when num_workers=0): one batch; arg = batch index; has cpu/delay
inline constexpr const char* kGetitem = "dataloader.getitem";    // one sample; arg = sample index
inline constexpr const char* kCollate = "dataloader.collate";    // collate_fn of one batch; arg = batch index
inline constexpr const char* kPin = "dataloader.pin";            // pin-memory thread: one batch
// Bytes the fetching thread read during one fetch span (/proc/thread-self/io)
// and its system CPU time, recorded right after that fetch span, in the same thread, with the same
// scope, starting at or before it and ending at or after it (so it contains
// it). Absent where the kernel has no per-thread io accounting.
inline constexpr const char* kReadStorage = "dataloader.read_storage";  // arg = read_bytes: from the storage device (page-cache misses)
inline constexpr const char* kReadCalls = "dataloader.read_calls";      // arg = rchar: through read syscalls (hits and misses)
inline constexpr const char* kSystemCpu = "dataloader.system_cpu";      // arg = the thread's system CPU ns (getrusage)
inline constexpr const char* kWorkerStart = "dataloader.worker_start";  // worker, instant: arg = worker id
// A thread of the hook's in a process fetching without workers, span: from
// asking for the GIL as one of the main thread's fetches began to getting it;
// scope = that fetch's loader, arg = the interpreter's switch interval in ns.
// Whether the fetch held it (analysis PrefetchStats::gil_probes_held).
inline constexpr const char* kGilProbe = "dataloader.gil_probe";
// A thread other than its process's main thread iterating a loader (a
// prefetch thread: DataLoaderX, prefetch_generator's BackgroundGenerator),
// span: from its next() returning a batch to its next call, handing the batch
// on (a queue the training loop takes from); has cpu/delay (budgeted); arg =
// the batch index returned. Off CPU there: waiting for the training loop.
inline constexpr const char* kHandout = "dataloader.handout";
// Spans the hook records while timing its own cost at start, named with this
// prefix: analysis ignores them (they are neither loaders nor stages).
inline constexpr const char* kCalibrationPrefix = "stallprof.calibration.";
// Config keys, scope 0 of the main process: the hook's own cost per event in ns,
// measured at start: "hook_ns_wait" (the next() wrapper and its wait span),
// "hook_ns_fetch" (a fetch span), "hook_ns_sample" (a getitem span),
// "hook_ns_collate" (a collate span); newer hooks time these without the
// counters and add "hook_ns_wait_counters" and "hook_ns_fetch_counters" (what
// reading them adds to a sampled wait / fetch, the latter with its read and
// system spans and thread_io calls). Older hooks read the counters on every
// span and have no *_counters keys.
// Config key, scope 0 of any process: "counter_share" (f64), the share of a
// thread's wall time its counter reads may cost, written by the client when
// its budget first skipped a span's counters: spans without CPU were sampled
// out, and analysis estimates them (analysis/sampling.h).
// Config keys, any process: "uncaught_error" (str, one line: the exception
// that ended the process (sys.last_value at exit) or one of its threads
// (threading.excepthook); scope = the loader whose iterator its traceback
// passed through, 0 = none) and "uncaught_error_batch" (u64, that iterator's
// batch index in its epoch).
// Config keys (scope = loader id): "name", "batch_size", "num_workers",
// "prefetch_factor", "pin_memory" (what torch does: off without CUDA),
// "pin_memory_unavailable" (pin_memory=True asked for without CUDA), "persistent_workers", "sampler", "drop_last",
// "dataset_len", "sampler_len" (the indices the sampler yields an epoch), "dataset_bytes",
// "dataset_files", "multiprocessing_context", "client", "held_files",
// "held_bytes", "held_kinds" and "held_parent" (the files the dataset reads from as the hook
// found them in its attributes after a fetch: numpy memmaps, LMDB, h5py
// objects, paths to HDF5, numpy or zip files; written by the process that
// fetched, a worker of the loader's process too, with its parent's pid for
// a worker gone before the launcher read its /proc entry; "mapped_files" and
// "mapped_bytes" before 2026-11-29 evening, numpy memmaps and LMDB only),
// "intra_op_threads" (torch.get_num_threads() at iterator creation).
}  // namespace names

enum class SpanKind : uint8_t { kSpan = 1, kInstant = 4, kCounter = 5 };

// How the clients timed spans; every time in a trace is CLOCK_MONOTONIC ns.
// Traces without the field read as kMonotonic.
enum class ClockSource : uint8_t { kMonotonic = 0, kTsc = 1 };

struct TraceHeader {
  uint32_t version_major = 0;
  uint32_t version_minor = 0;
  std::string tool_version;
  std::vector<std::string> command;
  std::string hostname;
  std::string kernel;
  std::string cwd;
  uint32_t usable_cores = 0;
  uint32_t online_cores = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_limit_bytes = 0;  // the memory cgroup's limit; 0 = none or not recorded (MemoryBytes)
  double cpu_quota_cores = 0;       // the CPU cgroup's quota in cores; 0 = none or not recorded (UsableCores)
  uint64_t start_monotonic_ns = 0;
  int64_t start_realtime_ns = 0;
  uint64_t page_cache_bytes = 0;
  uint64_t ring_bytes = 0;
  uint32_t ring_lanes = 0;
  uint32_t sample_period_ms = 0;
  uint64_t clock_resolution_ns = 0;
  uint64_t run_id = 0;
  double page_cache_copy_ns_per_byte = 0;  // CPU a cached read costs per byte, 0 = not measured
  ClockSource clock_source = ClockSource::kMonotonic;
  double tsc_hz = 0;  // kTsc: the calibrated TSC rate
  uint32_t page_bytes = 0;  // the machine's page size; 0 = not recorded (4096 assumed)
  std::string page_reclaim;  // "lists", "mglru", "" = not recorded (trace.proto)
};

// The memory the job had: the machine's, or its memory cgroup's limit (a
// container's) where that is lower.
inline uint64_t MemoryBytes(const TraceHeader& h) {
  return h.memory_limit_bytes > 0 && (h.memory_bytes == 0 || h.memory_limit_bytes < h.memory_bytes) ? h.memory_limit_bytes
                                                                                                    : h.memory_bytes;
}

// The cores the job could use: those its CPU affinity allowed (else the
// machine's online cores), or its CPU cgroup's quota (a container's CPU
// limit) where that is lower; fractional under a quota of 1.5 cores.
inline double UsableCores(const TraceHeader& h) {
  const double cores = h.usable_cores ? h.usable_cores : h.online_cores;
  return h.cpu_quota_cores > 0 && (cores == 0 || h.cpu_quota_cores < cores) ? h.cpu_quota_cores : cores;
}
// Whether UsableCores is the CPU quota, below the cores the job could run on.
inline bool CpuQuotaLimits(const TraceHeader& h) { return h.cpu_quota_cores > 0 && h.cpu_quota_cores == UsableCores(h); }

struct ProcessInfo {
  uint32_t pid = 0;
  uint32_t ppid = 0;
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = 0;
  std::string comm;
  std::vector<std::string> cmdline;
  uint64_t first_seen_ns = 0;
};

enum class ClientKind : uint32_t { kC = 0, kPythonCext = 1, kPythonCtypes = 2 };

struct ThreadInfo {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t lane = 0;
  uint64_t lane_generation = 0;
  std::string name;
  ClientKind client = ClientKind::kC;
  uint64_t dropped = 0;  // records lost in a full lane
  // The process's main thread (tid = pid), or a thread of unknown tid.
  bool IsMain() const { return tid == 0 || tid == pid; }
};

// All spans, instants and counters of the run, one column per field, in the
// order they were drained (per thread in the order the thread finished them,
// so a parent span comes after its children; not globally sorted).
// has_cpu is uint8_t (0/1), not vector<bool>: LoadTrace appends millions of
// rows and vector<bool> is slow to fill; `if (has_cpu[i])` reads the same.
// The columns are HugeVectors: filled once, row by row, from fresh memory.
struct SpanTable {
  HugeVector<uint64_t> start_ns;
  HugeVector<uint64_t> duration_ns;
  HugeVector<uint64_t> cpu_ns;    // 0 when !has_cpu
  HugeVector<uint64_t> delay_ns;  // 0 when !has_cpu
  HugeVector<uint64_t> arg;
  HugeVector<uint32_t> name;      // index into Trace::strings
  HugeVector<uint32_t> thread;    // index into Trace::threads
  HugeVector<uint16_t> scope;     // loader id, 0 = none
  HugeVector<SpanKind> kind;
  HugeVector<uint8_t> has_cpu;   // 1 when cpu_ns/delay_ns were measured
  size_t size() const { return start_ns.size(); }
};

// Totals of the spans of one name on one thread with one scope: what a reader
// that does not need those spans one by one keeps of them (SpanAction::kFold).
struct SpanTotals {
  uint32_t thread = 0;           // index into Trace::threads
  uint32_t name = 0;             // string id
  uint16_t scope = 0;            // loader id of these spans, 0 = none
  StagePlace place = StagePlace::kUnplaced;  // a user's stage: inside or outside the thread's fetches
  uint64_t count = 0;
  uint64_t count_with_cpu = 0;
  uint64_t wall_ns = 0;
  uint64_t wall_with_cpu_ns = 0;  // of wall_ns, the spans with CPU: the sampled ratio's denominator
  uint64_t cpu_ns = 0;
  uint64_t first_start = UINT64_MAX;
  uint64_t last_end = 0;
  // The earliest span itself: a worker's first item carries its one-time
  // set-up (lazy imports, files opened on first use), which later items do not.
  uint64_t first_duration_ns = 0;
  uint64_t first_cpu_ns = 0;
  bool first_has_cpu = false;
};

// Makes `start` (a span of `duration`, `cpu`) the earliest of `totals` when it is.
inline void KeepEarliest(SpanTotals& totals, uint64_t start, uint64_t duration, uint64_t cpu, bool has_cpu) {
  if (start >= totals.first_start) return;
  totals.first_start = start;
  totals.first_duration_ns = duration;
  totals.first_cpu_ns = cpu;
  totals.first_has_cpu = has_cpu;
}

// Adds one span to `totals`.
inline void AddToTotals(SpanTotals& totals, const PendingStage& span) {
  totals.count++;
  totals.wall_ns += span.duration_ns;
  if (span.has_cpu) {
    totals.count_with_cpu++;
    totals.wall_with_cpu_ns += span.duration_ns;
    totals.cpu_ns += span.cpu_ns;
  }
  KeepEarliest(totals, span.start_ns, span.duration_ns, span.cpu_ns, span.has_cpu);
  totals.last_end = std::max(totals.last_end, span.start_ns + span.duration_ns);
}

struct ConfigValue {
  uint32_t pid = 0;
  uint16_t scope = 0;
  std::string key;
  // Exactly one is meaningful, per `type`.
  enum class Type { kU64, kF64, kStr } type = Type::kU64;
  uint64_t u64 = 0;
  double f64 = 0;
  std::string str;
};

struct ProcessSeries {
  uint32_t pid = 0;
  std::vector<uint64_t> t_ns, cpu_ns, read_bytes, rchar, rss_bytes, delay_ns;
  std::vector<uint32_t> threads;
  std::vector<uint64_t> minor_faults;  // empty unless every chunk of the series recorded them (older traces did not)
  std::vector<uint64_t> system_cpu_ns;  // the kernel's part of cpu_ns; empty as minor_faults
  // The main thread's (tid = pid) own time on CPU and run-queue delay (ns
  // precision, where cpu_ns has the clock tick's); empty as minor_faults.
  std::vector<uint64_t> main_thread_cpu_ns, main_thread_delay_ns;
};

struct SystemSeries {
  std::vector<uint64_t> t_ns, cpu_busy_ns, cpu_total_ns, page_cache_bytes, disk_read_bytes, mem_available_bytes;
  std::vector<uint64_t> cpu_steal_ns;  // of cpu_busy_ns, the hypervisor's; empty unless every chunk recorded it
};

struct TraceFooter {
  int32_t exit_code = 0;
  int32_t term_signal = 0;
  uint64_t end_monotonic_ns = 0;
  uint64_t job_end_monotonic_ns = 0;  // the command's exit; 0 in older traces
  uint64_t spans = 0;
  uint64_t dropped = 0;
  uint64_t invalid_records = 0;
  uint64_t write_failed_ns = 0;  // writing failed then (disk full): nothing after it is in the trace
  uint64_t events_lost = 0;      // spans lost to that failure
  // ClockSource::kTsc: the start calibration's drift against CLOCK_MONOTONIC
  // over the run, and the worst error of a converted time.
  int64_t tsc_drift_ns = 0;
  uint64_t tsc_drift_over_ns = 0;
  uint64_t tsc_max_error_ns = 0;
};

struct Trace {
  std::string path;  // where it was loaded from
  TraceHeader header;
  std::vector<std::string> strings;  // string id -> text; id 0 is ""
  std::vector<ProcessInfo> processes;
  std::vector<ThreadInfo> threads;
  SpanTable spans;
  std::vector<ConfigValue> configs;
  std::vector<ProcessSeries> process_series;
  SystemSeries system;
  std::optional<TraceFooter> footer;  // absent when the run did not finish cleanly
  bool truncated = false;             // the file ended inside a chunk
  uint64_t bytes = 0;                 // file size

  // String id of `text`, or nullopt when the trace never used it.
  std::optional<uint32_t> FindString(const std::string& text) const;
  const ProcessInfo* FindProcess(uint32_t pid) const;
};

// The kernel adds a reaped child's I/O counters (read_bytes, rchar: its own
// and those of its reaped children) to its parent's /proc/<pid>/io: a
// DataLoader's main process jumped by its non-persistent workers' reads at
// each epoch's end, and analysis read 491.8 KiB a step of the training
// process's own device reads where the step read none. Takes each traced
// child's last sampled totals out of its parent's read_bytes and rchar from
// the first sample after the child's last where the parent's rose by at least
// that much (the reap), within kReapLookahead samples; a rise that never
// comes (another process reaped it) takes nothing out. The reads a child made
// after its last sample stay in the parent. DecodeChunks calls it on every
// trace it loads.
inline constexpr size_t kReapLookahead = 10;
void TakeOutReapedChildren(Trace& trace);

}  // namespace stallprof
