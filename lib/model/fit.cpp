#include "model/fit.h"

#include <Eigen/Dense>
#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>

#include "common/units.h"

namespace stallprof::model {

Result<LinearFit> FitLine(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size()) return RuntimeError("fit: x and y differ in length");
  if (std::set<double>(x.begin(), x.end()).size() < 2)
    return UnsupportedError("a fit needs at least two distinct settings; record runs (or loaders) that differ");
  const auto n = static_cast<Eigen::Index>(x.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd b(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    a(i, 0) = 1;
    a(i, 1) = x[static_cast<size_t>(i)];
    b(i) = y[static_cast<size_t>(i)];
  }
  const Eigen::Vector2d coef = a.colPivHouseholderQr().solve(b);
  LinearFit fit;
  fit.intercept = coef(0);
  fit.slope = coef(1);
  fit.points = x.size();
  const double mean = b.mean();
  const double total = (b.array() - mean).square().sum();
  const double residual = (a * coef - b).squaredNorm();
  fit.r2 = total > 0 ? 1 - residual / total : 1;
  return fit;
}

Result<LinearFit> FitCpuAgainstBatchSize(const std::vector<LoaderProfile>& loaders) {
  std::vector<double> x, y;
  for (const auto& l : loaders)
    if (l.cpu_s_per_batch > 0 && l.batch_size > 0) {
      x.push_back(l.batch_size);
      y.push_back(l.cpu_s_per_batch);
    }
  if (std::set<double>(x.begin(), x.end()).size() < 3)
    return UnsupportedError("a fit of CPU against batch size needs loaders of at least three batch sizes");
  return FitLine(x, y);
}

namespace {
double CoefficientOfVariation(const Eigen::VectorXd& v) {
  const double mean = v.mean();
  if (mean <= 0) return 0;
  return std::sqrt((v.array() - mean).square().mean()) / mean;
}

constexpr size_t kMinRows = 10;  // fetch spans a fit needs

// The two-sided 95% quantile of Student's t with `dof` degrees of freedom:
// a baseline of a few fetches has a wide interval, not a normal one.
double StudentT95(size_t dof) {
  static constexpr double kTable[] = {12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23,
                                      2.20,  2.18, 2.16, 2.14, 2.13, 2.12, 2.11, 2.10, 2.09, 2.09};
  if (dof == 0) return std::numeric_limits<double>::infinity();
  if (dof <= std::size(kTable)) return kTable[dof - 1];
  return dof < 30 ? 2.06 : dof < 60 ? 2.02 : 1.96;
}
}  // namespace

Result<ReadCostFit> FitReadCost(const std::vector<ReadSample>& rows) {
  constexpr double kMinSpread = 0.05;        // coefficient of variation a regressor needs
  constexpr double kMaxCorrelation = 0.95;   // storage and call bytes closer than this cannot be separated
  constexpr double kLowMissShare = 0.5;  // a batch that missed at most this share of the mean bytes
  if (rows.size() < kMinRows)
    return UnsupportedError("only " + std::to_string(rows.size()) + " fetch spans recorded the bytes they read (" +
                            std::to_string(kMinRows) + " needed)");
  const auto n = static_cast<Eigen::Index>(rows.size());
  Eigen::VectorXd cpu(n), storage(n), calls(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& r = rows[static_cast<size_t>(i)];
    cpu(i) = r.cpu_s;
    storage(i) = r.storage_bytes;
    calls(i) = r.call_bytes;
  }
  if (storage.mean() <= 0) return UnsupportedError("no fetch read from storage: every read came from the page cache");
  // Misses that are a sliver of what the fetches read (metadata, a module
  // imported by the first fetch) cannot price a miss: whatever else varies
  // with them sets the slope. Seen: 2.7 KiB a batch of a 1.6 MiB JPEG batch's
  // reads fitted 120 ms of CPU per MiB (R^2 0.36), 25 times what a cold read
  // costs here (scripts/bench_cold_read.sh).
  constexpr double kMinStorageShare = 0.05;
  if (calls.mean() > 0 && storage.mean() < kMinStorageShare * calls.mean())
    return UnsupportedError(fmt::format("the fetches read {} a batch from storage of the {} they read ({:.2g}%, {:g}% "
                                        "needed), too little to fit what a miss costs",
                                        FormatBytes(storage.mean()), FormatBytes(calls.mean()),
                                        100 * storage.mean() / calls.mean(), 100 * kMinStorageShare));
  if (CoefficientOfVariation(storage) < kMinSpread)
    return UnsupportedError("every batch read about the same bytes from storage, so what a miss costs cannot be told "
                            "from the rest of the CPU; profile with a partly warm page cache to measure it");
  // The line is extrapolated to a batch without misses: unless enough batches
  // missed little, a miss's fixed kernel cost (a request per random read,
  // readahead) hides in the intercept. Seen: 64 random 4 KiB reads per cold
  // file fitted 0.18 ms/MiB while 2.5 of the 2.9 ms per batch were in the
  // kernel; and a cold profile (2% hits) where a few batches missed less
  // fitted a slope that predicted a cached run at 4913 samples/s against 12568
  // measured (the estimate from system time, in the next profile: 12050).
  const auto low = (storage.array() <= kLowMissShare * storage.mean()).count();
  if (low < static_cast<Eigen::Index>(kMinRows))
    return UnsupportedError(fmt::format("only {} of {} batches missed less than half the mean bytes from storage, so a "
                                        "miss's fixed cost cannot be told from the rest of the CPU ({} needed); profile "
                                        "with a partly warm page cache to measure it",
                                        low, rows.size(), kMinRows));
  // Nor is a slope set by a few batches that missed: a worker's first fetch
  // reading its modules (1.3 MiB, one of 100 fetches) fitted 1.4 ms/MiB with
  // R^2 0.96 from that batch's start-up alone.
  const auto high = n - low;
  if (high < static_cast<Eigen::Index>(kMinRows))
    return UnsupportedError(fmt::format("only {} of {} batches missed more than half the mean bytes from storage, too few "
                                        "to fit what a miss costs ({} needed)",
                                        high, rows.size(), kMinRows));
  const bool with_calls = CoefficientOfVariation(calls) >= kMinSpread;
  if (with_calls) {
    const Eigen::ArrayXd ds = storage.array() - storage.mean(), dc = calls.array() - calls.mean();
    const double corr = (ds * dc).sum() / std::sqrt(ds.square().sum() * dc.square().sum());
    if (std::abs(corr) > kMaxCorrelation)
      return UnsupportedError("storage reads moved in step with all reads (every read missed), so what a miss costs "
                              "cannot be told from the CPU per byte read; profile with a partly warm page cache");
  }
  Eigen::MatrixXd a(n, with_calls ? 3 : 2);
  a.col(0).setOnes();
  a.col(1) = storage;
  if (with_calls) a.col(2) = calls;
  const Eigen::VectorXd coef = a.colPivHouseholderQr().solve(cpu);
  ReadCostFit fit;
  fit.points = rows.size();
  const double residual = (a * coef - cpu).squaredNorm();
  const double total = (cpu.array() - cpu.mean()).square().sum();
  fit.r2 = total > 0 ? 1 - residual / total : 1;
  // The slope's 95% interval: when it is wider than the slope itself, the
  // bytes' spread was too small against the CPU's noise (a cold run with a
  // few hits, a busy machine) and the fit says nothing about a miss.
  const auto dof = static_cast<double>(n - a.cols());
  const Eigen::MatrixXd gram = a.transpose() * a;
  const double variance = dof > 0 ? residual / dof * gram.inverse()(1, 1) : 0;
  const double half_width = 1.96 * std::sqrt(std::max(0.0, variance));
  if (!(half_width <= std::abs(coef(1))))
    return UnsupportedError(fmt::format("the fit of CPU against the bytes read from storage is not determined ({:.3g} "
                                        "+- {:.3g} ns/byte, 95%): the misses varied too little against the CPU's noise",
                                        coef(1) * 1e9, half_width * 1e9));
  // A miss never makes a read cheaper, and never costs more than all the CPU.
  fit.cpu_s_per_storage_byte = std::clamp(coef(1), 0.0, cpu.mean() / storage.mean());
  return fit;
}

Result<double> EstimateReadCostFromSystemTime(const std::vector<ReadSample>& rows, double copy_ns_per_byte) {
  if (!(copy_ns_per_byte > 0)) return UnsupportedError("the trace has no page-cache copy cost (recorded by an older stallprof)");
  // Each fetch's kernel time beyond copying the bytes it read: what its
  // misses cost, plus other kernel work (page faults, allocations).
  std::vector<double> clean;  // fetches that read nothing from storage: other kernel work alone
  double missing_cpu = 0, missing_excess = 0, storage = 0, missing_calls = 0;
  size_t missing = 0;
  for (const auto& r : rows) {
    if (r.system_s < 0) return UnsupportedError("the fetch spans carry no system CPU time (recorded by an older hook)");
    const double excess = r.system_s - r.call_bytes * copy_ns_per_byte * 1e-9;
    if (r.storage_bytes > 0) {
      ++missing;
      missing_cpu += r.cpu_s;
      missing_excess += excess;
      storage += r.storage_bytes;
      missing_calls += r.call_bytes;
    } else {
      clean.push_back(excess);
    }
  }
  if (missing == 0) return UnsupportedError("no fetch read from storage");
  // One or two fetches that faulted a few pages in (a module's code, a
  // lazily loaded table) price nothing: whatever else their kernel did sets
  // the figure. Seen: one fetch of 11 read 8 KiB with 2.5 ms of system time,
  // priced at 0.3 us a byte and charged to every fetch of an in-memory
  // loader as 0.2 ms of storage a batch.
  constexpr size_t kMinMissing = 3;
  if (missing < kMinMissing)
    return UnsupportedError(fmt::format("only {} fetch{} read from storage ({} needed to price a miss)", missing,
                                        missing == 1 ? "" : "es", kMinMissing));
  // With fetches that missed nothing, their kernel time is the baseline the
  // missing ones exceed: on a warm cache the page faults of a collate (13% of
  // a decode pipeline's CPU) would otherwise be charged to a few KiB of
  // metadata reads. Without them all of it counts as miss CPU, which only a
  // cold profile (the misses most of what the fetches read) bears out: where
  // most came from the page cache the rest is the fetches' other kernel work
  // (a loader of 12 batches, 90% hits, all missing a little: 78 ms of CPU a
  // MiB missed, its collate's page faults).
  constexpr size_t kMinBaseline = 3;
  constexpr double kMostlyMissed = 0.5;
  if (clean.size() >= kMinBaseline) {
    const auto n = static_cast<double>(clean.size());
    double mean = 0, square = 0;
    for (double v : clean) mean += v / n;
    for (double v : clean) square += (v - mean) * (v - mean);
    const double sd = std::sqrt(square / (n - 1));
    const auto m = static_cast<double>(missing);
    missing_excess -= m * mean;
    // 95%: the missing fetches' own spread and the baseline's error.
    const double half_width = StudentT95(clean.size() - 1) * sd * std::sqrt(m + m * m / n);
    if (!(missing_excess > half_width))
      return UnsupportedError(fmt::format(
          "the fetches that read from storage ({}) spent no more kernel time than the {} that did not ({:.3g} +- {:.3g} ms "
          "in all, 95%)",
          missing, clean.size(), missing_excess * 1e3, half_width * 1e3));
  } else if (storage < kMostlyMissed * missing_calls) {
    return UnsupportedError(fmt::format(
        "the fetches read {:.0f}% of their bytes from storage, the rest from the page cache, and fewer than {} read "
        "nothing from it, so their kernel time beyond a copy cannot be told apart from the misses'",
        100 * storage / missing_calls, kMinBaseline));
  }
  return std::clamp(missing_excess, 0.0, missing_cpu) / storage;
}

}  // namespace stallprof::model
