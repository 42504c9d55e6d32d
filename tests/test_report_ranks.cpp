#include <catch2/catch.hpp>

#include "analysis/analysis.h"
#include "analysis/ranks.h"
#include "report/analysis_report.h"
#include "test_report_json_check.h"

using namespace stallprof;
using namespace stallprof::analysis;
using namespace stallprof::report;

namespace {

// One trace holding one process with `rank` (-1: none) iterating "train":
// 100 steps of `wait_s` + `compute_s`, 10 samples a step, one epoch.
TraceAnalysis ProcessTrace(uint32_t pid, int32_t rank, double wait_s, double compute_s) {
  TraceAnalysis t;
  t.path = rank >= 0 ? "rank" + std::to_string(rank) + ".pb" : "hogwild.pb";
  t.hostname = "node";
  t.processes.push_back({pid, 1, rank, "python3 train.py"});
  LoaderAnalysis l;
  l.pid = pid;
  l.rank = rank;
  l.scope = 1;
  l.config.name = "train";
  l.config.batch_size = 10;
  l.iterations.resize(100);
  l.samples = 1000;
  l.active_s = 100 * (wait_s + compute_s);
  l.samples_per_s = l.samples / l.active_s;
  l.wait_all.count = l.wait_steady.count = l.step_all.count = l.step_steady.count = 100;
  l.compute_all.count = l.compute_steady.count = 100;
  l.wait_all.total = l.wait_steady.total = 100 * wait_s;
  l.compute_all.total = l.compute_steady.total = 100 * compute_s;
  l.step_all.total = l.step_steady.total = l.active_s;
  l.stall_fraction = wait_s / (wait_s + compute_s);
  EpochStats e;
  e.start_ns = 1000000000;
  e.end_ns = e.start_ns + static_cast<uint64_t>(l.active_s * 1e9);
  e.iterations = 100;
  l.epochs.push_back(e);
  l.iterations.back().return_ns = e.end_ns;
  t.loaders.push_back(l);
  return t;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("With 64 ranks the text gives each loader one headline and one line over the ranks, the table on request") {
  std::vector<TraceAnalysis> traces;
  for (int r = 0; r < 64; ++r) traces.push_back(ProcessTrace(1000 + r, r, r == 17 ? 0.011 : 0.001, 0.030));
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  const std::string text = AnalysisText(traces, &*job, 5, Colour::kOff);
  // No per-rank verdict lines (VerdictLine starts with the loader's name and a colon).
  CHECK(Count(text, "\ntrain: ") + (text.rfind("train: ", 0) == 0) == 0);
  // Rank 17 waits 11 of 41 ms a step (27%: highly input-bound), the others 1 of 31 (3%).
  CHECK(Count(text, "train, 64 ranks: HIGHLY input-bound on 1, not input-bound on 63; stall min 3% median 3% max 27%; 1 straggler(s)\n") == 1);
  CHECK(Count(text, "  train, 64 ranks: samples/s min 243.9 median 322.6 max 322.6;") == 1);
  CHECK_THAT(text, Catch::Contains("stragglers: rank 17\n"));
  CHECK_THAT(text, Catch::Contains("straggler: rank 17: more wait: 11.00 ms waiting for data per step against 1.00 ms"));
  CHECK_THAT(text, Catch::Contains("stallprof analyze --ranks"));
  CHECK(text.find("compute/step") == std::string::npos);

  const std::string table = AnalysisText(traces, &*job, 5, Colour::kOff, RankTable::kAlways);
  CHECK_THAT(table, Catch::Contains("compute/step"));
  CHECK(Count(table, "    python3") == 0);
  CHECK(Count(table, "  <- straggler") == 1);
  CHECK(Count(table, " node ") == 64);  // one row per rank (host column)
}

TEST_CASE("With 64 ranks the text details the first rank and the straggler, and names the others' data-quality notes") {
  std::vector<TraceAnalysis> traces;
  for (int r = 0; r < 64; ++r) {
    traces.push_back(ProcessTrace(1000 + r, r, r == 17 ? 0.011 : 0.001, 0.030));
    traces.back().quality.footer_present = true;
  }
  traces[5].quality.dropped = 10;
  traces[5].quality.dropped_share = 0.001;
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  const std::string text = AnalysisText(traces, &*job, 5, Colour::kOff);
  CHECK_THAT(text, Catch::Contains("(the detail below is of rank 0, 17: each loader's first and slowest rank"));
  CHECK(Count(text, "#### ") == 2);
  CHECK_THAT(text, Catch::Contains("#### rank0.pb (node)"));
  CHECK_THAT(text, Catch::Contains("#### rank17.pb (node)"));
  CHECK(Count(text, "== train (pid ") == 2);
  CHECK_THAT(text, Catch::Contains("The other ranks' traces (62: stallprof analyze --ranks details them)\n"
                                   "  rank5.pb: 10 spans dropped (0.1% of records)\n"));
  CHECK(Count(text, "  rank") == 1);  // the others have nothing to say

  const std::string every = AnalysisText(traces, &*job, 5, Colour::kOff, RankTable::kAlways);
  CHECK(Count(every, "#### ") == 64);
  CHECK(Count(every, "== train (pid ") == 64);
  CHECK(every.find("The other ranks' traces") == std::string::npos);
}

TEST_CASE("Two ranks 2% apart print one table and no straggler, with the margin") {
  std::vector<TraceAnalysis> traces{ProcessTrace(100, 0, 0.001, 0.030), ProcessTrace(200, 1, 0.001, 0.030 + 0.02 * 0.031)};
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  const std::string text = AnalysisText(traces, &*job, 5, Colour::kOff);
  CHECK_THAT(text, Catch::Contains("Ranks (2 ranks: 0-1; loaders matched by name)"));
  CHECK_THAT(text, Catch::Contains("  train, 2 rank(s)\n"));
  CHECK_THAT(text, Catch::Contains("no straggler: the slowest rank, 1, is +2.0% against the others' median steady time, within the "
                                   "margin 5.0% (max(5%, 3 x the others' MAD / median); steady time = steps x steady-state time per step"));
  CHECK(text.find("<- straggler") == std::string::npos);
  CHECK_THAT(text, Catch::Contains("scaling efficiency"));
  CHECK(Count(text, "train: not input-bound") == 2);  // few ranks: one headline each, as before
  CHECK(text.rfind("[rank 0] train: not input-bound", 0) == 0);
  CHECK_THAT(text, Catch::Contains("\n[rank 1] train: not input-bound"));
}

TEST_CASE("Processes without rank identity are listed as processes in the text and the JSON") {
  std::vector<TraceAnalysis> traces{ProcessTrace(101, -1, 0.001, 0.030), ProcessTrace(102, -1, 0.016, 0.030)};
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  const std::string text = AnalysisText(traces, &*job, 5, Colour::kOff);
  CHECK_THAT(text, Catch::Contains("Processes (no rank identity"));
  CHECK(text.find("Ranks (") == std::string::npos);
  CHECK_THAT(text, Catch::Contains("\n[pid 102] train: "));
  CHECK(text.find("straggler:") == std::string::npos);
  CHECK(text.find("<- straggler") == std::string::npos);
  CHECK_THAT(text, Catch::Contains("     101        1 train                 100       322.6     3%  python3 train.py\n"));

  const auto json = testing::ParseJson(AnalysisJson(traces, &*job, 5));
  const auto& j = json.at("job");
  CHECK(j.at("ranks").empty());
  CHECK(j.at("loaders").empty());
  REQUIRE(j.at("processes").size() == 2);
  CHECK(j.at("processes").at(1).at("pid").get<double>() == 102);
  CHECK(j.at("processes").at(1).at("loaders").at(0).at("samples_per_s").get<double>() == Approx(1000 / 4.6));
}

TEST_CASE("The JSON keeps every rank's figures and the straggler's cause") {
  std::vector<TraceAnalysis> traces;
  for (int r = 0; r < 12; ++r) traces.push_back(ProcessTrace(1000 + r, r, r == 3 ? 0.011 : 0.001, 0.030));
  const auto job = AnalyzeJob(traces);
  REQUIRE(job.ok());
  const auto json = testing::ParseJson(AnalysisJson(traces, &*job, 5));
  const auto& train = json.at("job").at("loaders").at(0);
  CHECK(train.at("name").get<std::string>() == "train");
  REQUIRE(train.at("ranks").size() == 12);
  CHECK(train.at("ranks").at(3).at("wait_per_step_s").get<double>() == Approx(0.011));
  CHECK(train.at("ranks").at(3).at("straggler").get<bool>());
  REQUIRE(train.at("stragglers").size() == 1);
  CHECK(train.at("stragglers").at(0).at("rank").get<double>() == 3);
  CHECK(train.at("stragglers").at(0).at("cause").get<std::string>() == "more wait");
  CHECK(train.at("stragglers").at(0).at("extra_wait_s").get<double>() == Approx(100 * 0.010));
  CHECK(train.at("epoch_time_s").at("max").get<double>() == Approx(4.1));
  CHECK(train.at("steady_time_s").at("max").get<double>() == Approx(4.1));
  CHECK(train.at("ranks").at(3).at("steady_time_s").get<double>() == Approx(4.1));
}
