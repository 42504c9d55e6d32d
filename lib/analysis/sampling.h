// Spans recorded without their counters (thread CPU time, run-queue delay,
// bytes read) because the hook's counter budget skipped them, and what the
// analysis puts in their place: estimates from the sampled spans of the same
// thread and kind, with a 95% error bound. See docs/analysis.md "Sampled
// counters".
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analysis.h"
#include "trace/trace.h"

namespace stallprof::analysis {

// The counter share the trace was recorded with (config "counter_share" of
// scope 0, the smallest any process reported): below 1, spans without CPU time
// were skipped by the budget and are estimated; 1 (older traces, or
// STALLPROF_COUNTER_SHARE=1) means every span that could be measured was.
double CounterShare(const Trace& trace);

// CPU time and run-queue delay of one span: measured, estimated, or unknown.
struct SpanCounters {
  bool known = false;      // measured or estimated
  bool estimated = false;  // from the thread's sampled spans, not this span's own reads
  uint64_t cpu_ns = 0, delay_ns = 0;
};

// Ratio estimates for the spans of one kind (a loader's fetches, or its
// waits), stratified by time: each thread's spans are cut at each epoch's
// start, and each epoch's into strata of kSampledPerStratum consecutive
// sampled spans with the skipped spans between them (an epoch's last few
// sampled join its last stratum). A skipped span's CPU = its wall time x its
// stratum's measured CPU / wall (where that has no sample: the epoch's over
// all threads, then the thread's, then the loader's pooled ratio); likewise
// its delay. A whole-run ratio let the first epoch's cold reads (long, mostly
// off CPU) set the CPU and the bytes of warm fetches an epoch later: strata
// follow a page cache that warms, a machine that gets busy; and a stratum
// reaching across an epoch's start gave the warm epoch's first skipped
// fetches the cold epoch's last reads. One sample gives an estimate but no
// variance: its bound is then the estimate itself (+-100%).
class CounterEstimator {
 public:
  static constexpr uint64_t kSampledPerStratum = 16;

  // `sampled`: the trace's spans without CPU were skipped by the budget
  // (CounterShare < 1); otherwise they stay unknown, as older traces meant.
  // `epoch_starts_ns`: the loader's epoch starts (iter() calls), ascending;
  // no stratum reaches across one.
  CounterEstimator(const SpanTable& spans, std::span<const uint32_t> of_kind, bool sampled,
                   std::span<const uint64_t> epoch_starts_ns = {});
  SpanCounters At(uint32_t span) const;
  // The stratum of a span of this kind, as a key unique over threads: what a
  // skipped span's other estimates (bytes read) are to be drawn from.
  uint64_t StratumOf(uint32_t span) const;
  // The epoch of a span of this kind: the number of epoch starts at or before
  // its stratum's (0 before the first), the next place to draw from.
  uint32_t EpochOf(uint32_t span) const;
  // The totals over `of_kind`: how many were measured, the estimated sums and
  // their 95% bounds (residual variance of the ratio estimate per stratum).
  SampledSums Sums() const { return sums_; }

 private:
  struct Ratio {
    uint64_t n = 0;
    double wall = 0, cpu = 0, delay = 0;
    double cpu2 = 0, delay2 = 0, wall2 = 0, cpu_wall = 0, delay_wall = 0;
    void Add(double w, double c, double d);
    bool usable() const { return n >= 1 && wall > 0; }
  };
  struct ThreadStrata {
    std::vector<uint64_t> from_ns;  // stratum j >= 1 starts at its epoch's start or its first sampled span
    std::vector<Ratio> ratio;       // by stratum
    std::vector<uint32_t> epoch;    // by stratum
    Ratio whole;
    uint32_t StratumAt(uint64_t start_ns) const;
    // The same, from the stratum last found: the passes ask for a thread's
    // spans in time order. Not for use by two threads at once.
    uint32_t StratumNear(uint64_t start_ns) const;
    mutable uint32_t last = 0;
  };
  const SpanTable& s_;
  bool sampled_;
  std::vector<ThreadStrata> threads_;  // by thread index
  std::vector<Ratio> of_epoch_;        // all threads' sampled spans, by epoch
  Ratio pooled_;
  SampledSums sums_;
  // Whether `thread` has spans of this kind (strata), and a span's stratum
  // on its thread (0 where it has none).
  bool Covers(uint32_t thread) const;
  uint32_t StratumIndex(uint32_t span) const;
  // The ratio a skipped span of this stratum takes: its own, else its
  // epoch's over all threads, else its thread's, else the pooled one.
  const Ratio* RatioOf(uint32_t thread, uint32_t stratum) const;
};

}  // namespace stallprof::analysis
