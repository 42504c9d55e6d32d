#include <catch2/catch.hpp>

#include "analysis/profile.h"
#include "model/cache.h"
#include "model/lp.h"
#include "test_analysis_trace_builder.h"

using namespace stallprof;
using namespace stallprof::analysis;
using namespace stallprof::testing;

TEST_CASE("A profile carries the steady-state compute and the workers' per-batch costs") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Process(201, 100);
  b.Process(202, 100);
  b.Config(100, 1, "name", "train");
  b.Config(100, 1, "batch_size", 16);
  b.Config(100, 1, "num_workers", 2);
  b.Config(100, 1, "prefetch_factor", 4);
  b.Config(100, 1, "dataset_len", 1000);
  b.Config(100, 1, "dataset_bytes", 4000000);
  b.Config(100, 1, "sampler", "SequentialSampler");
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 25;
  spec.warmup_wait_iters = 5;
  spec.warmup_wait = 200 * kMs;
  AddLoop(b, spec);
  uint32_t w1 = b.Thread(201, 201), w2 = b.Thread(202, 202);
  for (int i = 0; i < 12; ++i) {
    // 50 ms per batch: 20 ms CPU, 5 ms run-queue delay, 25 ms I/O.
    b.Span(w1, names::kFetch, spec.start + i * 80 * kMs, 50 * kMs, 1, 2 * i, 20 * kMs, 5 * kMs);
    b.Span(w2, names::kFetch, spec.start + i * 80 * kMs, 50 * kMs, 1, 2 * i + 1, 20 * kMs, 5 * kMs);
  }
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  REQUIRE(profiles->size() == 1);
  const auto& p = profiles->front();
  CHECK(p.name == "train");
  CHECK(p.batch_size == 16);
  CHECK(p.workers == 2);
  CHECK(p.prefetch_factor == 4);
  CHECK(p.batches == 12);  // 25 less 5 warm-up and 8 in flight at the end (2 workers x prefetch 4)
  CHECK(p.compute_s_per_batch == Approx(0.030));
  CHECK(p.cpu_s_per_batch == Approx(0.020));
  CHECK(p.delay_s_per_batch == Approx(0.005));
  CHECK(p.io_s_per_batch == Approx(0.025));
  CHECK(p.produce_s_per_batch == Approx(0.050));
  CHECK(p.produce_p99_s == Approx(0.050));
  CHECK(p.dataset_items == 1000);
  CHECK(p.dataset_bytes == 4000000);
  CHECK(p.bytes_per_sample.value == Approx(4000));
  CHECK(p.bytes_per_sample.measured);
  CHECK(p.order == model::AccessOrder::kSequential);
  CHECK_FALSE(p.storage_bandwidth.measured);
}

TEST_CASE("The warm-up option changes which iterations a profile measures") {
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 10;
  AddMainProcessLoader(b, spec);
  ProfileOptions options;
  options.warmup = 2;
  const auto profiles = MeasureProfiles(b.trace, options);
  REQUIRE(profiles.ok());
  CHECK(profiles->front().batches == 8);
}

TEST_CASE("Without workers, the handoff timed after the run gives the worker loop and receive CPU, and the receive's wall time") {
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 10;
  AddMainProcessLoader(b, spec);
  auto measure = [&] {
    const auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    return profiles->front();
  };
  const auto untimed = measure();
  CHECK_FALSE(untimed.worker_loop_cpu_s_per_batch.measured);
  CHECK(untimed.receive_s_per_batch == 0);
  CHECK(untimed.receive_source.empty());
  CHECK_FALSE(untimed.shm_collate_cpu_s_per_batch.measured);
  CHECK_FALSE(untimed.batch_touch_cpu_s_per_batch.measured);
  CHECK(untimed.intra_op_threads == 0);
  b.Config(100, 1, "intra_op_threads", 2);
  b.Config(100, 1, "batch_tensors", 2);
  b.Config(100, 1, "batch_bytes", 786560);
  b.ConfigDouble(100, 1, "ipc_loop_cpu_s", 0.0016);
  b.ConfigDouble(100, 1, "ipc_receive_cpu_s", 0.0009);
  b.ConfigDouble(100, 1, "ipc_collate_shm_cpu_s", 0.004);
  b.ConfigDouble(100, 1, "ipc_touch_cpu_s", 0.0007);
  b.ConfigDouble(100, 1, "ipc_batches", 200);
  const auto timed = measure();
  CHECK(timed.worker_loop_cpu_s_per_batch.measured);
  CHECK(timed.worker_loop_cpu_s_per_batch.value == Approx(0.0016));
  CHECK_THAT(timed.worker_loop_cpu_s_per_batch.source, Catch::Contains("200 batches of this loader's 2 tensors, 768.1 KiB"));
  CHECK(timed.receive_s_per_batch == Approx(0.0009));
  CHECK(timed.shm_collate_cpu_s_per_batch.measured);
  CHECK(timed.shm_collate_cpu_s_per_batch.value == Approx(0.004));
  CHECK(timed.batch_touch_cpu_s_per_batch.value == Approx(0.0007));
  // The step frees the received batch as well (its segments unmapped): on
  // the step's side with the first read, not in the receive.
  b.ConfigDouble(100, 1, "ipc_free_cpu_s", 0.0002);
  const auto freed = measure();
  CHECK(freed.batch_touch_cpu_s_per_batch.value == Approx(0.0009));
  CHECK_THAT(freed.batch_touch_cpu_s_per_batch.source, Catch::Contains("reading it 700.0 us, freeing it 200.0 us"));
  CHECK(freed.receive_s_per_batch == Approx(0.0009));
  CHECK(timed.batch_bytes == 786560);
  CHECK(timed.intra_op_threads == 2);
  CHECK_FALSE(timed.startup_timed);
  // Without its wall time the main loop's receive is its CPU; with it, the
  // wall time (the waits on the worker's sending as well), as a profile with
  // workers measures its handoff.
  CHECK(timed.handoff_s_per_batch == 0);
  CHECK(model::MainReceiveSeconds(timed) == Approx(0.0009));
  b.ConfigDouble(100, 1, "ipc_receive_wall_s", 0.0014);
  const auto walled = measure();
  CHECK(walled.receive_s_per_batch == Approx(0.0009));  // the CPU: what the cores carry
  CHECK(walled.handoff_s_per_batch == Approx(0.0014));
  CHECK(model::MainReceiveSeconds(walled) == Approx(0.0014));
  // The timing's forked worker stands for the loader's start-up when the
  // loader would fork its workers too.
  b.ConfigDouble(100, 1, "ipc_startup_s", 0.031);
  b.Config(100, 1, "multiprocessing_context", "spawn");
  CHECK_FALSE(measure().startup_timed);
  // A loader that would spawn them: the timing's worker started by spawn
  // (a fresh interpreter importing torch, 0.62 s on this VM) stands for it,
  // its workers start side by side, and their join is paid per wave.
  b.ConfigDouble(100, 1, "ipc_context_startup_s", 0.62);
  b.ConfigDouble(100, 1, "ipc_context_shutdown_s", 0.16);
  const auto spawned = measure();
  CHECK(spawned.startup_timed);
  CHECK(spawned.startup_timed_method == "spawn");
  CHECK(spawned.startup_first_s == Approx(0.62));
  CHECK(spawned.startup_later_s == Approx(0.62));
  CHECK(spawned.startup_serial_share == 0);
  CHECK(spawned.shutdown_exit_extra_s == Approx(0.16));
  CHECK(spawned.shutdown_s_per_worker == 0);
  b.Config(100, 1, "multiprocessing_context", "fork");  // a later config overrides
  const auto started = measure();
  CHECK(started.startup_timed);
  CHECK(started.startup_timed_method == "fork");
  CHECK(started.startup_first_s == Approx(0.031));
  CHECK(started.startup_later_s == Approx(0.031));
  CHECK(started.shutdown_s_per_worker == 0);  // not timed
  CHECK(started.worker_init_fn.empty());
  b.Config(100, 1, "worker_init_fn", "seed_worker");  // the loader's own, which the timing did not run
  CHECK(measure().worker_init_fn == "seed_worker");
  // The timing's join stands for each epoch's shutdown of a non-persistent worker.
  b.ConfigDouble(100, 1, "ipc_shutdown_s", 0.012);
  CHECK(measure().shutdown_s_per_worker == Approx(0.012));
  CHECK(measure().startup_fork_extra_s == 0);  // the fork's cost a MiB not timed
  // The job's process of 1250 MiB forks its workers slower than the timing's
  // of 250 MiB by 1000 MiB x 20 us, and each exit tears down as much more.
  b.ConfigDouble(100, 1, "ipc_rss_bytes", 250.0 * 1048576);
  b.ConfigDouble(100, 1, "ipc_fork_s_per_mib", 20e-6);
  b.ConfigDouble(100, 1, "ipc_exit_s_per_mib", 15e-6);
  CHECK(measure().startup_fork_extra_s == 0);  // the job's resident memory not sampled
  CHECK(measure().main_rss_bytes == 0);  // not sampled: recommend plans the whole memory
  ProcessSeries series;
  series.pid = 100;
  series.t_ns = {0, 1'000'000'000'000};
  series.rss_bytes = {1250ull << 20, 1250ull << 20};
  b.trace.process_series.push_back(series);
  const auto scaled = measure();
  CHECK(scaled.main_rss_bytes == 1250.0 * 1048576);  // the peak recommend takes from its memory
  CHECK(scaled.startup_fork_extra_s == Approx(0.020));
  CHECK(scaled.startup_first_s == Approx(0.031 + 0.020));
  CHECK(scaled.startup_later_s == Approx(0.031 + 0.020));
  // The job's whole fork (1250 MiB x 20 us) is the part that runs worker after worker.
  CHECK(scaled.startup_serial_share == Approx(0.025 / 0.051));
  CHECK(scaled.shutdown_exit_extra_s == Approx(0.015));
  CHECK(scaled.shutdown_s_per_worker == Approx(0.012));
}

TEST_CASE("Profiles of a trace without loaders fail with a message naming what is missing") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Span(b.Thread(100, 100), "work", 0, kMs);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE_FALSE(profiles.ok());
  CHECK(profiles.error().kind == ErrorKind::kUnsupported);
  CHECK_THAT(profiles.error().message, Catch::Contains("no DataLoader"));
}

TEST_CASE("The measured machine takes cores and memory from the header and the cache from the sampler") {
  TraceBuilder b;
  b.trace.header.usable_cores = 6;
  b.trace.header.memory_bytes = 16ull << 30;
  b.trace.header.page_cache_bytes = 1ull << 30;
  b.trace.system.t_ns = {0, 1};
  b.trace.system.mem_available_bytes = {10ull << 30, 9ull << 30};
  const auto m = MeasuredMachine(b.trace);
  CHECK(m.cores == 6);
  CHECK(m.memory_bytes == 16ull << 30);
  CHECK_FALSE(m.memory_limited);
  CHECK(m.page_cache_bytes == 10ull << 30);
  // In a memory cgroup (a container's limit) the job and its page cache share
  // the limit, whatever the machine has: recommend's budget, whatif's machine.
  b.trace.header.memory_limit_bytes = 400ull << 20;
  const auto limited = MeasuredMachine(b.trace);
  CHECK(limited.memory_bytes == 400ull << 20);
  CHECK(limited.memory_limited);
  CHECK(limited.page_cache_bytes == 400ull << 20);
  b.trace.header.memory_limit_bytes = 32ull << 30;  // a limit above the machine's memory limits nothing
  CHECK(MeasuredMachine(b.trace).memory_bytes == 16ull << 30);
  CHECK_FALSE(MeasuredMachine(b.trace).memory_limited);
  CHECK_FALSE(m.cpu_limited);
  // A CPU quota (a container's CPU limit) below the cores: its threads share
  // that much CPU time, fractional or not.
  b.trace.header.cpu_quota_cores = 1.5;
  CHECK(MeasuredMachine(b.trace).cores == 1.5);
  CHECK(MeasuredMachine(b.trace).cpu_limited);
  b.trace.header.cpu_quota_cores = 8;  // a quota above the cores limits nothing
  CHECK(MeasuredMachine(b.trace).cores == 6);
  CHECK_FALSE(MeasuredMachine(b.trace).cpu_limited);
}

TEST_CASE("A profile counts the machine's cores beyond the job's affinity or CPU quota as cores it could not use, and says whether a quota limited it") {
  const auto profile = [](uint32_t online, uint32_t usable, double quota) {
    TraceBuilder b;
    b.Process(100, 1);
    b.Config(100, 1, "batch_size", 4);
    LoopSpec spec;
    spec.thread = b.Thread(100, 100);
    AddLoop(b, spec);
    b.trace.header.online_cores = online;
    b.trace.header.usable_cores = usable;
    b.trace.header.cpu_quota_cores = quota;
    auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    REQUIRE(profiles->size() == 1);
    return profiles->front();
  };
  CHECK(profile(4, 4, 0).unusable_cores == 0);
  CHECK(profile(4, 2, 0).unusable_cores == 2);  // taskset to 2 of 4
  CHECK_FALSE(profile(4, 2, 0).profiled_in_cpu_quota);
  CHECK(profile(4, 4, 1.5).unusable_cores == 2.5);  // a 1.5-core quota
  CHECK(profile(4, 4, 1.5).profiled_in_cpu_quota);
  CHECK(profile(4, 2, 1).unusable_cores == 3);  // both: the lower
  CHECK(profile(4, 4, 8).unusable_cores == 0);  // a quota above the cores limits nothing
  CHECK_FALSE(profile(4, 4, 8).profiled_in_cpu_quota);
  CHECK(profile(0, 2, 0).unusable_cores == 0);  // online cores not recorded
}

TEST_CASE("The storage bandwidth is the peak disk read rate of the sampler") {
  TraceBuilder b;
  LoopSpec spec;
  AddMainProcessLoader(b, spec);
  b.trace.system.t_ns = {0, 1000 * kMs, 2000 * kMs, 2500 * kMs};
  b.trace.system.disk_read_bytes = {0, 100, 300, 500};
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().storage_bandwidth.measured);
  CHECK(profiles->front().storage_bandwidth.value == Approx(400.0));
}

namespace {
// A loader of batch 4 with `num_workers` whose main loop takes 60 steps of 20
// ms (18 ms wait, 2 ms compute); the sampler's disk counter bursts at 800
// MiB/s once. The caller adds the fetches.
LoopSpec ReadingLoop(TraceBuilder& b, uint64_t num_workers) {
  b.Config(100, 1, "num_workers", num_workers);
  b.Config(100, 1, "batch_size", 4);
  LoopSpec spec;
  spec.iterations = 60;
  spec.wait = 18 * kMs;
  spec.compute = 2 * kMs;
  AddMainProcessLoader(b, spec);
  b.trace.system.t_ns = {0, spec.start, spec.start + 100 * kMs, spec.start + 2000 * kMs};
  b.trace.system.disk_read_bytes = {0, 0, 80 << 20, 240 << 20};
  return spec;
}

// Two workers taking turns: batch i is fetched by worker i % 2 in the 40 ms
// before next() i returns (2 ms of CPU, 38 ms off CPU reading 4 MiB from the
// device).
TraceBuilder TwoReadingWorkers() {
  TraceBuilder b;
  const LoopSpec spec = ReadingLoop(b, 2);
  uint32_t workers[2];
  for (uint32_t w = 0; w < 2; ++w) {
    b.Process(201 + w, 100);
    workers[w] = b.Thread(201 + w, 201 + w);
  }
  for (uint64_t i = 0; i < spec.iterations; ++i) {
    const uint64_t returned = spec.start + i * 20 * kMs + 18 * kMs;
    const uint64_t start = returned - std::min<uint64_t>(returned - spec.start, 40 * kMs);
    const uint64_t produce = returned - start;
    b.Span(workers[i % 2], names::kFetch, start, produce, 1, i, 2 * kMs, 0);
    b.Span(workers[i % 2], names::kReadStorage, start, produce + 1000, 1, 4 << 20);
    b.Span(workers[i % 2], names::kReadCalls, start, produce + 1000, 1, 4 << 20);
  }
  return b;
}
}  // namespace

TEST_CASE("Workers that read from the device at once plan with the rate they got, not the disk's burst") {
  const auto analysis = Analyze(TwoReadingWorkers().trace, {});
  REQUIRE(analysis.ok());
  const auto& loader = analysis->loaders.front();
  // 4 MiB every 20 ms step; 2 x 38 ms off CPU per 40 ms: 1.9 reads in flight.
  CHECK(loader.storage_read_rate == Approx(200.0 * (1 << 20)));
  CHECK(loader.storage_reads_in_flight == Approx(1.9));
  const auto profiles = MeasureProfiles(TwoReadingWorkers().trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().storage_bandwidth.value == Approx(200.0 * (1 << 20)));
  CHECK_THAT(profiles->front().storage_bandwidth.source, Catch::Contains("in flight"));
}

TEST_CASE("Reads less than one in flight leave the storage bandwidth at the disk's peak rate") {
  TraceBuilder b = TwoReadingWorkers();
  // Each full fetch now 30 ms on CPU, 10 ms off: 2 x 10 / 40 = 0.5 in flight.
  auto& s = b.trace.spans;
  const auto fetch = *b.trace.FindString(names::kFetch);
  for (size_t i = 0; i < s.size(); ++i)
    if (s.name[i] == fetch && s.duration_ns[i] == 40 * kMs) s.cpu_ns[i] = 30 * kMs;
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().storage_bandwidth.value == Approx(800.0 * (1 << 20)));
}

namespace {
// No workers: the main thread fetches batch i inside its 18 ms wait (2 ms on
// CPU, 16 ms off CPU on the device), reading 1 MiB through read calls and 4
// MiB from the device (readahead).
TraceBuilder OneReaderWithReadahead() {
  TraceBuilder b;
  const LoopSpec spec = ReadingLoop(b, 0);
  for (uint64_t i = 0; i < spec.iterations; ++i) {
    const uint64_t start = spec.start + i * 20 * kMs;
    b.Span(spec.thread, names::kFetch, start + 1000, 18 * kMs - 3000, 1, i, 2 * kMs, 0);
    b.Span(spec.thread, names::kReadStorage, start + 500, 18 * kMs - 2000, 1, 4 << 20);  // around the fetch, as the hook's
    b.Span(spec.thread, names::kReadCalls, start + 500, 18 * kMs - 2000, 1, 1 << 20);
  }
  return b;
}
}  // namespace

TEST_CASE("A loader without workers that waited on the device most of the time plans with what one reader got, "
          "and carries the readahead beyond its items' bytes") {
  const auto analysis = Analyze(OneReaderWithReadahead().trace, {});
  REQUIRE(analysis.ok());
  const auto& loader = analysis->loaders.front();
  // 4 MiB every 20 ms step; 16 ms of 20 off CPU on the device.
  CHECK(loader.storage_read_rate == Approx(200.0 * (1 << 20)).epsilon(0.01));
  CHECK(loader.storage_reads_in_flight == Approx(0.8).epsilon(0.01));
  const auto profiles = MeasureProfiles(OneReaderWithReadahead().trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  // While it waited: 4 MiB in 16 ms, 250 MiB/s, not the 800 MiB/s burst.
  CHECK(p.storage_bandwidth.value == Approx(250.0 * (1 << 20)).epsilon(0.01));
  CHECK_THAT(p.storage_bandwidth.source, Catch::Contains("one reader at a time"));
  // 4 MiB from the device for the 1 MiB each batch missed.
  CHECK(p.cold_hit_ratio == 0);
  CHECK(p.device_bytes_per_missed_byte == Approx(4.0));
  // Four workers cannot read faster than the device gave: 250 MiB/s over 4 MiB a batch of 4.
  model::Scenario scenario;
  scenario.machine.cores = 8;
  scenario.workers = 4;
  const auto predicted = model::Predict(p, scenario);
  REQUIRE(predicted.ok());
  CHECK(predicted->samples_per_s == Approx(250.0).epsilon(0.02));
  // recommend's LP carries the same bound where no cache fits its budget.
  model::RecommendOptions options;
  options.cores = 8;
  options.memory_bytes = 1 << 20;
  const auto planned = model::Recommend(p, options);
  REQUIRE(planned.ok());
  CHECK(planned->lp_samples_per_s == Approx(250.0).epsilon(0.02));
}

TEST_CASE("Profiles from a digest with folded stage spans keep the stages") {
  TraceBuilder b;
  b.Config(100, 1, "batch_size", 2);
  LoopSpec spec;
  spec.iterations = 10;
  AddMainProcessLoader(b, spec);
  for (uint32_t i = 0; i < 10; ++i) b.Span(spec.thread, names::kFetch, spec.start + i * 40 * kMs, 10 * kMs, 1, i, 4 * kMs, 0);
  TraceDigest digest;
  digest.trace = b.trace;
  StageTotals getitem;
  getitem.thread = 0;
  getitem.name = b.Str(names::kGetitem);
  digest.trace.strings = b.trace.strings;
  getitem.scope = 1;
  getitem.count = 20;
  getitem.wall_ns = 200 * kMs;
  getitem.first_start = spec.start;
  getitem.last_end = spec.start + 400 * kMs;
  digest.stages.push_back(getitem);
  const auto profiles = MeasureProfiles(digest, {});
  REQUIRE(profiles.ok());
  REQUIRE(profiles->front().stages.size() == 1);
  CHECK(profiles->front().stages[0].name == names::kGetitem);
  CHECK(profiles->front().stages[0].wall_s_per_sample == Approx(0.2 / 20));
  CHECK(profiles->front().stages[0].cpu_s_per_sample == Approx(0.2 * 0.4 / 20));  // attributed: fetch CPU/wall = 0.4
}

TEST_CASE("A profile's handoff is the mean steady wait at next() calls that found a batch ready") {
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 10;
  spec.wait = 2 * kMs;
  spec.compute = 20 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (int i = 0; i < 10; ++i) b.Span(w, names::kFetch, spec.start + i * kMs / 10, kMs / 20, 1, i, kMs / 20, 0);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().handoff_s_per_batch == Approx(0.002));
}

TEST_CASE("With workers the handoff timed after the run gives the shared memory's costs only, the collate's at most the workers' own") {
  // One worker: each 4 ms fetch holds a 0.3 ms collate into shared memory.
  TraceBuilder b;
  LoopSpec spec;
  spec.iterations = 10;
  spec.wait = kMs;
  spec.compute = 5 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (uint64_t i = 0; i < 10; ++i) {
    const uint64_t start = spec.start + i * 6 * kMs;
    b.Span(w, names::kFetch, start, 4 * kMs, 1, i, 4 * kMs, 0);
    b.Span(w, names::kCollate, start + 3 * kMs, 3 * kMs / 10, 1, i, 3 * kMs / 10, 0);
  }
  auto measure = [&] {
    const auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    return profiles->front();
  };
  CHECK_FALSE(measure().shm_collate_cpu_s_per_batch.measured);
  CHECK_FALSE(measure().batch_touch_cpu_s_per_batch.measured);
  b.Config(100, 1, "batch_tensors", 1);
  b.Config(100, 1, "batch_bytes", 8);
  b.ConfigDouble(100, 1, "ipc_collate_shm_cpu_s", 0.0002);
  b.ConfigDouble(100, 1, "ipc_touch_cpu_s", 0.00004);
  b.ConfigDouble(100, 1, "ipc_free_cpu_s", 0.00003);
  b.ConfigDouble(100, 1, "ipc_batches", 200);
  const auto timed = measure();
  CHECK(timed.shm_collate_cpu_s_per_batch.measured);
  CHECK(timed.shm_collate_cpu_s_per_batch.value == Approx(0.0002));
  CHECK_THAT(timed.shm_collate_cpu_s_per_batch.source, Catch::Contains("timed after the run") &&
                                                          !Catch::Contains("at most the workers' collate"));
  CHECK(timed.batch_touch_cpu_s_per_batch.measured);
  CHECK(timed.batch_touch_cpu_s_per_batch.value == Approx(0.00007));
  // The profile measured its worker loop itself: not the timing's (none recorded).
  CHECK_THAT(timed.worker_loop_cpu_s_per_batch.source, !Catch::Contains("timed after the run"));
  // A timing above the workers' whole collate: only the collate can go.
  b.ConfigDouble(100, 1, "ipc_collate_shm_cpu_s", 0.0005);
  CHECK(measure().shm_collate_cpu_s_per_batch.value == Approx(0.0003));
  CHECK_THAT(measure().shm_collate_cpu_s_per_batch.source, Catch::Contains("the timing's 500.0 us, at most the workers' collate"));
}

TEST_CASE("Without workers a worker's shared-memory collate is timed beyond what the job's own collate spent faulting") {
  // Each 25 ms fetch (all CPU, 12 ms of it in the kernel) holds a 10 ms
  // collate. The timing after the run: collating into shared memory costs
  // 30 ms beyond a warm heap, and faulting a batch's pages in 8 ms. The job's
  // collate faulted in its heap afresh: at most 8 ms of its 10 are faults,
  // which a worker's collate replaces, so a worker pays 22 ms more, not 30.
  TraceBuilder b;
  b.Config(100, 1, "num_workers", 0);
  LoopSpec spec;
  spec.iterations = 10;
  spec.wait = 26 * kMs;
  spec.compute = 20 * kMs;
  AddMainProcessLoader(b, spec);
  const bool with_system = GENERATE(true, false);
  for (uint64_t i = 0; i < 10; ++i) {
    const uint64_t start = spec.start + i * 46 * kMs + kMs / 2;
    b.Span(spec.thread, names::kFetch, start, 25 * kMs, 1, i, 25 * kMs, 0);
    b.Span(spec.thread, names::kCollate, start + 14 * kMs, 10 * kMs, 1, i);
    if (with_system) b.Span(spec.thread, names::kSystemCpu, start - 10, 25 * kMs + 20, 1, 12 * kMs);
  }
  b.Config(100, 1, "batch_tensors", 1);
  b.Config(100, 1, "batch_bytes", 8 << 20);
  b.ConfigDouble(100, 1, "ipc_loop_cpu_s", 0.001);
  b.ConfigDouble(100, 1, "ipc_receive_cpu_s", 0.001);
  b.ConfigDouble(100, 1, "ipc_collate_shm_cpu_s", 0.030);
  b.ConfigDouble(100, 1, "ipc_touch_cpu_s", 0.008);
  b.ConfigDouble(100, 1, "ipc_batches", 50);
  auto measure = [&] {
    const auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    return profiles->front();
  };
  CHECK(measure().shm_collate_cpu_s_per_batch.value == Approx(0.022));
  CHECK_THAT(measure().shm_collate_cpu_s_per_batch.source, Catch::Contains("less 8.00 ms"));
  // Faulting a batch's pages in costs more than the job's whole collate: all of its 10 ms.
  b.ConfigDouble(100, 1, "ipc_touch_cpu_s", 0.020);
  CHECK(measure().shm_collate_cpu_s_per_batch.value == Approx(0.020));
  // The fetches spent less in the kernel than the collate took: the rest of it was not faulting.
  if (with_system) {
    for (size_t i = 0; i < b.trace.spans.size(); ++i)
      if (b.trace.spans.name[i] == *b.trace.FindString(names::kSystemCpu)) b.trace.spans.arg[i] = 4 * kMs;
    CHECK(measure().shm_collate_cpu_s_per_batch.value == Approx(0.026));
  }
}

TEST_CASE("A profile marks which fetches made a steady iteration's batch") {
  // 2 epochs of 10 batches without workers, each fetch inside its next():
  // the first 5 of each epoch are the warm-up.
  TraceBuilder b;
  b.Config(100, 1, "num_workers", 0);
  LoopSpec spec;
  spec.epochs = 2;
  spec.iterations = 10;
  AddMainProcessLoader(b, spec);
  const uint32_t wait = *b.trace.FindString(names::kWait);
  std::vector<std::pair<uint64_t, uint64_t>> waits;  // start, iteration
  for (size_t i = 0; i < b.trace.spans.size(); ++i)
    if (b.trace.spans.name[i] == wait) waits.emplace_back(b.trace.spans.start_ns[i], b.trace.spans.arg[i]);
  REQUIRE(waits.size() == 20);
  for (const auto& [start, index] : waits) b.Span(spec.thread, names::kFetch, start + 10, kMs, 1, index, kMs, 0);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  REQUIRE(p.batch_costs.size() == 20);
  REQUIRE(p.batch_cost_steady.size() == 20);
  for (size_t i = 0; i < 20; ++i) CHECK(p.batch_cost_steady[i] == (i % 10 >= 5));
}

TEST_CASE("Without workers a profile carries the DataLoader's own code in next() beside the fetch") {
  // Each 2 ms wait holds a 1.5 ms fetch on CPU: 0.5 ms of the iterator's own
  // code (sampler, bookkeeping) a batch.
  TraceBuilder b;
  b.Config(100, 1, "num_workers", 0);
  LoopSpec spec;
  spec.iterations = 10;
  spec.wait = 2 * kMs;
  spec.compute = 20 * kMs;
  AddMainProcessLoader(b, spec);
  for (uint64_t i = 0; i < 10; ++i)
    b.Span(spec.thread, names::kFetch, spec.start + i * 22 * kMs + kMs / 4, 3 * kMs / 2, 1, i, 3 * kMs / 2, 0);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().next_overhead_s_per_batch.value == Approx(0.0005));
  CHECK(profiles->front().next_overhead_s_per_batch.measured);
  CHECK(profiles->front().handoff_s_per_batch == 0);
}

// One worker, 10 batches: a 1 ms next() and a 5 ms step each, the worker's
// 4 ms fetch of each on CPU for `cpu` and waiting for a core for `delay`.
void AddOneWorkerTenBatches(TraceBuilder& b, uint64_t cpu, uint64_t delay) {
  LoopSpec spec;
  spec.iterations = 10;
  spec.wait = kMs;
  spec.compute = 5 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (uint64_t i = 0; i < 10; ++i) b.Span(w, names::kFetch, spec.start + i * 6 * kMs, 4 * kMs, 1, i, cpu, delay);
}

TEST_CASE("With workers the DataLoader's own code in a next() without them is the timing's after the run, else 0") {
  // The main thread's next() receives the batch, which holds the iterator's
  // own code too: the profile cannot tell them apart.
  TraceBuilder b;
  AddOneWorkerTenBatches(b, 4 * kMs, 0);
  auto measure = [&] {
    const auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    return profiles->front().next_overhead_s_per_batch;
  };
  const model::Input untimed = measure();
  CHECK(untimed.value == 0);
  CHECK_FALSE(untimed.measured);
  CHECK_THAT(untimed.source, Catch::Contains("not timed"));
  b.ConfigDouble(100, 1, "ipc_next_own_cpu_s", 0.0000046);
  const model::Input timed = measure();
  CHECK(timed.value == Approx(0.0000046));
  CHECK(timed.measured);
  CHECK_THAT(timed.source, Catch::Contains("timed after the run"));
}

TEST_CASE("A profile carries the outside load fitted to its delays, fitted once as it is built") {
  // Fetches that waited 2 ms each for a core on 2 cores: more delay than 1
  // worker and a 5 ms step explain.
  TraceBuilder b;
  AddOneWorkerTenBatches(b, 2 * kMs, 2 * kMs);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  model::LoaderProfile p = profiles->front();
  REQUIRE(p.delay_background_threads > 0);
  const double fitted = p.delay_background_threads;
  p.delay_background_threads = -1;
  CHECK(model::FitDelayBackground(p) == Approx(fitted));
}

TEST_CASE("A profile with work at its epochs' starts carries what the simulation puts there, simulated once as it is built") {
  // 10 epochs of 10 iterations, the first of each 50 ms longer (warm-up work).
  TraceBuilder b;
  LoopSpec spec;
  spec.epochs = 10;
  spec.iterations = 10;
  spec.wait = kMs;
  spec.compute = 5 * kMs;
  spec.first_epoch_start_compute = spec.later_epoch_start_compute = 50 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (uint64_t i = 0; i < 100; ++i) b.Span(w, names::kFetch, spec.start + i * 6 * kMs, 4 * kMs, 1, i % 10, 4 * kMs, 0);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  model::LoaderProfile p = profiles->front();
  REQUIRE(p.warmup_extra_first_s > 0);
  REQUIRE(p.epoch_start_simulated_s >= 0);
  const double simulated = p.epoch_start_simulated_s;
  p.epoch_start_simulated_s = -1;
  CHECK(model::SimulateEpochStart(p) == Approx(simulated));
}

TEST_CASE("A worker's gap between fetches while it held the next index is its loop's serial part") {
  // One worker (prefetch 2) fetching each batch in 2 ms and starting the next
  // 0.3 ms later; the main loop takes each batch as it comes (a 0.1 ms step),
  // so batch k's index, sent as batch k - 2 was taken, is always waiting.
  TraceBuilder b;
  b.Config(100, 1, "prefetch_factor", 2);
  LoopSpec spec;
  spec.iterations = 20;
  spec.wait = 2200 * kMs / 1000;
  spec.compute = 100 * kMs / 1000;
  const uint64_t t0 = spec.start + 200 * kMs / 1000;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (uint64_t i = 0; i < 20; ++i) b.Span(w, names::kFetch, t0 + i * 2300 * kMs / 1000, 2 * kMs, 1, i, 2 * kMs, 0);
  const auto result = Analyze(b.trace, {});
  REQUIRE(result.ok());
  const auto& prefetch = result->loaders.front().prefetch;
  CHECK(prefetch.serial_gaps == 19);
  CHECK(prefetch.serial_gap_s == Approx(0.0003));
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().worker_gap_s_per_batch.measured);
  CHECK(profiles->front().worker_gap_s_per_batch.value == Approx(0.0003));

  // The worker process sampled: its CPU outside the fetches is the loop's,
  // `loop` a batch right after each fetch. A gap longer than that is the
  // worker waiting for a core: the serial part is capped at the loop's CPU.
  auto sampled = [&](double loop_ms) {
    Trace t = b.trace;
    auto cpu_at = [&](uint64_t at) {
      double cpu = 0;
      for (uint64_t i = 0; i < 20; ++i) {
        const uint64_t start = t0 + i * 2300 * kMs / 1000, end = start + 2 * kMs;
        const double loop_ns = loop_ms * 1e6;
        if (at > start) cpu += static_cast<double>(std::min(at, end) - start);
        // The loop's CPU spread over the 0.3 ms gap (its sending thread beside).
        if (at > end) cpu += loop_ns * std::min(1.0, static_cast<double>(at - end) / (0.3 * 1e6));
      }
      return static_cast<uint64_t>(cpu);
    };
    t.process_series.push_back(SampledEvery(201, t0 - 10 * kMs, t0 + 60 * kMs, 10 * kMs, cpu_at, 2));
    const auto p = MeasureProfiles(t, {});
    REQUIRE(p.ok());
    return p->front();
  };
  const auto waited = sampled(0.1);
  CHECK(waited.worker_loop_cpu_s_per_batch.value == Approx(0.0001).epsilon(0.05));
  CHECK(waited.worker_gap_s_per_batch.measured);
  CHECK(waited.worker_gap_s_per_batch.value == Approx(0.0001).epsilon(0.05));
  CHECK_THAT(waited.worker_gap_s_per_batch.source, Catch::Contains("300.0 us, capped at the loop CPU above"));
  const auto busy = sampled(0.5);
  CHECK(busy.worker_loop_cpu_s_per_batch.value == Approx(0.0005).epsilon(0.05));
  CHECK(busy.worker_gap_s_per_batch.value == Approx(0.0003));
  CHECK_THAT(busy.worker_gap_s_per_batch.source, !Catch::Contains("capped"));
}

TEST_CASE("A worker's sending thread is taken to wait for the fetch's GIL only where two in three sends were held") {
  analysis::PrefetchStats prefetch;
  auto held = [&](uint64_t held, uint64_t free) {
    prefetch.sends_held = held;
    prefetch.sends_free = free;
    return prefetch.SendsHeld();
  };
  CHECK(held(144, 1));  // a pure-Python fetch
  CHECK(held(12, 6));
  // The MLP's fetch (torch ops on a TensorDataset) let a third of its sends out.
  CHECK_FALSE(held(11, 7));
  CHECK_FALSE(held(9, 0));  // too few to tell
}

namespace {
// A file-backed loader (1 MiB a sample, batches of 4) with one worker whose 40
// fetch spans each get the hook's read spans: batch i missed missed_mib(i)
// MiB from storage and used cpu_ms(i) of CPU, system_ms(i) of it in the
// kernel (< 0: no system_cpu span). Returns the builder.
template <typename Missed, typename Cpu, typename System>
TraceBuilder ReadingLoader(Missed missed_mib, Cpu cpu_ms, System system_ms) {
  TraceBuilder b;
  b.Config(100, 1, "batch_size", 4);
  b.Config(100, 1, "dataset_len", 400);
  b.Config(100, 1, "dataset_bytes", 400ull << 20);
  LoopSpec spec;
  spec.iterations = 40;
  spec.wait = 2 * kMs;
  spec.compute = 20 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (int i = 0; i < 40; ++i) {
    const uint64_t start = spec.start + i * 22 * kMs;
    b.Span(w, names::kFetch, start + 10, 15 * kMs, 1, i, static_cast<int64_t>(cpu_ms(i) * kMs), 0);
    b.Span(w, names::kReadStorage, start, 15 * kMs + 20, 1, static_cast<uint64_t>(missed_mib(i)) << 20);
    b.Span(w, names::kReadCalls, start, 15 * kMs + 20, 1, 4ull << 20);
    if (system_ms(i) >= 0) b.Span(w, names::kSystemCpu, start, 15 * kMs + 20, 1, static_cast<uint64_t>(system_ms(i) * kMs));
  }
  return b;
}
}  // namespace

TEST_CASE("Read spans around fetch spans give the storage bytes per batch and the CPU a miss costs") {
  // Batch i misses 1 or 4 MiB; its CPU is 3 ms + 1 ms per MiB missed.
  auto missed = [](int i) { return i % 2 ? 4 : 1; };
  TraceBuilder b = ReadingLoader(missed, [&](int i) { return 3.0 + missed(i); }, [](int) { return -1.0; });
  const auto analysis = Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const auto& loader = analysis->loaders.front();
  CHECK(loader.fetch_reads.size() == 40);
  CHECK(loader.split.miss_cpu_s_per_batch == Approx(0.0025));  // 1 ms a MiB x 2.5 MiB a batch: fetch, not prep
  for (const auto& st : loader.stages) CHECK(st.name.find("read_") == std::string::npos);  // not pipeline stages
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  CHECK(p.storage_bytes_per_batch == Approx(2.5 * (1 << 20)));
  CHECK(p.cold_hit_ratio == Approx(0.375));  // 2.5 of the 4 MiB a batch needs came from storage
  REQUIRE(p.cpu_s_per_storage_byte.measured);
  CHECK(p.cpu_s_per_storage_byte.value * 1048576.0 == Approx(0.001));
  // Read spans that do not contain a fetch span of their thread measure nothing it did.
  auto& s = b.trace.spans;
  const auto storage_name = *b.trace.FindString(names::kReadStorage);
  for (size_t i = 0; i < s.size(); ++i)
    if (s.name[i] == storage_name) s.start_ns[i] += 20;  // now starts after its fetch span
  const auto shifted = Analyze(b.trace, {});
  REQUIRE(shifted.ok());
  CHECK(shifted->loaders.front().fetch_reads.empty());
}

TEST_CASE("A profile's receive cost is the main thread's CPU in next(), without its run-queue delay, only with workers") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Process(201, 100);
  b.Config(100, 1, "num_workers", 1);
  const uint32_t main = b.Thread(100, 100);
  b.Instant(main, names::kEpoch, 0, 1, 0);
  for (int i = 0; i < 20; ++i) b.Span(main, names::kWait, i * 10 * kMs, 5 * kMs, 1, i, 1 * kMs, kMs / 2);
  const uint32_t w = b.Thread(201, 201);
  for (int i = 0; i < 20; ++i) b.Span(w, names::kFetch, i * 10 * kMs, 4 * kMs, 1, i, 4 * kMs, 0);
  auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  // 1 ms of CPU a wait; its 0.5 ms of delay the simulation predicts itself
  // (the cores it shares), and a busy profile's would carry its load along.
  CHECK(profiles->front().receive_s_per_batch == Approx(0.001));
  b.trace.configs.clear();
  b.Config(100, 1, "num_workers", 0);  // the main thread fetches: its CPU in next() is not receiving
  profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().receive_s_per_batch == 0);
}

TEST_CASE("A cold profile without spread in its misses estimates their CPU from the fetches' system time") {
  // Every batch misses all 4 MiB: 6 ms CPU, 4 ms of it system time.
  TraceBuilder b = ReadingLoader([](int) { return 4; }, [](int) { return 6.0; }, [](int) { return 4.0; });
  b.trace.header.page_cache_copy_ns_per_byte = 1e6 / (4 << 20);  // 1 ms to copy 4 MiB
  auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  CHECK_FALSE(p.cpu_s_per_storage_byte.measured);  // an estimate, said as such
  CHECK_THAT(p.cpu_s_per_storage_byte.source, Catch::Contains("estimated"));
  CHECK(p.cpu_s_per_storage_byte.value * p.storage_bytes_per_batch == Approx(0.003));  // 4 ms - 1 ms of copying
  b.trace.header.page_cache_copy_ns_per_byte = 0;  // an older trace: no estimate, misses cost no CPU
  profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().cpu_s_per_storage_byte.value == 0);
  CHECK_THAT(profiles->front().cpu_s_per_storage_byte.source, Catch::Contains("not fitted, taken as 0"));
}

TEST_CASE("A dataset that lists no files gets its size estimated from what its fetches read") {
  // Each fetch of 4 samples reads 4 MiB through read calls, 1 to 4 MiB of it from storage.
  TraceBuilder b = ReadingLoader([](int i) { return 1 + i % 4; }, [](int) { return 5.0; }, [](int) { return -1.0; });
  auto& configs = b.trace.configs;
  configs.erase(std::remove_if(configs.begin(), configs.end(), [](const auto& c) { return c.key == "dataset_bytes"; }),
                configs.end());
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  CHECK(p.dataset_bytes_estimated);
  CHECK(p.bytes_per_sample.value == Approx(1 << 20));
  CHECK_FALSE(p.bytes_per_sample.measured);
  CHECK(p.bytes_per_sample.source.find("estimated") == 0);
  CHECK(p.dataset_bytes == (400ull << 20));   // 1 MiB a sample x 400 samples
  CHECK(p.cold_hit_ratio == Approx(1 - 2.5 / 4));  // 2.5 of the 4 MiB a batch came from storage
  auto half = stallprof::model::CacheHitRatio(p, 200ull << 20, stallprof::model::CachePolicy::kStatic, false);
  REQUIRE(half.ok());  // so whatif --cache can answer
  CHECK(*half == Approx(0.5));
}

namespace {
// One worker's loader (AddOneWorkerLoader: worker pid 201, returned in
// `worker`) delivering `batches` batches of 4 over a dataset of 400, a
// 20 ms step after each 2 ms wait.
TraceBuilder FourSampleBatches(uint32_t batches, uint32_t& worker) {
  TraceBuilder b;
  b.Config(100, 1, "batch_size", 4);
  b.Config(100, 1, "dataset_len", 400);
  LoopSpec spec;
  spec.iterations = batches;
  spec.wait = 2 * kMs;
  spec.compute = 20 * kMs;
  worker = AddOneWorkerLoader(b, spec);
  return b;
}

// Batch i's fetch on `thread` (15 ms, 5 ms on CPU) inside read spans of
// `device` bytes from the device and `calls` through read calls.
void AddReadingFetch(TraceBuilder& b, uint32_t thread, uint32_t i, uint64_t device, uint64_t calls) {
  const uint64_t start = LoopSpec{}.start + i * 22 * kMs;
  b.Span(thread, names::kFetch, start + 10, 15 * kMs, 1, i, 5 * kMs, 0);
  b.Span(thread, names::kReadStorage, start, 15 * kMs + 20, 1, device);
  b.Span(thread, names::kReadCalls, start, 15 * kMs + 20, 1, calls);
}
}  // namespace

TEST_CASE("A fresh worker's first fetch, importing modules, does not size the dataset") {
  // Non-persistent workers making two batches each (fresh processes every
  // epoch): each worker's first fetch reads 400 KiB of .pyc files (PIL's
  // image plugins) through read calls, its second `later` bytes; an LMDB
  // dataset reads none (page faults).
  auto build = [](uint64_t later) {
    uint32_t loader_worker = 0;
    TraceBuilder b = FourSampleBatches(100, loader_worker);
    std::vector<uint32_t> workers;
    for (uint32_t t = 0; t < 50; ++t) {
      b.Process(300 + t, 100);
      workers.push_back(b.Thread(300 + t, 300 + t));
    }
    for (uint32_t i = 0; i < 100; ++i) AddReadingFetch(b, workers[i / 2], i, 0, i % 2 == 0 ? 400ull << 10 : later);
    return b;
  };
  TraceBuilder lmdb = build(150);
  const auto unsized = MeasureProfiles(lmdb.trace, {});
  REQUIRE(unsized.ok());
  CHECK(unsized->front().dataset_bytes == 0);
  // A dataset opening a 64 KiB file a sample: sized from the later fetches alone.
  TraceBuilder files = build(256ull << 10);
  const auto sized = MeasureProfiles(files.trace, {});
  REQUIRE(sized.ok());
  CHECK(sized->front().bytes_per_sample.value == Approx(64 << 10));
  CHECK(sized->front().dataset_bytes == (400ull * (64 << 10)));
  CHECK_THAT(sized->front().bytes_per_sample.source, Catch::Contains("the median over 50 fetches") &&
                                                       Catch::Contains("each thread's first left out"));
}

TEST_CASE("The step's own CPU is the main process's CPU over the steps less its CPU in next()") {
  // 20 iterations: next() waits 10 ms using 2 ms of CPU (1 ms run-queue delay),
  // then the step computes 30 ms using 15 ms of CPU (3 ms delay). The sampler
  // ticks at each return with the main process's cumulative CPU and delay.
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "batch_size", 4);
  const uint32_t main = b.Thread(100, 100);
  const uint64_t start = 1000 * kMs;
  b.Instant(main, names::kEpoch, start, 1, 0);
  ProcessSeries series;
  series.pid = 100;
  uint64_t t = start, cpu = 0, delay = 0;
  for (int i = 0; i < 20; ++i) {
    b.Span(main, names::kWait, t, 10 * kMs, 1, i, 2 * kMs, 1 * kMs);
    t += 10 * kMs;
    cpu += 2 * kMs;
    delay += 1 * kMs;
    series.t_ns.push_back(t);
    series.cpu_ns.push_back(cpu);
    series.delay_ns.push_back(delay);
    t += 30 * kMs;
    cpu += 15 * kMs;
    delay += 3 * kMs;
  }
  b.trace.process_series.push_back(series);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  REQUIRE(p.compute_cpu_s_per_batch.measured);
  CHECK(p.compute_cpu_s_per_batch.value == Approx(0.015));
  CHECK(p.compute_delay_s_per_batch == Approx(0.003));
  // Without the wait spans' CPU the step's share cannot be told apart.
  for (auto& has : b.trace.spans.has_cpu) has = 0;
  CHECK_FALSE(MeasureProfiles(b.trace, {})->front().compute_cpu_s_per_batch.measured);
}

TEST_CASE("Iterators that each delivered one batch give no profile, and the error says why") {
  // next(iter(loader)) in the loop: every iterator is left after its first
  // batch, so no step has a known end.
  TraceBuilder b;
  b.Process(100, 1);
  const uint32_t main = b.Thread(100, 100);
  for (uint32_t e = 0; e < 4; ++e) {
    b.Span(main, names::kEpoch, e * 50 * kMs, 20 * kMs, 1, e);
    b.Span(main, names::kWait, e * 50 * kMs + 20 * kMs, 10 * kMs, 1, 0);
  }
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE_FALSE(profiles.ok());
  CHECK_THAT(profiles.error().message, Catch::Contains("each of its 4 iterations was the last its iterator delivered"));
}

TEST_CASE("The access order is read from what the hook records, and from a sampler's type name") {
  for (const auto& [recorded, sequential] : std::vector<std::pair<std::string, bool>>{
           {"sequential", true}, {"SequentialSampler", true}, {"random", false}, {"WeightedRandomSampler", false}}) {
    TraceBuilder b;
    b.Config(100, 1, "sampler", recorded);
    LoopSpec spec;
    AddMainProcessLoader(b, spec);
    const auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    CHECK((profiles->front().order == model::AccessOrder::kSequential) == sequential);
  }
}

TEST_CASE("A memory-mapped dataset gets its size estimated from a complete epoch's device reads") {
  // 100 batches of 4 over a dataset of 400, each fetch faulting 4 MiB in from
  // the device and reading 150 bytes through read calls (the hook's own /proc
  // reads): no files, 1 MiB a sample.
  auto build = [](uint32_t batches, uint64_t (*device_bytes)(uint32_t)) {
    uint32_t w = 0;
    TraceBuilder b = FourSampleBatches(batches, w);
    for (uint32_t i = 0; i < batches; ++i) AddReadingFetch(b, w, i, device_bytes(i), 150);
    return b;
  };
  auto four_mib = [](uint32_t) -> uint64_t { return 4ull << 20; };
  TraceBuilder whole = build(100, four_mib);
  const auto profiles = MeasureProfiles(whole.trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  CHECK(p.dataset_bytes_estimated);
  CHECK(p.bytes_per_sample.value == Approx(1 << 20));
  CHECK_THAT(p.bytes_per_sample.source, Catch::Contains("memory-mapped"));
  CHECK(p.dataset_bytes == (400ull << 20));
  // An epoch over part of the dataset (a loop left early, a sampler of fewer
  // samples) says nothing of the rest: no estimate.
  TraceBuilder part = build(40, four_mib);
  const auto partial = MeasureProfiles(part.trace, {});
  REQUIRE(partial.ok());
  CHECK(partial->front().dataset_bytes == 0);
  // whatif --cache then says why, and what would give the size.
  const auto refused = model::CacheHitRatio(partial->front(), 1ull << 30, model::CachePolicy::kLru, false);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("no epoch was fetched whole") && Catch::Contains("profile a whole epoch"));
  // An in-memory dataset whose first fetch read 500 KB once (modules) on a fresh
  // machine: not a dataset of that size.
  TraceBuilder imports = build(100, [](uint32_t i) -> uint64_t { return i == 0 ? 500000 : 0; });
  const auto in_memory = MeasureProfiles(imports.trace, {});
  REQUIRE(in_memory.ok());
  CHECK(in_memory->front().dataset_bytes == 0);
}

TEST_CASE("A memory-mapped dataset its worker found sizes the dataset, whatever the device read") {
  // The memmap's 400 MiB file as the worker (pid 201, a child of the loader's
  // process) recorded it; its fetches found every page cached (0 bytes from
  // the device), so the device reads would size it at nothing.
  auto build = [](uint32_t recorder) {
    uint32_t w = 0;
    TraceBuilder b = FourSampleBatches(100, w);
    b.Process(300, 1);  // another job's process, with a loader of the same scope number
    b.Config(recorder, 1, "held_files", 1);
    b.Config(recorder, 1, "held_bytes", 400ull << 20);
    b.Config(recorder, 1, "held_kinds", std::string("numpy memmap"));
    for (uint32_t i = 0; i < 100; ++i) AddReadingFetch(b, w, i, 0, 150);
    return b;
  };
  TraceBuilder worker = build(201);
  const auto profiles = MeasureProfiles(worker.trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  CHECK(p.dataset_bytes == (400ull << 20));
  CHECK_FALSE(p.dataset_bytes_estimated);
  CHECK(p.bytes_per_sample.value == Approx(1 << 20));
  CHECK(p.bytes_per_sample.measured);
  CHECK_THAT(p.bytes_per_sample.source, Catch::Contains("reads from (numpy memmap"));
  const auto hit = model::CacheHitRatio(p, 400ull << 20, model::CachePolicy::kLru, false);
  REQUIRE(hit.ok());
  CHECK(*hit == 1.0);
  // A process outside the loader's tree says nothing of its dataset.
  TraceBuilder other = build(300);
  const auto unrelated = MeasureProfiles(other.trace, {});
  REQUIRE(unrelated.ok());
  CHECK(unrelated->front().dataset_bytes == 0);
  // A worker gone before the launcher read its /proc entry (not in the
  // process table) counts by the parent it recorded, and only by that.
  for (const uint64_t parent : {100ull, 300ull}) {
    TraceBuilder gone = build(401);
    gone.Config(401, 1, "held_parent", parent);
    const auto profiles = MeasureProfiles(gone.trace, {});
    REQUIRE(profiles.ok());
    CHECK(profiles->front().dataset_bytes == (parent == 100 ? (400ull << 20) : 0));
  }
}

TEST_CASE("A container file the dataset reads from sizes it, not the read calls that re-read its metadata") {
  // An HDF5 file of 51 MiB opened in each __getitem__: every fetch's read
  // calls re-read its superblock and B-tree nodes, 2 MiB a batch of 4, so
  // the read-call estimate would be 100 x 2 MiB / 4 x 4 = 200 MiB.
  auto build = [](uint64_t held_bytes, const char* key_prefix) {
    uint32_t w = 0;
    TraceBuilder b = FourSampleBatches(100, w);
    b.Config(201, 1, std::string(key_prefix) + "files", 1);
    b.Config(201, 1, std::string(key_prefix) + "bytes", held_bytes);
    for (uint32_t i = 0; i < 100; ++i) AddReadingFetch(b, w, i, 0, 2ull << 20);
    return b;
  };
  TraceBuilder hdf5 = build(51ull << 20, "held_");
  hdf5.Config(201, 1, "held_kinds", std::string("HDF5"));
  const auto sized = MeasureProfiles(hdf5.trace, {});
  REQUIRE(sized.ok());
  CHECK(sized->front().dataset_bytes == (51ull << 20));
  CHECK_FALSE(sized->front().dataset_bytes_estimated);
  CHECK_THAT(sized->front().bytes_per_sample.source, Catch::Contains("(HDF5: found by the hook"));
  // A labels file of 10 KiB it names beside the 2 MiB each fetch reads is
  // not the dataset: the read calls size it.
  TraceBuilder labels = build(10 << 10, "held_");
  const auto estimated = MeasureProfiles(labels.trace, {});
  REQUIRE(estimated.ok());
  CHECK(estimated->front().dataset_bytes == (200ull << 20));
  CHECK(estimated->front().dataset_bytes_estimated);
  // A trace from before the held_ keys (mapped_, numpy memmaps and LMDB) reads the same.
  TraceBuilder legacy = build(51ull << 20, "mapped_");
  const auto old = MeasureProfiles(legacy.trace, {});
  REQUIRE(old.ok());
  CHECK(old->front().dataset_bytes == (51ull << 20));
  CHECK_THAT(old->front().bytes_per_sample.source, Catch::Contains("(memory-mapped: found by the hook"));
}

TEST_CASE("An IterableDataset's items are an epoch's samples to StopIteration, read in its own order") {
  // A stream of tar shards without a len: 2 epochs of 25 batches of 4, each
  // fetch reading 256 KiB through read calls; then the shards the hook found.
  auto build = [](bool shards_found) {
    TraceBuilder b;
    b.Config(100, 1, "batch_size", 4);
    b.Config(100, 1, "sampler", std::string("_InfiniteConstantSampler"));
    if (shards_found) {
      b.Config(201, 1, "held_files", 8);
      b.Config(201, 1, "held_bytes", 32ull << 20);
      b.Config(201, 1, "held_kinds", std::string("tar"));
    }
    LoopSpec spec;
    spec.epochs = 2;
    spec.iterations = 25;
    spec.wait = 2 * kMs;
    spec.compute = 20 * kMs;
    const uint32_t w = AddOneWorkerLoader(b, spec);
    for (uint32_t i = 0; i < 50; ++i) AddReadingFetch(b, w, i, 0, 256 << 10);
    return b;
  };
  TraceBuilder stream = build(false);
  const auto estimated = MeasureProfiles(stream.trace, {});
  REQUIRE(estimated.ok());
  const auto& p = estimated->front();
  CHECK(p.dataset_items == 100);
  CHECK(p.dataset_items_counted);
  CHECK(p.order == model::AccessOrder::kSequential);
  CHECK(p.dataset_bytes == 100ull * (64 << 10));
  CHECK(p.dataset_bytes_estimated);
  TraceBuilder shards = build(true);
  const auto sized = MeasureProfiles(shards.trace, {});
  REQUIRE(sized.ok());
  CHECK(sized->front().dataset_bytes == (32ull << 20));
  CHECK_FALSE(sized->front().dataset_bytes_estimated);
}

TEST_CASE("A loader whose epochs all end within the warm-up has no steady state to compare the model with") {
  // 3 batches an epoch against a warm-up of 5: each epoch's first batch (its
  // workers starting) is in every mean, which the steady simulation leaves out.
  TraceBuilder b;
  LoopSpec spec;
  spec.epochs = 4;
  spec.iterations = 3;
  spec.warmup_wait_iters = 1;
  spec.warmup_wait = 50 * kMs;
  AddMainProcessLoader(b, spec);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK_FALSE(profiles->front().steady_state_measured);
  CHECK(profiles->front().measured_samples_per_s == 0);
  CHECK(profiles->front().measured_whole_run_samples_per_s > 0);  // the whole run is compared instead
  spec.iterations = 8;  // past the warm-up: measured
  TraceBuilder longer;
  AddMainProcessLoader(longer, spec);
  const auto steady = MeasureProfiles(longer.trace, {});
  REQUIRE(steady.ok());
  CHECK(steady->front().steady_state_measured);
  CHECK(steady->front().measured_samples_per_s == Approx(1 / 0.040));  // batch size unknown: 1
}

TEST_CASE("An IterableDataset's uneven split over the workers is measured per worker and epoch") {
  // 2 epochs of 45 batches from 2 workers; the stream gives worker 201 twice
  // the batches of worker 202 (3 shards over 2 workers).
  for (const bool persistent : {true, false}) {
    TraceBuilder b;
    b.Process(100, 1);
    b.Config(100, 1, "name", "stream");
    b.Config(100, 1, "batch_size", 16);
    b.Config(100, 1, "num_workers", 2);
    b.Config(100, 1, "persistent_workers", persistent ? 1 : 0);
    b.Config(100, 1, "sampler", "_InfiniteConstantSampler");
    LoopSpec spec;
    spec.thread = b.Thread(100, 100);
    spec.epochs = 2;
    spec.iterations = 45;
    spec.wait = 5 * kMs;
    spec.compute = kMs;
    AddLoop(b, spec);
    const uint64_t epoch_len = 45 * 6 * kMs;
    uint32_t big = 0, small = 0;
    for (uint32_t e = 0; e < 2; ++e) {
      // Persistent workers are the same two processes in both epochs; others new ones.
      if (e == 0 || !persistent) {
        const uint32_t pid = 201 + 2 * e;
        b.Process(pid, 100);
        b.Process(pid + 1, 100);
        big = b.Thread(pid, pid);
        small = b.Thread(pid + 1, pid + 1);
      }
      for (uint64_t i = 0; i < 45; ++i)
        b.Span(i < 30 ? big : small, names::kFetch, spec.start + e * epoch_len + i * 6 * kMs, 5 * kMs, 1, i, 5 * kMs, 0);
    }
    const auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    INFO("persistent_workers " << persistent);
    CHECK(profiles->front().stream_worker_batches == std::vector<double>{30, 15});
  }
  // An even split (a map-style dataset, or a stream dealt evenly) leaves it empty.
  TraceBuilder even;
  LoopSpec spec;
  spec.iterations = 20;
  const uint32_t w = AddOneWorkerLoader(even, spec);
  even.Config(100, 1, "sampler", "_InfiniteConstantSampler");
  for (uint64_t i = 0; i < 20; ++i) even.Span(w, names::kFetch, spec.start + i * 40 * kMs, 5 * kMs, 1, i, 5 * kMs, 0);
  const auto profiles = MeasureProfiles(even.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().stream_worker_batches.empty());
}

TEST_CASE("Non-persistent workers' shutdown at each epoch's end is measured per worker") {
  // 1 worker, 3 epochs, each ending with a StopIteration next() of 30 ms (joining it).
  TraceBuilder b;
  LoopSpec spec;
  spec.epochs = 3;
  spec.iterations = 8;
  spec.shutdown = 30 * kMs;
  const uint32_t w = AddOneWorkerLoader(b, spec);
  for (uint64_t i = 0; i < 24; ++i) b.Span(w, names::kFetch, spec.start + i * 40 * kMs, 5 * kMs, 1, i % 8, 5 * kMs, 0);
  auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().shutdown_s_per_worker == Approx(0.030));
  // Persistent workers are not joined by next(): nothing to measure.
  b.Config(100, 1, "persistent_workers", 1);
  profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().shutdown_s_per_worker == 0);
}

TEST_CASE("Without workers the GIL probes decide whether the fetch holds the GIL, from ten probes on") {
  // 0 workers: each next() a 10 ms fetch on the main thread, then a 30 ms
  // step; the probe thread asks 10 us into some fetches and waits 8 ms
  // (held) or 20 us (free).
  auto profile = [](int held, int free) {
    TraceBuilder b;
    LoopSpec spec;
    spec.iterations = 30;
    AddMainProcessLoader(b, spec);
    b.Config(100, 1, "num_workers", 0);
    const uint32_t probe = b.Thread(100, 101);
    for (uint32_t i = 0; i < spec.iterations; ++i) {
      const uint64_t t = spec.start + i * (spec.wait + spec.compute);
      b.Span(spec.thread, names::kFetch, t, spec.wait, 1, i, spec.wait, 0);
      if (static_cast<int>(i) < held + free)
        b.Span(probe, names::kGilProbe, t + 10'000, static_cast<int>(i) < held ? 8 * kMs : 20'000, 1, 5 * kMs, 0, 0);
    }
    const auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    return profiles->front().fetch_holds_gil;
  };
  const auto held = profile(7, 4);
  CHECK(held.measured);
  CHECK(held.value == 1);
  CHECK(held.source.find("7 of 11 probes") != std::string::npos);
  const auto free = profile(4, 7);
  CHECK(free.measured);
  CHECK(free.value == 0);
  const auto few = profile(9, 0);
  CHECK_FALSE(few.measured);
  CHECK(few.value == 0);
  CHECK(few.source.find("9 GIL probes of the fetches, 10 needed") != std::string::npos);
}

TEST_CASE("With workers whose batches' arrival does not tell, the workers' GIL probes decide, and a held batch's "
          "receive from the fetch's end is handoff") {
  // 1 worker fetching each batch in 15 ms, a batch every 22 ms; the main loop
  // calls next() for batch k 0.3 ms before the worker's fetch of batch k + 1
  // ends and returns 0.5 ms after it. The worker's probe thread, in the
  // worker's process, asks 10 us into some fetches and waits 8 ms (held) or
  // 20 us (free). A call 0.3 ms before the later fetch's end cannot tell a
  // batch held there from one sent (0.5 ms needed), so the batches' arrival
  // tells nothing.
  auto measure = [](int held, int free) {
    TraceBuilder b;
    LoopSpec spec;
    spec.iterations = 40;
    spec.wait = 800'000;
    spec.compute = 21'200'000;
    const uint32_t w = AddOneWorkerLoader(b, spec);
    const uint32_t probe = b.Thread(201, 202);
    for (uint32_t i = 0; i <= spec.iterations; ++i) {
      const uint64_t end = spec.start + i * 22 * kMs + 300'000 - 22 * kMs, t = end - 15 * kMs;
      b.Span(w, names::kFetch, t, 15 * kMs, 1, i, 15 * kMs, 0);
      if (static_cast<int>(i) < held + free)
        b.Span(probe, names::kGilProbe, t + 10'000, static_cast<int>(i) < held ? 8 * kMs : 20'000, 1, 5 * kMs, 0, 0);
    }
    const auto analysis = Analyze(b.trace, {});
    REQUIRE(analysis.ok());
    const auto& loader = analysis->loaders.front();
    CHECK_FALSE(loader.prefetch.SendsTold());
    // Each steady call's receive from the later fetch's end: 0.5 ms.
    size_t steady = 0;
    for (const auto& it : loader.iterations) steady += it.steady;
    CHECK(loader.prefetch.held_handoff_s == Approx(steady * 500e-6).epsilon(1e-6));
    const auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    return profiles->front();
  };
  // Held: the receives after the fetches' ends are the handoff.
  const auto held = measure(8, 3);
  CHECK(held.fetch_holds_gil.measured);
  CHECK(held.fetch_holds_gil.value == 1);
  CHECK(held.fetch_holds_gil.source.find("8 of 11 probes in the workers") != std::string::npos);
  CHECK(held.handoff_s_per_batch == Approx(500e-6).epsilon(1e-6));
  const auto free = measure(3, 8);
  CHECK(free.fetch_holds_gil.measured);
  CHECK(free.fetch_holds_gil.value == 0);
  CHECK(free.handoff_s_per_batch == Approx(0).margin(1e-9));
  const auto few = measure(9, 0);
  CHECK_FALSE(few.fetch_holds_gil.measured);
  CHECK(few.fetch_holds_gil.source.find("9 GIL probes in the workers, 10 of either needed") != std::string::npos);
}

TEST_CASE("Other processes' busy cores are the machine's busy time less the job's, a late-born worker counted whole, "
          "and the hypervisor's steal told apart") {
  // 2 s sampled every 100 ms on 2 cores. The main process uses 0.5 cores; a
  // worker born at 1 s spends 300 ms of CPU on imports before its first
  // reading at 1.1 s, then 0.5 cores. /proc/stat: the job's CPU plus `loop`
  // cores of a busy loop plus `steal` cores the hypervisor took, which the
  // steal column records when `steal_column`.
  auto measure = [](double loop, double steal, bool steal_column) {
    TraceBuilder b;
    b.Process(100, 1);
    b.Process(201, 100);
    b.Config(100, 1, "batch_size", 4);
    LoopSpec spec;
    spec.thread = b.Thread(100, 100);
    spec.iterations = 25;
    AddLoop(b, spec);
    ProcessSeries main, worker;
    main.pid = 100;
    worker.pid = 201;
    auto& sys = b.trace.system;
    for (uint64_t t = 0; t <= 2000 * kMs; t += 100 * kMs) {
      const uint64_t main_cpu = t / 2;
      const uint64_t worker_cpu = t >= 1100 * kMs ? 300 * kMs + (t - 1100 * kMs) / 2 : 0;
      main.t_ns.push_back(t);
      main.cpu_ns.push_back(main_cpu);
      if (t >= 1100 * kMs) {
        worker.t_ns.push_back(t);
        worker.cpu_ns.push_back(worker_cpu);
      }
      sys.t_ns.push_back(t);
      sys.cpu_busy_ns.push_back(main_cpu + worker_cpu + static_cast<uint64_t>((loop + steal) * static_cast<double>(t)));
      sys.cpu_total_ns.push_back(2 * t);
      if (steal_column) sys.cpu_steal_ns.push_back(static_cast<uint64_t>(steal * static_cast<double>(t)));
    }
    b.trace.process_series = {main, worker};
    auto analysis = Analyze(b.trace, {});
    REQUIRE(analysis.ok());
    auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    REQUIRE(profiles->size() == 1);
    return std::make_pair(analysis->system, profiles->front());
  };
  // the worker's imports are the job's, not another process's
  CHECK(measure(0, 0, false).second.outside_busy_cores == Approx(0).margin(1e-6));
  CHECK(measure(1, 0, false).second.outside_busy_cores == Approx(1).margin(1e-6));
  const auto [with, with_profile] = measure(0.25, 0.5, true);
  CHECK(with.outside_busy_cores == Approx(0.75).margin(1e-6));
  CHECK(with.outside_steal_cores == Approx(0.5).margin(1e-6));
  CHECK(with.steal_measured);
  CHECK(with.steal_fraction == Approx(0.25).margin(1e-6));  // 0.5 of 2 cores
  CHECK(with_profile.outside_steal_cores == Approx(0.5).margin(1e-6));
  CHECK(with_profile.steal_fraction == Approx(0.25).margin(1e-6));
  const auto [without, without_profile] = measure(0.25, 0.5, false);  // a trace before the steal column
  CHECK(without.outside_busy_cores == Approx(0.75).margin(1e-6));
  CHECK(without.outside_steal_cores == -1);
  CHECK_FALSE(without.steal_measured);
  CHECK(without_profile.outside_steal_cores == -1);
  CHECK(without_profile.steal_fraction == -1);
}

TEST_CASE("A later epoch's kernel CPU beyond the steady rate in its first steps is the fork's copy-on-write refault") {
  // Forked, non-persistent workers: 3 epochs of 10 batches (10 ms wait, 30
  // ms compute); each later epoch's first compute takes 130 ms, 80 ms of it
  // in the kernel beyond the process's steady 3 ms per 30 ms compute.
  auto build = [](const char* context, bool persistent) {
    TraceBuilder b;
    b.Config(100, 1, "batch_size", 4);
    if (*context) b.Config(100, 1, "multiprocessing_context", std::string(context));
    if (persistent) b.Config(100, 1, "persistent_workers", 1);
    LoopSpec spec;
    spec.epochs = 3;
    spec.iterations = 10;
    spec.later_epoch_start_compute = 130 * kMs;
    AddOneWorkerLoader(b, spec);
    // The refault windows: each later epoch's first compute.
    std::vector<std::pair<uint64_t, uint64_t>> refault;
    uint64_t t = spec.start;
    for (uint32_t e = 0; e < spec.epochs; ++e)
      for (uint32_t i = 0; i < spec.iterations; ++i) {
        t += spec.wait;
        const uint64_t compute = e > 0 && i == 0 ? spec.later_epoch_start_compute : spec.compute;
        if (e > 0 && i == 0) refault.push_back({t, t + compute});
        t += compute;
      }
    ProcessSeries main;
    main.pid = 100;
    double kernel = 0;
    for (uint64_t at = spec.start - 10 * kMs; at <= t + 10 * kMs; at += 5 * kMs) {
      main.t_ns.push_back(at);
      main.cpu_ns.push_back(at);
      main.system_cpu_ns.push_back(static_cast<uint64_t>(kernel));
      bool in_refault = false;
      for (auto [from, to] : refault) in_refault |= at >= from && at < to;
      kernel += 5 * kMs * (0.1 + (in_refault ? 80.0 / 130 : 0));
    }
    b.trace.process_series = {main};
    auto profiles = MeasureProfiles(b.trace, {});
    REQUIRE(profiles.ok());
    // analyze's persistent_workers saving counts each later epoch's refault too.
    auto analysis = Analyze(b.trace, {});
    REQUIRE(analysis.ok());
    const auto& loader = analysis->loaders.at(0);
    CHECK(loader.fork_refault_s_per_epoch == Approx(profiles->front().fork_refault_later_s));
    if (!persistent) CHECK(loader.persistent_saving_s >= 2 * loader.fork_refault_s_per_epoch);
    return profiles->front();
  };
  const auto forked = build("", false);
  CHECK(forked.warmup_extra_later_s == Approx(0.100).epsilon(0.01));
  CHECK(forked.fork_refault_later_s == Approx(0.080).epsilon(0.05));
  CHECK(build("fork", false).fork_refault_later_s == Approx(0.080).epsilon(0.05));
  // Spawned workers share no pages; persistent ones are forked once.
  CHECK(build("spawn", false).fork_refault_later_s == 0);
  CHECK(build("", true).fork_refault_later_s == 0);
}

TEST_CASE("The loop's own work at an epoch's start is its warm-up compute beyond the steady mean") {
  // 3 epochs of 10 batches, 30 ms of compute each, but 530 ms after the
  // first batch of the run and 230 ms after that of each later epoch.
  TraceBuilder b;
  LoopSpec spec;
  spec.epochs = 3;
  spec.iterations = 10;
  spec.first_epoch_start_compute = 530 * kMs;
  spec.later_epoch_start_compute = 230 * kMs;
  AddMainProcessLoader(b, spec);
  auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  CHECK(p.compute_s_per_batch == Approx(0.030));
  CHECK(p.warmup_extra_first_s == Approx(0.500));
  CHECK(p.warmup_extra_later_s == Approx(0.200));
  // Uniform steps: nothing beyond the steady mean.
  spec.first_epoch_start_compute = spec.later_epoch_start_compute = 0;
  TraceBuilder uniform;
  AddMainProcessLoader(uniform, spec);
  profiles = MeasureProfiles(uniform.trace, {});
  REQUIRE(profiles.ok());
  CHECK(profiles->front().warmup_extra_first_s == Approx(0).margin(1e-9));
  CHECK(profiles->front().warmup_extra_later_s == Approx(0).margin(1e-9));
}

TEST_CASE("A profile's samples per epoch count a partial last batch, and a loader without a steady state has no warm-up work") {
  // 3 epochs of 4 batches of 64 over 200 samples (the last batch 8), every
  // iteration within the warm-up, the first of the run 1 s longer, that of
  // each later epoch 500 ms.
  TraceBuilder b;
  LoopSpec spec;
  spec.epochs = 3;
  spec.iterations = 4;
  spec.first_epoch_start_compute = 1030 * kMs;
  spec.later_epoch_start_compute = 530 * kMs;
  AddMainProcessLoader(b, spec);
  b.Config(100, 1, "batch_size", 64);
  b.Config(100, 1, "dataset_len", 200);
  auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  const auto& p = profiles->front();
  CHECK(p.samples_per_epoch == Approx(200));
  CHECK(p.batches_per_epoch == Approx(4));
  CHECK(p.warmup_extra_first_s == 0);
  CHECK(p.warmup_extra_later_s == 0);
}
