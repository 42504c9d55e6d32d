// The account of a loader's wall time (DESIGN.md "Definitions", docs/analysis.md
// "The account"): every nanosecond from DataLoader.__iter__ to the end of the
// next() that raised StopIteration goes to exactly one cause (analysis.h,
// Cause), so the lines sum to the wall time by construction.
//
// How each interval is attributed:
// - iterator creation (__iter__), the first next() of an epoch when workers
//   start there, and the next() that raised StopIteration: epoch start-up;
// - the main loop between next() calls (the last batch of an epoch up to the
//   StopIteration next(), and __iter__'s return to the first next()): compute;
// - a wait whose batch was already produced and its worker idle: handoff;
// - any other wait: in the proportions of the awaited batch's fetch span
//   (CPU = prep, run-queue delay = contention, off CPU = storage when that
//   fetch read bytes from the device, else other blocking; the CPU that
//   storage misses cost = storage); with num_workers = 0 the fetch span is
//   inside the wait and the rest of the wait is handoff;
// - stallprof's own cost (measured by the hook at start, per event) is taken
//   out of the lines where it landed: compute for the next() wrapper's part
//   outside the wait, the wait's causes proportionally for the rest.
#pragma once

#include <vector>

#include "analysis.h"
#include "internal.h"
#include "trace/trace.h"

namespace stallprof::analysis::internal {

// The hook's own cost per event in ns (config keys "hook_ns_*", scope 0 of the
// loader's process). All zero with measured = false for traces of older hooks.
struct HookCost {
  bool measured = false;
  double wait_ns = 0;     // one next() wrapper with its wait span
  double fetch_ns = 0;    // one fetch span with its read/system spans and thread_io calls
  double sample_ns = 0;   // one getitem span
  double collate_ns = 0;  // one collate span
  // What reading the counters adds to a wait / fetch span that the budget
  // sampled (hook_ns_wait_counters, hook_ns_fetch_counters); 0 for older hooks,
  // whose wait_ns and fetch_ns include the counters on every span.
  double wait_counters_ns = 0, fetch_counters_ns = 0;
};
HookCost ReadHookCost(const Trace& trace, uint32_t pid);

}  // namespace stallprof::analysis::internal
