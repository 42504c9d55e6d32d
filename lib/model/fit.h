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
// Fails when fewer than two distinct batch sizes were measured.
Result<LinearFit> FitCpuAgainstBatchSize(const std::vector<LoaderProfile>& loaders);

}  // namespace stallprof::model
