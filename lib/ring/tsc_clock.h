// TSC ticks -> CLOCK_MONOTONIC ns: detection of an invariant TSC, its
// calibration against CLOCK_MONOTONIC, and the linear map the consumer
// applies to spans the producers timed with rdtsc (SP_SPAN_TSC).
#pragma once

#include <cstdint>
#include <optional>

namespace stallprof::ring {

// ns = base_ns + ((ticks - base_ticks) * mult) >> shift, in 128-bit signed
// arithmetic (ticks before base_ticks map before base_ns). mult == 0: no TSC.
// With shift 32 the rounding of mult costs under 1 ns per 4 s of ticks.
struct TscClock {
  uint64_t base_ticks = 0;
  uint64_t base_ns = 0;
  uint64_t mult = 0;
  uint32_t shift = 32;

  bool valid() const { return mult != 0; }
  // CLOCK_MONOTONIC ns of `ticks`, clamped to [0, 2^63).
  uint64_t ToNs(uint64_t ticks) const;
  // ns spanned by `ticks` ticks, clamped to [0, 2^63).
  uint64_t DeltaToNs(uint64_t ticks) const;
  // Ticks per second (0 when !valid()).
  double Hz() const;
  // The clock through `base` with `ns_per_tick` (> 0).
  static TscClock FromRate(uint64_t base_ticks, uint64_t base_ns, double ns_per_tick);
};

// A TSC read between two CLOCK_MONOTONIC reads: `ns` is their midpoint,
// `bracket_ns` their distance (the reading's uncertainty).
struct TscReading {
  uint64_t ticks = 0;
  uint64_t ns = 0;
  uint64_t bracket_ns = 0;
};

// The reading with the tightest bracket of `tries`.
TscReading ReadTscAgainstMonotonic(int tries);

// The clock through `first` whose rate is the one from `first` to `last`
// (nullopt when the readings are not ordered in both clocks).
std::optional<TscClock> ClockThrough(const TscReading& first, const TscReading& last);

// True on x86 when the TSC runs at a constant rate in every P-, C- and
// T-state (cpuid 0x80000007 EDX bit 8, or /proc/cpuinfo's constant_tsc and
// nonstop_tsc, which hypervisors often report without the cpuid bit).
bool HasInvariantTsc();

// Calibrates the TSC against CLOCK_MONOTONIC over `window_ns` (tightest
// reading at each end); base at the first reading. nullopt without an
// invariant TSC or when the two clocks disagree on the order of events.
std::optional<TscClock> CalibrateTsc(uint64_t window_ns);

}  // namespace stallprof::ring
