// The pipeline LP and recommend: known optima on small instances, GLPK's
// shadow prices, the binding constraint, and the infeasible cases.
#include <catch2/catch.hpp>

#include <chrono>

#include "model/lp.h"

using namespace stallprof::model;

namespace {
PipelineLp TwoStages() {
  // decode 0.01 CPU s/sample, augment 0.03 CPU s/sample, separate pools, 4 cores:
  // x * (0.01 + 0.03) <= 4  ->  x = 100 samples/s; one more core: 1 / 0.04 = 25 samples/s.
  PipelineLp lp;
  lp.pools = {{"decode", 0.01, 0}, {"augment", 0.03, 0}};
  lp.stages = {{"decode", 0.01, 0}, {"augment", 0.03, 1}};
  lp.cores = 4;
  return lp;
}
LoaderProfile Loader() {
  LoaderProfile p;
  p.name = "train";
  p.batch_size = 10;
  p.workers = 1;
  p.batches = 100;
  p.compute_s_per_batch = 0.05;  // the model ingests 200 samples/s
  p.cpu_s_per_batch = 0.1;       // 0.01 CPU s per sample
  p.io_s_per_batch = 0.0;
  p.produce_s_per_batch = 0.1;
  p.produce_p99_s = 0.2;
  p.measured_samples_per_s = 10 / 0.1;
  p.profiled_cores = 1;
  return p;
}
const LpRow* Row(const LpSolution& s, RowKind kind) {
  for (const auto& r : s.rows)
    if (r.kind == kind) return &r;
  return nullptr;
}
}  // namespace

TEST_CASE("The LP finds the known optimum of a CPU-bound two-stage pipeline and the core shadow price") {
  auto s = SolvePipelineLp(TwoStages());
  REQUIRE(s.ok());
  CHECK(s->samples_per_s == Approx(100).epsilon(1e-4));
  CHECK(s->stage_cores[0] == Approx(1).epsilon(1e-4));
  CHECK(s->stage_cores[1] == Approx(3).epsilon(1e-4));
  REQUIRE(s->Binding() != nullptr);
  CHECK(s->Binding()->kind == RowKind::kCores);
  CHECK(s->Binding()->dual == Approx(25).epsilon(1e-3));
}

TEST_CASE("The LP stops at what the model ingests and says so") {
  PipelineLp lp = TwoStages();
  lp.max_samples_per_s = 60;
  auto s = SolvePipelineLp(lp);
  REQUIRE(s.ok());
  CHECK(s->samples_per_s == Approx(60).epsilon(1e-4));
  CHECK(s->Binding()->kind == RowKind::kIngest);
  CHECK(s->Binding()->dual == Approx(1).epsilon(1e-3));
  CHECK(Row(*s, RowKind::kCores)->dual == Approx(0).margin(1e-6));
}

TEST_CASE("Storage bandwidth and memory bind with their own shadow prices") {
  PipelineLp lp = TwoStages();
  lp.storage_bandwidth = 50e6;
  lp.storage_bytes_per_sample = 1e6;  // 50 samples/s
  auto s = SolvePipelineLp(lp);
  REQUIRE(s.ok());
  CHECK(s->samples_per_s == Approx(50).epsilon(1e-4));
  CHECK(s->Binding()->kind == RowKind::kBandwidth);
  CHECK(s->Binding()->dual == Approx(1e-6).epsilon(1e-3));  // samples/s per byte/s

  PipelineLp mem;  // latency-bound pool: each member busy 0.1 s per sample, 1 GB per member, 3 GB budget
  mem.pools = {{"workers", 0.1, 1e9}};
  mem.stages = {{"fetch", 0.001, 0}};
  mem.cores = 8;
  mem.memory_bytes = 3e9;
  auto m = SolvePipelineLp(mem);
  REQUIRE(m.ok());
  CHECK(m->samples_per_s == Approx(30).epsilon(1e-4));  // 3 members / 0.1 s
  CHECK(m->pool_members[0] == Approx(3).epsilon(1e-4));
  CHECK(m->Binding()->kind == RowKind::kMemory);
  CHECK(m->Binding()->dual * 1e9 == Approx(10).epsilon(1e-3));  // one more member's memory: +10 samples/s
}

TEST_CASE("The LP returns the fewest pool members that reach its optimum, not as many as memory holds") {
  // A loader whose workers' RSS was unknown: 0.75 MiB of prefetch buffer a
  // worker, 23.5 GiB of memory. GLPK returned 32119 workers for it: their tiny
  // cost was inside its tolerance. That loader's LP, its fetch cost varied.
  for (int k = 0; k < 40; ++k) {
    const double getitem = 0.000509691947 * (1 + 0.01 * k);
    PipelineLp lp;
    lp.pools = {{"workers", getitem + 1.95e-05, 786944}, {"main process", 0, 0}};
    lp.stages = {{"dataloader.collate", 4.50178183e-06, 0},     {"dataloader.getitem", getitem, 0},
                 {"fetch (rest)", 5.81564792e-07, 0},           {"worker loop", 6.81875e-06, 0},
                 {"collate to shared memory", 7.6045e-06, 0}, {"training step (main process)", 9.32535938e-06, 1}};
    lp.cores = 2;
    lp.memory_bytes = 2.52765184e+10;
    lp.max_samples_per_s = 43095.3903;
    lp.storage_bandwidth = 22987627.2;
    auto s = SolvePipelineLp(lp);
    REQUIRE(s.ok());
    double cpu = 0;
    for (const auto& stage : lp.stages) cpu += stage.cpu_s_per_sample;
    CHECK(s->samples_per_s == Approx(2 / cpu).epsilon(1e-6));
    // The workers' cores or Little's law, whichever needs more: under 2.
    double cores = 0;
    for (size_t i = 0; i + 1 < lp.stages.size(); ++i) cores += s->stage_cores[i];
    CHECK(s->pool_members[0] == Approx(std::max(cores, s->samples_per_s * lp.pools[0].latency_s_per_sample)));
    for (const auto& row : s->rows) {
      if (row.kind == RowKind::kMemory) CHECK(row.activity == Approx(s->pool_members[0] * 786944));
      if (row.kind == RowKind::kPoolCores || row.kind == RowKind::kOccupancy) CHECK(row.activity <= 1e-6);
    }
  }
}

TEST_CASE("The LP rejects a pipeline with nothing that bounds throughput") {
  PipelineLp lp;
  lp.pools = {{"workers", 0, 0}};
  lp.stages = {{"fetch", 0, 0}};
  lp.cores = 2;
  auto s = SolvePipelineLp(lp);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.find("nothing") != std::string::npos);
}

TEST_CASE("A 100-stage pipeline LP solves to the sum-of-costs optimum") {
  PipelineLp lp;
  double total = 0;
  for (int i = 0; i < 100; ++i) {
    const double cpu = 0.001 * (1 + i % 7);
    lp.pools.push_back({"pool" + std::to_string(i), cpu * 1.5, 1e8});
    lp.stages.push_back({"stage" + std::to_string(i), cpu, static_cast<uint32_t>(i)});
    total += cpu;
  }
  lp.cores = 32;
  lp.memory_bytes = 1e12;
  auto s = SolvePipelineLp(lp);
  REQUIRE(s.ok());
  CHECK(s->samples_per_s == Approx(32 / total).epsilon(1e-4));
}

TEST_CASE("recommend turns a prep-bound loader into workers, Little's prefetch and the core shadow price") {
  LoaderProfile p = Loader();  // 0.01 CPU s/sample, compute ingests 200 samples/s
  RecommendOptions o;
  o.cores = 1.5;  // 1.5 cores: 150 samples/s from CPU
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  CHECK(r->lp_samples_per_s == Approx(150).epsilon(1e-3));
  CHECK(r->workers == 2);
  CHECK(r->binding.kind == RowKind::kCores);
  CHECK(r->binding.dual == Approx(100).epsilon(1e-3));
  CHECK(r->advice == "one more core adds 100.0 samples/s");
  // Little's law: 15 batches/s x p99 0.2 s = 3 batches in flight over 2 workers -> 2 each.
  CHECK(r->prefetch_concurrency == Approx(3).epsilon(1e-3));
  CHECK(r->littles_prefetch_factor == 2);
  // Every batch costs the same: the simulation would deliver as fast with one
  // batch ahead per worker, but recommend goes no lower than torch's default.
  CHECK(r->prefetch_factor == 2);
  CHECK(r->measured_samples_per_s == Approx(100));
  // Plenty of cores: the model binds.
  o.cores = 8;
  auto many = Recommend(p, o);
  REQUIRE(many.ok());
  CHECK(many->lp_samples_per_s == Approx(200).epsilon(1e-3));
  CHECK(many->binding.kind == RowKind::kIngest);
  CHECK(many->advice == "the model is now the bottleneck: faster input will not help");
  CHECK(many->predicted.samples_per_s == Approx(200).epsilon(1e-3));
}

TEST_CASE("recommend proposes torch's default prefetch_factor where Little's law asks for 1, and trims deep buffers to it") {
  RecommendOptions o;
  o.cores = 1.5;  // 150 samples/s from CPU: 15 batches/s over 2 workers
  LoaderProfile p = Loader();
  p.produce_p99_s = 0.05;  // 15 x 0.05 = 0.75 batches in flight: 1 a worker
  auto shallow = Recommend(p, o);
  REQUIRE(shallow.ok());
  CHECK(shallow->littles_prefetch_factor == 1);
  CHECK(shallow->prefetch_factor == 2);
  CHECK(shallow->predicted.workers == 2);
  p.produce_p99_s = 1.0;  // 15 batches in flight: 8 a worker, which equal costs do not need
  auto deep = Recommend(p, o);
  REQUIRE(deep.ok());
  CHECK(deep->littles_prefetch_factor == 8);
  CHECK(deep->prefetch_factor == 2);
}

TEST_CASE("recommend predicts the profiled configuration too, to compare how busy each keeps the cores") {
  LoaderProfile p = Loader();  // 1 worker on its 1 core, busy throughout; the step off CPU
  RecommendOptions o;
  o.cores = 8;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  CHECK(r->as_profiled.workers == 1);
  CHECK(r->as_profiled.busy_cores == Approx(1).epsilon(0.05));
  // The model ingests 200 samples/s at 0.01 CPU s a sample: 2 cores busy.
  CHECK(r->predicted.busy_cores == Approx(2).epsilon(0.05));
  CHECK(CompareBusyCores(r->as_profiled, r->predicted) == BusyShift::kBusier);
  CHECK(CompareBusyCores(r->as_profiled, r->as_profiled) == BusyShift::kAsProfiled);
}

TEST_CASE("recommend keeps the profiled settings when its best plan predicts under 5% over them") {
  RecommendOptions o;
  o.cores = 8;
  // Compute-bound: the model ingests 50 samples/s (0.2 s a batch of 10) and
  // the profiled worker makes 100: no setting adds anything.
  LoaderProfile p = Loader();
  p.compute_s_per_batch = 0.2;
  p.measured_samples_per_s = 50;
  auto kept = Recommend(p, o);
  REQUIRE(kept.ok());
  CHECK(kept->profiled_settings_samples_per_s == Approx(50).epsilon(0.02));
  CHECK(kept->predicted.samples_per_s < 1.05 * kept->profiled_settings_samples_per_s);
  CHECK_FALSE(kept->WorthChanging());
  // Prep-bound: 1 worker makes 100 samples/s where the model ingests 200.
  auto changed = Recommend(Loader(), o);
  REQUIRE(changed.ok());
  CHECK(changed->profiled_settings_samples_per_s == Approx(100).epsilon(0.02));
  CHECK(changed->predicted.samples_per_s == Approx(200).epsilon(0.02));
  CHECK(changed->WorthChanging());
}

TEST_CASE("recommend's persistent workers are worth a change on short epochs, by the whole run alone") {
  // Compute-bound as above, 4 epochs of 10 batches (0.2 s each), and the
  // profiled workers start anew each epoch in 1 s: the steady state cannot
  // gain, the whole run gains the 3 later starts (12.4 s -> 9.4 s, +32%).
  LoaderProfile p = Loader();
  p.compute_s_per_batch = 0.2;
  p.measured_samples_per_s = 50;
  p.epochs = 4;
  p.batches_per_epoch = 10;
  p.startup_first_s = p.startup_later_s = 1.0;
  RecommendOptions o;
  o.cores = 8;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  CHECK(r->predicted.samples_per_s < 1.05 * r->profiled_settings_samples_per_s);
  CHECK(r->predicted.whole_run_samples_per_s > 1.25 * r->profiled_settings_whole_run_samples_per_s);
  CHECK(r->WorthChanging());
  // Profiled with persistent workers already: nothing left to gain.
  p.persistent_workers = true;
  auto kept = Recommend(p, o);
  REQUIRE(kept.ok());
  CHECK_FALSE(kept->WorthChanging());
}

TEST_CASE("recommend sizes workers by Little's law when io is latency bound") {
  LoaderProfile p = Loader();
  p.cpu_s_per_batch = 0.01;
  p.io_s_per_batch = 0.39;  // each batch keeps a worker 0.4 s, almost all blocked
  RecommendOptions o;
  o.cores = 2;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  CHECK(r->lp_samples_per_s == Approx(200).epsilon(1e-3));
  CHECK(r->workers == 8);  // 20 batches/s x 0.4 s
}

TEST_CASE("recommend caches the dataset when storage bandwidth binds and memory allows") {
  LoaderProfile p = Loader();
  p.dataset_bytes = 1ull << 30;
  p.dataset_items = 1024;
  p.bytes_per_sample = {1 << 20, true, "read_bytes"};
  p.storage_bandwidth = {50 << 20, true, "observed"};  // 50 samples/s uncached
  RecommendOptions o;
  o.cores = 8;
  o.memory_bytes = 4ull << 30;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  CHECK(r->cache.point == CachePoint::kRawFiles);
  // A static 3/4 already feeds the model (50 / 0.25 = 200 samples/s): the smallest sufficient cache wins.
  CHECK(r->cache.policy == CachePolicy::kStatic);
  CHECK(r->cache.bytes == (768ull << 20));
  CHECK(r->lp_samples_per_s == Approx(200).epsilon(1e-3));
  CHECK(r->binding.kind == RowKind::kIngest);
  // Half the memory: a static half-cache beats LRU's thrashing.
  o.memory_bytes = 600ull << 20;
  auto half = Recommend(p, o);
  REQUIRE(half.ok());
  CHECK(half->cache.policy == CachePolicy::kStatic);
  CHECK(half->cache.bytes == (512ull << 20));
  CHECK(half->lp_samples_per_s == Approx(100).epsilon(1e-3));  // 50 / (1 - 0.5)
  CHECK(half->binding.kind == RowKind::kBandwidth);
}

TEST_CASE("recommend plans the cache in the memory the training process leaves, a rank each on the host") {
  // As above, storage-bound without a cache; 1 GiB of memory, of which the
  // training process holds 400 MiB at its peak: 624 MiB is left, so 3/4 of
  // the dataset (768 MiB, which the whole 1 GiB would hold) no longer fits.
  LoaderProfile p = Loader();
  p.dataset_bytes = 1ull << 30;
  p.dataset_items = 1024;
  p.bytes_per_sample = {1 << 20, true, "read_bytes"};
  p.storage_bandwidth = {50 << 20, true, "observed"};
  p.main_rss_bytes = 400 << 20;
  RecommendOptions o;
  o.cores = 8;
  o.memory_bytes = 1ull << 30;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  CHECK(r->job_memory_bytes == (400ull << 20));
  CHECK(r->PlanMemoryBytes(o.memory_bytes) == (624ull << 20));
  CHECK(r->cache.policy == CachePolicy::kStatic);
  CHECK(r->cache.bytes == (512ull << 20));
  CHECK(r->lp_samples_per_s == Approx(100).epsilon(1e-3));  // 50 / (1 - 0.5)
  // Two ranks on the host, 400 MiB each: 224 MiB left, under a quarter of the dataset.
  p.ranks_on_host = 2;
  auto ranks = Recommend(p, o);
  REQUIRE(ranks.ok());
  CHECK(ranks->job_memory_bytes == (800ull << 20));
  CHECK(ranks->cache.bytes == 0);
  // The process alone fills the memory: nothing to plan, said in one line.
  p.ranks_on_host = 1;
  p.main_rss_bytes = 1ull << 30;
  auto full = Recommend(p, o);
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().message.find("the training process alone holds 1.00 GiB (peak RSS) of the 1.00 GiB memory") != std::string::npos);
}

// A cold profile of 1 GiB of files, 1 MiB a sample: 0.2 CPU s a batch of 10
// (compute 0.05 s), of which 0.15 the storage misses cost (fitted); 2 cores, 4 GiB.
namespace {
LoaderProfile ColdFilesLoader() {
  LoaderProfile p = Loader();
  p.cpu_s_per_batch = 0.2;
  p.dataset_bytes = 1ull << 30;
  p.dataset_items = 1024;
  p.bytes_per_sample = {1 << 20, true, "dataset"};
  p.storage_bytes_per_batch = 10 << 20;
  p.cpu_s_per_storage_byte = {0.15 / (10 << 20), true, "fit"};
  return p;
}
RecommendOptions TwoCores() {
  RecommendOptions o;
  o.cores = 2;
  o.memory_bytes = 4ull << 30;
  return o;
}
}  // namespace

TEST_CASE("recommend counts the main loop's receive cost and the CPU a cache saves on storage misses") {
  LoaderProfile p = ColdFilesLoader();  // 0.02 CPU s a sample, of which 0.015 for storage misses (cold: hit 0)
  p.receive_s_per_batch = 0.0125;  // the main thread unpickles each batch: it ingests 10 / 0.0625 = 160 samples/s
  auto r = Recommend(p, TwoCores());
  REQUIRE(r.ok());
  // Without a cache 2 cores give 100 samples/s; a static full cache leaves 0.005 CPU s a sample (400 samples/s),
  // so the main loop's 160 samples/s binds, not compute's 200.
  CHECK(r->cache.point == CachePoint::kRawFiles);
  CHECK(r->lp_samples_per_s == Approx(160).epsilon(1e-3));
  CHECK(r->binding.kind == RowKind::kIngest);
  // The LP's plan (half the dataset cached: 0.125 CPU s a batch, 2 workers) just
  // meets the main loop's 62.5 ms. Predicted with the simulation, the two
  // always-busy workers share the 2 cores with the main thread's receive
  // (2/3 of a core each): 50 ms + 12.5 ms x 3/2 a step.
  CHECK(r->workers == 2);
  CHECK(r->predicted.samples_per_s == Approx(10 / (0.05 + 0.0125 * 1.5)).epsilon(1e-3));
}

TEST_CASE("recommend keeps the main process fetching when receiving a batch from a worker costs more than making it") {
  LoaderProfile p = Loader();  // a 50 ms step, batches of 10
  p.workers = 2;
  p.profiled_cores = 2;
  p.cpu_s_per_batch = 0.01;       // 10 ms of CPU to fetch a batch
  p.produce_s_per_batch = 0.01;
  p.produce_p99_s = 0.01;
  p.receive_s_per_batch = 0.03;   // 30 ms for the main thread to receive one from a worker
  auto r = Recommend(p, TwoCores());
  REQUIRE(r.ok());
  // With workers the main loop pays the step and the receive: 10 / 0.08 = 125 samples/s.
  // Without, the step and the fetch: 10 / 0.06 = 166.7 samples/s.
  CHECK(r->workers == 0);
  CHECK(r->predicted.samples_per_s == Approx(10 / 0.06).epsilon(0.01));
  CHECK(r->lp_workers >= 1);
  CHECK(r->lp_workers_samples_per_s == Approx(10 / 0.08).epsilon(0.01));
  // A cheap receive (1 ms): workers overlap the fetch with the step, 10 / 0.051.
  p.receive_s_per_batch = 0.001;
  r = Recommend(p, TwoCores());
  REQUIRE(r.ok());
  CHECK(r->workers >= 1);
  CHECK(r->lp_workers == 0);
  CHECK(r->predicted.samples_per_s == Approx(10 / 0.051).epsilon(0.01));
}

TEST_CASE("recommend gives a cache plan's floor when the miss CPU it saves is an estimate, not a fit") {
  LoaderProfile p = ColdFilesLoader();
  const RecommendOptions o = TwoCores();
  const auto floor_line = [](const Recommendation& r) {
    for (const auto& a : r.assumptions)
      if (a.find("(the floor)") != std::string::npos) return a;
    return std::string();
  };
  auto fitted = Recommend(p, o);
  REQUIRE(fitted.ok());
  REQUIRE(fitted->cache.point == CachePoint::kRawFiles);
  CHECK(floor_line(*fitted).empty());
  p.cpu_s_per_storage_byte.measured = false;  // estimated from system time
  auto estimated = Recommend(p, o);
  REQUIRE(estimated.ok());
  REQUIRE(estimated->cache.point == CachePoint::kRawFiles);
  const std::string line = floor_line(*estimated);
  // Misses costing no CPU: the 2 workers keep 0.2 CPU s a batch on 2 cores, 10 / 0.1 = 100 samples/s at most.
  CHECK_THAT(line, Catch::Contains("with misses costing no CPU beyond their I/O (the floor) the plan predicts"));
  const double floor = std::stod(line.substr(line.find("predicts ") + 9));
  CHECK(floor <= 100 * 1.001);
  CHECK(floor < estimated->predicted.samples_per_s);
}

TEST_CASE("recommend charges each batch its worker loop CPU, which no cache saves") {
  LoaderProfile p = Loader();  // 0.1 CPU s a batch of 10 in the fetch, compute ingests 200 samples/s
  p.worker_loop_cpu_s_per_batch = {0.025, true, "sampler"};  // + 0.0025 CPU s a sample pickling and sending
  RecommendOptions o;
  o.cores = 1.5;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  // 1.5 cores over 0.0125 CPU s a sample: 120 samples/s (150 without the loop).
  CHECK(r->lp_samples_per_s == Approx(120).epsilon(1e-3));
  CHECK(r->binding.kind == RowKind::kCores);
  CHECK(r->advice == "one more core adds 80.0 samples/s");
}

TEST_CASE("recommend charges a profile without workers the timed collate into shared memory") {
  LoaderProfile p = Loader();  // 0.1 CPU s a batch of 10 in the fetch, compute ingests 200 samples/s
  p.workers = 0;
  p.shm_collate_cpu_s_per_batch = {0.05, true, "timed"};  // + 0.005 CPU s a sample in a worker
  RecommendOptions o;
  o.cores = 1.5;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  // 1.5 cores over 0.015 CPU s a sample: 100 samples/s (150 without it).
  CHECK(r->lp_samples_per_s == Approx(100).epsilon(1e-3));
  p.workers = 2;  // measured with workers: already in the fetch spans
  CHECK(Recommend(p, o)->lp_samples_per_s == Approx(150).epsilon(1e-3));
}

TEST_CASE("recommend charges the step's CPU per sample, not the profile's share of the cores, which held its fetches") {
  // Profiled without workers: the main process fetched (100 ms of CPU) and ran
  // a CPU-bound 50 ms step each batch of 10, keeping one core busy.
  LoaderProfile p = Loader();
  p.workers = 0;
  p.compute_s_per_batch = 0.05;
  p.compute_cpu_s_per_batch = {0.05, true, "test"};
  p.main_cpu_cores = 1;
  RecommendOptions o;
  o.cores = 2;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  // 0.01 CPU s a sample in the workers and 0.005 in the step over 2 cores:
  // 133.3 samples/s (the profile's core for the main process, fetches and all,
  // left the workers one: 100).
  CHECK(r->lp_samples_per_s == Approx(2 / 0.015).epsilon(1e-3));
  // The simulation agrees: 2 workers and the step, 150 ms of CPU a batch over 2 cores.
  CHECK(r->workers == 2);
  CHECK(r->predicted.samples_per_s == Approx(2 / 0.015).epsilon(0.01));
}

TEST_CASE("recommend cuts a parallel step's intra-op threads when its workers would hold it up") {
  // Profiled without workers on 2 cores: 30 ms of fetch CPU and a step of 5 ms
  // on 2 intra-op threads (10 ms of work) a batch of 10.
  LoaderProfile p = Loader();
  p.workers = 0;
  p.cpu_s_per_batch = 0.030;
  p.compute_s_per_batch = 0.005;
  p.compute_cpu_s_per_batch = {0.010, true, "test"};
  p.profiled_cores = 2;
  p.intra_op_threads = 2;
  RecommendOptions o;
  o.cores = 2;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  // Any worker beside the step's 2 threads oversubscribes the 2 cores. On one
  // thread the step's 10 ms run beside the workers: one worker makes a batch
  // per 30 ms (333 samples/s), two share the cores with the step, 40 ms of CPU
  // a batch over 2 cores (500 samples/s).
  CHECK(r->step_threads == 1);
  CHECK(r->predicted.step_threads == 1);
  CHECK(r->predicted.samples_per_s == Approx(r->workers >= 2 ? 500 : 1000.0 / 3).epsilon(0.01));
  p.intra_op_threads = 0;  // not recorded: the threads are left alone
  CHECK(Recommend(p, o)->step_threads == 0);
}

TEST_CASE("recommend explains a memory budget below one worker and a machine without spare cores") {
  LoaderProfile p = Loader();
  p.worker_rss_bytes = 2e9;
  RecommendOptions o;
  o.cores = 4;
  o.memory_bytes = 1ull << 30;
  auto r = Recommend(p, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("below one DataLoader worker's RSS") != std::string::npos);
  p.worker_rss_bytes = 0;
  p.main_cpu_cores = 4;
  o.memory_bytes = 0;
  auto busy = Recommend(p, o);
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().message.find("no cores are left") != std::string::npos);
  o.cores = 0;
  CHECK(Recommend(p, o).error().kind == stallprof::ErrorKind::kUsage);
}

TEST_CASE("recommend proposes the fewest workers the simulation predicts within 1% of the LP's pool") {
  // A stream of 3 shards of 15 batches, measured over 2 workers (30 and 15
  // batches an epoch), each batch 10 ms off CPU and 1 ms of CPU, a 1 ms step:
  // the LP, which sees rates only, wants a worker per 11 ms of latency; with
  // 3 shards a 4th worker gets no data, so 3 predict as fast as the LP's pool.
  LoaderProfile p = Loader();
  p.workers = 2;
  p.compute_s_per_batch = 0.001;
  p.cpu_s_per_batch = 0.001;
  p.io_s_per_batch = 0.010;
  p.produce_s_per_batch = p.produce_p99_s = 0.011;
  p.epochs = 4;
  p.batches_per_epoch = 45;
  p.stream_worker_batches = {30, 15};
  RecommendOptions o;
  o.cores = 2;
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  CHECK(r->lp_pool_workers > 3);
  CHECK(r->workers == 3);
  // 3 workers, 15 batches each at 11 ms an epoch of 45: about 45 / 0.166 s.
  CHECK(r->predicted.samples_per_s == Approx(10 * 45 / 0.166).epsilon(0.05));
  CHECK(r->predicted.samples_per_s >= 0.99 * r->lp_pool_samples_per_s);
}

TEST_CASE("recommend plans each rank of a host on its share of the host's cores") {
  // Two ranks on the host run this loader; each was profiled on its share (1 core).
  LoaderProfile p = Loader();  // 0.01 CPU s/sample, compute ingests 200 samples/s
  p.ranks_on_host = 2;
  RecommendOptions o;
  o.cores = 3;  // the host's: 1.5 a rank, 150 samples/s from CPU
  auto r = Recommend(p, o);
  REQUIRE(r.ok());
  CHECK(r->lp_samples_per_s == Approx(150).epsilon(1e-3));
  CHECK(r->workers == 2);
  CHECK(r->binding.kind == RowKind::kCores);
  // The profiled configuration on the profiled host (2 cores, 1 a rank): 1 worker, 100 samples/s.
  CHECK(r->as_profiled.samples_per_s == Approx(100).epsilon(0.02));
}
