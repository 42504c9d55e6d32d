#include <catch2/catch.hpp>

#include <tuple>

#include "analysis/analysis.h"
#include "analysis/profile.h"
#include "analysis/ranks.h"
#include "test_analysis_trace_builder.h"

using namespace stallprof;
using namespace stallprof::analysis;
using namespace stallprof::testing;

namespace {

// One rank = one main process with its own loader and one worker.
void AddRank(TraceBuilder& b, uint32_t pid, int32_t rank, uint64_t wait) {
  b.Process(pid, 1, rank);
  b.Process(pid + 1, pid, rank);
  b.Config(pid, 1, "name", "train");
  b.Config(pid, 1, "batch_size", 10);
  LoopSpec spec;
  spec.pid = pid;
  spec.thread = b.Thread(pid, pid);
  spec.iterations = 20;
  spec.wait = wait;
  spec.compute = 30 * kMs;
  AddLoop(b, spec);
  uint32_t w = b.Thread(pid + 1, pid + 1);
  for (int i = 0; i < 20; ++i) b.Span(w, names::kFetch, spec.start + i * 40 * kMs, 35 * kMs, 1, i, 1 * kMs, 0);
}

// A hand-built analysis of one process iterating one loader: `steps` steps of
// `wait_s` + `compute_s` each, one epoch, 10 samples per step.
LoaderAnalysis Loader(uint32_t pid, const std::string& name, uint64_t steps, double wait_s, double compute_s) {
  LoaderAnalysis l;
  l.pid = pid;
  l.scope = 1;
  l.config.name = name;
  l.config.batch_size = 10;
  const double step_s = wait_s + compute_s;
  l.iterations.resize(steps);
  l.samples = 10.0 * steps;
  l.active_s = steps * step_s;
  l.samples_per_s = l.samples / l.active_s;
  l.wait_all.count = l.wait_steady.count = l.step_all.count = l.step_steady.count = steps;
  l.compute_all.count = l.compute_steady.count = steps;
  l.wait_all.total = l.wait_steady.total = steps * wait_s;
  l.compute_all.total = l.compute_steady.total = steps * compute_s;
  l.step_all.total = l.step_steady.total = steps * step_s;
  l.stall_fraction = wait_s / step_s;
  EpochStats e;
  e.start_ns = 1000 * kMs;
  e.end_ns = e.start_ns + static_cast<uint64_t>(l.active_s * 1e9);
  l.epochs.push_back(e);
  l.iterations.back().return_ns = e.end_ns;
  return l;
}

// One trace holding one process (pid, parent 1) with `rank` and its loader.
TraceAnalysis RankTrace(uint32_t pid, int32_t rank, double wait_s, double compute_s, uint64_t steps = 100) {
  TraceAnalysis t;
  t.path = "rank" + std::to_string(rank) + ".pb";
  t.hostname = "node";
  t.processes.push_back({pid, 1, rank, "python3 train.py"});
  t.loaders.push_back(Loader(pid, "train", steps, wait_s, compute_s));
  return t;
}

// `n` ranks 30 ms compute + 1 ms wait a step, each a little apart (0.1% per
// rank: scheduling noise), in one trace each.
std::vector<TraceAnalysis> Ranks(int n) {
  std::vector<TraceAnalysis> traces;
  for (int r = 0; r < n; ++r) traces.push_back(RankTrace(1000 + r, r, 0.001, 0.030 * (1 + 0.001 * (r % 4))));
  return traces;
}

}  // namespace

TEST_CASE("Ranks in one trace are compared and the slow input-bound rank is the straggler") {
  TraceBuilder b;
  AddRank(b, 100, 0, 1 * kMs);
  AddRank(b, 200, 1, 40 * kMs);
  const auto analysis = Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const auto job = AnalyzeJob({*analysis});
  REQUIRE(job.ok());
  CHECK(job->ranks == std::vector<int32_t>{0, 1});
  REQUIRE(job->loaders.size() == 1);
  const auto& train = job->loaders[0];
  CHECK(train.name == "train");
  REQUIRE(train.ranks.size() == 2);
  CHECK(train.ranks[0].rank == 0);
  CHECK(train.ranks[1].rank == 1);
  REQUIRE(train.stragglers.size() == 1);
  CHECK(train.stragglers[0].rank == 1);
  CHECK(train.stragglers[0].cause == StragglerCause::kMoreWait);
  CHECK(train.ranks[1].straggler);
  CHECK_FALSE(train.ranks[0].straggler);
  // Epochs end at the StopIteration next(), after the last batch's step.
  double t0 = 20 * (0.001 + 0.030), t1 = 20 * (0.040 + 0.030);
  CHECK(train.ranks[0].epoch_time_s == Approx(t0));
  CHECK(train.ranks[1].epoch_time_s == Approx(t1));
  CHECK(train.ranks[1].wait_per_step_s == Approx(0.040));
  CHECK(train.ranks[1].compute_per_step_s == Approx(0.030));
  CHECK(train.ranks[1].steady_time_s == Approx(20 * 0.070));
  CHECK(train.global_samples_per_s == Approx(400 / t1));
  CHECK(train.sum_local_samples_per_s == Approx(200 / t0 + 200 / t1));
  CHECK(train.scaling_efficiency == Approx((400 / t1) / (200 / t0 + 200 / t1)));
  CHECK(job->processes.empty());
}

TEST_CASE("Ranks in one trace share its host's cores in their profiles") {
  TraceBuilder b;
  b.trace.header.usable_cores = 8;
  AddRank(b, 100, 0, 1 * kMs);
  AddRank(b, 200, 1, 1 * kMs);
  const auto profiles = MeasureProfiles(b.trace, {});
  REQUIRE(profiles.ok());
  REQUIRE(profiles->size() == 2);
  for (const auto& p : *profiles) {
    CHECK(p.ranks_on_host == 2);
    CHECK(p.profiled_cores == Approx(4));
  }
  TraceBuilder alone;  // one rank: the host's cores are its own
  alone.trace.header.usable_cores = 8;
  AddRank(alone, 100, 0, 1 * kMs);
  const auto one = MeasureProfiles(alone.trace, {});
  REQUIRE(one.ok());
  CHECK(one->front().ranks_on_host == 1);
  CHECK(one->front().profiled_cores == Approx(8));
}

TEST_CASE("Traces from different hosts are aligned on their realtime clocks") {
  TraceBuilder a, b;
  AddRank(a, 100, 0, 1 * kMs);
  AddRank(b, 100, 1, 1 * kMs);
  // Host b's monotonic clock is 500 s ahead; both started at the same wall-clock instant.
  b.trace.header.start_monotonic_ns = 500000 * kMs;
  for (auto& s : b.trace.spans.start_ns) s += 500000 * kMs;
  const auto ra = Analyze(a.trace, {});
  const auto rb = Analyze(b.trace, {});
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  const auto job = AnalyzeJob({*ra, *rb});
  REQUIRE(job.ok());
  REQUIRE(job->loaders.size() == 1);
  const auto& ranks = job->loaders[0].ranks;
  CHECK(ranks[0].start_realtime_s == Approx(ranks[1].start_realtime_s));
  CHECK(job->loaders[0].aligned_span_s == Approx(20 * 0.001 + 19 * 0.030));
}

TEST_CASE("A single process is not a job") {
  TraceBuilder b;
  AddRank(b, 100, 0, 1 * kMs);
  const auto analysis = Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const auto job = AnalyzeJob({*analysis});
  REQUIRE_FALSE(job.ok());
  CHECK(job.error().kind == ErrorKind::kUnsupported);
}

TEST_CASE("Three processes without rank identity are processes, not ranks, and none is a straggler") {
  // mnist_hogwild: two trainers (children of the main process) and a test
  // process, no RANK anywhere; one trainer is 50% slower.
  TraceAnalysis t;
  t.path = "hogwild.pb";
  t.processes = {{100, 1, -1, "python3 main.py"}, {101, 100, -1, "python3 main.py"}, {102, 100, -1, "python3 main.py"},
                 {103, 100, -1, "python3 main.py"}};
  t.loaders = {Loader(101, "train", 100, 0.001, 0.030), Loader(102, "train", 100, 0.016, 0.030),
               Loader(103, "test", 20, 0.001, 0.010)};
  const auto job = AnalyzeJob({t});
  REQUIRE(job.ok());
  CHECK(job->ranks.empty());
  CHECK(job->loaders.empty());
  REQUIRE(job->processes.size() == 3);
  CHECK(job->processes[0].pid == 101);
  CHECK(job->processes[0].ppid == 100);
  REQUIRE(job->processes[0].loaders.size() == 1);
  CHECK(job->processes[0].loaders[0].name == "train");
  CHECK(job->processes[0].loaders[0].samples_per_s == Approx(10 / 0.031));
  CHECK(job->processes[2].loaders[0].name == "test");
}

TEST_CASE("Two ranks 2% apart have no straggler") {
  auto traces = std::vector<TraceAnalysis>{RankTrace(100, 0, 0.001, 0.030), RankTrace(200, 1, 0.001, 0.030 + 0.02 * 0.031)};
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  REQUIRE(job->loaders.size() == 1);
  const auto& train = job->loaders[0];
  CHECK(train.stragglers.empty());
  CHECK_FALSE(train.ranks[1].straggler);
  // What the margin was compared with, for the report.
  CHECK(train.slowest_rank == 1);
  CHECK(train.slowest_slower_by == Approx(0.02));
  CHECK(train.slowest_margin == Approx(kStragglerMinMargin));
}

TEST_CASE("Ranks in lock step that started their epochs apart have no straggler") {
  // DDP: both ranks run 20 steps of 1 ms wait + 30 ms compute and finish
  // together, but rank 0 created its iterator 250 ms earlier and its first
  // batch took 400 ms (worker start-up) against rank 1's 150 ms: its epoch
  // time is 250 ms (18%) longer, its pace the same.
  TraceBuilder b;
  for (auto [pid, rank, start, first_wait] : {std::tuple{100u, 0, 1000 * kMs, 400 * kMs}, std::tuple{200u, 1, 1250 * kMs, 150 * kMs}}) {
    b.Process(pid, 1, rank);
    b.Config(pid, 1, "name", "loader1");
    b.Config(pid, 1, "batch_size", 10);
    LoopSpec spec;
    spec.pid = pid;
    spec.thread = b.Thread(pid, pid);
    spec.start = start;
    spec.wait = 1 * kMs;
    spec.warmup_wait_iters = 1;
    spec.warmup_wait = first_wait;
    AddLoop(b, spec);
  }
  const auto analysis = Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const auto job = AnalyzeJob({*analysis});
  REQUIRE(job.ok());
  const auto& l = job->loaders[0];
  CHECK(l.ranks[0].epoch_time_s - l.ranks[1].epoch_time_s == Approx(0.250));
  CHECK(l.ranks[0].steady_time_s == Approx(l.ranks[1].steady_time_s));
  CHECK(l.stragglers.empty());
}

TEST_CASE("Eight ranks with one 30% slower from waiting name that rank, cause more wait, with the figures") {
  auto traces = Ranks(8);
  // Rank 5 waits 1 ms + 30% of the 31 ms step more: 10.3 ms a step.
  traces[5] = RankTrace(1005, 5, 0.001 + 0.3 * 0.031, 0.030 * (1 + 0.001 * (5 % 4)));
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  CHECK(job->ranks.size() == 8);
  REQUIRE(job->loaders.size() == 1);
  const auto& train = job->loaders[0];
  REQUIRE(train.stragglers.size() == 1);
  const auto& s = train.stragglers[0];
  CHECK(s.rank == 5);
  CHECK(s.cause == StragglerCause::kMoreWait);
  CHECK(s.slower_by == Approx(0.30).margin(0.005));
  CHECK(s.margin == Approx(kStragglerMinMargin));
  CHECK(s.extra_wait_s == Approx(100 * 0.3 * 0.031));
  CHECK(s.extra_compute_s == Approx(0).margin(100 * 0.0001));
  CHECK(s.extra_work_s == Approx(0));
  CHECK_THAT(s.reason, Catch::StartsWith("more wait: 10.30 ms waiting for data per step against 1.00 ms on the others"));
  // 100 x (10.3 + 30.03) ms against the others' median 100 x (1 + 30.06) ms.
  CHECK_THAT(s.reason, Catch::EndsWith("steady time 4.03 s against the others' median 3.11 s (+29.8%, margin 5.0%)"));
  for (const auto& r : train.ranks) CHECK(r.straggler == (r.rank == 5));
}

TEST_CASE("A straggler's cause is more compute per step or more steps when that is where its extra time goes") {
  auto traces = Ranks(4);
  traces[1] = RankTrace(1001, 1, 0.001, 0.045);           // 45 ms of compute against 30
  traces[2] = RankTrace(1002, 2, 0.001, 0.030, 150);      // 150 steps against 100
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  const auto& train = job->loaders[0];
  REQUIRE(train.stragglers.size() == 2);
  CHECK(train.stragglers[0].rank == 1);
  CHECK(train.stragglers[0].cause == StragglerCause::kMoreCompute);
  CHECK_THAT(train.stragglers[0].reason, Catch::StartsWith("more compute per step: 45.00 ms of compute per step against 30."));
  CHECK(train.stragglers[1].rank == 2);
  CHECK(train.stragglers[1].cause == StragglerCause::kMoreWork);
  CHECK_THAT(train.stragglers[1].reason, Catch::StartsWith("more samples or steps: 150 steps (1500 samples) against 100 steps"));
}

TEST_CASE("The margin widens with the other ranks' spread") {
  // Ranks spread +-10% around 31 ms a step: 3 x MAD / median is about 30%, so
  // a rank 20% slower is within their run-to-run spread.
  std::vector<TraceAnalysis> traces;
  const double factors[] = {0.9, 1.1, 0.9, 1.1, 0.9, 1.1, 1.0, 1.2};
  for (int r = 0; r < 8; ++r) traces.push_back(RankTrace(1000 + r, r, 0.001, 0.031 * factors[r] - 0.001));
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  const auto& train = job->loaders[0];
  CHECK(train.stragglers.empty());
  CHECK(train.slowest_rank == 7);
  CHECK(train.slowest_margin > 0.2);
}

TEST_CASE("Loaders are matched across ranks by name, not by process or scope") {
  auto traces = Ranks(2);
  traces[0].loaders.push_back(Loader(1000, "val", 10, 0.001, 0.010));
  traces[1].loaders.push_back(Loader(1001, "val", 10, 0.001, 0.010));
  traces[1].loaders.back().scope = 7;
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  REQUIRE(job->loaders.size() == 2);
  CHECK(job->loaders[0].name == "train");  // most steps first
  CHECK(job->loaders[1].name == "val");
  CHECK(job->loaders[1].ranks.size() == 2);
}

TEST_CASE("A rank's subprocess that inherited its RANK is a process, a rank under a launcher shell is a rank") {
  TraceAnalysis t;
  t.path = "job.pb";
  // RANK=0 bash (iterates nothing) -> python rank 0 -> a child with RANK=0 iterating its own loader;
  // python rank 1 directly.
  t.processes = {{50, 1, 0, "bash run.sh"}, {100, 50, 0, "python3 train.py"}, {101, 100, 0, "python3 -c pool"},
                 {200, 1, 1, "python3 train.py"}};
  t.loaders = {Loader(100, "train", 100, 0.001, 0.030), Loader(101, "shard", 10, 0.001, 0.030),
               Loader(200, "train", 100, 0.001, 0.030)};
  const auto job = AnalyzeJob({t});
  REQUIRE(job.ok());
  CHECK(job->ranks == std::vector<int32_t>{0, 1});
  REQUIRE(job->processes.size() == 1);
  CHECK(job->processes[0].pid == 101);
  CHECK(job->processes[0].inherited_rank == 0);
}

TEST_CASE("A process's rank comes from RANK, else torch.distributed's rank the hook recorded, else LOCAL_RANK") {
  TraceBuilder b;
  AddRank(b, 100, -1, 1 * kMs);
  AddRank(b, 200, -1, 1 * kMs);
  b.Config(100, 1, "rank", 3);  // init_process_group(rank=3) without RANK in the environment
  b.trace.processes[2].local_rank = 2;  // pid 200
  const auto analysis = Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const auto job = AnalyzeJob({*analysis});
  REQUIRE(job.ok());
  CHECK(job->ranks == std::vector<int32_t>{2, 3});
  CHECK(job->processes.empty());
}

TEST_CASE("64 ranks with one straggler: the spread over ranks names it") {
  auto traces = Ranks(64);
  traces[17] = RankTrace(1017, 17, 0.011, 0.030);
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  CHECK(job->ranks.size() == 64);
  REQUIRE(job->loaders.size() == 1);
  const auto& train = job->loaders[0];
  REQUIRE(train.stragglers.size() == 1);
  CHECK(train.stragglers[0].rank == 17);
  CHECK(train.epoch_time_s.max == Approx(100 * 0.041));
  CHECK(train.epoch_time_s.min == Approx(100 * 0.031));
  CHECK(train.samples_per_s.max == Approx(10 / 0.031));
}

TEST_CASE("Sibling processes sharing one RANK, their parent iterating nothing, are processes, not that rank") {
  // Rank 0 runs a pool of two trainers (they inherit RANK=0) and iterates
  // nothing itself; rank 1 trains alone.
  TraceAnalysis t;
  t.path = "job.pb";
  t.processes = {{100, 1, 0, "python3 train.py"}, {101, 100, 0, "python3 train.py"}, {102, 100, 0, "python3 train.py"},
                 {200, 1, 1, "python3 train.py"}};
  t.loaders = {Loader(101, "train", 100, 0.001, 0.030), Loader(102, "train", 100, 0.001, 0.060),
               Loader(200, "train", 100, 0.001, 0.030)};
  const auto job = AnalyzeJob({t});
  REQUIRE(job.ok());
  CHECK(job->ranks == std::vector<int32_t>{1});
  REQUIRE(job->processes.size() == 2);
  CHECK(job->processes[0].inherited_rank == 0);
  CHECK(job->processes[1].inherited_rank == 0);
}

TEST_CASE("A loader's rank is its process's rank identity, torch.distributed's included") {
  TraceBuilder b;
  AddRank(b, 100, -1, 1 * kMs);
  AddRank(b, 200, -1, 1 * kMs);
  b.Config(100, 1, "rank", 1);
  b.Config(200, 1, "rank", 0);
  const auto analysis = Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  REQUIRE(analysis->loaders.size() == 2);
  CHECK(analysis->loaders[0].pid == 200);  // ordered by rank
  CHECK(analysis->loaders[0].rank == 0);
  CHECK(analysis->loaders[1].rank == 1);
}
