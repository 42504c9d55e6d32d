#include "html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>

#include "analysis_report.h"
#include "downsample.h"
#include "json_writer.h"
#include "analysis/ranks.h"
#include "common/units.h"

namespace stallprof::report {

using namespace stallprof::analysis;

namespace {

constexpr const char* kWaitColour = "#d9534f";
constexpr const char* kComputeColour = "#4a7bd0";
constexpr const char* kPrepColour = "#f0ad4e";
constexpr const char* kFetchColour = "#c9302c";
constexpr const char* kOtherColour = "#b0b0b0";
constexpr const char* kCpuColour = "#5cb85c";
constexpr const char* kIoColour = "#f0ad4e";
constexpr const char* kRunqColour = "#9b59b6";
constexpr const char* kIdleColour = "#e6e6e6";

constexpr int kWidth = 760;
constexpr int kLeft = 60, kRight = 14, kTop = 26, kBottom = 30;

std::string Pct(double f) { return fmt::format("{:.0f}%", f * 100); }

std::string Num(double v) {
  if (v == 0) return "0";
  if (std::abs(v) >= 100) return fmt::format("{:.0f}", v);
  if (std::abs(v) >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2g}", v);
}

// Lists longer than this (epochs, workers, ranks) fold to a summary line with
// the detail one click away (<details>: no script needed).
constexpr size_t kFoldRows = 20;
// Rows a detail table shows at most: the first and last halves of this (a
// trace of a million one-iteration epochs must not make a page of a million rows).
constexpr size_t kMaxDetailRows = 2000;

std::string Fold(size_t rows, const std::string& summary, const std::string& detail) {
  if (rows <= kFoldRows) return detail;
  return "<details><summary>" + summary + "</summary>" + detail + "</details>";
}

// Frame, title and y/x ticks of a chart; returns the SVG opening and grid.
std::string Axes(const std::string& title, int height, double x_max, double y_max, const std::string& x_unit,
                 const std::string& y_unit, bool integer_x) {
  const int plot_w = kWidth - kLeft - kRight, plot_h = height - kTop - kBottom;
  std::string s = fmt::format(R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", kWidth, height, kWidth, height);
  s += fmt::format(R"(<text x="{}" y="16" class="title">{}</text>)", kLeft, EscapeHtml(title));
  double ys = NiceStep(y_max, 4);
  for (double v = 0; v <= y_max * 1.0001; v += ys) {
    double y = kTop + plot_h - v / y_max * plot_h;
    s += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/>)", kLeft, kWidth - kRight, y, y);
    s += fmt::format(R"(<text x="{}" y="{:.1f}" class="tick" text-anchor="end">{}</text>)", kLeft - 4, y + 4, Num(v));
  }
  s += fmt::format(R"(<text x="4" y="{}" class="unit">{}</text>)", kTop - 8, EscapeHtml(y_unit));
  const double xs = integer_x ? std::max(1.0, NiceStep(x_max, 6)) : NiceStep(x_max, 6);  // no iteration 2.5
  for (double v = 0; v <= x_max * 1.0001 && x_max > 0; v += xs) {
    double x = kLeft + v / x_max * plot_w;
    s += fmt::format(R"(<text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{}</text>)", x, height - kBottom + 16, Num(v));
  }
  s += fmt::format(R"(<text x="{}" y="{}" class="unit" text-anchor="end">{}</text>)", kWidth - kRight, height - 4, EscapeHtml(x_unit));
  s += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" class="frame"/>)", kLeft, kTop, plot_w, plot_h);
  return s;
}

// A chart of series over a shared x, bounded in size: the caller downsampled
// it (min/max per bucket). Drawn by uPlot when the page carries it (zoom, pan,
// values on hover), else as static SVG.
struct ChartSeries {
  std::string label;
  const char* colour;
  bool fill = false;  // an area down to zero, drawn in series order (later on top)
};

struct ChartSpec {
  std::string id;  // unique in the page
  std::string title, x_label, y_unit;
  int height = 170;
  Downsampled data;
  std::vector<ChartSeries> series;
  std::vector<double> marks;  // x of dashed vertical lines (epoch starts)
  std::string sync;           // charts with the same key share the cursor
  bool integer_x = false;     // x counts things (iterations): ticks at whole numbers only
};

// More marks than this are thinned evenly (the interactive chart shows them
// only when zoomed in far enough to tell them apart anyway).
constexpr size_t kMaxMarks = 2000;
// The static chart draws the marks only when they are this few.
constexpr size_t kMaxSvgMarks = 40;
// Points per series in a chart: 2000 buckets of a min and a max.
constexpr size_t kMaxSeriesPoints = 4000;

std::string SvgChart(const ChartSpec& c) {
  const auto& x = c.data.x;
  double x_max = x.empty() ? 1 : std::max(x.back(), 1e-9);
  double y_max = 0;
  for (const auto& ys : c.data.y)
    for (double v : ys) y_max = std::max(y_max, v);
  y_max = y_max > 0 ? y_max * 1.05 : 1;
  const int plot_w = kWidth - kLeft - kRight, plot_h = c.height - kTop - kBottom;
  std::string s = Axes(c.title, c.height, x_max, y_max, c.x_label, c.y_unit, c.integer_x);
  auto px = [&](double v) { return kLeft + v / x_max * plot_w; };
  auto py = [&](double v) { return kTop + plot_h - std::max(0.0, v) / y_max * plot_h; };
  for (size_t k = 0; k < c.series.size() && k < c.data.y.size(); ++k) {
    std::string points;
    if (c.series[k].fill) points += fmt::format("{:.1f},{:.1f} ", px(x.empty() ? 0 : x.front()), py(0));
    for (size_t i = 0; i < x.size(); ++i) points += fmt::format("{:.1f},{:.1f} ", px(x[i]), py(c.data.y[k][i]));
    if (c.series[k].fill) {
      points += fmt::format("{:.1f},{:.1f}", px(x.empty() ? 0 : x.back()), py(0));
      s += fmt::format(R"(<polygon points="{}" fill="{}" stroke="{}" stroke-width="0.5"/>)", points, c.series[k].colour, c.series[k].colour);
    } else {
      s += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"/>)", points, c.series[k].colour);
    }
  }
  if (c.marks.size() <= kMaxSvgMarks)
    for (double m : c.marks) s += fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{}" y2="{}" class="epoch"/>)", px(m), px(m), kTop, kTop + plot_h);
  return s + "</svg>";
}

// A number for the chart data: integers exact (iteration indices), the rest
// to four significant digits (a chart cannot show more).
void AppendChartNumber(std::string& out, double v) {
  if (!std::isfinite(v)) v = 0;
  if (v == std::floor(v) && std::abs(v) < 1e15) fmt::format_to(std::back_inserter(out), "{:.0f}", v);
  else fmt::format_to(std::back_inserter(out), "{:.4g}", v);
}

std::string NumberArray(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    AppendChartNumber(out, values[i]);
  }
  return out + "]";
}

std::string JsonText(const std::string& text) {
  std::string out;
  AppendJsonString(out, text);
  return out;
}

// The holder uPlot draws into and the chart's data; the page's one script
// (kChartScript) turns every such pair into a chart.
std::string InteractiveChart(const ChartSpec& c) {
  std::string spec = fmt::format(R"({{"id":{},"title":{},"xlabel":{},"xint":{},"yunit":{},"height":{},"sync":{},"x":{},"marks":{},"series":[)",
                                 JsonText(c.id), JsonText(c.title), JsonText(c.x_label), c.integer_x ? "true" : "false",
                                 JsonText(c.y_unit), c.height, JsonText(c.sync), NumberArray(c.data.x), NumberArray(c.marks));
  for (size_t k = 0; k < c.series.size() && k < c.data.y.size(); ++k)
    spec += fmt::format(R"({}{{"label":{},"colour":"{}","fill":{},"values":{}}})", k ? "," : "", JsonText(c.series[k].label),
                        c.series[k].colour, c.series[k].fill ? "true" : "false", NumberArray(c.data.y[k]));
  spec += "]}";
  // Inside <script>, "</" could close the element: JSON allows "<\/" for it.
  for (size_t at = spec.find("</"); at != std::string::npos; at = spec.find("</", at + 3)) spec.replace(at, 2, "<\\/");
  return fmt::format(R"(<div class="uplot-chart" id="{}"></div><script type="application/json" class="chart-data">{}</script>)",
                     EscapeHtml(c.id), spec);
}

std::string Chart(const ChartSpec& c, const ChartLibrary* charts) { return charts ? InteractiveChart(c) : SvgChart(c); }

// Builds the charts from their data (uPlot), with epoch marks, ctrl+wheel zoom
// and shift+drag pan; uPlot itself gives drag-to-zoom, double-click to reset
// and the values under the cursor in its legend.
const char* kChartScript = R"JS(
(function(){
  function num(v){ if(v==null||!isFinite(v)) return '-'; var a=Math.abs(v);
    return a>=100?v.toFixed(0):a>=10?v.toFixed(1):a>=1?v.toFixed(2):v.toPrecision(2); }
  function marks(spec){ return function(u){
    var m=spec.marks, lo=u.scales.x.min, hi=u.scales.x.max, seen=[];
    for(var i=0;i<m.length;i++) if(m[i]>=lo&&m[i]<=hi) seen.push(m[i]);
    if(!seen.length||u.bbox.width/seen.length<6*devicePixelRatio) return;
    var ctx=u.ctx; ctx.save(); ctx.strokeStyle='#333'; ctx.lineWidth=1; ctx.setLineDash([3,3]); ctx.beginPath();
    seen.forEach(function(v){ var x=Math.round(u.valToPos(v,'x',true))+0.5; ctx.moveTo(x,u.bbox.top); ctx.lineTo(x,u.bbox.top+u.bbox.height); });
    ctx.stroke(); ctx.restore(); }; }
  function zoomPan(u){
    var over=u.over, data=u.data[0], first=data[0], last=data[data.length-1];
    function set(lo,hi){ if(hi-lo<=0) return; if(lo<first){hi+=first-lo;lo=first;} if(hi>last){lo-=hi-last;hi=last;}
      u.setScale('x',{min:Math.max(lo,first),max:Math.min(hi,last)}); }
    over.addEventListener('wheel',function(e){ if(!e.ctrlKey) return; e.preventDefault();
      var r=over.getBoundingClientRect(), at=u.posToVal(e.clientX-r.left,'x'), s=u.scales.x, f=e.deltaY<0?0.8:1.25;
      set(at-(at-s.min)*f, at+(s.max-at)*f); },{passive:false});
    over.addEventListener('mousedown',function(e){ if(!e.shiftKey) return; e.preventDefault(); e.stopPropagation();
      var x0=e.clientX, lo=u.scales.x.min, hi=u.scales.x.max, per=(hi-lo)/over.clientWidth;
      function move(ev){ var d=(ev.clientX-x0)*per; set(lo-d,hi-d); }
      function up(){ document.removeEventListener('mousemove',move); document.removeEventListener('mouseup',up); }
      document.addEventListener('mousemove',move); document.addEventListener('mouseup',up); },true);
  }
  document.querySelectorAll('script.chart-data').forEach(function(el){
    var spec=JSON.parse(el.textContent), host=document.getElementById(spec.id);
    var series=[{label:spec.xlabel,value:function(u,v){return num(v);}}];
    spec.series.forEach(function(s){ series.push({label:s.label,stroke:s.colour,fill:s.fill?s.colour:undefined,width:1,
      points:{show:false},value:function(u,v){return num(v)+' '+spec.yunit;}}); });
    var xaxis={label:spec.xlabel};
    if(spec.xint) xaxis.incrs=[1,2,5,10,20,50,100,200,500,1e3,2e3,5e3,1e4,2e4,5e4,1e5,2e5,5e5,1e6,2e6,5e6,1e7,2e7,5e7,1e8];
    var u=new uPlot({title:spec.title,width:760,height:spec.height+40,series:series,
      scales:{x:{time:false},y:{range:function(u,lo,hi){return [0,hi>0?hi*1.05:1];}}},axes:[xaxis,{label:spec.yunit,size:60}],
      cursor:{drag:{x:true,y:false},sync:{key:spec.sync||spec.id}},
      hooks:{draw:[marks(spec)],ready:[zoomPan]}},
      [spec.x].concat(spec.series.map(function(s){return s.values;})),host);
    host.setAttribute('data-points',String(spec.x.length));
  });
})();
)JS";

// Wait and step time per iteration, min/max per bucket of iterations, epoch starts marked.
std::string IterationTimeline(const LoaderAnalysis& l, const ChartLibrary* charts) {
  const size_t n = l.iterations.size();
  if (n == 0) return "";
  std::vector<double> x(n), step(n), wait(n);
  ChartSpec c;
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<double>(i);
    wait[i] = l.iterations[i].wait_s * 1e3;
    step[i] = (l.iterations[i].wait_s + l.iterations[i].compute_s) * 1e3;
    if (l.iterations[i].index_in_epoch == 0 && i > 0) c.marks.push_back(x[i]);
  }
  if (c.marks.size() > kMaxMarks) {
    std::vector<double> thinned;
    for (size_t k = 0; k < kMaxMarks; ++k) thinned.push_back(c.marks[k * c.marks.size() / kMaxMarks]);
    c.marks = std::move(thinned);
  }
  c.data = DownsampleMinMax(x, {step, wait}, kMaxSeriesPoints);
  c.id = fmt::format("timeline-{}-{}", l.pid, l.scope);
  c.title = fmt::format("{}: step time per iteration (wait for data, the rest is compute){}", l.config.name,
                        c.data.per_bucket > 1 ? fmt::format(", min and max of every {} iterations", c.data.per_bucket) : "");
  c.x_label = "iteration";
  c.integer_x = true;
  c.y_unit = "ms";
  c.height = 220;
  c.series = {{"step", kComputeColour, true}, {"wait", kWaitColour, true}};
  std::string s = Chart(c, charts);
  const std::string marks_note = c.marks.empty() ? ""
                                 : charts || c.marks.size() <= kMaxSvgMarks
                                     ? " &nbsp; dashed: epoch start" + std::string(charts ? " (when zoomed in enough to tell them apart)" : "")
                                     : fmt::format(" &nbsp; {} epochs (too many to mark)", l.epochs.size());
  s += fmt::format(R"(<div class="legend"><span style="background:{}"></span>wait (blocked in next()) <span style="background:{}"></span>compute (the rest of the step){}{}</div>)",
                   kWaitColour, kComputeColour, marks_note, charts ? "<br>drag to zoom, double-click to reset, shift+drag to pan, ctrl+wheel to zoom at the pointer" : "");
  return s;
}

struct Segment { std::string label; double value; const char* colour; };

std::string StackedBar(const std::string& title, const std::vector<Segment>& segments, double total, const std::string& unit_note) {
  const int height = 74, bar_h = 26;
  const int plot_w = kWidth - kLeft - kRight;
  std::string s = fmt::format(R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", kWidth, height, kWidth, height);
  s += fmt::format(R"(<text x="{}" y="16" class="title">{}</text>)", kLeft, EscapeHtml(title));
  double x = kLeft;
  std::string legend;
  for (const auto& seg : segments) {
    if (seg.value <= 0 || total <= 0) continue;
    double w = seg.value / total * plot_w;
    s += fmt::format(R"(<rect x="{:.1f}" y="26" width="{:.1f}" height="{}" fill="{}"><title>{}: {}</title></rect>)", x, w, bar_h, seg.colour,
                     EscapeHtml(seg.label), Pct(seg.value / total));
    if (w > 40)
      s += fmt::format(R"(<text x="{:.1f}" y="{}" class="inbar" text-anchor="middle">{}</text>)", x + w / 2, 26 + bar_h / 2 + 4, Pct(seg.value / total));
    x += w;
    // One entry wraps as a whole: a swatch never ends a line apart from its label.
    legend += fmt::format(R"(<em class="entry"><span style="background:{}"></span>{} {} ({})</em> )", seg.colour,
                          EscapeHtml(seg.label), Pct(seg.value / total), EscapeHtml(FormatSeconds(seg.value)));
  }
  s += "</svg>";
  return s + "<div class=\"legend\">" + legend + EscapeHtml(unit_note) + "</div>";
}

std::string WorkerChart(const LoaderAnalysis& l) {
  if (l.workers.empty()) return "";
  const int row = 20;
  const int height = kTop + static_cast<int>(l.workers.size()) * row + 10;
  const int plot_w = kWidth - kLeft - kRight - 90;  // room for "123456 batches *"
  std::string s = fmt::format(R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)", kWidth, height, kWidth, height);
  s += fmt::format(R"(<text x="{}" y="16" class="title">{}: worker time (share of the epochs each worker lived in)</text>)", kLeft,
                   EscapeHtml(l.config.name));
  for (size_t i = 0; i < l.workers.size(); ++i) {
    const auto& w = l.workers[i];
    double y = kTop + i * row;
    s += fmt::format(R"(<text x="{}" y="{:.0f}" class="tick" text-anchor="end">{}</text>)", kLeft - 4, y + 13,
                     w.in_main_process ? std::string("main") : std::to_string(w.pid));
    double x = kLeft;
    double idle = std::max(0.0, 1 - w.cpu_fraction - w.io_fraction - w.delay_fraction);
    for (auto [value, colour, label] : {std::tuple{w.cpu_fraction, kCpuColour, "CPU"}, std::tuple{w.io_fraction, kIoColour, "I/O wait"},
                                        std::tuple{w.delay_fraction, kRunqColour, "run-queue delay"}, std::tuple{idle, kIdleColour, "idle"}}) {
      double width = std::clamp(value, 0.0, 1.0) * plot_w;
      if (width <= 0) continue;
      s += fmt::format(R"(<rect x="{:.1f}" y="{:.0f}" width="{:.1f}" height="{}" fill="{}"><title>{} {}</title></rect>)", x, y + 2, width, row - 5,
                       colour, label, Pct(value));
      x += width;
    }
    s += fmt::format(R"(<text x="{}" y="{:.0f}" class="tick">{} batches{}</text>)", kLeft + plot_w + 6, y + 13, w.batches,
                     w.straggler ? " *" : "");
  }
  s += "</svg>";
  s += fmt::format(R"(<div class="legend"><span style="background:{}"></span>CPU <span style="background:{}"></span>I/O wait (off CPU, not runnable) <span style="background:{}"></span>run-queue delay <span style="background:{}"></span>idle &nbsp; * straggler</div>)",
                   kCpuColour, kIoColour, kRunqColour, kIdleColour);
  std::vector<double> cpu, io, delay;
  std::string stragglers;
  for (const auto& w : l.workers) {
    cpu.push_back(w.cpu_fraction);
    io.push_back(w.io_fraction);
    delay.push_back(w.delay_fraction);
    if (w.straggler) stragglers += (stragglers.empty() ? "" : ", ") + std::to_string(w.pid);
  }
  return Fold(l.workers.size(),
              EscapeHtml(fmt::format("{} workers: CPU {}; I/O wait {}; run-queue delay {}; stragglers: {}", l.workers.size(),
                                     SpreadText(cpu, Pct), SpreadText(io, Pct), SpreadText(delay, Pct), stragglers.empty() ? "none" : stragglers)),
              s);
}

std::string Cell(const std::string& v) { return "<td>" + EscapeHtml(v) + "</td>"; }

std::string EpochTable(const LoaderAnalysis& l) {
  std::string s = "<table><tr><th>epoch</th><th>iterations</th><th>samples</th><th>time</th><th>samples/s</th><th>stall</th><th>page cache growth</th><th>disk read</th></tr>";
  const size_t n = l.epochs.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > kMaxDetailRows && i == kMaxDetailRows / 2) {
      s += fmt::format("<tr><td colspan=\"8\">&hellip; {} epochs not shown (stallprof analyze --json lists them all)</td></tr>",
                       n - kMaxDetailRows);
      i = n - kMaxDetailRows / 2;
    }
    const auto& e = l.epochs[i];
    s += "<tr>" + Cell(std::to_string(e.index)) + Cell(std::to_string(e.iterations)) + Cell(fmt::format("{:.0f}", e.samples)) +
         Cell(FormatSeconds(e.seconds)) + Cell(fmt::format("{:.1f}", e.samples_per_s)) + Cell(Pct(e.stall_fraction)) +
         Cell(e.has_system ? FormatBytes(e.page_cache_growth_bytes) : "-") + Cell(e.has_system ? FormatBytes(e.disk_read_bytes) : "-") + "</tr>";
  }
  s += "</table>";
  if (const auto& f = l.first_epoch; f.available)
    s += "<p>" + EscapeHtml(fmt::format("First epoch {:.1f} samples/s, later epochs {:.1f} samples/s ({})", f.first_samples_per_s,
                                       f.later_samples_per_s, f.why)) + "</p>";
  return Fold(n, EscapeHtml(fmt::format("{} epochs: {}", n, EpochsSpread(l.epochs))), s);
}

std::string StageTable(const LoaderAnalysis& l) {
  if (l.stages.empty() && l.main_stages.empty())
    return "<p class=\"note\">No stage spans (getitem, collate, pin, stallprof.stage) were recorded for this loader.</p>";
  std::string s = l.stages.empty() ? "" : "<table><tr><th>stage</th><th>count</th><th>wall</th><th>CPU</th><th>threads</th><th>per-core rate</th><th>parallel rate</th><th>observed rate</th><th>utilization</th></tr>";
  bool attributed = false;
  for (const auto& st : l.stages) {
    attributed |= st.cpu_source == CpuSource::kAttributed;
    s += std::string(st.bottleneck && l.StagesBound() ? "<tr class=\"bottleneck\">" : "<tr>") + Cell(!st.bottleneck ? st.name : st.name + (l.StagesBound() ? " (bottleneck)" : " (slowest stage)")) + Cell(std::to_string(st.count)) +
         Cell(FormatSeconds(st.wall_s)) + Cell(FormatSeconds(st.cpu_s) + (st.cpu_source == CpuSource::kAttributed ? " *" : st.cpu_source == CpuSource::kEstimated ? " ~" : "")) +
         Cell(std::to_string(st.parallelism)) + Cell(fmt::format("{:.1f}", st.per_core_rate)) + Cell(fmt::format("{:.1f}", st.parallel_rate)) +
         Cell(fmt::format("{:.1f}", st.observed_rate)) + Cell(Pct(st.utilization)) + "</tr>";
  }
  if (!l.stages.empty()) {
    s += "</table><p class=\"note\">Rates in samples/s (Plumber). ";
    if (std::any_of(l.stages.begin(), l.stages.end(), [](const StageStats& st) { return st.cpu_source == CpuSource::kEstimated; }))
      s += "~ CPU estimated from the spans the counter budget sampled. ";
    if (attributed) s += "* CPU attributed from wall time with the fetch spans' CPU/wall ratio (these spans carry no CPU time).";
    s += "</p>";
  }
  if (!l.main_stages.empty()) {
    const double batches = static_cast<double>(l.account_all.batches), compute = l.account_all.Seconds(Cause::kCompute);
    s += "<table><tr><th>main-thread stage</th><th>count</th><th>wall</th><th>CPU</th><th>per batch</th><th>of compute</th></tr>";
    for (const auto& st : l.main_stages)
      s += "<tr>" + Cell(st.name) + Cell(std::to_string(st.count)) + Cell(FormatSeconds(st.wall_s)) +
           Cell(FormatSeconds(st.cpu_s) + (st.cpu_source == CpuSource::kEstimated ? " ~" : "")) +
           Cell(batches > 0 ? FormatSeconds(st.wall_s / batches) : "-") + Cell(compute > 0 ? Pct(st.wall_s / compute) : "-") + "</tr>";
    s += "</table><p class=\"note\">Your stages on the main thread between next() calls: time of the compute line, not of the pipeline.</p>";
  }
  return s;
}

std::string StepTable(const LoaderAnalysis& l) {
  auto row = [](const char* label, const Summary& s) {
    return "<tr>" + Cell(label) + Cell(FormatSeconds(s.mean)) + Cell(FormatSeconds(s.p50)) + Cell(FormatSeconds(s.p90)) +
           Cell(FormatSeconds(s.p99)) + Cell(FormatSeconds(s.total)) + "</tr>";
  };
  std::string s = "<table><tr><th></th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>total</th></tr>";
  s += row("step (steady)", l.step_steady) + row("wait (steady)", l.wait_steady) + row("compute (steady)", l.compute_steady);
  s += row("step (with warm-up)", l.step_all) + row("wait (with warm-up)", l.wait_all) + row("compute (with warm-up)", l.compute_all);
  return s + "</table>";
}

// Several ranks of one job in the trace: per loader (by name) samples/s per
// rank (stragglers marked), the per-rank figures, and global against local
// throughput (CosmoFlow); then the processes without rank identity.
std::string RanksSection(const JobAnalysis& job) {
  std::string s;
  if (job.ranks.size() >= 2) s += "<h2>Ranks</h2>";
  for (const auto& l : job.ranks.size() >= 2 ? job.loaders : std::vector<JobLoader>{}) {
    const int row = 20;
    const int height = kTop + static_cast<int>(l.ranks.size()) * row + 10;
    const int plot_w = kWidth - kLeft - kRight - 90;
    double fastest = 0;
    for (const auto& r : l.ranks) fastest = std::max(fastest, r.samples_per_s);
    s += "<h3>" + EscapeHtml(l.name) + "</h3>";
    std::string detail;
    detail += fmt::format(R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img" id="ranks-{}">)", kWidth, height, kWidth,
        height, EscapeHtml(l.name));
    detail += fmt::format(R"(<text x="{}" y="16" class="title">{}: samples/s per rank (local throughput)</text>)", kLeft, EscapeHtml(l.name));
    for (size_t i = 0; i < l.ranks.size(); ++i) {
      const auto& r = l.ranks[i];
      const double y = kTop + i * row;
      const double width = fastest > 0 ? r.samples_per_s / fastest * plot_w : 0;
      detail += fmt::format(R"(<text x="{}" y="{:.0f}" class="tick" text-anchor="end">rank {}</text>)", kLeft - 4, y + 13, r.rank);
      detail += fmt::format(R"(<rect x="{}" y="{:.0f}" width="{:.1f}" height="{}" fill="{}"><title>rank {}: {:.1f} samples/s, stall {}</title></rect>)",
          kLeft, y + 2, width, row - 5, r.straggler ? kFetchColour : kCpuColour, r.rank, r.samples_per_s,
          Pct(r.stall_fraction));
      detail += fmt::format(R"(<text x="{:.1f}" y="{:.0f}" class="tick">{:.1f}{}</text>)", kLeft + width + 6, y + 13, r.samples_per_s,
          r.straggler ? " straggler" : "");
    }
    detail += "</svg>";
    detail += "<table><tr><th>rank</th><th>host</th><th>pid</th><th>samples/s</th><th>stall</th><th>fetch</th><th>prep</th>"
        "<th>steps</th><th>wait/step</th><th>compute/step</th><th>steady time</th><th>epoch time</th></tr>";
    for (const auto& r : l.ranks)
      detail += std::string(r.straggler ? "<tr class=\"bottleneck\">" : "<tr>") + Cell(std::to_string(r.rank)) + Cell(r.hostname) +
          Cell(std::to_string(r.pid)) + Cell(fmt::format("{:.1f}", r.samples_per_s)) + Cell(Pct(r.stall_fraction)) +
          Cell(Pct(r.fetch_stall_fraction)) + Cell(Pct(r.prep_stall_fraction)) + Cell(std::to_string(r.steps)) + Cell(FormatSeconds(r.wait_per_step_s)) +
          Cell(FormatSeconds(r.compute_per_step_s)) + Cell(FormatSeconds(r.steady_time_s)) + Cell(FormatSeconds(r.epoch_time_s)) + "</tr>";
    detail += "</table>";
    std::vector<double> rates;
    for (const auto& r : l.ranks) rates.push_back(r.samples_per_s);
    s += Fold(l.ranks.size(),
              EscapeHtml(fmt::format("{} ranks: samples/s {}; {} straggler(s)", l.ranks.size(),
                                     SpreadText(rates, [](double v) { return fmt::format("{:.1f}", v); }), l.stragglers.size())),
              detail);
    std::string stragglers;
    for (const auto& st : l.stragglers) stragglers += fmt::format(" Straggler: rank {}: {}.", st.rank, EscapeHtml(st.reason));
    if (l.stragglers.empty())
      stragglers = fmt::format(" No straggler: the slowest rank, {}, is {:+.1f}% against the others' median steady time, within the "
                               "margin {:.1f}%.",
                               l.slowest_rank, l.slowest_slower_by * 100, l.slowest_margin * 100);
    s += fmt::format("<p class=\"note\">global throughput {:.1f} samples/s (samples / the slowest rank's epoch time) against "
                     "{:.1f} summed over the ranks: scaling efficiency {}.{} A straggler's steady time (steps x steady-state "
                     "time per step) exceeds the other ranks' median by more than max({:.0f}%, {:g} x their MAD / median).</p>",
                     l.global_samples_per_s, l.sum_local_samples_per_s, Pct(l.scaling_efficiency), stragglers,
                     kStragglerMinMargin * 100, kStragglerSpreadFactor);
  }
  if (!job.processes.empty()) {
    s += "<h2>Processes</h2><p class=\"note\">Processes without rank identity (no RANK or LOCAL_RANK, no torch.distributed "
         "rank): shown as themselves, never stragglers of a job.</p>";
    s += "<table><tr><th>pid</th><th>loader</th><th>steps</th><th>samples/s</th><th>stall</th><th>command</th></tr>";
    for (const auto& p : job.processes)
      for (const auto& l : p.loaders)
        s += "<tr>" + Cell(std::to_string(p.pid)) + Cell(l.name) + Cell(std::to_string(l.steps)) +
             Cell(fmt::format("{:.1f}", l.samples_per_s)) + Cell(Pct(l.stall_fraction)) + Cell(p.command.substr(0, 80)) + "</tr>";
    s += "</table>";
  }
  return s;
}

const char* kStyle = R"(
body{font-family:-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:24px auto;max-width:800px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px} h3{font-size:15px;margin:18px 0 6px}
.verdict{font-size:16px;font-weight:600;padding:10px 12px;border-radius:6px;margin:8px 0}
.v-high{background:#fbe3e2;color:#8a1f1b} .v-moderate{background:#fdf1dc;color:#7a4d00} .v-not{background:#e3f4e3;color:#1d5e1d}
.meta,.note{color:#666;font-size:13px} table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border-bottom:1px solid #eee;padding:3px 6px;text-align:right;white-space:nowrap} th{background:#f6f6f6;white-space:normal} td:first-child,th:first-child{text-align:left}
td:first-child{white-space:normal;min-width:110px}
tr.bottleneck td{background:#fdf1dc;font-weight:600}
table.account td:last-child,table.account th:last-child{white-space:normal;text-align:left;min-width:260px}
table{display:block;max-width:100%;overflow-x:auto}
svg.chart{display:block;margin:8px 0;font-size:11px} .title{font-size:13px;font-weight:600;fill:#333} .tick{fill:#555} .unit{fill:#777;font-size:11px}
.grid{stroke:#eee} .frame{fill:none;stroke:#ccc} .epoch{stroke:#333;stroke-dasharray:3,3} .inbar{fill:#fff;font-weight:600}
.legend{font-size:12px;color:#444;margin:0 0 10px} .legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;vertical-align:middle}
.legend .entry{font-style:normal;white-space:nowrap} ul.advice li{overflow-wrap:anywhere}
#errors{color:#a00;font-weight:600}
.uplot-chart{margin:8px 0} .uplot{font-family:inherit} .uplot .u-title{font-size:13px;font-weight:600;color:#333;text-align:left;padding-left:60px}
.uplot .u-legend{font-size:12px} details summary{cursor:pointer;font-size:13px;color:#444;margin:4px 0}
)";

}  // namespace

double NiceStep(double range, int ticks) {
  if (range <= 0) return 1;
  double raw = range / ticks;
  double power = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

std::string EscapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

const char* CauseColour(Cause cause) {
  switch (cause) {
    case Cause::kCompute: return kComputeColour;
    case Cause::kPrep: return kPrepColour;
    case Cause::kContention: return kRunqColour;
    case Cause::kStorage: return kFetchColour;
    case Cause::kOtherBlocking: return kOtherColour;
    case Cause::kHandoff: return "#8e7cc3";
    case Cause::kStartup: return "#76a5af";
    case Cause::kStallprof: return kIdleColour;
  }
  return kOtherColour;
}

// The account of the loader's wall time: a stacked bar per view, the table of
// lines with their evidence, and the advice that follows from the causes.
std::string AccountSection(const LoaderAnalysis& l) {
  std::string h;
  for (const auto* view : {&l.account_all, &l.account_steady}) {
    if (view == &l.account_steady && l.steady_fallback) continue;
    std::vector<Segment> segments;
    for (const auto& line : view->lines) segments.push_back({ToString(line.cause, l.config.num_workers), line.seconds, CauseColour(line.cause)});
    h += StackedBar(fmt::format("{}: where the {} wall time goes ({})", l.config.name,
                                view == &l.account_all ? "whole-run" : "steady-state", FormatSeconds(view->wall_s)),
                    segments, view->wall_s, view == &l.account_steady || l.steady_fallback ? "" : " Start-up included.");
  }
  h += "<table class=\"account\"><tr><th>cause</th><th>whole run</th><th>share</th><th>steady</th><th>share</th><th>evidence</th></tr>";
  for (size_t k = 0; k < l.account_all.lines.size() && k < l.account_steady.lines.size(); ++k) {
    const auto& a = l.account_all.lines[k];
    const auto& st = l.account_steady.lines[k];
    h += std::string(a.cause == l.bottleneck ? "<tr class=\"bottleneck\">" : "<tr>") + Cell(std::string(ToString(a.cause, l.config.num_workers)) + (a.estimated ? " (estimated)" : "")) +
         Cell(FormatSeconds(a.seconds)) + Cell(fmt::format("{:.1f}%", a.share * 100)) + Cell(FormatSeconds(st.seconds)) +
         Cell(fmt::format("{:.1f}%", st.share * 100)) + Cell(a.evidence) + "</tr>";
  }
  h += "</table>";
  if (!l.advice.empty()) {
    h += "<ul class=\"advice\">";
    for (const auto& a : l.advice) h += "<li>" + EscapeHtml(a) + "</li>";
    h += "</ul>";
  }
  const auto& s = l.split;
  h += fmt::format("<p class=\"note\">DS-Analyzer view (steady): fetch stall = storage {}, prep stall = worker CPU + contention {}, "
                   "handoff {}.</p>",
                   EscapeHtml(FormatSeconds(s.fetch_stall_s)), EscapeHtml(FormatSeconds(s.prep_stall_s)),
                   EscapeHtml(FormatSeconds(s.handoff_s)));
  return h;
}

}  // namespace

std::string ReportHtml(const Trace& trace, const TraceAnalysis& a, const ChartLibrary* charts) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>stallprof report: " + EscapeHtml(a.path) + "</title>";
  // Any script error shows on the page (and in the DOM for the headless test).
  h += "<script>window.addEventListener('error',function(e){var d=document.getElementById('errors');if(d)d.textContent+='page error: '+e.message+' ';});</script>";
  h += "<style>" + std::string(kStyle) + (charts ? charts->stylesheet : "") + "</style></head><body>\n<div id=\"errors\"></div>\n";
  h += "<h1>stallprof report</h1>";
  std::string command;
  for (const auto& c : trace.header.command) command += (command.empty() ? "" : " ") + c;
  h += fmt::format("<div class=\"meta\">{} &middot; host {} &middot; {} usable cores &middot; {} &middot; {}</div>", EscapeHtml(a.path),
                   EscapeHtml(a.hostname), a.usable_cores, EscapeHtml(FormatSeconds(a.duration_s)), EscapeHtml(command));
  for (const auto& l : a.loaders) {
    const char* cls = l.verdict == Verdict::kHighlyInputBound ? "v-high" : l.verdict == Verdict::kModeratelyInputBound ? "v-moderate" : "v-not";
    h += fmt::format("<div class=\"verdict {}\" id=\"verdict-{}-{}\">{}</div>", cls, l.pid, l.scope, EscapeHtml(VerdictLine(l)));
  }
  if (const std::string note = OutsideEpochsNote(a); !note.empty())
    h += "<p class=\"note\" id=\"outside-epochs\">" + EscapeHtml(note) + "</p>";
  // A job that failed: what ended it, above the figures that cover the run up to it.
  if (std::string line = EndingLine(a.quality); !line.empty()) {
    line[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(line[0])));
    h += "<p class=\"note\" id=\"ending\">" + EscapeHtml(line) + ".</p>";
  }
  if (const std::string line = LostRecordsLine(a.quality); !line.empty())  // it starts with the count
    h += "<p class=\"note\" id=\"lost-records\">" + EscapeHtml(line) + ".</p>";
  // The trace holds several ranks of one job (one `stallprof run` over a launcher).
  if (auto job = AnalyzeJob({a}); job.ok()) h += RanksSection(*job);
  for (const auto& l : a.loaders) {
    const auto& c = l.config;
    h += fmt::format("<h2>Loader {} (pid {}{})</h2>", EscapeHtml(c.name), l.pid, l.rank >= 0 ? fmt::format(", rank {}", l.rank) : "");
    // The steady state is what whatif and recommend compare with; a loader without
    // one of its own (steady_fallback) has the whole run's figure alone.
    const std::string steady = l.steady_samples_per_s > 0 && !l.steady_fallback
                                   ? fmt::format(", {:.1f} steady state", l.steady_samples_per_s)
                                   : "";
    h += fmt::format("<div class=\"meta\">{} &middot; {} iterations, {:.0f} samples, {:.1f} samples/s whole run{}</div>",
                     EscapeHtml(LoaderSetupLine(c)), l.iterations.size(), l.samples, l.samples_per_s, steady);
    h += IterationTimeline(l, charts);
    h += AccountSection(l);
    h += "<h3>Step time</h3>" + StepTable(l);
    h += "<h3>Workers</h3>";
    h += WorkerChart(l);
    if (c.num_workers > 0)
      h += "<p class=\"note\">P" + EscapeHtml(PrefetchQueueLine(l).substr(1)) + ".</p>";  // "Prefetch queue: ..."
    h += "<h3>Epochs</h3>" + EpochTable(l);
    h += "<h3>Stages</h3>" + StageTable(l);
  }

  h += "<h2>System</h2>";
  if (const std::string coverage = CoverageLine(a); !coverage.empty())
    h += "<p class=\"note\" id=\"coverage\">" + EscapeHtml(coverage) + "</p>";
  const auto& sys = trace.system;
  std::vector<double> t, cpu, disk, cache;
  for (size_t i = 1; i < sys.t_ns.size(); ++i) {
    double dt = (sys.t_ns[i] - sys.t_ns[i - 1]) * 1e-9;
    if (dt <= 0) continue;
    double x = (sys.t_ns[i] - trace.header.start_monotonic_ns) * 1e-9;
    double total = i < sys.cpu_total_ns.size() ? static_cast<double>(sys.cpu_total_ns[i]) - sys.cpu_total_ns[i - 1] : 0;
    double busy = i < sys.cpu_busy_ns.size() ? static_cast<double>(sys.cpu_busy_ns[i]) - sys.cpu_busy_ns[i - 1] : 0;
    double read = i < sys.disk_read_bytes.size() ? static_cast<double>(sys.disk_read_bytes[i]) - sys.disk_read_bytes[i - 1] : 0;
    t.push_back(std::max(0.0, x));
    cpu.push_back(total > 0 ? std::clamp(100 * busy / total, 0.0, 100.0) : 0);
    disk.push_back(std::max(0.0, read) / 1e6 / dt);
    cache.push_back(i < sys.page_cache_bytes.size() ? sys.page_cache_bytes[i] / 1073741824.0 : 0);
  }
  if (t.size() < 2) {
    h += "<p class=\"note\">No sampler data in the trace (machine CPU, disk read, page cache).</p>";
  } else {
    for (auto [id, title, values, unit, colour] :
         {std::tuple{"system-cpu", "Machine CPU busy", &cpu, "%", kComputeColour}, std::tuple{"system-disk", "Disk read", &disk, "MB/s", kIoColour},
          std::tuple{"system-cache", "Page cache", &cache, "GiB", kCpuColour}}) {
      ChartSpec c;
      c.id = id;
      c.data = DownsampleMinMax(t, {*values}, kMaxSeriesPoints);
      c.title = std::string(title) + (c.data.per_bucket > 1 ? fmt::format(", min and max of every {} samples", c.data.per_bucket) : "");
      c.x_label = "seconds since start";
      c.y_unit = unit;
      c.series = {{title, colour, false}};
      c.sync = "system";
      h += Chart(c, charts);
    }
  }
  const auto& s = a.system;
  if (s.available)
    h += fmt::format("<p class=\"note\">The job kept {:.2f} cores busy ({}); machine CPU {} busy{}; disk read {} ({}/s); page cache {} &rarr; {}; memory available at least {} of {}.</p>",
                     s.job_cpu_cores, EscapeHtml(UsableCoresText(a, Pct(s.job_cpu_fraction))), Pct(s.machine_cpu_fraction),
                     s.steal_measured ? fmt::format(" (steal {:.1f}%: the hypervisor running other guests)", 100 * s.steal_fraction) : "",
                     EscapeHtml(FormatBytes(s.disk_read_bytes)),
                     EscapeHtml(FormatBytes(s.disk_read_bytes_per_s)), EscapeHtml(FormatBytes(s.page_cache_start)), EscapeHtml(FormatBytes(s.page_cache_end)),
                     EscapeHtml(FormatBytes(s.mem_available_min)), EscapeHtml(FormatBytes(s.memory_bytes)));
  for (std::string note : {OtherProcessesText(a), StealNote(a), CpuQuotaNote(a), DatasetMemoryNote(a)}) {
    if (note.empty()) continue;
    note[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(note[0])));
    h += fmt::format("<p class=\"note\">{}.</p>", EscapeHtml(note));
  }

  h += "<h2>Data quality</h2>";
  const auto& q = a.quality;
  std::string clients;
  for (const auto& c : q.clients) clients += (clients.empty() ? "" : ", ") + c;
  std::string ending = q.footer_present ? DescribeEnding(q) : "";
  if (!ending.empty()) ending = " " + EscapeHtml(std::string(1, static_cast<char>(std::toupper(static_cast<unsigned char>(ending[0])))) + ending.substr(1)) + ".";
  h += fmt::format("<p class=\"note\">{} spans, {} dropped ({:.1f}%); {} lanes used of {}; clients: {}; clock {}.{}{}{}</p>", q.spans, q.dropped,
                   q.dropped_share * 100, q.lanes_used, q.ring_lanes, EscapeHtml(clients.empty() ? "none" : clients), q.clock,
                   q.truncated ? " The trace is truncated: analyzed up to its last complete chunk." : "",
                   q.footer_present ? "" : " No footer: the run did not finish cleanly.", ending);
  h += "<p class=\"note\">Generated by stallprof report. Definitions: docs/analysis.md.</p>\n";
  if (charts) h += "<script>" + charts->script + "</script>\n<script>" + kChartScript + "</script>\n";
  h += "</body></html>\n";
  return h;
}

}  // namespace stallprof::report
