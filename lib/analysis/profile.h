// Turns a loaded trace into the model's inputs: one LoaderProfile per loader,
// and the machine it ran on. The only bridge from analysis to the model.
#pragma once

#include <vector>

#include "analysis.h"
#include "common/result.h"
#include "model/model.h"
#include "trace/trace.h"

namespace stallprof::analysis {

struct ProfileOptions {
  uint32_t warmup = 5;  // iterations skipped at the start of each epoch
};

// Per-loader measurements. Fails with an UnsupportedError naming what is
// missing (no loaders, too few steady-state iterations).
Result<std::vector<model::LoaderProfile>> MeasureProfiles(const Trace& trace, const ProfileOptions& options);

// The same over a streamed trace (LoadForAnalysis in analysis.h): memory grows
// with iterations and batches, not with the span count.
Result<std::vector<model::LoaderProfile>> MeasureProfiles(const TraceDigest& digest, const ProfileOptions& options);

// The profiled machine: usable cores, memory, page cache at start.
model::Machine MeasuredMachine(const Trace& trace);

}  // namespace stallprof::analysis
