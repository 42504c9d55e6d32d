// The HTML report: one self-contained page (inline CSS and SVG, no external
// assets) with the verdict, the ranks of the job when the trace holds several,
// the iteration timeline, the stall breakdown,
// worker utilization, the sampler's time series and the epoch/stage tables.
#pragma once

#include <string>

#include "analysis/analysis.h"
#include "trace/trace.h"

namespace stallprof::report {

// The page for `analysis` of `trace` (the trace supplies the sampler series).
std::string ReportHtml(const Trace& trace, const analysis::TraceAnalysis& analysis);

// `text` with &, <, >, " and ' escaped for HTML text and attributes.
std::string EscapeHtml(const std::string& text);

}  // namespace stallprof::report
