// Renders the model's answers for people (text tables) and for programs
// (JSON): `stallprof whatif` (predictions for other machines and settings) and
// `stallprof recommend` (the LP's DataLoader settings and cache plan).
// Rendering only: every number comes from lib/model; nothing here prints.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/fit.h"
#include "model/lp.h"
#include "model/model.h"
#include "model/whatif.h"

namespace stallprof::report {

// ---- whatif ----

// Everything `stallprof whatif` prints.
struct WhatIfReport {
  std::string trace;                         // the trace path as given
  model::Sweep sweep;                        // what was swept (names the scenario and epoch in the text)
  std::vector<model::WhatIfResult> loaders;  // one per loader
  // Loaders the scenario cannot be predicted for (--cache on a loader without
  // a dataset size), beside others that can: name and the one-line reason.
  std::vector<std::pair<std::string, std::string>> not_predicted;
  std::vector<std::string> other_loaders;    // the trace's loaders not asked for (--loader)
  std::optional<model::LinearFit> cpu_fit;   // worker CPU per batch against batch size over the loaders
  std::string plot;                          // the SVG file written (--plot), "" = none; named by the text only
};

// One loader's block: the baseline against the measured run, the scenario,
// the table (a row per scenario, plus the other epoch when the cache makes
// them differ) and the measured and assumed inputs.
std::string WhatIfLoaderText(const model::WhatIfResult& result, const model::Sweep& sweep, const std::string& trace);

// "worker CPU per batch = 1.2 ms + 3.4 ms x batch size (least squares over 2 loaders, r2 0.99)".
std::string CpuFitLine(const model::LinearFit& fit);

// The sentence whatif and recommend print (with a leading space) when a
// configuration keeps the cores busier or less busy than the profiled run
// (model::CompareBusyCores), `subject` naming it ("the recommended
// configuration"); "" when it keeps them as busy.
std::string BusyCoresNote(const model::Prediction& profiled, const model::Prediction& scenario,
                          const std::string& subject);

// "\nother loaders in the trace: val, test (--loader NAME or --loader all to predict them)\n",
// the line whatif and recommend end with when --loader left loaders out; "" when none.
std::string OtherLoadersLine(const std::vector<std::string>& names);

// The terminal output: the loaders' blocks separated by a blank line, then the
// CPU fit and the plot file when there are any.
std::string WhatIfText(const WhatIfReport& report);

// A self-contained SVG (--plot): samples/s against the swept variable (or the
// scenario index), background bands coloured by the bottleneck.
std::string WhatIfSvg(const model::WhatIfResult& result);

// The same as one JSON object, newline-terminated (", " and ": " separators,
// numbers to 6 significant digits; an unbounded rate is -1).
std::string WhatIfJson(const WhatIfReport& report);

// ---- recommend ----

struct RecommendedLoader {
  model::LoaderProfile profile;  // what the plan was made from
  model::Recommendation plan;
};

// Everything `stallprof recommend` prints.
struct RecommendReport {
  std::string trace;                        // the trace path as given
  model::RecommendOptions options;          // the cores and memory planned for
  std::vector<RecommendedLoader> loaders;
  // Loaders the plan could not cover (e.g. iterated on a prefetch thread): name, why.
  std::vector<std::pair<std::string, std::string>> not_planned;
  std::vector<std::string> other_loaders;  // the trace's loaders not asked for (--loader)
};

// The paste-ready line: "DataLoader(..., num_workers=4, prefetch_factor=2, ...)".
std::string DataLoaderLine(const model::Recommendation& plan);

// The cache plan in words, e.g. "leave 50.0 GiB of page cache to the dataset's files (...)".
std::string CacheLine(const model::Recommendation& plan, const model::LoaderProfile& profile);

// One loader's plan: the DataLoader line, cache plan, throughput against the
// measured run, the binding constraint, Little's-law prefetch, the shadow
// prices and the assumptions.
std::string RecommendLoaderText(const RecommendedLoader& loader, const model::RecommendOptions& options,
                                const std::string& trace);

// The terminal output: the loaders' plans separated by a blank line.
std::string RecommendText(const RecommendReport& report);

// The same as one JSON object, newline-terminated (", " and ": " separators,
// numbers to 6 significant digits), with every LP row and its shadow price.
std::string RecommendJson(const RecommendReport& report);

}  // namespace stallprof::report
