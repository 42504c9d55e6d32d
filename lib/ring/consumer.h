// Consumer side of the shared-memory ring (the launcher): creates the memfd
// segment, drains lanes, reclaims lanes of exited threads. Treats every byte a
// producer wrote as untrusted.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "ring/stallprof_ring.h"
#include "ring/tsc_clock.h"

namespace stallprof::ring {

// Who owns a lane generation. A (lane, generation) pair is one producer thread.
struct LaneOwner {
  uint32_t lane = 0;
  uint64_t generation = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t flags = 0;  // SP_LANE_FLAG_*
};

// Receives what DrainOnce finds, in per-lane order.
class Visitor {
 public:
  virtual ~Visitor() = default;
  // A lane was claimed by a new thread (called before any of its records).
  virtual void OnLaneOwner(const LaneOwner& owner) = 0;
  // Per-lane name id `id` of `owner` means `text` (validated, <= SP_MAX_NAME bytes).
  virtual void OnName(const LaneOwner& owner, uint32_t id, std::string_view text) = 0;
  // A span, instant, counter or config record whose name id (and, for
  // SP_KIND_CONFIG_STR, arg) refers to a name already passed to OnName.
  virtual void OnRecord(const LaneOwner& owner, const sp_record& record) = 0;
  // `owner`'s lane was freed after its last record (thread gone).
  virtual void OnLaneReleased(const LaneOwner& owner, uint64_t dropped) = 0;
  // A run of `count` consecutive valid records of one lane (the drain hot path
  // calls this instead of OnRecord; the default loops over OnRecord). `records`
  // is only valid during the call.
  virtual void OnRecords(const LaneOwner& owner, const sp_record* records, size_t count) {
    for (size_t i = 0; i < count; ++i) OnRecord(owner, records[i]);
  }
};

struct DrainStats {
  uint64_t records = 0;   // records passed to OnRecord
  uint64_t invalid = 0;   // records rejected (bad kind, unknown name id, bad length)
  uint64_t names = 0;     // names passed to OnName
  uint64_t lane_resets = 0;  // lanes whose head/tail were impossible (tail resynced to head)
  double max_fill = 0;       // the fullest lane's records waiting when drained, over its capacity
};

// How the TSC conversion went over the run (all 0 without a TSC clock).
struct TscReport {
  TscClock start;              // the calibration the run started with
  int64_t drift_ns = 0;        // start's prediction at the last reading minus CLOCK_MONOTONIC then
  uint64_t over_ns = 0;        // from the calibration to the last reading
  uint64_t max_step_ns = 0;    // largest correction a re-anchoring made: the worst error of a converted time
  uint64_t reanchors = 0;
};

class Segment {
 public:
  // Creates a memfd segment of `bytes` with `lanes` lanes (mode 0600, close-on-exec
  // cleared so children can reopen it through /proc/<pid>/fd/<n>). A valid
  // `tsc` is published in the header: producers then time spans with rdtsc
  // and the drain converts them to CLOCK_MONOTONIC ns.
  static Result<std::unique_ptr<Segment>> Create(uint64_t bytes, uint32_t lanes, const TscClock& tsc = {});
  ~Segment();
  int fd() const { return fd_; }
  // "/proc/<pid>/fd/<n>", the value for STALLPROF_RING.
  std::string EnvValue() const;
  sp_ring_header* header() const { return header_; }
  void* base() const { return base_; }
  uint64_t size() const { return size_; }

  // Drains every lane once. Call from one thread only.
  DrainStats DrainOnce(Visitor& visitor);
  // Drains, then frees lanes that are RELEASED or whose owner thread no longer
  // exists in /proc, calling OnLaneReleased.
  void ReclaimLanes(Visitor& visitor);
  // Drains, then reports every lane still owned as released (end of run: the
  // producers are gone or no longer matter) and frees it.
  void ReleaseAll(Visitor& visitor);
  // Total records dropped by producers so far (all lanes, all generations, and
  // threads that found no free lane), as of the last drain: only lanes with an
  // announced owner count, each count is clamped to what a producer could
  // have attempted since the segment was created and never decreases. Once
  // every lane is released it equals the sum of the counts passed to
  // OnLaneReleased plus LanelessDropped().
  uint64_t TotalDropped() const;
  // Records dropped by threads that found every lane taken (bounded the same way).
  uint64_t LanelessDropped() const { return laneless_dropped_; }
  // Records rejected as invalid so far (all lanes, all drains).
  uint64_t TotalInvalid() const { return invalid_total_; }

  // The doorbell (see stallprof_ring.h): its current count, a wait until it
  // moves past `seen` or `timeout` passes (false on timeout), and a ring that
  // ends such a wait at once (the launcher's stop). The count lives in shared
  // memory a producer can write, so only its change means anything.
  uint32_t DoorbellCount() const;
  bool WaitForDoorbell(uint32_t seen, std::chrono::microseconds timeout) const;
  void RingDoorbell();

  // Re-anchors the TSC conversion on `reading` (no-op without a TSC clock):
  // the rate becomes the one from the start calibration to `reading`, a
  // baseline that grows with the run, and the offset is exact at `reading`,
  // so spans drained soon after are converted with an error of tens of ns
  // even when CLOCK_MONOTONIC is slewed by NTP. The launcher calls it before
  // each drain; a reading with a bracket over 2 us (preempted) is ignored.
  void ReanchorTsc(const TscReading& reading);
  void ReanchorTsc() { if (tsc_.valid()) ReanchorTsc(ReadTscAgainstMonotonic(5)); }
  const TscClock& tsc_clock() const { return tsc_; }
  const TscReport& tsc_report() const { return tsc_report_; }

 private:
  Segment() = default;
  struct LaneState;
  void DrainLane(uint32_t index, Visitor& visitor, DrainStats& stats);
  void FreeLane(uint32_t index, Visitor& visitor);
  void UpdateDropped(uint32_t index);
  void UpdateLanelessDropped();
  sp_lane_control* LaneAt(uint32_t index) const;
  int fd_ = -1;
  uint32_t creator_pid_ = 0;
  // Our own copy of the geometry: producers can scribble on the header.
  uint32_t lane_count_ = 0;
  uint32_t lane_capacity_ = 0;
  uint64_t lane_offset_ = 0;
  uint64_t lane_stride_ = 0;
  uint64_t released_dropped_ = 0;  // dropped counts of lanes already freed
  uint64_t laneless_dropped_ = 0;  // the header's laneless_dropped as trusted
  uint64_t invalid_total_ = 0;
  uint64_t created_ns_ = 0;  // CLOCK_MONOTONIC at Create: bounds dropped counts
  TscClock tsc_;             // current conversion of SP_SPAN_TSC records (our copy, not the header's)
  TscReport tsc_report_;
  void* base_ = nullptr;
  sp_ring_header* header_ = nullptr;
  uint64_t size_ = 0;
  std::unique_ptr<LaneState[]> lanes_;
};

}  // namespace stallprof::ring
