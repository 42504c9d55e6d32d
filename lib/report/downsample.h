// Bounded series for long runs: a chart of a million iterations gets a fixed
// number of points, and a single spike still shows, because each bucket keeps
// its minimum and its maximum (min/max pairs, as M4 does without first/last),
// never its mean.
#pragma once

#include <cstddef>
#include <vector>

namespace stallprof::report {

struct Downsampled {
  // Two per bucket: the x of the bucket's first point and the x of its middle
  // point (one when the bucket holds one point). Shared by every series.
  std::vector<double> x;
  // Per input series, the bucket's extremes in the order they occurred, so the
  // line drawn through them reaches both.
  std::vector<std::vector<double>> y;
  size_t per_bucket = 1;  // input points per bucket; 1 = the input unchanged
};

// `ys` holds series of x.size() points each (a shorter series is read as
// ending in zeros). At most `max_points` points per series come out (at least
// 2); the input is returned unchanged when it fits. Buckets hold consecutive
// points, equally many each (the last may hold fewer).
Downsampled DownsampleMinMax(const std::vector<double>& x, const std::vector<std::vector<double>>& ys, size_t max_points);

}  // namespace stallprof::report
