#include "sampling.h"

#include <algorithm>
#include <cmath>

namespace stallprof::analysis {

namespace {
constexpr double kNs = 1e-9;
constexpr double kZ95 = 1.96;
}  // namespace

double CounterShare(const Trace& trace) {
  double share = 1;
  for (const auto& c : trace.configs) {
    if (c.scope != 0 || c.key != "counter_share") continue;
    const double v = c.type == ConfigValue::Type::kF64 ? c.f64 : c.type == ConfigValue::Type::kU64 ? static_cast<double>(c.u64) : 1;
    if (v > 0) share = std::min(share, v);
  }
  return share;
}

void CounterEstimator::Ratio::Add(double w, double c, double d) {
  n++;
  wall += w;
  cpu += c;
  delay += d;
  wall2 += w * w;
  cpu2 += c * c;
  delay2 += d * d;
  cpu_wall += c * w;
  delay_wall += d * w;
}

uint32_t CounterEstimator::ThreadStrata::StratumAt(uint64_t start_ns) const {
  return static_cast<uint32_t>(std::upper_bound(from_ns.begin(), from_ns.end(), start_ns) - from_ns.begin());
}

uint32_t CounterEstimator::ThreadStrata::StratumNear(uint64_t start_ns) const {
  // Stratum j holds [from_ns[j - 1], from_ns[j]); a thread's spans asked in
  // time order stay in the last one found or move to the next, without a
  // binary search each.
  const auto holds = [&](uint32_t j) {
    return j <= from_ns.size() && (j == 0 || from_ns[j - 1] <= start_ns) && (j == from_ns.size() || start_ns < from_ns[j]);
  };
  if (!holds(last)) last = holds(last + 1) ? last + 1 : StratumAt(start_ns);
  return last;
}

CounterEstimator::CounterEstimator(const SpanTable& spans, std::span<const uint32_t> of_kind, bool sampled,
                                   std::span<const uint64_t> epoch_starts_ns)
    : s_(spans), sampled_(sampled), of_epoch_(epoch_starts_ns.size() + 1) {
  const auto epoch_at = [&](uint64_t t) {
    return static_cast<uint32_t>(std::upper_bound(epoch_starts_ns.begin(), epoch_starts_ns.end(), t) -
                                 epoch_starts_ns.begin());
  };
  // Pass 1: each thread's sampled spans' starts and the epoch starts within
  // its spans' time, which cut it into strata.
  uint32_t threads = 0;
  for (uint32_t i : of_kind) threads = std::max(threads, s_.thread[i] + 1);
  threads_.resize(threads);
  {
    std::vector<std::vector<uint64_t>> sampled_starts(threads);
    std::vector<std::pair<uint64_t, uint64_t>> first_last(threads, {UINT64_MAX, 0});
    for (uint32_t i : of_kind) {
      auto& [first, last] = first_last[s_.thread[i]];
      first = std::min(first, s_.start_ns[i]);
      last = std::max(last, s_.start_ns[i]);
      if (s_.has_cpu[i]) sampled_starts[s_.thread[i]].push_back(s_.start_ns[i]);
    }
    for (uint32_t t = 0; t < threads; ++t) {
      auto& starts = sampled_starts[t];
      if (!std::is_sorted(starts.begin(), starts.end())) std::sort(starts.begin(), starts.end());
      auto& strata = threads_[t];
      const auto [first, last] = first_last[t];
      if (first > last) continue;  // no span of this kind on this thread
      // One epoch after another from the thread's first span's to its last's.
      auto sampled_from = starts.begin();
      const uint32_t first_epoch = epoch_at(first), last_epoch = epoch_at(last);
      for (uint32_t e = first_epoch; e <= last_epoch; ++e) {
        const auto sampled_to = e == last_epoch ? starts.end() : std::lower_bound(sampled_from, starts.end(), epoch_starts_ns[e]);
        if (e > first_epoch) strata.from_ns.push_back(epoch_starts_ns[e - 1]);
        strata.epoch.push_back(e);
        const uint64_t in_epoch = static_cast<uint64_t>(sampled_to - sampled_from);
        for (uint64_t j = 1; j < std::max<uint64_t>(1, in_epoch / kSampledPerStratum); ++j) {
          strata.from_ns.push_back(sampled_from[j * kSampledPerStratum]);
          strata.epoch.push_back(e);
        }
        sampled_from = sampled_to;
      }
      strata.ratio.resize(strata.epoch.size());
    }
  }
  // Pass 2: the sampled spans' sums by stratum; the skipped spans' wall time
  // and count by stratum, for the estimated totals and their bounds.
  std::vector<std::vector<std::pair<double, uint64_t>>> skipped(threads);
  for (uint32_t i : of_kind) {
    sums_.spans++;
    const double wall = static_cast<double>(s_.duration_ns[i]);
    auto& strata = threads_[s_.thread[i]];
    const uint32_t j = strata.StratumNear(s_.start_ns[i]);
    if (s_.has_cpu[i]) {
      sums_.measured++;
      const double c = static_cast<double>(s_.cpu_ns[i]), d = static_cast<double>(s_.delay_ns[i]);
      strata.ratio[j].Add(wall, c, d);
      strata.whole.Add(wall, c, d);
      of_epoch_[strata.epoch[j]].Add(wall, c, d);
      pooled_.Add(wall, c, d);
    } else {
      auto& k = skipped[s_.thread[i]];
      if (k.empty()) k.resize(strata.ratio.size());
      k[j].first += wall;
      k[j].second++;
    }
  }
  if (!sampled_) return;
  // Per stratum: the estimated total r x W_u, and the variance of the
  // prediction: each skipped span's residual (s_e^2 per span, s_e^2 the
  // residual variance of c_i - r w_i, scaled by its share of the mean wall)
  // plus the ratio's own uncertainty (W_u^2 s_e^2 / (n wbar^2)).
  double cpu_var = 0, delay_var = 0;
  for (uint32_t t = 0; t < threads; ++t)
    for (size_t j = 0; j < skipped[t].size(); ++j) {
      const auto& k = skipped[t][j];
      if (k.second == 0) continue;
      const Ratio* r = RatioOf(t, static_cast<uint32_t>(j));
      if (!r) continue;
      sums_.estimated += k.second;
      const double rc = r->cpu / r->wall, rd = r->delay / r->wall;
      sums_.cpu_estimated_s += rc * k.first * kNs;
      sums_.delay_estimated_s += rd * k.first * kNs;
      const double n = static_cast<double>(r->n);
      const double wbar = r->wall / n;
      auto variance = [&](double y2, double yw, double ratio) {
        if (r->n < 2) return std::pow(ratio * k.first, 2) / (kZ95 * kZ95);  // no spread known: +-100%
        const double residual2 = std::max(0.0, y2 - 2 * ratio * yw + ratio * ratio * r->wall2) / (n - 1);
        return residual2 * static_cast<double>(k.second) + k.first * k.first * residual2 / (n * wbar * wbar);
      };
      cpu_var += variance(r->cpu2, r->cpu_wall, rc);
      delay_var += variance(r->delay2, r->delay_wall, rd);
    }
  sums_.cpu_error_s = kZ95 * std::sqrt(cpu_var) * kNs;
  sums_.delay_error_s = kZ95 * std::sqrt(delay_var) * kNs;
}

bool CounterEstimator::Covers(uint32_t thread) const { return thread < threads_.size() && !threads_[thread].ratio.empty(); }

uint32_t CounterEstimator::StratumIndex(uint32_t span) const {
  const uint32_t thread = s_.thread[span];
  return Covers(thread) ? threads_[thread].StratumNear(s_.start_ns[span]) : 0;
}

const CounterEstimator::Ratio* CounterEstimator::RatioOf(uint32_t thread, uint32_t stratum) const {
  if (Covers(thread)) {
    const auto& strata = threads_[thread];
    if (strata.ratio[stratum].usable()) return &strata.ratio[stratum];
    if (of_epoch_[strata.epoch[stratum]].usable()) return &of_epoch_[strata.epoch[stratum]];
    if (strata.whole.usable()) return &strata.whole;
  }
  return pooled_.usable() ? &pooled_ : nullptr;
}

uint64_t CounterEstimator::StratumOf(uint32_t span) const {
  return (static_cast<uint64_t>(s_.thread[span]) << 32) | StratumIndex(span);
}

uint32_t CounterEstimator::EpochOf(uint32_t span) const {
  const uint32_t thread = s_.thread[span];
  return Covers(thread) ? threads_[thread].epoch[StratumIndex(span)] : 0;
}

SpanCounters CounterEstimator::At(uint32_t i) const {
  SpanCounters out;
  if (s_.has_cpu[i]) {
    out.known = true;
    out.cpu_ns = s_.cpu_ns[i];
    out.delay_ns = s_.delay_ns[i];
    return out;
  }
  if (!sampled_) return out;
  const Ratio* r = RatioOf(s_.thread[i], StratumIndex(i));
  if (!r) return out;
  const double wall = static_cast<double>(s_.duration_ns[i]);
  out.known = out.estimated = true;
  out.cpu_ns = static_cast<uint64_t>(std::llround(wall * r->cpu / r->wall));
  out.delay_ns = static_cast<uint64_t>(std::llround(wall * r->delay / r->wall));
  return out;
}

}  // namespace stallprof::analysis
