// Lanes through the real client: concurrency, overflow, thread exit, fork.
#include <pthread.h>
#include <sys/syscall.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <thread>
#include <vector>

#include "stallprof/client.h"
#include "tools/client_test_util.h"
#include "tools/test_producer.h"

using stallprof::ring::LaneOwner;
using stallprof::ring::Segment;
using stallprof::testing::MakeSegment;
using stallprof::testing::RecordingVisitor;
using stallprof::testing::RunInChild;

namespace {

struct SequenceChecker : stallprof::ring::Visitor {
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> next;  // (lane, generation) -> next arg
  uint64_t gaps = 0, out_of_order = 0, records = 0, dropped = 0, lanes_released = 0;
  void OnLaneOwner(const LaneOwner& o) override { next[{o.lane, o.generation}] = 0; }
  void OnName(const LaneOwner&, uint32_t, std::string_view) override {}
  void OnRecord(const LaneOwner& o, const sp_record& r) override {
    uint64_t& expected = next[{o.lane, o.generation}];
    if (r.arg < expected) ++out_of_order;
    else gaps += r.arg - expected;
    expected = r.arg + 1;
    ++records;
  }
  void OnLaneReleased(const LaneOwner&, uint64_t d) override {
    dropped += d;
    ++lanes_released;
  }
};
}  // namespace

TEST_CASE("Four client threads and a concurrent drain lose nothing that is not counted as dropped", "[client]") {
  auto segment = MakeSegment(1 << 20, 8);
  SequenceChecker checker;
  constexpr uint64_t kPerThread = 300'000;
  auto result = RunInChild(segment.get(), &checker, segment->EnvValue(), [] {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([] {
        const uint32_t name = stallprof_name("seq");
        for (uint64_t i = 0; i < kPerThread; ++i) stallprof_span_complete(name, i, 1, i, 0);
      });
    }
    for (auto& t : threads) t.join();
    return 0;
  });
  REQUIRE(result.exit_code == 0);
  CHECK(checker.lanes_released == 4);
  CHECK(checker.out_of_order == 0);
  CHECK(checker.records + checker.dropped == 4 * kPerThread);
  uint64_t trailing = 0;
  for (auto& [key, next] : checker.next) trailing += kPerThread - next;
  CHECK(checker.gaps + trailing == checker.dropped);
}

namespace {
// Runs `emit` through the client in a child on `segment`, with no drain while
// it runs (RunInChild gets no visitor), and returns the child's own count of
// dropped records (stallprof_dropped).
uint64_t DroppedInChild(Segment& segment, const std::function<void()>& emit) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  auto result = RunInChild(nullptr, nullptr, segment.EnvValue(), [&] {
    emit();
    const uint64_t dropped = stallprof_dropped();
    return write(fds[1], &dropped, sizeof dropped) == sizeof dropped ? 0 : 1;
  });
  close(fds[1]);  // the child has exited: a read finds its count or the end
  uint64_t dropped = 0;
  const bool got = read(fds[0], &dropped, sizeof dropped) == sizeof dropped;
  close(fds[0]);
  REQUIRE(result.exit_code == 0);
  REQUIRE(got);
  return dropped;
}
}  // namespace

TEST_CASE("A lane filled without draining drops exactly the attempts beyond its capacity", "[client]") {
  auto segment = MakeSegment(1 << 20, 4);
  const uint64_t capacity = segment->header()->lane_capacity;
  const uint64_t dropped = DroppedInChild(*segment, [&] {
    const uint32_t name = stallprof_name("fill");
    for (uint64_t i = 0; i < capacity + 1000; ++i) stallprof_span_complete(name, i, 1, i, 0);
  });
  // One slot holds the name record.
  CHECK(dropped == 1001);
  RecordingVisitor visitor;
  segment->ReclaimLanes(visitor);
  CHECK(segment->TotalDropped() == 1001);  // the consumer's count, as of that drain
  CHECK(visitor.events.size() == capacity - 1);
  REQUIRE(visitor.released.size() == 1);
  CHECK(visitor.released[0].second == 1001);
}

TEST_CASE("A thread that finds every lane taken counts its lost records in the header, where the consumer sees them", "[client]") {
  // A process that exits without a word (a DataLoader worker's os._exit)
  // cannot report them later: the header carries them at once.
  auto segment = MakeSegment(1 << 20, 1);
  const uint64_t dropped = DroppedInChild(*segment, [] {
    const uint32_t name = stallprof_name("x");
    stallprof_span_complete(name, 0, 1, 0, 0);  // this thread takes the only lane
    std::thread other([name] {
      for (uint64_t i = 0; i < 5; ++i) stallprof_span_complete(name, i, 1, i, 0);
    });
    other.join();
  });
  CHECK(dropped == 5);
  CHECK(segment->header()->laneless_dropped.load() == 5);
  RecordingVisitor visitor;
  segment->ReleaseAll(visitor);
  CHECK(segment->LanelessDropped() == 5);
  CHECK(segment->TotalDropped() == 5);
  CHECK(visitor.events.size() == 1);
}

TEST_CASE("A producer rings the doorbell when its lane holds a quarter of its capacity, and not before", "[client]") {
  auto segment = MakeSegment(1 << 20, 4);
  const uint64_t quarter = segment->header()->lane_capacity / 4;
  auto* doorbell = &segment->header()->doorbell;  // the child writes the same shared page
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  // No drain while the child runs: the lane only fills.
  auto result = RunInChild(nullptr, nullptr, segment->EnvValue(), [&] {
    const uint32_t name = stallprof_name("fill");
    // The name record plus quarter - 2 spans: one record short of a quarter.
    for (uint64_t i = 0; i + 2 < quarter; ++i) stallprof_span_complete(name, i, 1, i, 0);
    const uint32_t before = doorbell->load();
    stallprof_span_complete(name, 0, 1, 0, 0);
    const uint32_t at_quarter = doorbell->load();
    // Ringing again waits for another eighth of the lane.
    for (uint64_t i = 0; i + 1 < quarter / 2; ++i) stallprof_span_complete(name, i, 1, i, 0);
    const uint32_t eighth_later_minus_one = doorbell->load();
    stallprof_span_complete(name, 0, 1, 0, 0);
    const uint32_t counts[4] = {before, at_quarter, eighth_later_minus_one, doorbell->load()};
    return write(fds[1], counts, sizeof counts) == sizeof counts ? 0 : 1;
  });
  REQUIRE(result.exit_code == 0);
  uint32_t counts[4] = {};
  REQUIRE(read(fds[0], counts, sizeof counts) == sizeof counts);
  CHECK(counts[0] == 0);
  CHECK(counts[1] == 1);
  CHECK(counts[2] == 1);
  CHECK(counts[3] == 2);
  close(fds[0]);
  close(fds[1]);
}

TEST_CASE("A lane freed when its thread exits is reused by the next thread with a new generation", "[client]") {
  auto segment = MakeSegment(1 << 20, 1);  // one lane: the second thread must reuse it
  int to_parent[2], to_child[2];
  REQUIRE(pipe(to_parent) == 0);
  REQUIRE(pipe(to_child) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    setenv("STALLPROF_RING", segment->EnvValue().c_str(), 1);
    if (stallprof_attach() != STALLPROF_OK) _exit(10);
    std::thread([] { stallprof_instant(stallprof_name("first"), 1, 0); }).join();
    char c = 1;
    if (write(to_parent[1], &c, 1) != 1 || read(to_child[0], &c, 1) != 1) _exit(11);
    std::thread([] { stallprof_instant(stallprof_name("second"), 2, 0); }).join();
    _exit(stallprof_dropped() == 0 ? 0 : 12);
  }
  char c;
  REQUIRE(read(to_parent[0], &c, 1) == 1);
  RecordingVisitor visitor;
  segment->ReclaimLanes(visitor);  // the child is alive: this lane was RELEASED by its thread
  REQUIRE(visitor.released.size() == 1);
  REQUIRE(write(to_child[1], &c, 1) == 1);
  CHECK(stallprof::testing::WaitExit(child) == 0);
  segment->ReclaimLanes(visitor);
  REQUIRE(visitor.owners.size() == 2);
  CHECK(visitor.owners[0].lane == visitor.owners[1].lane);
  CHECK(visitor.owners[1].generation == visitor.owners[0].generation + 1);
  CHECK(visitor.owners[0].tid != visitor.owners[1].tid);
  REQUIRE(visitor.events.size() == 2);
  CHECK(visitor.events[0].name == "first");
  CHECK(visitor.events[1].name == "second");
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) close(fd);
}

namespace {
// Records per producing process, and records whose lane's announced owner is
// another process (arg = pid * 1000 + i).
struct OwnerChecker : stallprof::ring::Visitor {
  std::map<uint32_t, uint64_t> records_of_pid;
  uint64_t misattributed = 0;
  void OnLaneOwner(const LaneOwner&) override {}
  void OnName(const LaneOwner&, uint32_t, std::string_view) override {}
  void OnRecord(const LaneOwner& o, const sp_record& r) override {
    if (r.arg / 1000 != o.pid) ++misattributed;
    ++records_of_pid[static_cast<uint32_t>(r.arg / 1000)];
  }
  void OnLaneReleased(const LaneOwner&, uint64_t) override {}
};
}  // namespace

TEST_CASE("Processes that exit without releasing their lanes lose no record while the consumer reclaims them", "[client][stress]") {
  // DataLoader workers end with os._exit: their lanes stay CLAIMED until the
  // consumer sees the thread gone. Each claim of such a lane races the
  // consumer's reclaim; two lanes make every claim reuse a dead one. A child
  // that finds both still held by dead processes (not yet reclaimed) drops
  // its records, counted.
  auto segment = MakeSegment(1 << 20, 2);
  OwnerChecker checker;
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    while (!stop.load()) segment->ReclaimLanes(checker);
  });
  constexpr int kProcesses = 300, kRecords = 20;
  std::vector<uint32_t> pids;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t child = fork();
    if (child < 0) break;  // no REQUIRE while the consumer thread runs: its throw would end the test binary
    if (child == 0) {
      setenv("STALLPROF_RING", segment->EnvValue().c_str(), 1);
      const uint32_t name = stallprof_name("short");
      const uint64_t base = static_cast<uint64_t>(getpid()) * 1000;
      for (uint64_t i = 0; i < kRecords; ++i) stallprof_span_complete(name, i, 1, base + i, 0);
      _exit(0);
    }
    pids.push_back(static_cast<uint32_t>(child));
    stallprof::testing::WaitExit(child);
  }
  stop = true;
  consumer.join();
  REQUIRE(pids.size() == kProcesses);
  segment->ReleaseAll(checker);
  CHECK(checker.misattributed == 0);
  uint64_t missing = 0;
  for (uint32_t pid : pids) missing += kRecords - std::min<uint64_t>(kRecords, checker.records_of_pid[pid]);
  CHECK(missing == segment->TotalDropped());
  CHECK(missing < kProcesses * kRecords / 2);
}

TEST_CASE("A forked child claims its own lane and never writes into its parent's", "[client]") {
  auto segment = MakeSegment(1 << 20, 8);
  RecordingVisitor visitor;
  auto result = RunInChild(segment.get(), &visitor, segment->EnvValue(), [] {
    const uint32_t name = stallprof_name("who");
    stallprof_instant(name, 1, 0);  // parent claims a lane
    pid_t grandchild = fork();
    if (grandchild == 0) {
      stallprof_instant(name, 2, 0);
      _exit(0);
    }
    stallprof_instant(name, 3, 0);
    return stallprof::testing::WaitExit(grandchild);
  });
  REQUIRE(result.exit_code == 0);
  REQUIRE(visitor.events.size() == 3);
  std::map<uint64_t, LaneOwner> by_arg;
  for (auto& e : visitor.events) {
    CHECK(e.name == "who");
    by_arg[e.record.arg] = e.owner;
  }
  CHECK(by_arg[1].lane == by_arg[3].lane);
  CHECK(by_arg[2].lane != by_arg[1].lane);
  CHECK(by_arg[2].pid != by_arg[1].pid);
}

TEST_CASE("A record whose name does not fit is dropped whole and its name is sent with the next one", "[client]") {
  auto segment = MakeSegment(1 << 20, 1);
  const uint64_t capacity = segment->header()->lane_capacity;
  int to_parent[2], to_child[2];
  REQUIRE(pipe(to_parent) == 0);
  REQUIRE(pipe(to_child) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    setenv("STALLPROF_RING", segment->EnvValue().c_str(), 1);
    const uint32_t a = stallprof_name("a");
    const uint32_t b = stallprof_name("b");
    for (uint64_t i = 0; i + 2 < capacity; ++i) stallprof_span_complete(a, i, 1, i, 0);  // 1 slot left
    stallprof_span_complete(b, 0, 1, 111, 0);  // needs NAME + span: dropped whole
    char c = 1;
    if (write(to_parent[1], &c, 1) != 1 || read(to_child[0], &c, 1) != 1) _exit(11);
    stallprof_span_complete(b, 0, 1, 222, 0);  // after the drain: name sent now
    _exit(stallprof_dropped() == 1 ? 0 : 12);
  }
  char c;
  REQUIRE(read(to_parent[0], &c, 1) == 1);
  RecordingVisitor visitor;
  auto stats = segment->DrainOnce(visitor);
  CHECK(stats.records == capacity - 2);
  CHECK(stats.invalid == 0);
  REQUIRE(write(to_child[1], &c, 1) == 1);
  CHECK(stallprof::testing::WaitExit(child) == 0);
  segment->ReclaimLanes(visitor);
  REQUIRE(visitor.events.size() == capacity - 1);
  CHECK(visitor.events.back().name == "b");
  CHECK(visitor.events.back().record.arg == 222);
  CHECK(segment->TotalInvalid() == 0);
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) close(fd);
}
