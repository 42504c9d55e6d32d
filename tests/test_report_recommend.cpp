#include <catch2/catch.hpp>

#include "report/model_report.h"
#include "test_report_json_check.h"

using namespace stallprof;
using namespace stallprof::report;
using stallprof::testing::Json;
using stallprof::testing::Keys;
using stallprof::testing::ParseJson;

namespace {

// A prep-bound loader (batch 32) planned with 4 workers on 8 cores: the cores row binds.
RecommendedLoader Planned() {
  RecommendedLoader l;
  l.profile.name = "train";
  l.profile.batch_size = 32;
  l.profile.workers = 2;
  l.profile.produce_p99_s = 0.05;
  l.profile.produce_s_per_batch = 0.04;
  l.profile.dataset_bytes = uint64_t{10} << 30;
  auto& r = l.plan;
  r.loader = "train";
  r.workers = 4;
  r.prefetch_factor = 2;
  r.littles_prefetch_factor = 2;
  r.prefetch_concurrency = 5.12;
  r.lp_samples_per_s = 3276.8;
  r.predicted.samples_per_s = 3200;
  r.predicted.whole_run_samples_per_s = 2900;
  r.predicted.startup_s_per_epoch = 0.25;
  r.predicted.startup_measured = true;
  l.profile.measured_whole_run_samples_per_s = 1500;
  r.predicted.bottleneck = model::Bottleneck::kPrep;
  r.measured_samples_per_s = 1600;
  r.cache.point = model::CachePoint::kRawFiles;
  r.cache.policy = model::CachePolicy::kPageCache;
  r.cache.bytes = uint64_t{4} << 30;
  r.cache.hit_ratio = 0.4;
  r.lp.rows = {{model::RowKind::kStageCpu, "cpu[decode]", 3.5, 0, 1e-7},
               {model::RowKind::kCores, "cores", 7.5, 7.5, 436.9},
               {model::RowKind::kMemory, "memory", 2.5e9, 6.8e10, 0}};
  r.binding = r.lp.rows[1];
  r.advice = "one more core adds 436.9 samples/s";
  r.assumptions = {"worker RSS unknown: taken as 0"};
  return l;
}

RecommendReport Report(std::vector<RecommendedLoader> loaders) {
  RecommendReport report;
  report.trace = "runs/t.pb";
  report.options.cores = 8;
  report.options.memory_bytes = uint64_t{64} << 30;
  report.loaders = std::move(loaders);
  return report;
}

}  // namespace

TEST_CASE("The recommend text has the DataLoader line, cache plan, throughput, binding, prefetch, shadow prices and assumptions") {
  const std::string text = RecommendText(Report({Planned()}));
  CHECK(text ==
        "stallprof recommend: loader 'train' on 8 cores, 64.0 GiB memory (runs/t.pb)\n"
        "\n"
        "  DataLoader(..., num_workers=4, prefetch_factor=2, pin_memory=torch.cuda.is_available(), persistent_workers=True)\n"
        "\n"
        "cache plan:   leave 4.00 GiB of page cache to the dataset's files (Linux's page cache under shuffling: hit ratio 40%)\n"
        "throughput:   3200.0 samples/s predicted, steady state (simulated; LP optimum 3276.8 with fractional "
        "workers), cpu prep bound; measured 1600.0 samples/s steady state: 2.00x\n"
        "whole run:    2900.0 samples/s predicted with start-up 250.00 ms per epoch; measured 1500.0 samples/s whole run\n"
        "binding:      cores: one more core adds 436.9 samples/s\n"
        "prefetch:     Little's law: 102.40 batches/s x p99 batch latency 50.00 ms = 5.1 batches in flight over 4 "
        "workers -> prefetch_factor=2\n"
        "shadow prices: cores (shadow price 436.9)\n"
        "assumed:      worker RSS unknown: taken as 0\n");
}

TEST_CASE("A plan under 5% over the profiled settings is told as keeping them, with the plan beside") {
  RecommendedLoader l = Planned();  // profiled with 2 workers
  l.plan.profiled_settings_samples_per_s = 3100;
  l.plan.profiled_settings_whole_run_samples_per_s = 2850;
  const std::string text = RecommendText(Report({l}));
  CHECK_THAT(text, Catch::Contains(
                       "\n  keep the DataLoader as profiled (num_workers=2, prefetch_factor=2, persistent_workers=False): "
                       "the best plan found predicts 3200.0 samples/s against 3100.0 for the profiled settings on this "
                       "machine (+3.2%; whole run +1.8%), under the 5% the model can tell from no change\n"
                       "  the best plan found, not worth a change: DataLoader(..., num_workers=4, prefetch_factor=2, "
                       "pin_memory=torch.cuda.is_available(), persistent_workers=True)\n"));
  const auto json = ParseJson(RecommendJson(Report({l})));
  const Json& loader = json.at("loaders").at(0);
  CHECK(loader.at("worth_changing") == false);
  CHECK(loader.at("profiled_settings_samples_per_s").get<double>() == Approx(3100));
  // Worth it (the default): the DataLoader line alone.
  CHECK_THAT(RecommendText(Report({Planned()})), !Catch::Contains("keep the DataLoader as profiled"));
  // The profiled settings' whole run not predicted: no whole-run figure, and
  // no whole-run gain over an unknown figure.
  l.plan.profiled_settings_whole_run_samples_per_s = 0;
  CHECK_FALSE(l.plan.WorthChanging());
  CHECK_THAT(RecommendText(Report({l})), Catch::Contains("on this machine (+3.2%), under the 5%"));
}

TEST_CASE("The prefetch line gives Little's depth and the smaller one the simulation predicts as fast") {
  auto l = Planned();
  l.plan.littles_prefetch_factor = 34;
  l.plan.prefetch_factor = 4;
  const std::string text = RecommendText(Report({l}));
  CHECK_THAT(text, Catch::Contains("prefetch_factor=4, pin_memory"));
  CHECK_THAT(text, Catch::Contains("workers -> prefetch_factor=34; the simulation predicts prefetch_factor=4 within 1% of "
                                   "it (fewer buffers in memory)\n"));
}

TEST_CASE("The prefetch line says when Little's depth of 1 was raised to torch's default") {
  auto l = Planned();
  l.plan.workers = 1;
  l.plan.prefetch_concurrency = 0.7;
  l.plan.littles_prefetch_factor = 1;
  l.plan.prefetch_factor = 2;
  const std::string text = RecommendText(Report({l}));
  CHECK_THAT(text, Catch::Contains("num_workers=1, prefetch_factor=2, pin_memory"));
  CHECK_THAT(text, Catch::Contains("= 0.7 batches in flight over 1 worker -> prefetch_factor=1, raised to 2 (torch's "
                                   "default, the fewest proposed: at 1 each batch's fetch waits for the previous batch's "
                                   "handoff, wake-ups the model does not price)\n"));
}

TEST_CASE("A proposal whose threads wait for cores says its figure may be off, as whatif's rows do") {
  auto l = Planned();
  CHECK(RecommendText(Report({l})).find("wait for a core on average") == std::string::npos);
  l.plan.predicted.waiting_threads = 0.31;
  CHECK_THAT(RecommendText(Report({l})),
             Catch::Contains("0.31 of the job's threads wait for a core on average: the kernel's scheduling"));
}

TEST_CASE("A proposal that keeps fewer cores busy than the profile says its figure may be low") {
  auto l = Planned();
  l.plan.as_profiled.busy_cores = 1.9;
  l.plan.predicted.busy_cores = 1.0;
  CHECK_THAT(RecommendText(Report({l})),
             Catch::Contains("The profile kept 1.9 cores busy on average and the recommended configuration 1.0, with no "
                             "more threads waiting for a core") &&
                 Catch::Contains("such figures are then low"));
  const Json j = ParseJson(RecommendJson(Report({l}))).at("loaders").at(0);
  CHECK(j.at("profiled_busy_cores").get<double>() == 1.9);
  CHECK(j.at("busy_cores").get<double>() == 1.0);
  l.plan.predicted.busy_cores = 1.5;  // within half a core
  CHECK_THAT(RecommendText(Report({l})), !Catch::Contains("The profile kept"));
}

TEST_CASE("Fewer workers than the LP's pool are told with the pool's prediction, and a stream's split named") {
  auto l = Planned();
  l.plan.workers = 3;
  l.plan.lp_pool_workers = 8;
  l.plan.lp_pool_samples_per_s = 1369.2;
  l.profile.stream_worker_batches = {30, 15};
  const std::string text = RecommendText(Report({l}));
  CHECK_THAT(text, Catch::Contains("workers:      3 predicted within 1% of the LP's 8 (1369.2 samples/s): more would only "
                                   "hold memory (the stream's split leaves the others without data)\n"));
  CHECK(ParseJson(RecommendJson(Report({l}))).at("loaders").at(0).at("lp_pool_workers").at("num_workers") == 8);
}

TEST_CASE("An LP bound by the model's ingest is qualified when the simulation finds the proposal input-bound") {
  auto l = Planned();
  l.plan.binding.kind = model::RowKind::kIngest;
  l.plan.binding.name = "model ingest";
  l.plan.advice = "the model is now the bottleneck: faster input will not help";
  l.plan.predicted.bottleneck = model::Bottleneck::kBlocking;
  CHECK_THAT(RecommendText(Report({l})), Catch::Contains("faster input will not help; so says the LP, which sees rates "
                                                         "only: simulated batch by batch, the proposal is blocking bound"));
  l.plan.predicted.bottleneck = model::Bottleneck::kCompute;  // both agree: nothing added
  CHECK_THAT(RecommendText(Report({l})), !Catch::Contains("so says the LP"));
}

TEST_CASE("A loader built anew under one name is told that persistent workers need it built once") {
  auto l = Planned();
  l.profile.objects = 6;
  l.profile.workers = 0;  // profiled without workers
  l.plan.predicted.startup_measured = false;
  const std::string text = RecommendText(Report({l}));
  CHECK_THAT(text, Catch::Contains("whole run:    2900.0 samples/s predicted without the workers' start-up (the profile "
                                   "had no workers to time it); measured 1500.0 samples/s whole run\n"));
  CHECK_THAT(text, Catch::Contains("rebuilt:      the DataLoader was built 6 times under this name, and persistent workers "
                                   "die with it: build it once"));
  l.profile.startup_timed = true;  // from the worker timed after the run
  l.plan.predicted.startup_measured = true;
  CHECK_THAT(RecommendText(Report({l})), Catch::Contains("whole run:    2900.0 samples/s predicted with start-up 250.00 "
                                                         "ms per epoch (a floor: the worker timed after the run)"));
  l.plan.workers = 0;  // no workers to keep
  CHECK_THAT(RecommendText(Report({l})), !Catch::Contains("rebuilt:"));
  l.plan.workers = 4;
  l.profile.objects = 1;
  CHECK_THAT(RecommendText(Report({l})), !Catch::Contains("rebuilt:"));
}

TEST_CASE("A loop with an iterator per step is told to keep one, with the steady state it would reach") {
  auto l = Planned();
  CHECK_THAT(RecommendText(Report({l})), !Catch::Contains("per step:"));
  l.profile.iterator_per_step = true;
  const std::string text = RecommendText(Report({l}));
  CHECK_THAT(text, Catch::Contains("per step:     the loop creates an iterator per step (next(iter(loader))?)"));
  CHECK_THAT(text, Catch::Contains("create it once (it = iter(loader)), call next(it), and a new one at StopIteration, for "
                                   "the steady state's 3200.0 samples/s\n"));
  CHECK(ParseJson(RecommendJson(Report({l}))).at("loaders").at(0).at("iterator_per_step").get<bool>());
}

TEST_CASE("Every cache plan is put in words") {
  auto l = Planned();
  auto& c = l.plan.cache;
  CHECK(CacheLine(l.plan, l.profile) ==
        "leave 4.00 GiB of page cache to the dataset's files (Linux's page cache under shuffling: hit ratio 40%)");
  c.policy = model::CachePolicy::kLru;
  CHECK(CacheLine(l.plan, l.profile) == "an LRU cache of 4.00 GiB over the dataset's files (hit ratio 40%)");
  c.policy = model::CachePolicy::kStatic;
  CHECK(CacheLine(l.plan, l.profile) ==
        "keep a fixed 4.00 GiB of the raw files in memory (static cache, MinIO-like: hit ratio 40%)");
  c.point = model::CachePoint::kDecoded;
  c.stage = "decode";
  CHECK(CacheLine(l.plan, l.profile) ==
        "keep 4.00 GiB of decoded samples after stage 'decode' in memory (static: hit ratio 40%)");
  c.point = model::CachePoint::kNone;
  c.hit_ratio = 0.97;
  CHECK(CacheLine(l.plan, l.profile) == "no cache needed beyond what the run had (hit ratio 97%)");
  l.profile.dataset_bytes = 0;
  CHECK(CacheLine(l.plan, l.profile) == "none (the dataset size is unknown, so no cache was planned)");
}

TEST_CASE("The recommend text's memory says what the training process holds of it and what is left to plan") {
  auto l = Planned();
  l.plan.job_memory_bytes = uint64_t{2} << 30;
  const std::string text = RecommendText(Report({l}));
  CHECK_THAT(text, Catch::StartsWith("stallprof recommend: loader 'train' on 8 cores, 64.0 GiB memory, 2.00 GiB of it "
                                     "held by the training process (peak RSS): 62.0 GiB left for cache and workers "
                                     "(runs/t.pb)\n"));
}

TEST_CASE("Without a measured run, a binding row, a shadow price or known memory the recommend text says so") {
  auto l = Planned();
  l.plan.measured_samples_per_s = 0;
  l.profile.measured_whole_run_samples_per_s = 0;
  l.plan.binding = {};
  l.plan.binding.kind = model::RowKind::kIngest;
  l.plan.advice = "the model is now the bottleneck: faster input will not help";
  for (auto& row : l.plan.lp.rows) row.dual = 1e-7;  // only the LP's tiny cost per core and worker
  l.profile.produce_p99_s = 0;                        // the mean latency stands in for the p99
  auto report = Report({l});
  report.options.memory_bytes = 0;
  const std::string text = RecommendText(report);
  CHECK_THAT(text, Catch::StartsWith("stallprof recommend: loader 'train' on 8 cores, unknown memory (runs/t.pb)\n"));
  CHECK_THAT(text, Catch::Contains("with fractional workers), cpu prep bound\nwhole run:    2900.0 samples/s predicted "
                                   "with start-up 250.00 ms per epoch\nbinding:"));
  CHECK_THAT(text, Catch::Contains("\nbinding:      none (model ingest): the model is now the bottleneck"));
  CHECK_THAT(text, Catch::Contains("p99 batch latency 40.00 ms"));
  CHECK_THAT(text, Catch::Contains("\nshadow prices: none\n"));
}

TEST_CASE("A plan without workers drops prefetch_factor and persistent_workers, and names the LP's workers it beat") {
  RecommendedLoader l = Planned();
  l.profile.workers = 0;
  l.profile.cpu_s_per_batch = 0.0005;
  l.profile.receive_s_per_batch = 0.0007;
  l.plan.workers = 0;
  l.plan.lp_workers = 1;
  l.plan.lp_workers_samples_per_s = 26600;
  l.plan.predicted.samples_per_s = 29200;
  const std::string text = RecommendText(Report({l}));
  // torch raises ValueError for either option with num_workers=0.
  CHECK_THAT(text, Catch::Contains("  DataLoader(..., num_workers=0, pin_memory=torch.cuda.is_available())\n"));
  CHECK_THAT(text, Catch::Contains("workers:      none: fetching in the main process is predicted at 29200.0 samples/s, "
                                   "the LP's 1 worker(s) at 26600.0: a batch costs 500.0 us of CPU to fetch and "
                                   "700.0 us to receive from a worker"));
  CHECK_THAT(text, Catch::Contains("binding:      in the LP's plan with workers, cores: "));
  CHECK_THAT(text, !Catch::Contains("the first figure is low"));
  l.profile.workers = 2;  // profiled with workers: the fetch cost was measured in a worker
  CHECK_THAT(RecommendText(Report({l})), Catch::Contains("; profiled with workers, the first figure is low"));
  CHECK_THAT(text, Catch::Contains("prefetch:     none without workers"));
  const Json j = ParseJson(RecommendJson(Report({l})));
  const Json& loader = j.at("loaders").at(0);
  CHECK(loader.at("num_workers") == 0);
  CHECK(loader.at("prefetch_factor").is_null());
  CHECK(loader.at("lp_workers").at("num_workers") == 1);
  // With workers, no such object.
  CHECK(ParseJson(RecommendJson(Report({Planned()}))).at("loaders").at(0).at("lp_workers").is_null());
}

TEST_CASE("Several loaders' plans are separated by a blank line") {
  auto val = Planned();
  val.profile.name = "val";
  const std::string text = RecommendText(Report({Planned(), val}));
  CHECK_THAT(text, Catch::Contains("taken as 0\n\nstallprof recommend: loader 'val' on 8 cores"));
  const auto report = Report({Planned(), val});
  CHECK(text == RecommendLoaderText(report.loaders[0], report.options, report.trace) + "\n" +
                    RecommendLoaderText(report.loaders[1], report.options, report.trace));
}

TEST_CASE("The recommend JSON parses and has the plan, the binding and every LP row") {
  auto val = Planned();
  val.profile.name = "val";
  val.plan.cache.point = model::CachePoint::kDecoded;
  val.plan.cache.policy = model::CachePolicy::kStatic;
  const std::string json = RecommendJson(Report({Planned(), val}));
  CHECK_THAT(json, Catch::EndsWith("}\n"));
  const Json d = ParseJson(json);
  CHECK(Keys(d) == std::vector<std::string>{"trace", "cores", "memory_bytes", "loaders", "not_planned", "other_loaders"});
  CHECK(d.at("trace").get<std::string>() == "runs/t.pb");
  CHECK(d.at("cores").get<double>() == 8);
  CHECK(d.at("memory_bytes").get<double>() == 68719476736.0);
  REQUIRE(d.at("loaders").size() == 2);
  const Json& l = d.at("loaders").at(0);
  CHECK(Keys(l) == std::vector<std::string>{"loader", "num_workers", "prefetch_factor", "lp_pool_workers", "lp_workers", "dataloader", "job_memory_bytes", "plan_memory_bytes", "worth_changing", "profiled_settings_samples_per_s", "profiled_settings_whole_run_samples_per_s", "step_threads", "cache",
                                             "predicted_samples_per_s", "lp_samples_per_s",
                                             "predicted_whole_run_samples_per_s", "predicted_startup_s_per_epoch",
                                             "startup_predicted", "predicted_loop_work_s_per_epoch", "measured_whole_run_samples_per_s", "dataloader_objects",
                                             "iterator_per_step",
                                             "measured_samples_per_s",
                                             "speedup", "bottleneck", "waiting_threads", "busy_cores",
                                             "profiled_busy_cores", "binding", "advice", "prefetch_concurrency",
                                             "littles_prefetch_factor", "constraints", "assumptions"});
  CHECK(l.at("loader").get<std::string>() == "train");
  CHECK(l.at("num_workers").get<double>() == 4);
  CHECK(l.at("prefetch_factor").get<double>() == 2);
  CHECK(l.at("dataloader").get<std::string>() == DataLoaderLine(Planned().plan));
  CHECK(l.at("cache").at("point").get<std::string>() == "raw files");
  CHECK(l.at("cache").at("policy").get<std::string>() == "pagecache");
  CHECK(l.at("cache").at("bytes").get<double>() == 4294967296.0);
  CHECK(l.at("cache").at("hit_ratio").get<double>() == 0.4);
  CHECK(l.at("predicted_samples_per_s").get<double>() == 3200);
  CHECK(l.at("lp_samples_per_s").get<double>() == 3276.8);
  CHECK(l.at("measured_samples_per_s").get<double>() == 1600);
  CHECK(l.at("predicted_whole_run_samples_per_s").get<double>() == 2900);
  CHECK(l.at("predicted_startup_s_per_epoch").get<double>() == 0.25);
  CHECK(l.at("startup_predicted").get<bool>());
  CHECK(l.at("measured_whole_run_samples_per_s").get<double>() == 1500);
  CHECK(l.at("dataloader_objects").get<double>() == 1);
  CHECK_FALSE(l.at("iterator_per_step").get<bool>());
  CHECK(l.at("speedup").get<double>() == 2);
  CHECK(l.at("bottleneck").get<std::string>() == "cpu prep");
  CHECK(l.at("binding").at("constraint").get<std::string>() == "cores");
  CHECK(l.at("binding").at("kind").get<std::string>() == "cores");
  CHECK(l.at("binding").at("shadow_price").get<double>() == 436.9);
  CHECK(l.at("advice").get<std::string>() == "one more core adds 436.9 samples/s");
  CHECK(l.at("prefetch_concurrency").get<double>() == 5.12);
  CHECK(l.at("littles_prefetch_factor").get<int>() == 2);
  REQUIRE(l.at("constraints").size() == 3);
  CHECK(Keys(l.at("constraints").at(0)) == std::vector<std::string>{"name", "activity", "bound", "shadow_price"});
  CHECK(l.at("constraints").at(0).at("name").get<std::string>() == "cpu[decode]");
  CHECK(l.at("constraints").at(0).at("shadow_price").get<double>() == 1e-7);
  CHECK(l.at("constraints").at(2).at("bound").get<double>() == 6.8e10);
  REQUIRE(l.at("assumptions").size() == 1);
  CHECK(l.at("assumptions").at(0).get<std::string>() == "worker RSS unknown: taken as 0");
  CHECK(d.at("loaders").at(1).at("loader").get<std::string>() == "val");
  CHECK(d.at("loaders").at(1).at("cache").at("point").get<std::string>() == "decoded samples");
  CHECK(d.at("loaders").at(1).at("cache").at("policy").get<std::string>() == "static");
}

TEST_CASE("In the recommend JSON an unknown measured throughput makes it and the speedup null") {
  auto l = Planned();
  l.plan.measured_samples_per_s = 0;
  const Json d = ParseJson(RecommendJson(Report({l})));
  CHECK(d.at("loaders").at(0).at("measured_samples_per_s").is_null());
  CHECK(d.at("loaders").at(0).at("speedup").is_null());
}

TEST_CASE("The recommend JSON keeps its layout: spaces after commas and colons, 6 significant digits") {
  auto l = Planned();
  l.plan.lp_samples_per_s = 3276.80123456;
  const std::string json = RecommendJson(Report({l}));
  CHECK_THAT(json, Catch::StartsWith("{\"trace\": \"runs/t.pb\", \"cores\": 8, \"memory_bytes\": 68719476736, \"loaders\": "
                                     "[{\"loader\": \"train\", \"num_workers\": 4, \"prefetch_factor\": 2, "));
  CHECK_THAT(json, Catch::Contains("\"cache\": {\"point\": \"raw files\", \"policy\": \"pagecache\", \"bytes\": 4294967296, "
                                   "\"hit_ratio\": 0.4}, \"predicted_samples_per_s\": 3200, \"lp_samples_per_s\": 3276.8, "));
  CHECK_THAT(json, Catch::EndsWith("\"assumptions\": [\"worker RSS unknown: taken as 0\"]}], \"not_planned\": [], \"other_loaders\": []}\n"));
}
