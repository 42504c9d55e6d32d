#include <catch2/catch.hpp>

#include <tuple>

#include "analysis/analysis.h"
#include "report/analysis_report.h"
#include "report/chart_library.h"
#include "report/html.h"
#include "test_analysis_trace_builder.h"

using namespace stallprof;
using namespace stallprof::report;
using namespace stallprof::testing;

TEST_CASE("HTML escaping covers text and attribute metacharacters") {
  CHECK(EscapeHtml("<a href=\"x\">&'</a>") == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
}

TEST_CASE("The report page is self-contained and shows the verdict, the charts and the tables") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "name", "<train>");
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 5000;  // more iterations than points: the timeline buckets them
  AddLoop(b, spec);
  b.trace.system.t_ns = {1000 * kMs, 2000 * kMs, 3000 * kMs};
  b.trace.system.cpu_busy_ns = {0, 500, 1500};
  b.trace.system.cpu_total_ns = {0, 1000, 2000};
  b.trace.system.page_cache_bytes = {1 << 30, 1 << 30, 1 << 30};
  b.trace.system.disk_read_bytes = {0, 1000000, 3000000};
  b.trace.system.mem_available_bytes = {1 << 30, 1 << 30, 1 << 30};
  auto analysis = analysis::Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const std::string page = ReportHtml(b.trace, *analysis);
  CHECK_THAT(page, Catch::StartsWith("<!DOCTYPE html>"));
  CHECK_THAT(page, Catch::Contains(EscapeHtml(VerdictLine(analysis->loaders[0]))));
  CHECK(page.find("<train>") == std::string::npos);  // names are escaped
  CHECK_THAT(page, Catch::Contains("min and max of every 3 iterations"));
  CHECK_THAT(page, Catch::Contains("Machine CPU busy"));
  CHECK_THAT(page, Catch::Contains("<polyline"));  // without uPlot: static SVG
  CHECK(page.find("<script type=\"application/json\"") == std::string::npos);
  CHECK(page.find("src=") == std::string::npos);
  CHECK(page.find("http://") == std::string::npos);
  CHECK(page.find("https://") == std::string::npos);
  CHECK_THAT(page, Catch::Contains("<h3>Epochs</h3><table>"));
  // The account: its table with one row per cause (the bottleneck marked), evidence and advice.
  CHECK_THAT(page, Catch::Contains("<table class=\"account\">"));
  const int32_t workers = analysis->loaders[0].config.num_workers;
  for (size_t k = 0; k < analysis::kCauseCount; ++k)
    CHECK_THAT(page, Catch::Contains("<td>" + EscapeHtml(analysis::ToString(static_cast<analysis::Cause>(k), workers)) + "</td>"));
  // The account bar's legend wraps by entry (swatch, label and figures together), and
  // the advice's long settings (GLIBC_TUNABLES=...) wrap inside the page.
  CHECK_THAT(page, Catch::Contains("<em class=\"entry\"><span style=\"background:"));
  CHECK_THAT(page, Catch::Contains(".legend .entry{font-style:normal;white-space:nowrap}"));
  CHECK_THAT(page, Catch::Contains("ul.advice li{overflow-wrap:anywhere}"));
  // Without workers the prep line is the main process's: no worker's CPU to name.
  CHECK_THAT(page, Catch::Contains(workers == 0 ? "<td>prep CPU (no workers)</td>" : "<td>worker CPU (prep)</td>"));
  CHECK_THAT(page, Catch::Contains("<tr class=\"bottleneck\"><td>handoff</td>"));
  CHECK_THAT(page, Catch::Contains(EscapeHtml(analysis->loaders[0].account_all.Line(analysis::Cause::kCompute).evidence)));
  CHECK_THAT(page, Catch::Contains("<ul class=\"advice\"><li>"));
  CHECK(page.find("slowed host") == std::string::npos);  // no steal recorded
  // 300 of the 2000 ns of CPU time stolen (15%): the times are a slowed host's.
  b.trace.system.cpu_steal_ns = {0, 100, 300};
  auto stolen = analysis::Analyze(b.trace, {});
  REQUIRE(stolen.ok());
  CHECK_THAT(ReportHtml(b.trace, *stolen),
             Catch::Contains("The hypervisor took 15.0% of this machine&#39;s CPU time: every time here is a slowed host"));
}

namespace {
// One loader's default loop in a main process, analyzed.
struct OneLoop {
  TraceBuilder b;
  analysis::TraceAnalysis analysis;
  OneLoop() {
    b.Process(100, 1);
    LoopSpec spec;
    spec.thread = b.Thread(100, 100);
    AddLoop(b, spec);
    auto analyzed = analysis::Analyze(b.trace, {});
    REQUIRE(analyzed.ok());
    analysis = std::move(*analyzed);
  }
};

}  // namespace

TEST_CASE("The loader's header gives its settings as the text does, and its whole-run and steady-state samples/s") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "name", "train");
  b.Config(100, 1, "batch_size", "8");
  b.Config(100, 1, "num_workers", "0");
  b.Config(100, 1, "prefetch_factor", "2");
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 20;  // 10 ms waits and 30 ms steps, the first 5 waits 90 ms
  spec.warmup_wait_iters = 5;
  spec.warmup_wait = 90 * kMs;
  AddLoop(b, spec);
  auto analysis = analysis::Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  // Without workers the prefetch depth sets nothing, and neither header names it.
  CHECK_THAT(ReportHtml(b.trace, *analysis),
             Catch::Contains("<div class=\"meta\">batch 8, 0 workers (the main process fetches), pin_memory off, sampler ? "
                             "&middot; 20 iterations, 160 samples, 133.3 samples/s whole run, 200.0 steady state</div>"));
  CHECK_THAT(AnalysisText({*analysis}, nullptr, 5, Colour::kOff), Catch::Contains("  batch 8, 0 workers (the main process fetches), pin_memory off, sampler ?\n"));
  b.Config(100, 1, "num_workers", "2");
  b.Config(100, 1, "multiprocessing_context", "spawn");
  auto workers = analysis::Analyze(b.trace, {});
  REQUIRE(workers.ok());
  CHECK_THAT(ReportHtml(b.trace, *workers), Catch::Contains("batch 8, 2 workers (spawn), prefetch 2, pin_memory off"));
  // pin_memory=True on a machine without CUDA: torch pins nothing, and the header says it was asked for.
  b.Config(100, 1, "pin_memory_unavailable", "1");
  auto unpinned = analysis::Analyze(b.trace, {});
  REQUIRE(unpinned.ok());
  CHECK_THAT(AnalysisText({*unpinned}, nullptr, 5, Colour::kOff),
             Catch::Contains("pin_memory off (True asked for, but no CUDA device: torch pins nothing)"));
}

TEST_CASE("The page lists main-thread stages in a table of their own") {
  OneLoop one;
  CHECK(ReportHtml(one.b.trace, one.analysis).find("main-thread stage") == std::string::npos);
  one.analysis.loaders.at(0).main_stages = {Stage("augment", 20, 0.120)};
  const std::string page = ReportHtml(one.b.trace, one.analysis);
  CHECK_THAT(page, Catch::Contains("<th>main-thread stage</th>"));
  CHECK_THAT(page, Catch::Contains("<td>augment</td><td>20</td>"));
}

TEST_CASE("The page calls the slowest stage the bottleneck only when the loader's bottleneck is in its stages") {
  OneLoop one;
  auto& l = one.analysis.loaders.at(0);
  analysis::StageStats getitem = Stage("getitem", 20, 0.020);
  getitem.bottleneck = true;
  l.stages = {getitem};
  l.bottleneck = analysis::Cause::kCompute;
  const std::string compute_bound = ReportHtml(one.b.trace, one.analysis);
  CHECK_THAT(compute_bound, Catch::Contains("<tr><td>getitem (slowest stage)</td>"));
  l.bottleneck = analysis::Cause::kStorage;
  CHECK_THAT(ReportHtml(one.b.trace, one.analysis), Catch::Contains("<tr class=\"bottleneck\"><td>getitem (bottleneck)</td>"));
}

TEST_CASE("A trace with several ranks gets a ranks section that marks the straggler, one rank none") {
  TraceBuilder b;
  for (auto [pid, rank, wait] : {std::tuple{100u, 0, 1 * kMs}, std::tuple{200u, 1, 40 * kMs}}) {
    b.Process(pid, 1, rank);
    b.Config(pid, 1, "name", "train");
    b.Config(pid, 1, "batch_size", 10);
    LoopSpec spec;
    spec.pid = pid;
    spec.thread = b.Thread(pid, pid);
    spec.wait = wait;
    AddLoop(b, spec);
  }
  auto analysis = analysis::Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const std::string page = ReportHtml(b.trace, *analysis);
  CHECK_THAT(page, Catch::Contains("<h2>Ranks</h2>"));
  CHECK_THAT(page, Catch::Contains("id=\"ranks-train\""));  // one chart per loader, matched by name
  CHECK_THAT(page, Catch::Contains("straggler</text>"));  // rank 1 waits 40x longer
  CHECK_THAT(page, Catch::Contains("Straggler: rank 1"));
  CHECK_THAT(page, Catch::Contains("scaling efficiency"));

  TraceBuilder one;
  one.Process(100, 1, 0);
  LoopSpec spec;
  spec.thread = one.Thread(100, 100);
  AddLoop(one, spec);
  auto single = analysis::Analyze(one.trace, {});
  REQUIRE(single.ok());
  CHECK(ReportHtml(one.trace, *single).find("<h2>Ranks</h2>") == std::string::npos);
}

TEST_CASE("Processes without rank identity get a processes section, not ranks") {
  TraceBuilder b;
  b.Process(100, 1);
  for (auto [pid, wait] : {std::tuple{101u, 1 * kMs}, std::tuple{102u, 40 * kMs}}) {
    b.Process(pid, 100);
    b.Config(pid, 1, "name", "train");
    LoopSpec spec;
    spec.pid = pid;
    spec.thread = b.Thread(pid, pid);
    spec.wait = wait;
    AddLoop(b, spec);
  }
  auto analysis = analysis::Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const std::string page = ReportHtml(b.trace, *analysis);
  CHECK_THAT(page, Catch::Contains("<h2>Processes</h2>"));
  CHECK(page.find("<h2>Ranks</h2>") == std::string::npos);
  CHECK(page.find("traggler:") == std::string::npos);
}

namespace {

// A loop of `epochs` x `iterations` where iteration `spike` of the run waits `spike_wait` instead of 10 ms.
TraceBuilder SpikyLoop(uint32_t epochs, uint32_t iterations, uint32_t spike, uint64_t spike_wait, const std::string& name) {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "name", name);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.epochs = epochs;
  spec.iterations = iterations;
  AddLoop(b, spec);
  // Lengthen the spike's wait and move everything after it along.
  auto& s = b.trace.spans;
  const uint32_t wait_name = *b.trace.FindString(names::kWait);
  size_t at = 0;
  for (size_t i = 0, seen = 0; i < s.size(); ++i)
    if (s.name[i] == wait_name && seen++ == spike) at = i;
  const uint64_t extra = spike_wait - s.duration_ns[at];
  for (size_t i = 0; i < s.size(); ++i)
    if (s.start_ns[i] > s.start_ns[at]) s.start_ns[i] += extra;
  s.duration_ns[at] = spike_wait;
  return b;
}

bool HasNumber(const std::string& page, const std::string& number) {
  for (const char* before : {"[", ","})
    for (const char* after : {",", "]"})
      if (page.find(before + number + after) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("With uPlot the timeline is an interactive chart of bounded size where a one-iteration spike survives") {
  // 200,000 iterations in 100 epochs; iteration 123,457 waits 900 ms instead of 10.
  TraceBuilder b = SpikyLoop(100, 2000, 123'457, 900 * kMs, "train</script><b>");
  auto analysis = analysis::Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const ChartLibrary library{"/* the chart library */", ".u-legend{}"};
  const std::string page = ReportHtml(b.trace, *analysis, &library);
  CHECK_THAT(page, Catch::Contains("<script>/* the chart library */</script>"));
  CHECK_THAT(page, Catch::Contains(".u-legend{}"));
  CHECK_THAT(page, Catch::Contains("<div class=\"uplot-chart\" id=\"timeline-100-1\"></div>"));
  CHECK_THAT(page, Catch::Contains("new uPlot("));
  CHECK_THAT(page, Catch::Contains("min and max of every 100 iterations"));
  // The spike: wait 900 ms, step 930 ms (with its 30 ms of compute).
  CHECK(HasNumber(page, "900"));
  CHECK(HasNumber(page, "930"));
  CHECK(page.size() < 1'000'000);
  // A loader name cannot end the data's <script> element early.
  CHECK(page.find("</script><b>") == std::string::npos);
  // 100 epochs fold to a summary, the table one click away; the epoch marks stay in the data.
  CHECK_THAT(page, Catch::Contains("<details><summary>100 epochs: time min "));
  CHECK_THAT(page, Catch::Contains("\"marks\":[2000,4000,"));
}

TEST_CASE("Without uPlot a long timeline is static SVG that draws no epoch lines beyond a few dozen") {
  TraceBuilder b = SpikyLoop(100, 200, 777, 900 * kMs, "train");
  auto analysis = analysis::Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const std::string page = ReportHtml(b.trace, *analysis);
  CHECK(page.find("class=\"epoch\"") == std::string::npos);
  CHECK_THAT(page, Catch::Contains("100 epochs (too many to mark)"));
  CHECK_THAT(page, Catch::Contains("<polygon"));
  TraceBuilder few = SpikyLoop(3, 200, 7, 900 * kMs, "train");
  auto short_run = analysis::Analyze(few.trace, {});
  REQUIRE(short_run.ok());
  const std::string short_page = ReportHtml(few.trace, *short_run);
  CHECK_THAT(short_page, Catch::Contains("class=\"epoch\""));
  CHECK(short_page.find("<details>") == std::string::npos);  // 3 epochs: the table as it is
}

TEST_CASE("The timeline's iteration axis has ticks at whole iterations only") {
  // 1 epoch of 3 iterations: a step of 0.5 would be the nice one for 0..2.
  TraceBuilder b = SpikyLoop(1, 3, 1, 900 * kMs, "train");
  auto analysis = analysis::Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const std::string svg = ReportHtml(b.trace, *analysis);
  CHECK_THAT(svg, Catch::Contains("class=\"tick\" text-anchor=\"middle\">1</text>"));
  CHECK_THAT(svg, !Catch::Contains("text-anchor=\"middle\">0.5</text>"));
  const ChartLibrary library{"/* the chart library */", ""};
  const std::string interactive = ReportHtml(b.trace, *analysis, &library);
  CHECK_THAT(interactive, Catch::Contains(R"("xlabel":"iteration","xint":true)"));
  CHECK_THAT(interactive, Catch::Contains("if(spec.xint) xaxis.incrs=[1,2,5,"));
}

TEST_CASE("A job of more than twenty ranks folds each loader's rank chart and table under a summary line") {
  TraceBuilder b;
  for (uint32_t rank = 0; rank < 24; ++rank) {
    const uint32_t pid = 100 + rank;
    b.Process(pid, 1, static_cast<int32_t>(rank));
    b.Config(pid, 1, "name", "train");
    b.Config(pid, 1, "batch_size", 10);
    LoopSpec spec;
    spec.pid = pid;
    spec.thread = b.Thread(pid, pid);
    AddLoop(b, spec);
  }
  auto analysis = analysis::Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  const std::string page = ReportHtml(b.trace, *analysis);
  CHECK_THAT(page, Catch::Contains("<details><summary>24 ranks: samples/s min "));
  CHECK_THAT(page, Catch::Contains("id=\"ranks-train\""));  // the chart, inside the fold
  CHECK(page.find("<details><summary>24 ranks") < page.find("id=\"ranks-train\""));
}

TEST_CASE("The page notes a run mostly outside the loaders' epochs and gives the run's split under System") {
  TraceBuilder b;
  b.Process(100, 1);
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 20;
  AddLoop(b, spec);
  auto analysis = analysis::Analyze(b.trace, {});
  REQUIRE(analysis.ok());
  // 2 s in the epochs of a 30 s run, 27 s after the last (a loop over itertools.cycle(loader)).
  analysis->duration_s = 30;
  analysis->coverage = {.in_epochs_s = 2, .before_s = 1, .between_s = 0, .after_s = 27};
  std::string page = ReportHtml(b.trace, *analysis);
  CHECK_THAT(page, Catch::Contains("<p class=\"note\" id=\"outside-epochs\">27.00 s of the run&#39;s 30.00 s (90%) passed outside"));
  CHECK_THAT(page, Catch::Contains("<p class=\"note\" id=\"coverage\">run 30.00 s: in the loaders&#39; epochs 2.00 s (7%)"));
  analysis->coverage = {.in_epochs_s = 28, .before_s = 1, .between_s = 0, .after_s = 1};
  page = ReportHtml(b.trace, *analysis);
  CHECK(page.find("id=\"outside-epochs\"") == std::string::npos);
  CHECK_THAT(page, Catch::Contains("id=\"coverage\">run 30.00 s: in the loaders&#39; epochs 28.00 s (93%)"));
}

TEST_CASE("A failed job's ending shows under the headlines of the text and the page, escaped") {
  TraceBuilder b;
  b.Process(100, 1);
  b.Config(100, 1, "name", "train");
  LoopSpec spec;
  spec.thread = b.Thread(100, 100);
  spec.iterations = 20;
  AddLoop(b, spec);
  b.trace.footer.emplace();
  auto clean = analysis::Analyze(b.trace, {});
  REQUIRE(clean.ok());
  CHECK(AnalysisText({*clean}, nullptr, 5, Colour::kOff).find("ended:") == std::string::npos);
  CHECK(ReportHtml(b.trace, *clean).find("id=\"ending\"") == std::string::npos);
  b.trace.footer->exit_code = 1;
  b.Config(100, 1, "uncaught_error", "ValueError: <bad> sample");
  b.Config(100, 1, "uncaught_error_batch", uint64_t{7});
  auto failed = analysis::Analyze(b.trace, {});
  REQUIRE(failed.ok());
  const std::string text = AnalysisText({*failed}, nullptr, 5, Colour::kOff);
  const std::string ended = "ended: the profiled command exited with code 1; pid 100 raised ValueError: <bad> sample, waiting for "
                            "batch 7 of loader train (the figures cover the run up to it)\n";
  // The second line, right under the loader's headline.
  CHECK(text.substr(text.find('\n') + 1, ended.size()) == ended);
  const std::string page = ReportHtml(b.trace, *failed);
  const size_t at = page.find("<p class=\"note\" id=\"ending\">Ended: the profiled command exited with code 1; pid 100 raised "
                              "ValueError: &lt;bad&gt; sample, waiting for batch 7 of loader train (the figures cover the run up to it).</p>");
  CHECK(at != std::string::npos);
  CHECK(at < page.find("<h2>Loader train"));
}
