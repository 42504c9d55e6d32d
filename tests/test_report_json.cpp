#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "analysis/analysis.h"
#include "report/analysis_report.h"
#include "report/json_writer.h"
#include "test_analysis_trace_builder.h"
#include "test_report_json_check.h"

using namespace stallprof;
using namespace stallprof::report;
using namespace stallprof::testing;

TEST_CASE("JSON strings escape quotes, backslashes, control characters and invalid UTF-8") {
  std::string out;
  AppendJsonString(out, std::string("a\"b\\c\nd\te\x01 \xc3\xa9 \xff", 15));
  CHECK(out == "\"a\\\"b\\\\c\\nd\\te\\u0001 \xc3\xa9 \\ufffd\"");
}

TEST_CASE("JSON strings replace surrogates and overlong sequences, which strict parsers reject") {
  std::string out;
  AppendJsonString(out, "\xed\xa0\x80|\xc0\xaf|\xf4\x90\x80\x80");  // U+D800, overlong '/', above U+10FFFF
  CHECK(out == "\"\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

TEST_CASE("The JSON writer separates members and elements with commas at every depth") {
  std::string out;
  JsonWriter w(out);
  w.BeginObject().Field("a", 1).Key("b").BeginArray().Int(1).BeginObject().Field("c", true).EndObject().Null().EndArray();
  w.Field("d", 0.5).Field("e", std::numeric_limits<double>::infinity()).Field("f", "x").EndObject();
  CHECK(out == R"({"a":1,"b":[1,{"c":true},null],"d":0.5,"e":null,"f":"x"})");
}

TEST_CASE("The spaced JSON style puts a space after commas and colons and keeps 6 significant digits") {
  std::string out;
  JsonWriter w(out, kSpacedJson);
  w.BeginObject().Field("a", 1.0 / 3).Key("b").BeginArray().Number(1234567.0).Number(2).Null().EndArray();
  w.Field("c", std::numeric_limits<double>::quiet_NaN()).Field("d", uint64_t{68719476736}).EndObject();
  CHECK(out == R"({"a": 0.333333, "b": [1.23457e+06, 2, null], "c": null, "d": 68719476736})");
}

TEST_CASE("The tests' JSON parser accepts the writer's output and rejects what strict consumers reject") {
  const auto v = ParseJson(R"( {"a": [1, -2.5e-3, "x\"\u00e9"], "b": {"c": null, "d": true}} )");
  CHECK(v.at("a").at(1).get<double>() == -0.0025);
  CHECK(v.at("a").at(2).get<std::string>() == "x\"\xc3\xa9");
  CHECK(v.at("b").at("c").is_null());
  CHECK(Keys(ParseJson(R"({"z": 1, "a": {"k": 1}, "m": {"k": 2}})")) == std::vector<std::string>{"z", "a", "m"});
  for (const char* bad : {"{\"a\": nan}", "{\"a\": inf}", "[1,]", "{\"a\" 1}", "[1] x", "01", "\"a\tb\"", "{'a': 1}",
                          "{\"a\": 1, \"a\": 2}", "[{\"b\": {\"a\": 1}, \"c\": 0, \"c\": 0}]"})
    CHECK_THROWS_AS(ParseJson(bad), Json::parse_error);
  CHECK_THROWS_AS(v.at("no such key"), Json::out_of_range);
}

namespace {
analysis::TraceAnalysis Analyzed() {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "name", "train \"main\"");
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 20;
  AddLoop(b, spec);
  auto result = analysis::Analyze(b.trace, {});
  REQUIRE(result.ok());
  return *result;
}
}  // namespace

TEST_CASE("The verdict line names the loader, the class, the stall and the bottleneck") {
  const auto a = Analyzed();
  const std::string line = VerdictLine(a.loaders[0]);
  CHECK_THAT(line, Catch::StartsWith("train \"main\": HIGHLY input-bound: 25% of step time waiting for data"));
  CHECK_THAT(line, Catch::Contains("; bottleneck: "));
}

TEST_CASE("The verdict line says a fetch stall came from the first epoch's cold reads when later epochs found them in memory") {
  auto l = Analyzed().loaders.at(0);
  REQUIRE(l.split.available);
  l.split.fetch_stall_s = 0.1 * l.split.step_s;
  l.epochs.resize(2);
  l.epochs[0].storage_s = 0.5;  // the page cache warming
  l.epochs[1].storage_s = 0.001;
  CHECK_THAT(VerdictLine(l), Catch::Contains("(fetch 10% from the first epoch's cold reads, prep "));
  l.epochs[1].storage_s = 0.4;  // every epoch reads from the device: a steady cost
  CHECK_THAT(VerdictLine(l), Catch::Contains("(fetch 10%, prep "));
}

TEST_CASE("The verdict line adds the whole run's start-up when it is worth telling beside the steady verdict") {
  // 3 epochs of 10 steps (1 ms wait, 20 ms compute) behind 500 ms of worker
  // start-up each: the steady state is compute-bound, the run mostly start-up.
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "name", "train");
  b.Config(100, 1, "num_workers", 2);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.epochs = 3;
  spec.iterations = 10;
  spec.wait = kMs;
  spec.compute = 20 * kMs;
  spec.iter_create = 500 * kMs;
  AddLoop(b, spec);
  auto result = analysis::Analyze(b.trace, {});
  REQUIRE(result.ok());
  const auto& l = result->loaders.at(0);
  // 3 x (500 ms + the epoch's first next(), 1 ms) of 1500 + 3 x 210 ms.
  CHECK(analysis::WholeRunStartupShare(l) == Approx(1503.0 / 2130).epsilon(0.001));
  CHECK_THAT(VerdictLine(l), Catch::EndsWith("; whole run: 71% epoch start-up"));
  // Compute-bound: the start-up advice comes after the bottleneck's.
  REQUIRE(l.advice.size() >= 2);
  CHECK_THAT(l.advice[1], Catch::StartsWith("epoch start-up (71%)"));
  // Short of 5% of the run it is not told.
  CHECK_THAT(VerdictLine(Analyzed().loaders.at(0)), !Catch::Contains("whole run"));
  // Input-bound (10 ms waits on workers that left no fetch spans: other
  // blocking, 25% of the steady state) but with more of the run in start-up:
  // its advice comes first.
  TraceBuilder h;
  h.Process(100, 1);
  h.Config(100, 1, "num_workers", 2);
  LoopSpec slow_start;
  slow_start.thread = h.Thread(100, 100);
  slow_start.epochs = 2;
  slow_start.iter_create = 1000 * kMs;
  AddLoop(h, slow_start);
  auto blocked = analysis::Analyze(h.trace, {});
  REQUIRE(blocked.ok());
  const auto& hl = blocked->loaders.at(0);
  CHECK(hl.bottleneck == analysis::Cause::kOtherBlocking);
  REQUIRE(hl.advice.size() >= 2);
  CHECK_THAT(hl.advice[0], Catch::StartsWith("epoch start-up ("));
  CHECK_THAT(hl.advice[1], Catch::StartsWith("other blocking (25%)"));
}

TEST_CASE("The analysis JSON carries the schema id and the loader's figures") {
  const auto a = Analyzed();
  const std::string json = AnalysisJson({a}, nullptr, 5);
  CHECK_THAT(json, Catch::StartsWith("{\"schema\":\"stallprof.analysis/2\",\"warmup\":5,"));
  CHECK_THAT(json, Catch::Contains("\"name\":\"train \\\"main\\\"\""));
  CHECK_THAT(json, Catch::Contains("\"stall_fraction\":0.25"));
  CHECK_THAT(json, Catch::Contains("\"verdict\":\"highly_input_bound\""));
  CHECK_THAT(json, Catch::Contains("\"job\":null}"));
}

TEST_CASE("The analysis JSON carries both accounts, one line per cause, summing to the wall time") {
  const auto a = Analyzed();
  const auto v = ParseJson(AnalysisJson({a}, nullptr, 5));
  const auto& l = v.at("loaders").at(0);
  // No fetch spans: the 10 ms waits are the DataLoader's own code in next() (handoff).
  CHECK(l.at("bottleneck").get<std::string>() == "handoff");
  for (const char* view : {"whole_run", "steady"}) {
    const auto& account = l.at("account").at(view);
    REQUIRE(account.at("lines").size() == analysis::kCauseCount);
    double sum = 0;
    for (const auto& line : account.at("lines")) {
      sum += line.at("seconds").get<double>();
      CHECK_FALSE(line.at("evidence").get<std::string>().empty());
    }
    CHECK(sum == Approx(account.at("wall_s").get<double>()));
  }
  CHECK(l.at("account").at("steady").at("lines").at(0).at("cause").get<std::string>() == "compute");
  CHECK(l.at("account").at("steady").at("wall_s").get<double>() == Approx(15 * 0.040));
  CHECK(l.at("advice").size() >= 1);
}

TEST_CASE("The analysis JSON gives each epoch's mean step and wait, the first epoch's comparison and the step's measures") {
  // One epoch of 30 ms steps, then one of 10 ms steps; 10 ms waits throughout.
  TraceBuilder b;
  b.Process(100, 1);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.compute = 30 * kMs;
  spec.start = AddLoop(b, spec);
  spec.compute = 10 * kMs;
  spec.first_epoch = 1;
  AddLoop(b, spec);
  auto result = analysis::Analyze(b.trace, {});
  REQUIRE(result.ok());
  const auto v = ParseJson(AnalysisJson({*result}, nullptr, 5));
  const auto& l = v.at("loaders").at(0);
  CHECK(l.at("epochs").at(0).at("compute_per_batch_s").get<double>() == Approx(0.030));
  CHECK(l.at("epochs").at(1).at("compute_per_batch_s").get<double>() == Approx(0.010));
  CHECK(l.at("epochs").at(1).at("wait_per_batch_s").get<double>() == Approx(0.010));
  CHECK(l.at("first_epoch").at("later_samples_per_s").get<double>() /
            l.at("first_epoch").at("first_samples_per_s").get<double>() ==
        Approx(2.0).epsilon(0.01));
  CHECK_THAT(l.at("first_epoch").at("why").get<std::string>(), Catch::StartsWith("later 2.00x faster: the steps took"));
  CHECK(l.at("main_step").is_null());  // no /proc samples of the process
}

TEST_CASE("The text report starts with the verdict and uses colour only when asked") {
  const auto a = Analyzed();
  const std::string plain = AnalysisText({a}, nullptr, 5, Colour::kOff);
  CHECK_THAT(plain, Catch::StartsWith(VerdictLine(a.loaders[0]) + "\n"));
  CHECK(plain.find('\x1b') == std::string::npos);
  const std::string coloured = AnalysisText({a}, nullptr, 5, Colour::kOn);
  CHECK(coloured.find("\x1b[") != std::string::npos);
}

TEST_CASE("Main-thread stages are shown apart from the pipeline's in the text and the JSON") {
  auto a = Analyzed();
  a.loaders.at(0).main_stages = {Stage("augment", 15, 0.090)};
  const std::string text = AnalysisText({a}, nullptr, 5, Colour::kOff);
  const size_t at = text.find("Main-thread stages (yours, between next() calls");
  REQUIRE(at != std::string::npos);
  CHECK(text.find("augment", at) != std::string::npos);
  const auto v = ParseJson(AnalysisJson({a}, nullptr, 5));
  const auto& stages = v.at("loaders").at(0).at("main_stages");
  REQUIRE(stages.size() == 1);
  CHECK(stages.at(0).at("name").get<std::string>() == "augment");
  CHECK(stages.at(0).at("wall_s").get<double>() == Approx(0.090));
}

TEST_CASE("The slowest stage is called the bottleneck in the text and the HTML only when the stages are") {
  // An HDF5 trainer's getitem, 1% utilized under a 75 ms step, was marked
  // "<- bottleneck" beside a verdict of "bottleneck: compute".
  auto a = Analyzed();
  auto& l = a.loaders.at(0);
  analysis::StageStats getitem = Stage("dataloader.getitem", 60, 0.030);
  getitem.parallelism = 1;
  getitem.per_core_rate = getitem.parallel_rate = 2000;
  getitem.bottleneck = true;
  l.stages = {getitem};
  l.bottleneck = analysis::Cause::kCompute;
  const std::string compute_bound = AnalysisText({a}, nullptr, 5, Colour::kOff);
  CHECK_THAT(compute_bound, Catch::Contains("<- slowest stage (the loader's bottleneck is elsewhere)"));
  CHECK(compute_bound.find("<- bottleneck") == std::string::npos);
  l.bottleneck = analysis::Cause::kPrep;
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff), Catch::Contains("<- bottleneck"));
  // The JSON keeps the pipeline's slowest stage either way.
  CHECK(ParseJson(AnalysisJson({a}, nullptr, 5)).at("loaders").at(0).at("stages").at(0).at("bottleneck").get<bool>());
}

TEST_CASE("The text names a loader's start method and prefetch depth only where it has workers") {
  auto a = Analyzed();
  auto& c = a.loaders.at(0).config;
  c.multiprocessing_context = "fork";
  c.num_workers = 2;
  c.prefetch_factor = 4;
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff), Catch::Contains("2 workers (fork), prefetch 4,"));
  c.num_workers = 0;
  const std::string text = AnalysisText({a}, nullptr, 5, Colour::kOff);
  CHECK_THAT(text, Catch::Contains("0 workers (the main process fetches), pin_memory"));
  CHECK(text.find("(fork)") == std::string::npos);
}

TEST_CASE("The text lists the first 8 workers of a loader with more than 12 and sums up the rest") {
  auto a = Analyzed();
  auto& l = a.loaders.at(0);
  l.config.num_workers = 2;
  const auto with_workers = [&](uint32_t n) {
    l.workers.clear();
    for (uint32_t i = 0; i < n; ++i) {
      analysis::WorkerStats w;
      w.pid = 1000 + i;
      w.batches = 10;
      w.mean_produce_s = i < 8 ? 0.010 : 0.020;  // the 9th on: 20 ms a batch
      w.straggler = i == 12;
      l.workers.push_back(w);
    }
    return AnalysisText({a}, nullptr, 5, Colour::kOff);
  };
  const std::string twelve = with_workers(12);
  CHECK_THAT(twelve, Catch::Contains("    1011 "));
  CHECK_THAT(twelve, !Catch::Contains("more workers"));
  const std::string thirty = with_workers(30);
  CHECK_THAT(thirty, Catch::Contains("    1007 "));
  CHECK_THAT(thirty, !Catch::Contains("    1008 "));
  CHECK_THAT(thirty, Catch::Contains("... 22 more workers (not persistent: each epoch starts its own), 220 batches, 20.00 ms a batch, "
                                     "1 straggler(s); every one in --json"));
}

TEST_CASE("The text notes a run mostly outside the loaders' epochs, and the JSON carries the split") {
  auto a = Analyzed();
  a.duration_s = 30;
  a.coverage = {.in_epochs_s = 2, .before_s = 1, .between_s = 0, .after_s = 27};
  const std::string text = AnalysisText({a}, nullptr, 5, Colour::kOff);
  CHECK_THAT(text, Catch::Contains("27.00 s of the run's 30.00 s (90%) passed outside the loaders' epochs"));
  CHECK_THAT(text, Catch::Contains("itertools.cycle(loader)"));
  CHECK_THAT(text, Catch::Contains("run 30.00 s: in the loaders' epochs 2.00 s (7%), before the first 1.00 s"));
  a.coverage = {.in_epochs_s = 28, .before_s = 1, .between_s = 0, .after_s = 1};
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff), !Catch::Contains("outside the loaders' epochs"));
  CHECK_THAT(AnalysisJson({a}, nullptr, 5),
             Catch::Contains(R"("coverage":{"in_epochs_s":28,"before_s":1,"between_s":0,"after_s":1,"before_job_cores":-1,"before_disk_read_bytes":-1})"));
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff), Catch::Contains("(the interpreter's start, imports, set-up), between"));
  // Sampled before the first epoch: how busy the job was and what the device gave.
  a.coverage.before_job_cores = 0.6;
  a.coverage.before_disk_read_bytes = 300 << 20;
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff),
             Catch::Contains("before the first 1.00 s (the interpreter's start, imports, set-up: the job 0.60 cores busy, "
                             "300.0 MiB read from the device), between"));
}

TEST_CASE("The System section says a run's times are a slowed host's from 5% steal") {
  auto a = Analyzed();
  a.system.available = true;
  a.system.steal_measured = true;
  a.system.steal_fraction = 0.049;
  CHECK(StealNote(a).empty());
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff), !Catch::Contains("slowed host"));
  a.system.steal_fraction = 0.172;  // a 1-worker demo run on a host whose two busy vCPUs lost 17%
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff),
             Catch::Contains("the hypervisor took 17.2% of this machine's CPU time: every time here is a slowed host's"));
  a.system.steal_measured = false;  // an older trace: no steal column
  CHECK(StealNote(a).empty());
}

TEST_CASE("The System section puts the job's busy cores against its CPU quota, and says when the quota held it") {
  auto a = Analyzed();
  a.usable_cores = 2;
  a.system.available = true;
  a.system.job_cpu_cores = 0.98;
  a.system.job_cpu_fraction = 0.49;
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff), Catch::Contains("the job kept 0.98 cores busy (49% of 2 usable)\n"));
  CHECK_THAT(AnalysisJson({a}, nullptr, 5), Catch::Contains(R"("usable_cores":2,"cpu_quota_cores":null)"));
  // In a 1-core quota (a container's --cpus=1) the same job spent all of it.
  a.cpu_quota_cores = 1;
  a.system.job_cpu_fraction = 0.98;
  const std::string text = AnalysisText({a}, nullptr, 5, Colour::kOff);
  CHECK_THAT(text, Catch::Contains("the job kept 0.98 cores busy (98% of its CPU quota of 1 core; 2 usable)\n"));
  CHECK_THAT(text, Catch::Contains("the job's CPU cgroup allows 1 core (cpu.cfs_quota_us or cpu.max: a container's CPU "
                                   "limit) and the job kept 0.98 busy: its threads waited for the quota"));
  CHECK_THAT(AnalysisJson({a}, nullptr, 5), Catch::Contains(R"("usable_cores":2,"cpu_quota_cores":1)"));
  a.system.job_cpu_fraction = 0.6;  // the quota left room: no note
  CHECK(CpuQuotaNote(a).empty());
}

TEST_CASE("The System section names other processes' busy cores and how many ran where the job could not") {
  auto a = Analyzed();
  a.usable_cores = 2;
  a.system.available = true;
  a.system.job_cpu_cores = 0.98;
  a.system.job_cpu_fraction = 0.98;
  a.system.outside_busy_measured = true;
  a.system.outside_busy_cores = 0.02;  // the launcher, housekeeping: not named
  CHECK(OtherProcessesText(a).empty());
  CHECK_THAT(AnalysisJson({a}, nullptr, 5), Catch::Contains(R"("outside_busy_cores":0.02,"unusable_cores":0)"));
  a.system.outside_busy_cores = 1.0;  // a busy loop beside the job
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff),
             Catch::Contains("the job kept 0.98 cores busy (98% of 2 usable); other processes kept 1.00 cores busy\n"));
  // In a 1-core quota on the 2 cores, the busy loop on the core left over.
  a.cpu_quota_cores = 1;
  a.system.unusable_cores = 1;
  CHECK_THAT(AnalysisText({a}, nullptr, 5, Colour::kOff),
             Catch::Contains("; other processes kept 1.00 cores busy, 0.00 beyond the 1 core the job could not use (its "
                             "CPU quota or affinity)\n"));
  CHECK_THAT(AnalysisJson({a}, nullptr, 5), Catch::Contains(R"("outside_busy_cores":1,"unusable_cores":1)"));
  a.system.outside_busy_measured = false;  // /proc/stat not sampled
  CHECK(OtherProcessesText(a).empty());
  CHECK_THAT(AnalysisJson({a}, nullptr, 5), Catch::Contains(R"("outside_busy_cores":null)"));
}

TEST_CASE("The text folds a long epoch table to its first and last epochs and a line for the rest that names the slowest") {
  auto a = Analyzed();
  auto& epochs = a.loaders.at(0).epochs;
  auto set_epochs = [&](uint32_t n) {
    epochs.assign(n, epochs.front());
    for (uint32_t i = 0; i < n; ++i) {
      epochs[i].index = i;
      epochs[i].samples_per_s = i == 0 ? 50 : i == 17 ? 40 : 100 + i;  // a cold first epoch; epoch 17 slowed
      epochs[i].seconds = 6.4 / epochs[i].samples_per_s;
    }
  };
  auto has_row = [](const std::string& text, uint32_t epoch) {
    return text.find(fmt::format("\n    {:>5} ", epoch)) != std::string::npos;
  };
  set_epochs(30);
  const std::string text = AnalysisText({a}, nullptr, 5, Colour::kOff);
  for (uint32_t i : {0, 1, 2, 3, 27, 28, 29}) CHECK(has_row(text, i));
  for (uint32_t i : {4, 10, 17, 26}) CHECK_FALSE(has_row(text, i));
  CHECK_THAT(text, Catch::Contains("    ... 23 epochs (4 to 26): time min 50.79 ms, median "));
  CHECK_THAT(text, Catch::Contains("samples/s min 40.0, median 114.0, max 126.0; stall "));
  CHECK_THAT(text, Catch::Contains("the slowest epoch 17 (40.0 samples/s); every one in --json\n"));
  set_epochs(12);  // a dozen: every row
  const std::string short_text = AnalysisText({a}, nullptr, 5, Colour::kOff);
  for (uint32_t i = 0; i < 12; ++i) CHECK(has_row(short_text, i));
  CHECK(short_text.find("every one in --json") == std::string::npos);
}
