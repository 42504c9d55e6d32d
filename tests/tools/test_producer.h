// A minimal producer written straight against the ring ABI, for consumer tests
// that must not depend on libstallprof_client.so (and for writing hostile
// records on purpose).
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ring/consumer.h"
#include "ring/stallprof_ring.h"

namespace stallprof::testing {

class TestProducer {
 public:
  // Claims lane `lane_index` of the segment at `base` (FREE -> CLAIMED).
  // Failure: returns with claimed() == false.
  TestProducer(void* base, uint32_t lane_index) : base_(base) {
    header_ = static_cast<sp_ring_header*>(base);
    lane_ = sp_lane_at(base, header_, lane_index);
    uint32_t expected = SP_LANE_FREE;
    claimed_ = lane_->state.compare_exchange_strong(expected, SP_LANE_CLAIMED, std::memory_order_acq_rel);
    if (!claimed_) return;
    lane_->owner_pid = static_cast<uint32_t>(getpid());
    lane_->owner_tid = static_cast<uint32_t>(syscall(SYS_gettid));
    lane_->flags = 0;
    lane_->generation.fetch_add(1, std::memory_order_release);
    head_ = lane_->head.load(std::memory_order_relaxed);
    cached_tail_ = lane_->tail.load(std::memory_order_acquire);
  }
  bool claimed() const { return claimed_; }
  sp_lane_control* lane() const { return lane_; }

  // Writes one raw record; false (and dropped++) when the lane is full.
  bool Push(const sp_record& r) {
    const uint64_t capacity = header_->lane_capacity;
    if (head_ - cached_tail_ >= capacity) {
      cached_tail_ = lane_->tail.load(std::memory_order_acquire);
      if (head_ - cached_tail_ >= capacity) {
        lane_->dropped.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    }
    sp_lane_records(lane_)[head_ & (capacity - 1)] = r;
    ++head_;
    lane_->head.store(head_, std::memory_order_release);
    return true;
  }
  // Sends a NAME (+ NAME_PART) definition of `id`.
  void Name(uint32_t id, std::string_view text) {
    sp_record r{};
    r.kind = SP_KIND_NAME;
    r.name = id;
    r.scope = static_cast<uint16_t>(text.size());
    size_t offset = 0;
    do {
      std::memset(&r, 0, SP_NAME_BYTES_PER_RECORD);
      const size_t take = std::min<size_t>(SP_NAME_BYTES_PER_RECORD, text.size() - offset);
      std::memcpy(&r, text.data() + offset, take);
      Push(r);
      offset += take;
      r.kind = SP_KIND_NAME_PART;
    } while (offset < text.size());
  }
  void Span(uint32_t name, uint64_t arg, uint16_t scope = 0) {
    sp_record r{};
    r.kind = SP_KIND_SPAN;
    r.name = name;
    r.arg = arg;
    r.scope = scope;
    r.start_ns = arg * 10;
    r.duration_ns = 5;
    Push(r);
  }
  void Release() { lane_->state.store(SP_LANE_RELEASED, std::memory_order_release); }

 private:
  void* base_;
  sp_ring_header* header_;
  sp_lane_control* lane_;
  bool claimed_ = false;
  uint64_t head_ = 0;
  uint64_t cached_tail_ = 0;
};

// Collects everything a drain reports, with names resolved.
struct RecordingVisitor : ring::Visitor {
  struct Event {
    ring::LaneOwner owner;
    std::string name;
    sp_record record;
  };
  std::vector<ring::LaneOwner> owners;
  std::vector<std::pair<ring::LaneOwner, uint64_t>> released;
  std::map<std::pair<uint32_t, uint64_t>, std::map<uint32_t, std::string>> names;  // (lane, gen) -> id -> text
  std::vector<Event> events;

  void OnLaneOwner(const ring::LaneOwner& owner) override { owners.push_back(owner); }
  void OnName(const ring::LaneOwner& owner, uint32_t id, std::string_view text) override {
    names[{owner.lane, owner.generation}][id] = std::string(text);
  }
  void OnRecord(const ring::LaneOwner& owner, const sp_record& record) override {
    events.push_back({owner, names[{owner.lane, owner.generation}][record.name], record});
  }
  void OnLaneReleased(const ring::LaneOwner& owner, uint64_t dropped) override { released.push_back({owner, dropped}); }
};

}  // namespace stallprof::testing
