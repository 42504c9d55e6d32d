#include "model/fit.h"

#include <Eigen/Dense>
#include <set>

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
  return FitLine(x, y);
}

}  // namespace stallprof::model
