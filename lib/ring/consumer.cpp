// Consumer side of the shared-memory ring. Every byte in the segment outside
// our own copy of the geometry is treated as hostile: a record is copied once
// into local memory, then validated, then handed to the visitor.
#include "ring/consumer.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace stallprof::ring {
namespace {

// Name ids above this are rejected: the client interns at most a few thousand
// names, and the bitmap of known ids per lane must stay small (8 KiB).
constexpr uint32_t kMaxNameId = 65536;
// Records copied out of a lane per step: large enough to amortize the
// per-chunk work, small enough to stay in L1 (256 * 48 B = 12 KiB).
constexpr uint64_t kChunkRecords = 256;
// Smallest usable lane; below this a burst of name records cannot fit.
constexpr uint64_t kMinLaneCapacity = 16;
// A producer drops a record only by trying to write it, and no producer tries
// more than once per nanosecond (a record costs well over 10 ns): a lane's
// dropped count above the nanoseconds since the segment was created is a
// hostile or corrupt producer, and is clamped to that.
constexpr uint64_t kMaxAttemptsPerNs = 1;

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

struct Segment::LaneState {
  bool owned = false;          // OnLaneOwner was called for `owner`
  LaneOwner owner;
  std::vector<uint64_t> known;  // bitmap of name ids defined in this generation
  uint64_t dropped = 0;         // the lane's dropped count as trusted: bounded, never decreasing
  // A name being assembled from NAME + NAME_PART records (may span drains).
  bool name_pending = false;
  uint32_t name_id = 0;
  uint32_t name_length = 0;
  uint32_t name_received = 0;
  std::array<char, SP_MAX_NAME + SP_NAME_BYTES_PER_RECORD> name_bytes{};

  bool Known(uint64_t id) const { return id < kMaxNameId && (known[id >> 6] >> (id & 63)) & 1u; }
  void MarkKnown(uint32_t id) { known[id >> 6] |= uint64_t{1} << (id & 63); }
  void StartGeneration(const LaneOwner& o) {
    owned = true;
    owner = o;
    known.assign(kMaxNameId / 64, 0);
    name_pending = false;
    dropped = 0;
  }
};

Result<std::unique_ptr<Segment>> Segment::Create(uint64_t bytes, uint32_t lanes, const TscClock& tsc) {
  if (lanes == 0 || lanes > 65536) {
    return UsageError("ring lane count " + std::to_string(lanes) + " is out of range, use 1..65536");
  }
  const uint64_t per_lane = bytes > SP_HEADER_SIZE ? (bytes - SP_HEADER_SIZE) / lanes : 0;
  const uint64_t record_room = per_lane > sizeof(sp_lane_control) ? (per_lane - sizeof(sp_lane_control)) / sizeof(sp_record) : 0;
  uint64_t capacity = 1;
  while (capacity * 2 <= record_room && capacity < (uint64_t{1} << 31)) capacity *= 2;
  if (record_room < kMinLaneCapacity) {
    return UsageError("ring size " + std::to_string(bytes) + " bytes is too small for " + std::to_string(lanes) +
                      " lanes, give at least " +
                      std::to_string(SP_HEADER_SIZE + lanes * (sizeof(sp_lane_control) + kMinLaneCapacity * sizeof(sp_record))) +
                      " bytes or fewer lanes");
  }
  const uint64_t stride = sizeof(sp_lane_control) + capacity * sizeof(sp_record);  // multiple of 64 (capacity >= 16)
  const uint64_t size = SP_HEADER_SIZE + stride * lanes;

  int fd = memfd_create("stallprof-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return RuntimeError("cannot create the shared-memory ring, memfd_create failed: " + ErrnoText());
  auto fail = [&](const std::string& what) -> Error {
    std::string why = ErrnoText();
    close(fd);
    return RuntimeError("cannot set up the shared-memory ring, " + what + " failed: " + why +
                        ", try a smaller --ring-size");
  };
  if (fchmod(fd, 0600) != 0) return fail("fchmod");
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) return fail("ftruncate");
  // A producer must not be able to shrink the segment under us (SIGBUS).
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return fail("sealing");
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail("mmap");

  std::unique_ptr<Segment> segment(new Segment());
  segment->fd_ = fd;
  segment->base_ = base;
  segment->size_ = size;
  segment->creator_pid_ = static_cast<uint32_t>(getpid());
  segment->lane_count_ = lanes;
  segment->lane_capacity_ = static_cast<uint32_t>(capacity);
  segment->lane_offset_ = SP_HEADER_SIZE;
  segment->lane_stride_ = stride;
  segment->lanes_ = std::make_unique<LaneState[]>(lanes);
  segment->created_ns_ = NowNs();

  auto* h = static_cast<sp_ring_header*>(base);  // fresh ftruncate'd memory is zero
  h->abi_major = SP_ABI_MAJOR;
  h->abi_minor = SP_ABI_MINOR;
  h->header_size = SP_HEADER_SIZE;
  h->lane_count = lanes;
  h->lane_capacity = static_cast<uint32_t>(capacity);
  h->record_size = sizeof(sp_record);
  h->clock_id = SP_CLOCK_MONOTONIC;
  h->launcher_pid = segment->creator_pid_;
  h->lane_offset = SP_HEADER_SIZE;
  h->lane_stride = stride;
  h->segment_size = size;
  uint64_t run_id = 0;
  if (getrandom(&run_id, sizeof(run_id), 0) != sizeof(run_id)) run_id = static_cast<uint64_t>(getpid()) << 32 ^ size;
  h->run_id = run_id;
  h->next_loader_id.store(1, std::memory_order_relaxed);
  if (tsc.valid()) {
    h->tsc_base_ticks = tsc.base_ticks;
    h->tsc_base_ns = tsc.base_ns;
    h->tsc_mult = tsc.mult;
    h->tsc_shift = tsc.shift;
    segment->tsc_ = tsc;
    segment->tsc_report_.start = tsc;
  }
  h->magic.store(SP_RING_MAGIC, std::memory_order_release);
  segment->header_ = h;
  return segment;
}

sp_lane_control* Segment::LaneAt(uint32_t index) const {
  return reinterpret_cast<sp_lane_control*>(static_cast<uint8_t*>(base_) + lane_offset_ + uint64_t{index} * lane_stride_);
}

Segment::~Segment() {
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

std::string Segment::EnvValue() const {
  return "/proc/" + std::to_string(creator_pid_) + "/fd/" + std::to_string(fd_);
}

DrainStats Segment::DrainOnce(Visitor& visitor) {
  DrainStats stats;
  UpdateLanelessDropped();
  for (uint32_t i = 0; i < lane_count_; ++i) DrainLane(i, visitor, stats);
  invalid_total_ += stats.invalid;
  return stats;
}

void Segment::DrainLane(uint32_t index, Visitor& visitor, DrainStats& stats) {
  sp_lane_control* lane = LaneAt(index);
  LaneState& state = lanes_[index];
  const uint32_t lane_state = lane->state.load(std::memory_order_acquire);
  if (lane_state != SP_LANE_CLAIMED && lane_state != SP_LANE_RELEASED) return;
  // The producer writes the owner fields, then bumps generation (release).
  const uint64_t generation = lane->generation.load(std::memory_order_acquire);
  if (!state.owned || generation != state.owner.generation) {
    // Claimed, owner not written yet: the generation has not moved from the
    // one last announced here (`owner` outlives FreeLane), and the owner
    // fields may still be that gone thread's. Taking them would free the
    // lane under its new producer, whose records would vanish uncounted.
    // (A producer killed between its CAS and its bump leaves the lane claimed
    // for the rest of the run: one lane fewer, no record lost.)
    if (generation == 0 || (!state.owned && generation == state.owner.generation)) return;
    if (state.owned) state.owned = false;  // a generation we never saw released: treat as new
    LaneOwner owner;
    owner.lane = index;
    owner.generation = generation;
    owner.pid = lane->owner_pid;
    owner.tid = lane->owner_tid;
    owner.flags = lane->flags;
    state.StartGeneration(owner);
    visitor.OnLaneOwner(state.owner);
  }

  UpdateDropped(index);

  const uint64_t capacity = lane_capacity_;
  const uint64_t mask = capacity - 1;
  const sp_record* ring = sp_lane_records(lane);
  uint64_t tail = lane->tail.load(std::memory_order_relaxed);  // only we write it, but it is shared memory
  const uint64_t head = lane->head.load(std::memory_order_acquire);
  if (head - tail > capacity) {
    ++stats.lane_resets;
    ++stats.invalid;
    state.name_pending = false;
    lane->tail.store(head, std::memory_order_release);
    return;
  }
  stats.max_fill = std::max(stats.max_fill, static_cast<double>(head - tail) / static_cast<double>(capacity));

  sp_record chunk[kChunkRecords];
  while (tail != head) {
    uint64_t n = head - tail;
    if (n > kChunkRecords) n = kChunkRecords;
    const uint64_t first = tail & mask;
    const uint64_t before_wrap = capacity - first < n ? capacity - first : n;
    std::memcpy(chunk, ring + first, before_wrap * sizeof(sp_record));
    if (before_wrap < n) std::memcpy(chunk + before_wrap, ring, (n - before_wrap) * sizeof(sp_record));

    size_t run_start = 0;
    for (size_t i = 0; i < n; ++i) {
      sp_record& r = chunk[i];
      const uint8_t kind = r.kind;
      bool plain = false;
      switch (kind) {
        case SP_KIND_SPAN:
          // Ticks become CLOCK_MONOTONIC ns here, once; ticks without a
          // calibration to convert them (a forged flag) are rejected.
          if (r.flags & SP_SPAN_TSC) {
            if (!tsc_.valid()) break;
            r.start_ns = tsc_.ToNs(r.start_ns);
            r.duration_ns = tsc_.DeltaToNs(r.duration_ns);
            r.flags &= static_cast<uint8_t>(~SP_SPAN_TSC);
          }
          plain = !state.name_pending && state.Known(r.name);
          break;
        case SP_KIND_INSTANT:
        case SP_KIND_COUNTER:
        case SP_KIND_CONFIG_U64:
        case SP_KIND_CONFIG_F64:
          plain = !state.name_pending && state.Known(r.name);
          break;
        case SP_KIND_CONFIG_STR:
          plain = !state.name_pending && state.Known(r.name) && state.Known(r.arg);
          break;
        default:
          break;
      }
      if (plain) continue;  // stays in the current run of valid records

      // Not a plain valid record: flush the run before it, then handle it alone.
      if (i > run_start) {
        visitor.OnRecords(state.owner, chunk + run_start, i - run_start);
        stats.records += i - run_start;
      }
      run_start = i + 1;

      if (kind == SP_KIND_NAME_PART && state.name_pending && r.name == state.name_id) {
        const uint32_t take = std::min<uint32_t>(SP_NAME_BYTES_PER_RECORD, state.name_length - state.name_received);
        std::memcpy(state.name_bytes.data() + state.name_received, &r, take);
        state.name_received += take;
      } else if (kind == SP_KIND_NAME) {
        if (state.name_pending) ++stats.invalid;  // the previous name never completed
        state.name_pending = false;
        if (r.name >= kMaxNameId || r.scope > SP_MAX_NAME) {
          ++stats.invalid;
          continue;
        }
        state.name_pending = true;
        state.name_id = r.name;
        state.name_length = r.scope;
        state.name_received = std::min<uint32_t>(SP_NAME_BYTES_PER_RECORD, r.scope);
        std::memcpy(state.name_bytes.data(), &r, state.name_received);
      } else {
        // Bad kind, unknown name id, stray NAME_PART, or a record interrupting a name.
        if (state.name_pending) {
          state.name_pending = false;
          ++stats.invalid;
          // The interrupted name is lost; the record itself may still be fine.
          if (kind != SP_KIND_NAME_PART && kind != SP_KIND_INVALID && kind < SP_KIND_MAX && state.Known(r.name) &&
              (kind != SP_KIND_CONFIG_STR || state.Known(r.arg)) && !(r.flags & SP_SPAN_TSC && kind == SP_KIND_SPAN)) {
            visitor.OnRecords(state.owner, &r, 1);
            ++stats.records;
            continue;
          }
        }
        ++stats.invalid;
        continue;
      }
      if (state.name_pending && state.name_received >= state.name_length) {
        state.name_pending = false;
        state.MarkKnown(state.name_id);
        visitor.OnName(state.owner, state.name_id, std::string_view(state.name_bytes.data(), state.name_length));
        ++stats.names;
      }
    }
    if (n > run_start) {
      visitor.OnRecords(state.owner, chunk + run_start, n - run_start);
      stats.records += n - run_start;
    }
    tail += n;
    lane->tail.store(tail, std::memory_order_release);
  }
}

void Segment::ReanchorTsc(const TscReading& reading) {
  constexpr uint64_t kMaxBracketNs = 2000;
  const TscClock& start = tsc_report_.start;
  if (!tsc_.valid() || reading.bracket_ns > kMaxBracketNs) return;
  auto next = ClockThrough(TscReading{start.base_ticks, start.base_ns, 0}, reading);
  if (!next) return;
  const int64_t step = static_cast<int64_t>(tsc_.ToNs(reading.ticks) - reading.ns);
  tsc_report_.max_step_ns = std::max(tsc_report_.max_step_ns, static_cast<uint64_t>(step < 0 ? -step : step));
  tsc_report_.drift_ns = static_cast<int64_t>(start.ToNs(reading.ticks) - reading.ns);
  tsc_report_.over_ns = reading.ns - start.base_ns;
  ++tsc_report_.reanchors;
  // Same rate, base moved to the reading: exact there.
  next->base_ticks = reading.ticks;
  next->base_ns = reading.ns;
  tsc_ = *next;
}

void Segment::UpdateDropped(uint32_t index) {
  LaneState& state = lanes_[index];
  if (!state.owned) return;
  const uint64_t raw = LaneAt(index)->dropped.load(std::memory_order_relaxed);
  const uint64_t bound = (NowNs() - created_ns_) * kMaxAttemptsPerNs;
  state.dropped = std::max(state.dropped, std::min(raw, bound));
}

void Segment::UpdateLanelessDropped() {
  const uint64_t raw = header_->laneless_dropped.load(std::memory_order_relaxed);
  const uint64_t bound = (NowNs() - created_ns_) * kMaxAttemptsPerNs;
  laneless_dropped_ = std::max(laneless_dropped_, std::min(raw, bound));
}

void Segment::FreeLane(uint32_t index, Visitor& visitor) {
  sp_lane_control* lane = LaneAt(index);
  LaneState& state = lanes_[index];
  // Only a generation we announced counts (and is reported to the visitor), so
  // TotalDropped() always equals the sum of OnLaneReleased counts once all is released.
  if (state.owned) {
    UpdateDropped(index);
    released_dropped_ += state.dropped;
    visitor.OnLaneReleased(state.owner, state.dropped);
  }
  state.dropped = 0;
  state.owned = false;
  state.name_pending = false;
  lane->head.store(0, std::memory_order_relaxed);
  lane->tail.store(0, std::memory_order_relaxed);
  lane->dropped.store(0, std::memory_order_relaxed);
  // Publishes the reset indices to the next claimer (it CASes state with acq_rel).
  lane->state.store(SP_LANE_FREE, std::memory_order_release);
}

void Segment::ReclaimLanes(Visitor& visitor) {
  DrainStats stats;
  UpdateLanelessDropped();
  for (uint32_t i = 0; i < lane_count_; ++i) {
    DrainLane(i, visitor, stats);
    sp_lane_control* lane = LaneAt(i);
    const uint32_t lane_state = lane->state.load(std::memory_order_acquire);
    if (lane_state == SP_LANE_RELEASED) {
      FreeLane(i, visitor);
    } else if (lane_state == SP_LANE_CLAIMED && lanes_[i].owned) {
      const std::string task =
          "/proc/" + std::to_string(lanes_[i].owner.pid) + "/task/" + std::to_string(lanes_[i].owner.tid);
      if (access(task.c_str(), F_OK) != 0 && errno == ENOENT) {
        // The thread is gone (process killed): whatever it wrote was drained above.
        DrainLane(i, visitor, stats);
        FreeLane(i, visitor);
      }
    }
  }
  invalid_total_ += stats.invalid;
}

void Segment::ReleaseAll(Visitor& visitor) {
  DrainStats stats;
  UpdateLanelessDropped();
  for (uint32_t i = 0; i < lane_count_; ++i) {
    DrainLane(i, visitor, stats);
    sp_lane_control* lane = LaneAt(i);
    const uint32_t lane_state = lane->state.load(std::memory_order_acquire);
    // Every generation we announced is released, whatever state the producer
    // left in the lane: the drops it reported then reach the trace.
    if (lane_state == SP_LANE_RELEASED || lanes_[i].owned) FreeLane(i, visitor);
  }
  invalid_total_ += stats.invalid;
}

static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free,
              "the doorbell is a plain 32-bit futex word");

uint32_t Segment::DoorbellCount() const { return header_->doorbell.load(std::memory_order_acquire); }

bool Segment::WaitForDoorbell(uint32_t seen, std::chrono::microseconds timeout) const {
  const auto us = std::max<int64_t>(timeout.count(), 0);
  const timespec relative{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000 * 1000)};
  // Shared (not FUTEX_PRIVATE): the producers ring from other processes.
  const long r = syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header_->doorbell), FUTEX_WAIT, seen, &relative,
                         nullptr, 0);
  return r == 0 || errno != ETIMEDOUT;  // woken, or the count had already moved (EAGAIN)
}

void Segment::RingDoorbell() {
  header_->doorbell.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header_->doorbell), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

uint64_t Segment::TotalDropped() const {
  uint64_t total = released_dropped_ + laneless_dropped_;
  for (uint32_t i = 0; i < lane_count_; ++i)
    if (lanes_[i].owned) total += lanes_[i].dropped;
  return total;
}

}  // namespace stallprof::ring
