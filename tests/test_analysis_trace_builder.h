// Builds in-memory Traces for the analysis tests: Trace is plain data, so
// each test appends exactly the spans whose true statistics it knows.
#pragma once

#include <string>
#include <utility>

#include "analysis/analysis.h"
#include "trace/trace.h"

namespace stallprof::testing {

constexpr uint64_t kMs = 1000000;  // nanoseconds

class TraceBuilder {
 public:
  TraceBuilder() {
    trace.strings.push_back("");
    trace.header.version_major = 1;
    trace.header.usable_cores = 4;
    trace.header.online_cores = 4;
    trace.header.memory_bytes = 8ull << 30;
    trace.header.start_monotonic_ns = 0;
    trace.header.start_realtime_ns = 1700000000000000000;
    trace.path = "test.pb";
  }

  uint32_t Str(const std::string& text) {
    if (auto id = trace.FindString(text)) return *id;
    trace.strings.push_back(text);
    return static_cast<uint32_t>(trace.strings.size() - 1);
  }

  void Process(uint32_t pid, uint32_t ppid, int32_t rank = -1) {
    ProcessInfo p;
    p.pid = pid;
    p.ppid = ppid;
    p.rank = rank;
    trace.processes.push_back(p);
  }

  // Returns the thread index spans refer to.
  uint32_t Thread(uint32_t pid, uint32_t tid) {
    ThreadInfo t;
    t.pid = pid;
    t.tid = tid;
    t.lane = static_cast<uint32_t>(trace.threads.size());
    t.client = ClientKind::kPythonCext;
    trace.threads.push_back(t);
    return static_cast<uint32_t>(trace.threads.size() - 1);
  }

  // A span; cpu_ns < 0 means the span carries no CPU time.
  void Span(uint32_t thread, const std::string& name, uint64_t start, uint64_t duration, uint16_t scope = 0,
            uint64_t arg = 0, int64_t cpu_ns = -1, uint64_t delay_ns = 0) {
    Push(thread, Str(name), start, duration, scope, arg, SpanKind::kSpan, cpu_ns, delay_ns);
  }

  void Instant(uint32_t thread, const std::string& name, uint64_t at, uint16_t scope, uint64_t arg = 0) {
    Push(thread, Str(name), at, 0, scope, arg, SpanKind::kInstant, -1, 0);
  }

  void Config(uint32_t pid, uint16_t scope, const std::string& key, uint64_t value) {
    ConfigValue c;
    c.type = ConfigValue::Type::kU64;
    c.u64 = value;
    AddConfig(pid, scope, key, c);
  }

  void ConfigDouble(uint32_t pid, uint16_t scope, const std::string& key, double value) {
    ConfigValue c;
    c.type = ConfigValue::Type::kF64;
    c.f64 = value;
    AddConfig(pid, scope, key, c);
  }

  void Config(uint32_t pid, uint16_t scope, const std::string& key, const std::string& value) {
    ConfigValue c;
    c.type = ConfigValue::Type::kStr;
    c.str = value;
    AddConfig(pid, scope, key, c);
  }

  void AddConfig(uint32_t pid, uint16_t scope, const std::string& key, ConfigValue c) {
    c.pid = pid;
    c.scope = scope;
    c.key = trace.strings[Str(key)];
    trace.configs.push_back(std::move(c));
  }

  Trace trace;

 private:
  void Push(uint32_t thread, uint32_t name, uint64_t start, uint64_t duration, uint16_t scope, uint64_t arg,
            SpanKind kind, int64_t cpu_ns, uint64_t delay_ns) {
    auto& s = trace.spans;
    s.start_ns.push_back(start);
    s.duration_ns.push_back(duration);
    s.cpu_ns.push_back(cpu_ns < 0 ? 0 : static_cast<uint64_t>(cpu_ns));
    s.delay_ns.push_back(cpu_ns < 0 ? 0 : delay_ns);
    s.arg.push_back(arg);
    s.name.push_back(name);
    s.thread.push_back(thread);
    s.scope.push_back(scope);
    s.kind.push_back(kind);
    s.has_cpu.push_back(cpu_ns >= 0);
  }
};

// A main-process loop over one loader, as the hook records it: per epoch the
// __iter__ call (an epoch span of `iter_create`, or an old hook's instant when
// 0), `iterations` next() calls each waiting `wait` and then computing
// `compute` on its batch (the first `warmup_wait_iters` of each epoch wait
// `warmup_wait` instead), and the next() that raises StopIteration (an
// epoch_end span of `shutdown`, or an old hook's instant when 0).
struct LoopSpec {
  uint32_t pid = 100;
  uint16_t scope = 1;
  uint32_t thread = 0;
  uint32_t epochs = 1;
  uint32_t iterations = 20;
  uint64_t wait = 10 * kMs;
  uint64_t compute = 30 * kMs;
  // The compute after each epoch's first batch when set: in the first epoch,
  // and in the later ones (the loop's own work at an epoch's start).
  uint64_t first_epoch_start_compute = 0, later_epoch_start_compute = 0;
  uint32_t warmup_wait_iters = 0;
  uint64_t warmup_wait = 0;
  uint64_t gap_between_epochs = 0;  // time outside any epoch (e.g. validation)
  uint64_t start = 1000 * kMs;
  uint64_t iter_create = 0;         // DataLoader.__iter__ (worker start-up)
  uint64_t shutdown = 0;            // the StopIteration next() (worker shutdown)
  uint32_t first_epoch = 0;         // the hook's epoch number of the first (it counts per DataLoader object)
};

// Appends the loop; returns the time after its last epoch and gap.
inline uint64_t AddLoop(TraceBuilder& b, const LoopSpec& spec) {
  uint64_t t = spec.start;
  for (uint32_t e = 0; e < spec.epochs; ++e) {
    if (spec.iter_create > 0) b.Span(spec.thread, names::kEpoch, t, spec.iter_create, spec.scope, spec.first_epoch + e);
    else b.Instant(spec.thread, names::kEpoch, t, spec.scope, spec.first_epoch + e);
    t += spec.iter_create;
    for (uint32_t i = 0; i < spec.iterations; ++i) {
      uint64_t wait = i < spec.warmup_wait_iters ? spec.warmup_wait : spec.wait;
      b.Span(spec.thread, names::kWait, t, wait, spec.scope, i);
      const uint64_t start_compute = e == 0 ? spec.first_epoch_start_compute : spec.later_epoch_start_compute;
      t += wait + (i == 0 && start_compute > 0 ? start_compute : spec.compute);
    }
    if (spec.shutdown > 0) b.Span(spec.thread, names::kEpochEnd, t, spec.shutdown, spec.scope, spec.iterations);
    else b.Instant(spec.thread, names::kEpochEnd, t, spec.scope, spec.iterations);
    t += spec.shutdown + spec.gap_between_epochs;
  }
  return t;
}

// A main process (pid 100) iterating loader 1 without workers: appends the
// loop of `spec` (its thread is set here).
inline void AddMainProcessLoader(TraceBuilder& b, LoopSpec& spec) {
  b.Process(100, 1);
  spec.thread = b.Thread(100, 100);
  AddLoop(b, spec);
}

// The main process (pid 100) and two worker processes (201, 202) of its
// loader 1 (num_workers 2); the loop is the caller's.
inline void AddTwoWorkerProcesses(TraceBuilder& b) {
  b.Process(100, 1);
  b.Process(201, 100);
  b.Process(202, 100);
  b.Config(100, 1, "num_workers", 2);
}

// A main process (pid 100) iterating loader 1 with one worker process (pid
// 201), prefetch_factor 2, for a test that writes the main loop's spans
// itself: the main thread and the worker's.
struct OneWorkerThreads {
  uint32_t main, worker;
};
inline OneWorkerThreads OneWorkerPrefetch2(TraceBuilder& b) {
  b.Process(100, 1);
  b.Process(201, 100);
  b.Config(100, 1, "num_workers", 1);
  b.Config(100, 1, "prefetch_factor", 2);
  return {b.Thread(100, 100), b.Thread(201, 201)};
}

// A main process (pid 100) iterating loader 1 in batches of 8 (no workers
// unless the test configures them), for a test that writes the main loop's
// spans itself: the main thread.
inline uint32_t MainLoopOfEights(TraceBuilder& b) {
  b.Process(100, 1);
  b.Config(100, 1, "batch_size", 8);
  return b.Thread(100, 100);
}

// A main process (pid 100) iterating loader 1 with one worker process (pid
// 201): appends the loop of `spec` (its thread is set here) and returns the
// worker's thread index for the test's fetch spans.
inline uint32_t AddOneWorkerLoader(TraceBuilder& b, LoopSpec& spec) {
  b.Process(100, 1);
  b.Process(201, 100);
  b.Config(100, 1, "num_workers", 1);
  spec.thread = b.Thread(100, 100);
  AddLoop(b, spec);
  return b.Thread(201, 201);
}

// A process sampled every `period` ns from `from` to `to` (inclusive), its
// CPU at each tick `cpu_at(tick)`; no reads, no run-queue delay.
template <typename CpuAt>
ProcessSeries SampledEvery(uint32_t pid, uint64_t from, uint64_t to, uint64_t period, CpuAt cpu_at,
                           uint32_t threads = 1) {
  ProcessSeries s;
  s.pid = pid;
  for (uint64_t tick = from; tick <= to; tick += period) {
    s.t_ns.push_back(tick);
    s.cpu_ns.push_back(cpu_at(tick));
  }
  const size_t n = s.t_ns.size();
  s.read_bytes = s.rchar = s.rss_bytes = s.delay_ns = std::vector<uint64_t>(n, 0);
  s.threads.assign(n, threads);
  return s;
}

// A stage's totals as analysis reports them: `count` spans taking `seconds`
// of wall time, all on CPU (the report tests' stage tables).
inline analysis::StageStats Stage(std::string name, uint64_t count, double seconds) {
  analysis::StageStats stage;
  stage.name = std::move(name);
  stage.count = count;
  stage.wall_s = stage.cpu_s = seconds;
  return stage;
}

}  // namespace stallprof::testing
