// Fuzz target: the ring consumer reading lanes a hostile producer wrote, and
// the drain turning what it accepts into a trace. The input is split into
// per-lane control words (state, generation, head, tail, dropped) and record
// bytes; the consumer drains several times (the producer rewrites its indices
// between drains) and releases everything. Never crash; the dropped total must
// equal the sum the drain saw released, and the resulting trace must load.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collect/drain.h"
#include "ring/consumer.h"
#include "trace/reader.h"

namespace {

struct Input {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  uint64_t Take(size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && pos < size; ++i) v |= uint64_t{data[pos++]} << (8 * i);
    return v;
  }
  bool empty() const { return pos >= size; }
};

// Counts what the drain reports released, then forwards to the real drain.
struct CountingDrainer : stallprof::collect::Drainer {
  using Drainer::Drainer;
  uint64_t released_dropped = 0;
  void OnLaneReleased(const stallprof::ring::LaneOwner& owner, uint64_t dropped) override {
    released_dropped += dropped;
    Drainer::OnLaneReleased(owner, dropped);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stallprof;
  QuietProtobufLog();
  constexpr uint32_t kLanes = 4;
  auto segment = ring::Segment::Create(64 << 10, kLanes);
  if (!segment.ok()) std::abort();
  ring::Segment& ring = **segment;
  const uint64_t capacity = ring.header()->lane_capacity;

  const int fd = memfd_create("fuzz-ring-trace", MFD_CLOEXEC);
  if (fd < 0) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  pb::TraceHeader header;
  header.set_version_major(kTraceVersionMajor);
  auto writer = TraceWriter::Create(path, header);
  if (!writer.ok()) {
    close(fd);
    return 0;
  }
  collect::TraceSink sink(std::move(*writer));
  collect::LiveCounters live;
  CountingDrainer drainer(sink, live);

  Input in{data, size};
  for (int round = 0; round < 4 && !in.empty(); ++round) {
    for (uint32_t lane = 0; lane < kLanes && !in.empty(); ++lane) {
      sp_lane_control* control = sp_lane_at(ring.base(), ring.header(), lane);
      const uint8_t what = static_cast<uint8_t>(in.Take(1));
      if (what & 1) control->state.store(static_cast<uint32_t>(in.Take(1) % 4));
      if (what & 2) {
        control->owner_pid = static_cast<uint32_t>(in.Take(4));
        control->owner_tid = static_cast<uint32_t>(in.Take(4));
        control->flags = static_cast<uint32_t>(in.Take(1));
        control->generation.fetch_add(1 + in.Take(1) % 2);
      }
      // Mostly plausible indices, sometimes anything.
      if (what & 4) control->head.store((what & 32) ? in.Take(8) : control->tail.load() + in.Take(1) % (capacity + 2));
      if (what & 8) control->tail.store(in.Take(8));
      if (what & 16) control->dropped.store(in.Take(8));
      const size_t records = static_cast<size_t>(in.Take(1)) % 32;
      // Records from the consumer's tail on, in input order.
      sp_record* ring_records = sp_lane_records(control);
      const uint64_t tail = control->tail.load();
      for (size_t i = 0; i < records && !in.empty(); ++i) {
        sp_record r{};
        const size_t take = std::min(sizeof(r), in.size - in.pos);
        std::memcpy(&r, in.data + in.pos, take);
        in.pos += take;
        ring_records[(tail + i) & (capacity - 1)] = r;
      }
    }
    ring.DrainOnce(drainer);
  }
  ring.ReleaseAll(drainer);
  drainer.FlushAll();
  if (ring.TotalDropped() != drainer.released_dropped) std::abort();  // the figures must agree
  (void)sink.Close();
  auto trace = LoadTrace(path);
  if (!trace.ok()) std::abort();  // what the drain wrote must always load
  close(fd);
  return 0;
}
