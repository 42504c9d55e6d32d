// Many producer threads on their own lanes with a concurrent draining consumer:
// nothing may be lost, duplicated or reordered unless counted as dropped.
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <thread>
#include <vector>

#include "ring/consumer.h"
#include "tools/test_producer.h"

using stallprof::ring::LaneOwner;
using stallprof::ring::Segment;
using stallprof::testing::TestProducer;

namespace {
// Checks per-lane sequence numbers as they arrive, without storing them.
struct SequenceChecker : stallprof::ring::Visitor {
  std::map<uint32_t, uint64_t> next;  // lane -> next expected arg
  uint64_t gaps = 0;                  // records missing (must equal drops)
  uint64_t out_of_order = 0;
  uint64_t records = 0;
  void OnLaneOwner(const LaneOwner&) override {}
  void OnName(const LaneOwner&, uint32_t, std::string_view) override {}
  void OnRecord(const LaneOwner& owner, const sp_record& r) override {
    uint64_t& expected = next[owner.lane];
    if (r.arg < expected) ++out_of_order;
    else gaps += r.arg - expected;
    expected = r.arg + 1;
    ++records;
  }
  void OnLaneReleased(const LaneOwner&, uint64_t) override {}
};

void Stress(uint32_t producers, uint64_t per_producer, uint64_t ring_bytes) {
  auto created = Segment::Create(ring_bytes, producers);
  REQUIRE(created.ok());
  auto& segment = *created;
  std::atomic<uint32_t> done{0};
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      TestProducer producer(segment->base(), p);
      producer.Name(1, "seq");
      for (uint64_t i = 0; i < per_producer; ++i) producer.Span(1, i);
      done.fetch_add(1);
    });
  }
  SequenceChecker checker;
  while (done.load() < producers) segment->DrainOnce(checker);
  for (auto& t : threads) t.join();
  segment->DrainOnce(checker);
  const uint64_t dropped = segment->TotalDropped();
  CHECK(checker.out_of_order == 0);
  CHECK(checker.records + dropped == producers * per_producer);
  // Every missing sequence number is a counted drop, except trailing ones.
  uint64_t trailing = 0;
  for (auto& [lane, next] : checker.next) trailing += per_producer - next;
  CHECK(checker.gaps + trailing == dropped);
}
}  // namespace

TEST_CASE("One producer and a concurrent consumer lose nothing that is not counted", "[ring][stress]") {
  Stress(1, 2'000'000, 1 << 20);
}

TEST_CASE("Four producers on separate lanes and a concurrent consumer lose nothing that is not counted",
          "[ring][stress]") {
  Stress(4, 500'000, 1 << 20);
}

TEST_CASE("Producers on tiny lanes drop under pressure and every drop is accounted for", "[ring][stress]") {
  Stress(3, 300'000, SP_HEADER_SIZE + 3 * (sizeof(sp_lane_control) + 16 * sizeof(sp_record)));
}
