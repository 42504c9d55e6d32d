#include <catch2/catch.hpp>

#include "trace/trace.h"

using namespace stallprof;

namespace {
constexpr uint64_t kTick = 100'000'000;  // the sampler's 100 ms

// A series of `ticks` samples from 0 whose read_bytes and rchar are `f(i)`.
ProcessSeries SeriesOf(uint32_t pid, size_t ticks, const std::function<uint64_t(size_t)>& f) {
  ProcessSeries s;
  s.pid = pid;
  for (size_t i = 0; i < ticks; ++i) {
    s.t_ns.push_back(i * kTick);
    s.read_bytes.push_back(f(i));
    s.rchar.push_back(2 * f(i));
  }
  return s;
}

ProcessInfo Process(uint32_t pid, uint32_t ppid) {
  ProcessInfo p;
  p.pid = pid;
  p.ppid = ppid;
  return p;
}
}  // namespace

TEST_CASE("A reaped child's reads are taken out of its parent's from the rise the reap made") {
  // The parent reads 10 bytes a tick of its own; its two workers read 500
  // and 300 in ticks 0-4 and are reaped between ticks 5 and 6, when the
  // kernel adds their totals to the parent's counters.
  Trace t;
  t.processes = {Process(100, 1), Process(201, 100), Process(202, 100)};
  t.process_series.push_back(SeriesOf(100, 12, [](size_t i) { return 10 * i + (i >= 6 ? 800 : 0); }));
  t.process_series.push_back(SeriesOf(201, 5, [](size_t i) { return 125 * i; }));
  t.process_series.push_back(SeriesOf(202, 5, [](size_t i) { return 75 * i; }));
  TakeOutReapedChildren(t);
  const ProcessSeries& parent = t.process_series[0];
  for (size_t i = 0; i < 12; ++i) {
    CHECK(parent.read_bytes[i] == 10 * i);
    CHECK(parent.rchar[i] == 20 * i);
  }
  // The workers' own series are left as they were.
  CHECK(t.process_series[1].read_bytes.back() == 500);
}

TEST_CASE("A child whose parent never rose by its reads, or that outlived the parent's series, takes nothing out") {
  Trace t;
  t.processes = {Process(100, 1), Process(201, 100), Process(202, 100)};
  t.process_series.push_back(SeriesOf(100, 30, [](size_t i) { return 10 * i; }));
  t.process_series.push_back(SeriesOf(201, 5, [](size_t i) { return 125 * i; }));  // reaped by another (reparented)
  t.process_series.push_back(SeriesOf(202, 30, [](size_t i) { return 75 * i; }));  // alive to the end
  // A rise past the lookahead is not this child's reap.
  t.process_series[0].read_bytes[5 + kReapLookahead] += 1000;
  const auto before = t.process_series[0].read_bytes;
  TakeOutReapedChildren(t);
  CHECK(t.process_series[0].read_bytes == before);
}
