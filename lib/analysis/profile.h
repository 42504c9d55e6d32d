// Turns a loaded trace into the model's inputs: one LoaderProfile per loader,
// and the machine it ran on. The only bridge from analysis to the model.
#pragma once

#include <string>
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

// A recorded run as whatif and recommend plan from it.
struct ProfiledRun {
  std::vector<model::LoaderProfile> loaders;  // the chosen loaders
  model::Machine machine;                     // the machine it ran on
  std::vector<std::string> left_out;          // the trace's other loaders, by name
};

// Streams `path` (memory grows with iterations, not spans) and measures its
// loaders. Keeps the loader named `only` when given (UsageError listing the
// loaders the trace has when there is none; "all" keeps every one), else the
// "train" loader when there is one, else all. Load and measurement errors pass through.
Result<ProfiledRun> LoadProfiledRun(const std::string& path, const ProfileOptions& options, const std::string& only);

}  // namespace stallprof::analysis
