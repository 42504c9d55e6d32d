#include "downsample.h"

#include <algorithm>

namespace stallprof::report {

Downsampled DownsampleMinMax(const std::vector<double>& x, const std::vector<std::vector<double>>& ys, size_t max_points) {
  const size_t n = x.size();
  auto value = [&](size_t series, size_t i) { return i < ys[series].size() ? ys[series][i] : 0.0; };
  Downsampled out;
  out.y.resize(ys.size());
  if (n <= max_points) {
    out.x = x;
    for (size_t k = 0; k < ys.size(); ++k)
      for (size_t i = 0; i < n; ++i) out.y[k].push_back(value(k, i));
    return out;
  }
  const size_t buckets = std::max<size_t>(1, max_points / 2);
  out.per_bucket = (n + buckets - 1) / buckets;
  for (size_t first = 0; first < n; first += out.per_bucket) {
    const size_t end = std::min(n, first + out.per_bucket);
    const bool pair = end - first > 1;
    out.x.push_back(x[first]);
    if (pair) out.x.push_back(x[first + (end - first) / 2]);
    for (size_t k = 0; k < ys.size(); ++k) {
      size_t lo = first, hi = first;
      for (size_t i = first + 1; i < end; ++i) {
        if (value(k, i) < value(k, lo)) lo = i;
        if (value(k, i) > value(k, hi)) hi = i;
      }
      const size_t a = std::min(lo, hi), b = std::max(lo, hi);
      out.y[k].push_back(value(k, a));
      if (pair) out.y[k].push_back(value(k, b));
    }
  }
  return out;
}

}  // namespace stallprof::report
