// The HTML report: one self-contained page (inline CSS, SVG and script, no
// external assets) with the verdict, the ranks of the job when the trace holds
// several, the iteration timeline, the stall breakdown, worker utilization,
// the sampler's time series and the epoch/stage tables. Its size is bounded
// whatever the length of the run: long series are downsampled (min and max per
// bucket, so spikes survive) and long tables fold to a summary.
#pragma once

#include <string>

#include "analysis/analysis.h"
#include "chart_library.h"
#include "trace/trace.h"

namespace stallprof::report {

// The page for `analysis` of `trace` (the trace supplies the sampler series).
// With `charts`, the timeline and the sampler series are uPlot charts (zoom,
// pan, values on hover) and uPlot is inlined; without, static SVG.
std::string ReportHtml(const Trace& trace, const analysis::TraceAnalysis& analysis, const ChartLibrary* charts = nullptr);

// A readable tick step (1, 2 or 5 x 10^k) for a range: at most `ticks` steps cover it.
double NiceStep(double range, int ticks);

// `text` with &, <, >, " and ' escaped for HTML text and attributes.
std::string EscapeHtml(const std::string& text);

}  // namespace stallprof::report
