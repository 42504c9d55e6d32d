// Least-squares fits (Eigen) for model inputs that vary with a setting: CPU
// cost against batch size across loaders, bandwidth against concurrency.
#pragma once

#include <vector>

#include "common/result.h"
#include "model/model.h"

namespace stallprof::model {

struct LinearFit {
  double intercept = 0;
  double slope = 0;
  double r2 = 0;       // coefficient of determination (1 = exact)
  size_t points = 0;
};

// y = intercept + slope * x by least squares. Fails (UnsupportedError) with
// fewer than two distinct x values: nothing to fit, record more settings.
Result<LinearFit> FitLine(const std::vector<double>& x, const std::vector<double>& y);

// Worker CPU per batch against batch size over loaders that have fetch
// spans: intercept = per-batch cost (collate, IPC), slope = per-sample cost.
// Fails when fewer than three distinct batch sizes were measured: a line
// through two passes through any two loaders (a train and a validation loader
// with other transforms "fitted" -1.5 ms + 644 us a sample, r2 1.00).
Result<LinearFit> FitCpuAgainstBatchSize(const std::vector<LoaderProfile>& loaders);

// One fetch span: its thread's CPU time and the bytes the thread read during it.
struct ReadSample {
  double cpu_s = 0;
  double storage_bytes = 0;  // from the storage device (page-cache misses)
  double call_bytes = 0;     // through read syscalls (hits and misses)
  double system_s = -1;      // the thread's system CPU time, -1 = not recorded
  // Its thread's first fetch of the loader: a fresh worker's first items
  // import modules on first use, whose files it reads too.
  bool first_of_thread = false;
};

struct ReadCostFit {
  double cpu_s_per_storage_byte = 0;  // CPU a byte read from storage costs beyond a page-cache hit
  double r2 = 0;
  size_t points = 0;
};

// Worker CPU against storage reads over fetch spans, by least squares:
//   cpu = base + a * storage_bytes (+ b * call_bytes when those vary),
// so `a` is what a miss costs the reading thread (allocating and filling
// pages, reclaim) and what a larger cache takes away; per-byte work done on
// every read (copying, decoding) stays in `base` and `b`. Fails, saying why,
// when the spans cannot tell the two apart (too few, no spread in storage
// reads, or storage reads that move in step with all reads).
Result<ReadCostFit> FitReadCost(const std::vector<ReadSample>& rows);

// When FitReadCost cannot separate them (a cold profile where every read
// missed alike, or a warm one with a few misses): the CPU a byte read from
// storage costs, estimated from the kernel time of the fetches that read from
// storage, less what copying the bytes they read from the page cache costs
// (`copy_ns_per_byte`, timed by the launcher) and, when at least 10 fetches
// missed nothing, less those fetches' mean kernel time beyond their copy
// (page faults, allocations), per byte from storage. Without such fetches the
// other kernel work counts as miss CPU. Fails when the rows lack system time
// or storage reads, the copy cost is unknown, or the fetches with misses
// spent no more kernel time than the others beyond the noise (95%).
Result<double> EstimateReadCostFromSystemTime(const std::vector<ReadSample>& rows, double copy_ns_per_byte);

}  // namespace stallprof::model
