#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <sstream>

#include "report/model_report.h"
#include "test_report_json_check.h"

using namespace stallprof;
using namespace stallprof::report;
using stallprof::testing::Json;
using stallprof::testing::Keys;
using stallprof::testing::ParseJson;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

model::Prediction Predicted(double samples_per_s, model::Bottleneck bottleneck, uint32_t workers) {
  model::Prediction p;
  p.samples_per_s = samples_per_s;
  p.step_s = 4 / samples_per_s;
  p.stall_fraction = 0.25;
  p.fetch_stall_fraction = 0.15;
  p.prep_stall_fraction = 0.07;
  p.handoff_stall_fraction = 0.03;
  p.hit_ratio = 0.5;
  p.bottleneck = bottleneck;
  p.workers = workers;
  p.r_compute = 800;
  p.r_prep = samples_per_s;
  p.r_workers = 900;
  p.r_fetch = kInf;  // nothing read from storage
  p.r_main = 1000;
  p.delay_s = 0.0015;
  p.background_threads = 0.5;
  p.compute_step_s = 0.004;
  p.whole_run_samples_per_s = 300;
  p.startup_s_per_epoch = 1.25;
  p.startup_measured = true;
  p.analytic_samples_per_s = 410;
  p.handoff_s = 0.002;
  return p;
}

// A sweep over 1, 2 and 4 cores of a loader profiled on 2 cores with 2 workers.
model::WhatIfResult Swept(double measured = 400) {
  model::WhatIfResult r;
  r.loader = "train";
  r.profiled.cores = 2;
  r.baseline = Predicted(420, model::Bottleneck::kPrep, 2);
  r.measured_samples_per_s = measured;
  r.model_error = measured > 0 ? 0.05 : 0;
  r.swept = "cores";
  const double cores[] = {1, 2, 4};
  for (double c : cores) {
    model::WhatIfRow row;
    row.scenario.machine.cores = c;
    row.scenario.workers = 2;
    row.prediction = Predicted(200 * c, c < 4 ? model::Bottleneck::kPrep : model::Bottleneck::kCompute, 2);
    row.change = (200 * c - measured) / measured;
    r.rows.push_back(row);
  }
  r.inputs = {"compute per batch: 5.00 ms (measured, mean step - wait)",
              "storage bandwidth: 500.0 MiB/s (assumed, --disk-bw)"};
  return r;
}

WhatIfReport OneLoader(model::WhatIfResult r) {
  WhatIfReport report;
  report.trace = "runs/t.pb";
  report.loaders.push_back(std::move(r));
  return report;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const std::string kHeader =
    " cores workers      cache    hit   samples/s  whole run       step  stall  fetch   prep handoff  bottleneck   change";

}  // namespace

TEST_CASE("The what-if text has the baseline, the table header, a row per scenario and the inputs") {
  const std::string text = WhatIfText(OneLoader(Swept()));
  const auto lines = Lines(text);
  REQUIRE(lines.size() == 13);
  CHECK(lines[0] == "stallprof whatif: loader 'train' (runs/t.pb)");
  CHECK(lines[1] == "baseline, as profiled (2 cores, 2 workers): predicted 420.0 samples/s, step 9.52 ms; "
                    "measured 400.0 samples/s: model error +5.0%");
  CHECK(lines[2] == "  steady state above (past the warm-up); whole run, every epoch from iterator creation: "
                    "predicted 300.0 samples/s (start-up 1.25 s per epoch)");
  CHECK(lines[3] == "scenario: cache policy pagecache, steady state");
  CHECK(lines[4].empty());
  CHECK(lines[5] == kHeader);
  CHECK(lines[6] == "     1       2     as run    50%       200.0      300.0   20.00 ms    25%    15%     7%      3%  cpu prep     -50.0%");
  CHECK(lines[7] == "     2       2     as run    50%       400.0      300.0   10.00 ms    25%    15%     7%      3%  cpu prep      +0.0%");
  CHECK(lines[8] == "     4       2     as run    50%       800.0      300.0    5.00 ms    25%    15%     7%      3%  compute     +100.0%");
  CHECK(lines[9] == "");
  CHECK(lines[10] == "samples/s is the steady state, whole run includes each epoch's start-up; change is the steady "
                     "state against the measured baseline. Inputs:");
  CHECK(lines[11] == "  compute per batch: 5.00 ms (measured, mean step - wait)");
  CHECK(lines[12] == "  storage bandwidth: 500.0 MiB/s (assumed, --disk-bw)");
  CHECK_THAT(text, Catch::EndsWith("(assumed, --disk-bw)\n"));
}

TEST_CASE("A profile without workers warns that the whole run with workers leaves out their start-up") {
  model::WhatIfResult r = Swept();
  r.baseline.workers = 0;
  for (auto& row : r.rows) row.prediction.startup_measured = false;  // nor timed after the run
  const auto lines = Lines(WhatIfText(OneLoader(r)));
  REQUIRE(lines.size() == 13);
  CHECK_THAT(lines[10], Catch::Contains("Whole run with workers leaves out their start-up at each epoch") &&
                            Catch::EndsWith("persistent_workers=True. Inputs:"));
  // Profiled with workers, their start-up was measured: no warning; nor when
  // the worker timed after the run gave it.
  CHECK_THAT(WhatIfText(OneLoader(Swept())), !Catch::Contains("leaves out their start-up"));
  for (auto& row : r.rows) row.prediction.startup_measured = true;
  CHECK_THAT(WhatIfText(OneLoader(r)), !Catch::Contains("leaves out their start-up"));
}

TEST_CASE("A scenario without workers from a profile with workers says its figure is low unless its shared memory was timed") {
  model::WhatIfResult r = Swept();  // profiled with 2 workers
  r.rows[0].prediction.workers = 0;
  const std::string text = WhatIfText(OneLoader(r));
  const auto lines = Lines(text);
  REQUIRE(lines.size() == 14);
  CHECK_THAT(lines[7], Catch::Contains("profiled with workers: its fetches include collating into shared memory") &&
                           Catch::Contains("so this figure is low"));
  // Those costs timed after the run: taken out, no such line.
  r.shared_memory_timed = true;
  CHECK_THAT(WhatIfText(OneLoader(r)), !Catch::Contains("profiled with workers:"));
  r.shared_memory_timed = false;
  // Profiled without workers, the same row measured its costs: no such line.
  r.baseline.workers = 0;
  CHECK_THAT(WhatIfText(OneLoader(r)), !Catch::Contains("profiled with workers:"));
}

// Busy cores as the simulation gives them: the profile's and each row's.
model::WhatIfResult WithBusyCores(double profiled, std::vector<double> rows, std::vector<double> waiting = {}) {
  model::WhatIfResult r = Swept();
  r.baseline.busy_cores = profiled;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    r.rows[i].prediction.busy_cores = rows.at(i);
    r.rows[i].prediction.waiting_threads = i < waiting.size() ? waiting[i] : 0;
  }
  return r;
}

TEST_CASE("A profile that kept fewer cores busy than a scenario warns that busy cores may run slower than it measured") {
  const std::string warning = "The profile kept 1.0 cores busy on average and the scenarios above up to 1.9: the model takes a "
                              "thread to run as fast with more cores busy";
  CHECK_THAT(WhatIfText(OneLoader(WithBusyCores(1.0, {1.0, 1.9, 1.5}))),
             Catch::Contains(warning) && Catch::Contains("such figures are then high"));
  // Within half a core of the profile: no warning.
  CHECK_THAT(WhatIfText(OneLoader(WithBusyCores(1.5, {1.0, 1.9, 1.5}))), !Catch::Contains("such figures are then high"));
  CHECK_THAT(WhatIfText(OneLoader(WithBusyCores(1.0, {1.0, 1.0, 1.0}))), !Catch::Contains("The profile kept"));
}

TEST_CASE("A profile that kept more cores busy than a scenario warns that the scenario's figures may be low") {
  // Profiled with 2 busy cores, a scenario fetching in the main process keeps 1.
  const std::string warning = "The profile kept 1.9 cores busy on average and the scenarios above as few as 1.1, with no more "
                              "threads waiting for a core";
  CHECK_THAT(WhatIfText(OneLoader(WithBusyCores(1.9, {1.9, 1.1, 2.0}))),
             Catch::Contains(warning) && Catch::Contains("such figures are then low") &&
                 Catch::Contains("num_workers=0 measures the work alone") && !Catch::Contains("then high"));
  // One core for the same threads: fewer busy because they take turns on it,
  // which is more contention, not less: no warning.
  CHECK_THAT(WhatIfText(OneLoader(WithBusyCores(1.9, {1.0, 1.9, 2.0}, {1.2, 0, 0}))), !Catch::Contains("then low"));
  CHECK_THAT(WhatIfText(OneLoader(WithBusyCores(1.9, {1.5, 1.9, 2.0}))), !Catch::Contains("then low"));
}

TEST_CASE("A profile that spent its CPU quota warns that scenarios with more CPU may be low, as throttled work runs slower") {
  // Profiled in a 1-core quota on 2 cores; the sweep's rows have 1, 2 and 4 cores.
  auto in_quota = [](double busy_cores, std::vector<double> row_cores) {
    model::WhatIfResult r = Swept();
    r.profiled.cores = 1;
    r.profiled.cpu_limited = true;
    r.baseline.busy_cores = busy_cores;
    r.rows.resize(row_cores.size());
    for (size_t i = 0; i < row_cores.size(); ++i) {
      r.rows[i].scenario.machine.cores = row_cores[i];
      r.rows[i].scenario.machine.cpu_limited = row_cores[i] <= 1;
      r.rows[i].prediction.busy_cores = busy_cores;
    }
    return WhatIfText(OneLoader(r));
  };
  const std::string note = "The profile spent its CPU quota (0.98 cores busy of a 1-core quota): the kernel throttled";
  CHECK_THAT(in_quota(0.98, {1, 2}), Catch::Contains(note) && Catch::Contains("figures with more CPU than the quota are "
                                                                              "then low"));
  CHECK_THAT(in_quota(0.98, {1}), !Catch::Contains("spent its CPU quota"));      // no more CPU than the quota
  CHECK_THAT(in_quota(0.5, {1, 2}), !Catch::Contains("spent its CPU quota"));    // the quota never bit
  model::WhatIfResult free = Swept();
  free.baseline.busy_cores = 2;
  CHECK_THAT(WhatIfText(OneLoader(free)), !Catch::Contains("spent its CPU quota"));  // no quota
}

TEST_CASE("Without a measured throughput the what-if text says so and compares against the prediction") {
  const std::string text = WhatIfText(OneLoader(Swept(0)));
  CHECK_THAT(text, Catch::Contains("predicted 420.0 samples/s, step 9.52 ms; measured throughput unknown\n"));
  CHECK_THAT(text, Catch::Contains("change is the steady state against the predicted baseline. Inputs:\n"));
  CHECK(text.find("model error") == std::string::npos);
}

TEST_CASE("The what-if scenario line names the cache policy, accelerator, storage and epoch swept") {
  WhatIfReport report = OneLoader(Swept());
  report.sweep.cache_policy = model::CachePolicy::kStatic;
  report.sweep.accel_speedup = 2.5;
  report.sweep.storage_bandwidth = 2.0 * (1 << 30);
  report.sweep.first_epoch = true;
  CHECK_THAT(WhatIfText(report),
             Catch::Contains("\nscenario: cache policy static, accelerator 2.5x faster, storage 2.00 GiB/s, "
                             "first epoch (cold cache)\n"));
}

TEST_CASE("A profile taken beside other processes' load says every row assumes a quieter machine, the profiled configuration's too") {
  WhatIfReport report = OneLoader(Swept());
  report.loaders[0].profiled_background_threads = 2.34;
  report.loaders[0].scenario_background_threads = 0;
  CHECK_THAT(WhatIfText(report), Catch::Contains(", steady state, 0 busy threads of other processes where the profile ran "
                                                 "beside 2.34: every row, the profiled configuration's too, gains"));
  // Kept (--background-load profiled), or a load within half a thread: nothing to say.
  report.loaders[0].scenario_background_threads = 2.34;
  CHECK_THAT(WhatIfText(report), !Catch::Contains("busy threads of other processes"));
  report.loaders[0].scenario_background_threads = 2;
  CHECK_THAT(WhatIfText(report), !Catch::Contains("busy threads of other processes"));
}

TEST_CASE("A profile taken while the host stole 5% or more of the CPU says its costs are a slowed host's, in text and JSON") {
  WhatIfReport report = OneLoader(Swept());
  CHECK(report.loaders[0].profiled_steal_fraction == -1);  // a trace without the steal column
  CHECK_THAT(WhatIfText(report), !Catch::Contains("steal"));
  CHECK(ParseJson(WhatIfJson(report)).at("loaders").at(0).at("profiled_steal_fraction").is_null());
  report.loaders[0].profiled_steal_fraction = 0.049;
  CHECK_THAT(WhatIfText(report), !Catch::Contains("steal"));
  report.loaders[0].profiled_steal_fraction = 0.12;
  CHECK_THAT(WhatIfText(report), Catch::Contains("the host took 12.0% of this machine's CPU time (steal: the hypervisor "
                                                 "running other guests) while it was profiled: the measured costs are a "
                                                 "slowed host's"));
  CHECK(ParseJson(WhatIfJson(report)).at("loaders").at(0).at("profiled_steal_fraction").get<double>() == 0.12);
}

TEST_CASE("A scenario whose other epoch differs gets a second line naming that epoch") {
  auto r = Swept();
  r.rows[1].scenario.cache_bytes = int64_t{50} << 30;
  r.rows[1].other_epoch = Predicted(123.45, model::Bottleneck::kFetch, 2);
  r.rows[1].other_epoch->hit_ratio = 0.1;
  WhatIfReport report = OneLoader(r);
  std::string text = WhatIfText(report);
  CHECK_THAT(text, Catch::Contains("     2       2   50.0 GiB    50%"));
  CHECK_THAT(text, Catch::Contains("\n                                first epoch (cold cache): 123.5 samples/s, hit 10%, storage\n"));
  report.sweep.first_epoch = true;  // the table shows the first epoch, the second line the steady state
  text = WhatIfText(report);
  CHECK_THAT(text, Catch::Contains("\n                                steady state: 123.5 samples/s, hit 10%, storage\n"));
}

TEST_CASE("A scenario whose threads wait for a core a tenth of the time or more says the kernel's scheduling may move it") {
  auto r = Swept();
  r.rows[0].prediction.waiting_threads = 0.35;
  r.rows[1].prediction.waiting_threads = 0.09;
  const std::string text = WhatIfText(OneLoader(r));
  CHECK_THAT(text, Catch::Contains("\n                                0.35 of the job's threads wait for a core on average: "
                                   "the kernel's scheduling of them is not modelled"));
  CHECK_THAT(text, !Catch::Contains("0.09 of the job's threads"));
  CHECK_THAT(text, Catch::Contains("may be off by up to 40% either way, most often high (docs/model.md)\n     2       2"));
}

TEST_CASE("A cache row on an estimated miss cost prints the figure with misses costing no CPU under it, and in JSON") {
  auto r = Swept();
  r.rows[1].without_miss_cpu = r.rows[1].prediction;
  r.rows[1].without_miss_cpu->samples_per_s = 61.5;
  const std::string text = WhatIfText(OneLoader(r));
  CHECK_THAT(text, Catch::Contains("the CPU a storage miss costs is estimated from a cold profile (not fitted)"));
  CHECK_THAT(text, Catch::Contains("may be off by up to a third either way; with misses costing no CPU beyond their I/O (the "
                                   "floor): 61.5 samples/s"));
  CHECK(text.find("estimated from a cold") > text.find("\n     2       2"));  // under the second row, not the first
  const Json scenarios = ParseJson(WhatIfJson(OneLoader(r))).at("loaders").at(0).at("scenarios");
  CHECK_FALSE(scenarios.at(0).contains("without_miss_cpu"));
  CHECK(scenarios.at(1).at("without_miss_cpu").at("samples_per_s").get<double>() == 61.5);
}

TEST_CASE("A row of workers at prefetch_factor=1 the profile did not measure says its figure may be high, in text and JSON") {
  auto r = Swept();
  r.rows[1].unpriced_serial_handoff = true;
  const std::string text = WhatIfText(OneLoader(r));
  CHECK_THAT(text, Catch::Contains("at prefetch_factor=1 each batch's fetch begins only once the previous batch is received"));
  CHECK(text.find("at prefetch_factor=1") > text.find("\n     2       2"));  // under the second row, not the first
  const Json scenarios = ParseJson(WhatIfJson(OneLoader(r))).at("loaders").at(0).at("scenarios");
  CHECK_FALSE(scenarios.at(0).at("unpriced_serial_handoff").get<bool>());
  CHECK(scenarios.at(1).at("unpriced_serial_handoff").get<bool>());
}

TEST_CASE("Several loaders are separated by a blank line, then the CPU fit and the plot file follow") {
  WhatIfReport report = OneLoader(Swept());
  auto val = Swept();
  val.loader = "val";
  report.loaders.push_back(val);
  report.cpu_fit = model::LinearFit{0.0012, 0.0005, 0.987, 2};
  report.plot = "sweep.svg";
  const std::string text = WhatIfText(report);
  CHECK_THAT(text, Catch::Contains("(assumed, --disk-bw)\n\nstallprof whatif: loader 'val' (runs/t.pb)\n"));
  CHECK_THAT(text, Catch::EndsWith("(assumed, --disk-bw)\n"
                                   "  worker CPU per batch = 1.20 ms + 500.0 us x batch size (least squares over 2 loaders, r2 0.99)\n"
                                   "plot: sweep.svg (loader 'train')\n"));
  CHECK(WhatIfLoaderText(report.loaders[1], report.sweep, report.trace) ==
        text.substr(text.find("stallprof whatif: loader 'val'"), text.find("  worker CPU") - text.find("stallprof whatif: loader 'val'")));
}

TEST_CASE("The what-if JSON parses and carries every loader, scenario and input") {
  WhatIfReport report = OneLoader(Swept());
  report.loaders[0].rows[2].scenario.cache_bytes = int64_t{1} << 30;
  report.loaders[0].rows[2].other_epoch = Predicted(150, model::Bottleneck::kFetch, 2);
  report.cpu_fit = model::LinearFit{0.0012, 0.0005, 0.987, 2};
  report.not_predicted = {{"tgt", "loader 'tgt' has no dataset size"}};
  report.other_loaders = {"val", "test\x1b[2J"};
  const std::string json = WhatIfJson(report);
  CHECK_THAT(json, Catch::EndsWith("}\n"));
  const Json d = ParseJson(json);
  CHECK(Keys(d) == std::vector<std::string>{"trace", "loaders", "not_predicted", "other_loaders", "cpu_fit"});
  CHECK(d.at("other_loaders") == Json::array({"val", "test\x1b[2J"}));
  CHECK_THAT(WhatIfText(report), Catch::Contains("\nother loaders in the trace: val, test\\e[2J (--loader NAME or --loader all for them)\n"));
  REQUIRE(d.at("not_predicted").size() == 1);
  CHECK(d.at("not_predicted").at(0).at("loader").get<std::string>() == "tgt");
  CHECK(d.at("not_predicted").at(0).at("reason").get<std::string>() == "loader 'tgt' has no dataset size");
  CHECK_THAT(WhatIfText(report), Catch::Contains("\nnot predicted: loader 'tgt' has no dataset size\n"));
  CHECK(d.at("trace").get<std::string>() == "runs/t.pb");
  CHECK(d.at("cpu_fit").get<std::string>() == "worker CPU per batch = 1.20 ms + 500.0 us x batch size (least squares over 2 loaders, r2 0.99)");
  REQUIRE(d.at("loaders").size() == 1);
  const Json& l = d.at("loaders").at(0);
  CHECK(Keys(l) == std::vector<std::string>{"loader", "profiled_cores", "measured_samples_per_s", "baseline", "model_error",
                                             "measured_whole_run_samples_per_s", "whole_run_model_error", "change_of",
                                             "profiled_background_threads", "profiled_steal_fraction", "scenario_background_threads",
                                             "swept", "scenarios", "inputs"});
  CHECK(l.at("loader").get<std::string>() == "train");
  CHECK(l.at("profiled_cores").get<double>() == 2);
  CHECK(l.at("measured_samples_per_s").get<double>() == 400);
  CHECK(l.at("model_error").get<double>() == 0.05);
  CHECK(l.at("change_of").get<std::string>() == "steady_state");
  CHECK(l.at("swept").get<std::string>() == "cores");
  CHECK(l.at("baseline").at("samples_per_s").get<double>() == 420);
  CHECK(l.at("baseline").at("bottleneck").get<std::string>() == "cpu prep");
  REQUIRE(l.at("scenarios").size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    const Json& s = l.at("scenarios").at(i);
    CHECK(s.at("cores").get<double>() == (i == 0 ? 1 : i == 1 ? 2 : 4));
    CHECK(s.at("workers").get<double>() == 2);
    CHECK(s.at("cache_policy").get<std::string>() == "pagecache");
    CHECK(s.at("first_epoch").get<bool>() == false);
    CHECK(s.at("prediction").at("samples_per_s").get<double>() == Approx(200.0 * s.at("cores").get<double>()));
    CHECK(s.contains("other_epoch") == (i == 2));
  }
  CHECK(l.at("scenarios").at(0).at("cache_bytes").is_null());
  CHECK(l.at("scenarios").at(2).at("cache_bytes").get<double>() == 1 << 30);
  CHECK(l.at("scenarios").at(2).at("other_epoch").at("bottleneck").get<std::string>() == "storage");
  CHECK(l.at("scenarios").at(0).at("change").get<double>() == -0.5);
  const Json& p = l.at("scenarios").at(0).at("prediction");
  CHECK(Keys(p) == std::vector<std::string>{"samples_per_s", "step_s", "stall_fraction", "fetch_stall_fraction",
                                             "prep_stall_fraction", "handoff_stall_fraction", "bottleneck", "workers", "hit_ratio", "r_compute",
                                             "r_prep", "r_workers", "r_fetch", "cpu_s", "io_s", "delay_s", "background_threads", "handoff_s",
                                             "r_main", "compute_step_s", "whole_run_samples_per_s",
                                             "startup_s_per_epoch", "startup_measured", "loop_work_s_per_epoch", "analytic_samples_per_s",
                                             "step_threads", "step_oversubscribed", "waiting_threads",
                                             "busy_cores"});
  CHECK(p.at("background_threads").get<double>() == 0.5);
  CHECK(p.at("whole_run_samples_per_s").get<double>() == 300);
  CHECK(p.at("startup_measured").get<bool>());
  REQUIRE(l.at("inputs").size() == 2);
  CHECK(l.at("inputs").at(1).get<std::string>() == "storage bandwidth: 500.0 MiB/s (assumed, --disk-bw)");
}

TEST_CASE("In the what-if JSON an unknown measurement is null and an unbounded rate is -1") {
  WhatIfReport report = OneLoader(Swept(0));
  const Json d = ParseJson(WhatIfJson(report));
  const Json& l = d.at("loaders").at(0);
  CHECK(l.at("measured_samples_per_s").is_null());
  CHECK(l.at("model_error").is_null());
  CHECK(d.at("cpu_fit").is_null());
  CHECK(l.at("baseline").at("r_fetch").get<double>() == -1);
  CHECK(l.at("baseline").at("r_compute").get<double>() == 800);
}

TEST_CASE("A profile whose fetches read no bytes has no hit ratio: '-' in the table, null in JSON, not a cold 0%") {
  model::WhatIfResult r = Swept();
  r.baseline.hit_ratio_known = false;
  r.rows[0].prediction.hit_ratio = 0;
  r.rows[0].prediction.hit_ratio_known = false;
  const auto lines = Lines(WhatIfText(OneLoader(r)));
  REQUIRE(lines.size() > 7);
  CHECK(lines[6] == "     1       2     as run      -       200.0      300.0   20.00 ms    25%    15%     7%      3%  cpu prep     -50.0%");
  CHECK(lines[7] == "     2       2     as run    50%       400.0      300.0   10.00 ms    25%    15%     7%      3%  cpu prep      +0.0%");
  const Json d = ParseJson(WhatIfJson(OneLoader(r)));
  const Json& l = d.at("loaders").at(0);
  CHECK(l.at("baseline").at("hit_ratio").is_null());
  CHECK(l.at("scenarios").at(0).at("prediction").at("hit_ratio").is_null());
  CHECK(l.at("scenarios").at(1).at("prediction").at("hit_ratio").get<double>() == 0.5);
}

TEST_CASE("A figure that is not a number is null, so the what-if JSON still parses") {
  auto r = Swept();
  r.rows[0].prediction.stall_fraction = std::nan("");
  r.rows[0].change = std::nan("");
  const Json d = ParseJson(WhatIfJson(OneLoader(r)));
  CHECK(d.at("loaders").at(0).at("scenarios").at(0).at("prediction").at("stall_fraction").is_null());
  CHECK(d.at("loaders").at(0).at("scenarios").at(0).at("change").is_null());
}

TEST_CASE("The what-if JSON keeps its layout: spaces after commas and colons, 6 significant digits") {
  auto r = Swept();
  r.measured_samples_per_s = 123.456789;
  r.inputs = {"a \"quoted\" input"};
  const std::string json = WhatIfJson(OneLoader(r));
  CHECK_THAT(json, Catch::StartsWith("{\"trace\": \"runs/t.pb\", \"loaders\": [{\"loader\": \"train\", \"profiled_cores\": 2, "
                                     "\"measured_samples_per_s\": 123.457, \"baseline\": {\"samples_per_s\": 420, "
                                     "\"step_s\": 0.00952381, "));
  CHECK_THAT(json, Catch::Contains("\"r_fetch\": -1, \"cpu_s\": 0, \"io_s\": 0, \"delay_s\": 0.0015, \"background_threads\": 0.5, "));
  CHECK_THAT(json, Catch::Contains("{\"cores\": 1, \"workers\": 2, \"auto_workers\": false, \"cache_bytes\": null, \"cache_all\": false, "
                                   "\"cache_policy\": \"pagecache\", \"accel_speedup\": 1, \"first_epoch\": false, \"change\": -0.5, "
                                   "\"unpriced_serial_handoff\": false, \"prediction\": {"));
  CHECK_THAT(json, Catch::EndsWith("\"inputs\": [\"a \\\"quoted\\\" input\"]}], \"not_predicted\": [], \"other_loaders\": [], \"cpu_fit\": null}\n"));
}

TEST_CASE("The plot is an SVG with one bottleneck band per scenario and the measured line") {
  model::WhatIfResult r = Swept(400);
  r.loader = "train<&>";
  const std::string svg = WhatIfSvg(r);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("<title>cpu prep bound</title>") != std::string::npos);
  CHECK(svg.find("<title>compute bound</title>") != std::string::npos);
  CHECK(svg.find("measured 400.0") != std::string::npos);
  CHECK(svg.find(">cores</text>") != std::string::npos);  // the swept variable names the x axis
  CHECK(svg.find("train&lt;&amp;&gt;") != std::string::npos);
  CHECK(svg.find("train<&>") == std::string::npos);
  CHECK(svg.find("misses costing no CPU") == std::string::npos);  // no estimated miss cost: no range
  // Points up to 800 samples/s: the y axis ticks round numbers, 0 to 1000 by 200.
  for (const char* tick : {">0</text>", ">200</text>", ">400</text>", ">600</text>", ">800</text>", ">1000</text>"})
    CHECK(svg.find(tick) != std::string::npos);
  CHECK(svg.find(">1200</text>") == std::string::npos);
  // Start-up each epoch: the whole run (300 samples/s) is drawn dashed beside the steady state.
  CHECK(svg.find("solid: steady state; dashed: whole run (start-up included)") != std::string::npos);
  CHECK(svg.find("<title>whole run 300.0 samples/s</title>") != std::string::npos);
  // The whole run as the steady state: one line.
  for (auto& row : r.rows) row.prediction.whole_run_samples_per_s = row.prediction.samples_per_s;
  CHECK(WhatIfSvg(r).find("whole run") == std::string::npos);
}

TEST_CASE("The SVG draws a cache point's range down to its floor when its miss CPU is estimated") {
  model::WhatIfResult r = Swept(400);
  r.rows[2].without_miss_cpu = r.rows[2].prediction;
  r.rows[2].without_miss_cpu->samples_per_s = 123.4;
  const std::string svg = WhatIfSvg(r);
  CHECK(svg.find("<title>with misses costing no CPU: 123.4 samples/s</title>") != std::string::npos);
  CHECK(svg.find("dotted: down to misses costing no CPU") != std::string::npos);
  CHECK(svg.find("with misses costing no CPU:") == svg.rfind("with misses costing no CPU:"));  // one range, one row
}
