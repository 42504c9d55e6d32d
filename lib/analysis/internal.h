// Pieces shared by analysis.cpp and profile.cpp; not part of the contract.
#pragma once

#include <functional>
#include <vector>

#include "analysis.h"
#include "model/model.h"
#include "trace/trace.h"

namespace stallprof::analysis::internal {

// Everything except the DS-Analyzer split (which needs the model, which needs
// the profiles built from this). Same failure as Analyze.
// `extra_stages`: totals of spans already folded away (LoadForAnalysis).
Result<TraceAnalysis> AnalyzeCore(const Trace& trace, const AnalysisOptions& options,
                                  const std::vector<StageTotals>& extra_stages = {});

// The model's view of one analyzed loader.
model::LoaderProfile BuildProfile(const Trace& trace, const TraceAnalysis& analysis, const LoaderAnalysis& loader);

// Stage totals are kept per (thread, name, scope): a thread may serve two
// loaders (num_workers = 0), whose spans carry different scopes.
struct StageKey {
  uint64_t thread_and_name = 0;  // thread << 32 | name
  uint16_t scope = 0;
  bool operator==(const StageKey& o) const { return thread_and_name == o.thread_and_name && scope == o.scope; }
};
struct StageKeyHash {
  size_t operator()(const StageKey& k) const { return std::hash<uint64_t>()(k.thread_and_name * 65599u + k.scope); }
};

// Linear interpolation of a sampled series at `t` (clamped to its ends); 0 when empty.
double SeriesAt(const std::vector<uint64_t>& t_ns, const std::vector<uint64_t>& values, uint64_t t);

}  // namespace stallprof::analysis::internal
