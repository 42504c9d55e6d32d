#include "ring/tsc_clock.h"

#include <time.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "ring/stallprof_ring.h"

namespace stallprof::ring {
namespace {

constexpr __int128 kMaxNs = (__int128{1} << 63) - 1;

uint64_t Clamp(__int128 ns) { return static_cast<uint64_t>(ns < 0 ? 0 : ns > kMaxNs ? kMaxNs : ns); }

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool CpuinfoSaysInvariant() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    bool constant = false, nonstop = false;
    for (std::string w; words >> w;) {
      constant |= w == "constant_tsc";
      nonstop |= w == "nonstop_tsc";
    }
    return constant && nonstop;  // the first CPU speaks for all
  }
  return false;
}

// ticks * mult / 2^shift, rounded to the nearest ns (floor would lose 1 ns
// whenever mult was rounded down).
__int128 Scale(__int128 ticks, uint64_t mult, uint32_t shift) {
  const __int128 half = shift > 0 ? __int128{1} << (shift - 1) : 0;
  return (ticks * static_cast<__int128>(mult) + half) >> shift;
}

}  // namespace

uint64_t TscClock::ToNs(uint64_t ticks) const {
  const __int128 delta = static_cast<__int128>(ticks) - static_cast<__int128>(base_ticks);
  return Clamp(static_cast<__int128>(base_ns) + Scale(delta, mult, shift));
}

uint64_t TscClock::DeltaToNs(uint64_t ticks) const { return Clamp(Scale(ticks, mult, shift)); }

double TscClock::Hz() const { return mult == 0 ? 0 : std::ldexp(1e9, static_cast<int>(shift)) / static_cast<double>(mult); }

TscClock TscClock::FromRate(uint64_t base_ticks, uint64_t base_ns, double ns_per_tick) {
  TscClock c;
  c.base_ticks = base_ticks;
  c.base_ns = base_ns;
  c.mult = static_cast<uint64_t>(std::llround(std::ldexp(ns_per_tick, static_cast<int>(c.shift))));
  return c;
}

TscReading ReadTscAgainstMonotonic(int tries) {
  TscReading best;
  best.bracket_ns = UINT64_MAX;
  for (int i = 0; i < tries; ++i) {
    const uint64_t before = MonotonicNs();
    const uint64_t ticks = sp_read_tsc();
    const uint64_t after = MonotonicNs();
    if (after - before < best.bracket_ns) best = {ticks, before + (after - before) / 2, after - before};
  }
  return best;
}

std::optional<TscClock> ClockThrough(const TscReading& first, const TscReading& last) {
  if (last.ticks <= first.ticks || last.ns <= first.ns) return std::nullopt;
  const double ns_per_tick = static_cast<double>(last.ns - first.ns) / static_cast<double>(last.ticks - first.ticks);
  return TscClock::FromRate(first.ticks, first.ns, ns_per_tick);
}

bool HasInvariantTsc() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) && (edx & (1u << 8))) return true;
  return CpuinfoSaysInvariant();
#else
  return false;
#endif
}

std::optional<TscClock> CalibrateTsc(uint64_t window_ns) {
  if (!HasInvariantTsc()) return std::nullopt;
  // 200 tries take ~10 us: enough for one of them to run undisturbed.
  const TscReading first = ReadTscAgainstMonotonic(200);
  std::this_thread::sleep_for(std::chrono::nanoseconds(window_ns));
  const TscReading last = ReadTscAgainstMonotonic(200);
  return ClockThrough(first, last);
}

}  // namespace stallprof::ring
