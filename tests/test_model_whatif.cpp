// whatif: flag parsing (units, lists, bad values), auto workers, the sweep's
// cross product against the measured baseline.
#include <catch2/catch.hpp>

#include "model/whatif.h"

using namespace stallprof::model;

namespace {
LoaderProfile Loader() {
  LoaderProfile p;
  p.name = "train";
  p.batch_size = 10;
  p.workers = 1;
  p.batches = 100;
  p.compute_s_per_batch = 0.05;  // 200 samples/s
  p.cpu_s_per_batch = 0.2;       // 50 samples/s per worker
  p.measured_samples_per_s = 10 / 0.21;
  p.dataset_bytes = 1ull << 30;
  p.dataset_items = 1000;
  return p;
}
Machine OneCore() {
  Machine m;
  m.cores = 1;
  return m;
}
}  // namespace

TEST_CASE("Sweep flags parse binary sizes, bandwidths and lists") {
  SweepFlags f;
  f.cores = "2,4,8";
  f.workers = "auto,3";
  f.cache = "0,50G,1.5T,all";
  f.cache_policy = "static";
  f.accel_speedup = "2";
  f.disk_bw = "500M/s";
  f.prefetch_factor = "8";
  auto s = ParseSweep(f);
  REQUIRE(s.ok());
  CHECK(s->prefetch_factor == 8);
  CHECK(s->cores == std::vector<double>{2, 4, 8});
  CHECK(s->workers == std::vector<int32_t>{kAutoWorkers, 3});
  CHECK(s->cache_bytes == std::vector<int64_t>{0, 50ll << 30, 3ll << 39, kCacheAll});
  CHECK(s->cache_policy == CachePolicy::kStatic);
  CHECK(s->accel_speedup == 2);
  CHECK(s->storage_bandwidth == 500.0 * 1024 * 1024);
}

TEST_CASE("The cache policy is Linux's page cache unless --cache-policy names a plain LRU or a static subset") {
  SweepFlags f;
  CHECK(ParseSweep(f)->cache_policy == CachePolicy::kPageCache);
  f.cache_policy = "lru";
  CHECK(ParseSweep(f)->cache_policy == CachePolicy::kLru);
  f.cache_policy = "pagecache";
  CHECK(ParseSweep(f)->cache_policy == CachePolicy::kPageCache);
}

TEST_CASE("Bad sweep flags are usage errors that name the flag") {
  auto bad = [](SweepFlags f, const std::string& flag) {
    auto s = ParseSweep(f);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().kind == stallprof::ErrorKind::kUsage);
    CHECK(s.error().message.find(flag) != std::string::npos);
  };
  SweepFlags f;
  f.cores = "0";
  bad(f, "--cores");
  f = {};
  f.cores = "4,,8";
  bad(f, "--cores");
  f = {};
  f.cores_given = true;  // --cores ''
  bad(f, "--cores ''");
  f = {};
  f.cores = "1e9";
  bad(f, "at most 4096");
  for (const char* depth : {"0", "-2", "4x", "1025"}) {
    f = {};
    f.prefetch_factor = depth;
    bad(f, "--prefetch-factor");
  }
  f = {};
  f.cores = "4097";
  bad(f, "--cores 4097");
  f = {};
  f.cache = "-1G";
  bad(f, "--cache");
  f = {};
  f.cache = "200X";
  bad(f, "--cache");
  f = {};
  f.disk_bw = "2G";  // no /s
  bad(f, "--disk-bw");
  f = {};
  f.workers = "many";
  bad(f, "--workers");
  f = {};
  f.cache_policy = "fifo";
  bad(f, "--cache-policy");
  f = {};
  f.accel_speedup = "0";
  bad(f, "--accel-speedup");
}

TEST_CASE("Auto workers stop where the prep bottleneck is gone, beyond cores minus one only while workers still add") {
  LoaderProfile p = Loader();  // the step off CPU (an accelerator's): workers may take every core
  Scenario s;
  s.machine.cores = 16;
  CHECK(AutoWorkers(p, s) == 4);  // 4 workers x 50 = 200 samples/s = compute
  s.machine.cores = 3;
  CHECK(AutoWorkers(p, s) == 3);  // 150 samples/s, where cores - 1 = 2 give 100
  s.machine.cores = 1;
  CHECK(AutoWorkers(p, s) == 1);
  // Workers blocked off CPU (a network read of 0.849 s a batch, 1 ms of CPU)
  // overlap their waits: on 2 cores each adds 10 samples per 0.85 s until
  // compute's 200 samples/s binds at 17 workers (17 x 11.76 = 200), and
  // more add nothing. (Their CPU, taken at once by all of them, stretches a
  // batch by under 1%: 17/2 x 1 ms.)
  p.cpu_s_per_batch = 0.001;
  p.io_s_per_batch = 0.849;
  s.machine.cores = 2;
  const uint32_t auto_workers = AutoWorkers(p, s);
  CHECK(auto_workers >= 17);
  CHECK(auto_workers <= 18);
}

TEST_CASE("Auto workers are the fewest within kAsGoodAsMore of the best, as recommend and analyze's advice pick") {
  LoaderProfile p = Loader();  // compute binds at 200 samples/s
  p.cpu_s_per_batch = 30.0 / 198.6;  // 3 workers: 198.6 samples/s, 0.7% under what 4 reach
  Scenario s;
  s.machine.cores = 16;
  Scenario three = s, four = s;
  three.workers = 3;
  four.workers = 4;
  const auto r3 = Predict(p, three), r4 = Predict(p, four);
  REQUIRE(r3.ok());
  REQUIRE(r4.ok());
  CHECK(r3->samples_per_s / r4->samples_per_s > 1 - kAsGoodAsMore);
  CHECK(r3->samples_per_s / r4->samples_per_s < 0.995);  // the former 0.5% would have asked for 4
  CHECK(AutoWorkers(p, s) == 3);
}

TEST_CASE("A sweep predicts every combination against the measured baseline and reports the model error") {
  Sweep sweep;
  sweep.cores = {1, 2, 4, 8};
  sweep.workers = {kAutoWorkers};
  auto r = WhatIf(Loader(), OneCore(), sweep);
  REQUIRE(r.ok());
  CHECK(r->swept == "cores");
  REQUIRE(r->rows.size() == 4);
  CHECK(r->baseline.samples_per_s == Approx(50));
  CHECK(r->measured_samples_per_s == Approx(10 / 0.21));
  CHECK(r->model_error == Approx(50 / (10 / 0.21) - 1));
  CHECK(r->rows[0].prediction.bottleneck == Bottleneck::kPrep);
  CHECK(r->rows[3].scenario.workers == 4);
  CHECK(r->rows[3].prediction.bottleneck == Bottleneck::kCompute);
  CHECK(r->rows[3].change == Approx(200 / (10 / 0.21) - 1));
  CHECK_FALSE(r->inputs.empty());
}

TEST_CASE("Workers at prefetch_factor=1 are flagged unless the profile ran its workers so") {
  Sweep sweep;
  sweep.workers = {0, 1, 2};
  sweep.prefetch_factor = 1;
  LoaderProfile p = Loader();  // 1 worker at torch's default of 2
  auto r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  REQUIRE(r->rows.size() == 3);
  CHECK_FALSE(r->rows[0].unpriced_serial_handoff);  // no workers, no prefetch
  CHECK(r->rows[1].unpriced_serial_handoff);
  CHECK(r->rows[2].unpriced_serial_handoff);
  sweep.prefetch_factor = -1;  // as profiled: 2
  r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  CHECK_FALSE(r->rows[1].unpriced_serial_handoff);
  p.prefetch_factor = 1;  // the profile measured its workers at 1
  r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  CHECK_FALSE(r->rows[1].unpriced_serial_handoff);
  p.workers = 0;  // at 1 as configured, but no worker measured it
  r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  CHECK(r->rows[1].unpriced_serial_handoff);
}

TEST_CASE("Without a measured steady state a row's change compares whole runs, in whatif and in the advice's counts") {
  // Short epochs (no full batch past the warm-up): 4 epochs of 5 batches,
  // each starting its worker for 0.2 s. The steady figures leave the
  // start-up out, so a steady row against the measured whole run would
  // credit the scenario with it.
  LoaderProfile p = Loader();
  p.steady_state_measured = false;
  p.measured_samples_per_s = 0;
  p.epochs = 4;
  p.samples_per_epoch = 50;
  p.startup_first_s = p.startup_later_s = 0.2;
  p.startup_timed = true;
  p.measured_whole_run_samples_per_s = 30;
  Sweep sweep;
  sweep.workers = {2};
  auto r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  CHECK_FALSE(r->steady_state_measured);
  REQUIRE(r->rows.size() == 1);
  const Prediction& two = r->rows[0].prediction;
  REQUIRE(two.whole_run_samples_per_s < 0.9 * two.samples_per_s);  // the start-up weighs
  CHECK(r->rows[0].change == Approx(two.whole_run_samples_per_s / 30 - 1));
  auto counts = PredictWorkerCounts(p, OneCore(), {2});
  REQUIRE(counts.ok());
  CHECK(counts->at(0).change == Approx(r->rows[0].change));
  // Measured steady state: the steady figures.
  p.steady_state_measured = true;
  p.measured_samples_per_s = 40;
  r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  CHECK(r->steady_state_measured);
  CHECK(r->rows[0].change == Approx(r->rows[0].prediction.samples_per_s / 40 - 1));
}

TEST_CASE("A cache sweep reports the cold first epoch beside the steady state") {
  LoaderProfile p = Loader();
  p.cpu_s_per_batch = 0.01;
  p.io_s_per_batch = 0.19;  // io-bound, cold in the profile
  Sweep sweep;
  sweep.cache_bytes = {0, 1ll << 30};
  auto r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  CHECK(r->swept == "cache");
  CHECK(r->rows[0].prediction.hit_ratio == 0);
  CHECK_FALSE(r->rows[0].other_epoch.has_value());
  CHECK(r->rows[1].prediction.hit_ratio == 1);
  REQUIRE(r->rows[1].other_epoch.has_value());
  CHECK(r->rows[1].other_epoch->hit_ratio == 0);
  CHECK(r->rows[1].prediction.samples_per_s == Approx(200));  // compute bound once cached
  CHECK(r->rows[1].other_epoch->samples_per_s == Approx(50));  // the first epoch still reads everything
}

TEST_CASE("A cache scenario on an estimated miss cost also gives the figure with misses costing no CPU") {
  LoaderProfile p = Loader();
  p.cpu_s_per_batch = 0.1;  // of which the estimate takes 0.08 s as miss CPU
  p.io_s_per_batch = 0.19;
  p.storage_bytes_per_batch = 1e6;
  p.cpu_s_per_storage_byte = {0.08 / 1e6, false, "estimated from system time"};
  Sweep sweep;
  sweep.cache_bytes = {1ll << 30};
  auto r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  REQUIRE(r->rows.size() == 1);
  CHECK(r->rows[0].prediction.samples_per_s == Approx(200).epsilon(0.02));  // 0.02 s of CPU a batch: the 50 ms step binds
  REQUIRE(r->rows[0].without_miss_cpu.has_value());
  CHECK(r->rows[0].without_miss_cpu->samples_per_s == Approx(100).epsilon(0.02));  // 0.1 s of worker CPU a batch of 10
  CHECK(r->rows[0].without_miss_cpu->hit_ratio == 1);

  p.cpu_s_per_storage_byte.measured = true;  // fitted: no floor to give
  r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  CHECK_FALSE(r->rows[0].without_miss_cpu.has_value());
  sweep.cache_bytes = {};  // no cache scenario: the misses stay as profiled
  p.cpu_s_per_storage_byte.measured = false;
  r = WhatIf(p, OneCore(), sweep);
  REQUIRE(r.ok());
  CHECK_FALSE(r->rows[0].without_miss_cpu.has_value());
}

TEST_CASE("A main-thread stage moved to the workers leaves the step and joins every batch's fetch") {
  // Set costs: a 30 ms step of which 20 ms is the user's augmentation on CPU,
  // and a worker that makes a batch in 5 ms of CPU. On 4 cores with 2
  // workers, the moved augmentation makes a batch 25 ms of worker CPU, 12.5
  // ms a batch over two workers, and the step's own 10 ms no longer paces it.
  LoaderProfile p = Loader();
  p.compute_s_per_batch = 0.030;
  p.compute_cpu_s_per_batch = {0.030, true, "test"};
  p.cpu_s_per_batch = 0.005;
  p.measured_samples_per_s = 10 / 0.030;
  p.workers = 2;
  p.main_stages = {{"augment", 0.020, 0.020}, {"log", 0.001, 0.001}};
  auto moved = MoveStagesToWorkers(p, {"augment"});
  REQUIRE(moved.ok());
  CHECK(moved->compute_s_per_batch == Approx(0.010));
  CHECK(moved->compute_cpu_s_per_batch.value == Approx(0.010));
  CHECK(moved->cpu_s_per_batch == Approx(0.025));
  REQUIRE(moved->main_stages.size() == 1);
  CHECK(moved->main_stages[0].name == "log");
  REQUIRE_FALSE(moved->stages.empty());
  CHECK(moved->stages.back().name == "augment");
  CHECK(moved->stages.back().cpu_s_per_sample == Approx(0.002));

  Sweep sweep;
  sweep.cores = {4};
  sweep.move_to_workers = {"augment"};
  Machine four;
  four.cores = 4;
  auto r = WhatIf(p, four, sweep);
  REQUIRE(r.ok());
  REQUIRE(r->rows.size() == 1);
  CHECK(r->baseline.step_s == Approx(0.030).epsilon(0.05));  // the baseline is the run as it was
  CHECK(r->rows[0].prediction.step_s == Approx(0.0125).epsilon(0.1));
  CHECK(r->rows[0].prediction.bottleneck == Bottleneck::kPrep);

  auto unknown = MoveStagesToWorkers(p, {"crop"});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().kind == stallprof::ErrorKind::kUsage);
  CHECK(unknown.error().message.find("its stages: augment, log") != std::string::npos);
  SweepFlags f;
  f.move_to_workers = "augment,log";
  f.move_to_workers_given = true;
  auto s = ParseSweep(f);
  REQUIRE(s.ok());
  CHECK(s->move_to_workers == std::vector<std::string>{"augment", "log"});
  f.move_to_workers = "";
  CHECK_FALSE(ParseSweep(f).ok());
}

TEST_CASE("A GIL found free beside other processes' busy cores is flagged when the scenarios assume less load") {
  auto flagged = [](double outside_cores, double gil_held, bool measured, double scenario_load) {
    LoaderProfile p = Loader();
    p.outside_busy_cores = outside_cores;
    p.fetch_holds_gil = {gil_held, measured, "probes"};
    Sweep sweep;
    sweep.workers = {2};
    sweep.background_threads = scenario_load;
    auto r = WhatIf(p, OneCore(), sweep);
    REQUIRE(r.ok());
    for (const auto& line : r->inputs)
      if (line.find("other processes kept") != std::string::npos) return true;
    return false;
  };
  CHECK(flagged(1.0, 0, true, 0));
  CHECK_FALSE(flagged(0.1, 0, true, 0));   // a quiet profile
  CHECK_FALSE(flagged(1.0, 1, true, 0));   // found held: the load did not hide it
  CHECK_FALSE(flagged(1.0, 0, false, 0));  // not measured: the input says so already
  CHECK_FALSE(flagged(1.0, 0, true, -1));  // the scenarios keep the profiled load
}

TEST_CASE("A step measured on more cores than its intra-op threads says what else counts in it") {
  // No workers, a 10 ms step measured at 25 ms of process CPU: 2.5 cores.
  auto step_line = [](int32_t threads, double cpu_s) {
    LoaderProfile p = Loader();
    p.workers = 0;
    p.compute_s_per_batch = 0.01;
    p.compute_cpu_s_per_batch = {cpu_s, true, "sampler"};
    p.intra_op_threads = threads;
    Machine two;
    two.cores = 2;
    auto r = WhatIf(p, two, Sweep{});
    REQUIRE(r.ok());
    for (const auto& line : r->inputs)
      if (line.rfind("the step's own CPU per batch", 0) == 0) return line;
    FAIL("no step CPU line");
    return std::string();
  };
  CHECK_THAT(step_line(2, 0.025), Catch::Contains("on 2.50 cores") &&
                                      Catch::Contains("more than its 2 intra-op threads: the process's other threads "
                                                      "count in it, their CPU during the fetches too") &&
                                      Catch::Contains("the model runs the step on at most 2"));
  // 1 thread: not a parallel step, which the model runs as measured.
  CHECK_THAT(step_line(1, 0.025), Catch::Contains("more than its 1 intra-op thread:") &&
                                      !Catch::Contains("the model runs the step on at most"));
  CHECK_THAT(step_line(2, 0.019), !Catch::Contains("more than its"));
}

TEST_CASE("A start-up timed after the run names the loader's worker_init_fn, which the timing did not run") {
  LoaderProfile p = Loader();
  p.workers = 0;  // profiled without workers: the start-up was timed after the run
  p.epochs = 4;
  p.startup_first_s = p.startup_later_s = 0.02;
  p.startup_timed = true;
  Sweep sweep;
  sweep.workers = {2};
  auto startup_line = [&] {
    auto r = WhatIf(p, OneCore(), sweep);
    REQUIRE(r.ok());
    for (const auto& line : r->inputs)
      if (line.rfind("worker start-up:", 0) == 0) return line;
    return std::string("(no start-up line)");
  };
  CHECK_THAT(startup_line(), Catch::Contains("timed after the run") && !Catch::Contains("worker_init_fn"));
  p.worker_init_fn = "seed_worker";
  CHECK_THAT(startup_line(), Catch::EndsWith("copy-on-write while the workers live, and each worker runs the loader's "
                                             "worker_init_fn (seed_worker), which the timing did not: a profile with "
                                             "workers times it)"));
  // Timed by spawn (the process would spawn its workers): said so, with the join per wave.
  p.startup_timed_method = "spawn";
  p.shutdown_exit_extra_s = 0.16;
  CHECK_THAT(startup_line(), Catch::StartsWith("worker start-up: 20.00 ms an epoch, and 160.00 ms for each wave of "
                                               "workers' exits") &&
                                 Catch::Contains("one worker started by spawn, a fresh interpreter importing torch") &&
                                 Catch::EndsWith("worker_init_fn (seed_worker), which the timing did not: a profile "
                                                 "with workers times it)"));
}

TEST_CASE("The profiled hit ratio is unknown, not 0%, where the bytes a sample needs are unknown") {
  auto hit_line = [](double bytes_per_sample, double hit_ratio) {
    LoaderProfile p = Loader();
    p.bytes_per_sample = {bytes_per_sample, bytes_per_sample > 0, "test"};
    p.cold_hit_ratio = hit_ratio;
    auto r = WhatIf(p, OneCore(), Sweep{});
    REQUIRE(r.ok());
    for (const auto& line : r->inputs)
      if (line.rfind("page-cache hit ratio in the profiled run", 0) == 0) return line;
    FAIL("no hit ratio line");
    return std::string();
  };
  CHECK_THAT(hit_line(0, 0), Catch::Contains("unknown (the bytes a sample needs are unknown"));
  CHECK_THAT(hit_line(4096, 0.25), Catch::Contains(": 25% (measured"));
}

TEST_CASE("whatif names the profiled kernel's page reclaim, and warns when it is MGLRU") {
  auto reclaim_line = [](const std::string& reclaim) {
    Machine m = OneCore();
    m.page_reclaim = reclaim;
    auto r = WhatIf(Loader(), m, Sweep{});
    REQUIRE(r.ok());
    for (const auto& line : r->inputs)
      if (line.rfind("page reclaim:", 0) == 0) return line;
    return std::string();
  };
  CHECK_THAT(reclaim_line("mglru"), Catch::Contains("MGLRU") && Catch::Contains("may be off"));
  CHECK_THAT(reclaim_line("lists"), Catch::Contains("active and inactive lists") && Catch::Contains("MGLRU off"));
  CHECK(reclaim_line("").empty());  // not recorded: nothing said
}

TEST_CASE("whatif prints a whole batch size as is and a mean one to a tenth") {
  auto batch_line = [](double batch_size) {
    LoaderProfile p = Loader();
    p.batch_size = batch_size;
    auto r = WhatIf(p, OneCore(), Sweep{});
    REQUIRE(r.ok());
    REQUIRE_FALSE(r->inputs.empty());
    return r->inputs.front();
  };
  CHECK_THAT(batch_line(64), Catch::StartsWith("batch size: 64, workers: "));
  // An IterableDataset's batches of 64 with a partial last one per epoch.
  CHECK_THAT(batch_line(63.9659), Catch::StartsWith("batch size: 64.0 on average, workers: "));
}
