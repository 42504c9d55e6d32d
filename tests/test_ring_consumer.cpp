// Segment creation, draining, overflow counting and lane reclaim.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "ring/consumer.h"
#include "tools/test_producer.h"

using stallprof::ring::Segment;
using stallprof::testing::RecordingVisitor;
using stallprof::testing::TestProducer;

namespace {
std::unique_ptr<Segment> MakeSegment(uint64_t bytes = 1 << 20, uint32_t lanes = 8) {
  auto segment = Segment::Create(bytes, lanes);
  REQUIRE(segment.ok());
  return std::move(segment).value();
}
}  // namespace

TEST_CASE("A new segment has a complete header with power-of-two lanes that fit its size", "[ring]") {
  auto segment = MakeSegment(1 << 20, 8);
  const sp_ring_header* h = segment->header();
  CHECK(h->magic.load() == SP_RING_MAGIC);
  CHECK(h->abi_major == SP_ABI_MAJOR);
  CHECK(h->lane_count == 8);
  CHECK(h->record_size == sizeof(sp_record));
  CHECK((h->lane_capacity & (h->lane_capacity - 1)) == 0);
  CHECK(h->lane_capacity >= 1024);
  CHECK(h->lane_offset + uint64_t{h->lane_count} * h->lane_stride <= segment->size());
  CHECK(segment->size() <= (1u << 20));
  // Doubling the capacity would not fit.
  CHECK(SP_HEADER_SIZE + 8 * (sizeof(sp_lane_control) + 2ull * h->lane_capacity * sizeof(sp_record)) > (1u << 20));
  CHECK(h->next_loader_id.load() == 1);
  CHECK(h->run_id != 0);
}

TEST_CASE("The segment is private to its user and reachable through its STALLPROF_RING path", "[ring]") {
  auto segment = MakeSegment();
  struct stat st {};
  REQUIRE(fstat(segment->fd(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Close-on-exec: the profiled command does not inherit the descriptor (it
  // could write into lanes through it); it opens the path below anew.
  CHECK((fcntl(segment->fd(), F_GETFD) & FD_CLOEXEC) != 0);
  const std::string path = segment->EnvValue();
  CHECK(path == "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(segment->fd()));
  int fd = open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  void* other = mmap(nullptr, segment->size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  REQUIRE(other != MAP_FAILED);
  CHECK(static_cast<sp_ring_header*>(other)->magic.load() == SP_RING_MAGIC);
  static_cast<sp_ring_header*>(other)->doorbell = 77;
  CHECK(segment->header()->doorbell.load() == 77);
  munmap(other, segment->size());
}

TEST_CASE("The segment is an anonymous memfd that a producer cannot shrink or grow", "[ring]") {
  auto segment = MakeSegment();
  char target[256] = {0};
  const std::string link = "/proc/self/fd/" + std::to_string(segment->fd());
  REQUIRE(readlink(link.c_str(), target, sizeof target - 1) > 0);
  CHECK(std::string(target).rfind("/memfd:stallprof-ring", 0) == 0);  // nothing in /dev/shm
  int fd = open(segment->EnvValue().c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  CHECK(ftruncate(fd, 4096) != 0);
  CHECK(ftruncate(fd, static_cast<off_t>(segment->size() * 2)) != 0);
  close(fd);
}

TEST_CASE("A ring too small for its lanes is refused with an error, not created", "[ring]") {
  auto tiny = Segment::Create(8192, 128);
  REQUIRE_FALSE(tiny.ok());
  CHECK(tiny.error().message.find("too small") != std::string::npos);
  CHECK_FALSE(Segment::Create(1 << 20, 0).ok());
}

TEST_CASE("Drained records arrive in order with their names resolved, long names included", "[ring]") {
  auto segment = MakeSegment();
  TestProducer producer(segment->base(), 3);
  REQUIRE(producer.claimed());
  const std::string long_name(200, 'x');
  producer.Name(1, "dataloader.wait");
  producer.Name(2, long_name);
  for (uint64_t i = 0; i < 100; ++i) producer.Span(i % 2 ? 2 : 1, i, 7);
  RecordingVisitor visitor;
  auto stats = segment->DrainOnce(visitor);
  CHECK(stats.records == 100);
  CHECK(stats.invalid == 0);
  CHECK(stats.names == 2);
  REQUIRE(visitor.owners.size() == 1);
  CHECK(visitor.owners[0].lane == 3);
  CHECK(visitor.owners[0].pid == static_cast<uint32_t>(getpid()));
  REQUIRE(visitor.events.size() == 100);
  for (uint64_t i = 0; i < 100; ++i) {
    CHECK(visitor.events[i].record.arg == i);
    CHECK(visitor.events[i].record.scope == 7);
    CHECK(visitor.events[i].name == (i % 2 ? long_name : "dataloader.wait"));
  }
  // Nothing new: a second drain reports nothing.
  RecordingVisitor again;
  CHECK(segment->DrainOnce(again).records == 0);
}

TEST_CASE("A full lane drops and counts exactly the records beyond its capacity", "[ring]") {
  auto segment = MakeSegment(1 << 18, 2);
  const uint64_t capacity = segment->header()->lane_capacity;
  TestProducer producer(segment->base(), 0);
  producer.Name(1, "s");  // one slot
  for (uint64_t i = 0; i < capacity + 500; ++i) producer.Span(1, i);
  RecordingVisitor visitor;
  CHECK(segment->DrainOnce(visitor).records == capacity - 1);
  CHECK(segment->TotalDropped() == 501);  // as of that drain
  // After draining there is room again.
  producer.Span(1, 999999);
  CHECK(segment->DrainOnce(visitor).records == 1);
  CHECK(segment->TotalDropped() == 501);
}

TEST_CASE("A released lane is drained, reported with its drops, freed and reused with a new generation", "[ring]") {
  auto segment = MakeSegment();
  RecordingVisitor visitor;
  uint64_t first_generation = 0;
  {
    TestProducer producer(segment->base(), 0);
    producer.Name(1, "a");
    producer.Span(1, 1);
    producer.lane()->dropped.store(4);
    producer.Release();
    first_generation = producer.lane()->generation.load();
  }
  segment->ReclaimLanes(visitor);
  REQUIRE(visitor.events.size() == 1);
  REQUIRE(visitor.released.size() == 1);
  CHECK(visitor.released[0].second == 4);
  CHECK(segment->TotalDropped() == 4);
  TestProducer next(segment->base(), 0);
  REQUIRE(next.claimed());
  CHECK(next.lane()->generation.load() == first_generation + 1);
  // Names do not carry over between generations.
  next.Span(1, 2);
  auto stats = segment->DrainOnce(visitor);
  CHECK(stats.invalid == 1);
  CHECK(visitor.owners.size() == 2);
}

TEST_CASE("The lane of a SIGKILLed child process is reclaimed after its records are drained", "[ring]") {
  auto segment = MakeSegment();
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    TestProducer producer(segment->base(), 5);
    producer.Name(1, "child");
    for (int i = 0; i < 10; ++i) producer.Span(1, i);
    char c = 1;
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  RecordingVisitor visitor;
  segment->ReclaimLanes(visitor);  // child alive: drained, not freed
  CHECK(visitor.events.size() == 10);
  CHECK(visitor.released.empty());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  segment->ReclaimLanes(visitor);
  REQUIRE(visitor.released.size() == 1);
  CHECK(visitor.released[0].first.pid == static_cast<uint32_t>(child));
  CHECK(sp_lane_at(segment->base(), segment->header(), 5)->state.load() == SP_LANE_FREE);
  close(ready[0]);
  close(ready[1]);
}

TEST_CASE("A lane claimed but not yet announced by its new owner is left alone, not freed as its dead last owner's", "[ring]") {
  // A producer claims a lane by CAS, then writes its pid and tid and bumps the
  // generation. A drain between the two (the producer preempted in getpid())
  // sees CLAIMED with the last generation and its dead owner's pid: taking
  // that as the owner freed the lane under the new producer, whose records
  // then vanished with no drop counted (a DataLoader worker's whole epoch).
  auto segment = MakeSegment();
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    TestProducer producer(segment->base(), 3);
    producer.Name(1, "old");
    producer.Span(1, 1);
    _exit(0);  // no release: the lane stays CLAIMED by a process that is gone
  }
  waitpid(child, nullptr, 0);
  RecordingVisitor visitor;
  segment->ReclaimLanes(visitor);
  REQUIRE(visitor.released.size() == 1);
  sp_lane_control* lane = sp_lane_at(segment->base(), segment->header(), 3);
  REQUIRE(lane->state.load() == SP_LANE_FREE);
  const uint64_t generation = lane->generation.load();

  uint32_t expected = SP_LANE_FREE;  // the new producer's CAS, nothing after it yet
  REQUIRE(lane->state.compare_exchange_strong(expected, SP_LANE_CLAIMED));
  segment->ReclaimLanes(visitor);
  CHECK(lane->state.load() == SP_LANE_CLAIMED);
  CHECK(visitor.owners.size() == 1);
  CHECK(visitor.released.size() == 1);

  lane->owner_pid = static_cast<uint32_t>(getpid());  // the rest of the claim
  lane->owner_tid = static_cast<uint32_t>(gettid());
  lane->generation.fetch_add(1);
  CHECK(lane->generation.load() == generation + 1);
  segment->ReclaimLanes(visitor);
  REQUIRE(visitor.owners.size() == 2);
  CHECK(visitor.owners[1].pid == static_cast<uint32_t>(getpid()));
  CHECK(lane->state.load() == SP_LANE_CLAIMED);
}

TEST_CASE("ReleaseAll reports every lane still claimed at the end of a run", "[ring]") {
  auto segment = MakeSegment();
  TestProducer a(segment->base(), 1);
  TestProducer b(segment->base(), 2);
  a.Name(1, "x");
  a.Span(1, 1);
  b.Name(1, "y");
  RecordingVisitor visitor;
  segment->ReleaseAll(visitor);
  CHECK(visitor.events.size() == 1);
  CHECK(visitor.released.size() == 2);
}

TEST_CASE("The drain's wait on the doorbell ends on a ring, at once when it already moved, else at its timeout", "[ring]") {
  auto segment = MakeSegment();
  using namespace std::chrono;
  const uint32_t seen = segment->DoorbellCount();
  auto t0 = steady_clock::now();
  CHECK_FALSE(segment->WaitForDoorbell(seen, milliseconds(30)));
  CHECK(steady_clock::now() - t0 >= milliseconds(29));

  std::thread ringer([&] {
    std::this_thread::sleep_for(milliseconds(20));
    segment->RingDoorbell();
  });
  t0 = steady_clock::now();
  CHECK(segment->WaitForDoorbell(seen, seconds(30)));
  CHECK(steady_clock::now() - t0 < seconds(10));
  ringer.join();
  CHECK(segment->DoorbellCount() == seen + 1);

  // Rung between reading the count and waiting: no wait at all.
  t0 = steady_clock::now();
  CHECK(segment->WaitForDoorbell(seen, seconds(30)));
  CHECK(steady_clock::now() - t0 < seconds(10));
}
