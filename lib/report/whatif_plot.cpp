// The whatif plot: samples/s against the swept variable on bands coloured by
// the bottleneck, with the measured throughput as a dashed line, and under a
// cache point whose miss CPU is estimated (not fitted) a dotted range down
// to its floor (misses costing no CPU).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "common/units.h"
#include "report/html.h"
#include "report/model_report.h"

namespace stallprof::report {

std::string WhatIfSvg(const model::WhatIfResult& r) {
  using namespace model;
  constexpr double kW = 720, kH = 380, kLeft = 70, kRight = 20, kTop = 40, kBottom = 70;
  const double plot_w = kW - kLeft - kRight, plot_h = kH - kTop - kBottom;
  const size_t n = r.rows.size();
  double ymax = r.measured_samples_per_s;
  for (const auto& row : r.rows) ymax = std::max({ymax, row.prediction.samples_per_s, row.prediction.whole_run_samples_per_s});
  // The whole run (each epoch's start-up included) beside the steady state:
  // more non-persistent workers can raise one and lower the other.
  const bool whole_run = std::any_of(r.rows.begin(), r.rows.end(), [](const WhatIfRow& row) {
    return row.prediction.whole_run_samples_per_s > 0 &&
           std::abs(row.prediction.whole_run_samples_per_s - row.prediction.samples_per_s) > 0.01 * row.prediction.samples_per_s;
  });
  // Ticks at round numbers (the report's charts' steps, at most 8 of them),
  // the top tick above the highest point by 5% at least.
  const double tick = NiceStep(ymax * 1.05, 8);
  ymax = ymax > 0 ? std::ceil(ymax * 1.05 / tick) * tick : 1;
  auto x_of = [&](size_t i) { return kLeft + plot_w * (n <= 1 ? 0.5 : (i + 0.5) / n); };
  auto y_of = [&](double v) { return kTop + plot_h * (1 - v / ymax); };
  auto color = [](Bottleneck b) {
    switch (b) {
      case Bottleneck::kCompute: return "#d9ead3";
      case Bottleneck::kPrep: return "#fce5cd";
      case Bottleneck::kFetch: return "#cfe2f3";
      case Bottleneck::kHandoff: return "#d9d2e9";
      case Bottleneck::kBlocking: return "#e6e6e6";
    }
    return "#eeeeee";
  };
  auto label = [&](const WhatIfRow& row) {
    if (r.swept == "workers") return fmt::format("{}", row.scenario.workers);
    if (r.swept == "cache")
      return row.scenario.cache_bytes >= model::kCacheAll ? std::string("all")
                                                          : FormatBytes(static_cast<double>(row.scenario.cache_bytes));
    if (r.swept == "cores") return fmt::format("{:g}", row.scenario.machine.cores);
    return fmt::format("{:g} cores", row.scenario.machine.cores);
  };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\">stallprof whatif: predicted samples/s for loader '{3}'</text>\n",
      kW, kH, kLeft, EscapeHtml(r.loader));
  const double band = n ? plot_w / n : plot_w;
  for (size_t i = 0; i < n; ++i)
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} bound</title></rect>\n",
                       kLeft + band * i, kTop, band, plot_h, color(r.rows[i].prediction.bottleneck),
                       ToString(r.rows[i].prediction.bottleneck));
  // Axes and y ticks.
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", kLeft, kTop, kTop + plot_h);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", kLeft, kTop + plot_h, kLeft + plot_w);
  for (double v = 0; v <= ymax * 1.0001; v += tick)
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", kLeft - 6, y_of(v) + 4, v);
  svg += fmt::format("<text x=\"16\" y=\"{:.1f}\" transform=\"rotate(-90 16 {:.1f})\" text-anchor=\"middle\">samples/s</text>\n",
                     kTop + plot_h / 2, kTop + plot_h / 2);
  std::string points;
  for (size_t i = 0; i < n; ++i) {
    points += fmt::format("{:.1f},{:.1f} ", x_of(i), y_of(r.rows[i].prediction.samples_per_s));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x_of(i), kTop + plot_h + 16,
                       label(r.rows[i]));
  }
  svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1f4e79\" stroke-width=\"2\"/>\n", points);
  if (whole_run) {
    std::string whole;
    for (size_t i = 0; i < n; ++i) whole += fmt::format("{:.1f},{:.1f} ", x_of(i), y_of(r.rows[i].prediction.whole_run_samples_per_s));
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1f4e79\" stroke-width=\"1.5\" "
                       "stroke-dasharray=\"5 3\"><title>whole run, each epoch's start-up included</title></polyline>\n",
                       whole);
    for (size_t i = 0; i < n; ++i)
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"white\" stroke=\"#1f4e79\"><title>whole run "
                         "{:.1f} samples/s</title></circle>\n",
                         x_of(i), y_of(r.rows[i].prediction.whole_run_samples_per_s), r.rows[i].prediction.whole_run_samples_per_s);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#1f4e79\">solid: steady state; dashed: whole run (start-up "
                       "included)</text>\n",
                       kLeft, kTop - 6.0);
  }
  bool ranges = false;
  for (size_t i = 0; i < n; ++i) {
    const auto& floor = r.rows[i].without_miss_cpu;
    if (!floor) continue;
    ranges = true;
    const double x = x_of(i), top = y_of(r.rows[i].prediction.samples_per_s), bottom = y_of(floor->samples_per_s);
    svg += fmt::format("<g stroke=\"#1f4e79\"><title>with misses costing no CPU: {:.1f} samples/s</title>"
                       "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke-dasharray=\"2 3\"/>"
                       "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/></g>\n",
                       floor->samples_per_s, x, top, x, bottom, x - 6, bottom, x + 6, bottom);
  }
  if (ranges)
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#1f4e79\">dotted: down to misses costing "
                       "no CPU (the miss CPU is estimated)</text>\n",
                       kLeft + plot_w - (whole_run ? 4.0 : 0.0), whole_run ? kTop + 14.0 : kTop - 6.0);  // the whole run's note is above
  for (size_t i = 0; i < n; ++i)
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#1f4e79\"><title>{:.1f} samples/s</title></circle>\n",
                       x_of(i), y_of(r.rows[i].prediction.samples_per_s), r.rows[i].prediction.samples_per_s);
  if (r.measured_samples_per_s > 0)
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#990000\" stroke-dasharray=\"6 4\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" fill=\"#990000\" text-anchor=\"end\">measured {5:.1f}</text>\n",
                       kLeft, y_of(r.measured_samples_per_s), kLeft + plot_w, kLeft + plot_w - 4,
                       y_of(r.measured_samples_per_s) - 4, r.measured_samples_per_s);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", kLeft + plot_w / 2, kH - 30,
                     r.swept.empty() ? "scenario" : r.swept);
  double lx = kLeft;
  for (Bottleneck b : {Bottleneck::kCompute, Bottleneck::kPrep, Bottleneck::kFetch, Bottleneck::kHandoff,
                        Bottleneck::kBlocking}) {
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"#999\"/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\">{} bound</text>\n",
                       lx, kH - 18, color(b), lx + 18, kH - 6, ToString(b));
    lx += 128;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace stallprof::report
