// bench_drain [spans] [out.pb]: the drain side's cost per span without the
// ring: feeds span records to collect::Drainer (lane -> thread mapping, name
// translation, SpanBatchBuilder encoding, chunk writes with CRC) and prints
// spans per CPU-second of this process (CPU time, not wall time: the figure
// must not depend on what else the machine runs).
#include <fmt/core.h>
#include <unistd.h>

#include <ctime>
#include <string>
#include <vector>

#include "collect/drain.h"
#include "trace/reader.h"

using namespace stallprof;
using namespace stallprof::collect;

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::stoull(argv[1]) : 10'000'000;
  const std::string path = argc > 2 ? argv[2] : "/tmp/stallprof-bench-drain.pb";
  pb::TraceHeader h;
  h.set_version_major(kTraceVersionMajor);
  auto w = TraceWriter::Create(path, h);
  if (!w.ok()) {
    fmt::print(stderr, "bench_drain: error: {}\n", w.error().message);
    return 1;
  }
  TraceSink sink(std::move(*w));
  LiveCounters live;
  Drainer drainer(sink, live);
  const uint32_t me = static_cast<uint32_t>(getpid());
  // Four producer threads, as a main process with three workers would have.
  std::vector<ring::LaneOwner> owners;
  for (uint32_t lane = 0; lane < 4; ++lane) {
    owners.push_back({.lane = lane, .generation = 1, .pid = me, .tid = me, .flags = SP_LANE_FLAG_PYTHON_CEXT});
    drainer.OnLaneOwner(owners.back());
    drainer.OnName(owners.back(), 1, names::kGetitem);
    drainer.OnName(owners.back(), 2, names::kFetch);
  }
  // Records are prepared outside the timed part, in runs like DrainOnce hands out.
  constexpr size_t kRun = 4096;
  std::vector<sp_record> records(kRun);
  uint64_t t = 1'000'000;
  for (size_t i = 0; i < kRun; ++i) {
    sp_record& r = records[i];
    r.kind = SP_KIND_SPAN;
    r.name = (i % 33 == 32) ? 2 : 1;
    r.start_ns = t;
    r.duration_ns = 150'000 + (i * 7919) % 100'000;
    r.arg = (i * 104729) % 1'000'000;
    r.scope = 1;
    if (r.name == 2) {
      r.flags = SP_SPAN_HAS_CPU;
      r.cpu_ns = r.duration_ns * 9 / 10;
      r.delay_ns = i % 5000;
    }
    t += r.duration_ns + 500;
  }
  const clock_t c0 = clock();
  for (size_t done = 0; done < n; done += kRun) drainer.OnRecords(owners[(done / kRun) % 4], records.data(), kRun);
  drainer.FlushAll();
  const double cpu = static_cast<double>(clock() - c0) / CLOCKS_PER_SEC;
  if (auto s = sink.Close(); !s.ok()) {
    fmt::print(stderr, "bench_drain: error: {}\n", s.error().message);
    return 1;
  }
  const size_t spans = drainer.spans();
  fmt::print("drain: {} spans in {:.3f} CPU s = {:.1f} M spans/s per core, {:.2f} bytes/span on disk\n", spans, cpu,
             static_cast<double>(spans) / cpu / 1e6, static_cast<double>(sink.bytes_written()) / static_cast<double>(spans));
  unlink(path.c_str());
  return 0;
}
