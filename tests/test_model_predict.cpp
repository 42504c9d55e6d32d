// model::Predict: each regime, the serial W=0 case, the DS-Analyzer split and
// errors. Profiles are hand-built so every expected number follows from the
// formulas in docs/model.md.
#include <catch2/catch.hpp>

#include "model/model.h"

using namespace stallprof::model;

namespace {
LoaderProfile BaseProfile() {
  LoaderProfile p;
  p.name = "train";
  p.batch_size = 10;
  p.workers = 2;
  p.batches = 100;
  p.compute_s_per_batch = 0.1;
  p.cpu_s_per_batch = 0.05;
  p.io_s_per_batch = 0.0;
  p.delay_s_per_batch = 0.0;
  p.main_cpu_cores = 0.0;
  p.profiled_cores = 4;
  return p;
}
// Profiled without workers on 2 cores: 30 ms of fetch CPU a batch of 10, and
// a step of 5 ms on torch's 2 intra-op threads that took `step_cpu_s` of CPU.
LoaderProfile ParallelStepProfile(double step_cpu_s) {
  LoaderProfile p = BaseProfile();
  p.workers = 0;
  p.cpu_s_per_batch = 0.030;
  p.compute_s_per_batch = 0.005;
  p.compute_cpu_s_per_batch = {step_cpu_s, true, "test"};
  p.profiled_cores = 2;
  p.intra_op_threads = 2;
  return p;
}
// 2 workers always busy on 2 cores beside a 1 ms step, 40 ms of CPU a
// batch each, and `delay` of run-queue delay a batch; /proc/stat saw other
// processes use a tenth of a core. With L more runnable threads each worker
// gets 2 / (2 + L) of a core, so it waits 0.04 x L / 2 a batch: 6 ms is
// L = 0.3.
LoaderProfile BusyWorkersProfile(double delay) {
  LoaderProfile p = BaseProfile();
  p.profiled_cores = 2;
  p.compute_s_per_batch = 0.001;
  p.cpu_s_per_batch = 0.04;
  p.delay_s_per_batch = delay;
  p.outside_busy_cores = 0.1;
  p.outside_busy_measured = true;
  return p;
}

Scenario On(double cores, int32_t workers = -1) {
  Scenario s;
  s.machine.cores = cores;
  s.workers = workers;
  return s;
}
}  // namespace

TEST_CASE("A loader whose workers outpace the step is compute bound with no stall") {
  auto r = Predict(BaseProfile(), On(4));
  REQUIRE(r.ok());
  CHECK(r->bottleneck == Bottleneck::kCompute);
  CHECK(r->samples_per_s == Approx(100));  // 10 samples / 0.1 s
  CHECK(r->step_s == Approx(0.1));
  CHECK(r->stall_fraction == Approx(0).margin(1e-12));
}

TEST_CASE("Ranks on one host share its cores: each rank's loader gets its share") {
  // 2 workers burning 0.4 s a batch of 10: prep bound at the cores they get.
  // Two ranks on a 2-core host each run the same loop on 1 core (25
  // samples/s, as one rank alone on 1 core), not on both (50).
  LoaderProfile p = BaseProfile();
  p.cpu_s_per_batch = 0.4;
  p.ranks_on_host = 2;
  p.profiled_cores = 1;  // the rank's share of the profiled host's 2
  auto shared = Predict(p, On(2));
  REQUIRE(shared.ok());
  CHECK(shared->samples_per_s == Approx(25));
  auto more = Predict(p, On(8));  // 4 cores a rank
  REQUIRE(more.ok());
  CHECK(more->samples_per_s == Approx(50));  // both workers on a core each
}

TEST_CASE("CPU-heavy preprocessing on too few cores makes the loader prep bound") {
  LoaderProfile p = BaseProfile();
  p.cpu_s_per_batch = 0.4;  // 2 workers on 1 core: 1 core x 10 / 0.4 = 25 samples/s
  auto r = Predict(p, On(1));
  REQUIRE(r.ok());
  CHECK(r->bottleneck == Bottleneck::kPrep);
  CHECK(r->r_prep == Approx(25));
  CHECK(r->samples_per_s == Approx(25));
  CHECK(r->stall_fraction == Approx(1 - 0.1 / 0.4));
  CHECK(r->prep_stall_fraction == Approx(0.75));
  CHECK(r->fetch_stall_fraction == Approx(0).margin(1e-12));
  // More cores lift the limit until compute binds.
  auto more = Predict(p, On(8, 8));
  REQUIRE(more.ok());
  CHECK(more->bottleneck == Bottleneck::kCompute);
  CHECK(more->samples_per_s == Approx(100));
}

TEST_CASE("Latency-bound io limits throughput by worker occupancy even with idle cores") {
  LoaderProfile p = BaseProfile();
  p.cpu_s_per_batch = 0.01;
  p.io_s_per_batch = 0.39;  // each worker is busy 0.4 s per batch, mostly blocked
  auto r = Predict(p, On(16));
  REQUIRE(r.ok());
  CHECK(r->r_workers == Approx(2 * 10 / 0.4));
  CHECK(r->samples_per_s == Approx(50));
  // No bytes from the device behind the off-CPU time: blocking, not storage.
  CHECK(r->bottleneck == Bottleneck::kBlocking);
  CHECK(std::string(ToString(r->bottleneck)) == "blocking");
  LoaderProfile reads = p;
  reads.storage_bytes_per_batch = 1e6;
  CHECK(Predict(reads, On(16))->bottleneck == Bottleneck::kFetch);
  CHECK(r->fetch_stall_fraction == Approx(0.5));
  CHECK(r->prep_stall_fraction == Approx(0).margin(1e-12));
  // Four workers double the rate; eight make compute the limit.
  CHECK(Predict(p, On(16, 4))->samples_per_s == Approx(100));
  CHECK(Predict(p, On(16, 8))->bottleneck == Bottleneck::kCompute);
}

TEST_CASE("Storage bandwidth caps the rate by bytes read per uncached sample") {
  LoaderProfile p = BaseProfile();
  p.bytes_per_sample = {1e6, true, "read_bytes"};
  p.storage_bandwidth = {2e7, true, "observed"};  // 20 samples/s
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->r_fetch == Approx(20));
  CHECK(r->samples_per_s == Approx(20));
  CHECK(r->bottleneck == Bottleneck::kFetch);
  Scenario faster = On(4);
  faster.storage_bandwidth = 2e8;
  CHECK(Predict(p, faster)->bottleneck == Bottleneck::kCompute);
}

TEST_CASE("An epoch's reads take at least its bytes over the storage bandwidth, start-up added") {
  LoaderProfile p = BaseProfile();
  p.bytes_per_sample = {1e6, true, "read_bytes"};
  p.storage_bandwidth = {2e7, true, "observed"};  // 20 samples/s: 2 batches a second
  p.epochs = 2;
  p.batches_per_epoch = 10;
  p.startup_first_s = 1.0;
  p.startup_later_s = 1.0;
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->samples_per_s == Approx(20));
  // Per epoch 1 s start-up and 100 samples at 20 samples/s.
  CHECK(r->whole_run_samples_per_s == Approx(200 / (2 * (1.0 + 5.0))).epsilon(1e-3));
}

TEST_CASE("A worker's loop CPU is paid by its sending thread, beside its next fetch, only with workers") {
  LoaderProfile p = BaseProfile();
  p.workers = 1;
  p.compute_s_per_batch = 0.001;
  p.cpu_s_per_batch = 0.010;
  p.worker_loop_cpu_s_per_batch = {0.005, true, "sampler"};
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  // Spare cores: the sending thread keeps up with the 10 ms fetches.
  CHECK(r->samples_per_s == Approx(10 / 0.010).epsilon(0.01));
  // One core: the fetch and the sending share it, 15 ms of CPU a batch.
  CHECK(Predict(p, On(1))->samples_per_s == Approx(10 / 0.015).epsilon(0.01));
  // Sending slower than fetching: it sets the pace.
  p.worker_loop_cpu_s_per_batch.value = 0.015;
  CHECK(Predict(p, On(4))->samples_per_s == Approx(10 / 0.015).epsilon(0.01));
  // Fetched in the main process (no workers): no worker loop, no pickling.
  CHECK(Predict(p, On(4, 0))->samples_per_s == Approx(10 / 0.011).epsilon(0.01));
}

namespace {
// A 10 ms fetch and a 4 ms step measured with `workers`, and the batch in
// shared memory timed after the run: 6 ms of collate in a worker, 2 ms of the
// step reading and freeing it.
LoaderProfile WithSharedMemoryTimed(uint32_t workers) {
  LoaderProfile p = BaseProfile();
  p.workers = workers;
  p.compute_s_per_batch = 0.004;
  p.compute_cpu_s_per_batch = {0.004, true, "sampler"};
  p.cpu_s_per_batch = 0.010;
  p.shm_collate_cpu_s_per_batch = {0.006, true, "timed"};
  p.batch_touch_cpu_s_per_batch = {0.002, true, "timed"};
  return p;
}
}  // namespace

TEST_CASE("From a profile without workers a worker pays its shared-memory collate and the step its first read") {
  LoaderProfile p = WithSharedMemoryTimed(0);
  // One worker on spare cores: its 10 + 6 ms fetch sets the pace (the step,
  // 4 + 2 ms, hides behind it).
  auto one = Predict(p, On(4, 1));
  REQUIRE(one.ok());
  CHECK(one->samples_per_s == Approx(10 / 0.016).epsilon(0.01));
  CHECK(one->cpu_s == Approx(0.016));
  // Four workers: the step, 4 ms + 2 ms of reading the received pages.
  CHECK(Predict(p, On(8, 4))->samples_per_s == Approx(10 / 0.006).epsilon(0.01));
  // No workers: neither applies (the profile measured that run).
  CHECK(Predict(p, On(4, 0))->samples_per_s == Approx(10 / 0.014).epsilon(0.01));
  // A profile with workers measured both in its spans: nothing is added.
  p.workers = 1;
  CHECK(Predict(p, On(4, 1))->samples_per_s == Approx(10 / 0.010).epsilon(0.01));
}

TEST_CASE("From a profile with workers no workers take out the shared-memory collate and the step's first read") {
  // Measured in a worker: the 10 ms fetch holds the 6 ms of collating into
  // shared memory, the 4 ms step the 2 ms of reading and freeing the batch.
  LoaderProfile p = WithSharedMemoryTimed(1);
  // No workers: the main thread fetches for 4 ms and steps for 2.
  auto none = Predict(p, On(4, 0));
  REQUIRE(none.ok());
  CHECK(none->samples_per_s == Approx(10 / 0.006).epsilon(0.01));
  CHECK(none->cpu_s == Approx(0.004));
  CHECK(none->compute_s == Approx(0.002));
  // Two workers: as measured, the 10 ms fetches on 2 workers set the pace.
  CHECK(Predict(p, On(4, 2))->samples_per_s == Approx(10 / 0.005).epsilon(0.01));
  // Untimed: the fetch and step as measured in workers (the low figure whatif names).
  p.shm_collate_cpu_s_per_batch = {};
  p.batch_touch_cpu_s_per_batch = {};
  CHECK(Predict(p, On(4, 0))->samples_per_s == Approx(10 / 0.014).epsilon(0.01));
  // A timing above what was measured takes the fetch to nothing, never below.
  p.shm_collate_cpu_s_per_batch = {0.050, true, "timed"};
  p.batch_touch_cpu_s_per_batch = {0.002, true, "timed"};
  auto floor = Predict(p, On(4, 0));
  REQUIRE(floor.ok());
  CHECK(floor->cpu_s == 0);
  CHECK(floor->samples_per_s == Approx(10 / 0.002).epsilon(0.01));
}

TEST_CASE("A step whose main thread ran beside the process's other threads is its main thread's time, not their mean") {
  // Profiled with 2 workers on 2 cores: a 4 ms step of which the main thread
  // ran 3.6 ms on CPU and waited 0.4 ms off it, while the index queues'
  // feeder threads took 1.2 ms of CPU beside it (4.8 ms of the process in
  // all). Without workers the main thread fetches for 1 ms and steps for
  // 3.6 ms less the 1 ms of reading and freeing a received batch, plus its
  // 0.4 ms off CPU: 4 ms a batch on spare cores.
  LoaderProfile p = BaseProfile();
  p.workers = 2;
  p.profiled_cores = 2;
  p.compute_s_per_batch = 0.004;
  p.compute_cpu_s_per_batch = {0.0048, true, "sampler"};
  p.compute_main_thread_cpu_s_per_batch = 0.0036;
  p.compute_main_thread_delay_s_per_batch = 0;
  p.cpu_s_per_batch = 0.001;
  p.batch_touch_cpu_s_per_batch = {0.001, true, "timed"};
  auto none = Predict(p, On(4, 0));
  REQUIRE(none.ok());
  CHECK(none->step_s == Approx(0.004).epsilon(0.02));
  CHECK(none->samples_per_s == Approx(10 / 0.004).epsilon(0.02));
  // Not measured apart: the step's 4.8 ms ran on 1.2 threads, 1 ms of which
  // the read and free take out, 3.8 ms over 1.2 threads: the step 0.8 ms short.
  p.compute_main_thread_cpu_s_per_batch = -1;
  CHECK(Predict(p, On(4, 0))->step_s == Approx(0.001 + 0.0038 / 1.2).epsilon(0.02));
  // The main thread's delay is what contention added: alone, the step is
  // its CPU and what it spent off CPU otherwise.
  p.compute_main_thread_cpu_s_per_batch = 0.0036;
  p.compute_main_thread_delay_s_per_batch = 0.0004;
  CHECK(Predict(p, On(4, 0))->step_s == Approx(0.0036).epsilon(0.02));
}

TEST_CASE("The steady state draws from the steady batches' fetches, the whole run from each epoch's own") {
  // No workers, 3 epochs of 16 batches of 10, a 10 ms step. Each epoch's
  // first 5 fetches (the warm-up analyze leaves out of the steady state)
  // cost 300 ms; the rest 60 ms in epoch 0 (an evaluation pass before
  // training) and 100 ms in epochs 1 and 2.
  LoaderProfile p = BaseProfile();
  p.workers = 0;
  p.compute_s_per_batch = 0.010;
  p.epochs = 3;
  p.batches_per_epoch = 16;
  for (int epoch = 0; epoch < 3; ++epoch)
    for (int i = 0; i < 16; ++i) {
      const double cpu = i < 5 ? 0.300 : epoch == 0 ? 0.060 : 0.100;
      p.batch_costs.push_back({static_cast<float>(cpu), 0.0f});
      p.batch_cost_steady.push_back(i >= 5);
    }
  p.cpu_s_per_batch = 0;
  for (const auto& c : p.batch_costs) p.cpu_s_per_batch += c.cpu_s / 48.0;
  const auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  // Steady: (11 x 60 + 22 x 100) / 33 ms of fetch and the step.
  CHECK(r->step_s == Approx((11 * 0.060 + 22 * 0.100) / 33 + 0.010).epsilon(0.01));
  // Whole run: every fetch once and 48 steps (5 x 300 + 11 x 60, then twice 5 x 300 + 11 x 100 ms).
  const double whole_s = 3 * 5 * 0.300 + 11 * 0.060 + 2 * 11 * 0.100 + 48 * 0.010;
  CHECK(r->whole_run_samples_per_s == Approx(480 / whole_s).epsilon(0.01));
  // The same run with epochs of 4000 batches: the whole run's 12000 costs are
  // drawn evenly, 4000 of them, not the first 4000 (epoch 0's).
  LoaderProfile large = p;
  large.batches_per_epoch = 4000;
  large.batch_costs.clear();
  large.batch_cost_steady.clear();
  for (int epoch = 0; epoch < 3; ++epoch)
    for (int i = 0; i < 4000; ++i) {
      large.batch_costs.push_back({i < 5 ? 0.300f : epoch == 0 ? 0.060f : 0.100f, 0.0f});
      large.batch_cost_steady.push_back(i >= 5);
    }
  const auto big = Predict(large, On(4));
  REQUIRE(big.ok());
  const double big_whole_s = 3 * 5 * 0.300 + 3995 * 0.060 + 2 * 3995 * 0.100 + 12000 * 0.010;
  CHECK(big->whole_run_samples_per_s == Approx(120000 / big_whole_s).epsilon(0.01));
  // Without the marks every fetch counts for the steady state too (the
  // simulation's middle half is not a whole number of cycles of 48: 2%).
  p.batch_cost_steady.clear();
  CHECK(Predict(p, On(4))->step_s == Approx(p.cpu_s_per_batch + 0.010).epsilon(0.02));
}

TEST_CASE("With no workers the main process fetches serially and all fetch and prep time is stall") {
  LoaderProfile p = BaseProfile();
  p.workers = 0;
  p.cpu_s_per_batch = 0.03;
  p.io_s_per_batch = 0.07;
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->step_s == Approx(0.2));
  CHECK(r->samples_per_s == Approx(50));
  CHECK(r->stall_fraction == Approx(0.5));
  CHECK(r->prep_stall_fraction == Approx(0.15));
  CHECK(r->fetch_stall_fraction == Approx(0.35));
  CHECK(r->prep_step_s == Approx(0.13));
  // The same costs pipelined over 2 workers hide behind compute.
  CHECK(Predict(p, On(4, 2))->bottleneck == Bottleneck::kCompute);
  // The iterator's own code in next() beside the fetch is serial too.
  p.next_overhead_s_per_batch.value = 0.01;
  CHECK(Predict(p, On(4))->step_s == Approx(0.21));
  CHECK(Predict(p, On(4))->analytic_samples_per_s == Approx(10 / 0.21));
}

TEST_CASE("A faster accelerator shrinks compute and exposes the input pipeline") {
  LoaderProfile p = BaseProfile();
  p.cpu_s_per_batch = 0.15;  // 2 workers: 133 samples/s, compute: 100 samples/s
  Scenario s = On(4);
  s.accel_speedup = 2;  // compute 200 samples/s
  auto r = Predict(p, s);
  REQUIRE(r.ok());
  CHECK(r->compute_s == Approx(0.05));
  CHECK(r->samples_per_s == Approx(2 * 10 / 0.15));
  CHECK(r->bottleneck == Bottleneck::kPrep);
}

namespace {
// 1 worker on a cold cache: 0.12 s of CPU and 0.18 s off CPU a batch, a 1 MB
// dataset of 1000 items, a 0.1 s step.
LoaderProfile ColdWorkerProfile() {
  LoaderProfile p = BaseProfile();
  p.workers = 1;
  p.cpu_s_per_batch = 0.12;
  p.io_s_per_batch = 0.18;
  p.dataset_bytes = 1000000;
  p.dataset_items = 1000;
  p.cold_hit_ratio = 0;
  return p;
}
}  // namespace

TEST_CASE("A hit ratio is known where the profile read bytes or the scenario sets a cache, not for an in-memory dataset as run") {
  LoaderProfile p = ColdWorkerProfile();  // no bytes per sample measured
  auto as_run = Predict(p, On(4, 1));
  REQUIRE(as_run.ok());
  CHECK_FALSE(as_run->hit_ratio_known);
  Scenario cached = On(4, 1);
  cached.cache_bytes = 1000000;
  auto full = Predict(p, cached);
  REQUIRE(full.ok());
  CHECK(full->hit_ratio_known);
  p.bytes_per_sample = {1000, true, "fetches' reads"};
  auto read = Predict(p, On(4, 1));
  REQUIRE(read.ok());
  CHECK(read->hit_ratio_known);
}

TEST_CASE("The split into prep and fetch stall sums to the stall and fetch vanishes with a full cache") {
  LoaderProfile p = ColdWorkerProfile();
  auto r = Predict(p, On(4, 1));
  REQUIRE(r.ok());
  CHECK(r->step_s == Approx(0.3));
  CHECK(r->prep_stall_fraction == Approx((0.12 - 0.1) / 0.3));  // T_prep: the worker's 0.12 s CPU a batch
  CHECK(r->fetch_stall_fraction == Approx((0.3 - 0.12) / 0.3));
  CHECK(r->prep_step_s == Approx(0.12));
  Scenario cached = On(4, 1);
  cached.cache_bytes = 1000000;
  cached.cache_policy = CachePolicy::kStatic;
  auto full = Predict(p, cached);
  REQUIRE(full.ok());
  CHECK(full->hit_ratio == Approx(1));
  CHECK(full->io_s == Approx(0));
  CHECK(full->fetch_stall_fraction == Approx(0).margin(1e-12));
  CHECK(full->step_s == Approx(r->prep_step_s));  // the cached prediction is the T_prep of the uncached one
  // "Everything cached" needs no dataset size.
  LoaderProfile unsized = p;
  unsized.dataset_bytes = 0;
  Scenario all = On(4, 1);
  all.cache_bytes = kCacheAll;
  auto everything = Predict(unsized, all);
  REQUIRE(everything.ok());
  CHECK(everything->io_s == Approx(0));
  CHECK(everything->step_s == Approx(r->prep_step_s));
  // Half cached (static) halves the io.
  cached.cache_bytes = 500000;
  CHECK(Predict(p, cached)->io_s == Approx(0.09));
}

TEST_CASE("A cache removes the storage part of the io and keeps the blocking every fetch does") {
  // A third of the 0.18 s off CPU is on the device, the rest a sleep every fetch makes.
  LoaderProfile p = ColdWorkerProfile();
  p.io_storage_share = 1.0 / 3;
  auto r = Predict(p, On(4, 1));
  REQUIRE(r.ok());
  CHECK(r->step_s == Approx(0.3));
  CHECK(r->prep_step_s == Approx(0.24));  // T_prep keeps the sleep
  CHECK(r->fetch_stall_fraction == Approx(0.06 / 0.3));
  Scenario all = On(4, 1);
  all.cache_bytes = kCacheAll;
  auto cached = Predict(p, all);
  REQUIRE(cached.ok());
  CHECK(cached->io_s == Approx(0.12));
  CHECK(cached->step_s == Approx(0.24));
  CHECK(cached->bottleneck == Bottleneck::kBlocking);  // what is left off CPU is the sleep
  p.io_storage_share = 0.9;
  p.bytes_per_sample = {1000, true, "dataset_bytes / dataset_len"};
  CHECK(Predict(p, On(4, 1))->bottleneck == Bottleneck::kFetch);
  p.io_storage_share = 1.0 / 3;
  Scenario half = On(4, 1);
  half.cache_bytes = 500000;
  half.cache_policy = CachePolicy::kStatic;
  CHECK(Predict(p, half)->io_s == Approx(0.15));
  // No device reads in the profile (a sleep only): caching changes nothing.
  p.io_storage_share = 0;
  CHECK(Predict(p, all)->io_s == Approx(0.18));
  CHECK(Predict(p, On(4, 1))->fetch_stall_fraction == Approx(0).margin(1e-12));
}

TEST_CASE("Run-queue delay the job's own threads do not explain is fitted as a background load") {
  LoaderProfile p = BaseProfile();
  p.workers = 1;
  p.cpu_s_per_batch = 0.04;
  p.delay_s_per_batch = 0.02;  // 1 worker on 2 cores explains none of it: other processes
  p.profiled_cores = 2;
  // With L outside threads the worker gets 2 / (1 + L) of a core: delay = 0.04 x ((1 + L) / 2 - 1) = 0.02 at L = 2.
  CHECK(BackgroundThreads(p) == Approx(2).epsilon(1e-3));
  auto as_profiled = Predict(p, On(2));
  REQUIRE(as_profiled.ok());
  CHECK(as_profiled->background_threads == Approx(2).epsilon(1e-3));
  CHECK(as_profiled->delay_s == Approx(0.02).epsilon(1e-3));
  Scenario quiet = On(2);
  quiet.background_threads = 0;  // the same machine to itself
  auto alone = Predict(p, quiet);
  REQUIRE(alone.ok());
  CHECK(alone->delay_s == Approx(0).margin(1e-9));
  p.delay_s_per_batch = 0;
  CHECK(BackgroundThreads(p) == 0);
  // Wake-up latency (under 1% of the batch's CPU) is no load, though any delay
  // beside one busy thread on 2 cores would fit "one more".
  p.delay_s_per_batch = 0.0003;
  CHECK(BackgroundThreads(p) == 0);
  p.delay_s_per_batch = 0.0006;
  CHECK(BackgroundThreads(p) > 1);
}

TEST_CASE("A load fitted once where the profile is built is the one every prediction from it runs with") {
  // As above: 2 threads fit the 20 ms delay a batch of 1 worker on 2 cores.
  LoaderProfile p = BaseProfile();
  p.workers = 1;
  p.cpu_s_per_batch = 0.04;
  p.delay_s_per_batch = 0.02;
  p.profiled_cores = 2;
  CHECK(FitDelayBackground(p) == Approx(2).epsilon(1e-3));
  // Set (as analysis sets it), the fit is not run again: a different figure shows it is taken as given.
  p.delay_background_threads = 0.5;
  CHECK(BackgroundThreads(p) == Approx(0.5));
  CHECK(Predict(p, On(2))->background_threads == Approx(0.5));
  CHECK(FitDelayBackground(p) == Approx(2).epsilon(1e-3));  // the fit itself ignores it
  p.delay_background_threads = -1;  // not fitted: each use fits
  CHECK(Predict(p, On(2))->background_threads == Approx(2).epsilon(1e-3));
}

TEST_CASE("A step on the CPU that waited for no core bounds the load fitted to the workers' delay") {
  // 8 workers beside a 50 ms step on one core, 2 cores: the workers waited
  // 30 ms a batch for a core (the kernel ran them beside each other), the
  // step none (it favoured the step). A load that fits the workers' wait
  // would slow the step, which did not slow.
  LoaderProfile p = BaseProfile();
  p.workers = 8;
  p.profiled_cores = 2;
  p.compute_s_per_batch = 0.05;
  p.cpu_s_per_batch = 0.03;
  p.delay_s_per_batch = 0.03;
  LoaderProfile unknown_step = p;  // the step's CPU not measured: the workers' delay alone
  REQUIRE(BackgroundThreads(unknown_step) > 0.3);
  p.compute_cpu_s_per_batch = {0.05, true, "test"};
  p.compute_delay_s_per_batch = 0;
  CHECK(BackgroundThreads(p) == Approx(0).margin(1e-6));
  auto profiled = Predict(p, On(2));
  REQUIRE(profiled.ok());
  CHECK(profiled->step_s == Approx(0.05).epsilon(0.05));  // the step as measured, not stretched by a load
  // A step that waited for a core as well: a load.
  p.compute_delay_s_per_batch = 0.02;
  CHECK(BackgroundThreads(p) > 0.3);
  // A step off the CPU (an accelerator's wait) tells nothing of the load.
  p.compute_cpu_s_per_batch = {0.005, true, "test"};
  p.compute_delay_s_per_batch = 0;
  CHECK(BackgroundThreads(p) > 0.3);
}

TEST_CASE("Run-queue delay on a machine nothing else used is the job's own, and the default scenario keeps it") {
  LoaderProfile p = BusyWorkersProfile(0.006);  // 0.3 threads' delay
  REQUIRE(BackgroundThreads(p) == Approx(0.3).epsilon(0.02));
  CHECK(OwnDelayThreads(p) == Approx(0.3).epsilon(0.02));
  CHECK(ScenarioBackground(p, Scenario::kOthersAway) == Approx(0.3).epsilon(0.02));
  CHECK(ScenarioBackground(p, 0) == 0);
  // The profiled configuration, by default, predicts as the profile did.
  Scenario as_profiled = On(2), others_away = On(2);
  others_away.background_threads = Scenario::kOthersAway;
  auto run = Predict(p, as_profiled), kept = Predict(p, others_away);
  REQUIRE(run.ok());
  REQUIRE(kept.ok());
  CHECK(kept->samples_per_s == Approx(run->samples_per_s));
  CHECK(run->samples_per_s == Approx(10 / (0.04 * 1.15 / 2)).epsilon(0.03));  // 2 workers at 46 ms a batch
  // Other processes busy by /proc/stat, or /proc/stat not sampled: taken away.
  p.outside_busy_cores = 0.6;
  CHECK(OwnDelayThreads(p) == 0);
  p.outside_busy_cores = 0.1;
  p.outside_busy_measured = false;
  CHECK(OwnDelayThreads(p) == 0);
  // A delay worth more than a thread on a quiet machine (partly another
  // tenant's): one thread kept, and no jump at the threshold.
  p.outside_busy_measured = true;
  p.delay_s_per_batch = 0.03;  // L = 1.5
  CHECK(BackgroundThreads(p) == Approx(1.5).epsilon(0.02));
  CHECK(OwnDelayThreads(p) == Approx(1.0));
  p.delay_s_per_batch = 0.0195;  // L = 0.975
  const double below = OwnDelayThreads(p);
  p.delay_s_per_batch = 0.0205;  // L = 1.025
  CHECK(OwnDelayThreads(p) == Approx(below).epsilon(0.05));
}

TEST_CASE("The workers of loaders iterated with this one are the job's own load, kept whatever is taken away") {
  // The delay of the test above at L = 1.5 (more than a thread: one kept,
  // the rest taken as another tenant's), of which a zipped loader's worker
  // measured 0.9 busy threads: the 0.6 beyond it is the job's own delay, and
  // the 0.9 stays.
  LoaderProfile p = BusyWorkersProfile(0.03);
  REQUIRE(OwnDelayThreads(p) == Approx(1.0));
  p.sibling_busy_threads = 0.9;
  CHECK(BackgroundThreads(p) == Approx(1.5).epsilon(0.02));
  CHECK(OwnDelayThreads(p) == Approx(1.5).epsilon(0.02));
  // Other processes busy, or /proc/stat not sampled: their share goes, the siblings stay.
  p.outside_busy_cores = 0.6;
  CHECK(OwnDelayThreads(p) == Approx(0.9));
  p.outside_busy_cores = 0.1;
  p.outside_busy_measured = false;
  CHECK(OwnDelayThreads(p) == Approx(0.9));
  // A sibling busier than the delay shows: at least its own load.
  p.outside_busy_measured = true;
  p.delay_s_per_batch = 0;
  p.sibling_busy_threads = 0.5;
  CHECK(BackgroundThreads(p) == Approx(0.5));
  CHECK(OwnDelayThreads(p) == Approx(0.5));
}

TEST_CASE("A busy process on a core the job left idle is an outside load though it delays none of the job's threads") {
  // Profiled without workers on 2 cores beside one busy loop (/proc/stat: 1
  // core busy beyond the job's): the fetching thread had a core to itself.
  LoaderProfile p = BaseProfile();
  p.workers = 0;
  p.profiled_cores = 2;
  p.cpu_s_per_batch = 0.04;   // 4 ms a sample
  p.compute_s_per_batch = 0.01;
  p.compute_cpu_s_per_batch = {0.01, true, "test"};
  p.outside_busy_cores = 1.0;
  CHECK(BackgroundThreads(p) == Approx(1.0));
  // 2 workers, as profiled: they and the loop share the 2 cores; on the
  // machine to itself, a core each.
  Scenario busy = On(2, 2);
  Scenario quiet = On(2, 2);
  quiet.background_threads = 0;
  auto loaded = Predict(p, busy), alone = Predict(p, quiet);
  REQUIRE(loaded.ok());
  REQUIRE(alone.ok());
  CHECK(loaded->background_threads == Approx(1.0));
  CHECK(loaded->samples_per_s < 0.85 * alone->samples_per_s);
  // Under half a core is the launcher and housekeeping, not a load.
  p.outside_busy_cores = 0.3;
  CHECK(BackgroundThreads(p) == 0);
}

TEST_CASE("A busy process on the cores beyond the job's CPU quota or affinity takes nothing from the job") {
  // 2 workers in a 1-core quota on 2 cores, beside a busy loop (/proc/stat:
  // 1 core busy beyond the job's, the machine's whole): the loop ran on the
  // core the quota left over, and the job had its 1 core.
  LoaderProfile p = BaseProfile();
  p.workers = 2;
  p.profiled_cores = 1;
  p.unusable_cores = 1;
  p.cpu_s_per_batch = 0.04;
  p.compute_s_per_batch = 0.01;
  p.compute_cpu_s_per_batch = {0.01, true, "test"};
  p.outside_busy_cores = 1.0;
  p.outside_busy_measured = true;
  CHECK(p.OutsideCompetingCores() == 0);
  CHECK(BackgroundThreads(p) == 0);
  auto as_profiled = Predict(p, On(1, 2));
  REQUIRE(as_profiled.ok());
  CHECK(as_profiled->background_threads == 0);
  CHECK(as_profiled->samples_per_s == Approx(10 / 0.05).epsilon(0.05));  // the core's 50 ms of CPU a batch
  // Busier than the spare core: the rest competes.
  p.outside_busy_cores = 1.8;
  CHECK(BackgroundThreads(p) == Approx(0.8));
  CHECK(OwnDelayThreads(p) == 0);
}

TEST_CASE("Under a CPU quota the run-queue delay is the quota's throttling and fits no outside load") {
  // 0.3 threads' delay on 2 cores, measured under a 2-core quota: the throttled time.
  LoaderProfile p = BusyWorkersProfile(0.006);
  REQUIRE(FitDelayBackground(p) == Approx(0.3).epsilon(0.02));
  p.profiled_in_cpu_quota = true;
  CHECK(FitDelayBackground(p) == 0);
  CHECK(BackgroundThreads(p) == 0);
  CHECK(OwnDelayThreads(p) == 0);
  auto as_profiled = Predict(p, On(2));
  REQUIRE(as_profiled.ok());
  CHECK(as_profiled->samples_per_s == Approx(10 / (0.04 / 2)).epsilon(0.03));  // 2 workers at 40 ms a batch
  // Other processes on the quota's cores are still /proc/stat's.
  p.outside_busy_cores = 1.0;
  CHECK(BackgroundThreads(p) == Approx(1.0));
}

TEST_CASE("Delay from workers filling an epoch's prefetch window at once is the job's own, not an outside load") {
  // 8 persistent workers, prefetch 2, 16 batches an epoch: every fetch is in
  // the burst at the epoch's start. 40 ms of CPU a fetch on 2 cores: the 8
  // first fetches share them 8 ways (160 ms, 120 ms of delay each), the 8
  // second ones 9 ways beside the 400 ms step (180 ms, 140 ms of delay):
  // 130 ms a batch, all of it the job's own.
  LoaderProfile p = BaseProfile();
  p.workers = 8;
  p.prefetch_factor = 2;
  p.profiled_cores = 2;
  p.cpu_s_per_batch = 0.04;
  p.compute_s_per_batch = 0.4;
  p.compute_cpu_s_per_batch = {0.4, true, "test"};
  p.delay_s_per_batch = 0.13;
  p.epochs = 2;
  p.batches_per_epoch = 16;
  CHECK(BackgroundThreads(p) < 0.25);
  // The same delay on every batch of long epochs, where one worker at a time
  // fetches beside the step: other processes, which delay the step as well
  // (a step that waited for no core bounds the load: the test above).
  p.batches_per_epoch = 1000;
  p.compute_delay_s_per_batch = 0.2;
  CHECK(BackgroundThreads(p) > 1);
  p.compute_delay_s_per_batch = 0;
  CHECK(BackgroundThreads(p) < 0.25);
}

TEST_CASE("Workers beyond the cores share them: the run-queue delay is predicted, not carried over") {
  LoaderProfile p = BaseProfile();
  p.workers = 4;
  p.cpu_s_per_batch = 0.1;
  p.compute_s_per_batch = 0.001;
  p.profiled_cores = 4;
  auto over = Predict(p, On(2, 4));
  REQUIRE(over.ok());
  // 4 busy workers on 2 cores: each gets half a core (the mean over the
  // simulation, whose workers start spread over a batch's production).
  CHECK(over->delay_s == Approx(0.1).epsilon(0.01));
  CHECK(over->samples_per_s == Approx(2 * 10 / 0.1).epsilon(1e-3));  // 2 cores / 0.1 CPU-s a batch
  CHECK(over->bottleneck == Bottleneck::kPrep);
  // 4 busy threads on 2 cores: 2 of them wait for a core but while the last
  // batches drain, which whatif reports as scheduling it does not model.
  CHECK(over->waiting_threads == Approx(2).epsilon(0.05));
  CHECK(over->waiting_threads < 2);
  auto fits = Predict(p, On(2, 2));
  REQUIRE(fits.ok());
  CHECK(fits->waiting_threads == Approx(0).margin(1e-9));
}

TEST_CASE("A step that uses the CPU slows when workers take its cores, and slows them") {
  // Profiled without workers: 30 ms of fetch CPU and a 20 ms CPU-bound step per batch.
  LoaderProfile p = BaseProfile();
  p.workers = 0;
  p.cpu_s_per_batch = 0.030;
  p.compute_s_per_batch = 0.020;
  p.compute_cpu_s_per_batch = {0.020, true, "test"};
  p.profiled_cores = 1;
  // One worker on the same single core: the core does 50 ms of CPU per batch either way.
  auto one_core = Predict(p, On(1, 1));
  REQUIRE(one_core.ok());
  CHECK(one_core->step_s == Approx(0.050).epsilon(1e-3));
  CHECK(one_core->compute_step_s > 0.020 * 1.2);  // the step waited for the core
  // The analytic check charges the core both: 10 samples per 50 ms.
  CHECK(one_core->analytic_samples_per_s == Approx(200).epsilon(1e-3));
  // On two cores they overlap: the worker's 30 ms bind.
  CHECK(Predict(p, On(2, 1))->step_s == Approx(0.030).epsilon(1e-3));
  // The first model held the step fixed: with it off CPU the single core looks free.
  p.compute_cpu_s_per_batch = {0, false, "not measured"};
  CHECK(Predict(p, On(1, 1))->step_s == Approx(0.030).epsilon(1e-3));
}

TEST_CASE("A parallel step beside workers that oversubscribe the cores is held up, and fewer intra-op threads free them") {
  // Profiled without workers on 2 cores: 30 ms of fetch CPU, and a step of 5 ms
  // on torch's 2 intra-op threads whose CPU, 13 ms, includes 3 ms of spinning
  // at barriers: its work is 5 ms x 2 threads = 10 ms.
  LoaderProfile p = ParallelStepProfile(0.013);
  REQUIRE(ParallelStep(p));
  // 2 workers: 4 threads on 2 cores. The step advances as one thread at half a
  // core, 20 ms, while the workers do 20 ms of their 30; the rest at a core
  // each, 5 ms: 25 ms a batch of 10, 400 samples/s (tests/test_model_simulate.cpp).
  auto held = Predict(p, On(2, 2));
  REQUIRE(held.ok());
  CHECK(held->samples_per_s == Approx(400).epsilon(0.01));
  CHECK(held->step_threads == 2);
  CHECK(held->step_oversubscribed);
  // torch.set_num_threads(1): 10 ms of CPU on one thread, 40 ms a batch over 2 busy cores.
  Scenario one = On(2, 2);
  one.step_threads = 1;
  auto fewer = Predict(p, one);
  REQUIRE(fewer.ok());
  CHECK(fewer->samples_per_s == Approx(500).epsilon(0.01));
  CHECK_FALSE(fewer->step_oversubscribed);
  // On 4 cores the 2 workers leave the step its 2: a fetch per 30 ms in each
  // worker, a batch per 15 ms, the step (5 ms) keeps up.
  auto roomy = Predict(p, On(4, 2));
  REQUIRE(roomy.ok());
  CHECK_FALSE(roomy->step_oversubscribed);
  CHECK(roomy->samples_per_s == Approx(10 / 0.015).epsilon(0.01));
  // On one core its 2 threads outnumber the CPUs: libgomp throttles their
  // spinning and they share the core as any threads do. 30 ms of fetch and
  // 10 ms of step CPU a batch on one core: 250 samples/s (held up: 200).
  auto one_core = Predict(p, On(1, 0));
  REQUIRE(one_core.ok());
  CHECK_FALSE(one_core->step_oversubscribed);
  CHECK(one_core->samples_per_s == Approx(250).epsilon(0.01));
  // Without the intra-op threads recorded the step is shared fluidly, as before.
  p.intra_op_threads = 0;
  CHECK_FALSE(ParallelStep(p));
  CHECK(Predict(p, On(2, 2))->step_threads == 0);
}

TEST_CASE("Predicting the step on other intra-op threads is refused where the profile cannot tell its work") {
  LoaderProfile p = ParallelStepProfile(0.010);
  p.intra_op_threads = 0;
  Scenario s = On(2, 2);
  s.step_threads = 1;
  auto unrecorded = Predict(p, s);  // an older trace: no intra-op threads
  REQUIRE_FALSE(unrecorded.ok());
  CHECK(unrecorded.error().message.find("intra-op threads") != std::string::npos);
  p.intra_op_threads = 2;
  s.step_threads = 3;  // more than profiled: its scaling is unknown
  auto more = Predict(p, s);
  REQUIRE_FALSE(more.ok());
  CHECK(more.error().message.find("--step-threads 3") != std::string::npos);
  // Profiled with 2 workers beside its 2 threads on 2 cores: the CPU carries their waiting.
  p.workers = 2;
  p.compute_delay_s_per_batch = 0.010;
  REQUIRE(ParallelStepOversubscribed(p));
  s.step_threads = 1;
  auto oversubscribed = Predict(p, s);
  REQUIRE_FALSE(oversubscribed.ok());
  CHECK(oversubscribed.error().message.find("num_workers=0") != std::string::npos);
  CHECK(Predict(p, On(2, 2)).ok());  // as profiled, its measured costs stand
}

namespace {
// 2 workers, compute bound in steady state (100 samples/s), 4 epochs of 10
// batches, each epoch's workers starting in 1 s.
LoaderProfile WholeRunProfile() {
  LoaderProfile p = BaseProfile();
  p.workers = 2;
  p.cpu_s_per_batch = 0.01;
  p.compute_s_per_batch = 0.1;
  p.epochs = 4;
  p.batches_per_epoch = 10;
  p.startup_first_s = 1.0;
  p.startup_later_s = 1.0;
  return p;
}
}  // namespace

TEST_CASE("Whole-run throughput pays each epoch's worker start-up unless the workers persist") {
  LoaderProfile p = WholeRunProfile();
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->samples_per_s == Approx(100).epsilon(1e-3));
  // Per epoch: 1 s start-up, the first batch (10 ms) and 10 steps of 0.1 s.
  CHECK(r->whole_run_samples_per_s == Approx(400 / (4 * (1.0 + 0.01 + 1.0))).epsilon(1e-3));
  CHECK(r->startup_s_per_epoch == Approx(1.0));
  Scenario persistent = On(4);
  persistent.persistent_workers = 1;  // whatif --persistent-workers true: started once
  CHECK(Predict(p, persistent)->whole_run_samples_per_s == Approx(400 / (1.0 + 4 * 1.01)).epsilon(1e-3));
  p.persistent_workers = true;  // profiled that way
  CHECK(Predict(p, On(4))->whole_run_samples_per_s == Approx(400 / (1.0 + 4 * 1.01)).epsilon(1e-3));
  // Each worker's start is work done in parallel: 8 workers on 4 cores start in two waves.
  p.persistent_workers = false;
  CHECK(Predict(p, On(4, 8))->startup_s_per_epoch == Approx(2.0));
  CHECK(Predict(p, On(4, 1))->startup_s_per_epoch == Approx(1.0));
  // Joining non-persistent workers at each epoch's end: 0.1 s a worker, 2 of them, 4 epochs.
  p.shutdown_s_per_worker = 0.1;
  auto joined = Predict(p, On(4));
  REQUIRE(joined.ok());
  CHECK(joined->startup_s_per_epoch == Approx(1.0 + 0.2));
  CHECK(joined->whole_run_samples_per_s == Approx(400 / (4 * (1.0 + 0.2 + 0.01 + 1.0))).epsilon(1e-3));
  CHECK(Predict(p, On(4, 4))->startup_s_per_epoch == Approx(1.0 + 0.4));  // twice the workers to join
  CHECK(Predict(p, persistent)->whole_run_samples_per_s == Approx(400 / (1.0 + 4 * 1.01)).epsilon(1e-3));  // none joined
}

TEST_CASE("Every scenario pays the sampler's first draw of each epoch, whatever its workers, cores or persistence") {
  // The whole-run case above with a sampler whose per-epoch work takes 0.5 s
  // on the main thread: each epoch gains 0.5 s in every scenario, persistent
  // workers and no workers too, and more workers or cores do not shrink it.
  LoaderProfile p = WholeRunProfile();
  p.sampler_s_per_epoch = 0.5;
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->startup_s_per_epoch == Approx(1.0 + 0.5));
  CHECK(r->whole_run_samples_per_s == Approx(400 / (4 * (1.0 + 0.5 + 0.01 + 1.0))).epsilon(1e-3));
  Scenario persistent = On(4);
  persistent.persistent_workers = 1;
  CHECK(Predict(p, persistent)->whole_run_samples_per_s == Approx(400 / (1.0 + 4 * (0.5 + 1.01))).epsilon(1e-3));
  CHECK(Predict(p, On(4, 8))->startup_s_per_epoch == Approx(2.0 + 0.5));  // the workers' start doubles, the sampler's does not
  CHECK(Predict(p, On(8, 2))->startup_s_per_epoch == Approx(1.0 + 0.5));
  // Without workers no worker starts, and the sampler's draw remains.
  CHECK(Predict(p, On(4, 0))->startup_s_per_epoch == Approx(0.5));
}

TEST_CASE("Start-up spent in __iter__ starting workers one after another grows with the workers whatever the cores") {
  // 2 spawned workers on 2 cores, 1 s of start-up an epoch: 0.9 s of it in
  // __iter__ (each worker 0.45 s, the parent waiting for it to read its
  // pickled dataset), 0.1 s after it in parallel.
  LoaderProfile p = BaseProfile();
  p.workers = 2;
  p.cpu_s_per_batch = 0.01;
  p.compute_s_per_batch = 0.1;
  p.epochs = 4;
  p.batches_per_epoch = 10;
  p.startup_first_s = p.startup_later_s = 1.0;
  p.startup_serial_share = 0.9;
  p.profiled_cores = 2;
  // 4 workers on 8 cores: 4 x 0.45 s one after another, the parallel 0.1 s in one wave.
  CHECK(Predict(p, On(8, 4))->startup_s_per_epoch == Approx(4 * 0.45 + 0.1));
  // 1 worker: half the serial part.
  CHECK(Predict(p, On(2, 1))->startup_s_per_epoch == Approx(0.45 + 0.1));
  // 8 workers on 2 cores: the parallel part in 4 waves.
  CHECK(Predict(p, On(2, 8))->startup_s_per_epoch == Approx(8 * 0.45 + 4 * 0.1));
}

TEST_CASE("A profile without workers predicts their start-up from the worker timed after the run, else leaves it out") {
  LoaderProfile p = BaseProfile();
  p.workers = 0;
  p.cpu_s_per_batch = 0.01;
  p.compute_s_per_batch = 0.1;  // compute bound with workers: 100 samples/s
  p.epochs = 4;
  p.batches_per_epoch = 10;
  auto untimed = Predict(p, On(4, 2));
  REQUIRE(untimed.ok());
  CHECK_FALSE(untimed->startup_measured);
  CHECK(untimed->startup_s_per_epoch == 0);
  p.startup_timed = true;
  p.startup_first_s = p.startup_later_s = 0.5;
  auto timed = Predict(p, On(4, 2));
  REQUIRE(timed.ok());
  CHECK(timed->startup_measured);
  CHECK(timed->startup_s_per_epoch == Approx(0.5));  // non-persistent: every epoch
  // Per epoch: 0.5 s start-up, the first batch (10 ms) and 10 steps of 0.1 s.
  CHECK(timed->whole_run_samples_per_s == Approx(400 / (4 * (0.5 + 0.01 + 1.0))).epsilon(1e-3));
  Scenario persistent = On(4, 2);
  persistent.persistent_workers = 1;
  CHECK(Predict(p, persistent)->startup_s_per_epoch == Approx(0.5 / 4));
  // 8 workers on 4 cores start in two waves.
  CHECK(Predict(p, On(4, 8))->startup_s_per_epoch == Approx(1.0));
}

TEST_CASE("A timed start-up's fork of the job's process runs worker after worker, and its workers' exits in waves") {
  LoaderProfile p = BaseProfile();
  p.workers = 0;
  p.cpu_s_per_batch = 0.01;
  p.compute_s_per_batch = 0.1;
  p.epochs = 4;
  p.batches_per_epoch = 10;
  p.startup_timed = true;
  p.startup_first_s = p.startup_later_s = 0.5;
  p.startup_serial_share = 0.8;  // 0.4 s of it the fork of the job's process
  p.shutdown_s_per_worker = 0.01;
  // 2 workers on 4 cores: the forks twice, the rest once (one wave); the
  // epoch's figure holds the workers' shutdown too.
  auto two = Predict(p, On(4, 2));
  REQUIRE(two.ok());
  const double startup = 0.5 * (0.8 * 2 + 0.2);
  CHECK(two->startup_s_per_epoch == Approx(startup + 2 * 0.01));
  CHECK(two->whole_run_samples_per_s == Approx(400 / (4 * (startup + 0.01 + 1.0) + 4 * 2 * 0.01)).epsilon(1e-3));
  // The exits' growth with the job's page tables: once per wave of workers over the cores.
  p.shutdown_exit_extra_s = 0.05;
  const double with_exits = 400 / (4 * (startup + 0.01 + 1.0) + 4 * (2 * 0.01 + 0.05));
  CHECK(Predict(p, On(4, 2))->whole_run_samples_per_s == Approx(with_exits).epsilon(1e-3));
  CHECK(Predict(p, On(4, 2))->startup_s_per_epoch == Approx(startup + 2 * 0.01 + 0.05));
  // 8 workers on 4 cores: the forks 8 times, the rest and the exits in two waves.
  const double eight = 0.5 * (0.8 * 8 + 0.2 * 2) + 8 * 0.01 + 2 * 0.05;
  CHECK(Predict(p, On(4, 8))->startup_s_per_epoch == Approx(eight));
}

TEST_CASE("Persistent workers do not outlive their DataLoader: a loader built anew each epoch restarts them all the same") {
  LoaderProfile p = BaseProfile();
  p.workers = 2;
  p.cpu_s_per_batch = 0.01;
  p.compute_s_per_batch = 0.1;
  p.epochs = 4;
  p.batches_per_epoch = 10;
  p.objects = 4;  // one DataLoader object per epoch
  p.startup_first_s = 1.0;
  p.startup_later_s = 1.0;
  Scenario persistent = On(4);
  persistent.persistent_workers = 1;
  const double each_epoch = 400 / (4 * (1.0 + 0.01 + 1.0));
  CHECK(Predict(p, persistent)->whole_run_samples_per_s == Approx(each_epoch).epsilon(1e-3));
  CHECK(Predict(p, persistent)->startup_s_per_epoch == Approx(1.0));
  // Two objects of two epochs each, profiled with persistent workers: one
  // restart measured (1 s over the 3 later epochs). Without persistence all
  // three later epochs pay it.
  p.objects = 2;
  p.persistent_workers = true;
  p.startup_later_s = 1.0 / 3;
  CHECK(Predict(p, On(4))->startup_s_per_epoch == Approx(2.0 / 4));
  Scenario transient = On(4);
  transient.persistent_workers = 0;
  CHECK(Predict(p, transient)->whole_run_samples_per_s == Approx(each_epoch).epsilon(1e-3));
}

TEST_CASE("One iterator kept for every epoch fills its pipeline once, where persistent workers refill it each epoch") {
  // A 50 ms batch from one worker, 10 steps of 0.1 s an epoch, 4 epochs, no start-up.
  LoaderProfile p = BaseProfile();
  p.workers = 1;
  p.cpu_s_per_batch = 0.05;
  p.compute_s_per_batch = 0.1;
  p.epochs = 4;
  p.batches_per_epoch = 10;
  p.persistent_workers = true;
  // Each epoch waits for its first batch, then runs its 10 steps.
  CHECK(Predict(p, On(4))->whole_run_samples_per_s == Approx(400 / (4 * (0.05 + 1.0))).epsilon(1e-3));
  // InfiniteDataLoader: only the first epoch waits.
  p.iterator_kept = true;
  CHECK(Predict(p, On(4))->whole_run_samples_per_s == Approx(400 / (0.05 + 4 * 1.0)).epsilon(1e-3));
}

TEST_CASE("Receiving batches in the main process is serial with compute and is named the handoff bottleneck") {
  LoaderProfile p = BaseProfile();
  p.compute_s_per_batch = 0.002;
  p.cpu_s_per_batch = 0.0005;
  p.handoff_s_per_batch = 0.003;  // more than the step itself: the main loop, not the workers, binds
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->r_main == Approx(10 / 0.005));
  CHECK(r->samples_per_s == Approx(2000));
  CHECK(r->bottleneck == Bottleneck::kHandoff);
  CHECK(r->handoff_stall_fraction == Approx(0.6));  // caching cannot remove it, nor faster workers
  CHECK(r->prep_stall_fraction == Approx(0).margin(1e-12));
  CHECK(r->fetch_stall_fraction == Approx(0).margin(1e-12));
  Scenario faster = On(4);
  faster.accel_speedup = 2;  // only the compute part shrinks
  CHECK(Predict(p, faster)->samples_per_s == Approx(10 / 0.004));
}

TEST_CASE("The main loop pays its own CPU in next() when it exceeds the waits seen for ready batches") {
  LoaderProfile p = BaseProfile();
  p.compute_s_per_batch = 0.002;
  p.cpu_s_per_batch = 0.0005;
  p.handoff_s_per_batch = 0.0001;  // batches were late: few waits for ready ones
  p.receive_s_per_batch = 0.003;   // but unpickling each took the main thread 3 ms
  CHECK(MainReceiveSeconds(p) == Approx(0.003));
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->handoff_s == Approx(0.003));
  CHECK(r->r_main == Approx(10 / 0.005));
  CHECK(r->bottleneck == Bottleneck::kHandoff);
  p.receive_s_per_batch = 0;  // not recorded: handoff alone
  CHECK(Predict(p, On(4))->handoff_s == Approx(0.0001));
}

TEST_CASE("The worker CPU storage misses cost shrinks with the misses a cache removes") {
  LoaderProfile p = BaseProfile();
  p.workers = 1;
  p.cpu_s_per_batch = 0.10;  // of which 0.06 s for 60 MB of misses
  p.io_s_per_batch = 0.20;
  p.dataset_bytes = 1000000000;
  p.dataset_items = 1000;
  p.bytes_per_sample = {1000000, true, "test"};
  p.cold_hit_ratio = 0.4;  // 60% missed
  p.storage_bytes_per_batch = 6e6;
  p.cpu_s_per_storage_byte = {0.01 / 1e6, true, "test"};
  CHECK(CpuSecondsAtMiss(p, 0.6) == Approx(0.10));
  CHECK(CpuSecondsAtMiss(p, 0.3) == Approx(0.07));
  CHECK(CpuSecondsAtMiss(p, 0) == Approx(0.04));
  CHECK(CpuSecondsAtMiss(p, 1) == Approx(0.14));  // a cold cache costs more than the profile
  Scenario all = On(4, 1);
  all.cache_bytes = kCacheAll;
  auto cached = Predict(p, all);
  REQUIRE(cached.ok());
  CHECK(cached->cpu_s == Approx(0.04));
  CHECK(cached->step_s == Approx(0.1));  // compute-bound now: the workers need 0.04 s per batch
  // analyze's T_prep is the fully cached prediction, so the miss CPU counts as fetch stall.
  Scenario as_profiled = On(4, 1);
  auto now = Predict(p, as_profiled);
  REQUIRE(now.ok());
  CHECK(now->cpu_s == Approx(0.10));
  CHECK(now->step_s == Approx(0.30));
  CHECK(now->prep_step_s == Approx(0.1));
  CHECK(now->fetch_stall_fraction == Approx(2.0 / 3));
  // Without a fitted cost the CPU stays as measured.
  p.cpu_s_per_storage_byte = {0, false, "not fitted"};
  CHECK(Predict(p, all)->cpu_s == Approx(0.10));
}

TEST_CASE("Predict refuses missing measurements and bad scenarios with a message") {
  LoaderProfile p = BaseProfile();
  CHECK(Predict(p, On(0)).error().kind == stallprof::ErrorKind::kUsage);
  Scenario neg = On(4);
  neg.accel_speedup = 0;
  CHECK(Predict(p, neg).error().kind == stallprof::ErrorKind::kUsage);
  LoaderProfile empty = p;
  empty.batches = 0;
  auto r = Predict(empty, On(4));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == stallprof::ErrorKind::kUnsupported);
  CHECK(r.error().message.find("train") != std::string::npos);
  Scenario cache = On(4);
  cache.cache_bytes = 1 << 30;  // the profile has no dataset size
  auto c = Predict(p, cache);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message.find("dataset size") != std::string::npos);
}

TEST_CASE("A serial loader that stalls a quarter of each step is named by its stall, as analyze names it") {
  LoaderProfile p = BaseProfile();
  p.workers = 0;
  p.compute_s_per_batch = 0.030;  // compute is still the largest single part...
  p.cpu_s_per_batch = 0.010;      // ...but 25% of the step is CPU prep
  p.io_s_per_batch = 0;
  p.delay_s_per_batch = 0;
  auto r = Predict(p, On(2));
  REQUIRE(r.ok());
  CHECK(r->stall_fraction == Approx(0.25));
  CHECK(r->bottleneck == Bottleneck::kPrep);
  p.cpu_s_per_batch = 0.001;  // 3% stall: not input-bound
  auto quiet = Predict(p, On(2));
  REQUIRE(quiet.ok());
  CHECK(quiet->bottleneck == Bottleneck::kCompute);
}

TEST_CASE("An uneven stream split is predicted as measured for the profiled workers and by whole parts for others") {
  // An IterableDataset of 3 shards of 15 batches over 2 workers: 30 and 15
  // batches an epoch; each batch 10 ms off CPU (a remote read), a 1 ms step.
  LoaderProfile p = BaseProfile();
  p.batch_size = 16;
  p.cpu_s_per_batch = 0;
  p.io_s_per_batch = 0.010;
  p.compute_s_per_batch = 0.001;
  p.profiled_cores = 2;
  p.epochs = 2;
  p.batches_per_epoch = 45;
  p.stream_worker_batches = {30, 15};
  CHECK(StreamQuota(p, 2) == std::vector<uint64_t>{30, 15});
  CHECK(StreamQuota(p, 4) == std::vector<uint64_t>{15, 15, 15, 0});
  CHECK(StreamQuota(p, 3).empty());  // 3 shards over 3 workers: even
  // An epoch: 300 ms on worker 0 and the last step (1 ms): 45 x 16 samples in
  // 301 ms, the whole run's rate. The steady state is analyze's window of each
  // epoch, past its first 5 batches and before its last 4 (2 workers x
  // prefetch 2): batch 4 is worker 0's third (30 ms), batch 40 its 26th (260
  // ms), each taken with a 1 ms step: 36 batches in 230 ms.
  auto two = Predict(p, On(2, 2));
  REQUIRE(two.ok());
  CHECK(two->samples_per_s == Approx(36 * 16 / 0.230).epsilon(0.02));
  CHECK(two->whole_run_samples_per_s == Approx(45 * 16 / 0.301).epsilon(0.02));
  // 4 workers, one without a shard: 151 ms an epoch; in its window (the last 8
  // left out) batch 4 arrives at 20 ms and batch 36 at 130 ms: 32 in 110 ms.
  auto four = Predict(p, On(2, 4));
  REQUIRE(four.ok());
  CHECK(four->samples_per_s == Approx(32 * 16 / 0.110).epsilon(0.02));
  // Counts without a common part (31 and 14): parts of one batch, as even as 45 batches split.
  p.stream_worker_batches = {31, 14};
  CHECK(StreamQuota(p, 4) == std::vector<uint64_t>{12, 11, 11, 11});
  CHECK(StreamQuota(p, 2) == std::vector<uint64_t>{31, 14});
}

TEST_CASE("The loop's own work at epoch starts is carried into every scenario's whole run") {
  LoaderProfile p = BaseProfile();
  p.workers = 2;
  p.cpu_s_per_batch = 0.01;
  p.compute_s_per_batch = 0.1;  // a step off the CPU: the workers never slow it
  p.epochs = 4;
  p.batches_per_epoch = 10;
  p.warmup_extra_first_s = 0.5;
  p.warmup_extra_later_s = 0.2;
  // Per epoch the first batch (10 ms) and 10 steps of 0.1 s; 0.5 + 3 x 0.2 s over the run.
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->whole_run_samples_per_s == Approx(400 / (4 * 1.01 + 1.1)).epsilon(1e-3));
  CHECK(r->loop_work_s_per_epoch == Approx(1.1 / 4).epsilon(1e-3));
  CHECK(r->samples_per_s == Approx(100).epsilon(1e-3));  // the steady state does not pay it
  CHECK(Predict(p, On(4, 1))->loop_work_s_per_epoch == Approx(1.1 / 4).epsilon(1e-3));
}

TEST_CASE("A later epoch's copy-on-write refaults are paid only by scenarios whose later epochs fork workers") {
  // Non-persistent forked workers: 0.2 s of each later epoch's start is the
  // loop's own, 0.15 s of it the training process refaulting the pages it
  // writes after the fork (a 2048-wide MLP: 41.8k faults in each first step).
  LoaderProfile p = BaseProfile();
  p.workers = 2;
  p.cpu_s_per_batch = 0.01;
  p.compute_s_per_batch = 0.1;  // off the CPU: the workers never slow it
  p.epochs = 4;
  p.batches_per_epoch = 10;
  p.warmup_extra_later_s = 0.2;
  p.fork_refault_later_s = 0.15;
  auto as_run = Predict(p, On(4));
  REQUIRE(as_run.ok());
  CHECK(as_run->loop_work_s_per_epoch == Approx(3 * 0.2 / 4).epsilon(1e-3));
  Scenario persistent = On(4);
  persistent.persistent_workers = 1;
  auto once = Predict(p, persistent);
  REQUIRE(once.ok());
  CHECK(once->loop_work_s_per_epoch == Approx(3 * 0.05 / 4).epsilon(1e-3));
  CHECK(Predict(p, On(4, 0))->loop_work_s_per_epoch == Approx(3 * 0.05 / 4).epsilon(1e-3));  // no workers, no fork
}

// A CPU-bound step of 100 ms beside 2 workers of 50 ms a batch on 2 cores,
// one epoch of 20 batches, 10 s of the loop's own work at its start: at the
// epoch's start the workers fill their 4 slots while the step runs, which
// slows it by at most the CPU of those fetches (0.2 s).
LoaderProfile EpochStartWorkProfile() {
  LoaderProfile p = BaseProfile();
  p.workers = 2;
  p.profiled_cores = 2;
  p.prefetch_factor = 2;
  p.cpu_s_per_batch = 0.05;
  p.compute_s_per_batch = 0.1;
  p.compute_cpu_s_per_batch = {0.1, true, "test"};
  p.epochs = 1;
  p.batches_per_epoch = 20;
  p.warmup_extra_first_s = 10;
  return p;
}

TEST_CASE("The loop's own work at epoch starts leaves out the step's sharing of the cores with workers filling their queues") {
  // The simulation gives every scenario the slowed step already.
  LoaderProfile p = EpochStartWorkProfile();
  auto r = Predict(p, On(2));
  REQUIRE(r.ok());
  CHECK(r->loop_work_s_per_epoch < 10);
  CHECK(r->loop_work_s_per_epoch >= 9.8);
  // Measured below what the simulation puts there: nothing is left to carry.
  p.warmup_extra_first_s = 0.001;
  CHECK(Predict(p, On(2))->loop_work_s_per_epoch == 0);
}

TEST_CASE("What the simulation puts into an epoch's start, simulated once where the profile is built, is the one predictions take out") {
  // Of the 10 s, the simulation of the profiled configuration gives 0 to 0.2 s.
  LoaderProfile p = EpochStartWorkProfile();
  const double simulated = SimulateEpochStart(p);
  CHECK(simulated >= 0);
  CHECK(simulated <= 0.2);
  CHECK(Predict(p, On(2))->loop_work_s_per_epoch == Approx(10 - simulated));
  // Set (as analysis sets it), it is taken as given, not simulated again.
  p.epoch_start_simulated_s = 3;
  CHECK(Predict(p, On(2))->loop_work_s_per_epoch == Approx(7));
  CHECK(Predict(p, On(2, 1))->loop_work_s_per_epoch == Approx(7));
  // Nothing to take out of: none simulated.
  p.warmup_extra_first_s = 0;
  CHECK(SimulateEpochStart(p) == -1);
}

namespace {
// 2 epochs of 10 batches of 10 on 2 workers, compute bound at 0.1 s a batch
// (a first batch of 10 ms, then 10 steps: 1.01 s an epoch), no start-up.
LoaderProfile TwoEpochsOfTenBatches() {
  LoaderProfile p = BaseProfile();
  p.workers = 2;
  p.cpu_s_per_batch = 0.01;
  p.compute_s_per_batch = 0.1;
  p.epochs = 2;
  p.batches_per_epoch = 10;
  return p;
}
}  // namespace

TEST_CASE("The whole run counts an epoch's partial last batch as the samples it held") {
  // The last batch of each epoch holds 5: 95 samples.
  LoaderProfile p = TwoEpochsOfTenBatches();
  p.samples_per_epoch = 95;
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  // Per epoch the first batch (10 ms) and 10 steps of 0.1 s.
  CHECK(r->whole_run_samples_per_s == Approx(2 * 95 / (2 * 1.01)).epsilon(1e-3));
}

TEST_CASE("The whole run counts the samples of every batch it simulates where the profile saw fewer steps") {
  // A read-ahead loop's last step comes after its StopIteration and is not
  // seen: 2 epochs of 10 batches of 10, 19 stepped (190 samples), so 9.5
  // batches and 95 samples an epoch. The simulation runs whole epochs of 10
  // batches, each holding 10 samples: 100 samples in 2 x 1.01 s, not 95.
  LoaderProfile p = TwoEpochsOfTenBatches();
  p.batches_per_epoch = 9.5;
  p.samples_per_epoch = 95;
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->whole_run_samples_per_s == Approx(2 * 100 / (2 * 1.01)).epsilon(1e-3));
}

TEST_CASE("A worker's set-up is paid in every epoch that starts workers, once when they persist") {
  // The whole-run case above with a 0.5 s set-up in each worker's first fetch
  // (on 4 cores both workers' run in parallel): every epoch's first batch
  // comes 0.5 s later without persistent workers, the first epoch's alone with them.
  LoaderProfile p = WholeRunProfile();
  p.worker_setup_by_fetch = {{0.5f, 0}};
  auto r = Predict(p, On(4));
  REQUIRE(r.ok());
  CHECK(r->samples_per_s == Approx(100).epsilon(1e-3));  // a one-time cost: not the steady state
  CHECK(r->whole_run_samples_per_s == Approx(400 / (4 * (1.0 + 0.5 + 0.01 + 1.0))).epsilon(1e-3));
  Scenario persistent = On(4);
  persistent.persistent_workers = 1;
  CHECK(Predict(p, persistent)->whole_run_samples_per_s == Approx(400 / (1.0 + 0.5 + 4 * 1.01)).epsilon(1e-3));
  // A loader built anew each epoch restarts its persistent workers with each object.
  p.objects = 4;
  CHECK(Predict(p, persistent)->whole_run_samples_per_s == Approx(400 / (4 * (1.0 + 0.5 + 0.01 + 1.0))).epsilon(1e-3));
}

TEST_CASE("The main loop's receive is calibrated so that the profile's simulation shows its measured handoff") {
  // 1 worker, prefetch 1, on 2 cores: a 1 ms fetch and 3 ms of sending a
  // batch, a step 2 ms off CPU, 1 ms of the main thread's CPU in next(). As
  // simulated (test_model_simulate), next() finds each batch fetched and
  // waits the 2 ms of sending left plus the receive: a measured handoff of
  // 3.5 ms is a 1.5 ms receive, not 3.5 ms of it beside the sending.
  LoaderProfile p = BaseProfile();
  p.workers = 1;
  p.prefetch_factor = 1;
  p.profiled_cores = 2;
  p.cpu_s_per_batch = 0.001;
  p.compute_s_per_batch = 0.002;
  p.worker_loop_cpu_s_per_batch = {0.003, true, "test"};
  p.receive_s_per_batch = 0.001;
  p.handoff_s_per_batch = 0.0035;
  // The sum over 400 simulated batches, the first not yet fetched at its call.
  CHECK(CalibrateMainReceive(p) == Approx(0.0035 * 400 / 399 - 0.002).epsilon(1e-3));
  CHECK(Predict(p, On(2))->samples_per_s == Approx(10 / 0.0075).epsilon(1e-3));  // the larger of the two: 3.5 ms
  p.main_receive_s = CalibrateMainReceive(p);
  CHECK(Predict(p, On(2))->samples_per_s == Approx(10 / (0.004 + p.main_receive_s)).epsilon(1e-3));
  // A handoff the receive alone explains keeps the measured CPU; one shorter
  // than the receive (every batch late) keeps the receive.
  p.main_receive_s = -1;
  p.handoff_s_per_batch = 0.0025;
  CHECK(CalibrateMainReceive(p) == Approx(0.001));
  p.handoff_s_per_batch = 0.0002;
  CHECK(CalibrateMainReceive(p) == Approx(0.001));
  // Without workers nothing is calibrated.
  p.workers = 0;
  CHECK(CalibrateMainReceive(p) == MainReceiveSeconds(p));
}
