// The consumer treats the segment as hostile: impossible indices, bogus name
// records, unknown ids and kinds are counted as invalid and never crash it.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <time.h>

#include "ring/consumer.h"
#include "tools/test_producer.h"

using stallprof::ring::Segment;
using stallprof::testing::RecordingVisitor;
using stallprof::testing::TestProducer;

namespace {
std::unique_ptr<Segment> MakeSegment() {
  auto segment = Segment::Create(1 << 18, 4);
  REQUIRE(segment.ok());
  return std::move(segment).value();
}
sp_record Raw(uint8_t kind, uint32_t name, uint16_t scope = 0, uint64_t arg = 0) {
  sp_record r{};
  r.kind = kind;
  r.name = name;
  r.scope = scope;
  r.arg = arg;
  return r;
}
}  // namespace

TEST_CASE("A head more than a lane ahead of the tail resets the lane and is counted", "[ring][hostile]") {
  auto segment = MakeSegment();
  TestProducer producer(segment->base(), 0);
  producer.lane()->head.store(uint64_t{1} << 40);
  RecordingVisitor visitor;
  auto stats = segment->DrainOnce(visitor);
  CHECK(stats.lane_resets == 1);
  CHECK(stats.records == 0);
  CHECK(producer.lane()->tail.load() == uint64_t{1} << 40);
  // A tail ahead of head (wrapped difference) is impossible too.
  producer.lane()->tail.store(5);
  producer.lane()->head.store(3);
  CHECK(segment->DrainOnce(visitor).lane_resets == 1);
}

TEST_CASE("Records with unknown kinds, unknown names or bad name lengths are rejected", "[ring][hostile]") {
  auto segment = MakeSegment();
  TestProducer producer(segment->base(), 1);
  producer.Name(1, "ok");
  producer.Push(Raw(SP_KIND_SPAN, 1));                      // valid
  producer.Push(Raw(SP_KIND_SPAN, 99));                     // unknown name id
  producer.Push(Raw(SP_KIND_INVALID, 1));                   // kind 0
  producer.Push(Raw(200, 1));                               // kind out of range
  producer.Push(Raw(SP_KIND_NAME, 2, SP_MAX_NAME + 1));     // name too long
  producer.Push(Raw(SP_KIND_NAME, 1u << 30, 3));            // name id out of range
  producer.Push(Raw(SP_KIND_NAME_PART, 1));                 // stray part
  producer.Push(Raw(SP_KIND_CONFIG_STR, 1, 0, 12345));      // value string unknown
  producer.Push(Raw(SP_KIND_CONFIG_STR, 1, 0, 1));          // valid
  producer.Push(Raw(SP_KIND_NAME, 3, 100));                 // needs 2 parts ...
  producer.Push(Raw(SP_KIND_SPAN, 1));                      // ... interrupted: name lost, span kept
  producer.Push(Raw(SP_KIND_SPAN, 3));                      // name 3 never completed
  RecordingVisitor visitor;
  auto stats = segment->DrainOnce(visitor);
  CHECK(stats.records == 3);
  CHECK(stats.invalid == 9);
  CHECK(segment->TotalInvalid() == 9);
  for (auto& e : visitor.events) CHECK(e.name == "ok");
}

TEST_CASE("Random bytes in every lane never crash the consumer", "[ring][hostile]") {
  auto segment = MakeSegment();
  std::mt19937_64 rng(42);
  RecordingVisitor visitor;
  for (int round = 0; round < 200; ++round) {
    for (uint32_t lane = 0; lane < 4; ++lane) {
      sp_lane_control* control = sp_lane_at(segment->base(), segment->header(), lane);
      auto* bytes = reinterpret_cast<uint8_t*>(sp_lane_records(control));
      for (uint32_t i = 0; i < 64 * sizeof(sp_record); ++i) bytes[i] = static_cast<uint8_t>(rng());
      // Mostly small, sometimes small-valued kinds so some names complete.
      for (uint32_t i = 0; i < 64; ++i) {
        auto& r = sp_lane_records(control)[i];
        r.kind = static_cast<uint8_t>(rng() % 10);
        r.name = static_cast<uint32_t>(rng() % 4);
        r.scope = static_cast<uint16_t>(rng() % 300);
      }
      control->state.store(static_cast<uint32_t>(rng() % 4));
      control->generation.store(rng() % 3);
      control->tail.store(0);
      control->head.store(rng() % 2 ? 64 : rng());
    }
    segment->DrainOnce(visitor);
    segment->ReclaimLanes(visitor);
  }
  for (auto& [key, table] : visitor.names) {
    for (auto& [id, text] : table) CHECK(text.size() <= SP_MAX_NAME);
  }
  SUCCEED("survived 200 rounds of garbage");
}

TEST_CASE("A name whose parts arrive in separate drains is still assembled", "[ring]") {
  auto segment = MakeSegment();
  TestProducer producer(segment->base(), 2);
  const std::string name(90, 'p');  // NAME + 2 NAME_PART records
  sp_record first = Raw(SP_KIND_NAME, 4, static_cast<uint16_t>(name.size()));
  std::memcpy(&first, name.data(), SP_NAME_BYTES_PER_RECORD);
  producer.Push(first);
  RecordingVisitor visitor;
  CHECK(segment->DrainOnce(visitor).names == 0);
  for (uint32_t part = 1; part < 3; ++part) {
    sp_record r = Raw(SP_KIND_NAME_PART, 4, static_cast<uint16_t>(part));
    std::memcpy(&r, name.data() + part * SP_NAME_BYTES_PER_RECORD,
                std::min<size_t>(SP_NAME_BYTES_PER_RECORD, name.size() - part * SP_NAME_BYTES_PER_RECORD));
    producer.Push(r);
    segment->DrainOnce(visitor);
  }
  producer.Push(Raw(SP_KIND_SPAN, 4));
  auto stats = segment->DrainOnce(visitor);
  CHECK(stats.records == 1);
  CHECK(stats.invalid == 0);
  REQUIRE(visitor.events.size() == 1);
  CHECK(visitor.events[0].name == name);
}

TEST_CASE("A lane's dropped count cannot exceed what its producer could have attempted, and the total agrees with the released counts",
          "[ring][hostile]") {
  timespec before{};
  clock_gettime(CLOCK_MONOTONIC, &before);
  auto segment = MakeSegment();
  TestProducer honest(segment->base(), 0);
  TestProducer liar(segment->base(), 1);
  honest.Name(1, "ok");
  honest.Push(Raw(SP_KIND_SPAN, 1));
  honest.lane()->dropped.store(7);
  liar.Name(1, "ok");
  liar.lane()->dropped.store(UINT64_MAX - 3);  // 10125046115940256420 and the like
  // A free lane's counter belongs to no producer: it counts for nothing.
  sp_lane_at(segment->base(), segment->header(), 2)->dropped.store(uint64_t{1} << 62);

  RecordingVisitor visitor;
  segment->DrainOnce(visitor);
  const uint64_t live_total = segment->TotalDropped();
  timespec after{};
  clock_gettime(CLOCK_MONOTONIC, &after);
  const uint64_t elapsed_ns = static_cast<uint64_t>(after.tv_sec - before.tv_sec) * 1'000'000'000ull +
                              static_cast<uint64_t>(after.tv_nsec) - static_cast<uint64_t>(before.tv_nsec);
  CHECK(live_total >= 7);
  CHECK(live_total <= 7 + elapsed_ns);  // one attempt per ns at the very most

  // The count never goes down, even if the producer rewrites it.
  liar.lane()->dropped.store(0);
  segment->DrainOnce(visitor);
  CHECK(segment->TotalDropped() >= live_total);

  segment->ReleaseAll(visitor);
  uint64_t released = 0;
  for (const auto& r : visitor.released) released += r.second;
  CHECK(released == segment->TotalDropped());
  CHECK(visitor.released.size() == 2);
}
