/*
 * stallprof shared-memory ring ABI (C11 and C++20 compatible).
 *
 * This header is the contract between producers (libstallprof_client.so, loaded
 * into the training process and all of its children) and the consumer (the
 * `stallprof run` launcher). Producers and consumer may be built at different
 * times; nothing here may change meaning without bumping SP_ABI_MAJOR.
 *
 * Segment layout (one memfd per run, all offsets from the segment start):
 *
 *   [0, SP_HEADER_SIZE)             sp_ring_header
 *   [lane_offset + i * lane_stride] lane i: sp_lane_control, then
 *                                   lane_capacity records of record_size bytes
 *
 * Ordering rules:
 *  - The consumer fills every header field, then stores `magic` with release.
 *    A producer loads `magic` with acquire and attaches only if it equals
 *    SP_RING_MAGIC and abi_major == SP_ABI_MAJOR.
 *  - A producer claims a free lane by CAS of `state` FREE -> CLAIMED (acq_rel),
 *    then writes owner_pid/owner_tid and bumps `generation` before its first
 *    record. The consumer reads owner fields only after seeing CLAIMED with a
 *    generation past the last one it announced for that lane: until then the
 *    owner fields may still be the last (possibly dead) owner's, and taking
 *    them would free the lane under its new producer.
 *  - Each lane is single-producer / single-consumer. The producer writes a
 *    record at index head % capacity, then stores head+1 with release. The
 *    consumer loads head with acquire, copies records [tail, head), then stores
 *    tail with release. The producer keeps a cached copy of tail and reloads it
 *    (acquire) only when the lane looks full.
 *  - A thread that finds every lane taken drops its records and counts them in
 *    the header's `laneless_dropped` (ABI 1.3).
 *  - A full lane drops the record and increments `dropped` (relaxed; only the
 *    producer writes it). Producers never block, allocate, throw or abort.
 *  - A producer rings the header's `doorbell` when its lane passes a quarter full
 *    (one futex wake per eighth of a lane at most, never a wait).
 *  - On thread exit the producer stores RELEASED; the consumer drains what is
 *    left and returns the lane to FREE. A lane whose owner thread vanished
 *    without releasing it (process killed) is reclaimed the same way once the
 *    consumer sees that /proc/<pid>/task/<tid> is gone.
 *  - The consumer trusts nothing a producer wrote: lengths, ids, kinds and
 *    indices are bounds-checked; a lane with head - tail > capacity is reset
 *    and its loss counted.
 */
#ifndef STALLPROF_RING_H
#define STALLPROF_RING_H

#include <stdint.h>

#ifdef __cplusplus
#include <atomic>
#define SP_ATOMIC(T) std::atomic<T>
extern "C" {
#else
#include <stdatomic.h>
#define SP_ATOMIC(T) _Atomic(T)
#endif

/* "SPRING01" little-endian: tells a stallprof ring from any other memory. */
#define SP_RING_MAGIC 0x3130474E49525053ULL
/* Bump on any incompatible change of layout or meaning. */
#define SP_ABI_MAJOR 1u
/* Bump on compatible additions (new record kinds readers may skip).
 * 1: TSC calibration in the header, SP_SPAN_TSC spans.
 * 2: the doorbell.
 * 3: laneless_dropped. */
#define SP_ABI_MINOR 3u

/* Environment variable through which children find the segment:
 * STALLPROF_RING=/proc/<launcher pid>/fd/<n>. Works across fork, spawn and
 * exec, and leaves no name behind in /dev/shm. */
#define SP_RING_ENV "STALLPROF_RING"

/* The header occupies one page so lanes start page aligned. */
#define SP_HEADER_SIZE 4096u
/* Cache line: head, tail and dropped each get their own to avoid false sharing. */
#define SP_CACHE_LINE 64u
/* Default lane count: enough for a main process, 16 workers with a few
 * threads each and a pin-memory thread, per rank on a node. */
#define SP_DEFAULT_LANES 128u
/* Most lanes a ring may have (`stallprof run --lanes`). */
#define SP_MAX_LANES 65536u
/* Longest name carried through the ring; longer names are truncated. */
#define SP_MAX_NAME 255u

/* CLOCK_MONOTONIC: the same clock in every process on the machine. Every
 * timestamp the consumer hands on is in this clock. */
#define SP_CLOCK_MONOTONIC 1u

/* The lane count to suggest after a run whose threads found every lane
 * taken: twice as many, at least 256, at most SP_MAX_LANES. */
static inline uint32_t sp_suggested_lanes(uint32_t lanes) {
  const uint64_t twice = 2ull * lanes;
  return twice < 256u ? 256u : twice > SP_MAX_LANES ? SP_MAX_LANES : (uint32_t)twice;
}

typedef struct sp_ring_header {
  SP_ATOMIC(uint64_t) magic; /* stored last, with release */
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t header_size;   /* SP_HEADER_SIZE */
  uint32_t lane_count;
  uint32_t lane_capacity; /* records per lane, a power of two */
  uint32_t record_size;   /* sizeof(sp_record) */
  uint32_t clock_id;      /* SP_CLOCK_* */
  uint32_t launcher_pid;
  uint64_t lane_offset;   /* offset of lane 0 */
  uint64_t lane_stride;   /* bytes from one lane to the next */
  uint64_t segment_size;  /* total bytes of the segment */
  uint64_t run_id;        /* random per run: tells two concurrent runs apart */
  /* Loader ids are handed out across processes from this counter. */
  SP_ATOMIC(uint32_t) next_loader_id;
  /* ABI 1.2. The doorbell: a producer whose lane passes a quarter full adds 1 and
   * wakes the futex on it (shared, not FUTEX_PRIVATE), so a burst after an
   * idle spell, when the consumer polls only every 50 ms, is drained before
   * the lane overflows. The consumer sleeps on it with a timeout. Older
   * producers never ring; older consumers never wait: both still work. */
  SP_ATOMIC(uint32_t) doorbell;
  /* ABI 1.1. TSC calibration, written before `magic` (all 0: none, timestamps
   * are CLOCK_MONOTONIC ns). When tsc_mult != 0 the CPU has an invariant TSC
   * the launcher calibrated, and producers may time spans with rdtsc, sending
   * raw ticks flagged SP_SPAN_TSC; the consumer converts them with its own
   * (continually re-anchored) copy of the calibration:
   *   ns = tsc_base_ns + ((ticks - tsc_base_ticks) * tsc_mult) >> tsc_shift */
  uint64_t tsc_base_ticks;
  uint64_t tsc_base_ns;  /* CLOCK_MONOTONIC at tsc_base_ticks */
  uint64_t tsc_mult;
  uint32_t tsc_shift;
  uint32_t reserved1;
  /* ABI 1.3. Records lost by threads that found every lane taken: they have
   * no lane whose `dropped` could carry the loss, and a process that exits
   * without reporting (a DataLoader worker's os._exit) would lose it
   * silently. Producers add 1 per record (relaxed); the consumer bounds it
   * as a lane's count. */
  SP_ATOMIC(uint64_t) laneless_dropped;
} sp_ring_header;

enum sp_lane_state {
  SP_LANE_FREE = 0,
  SP_LANE_CLAIMED = 1,
  SP_LANE_RELEASED = 2 /* owner thread exited; consumer drains then frees */
};

typedef struct sp_lane_control {
  /* line 0: ownership, written by the claiming producer */
  SP_ATOMIC(uint32_t) state;
  uint32_t owner_pid;
  uint32_t owner_tid;
  uint32_t flags;                  /* SP_LANE_FLAG_* */
  SP_ATOMIC(uint64_t) generation;  /* bumped on every claim */
  uint8_t pad0[SP_CACHE_LINE - 24];
  /* line 1: producer index */
  SP_ATOMIC(uint64_t) head;
  uint8_t pad1[SP_CACHE_LINE - 8];
  /* line 2: consumer index */
  SP_ATOMIC(uint64_t) tail;
  uint8_t pad2[SP_CACHE_LINE - 8];
  /* line 3: records lost because the lane was full */
  SP_ATOMIC(uint64_t) dropped;
  uint8_t pad3[SP_CACHE_LINE - 8];
} sp_lane_control;

/* Lane flags: how the producer reached the ring. */
#define SP_LANE_FLAG_PYTHON_CEXT 1u   /* Python through the C extension */
#define SP_LANE_FLAG_PYTHON_CTYPES 2u /* Python through the ctypes fallback */

/* Record kinds. */
enum sp_record_kind {
  SP_KIND_INVALID = 0,
  /* A complete span: start_ns, duration_ns, cpu_ns, delay_ns, arg, name, scope. */
  SP_KIND_SPAN = 1,
  /* Defines per-lane name id `name`: `scope` = byte length, bytes follow in the
   * 40 payload bytes (start_ns..arg) of this record and of the next
   * ceil(len/40)-1 SP_KIND_NAME_PART records. Sent before the first use.
   * A NAME_PART carries the same `name` id (the consumer rejects a part for
   * another id) and its part index 1, 2, ... in `scope` (informational). */
  SP_KIND_NAME = 2,
  SP_KIND_NAME_PART = 3,
  /* Instant event: start_ns, name, arg, scope (epoch starts, marks). */
  SP_KIND_INSTANT = 4,
  /* Counter sample: start_ns, name, arg = value. */
  SP_KIND_COUNTER = 5,
  /* Configuration key/value for `scope`: name = key, arg = value. */
  SP_KIND_CONFIG_U64 = 6,
  SP_KIND_CONFIG_STR = 7, /* arg = per-lane name id of the value string */
  SP_KIND_CONFIG_F64 = 8, /* arg = IEEE-754 bits */
  SP_KIND_MAX = 9
};

/* Span flags (in `flags`). */
#define SP_SPAN_HAS_CPU 1u   /* cpu_ns and delay_ns were measured */
/* start_ns and duration_ns are TSC ticks, not ns (SP_KIND_SPAN only; the
 * producer sets it only when the header has a TSC calibration). */
#define SP_SPAN_TSC 2u

/* 48 bytes, fixed size, no pointers: a span carries start, duration, thread
 * CPU time and run-queue delay consumed during it, a name, one argument
 * (batch index, bytes, iteration) and a scope (loader id, 0 = none). */
typedef struct sp_record {
  uint64_t start_ns;    /* SP_CLOCK_MONOTONIC ns, or TSC ticks with SP_SPAN_TSC */
  uint64_t duration_ns;
  uint64_t cpu_ns;      /* thread CPU time during the span */
  uint64_t delay_ns;    /* run-queue delay during the span */
  uint64_t arg;
  uint32_t name;        /* per-lane name id */
  uint8_t kind;         /* sp_record_kind */
  uint8_t flags;        /* SP_SPAN_* */
  uint16_t scope;       /* loader id; length for SP_KIND_NAME */
} sp_record;

#define SP_NAME_BYTES_PER_RECORD 40u

#ifdef __cplusplus
static_assert(sizeof(sp_record) == 48, "sp_record is part of the ABI");
static_assert(sizeof(sp_lane_control) == 4 * SP_CACHE_LINE, "lane control is 4 lines");
static_assert(sizeof(sp_ring_header) <= SP_HEADER_SIZE, "header fits its page");
#else
_Static_assert(sizeof(sp_record) == 48, "sp_record is part of the ABI");
_Static_assert(sizeof(sp_lane_control) == 4 * SP_CACHE_LINE, "lane control is 4 lines");
_Static_assert(sizeof(sp_ring_header) <= SP_HEADER_SIZE, "header fits its page");
#endif

/* The CPU's time-stamp counter; 0 where there is none (non-x86 builds never
 * set SP_SPAN_TSC). Not serializing: a few ns of reordering at most. */
static inline uint64_t sp_read_tsc(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return 0;
#endif
}

static inline sp_lane_control* sp_lane_at(void* segment, const sp_ring_header* h, uint32_t lane) {
  return (sp_lane_control*)((uint8_t*)segment + h->lane_offset + (uint64_t)lane * h->lane_stride);
}
static inline sp_record* sp_lane_records(sp_lane_control* lane) {
  return (sp_record*)((uint8_t*)lane + sizeof(sp_lane_control));
}

#ifdef __cplusplus
}
#endif
#endif /* STALLPROF_RING_H */
