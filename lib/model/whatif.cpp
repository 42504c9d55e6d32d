#include "model/whatif.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "common/units.h"
#include "model/cache.h"

namespace stallprof::model {

Result<Sweep> ParseSweep(const SweepFlags& f) {
  Sweep s;
  if (!f.cores.empty()) {
    auto parts = SplitList(f.cores, "--cores");
    if (!parts.ok()) return parts.error();
    for (const auto& part : *parts) {
      char* end = nullptr;
      const double v = std::strtod(part.c_str(), &end);
      if (end == part.c_str() || *end != '\0' || !std::isfinite(v))
        return UsageError("--cores '" + part + "': not a number, expected e.g. --cores 8 or --cores 2,4,8");
      if (v <= 0) return UsageError("--cores " + part + ": needs at least a fraction of a core (> 0)");
      s.cores.push_back(v);
    }
  }
  if (!f.workers.empty()) {
    auto parts = SplitList(f.workers, "--workers");
    if (!parts.ok()) return parts.error();
    for (const auto& part : *parts) {
      if (part == "auto") {
        s.workers.push_back(kAutoWorkers);
        continue;
      }
      char* end = nullptr;
      const long v = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || *end != '\0' || v < 0 || v > 4096)
        return UsageError("--workers '" + part + "': expected 'auto' or a worker count from 0 to 4096");
      s.workers.push_back(static_cast<int32_t>(v));
    }
  }
  if (!f.cache.empty()) {
    auto parts = SplitList(f.cache, "--cache");
    if (!parts.ok()) return parts.error();
    for (const auto& part : *parts) {
      auto bytes = ParseBytes(part, "--cache");
      if (!bytes.ok()) return bytes.error();
      if (*bytes >= static_cast<uint64_t>(kCacheAll)) return UsageError("--cache " + part + ": too large");
      s.cache_bytes.push_back(static_cast<int64_t>(*bytes));
    }
  }
  if (!f.cache_policy.empty()) {
    if (f.cache_policy == "lru") s.cache_policy = CachePolicy::kLru;
    else if (f.cache_policy == "static") s.cache_policy = CachePolicy::kStatic;
    else return UsageError("--cache-policy '" + f.cache_policy + "': expected lru (the OS page cache) or static");
    s.cache_policy_given = true;
  }
  if (!f.accel_speedup.empty()) {
    char* end = nullptr;
    s.accel_speedup = std::strtod(f.accel_speedup.c_str(), &end);
    if (end == f.accel_speedup.c_str() || *end != '\0' || !(s.accel_speedup > 0) || !std::isfinite(s.accel_speedup))
      return UsageError("--accel-speedup '" + f.accel_speedup + "': expected a factor > 0, e.g. 2");
  }
  if (!f.disk_bw.empty()) {
    auto bw = ParseBandwidth(f.disk_bw, "--disk-bw");
    if (!bw.ok()) return bw.error();
    s.storage_bandwidth = *bw;
  }
  s.first_epoch = f.first_epoch;
  return s;
}

uint32_t AutoWorkers(const LoaderProfile& profile, const Scenario& scenario) {
  const auto cap = static_cast<uint32_t>(std::max(1.0, std::floor(scenario.machine.cores) - 1));
  std::vector<double> rates;
  for (uint32_t w = 1; w <= cap; ++w) {
    Scenario s = scenario;
    s.workers = static_cast<int32_t>(w);
    auto r = Predict(profile, s);
    rates.push_back(r.ok() ? r->samples_per_s : 0);
  }
  const double best = *std::max_element(rates.begin(), rates.end());
  for (uint32_t w = 1; w <= cap; ++w)
    if (rates[w - 1] >= best * 0.995) return w;
  return cap;
}

namespace {
std::string Described(const char* what, double value, const std::string& formatted, bool measured,
                      const std::string& source) {
  (void)value;
  return fmt::format("{}: {} ({}{})", what, formatted, measured ? "measured" : "assumed",
                     source.empty() ? "" : ", " + source);
}

std::vector<std::string> Inputs(const LoaderProfile& p, const Machine& m) {
  std::vector<std::string> in;
  in.push_back(fmt::format("batch size: {:g}, workers: {}, steady-state batches: {} (measured, loader config and trace)",
                           p.batch_size, p.workers, p.batches));
  in.push_back(fmt::format("compute per batch: {} (measured, mean step - wait)", FormatSeconds(p.compute_s_per_batch)));
  in.push_back(fmt::format("worker CPU / io / run-queue delay per batch: {} / {} / {} (measured, fetch spans)",
                           FormatSeconds(p.cpu_s_per_batch), FormatSeconds(p.io_s_per_batch),
                           FormatSeconds(p.delay_s_per_batch)));
  in.push_back(fmt::format("main process CPU: {:.2f} cores (measured, /proc sampler)", p.main_cpu_cores));
  in.push_back(fmt::format("handoff per batch (waiting in next() for a batch already produced): {} (measured)",
                           FormatSeconds(p.handoff_s_per_batch)));
  in.push_back(p.receive_s_per_batch > 0
                   ? fmt::format("main thread CPU + run-queue delay in next() per batch: {} (measured, wait spans); "
                                 "the main loop pays the larger of this and handoff",
                                 FormatSeconds(p.receive_s_per_batch))
                   : "main thread CPU in next(): not recorded (wait spans without CPU time)");
  if (p.storage_bytes_per_batch > 0 || p.cpu_s_per_storage_byte.measured)
    in.push_back(Described("worker CPU per MiB read from storage", p.cpu_s_per_storage_byte.value,
                           fmt::format("{} ({} of the {} per batch, for {} read from storage)",
                                       FormatSeconds(p.cpu_s_per_storage_byte.value * 1048576.0),
                                       FormatSeconds(p.cpu_s_per_storage_byte.value * p.storage_bytes_per_batch),
                                       FormatSeconds(p.cpu_s_per_batch), FormatBytes(p.storage_bytes_per_batch)),
                           p.cpu_s_per_storage_byte.measured, p.cpu_s_per_storage_byte.source));
  in.push_back(fmt::format("profiled machine: {:g} usable cores, {} memory (measured, trace header)", m.cores,
                           FormatBytes(static_cast<double>(m.memory_bytes))));
  in.push_back(Described("bytes read per sample", p.bytes_per_sample.value, FormatBytes(p.bytes_per_sample.value),
                         p.bytes_per_sample.measured, p.bytes_per_sample.source));
  in.push_back(Described("storage bandwidth", p.storage_bandwidth.value,
                         p.storage_bandwidth.value > 0 ? FormatBytes(p.storage_bandwidth.value) + "/s" : "no limit",
                         p.storage_bandwidth.measured, p.storage_bandwidth.source));
  in.push_back(p.dataset_bytes > 0
                   ? fmt::format("dataset: {} in {} items, {} order (measured, loader config)",
                                 FormatBytes(static_cast<double>(p.dataset_bytes)), p.dataset_items,
                                 p.order == AccessOrder::kRandom ? "random" : "sequential")
                   : "dataset size: unknown (the dataset exposes no files): --cache cannot be predicted");
  in.push_back(fmt::format("page-cache hit ratio in the profiled run: {:.0f}% (measured, {} vs bytes needed)",
                           p.cold_hit_ratio * 100,
                           p.storage_bytes_per_batch > 0 ? "fetches' storage reads" : "disk reads"));
  return in;
}

Scenario Base(const Machine& profiled, const Sweep& sweep) {
  Scenario s;
  s.machine = profiled;
  s.cache_policy = sweep.cache_policy;
  s.accel_speedup = sweep.accel_speedup;
  s.storage_bandwidth = sweep.storage_bandwidth;
  s.first_epoch = sweep.first_epoch;
  return s;
}
}  // namespace

Result<WhatIfResult> WhatIf(const LoaderProfile& profile_in, const Machine& profiled, const Sweep& sweep) {
  LoaderProfile profile = profile_in;
  if (profile.profiled_cores <= 0) profile.profiled_cores = profiled.cores;
  WhatIfResult out;
  out.loader = profile.name;
  out.profiled = profiled;
  out.inputs = Inputs(profile, profiled);
  Scenario baseline;
  baseline.machine = profiled;
  auto base = Predict(profile, baseline);
  if (!base.ok()) return base.error();
  out.baseline = *base;
  if (profile.measured_step_s_per_batch > 0) {
    out.measured_samples_per_s = profile.batch_size / profile.measured_step_s_per_batch;
    out.model_error = (out.baseline.samples_per_s - out.measured_samples_per_s) / out.measured_samples_per_s;
  }
  const double reference = out.measured_samples_per_s > 0 ? out.measured_samples_per_s : out.baseline.samples_per_s;

  const std::vector<double> cores = sweep.cores.empty() ? std::vector<double>{profiled.cores} : sweep.cores;
  const std::vector<int32_t> workers = sweep.workers.empty() ? std::vector<int32_t>{-1} : sweep.workers;
  const std::vector<int64_t> caches = sweep.cache_bytes.empty() ? std::vector<int64_t>{-1} : sweep.cache_bytes;
  if (cores.size() > 1) out.swept = "cores";
  else if (workers.size() > 1) out.swept = "workers";
  else if (caches.size() > 1) out.swept = "cache";

  for (double c : cores)
    for (int32_t w : workers)
      for (int64_t cache : caches) {
        Scenario s = Base(profiled, sweep);
        s.machine.cores = c;
        s.cache_bytes = cache;
        s.workers = w == kAutoWorkers ? static_cast<int32_t>(AutoWorkers(profile, s)) : w;
        auto r = Predict(profile, s);
        if (!r.ok()) return r.error();
        WhatIfRow row{s, *r, std::nullopt, r->samples_per_s / reference - 1};
        if (cache >= 0) {  // a cache changes the cold first epoch against the steady state
          Scenario other = s;
          other.first_epoch = !s.first_epoch;
          auto o = Predict(profile, other);
          if (o.ok() && std::abs(o->samples_per_s - r->samples_per_s) > 0.01 * r->samples_per_s) row.other_epoch = *o;
        }
        out.rows.push_back(std::move(row));
      }
  return out;
}

namespace {
std::string XmlEscaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}
}  // namespace

std::string RenderWhatIfSvg(const WhatIfResult& r) {
  constexpr double kW = 720, kH = 380, kLeft = 70, kRight = 20, kTop = 40, kBottom = 70;
  const double plot_w = kW - kLeft - kRight, plot_h = kH - kTop - kBottom;
  const size_t n = r.rows.size();
  double ymax = r.measured_samples_per_s;
  for (const auto& row : r.rows) ymax = std::max(ymax, row.prediction.samples_per_s);
  ymax = ymax > 0 ? ymax * 1.15 : 1;
  auto x_of = [&](size_t i) { return kLeft + plot_w * (n <= 1 ? 0.5 : (i + 0.5) / n); };
  auto y_of = [&](double v) { return kTop + plot_h * (1 - v / ymax); };
  auto color = [](Bottleneck b) {
    switch (b) {
      case Bottleneck::kCompute: return "#d9ead3";
      case Bottleneck::kPrep: return "#fce5cd";
      case Bottleneck::kFetch: return "#cfe2f3";
      case Bottleneck::kHandoff: return "#d9d2e9";
    }
    return "#eeeeee";
  };
  auto label = [&](const WhatIfRow& row) {
    if (r.swept == "workers") return fmt::format("{}", row.scenario.workers);
    if (r.swept == "cache") return FormatBytes(static_cast<double>(row.scenario.cache_bytes));
    if (r.swept == "cores") return fmt::format("{:g}", row.scenario.machine.cores);
    return fmt::format("{:g} cores", row.scenario.machine.cores);
  };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\">stallprof whatif: predicted samples/s for loader '{3}'</text>\n",
      kW, kH, kLeft, XmlEscaped(r.loader));
  const double band = n ? plot_w / n : plot_w;
  for (size_t i = 0; i < n; ++i)
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} bound</title></rect>\n",
                       kLeft + band * i, kTop, band, plot_h, color(r.rows[i].prediction.bottleneck),
                       ToString(r.rows[i].prediction.bottleneck));
  // Axes and y ticks.
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", kLeft, kTop, kTop + plot_h);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", kLeft, kTop + plot_h, kLeft + plot_w);
  for (int t = 0; t <= 4; ++t) {
    const double v = ymax * t / 4;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:.4g}</text>\n", kLeft - 6, y_of(v) + 4, v);
  }
  svg += fmt::format("<text x=\"16\" y=\"{:.1f}\" transform=\"rotate(-90 16 {:.1f})\" text-anchor=\"middle\">samples/s</text>\n",
                     kTop + plot_h / 2, kTop + plot_h / 2);
  std::string points;
  for (size_t i = 0; i < n; ++i) {
    points += fmt::format("{:.1f},{:.1f} ", x_of(i), y_of(r.rows[i].prediction.samples_per_s));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x_of(i), kTop + plot_h + 16,
                       label(r.rows[i]));
  }
  svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#1f4e79\" stroke-width=\"2\"/>\n", points);
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
  for (Bottleneck b : {Bottleneck::kCompute, Bottleneck::kPrep, Bottleneck::kFetch, Bottleneck::kHandoff}) {
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"14\" fill=\"{}\" stroke=\"#999\"/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\">{} bound</text>\n",
                       lx, kH - 18, color(b), lx + 18, kH - 6, ToString(b));
    lx += 150;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace stallprof::model
