/*
 * libstallprof_client.so: producer side of the ring (see ring/stallprof_ring.h
 * for the ordering rules). C11 and libc only, so it can be loaded into any
 * process (CPython, ctypes, a C++ program) without dragging in libstdc++.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ring/stallprof_ring.h"
#include "stallprof/client.h"

/* ---- process state ------------------------------------------------------ */

enum attach_state { ATTACH_NOT_TRIED = 0, ATTACH_BUSY = 1, ATTACH_DONE = 2, ATTACH_OFF = 3 };

static _Atomic int g_attach = ATTACH_NOT_TRIED;
static int g_attach_result = STALLPROF_DISABLED;
static uint8_t* g_base;
static sp_ring_header* g_header;
/* Our own copy of the geometry, validated at attach. */
static uint32_t g_lane_count;
static uint64_t g_capacity;
static uint64_t g_lane_offset;
static uint64_t g_lane_stride;
static _Atomic uint32_t g_client_kind = STALLPROF_CLIENT_C;
/* The ring has a TSC calibration: spans from stallprof_span_begin/end are
 * timed with rdtsc and sent as ticks (SP_SPAN_TSC); the drain converts them. */
static int g_use_tsc;
/* The launcher waits on the header's doorbell (ABI 1.2): ring it when a lane
 * passes a quarter full (doorbell_fill). */
static int g_use_doorbell;
/* The header counts drops of threads without a lane (ABI 1.3). */
static int g_count_laneless;
static _Atomic uint64_t g_dropped;
/* Share of a thread's wall time the expensive counters may cost it
 * (STALLPROF_COUNTER_SHARE, set at attach); >= 1: read them on every span. */
static double g_counter_share = STALLPROF_DEFAULT_COUNTER_SHARE;
/* Set once the budget has skipped a span's counters in this process (or its
 * parent): the config "counter_share" that says so is in the trace. */
static _Atomic int g_share_recorded;
static pthread_key_t g_release_key;

/* Records waiting in a lane at which the producer rings: a quarter of the
 * lane, so three quarters (6144 records of the default lane, 2 ms of the
 * fastest Python stage loop) are left for the launcher to wake and drain. */
static inline uint64_t doorbell_fill(void) { return g_capacity / 4; }

/* ---- interned names: a lock-free open-addressing table ------------------ */

/* 4096 names is far more than an instrumented program uses (the hook uses a
 * few dozen); ids are slot + 1 so that 0 can mean "no name". */
#define NAME_SLOTS 4096u
enum slot_state { SLOT_EMPTY = 0, SLOT_WRITING = 1, SLOT_READY = 2 };
typedef struct name_slot {
  _Atomic uint32_t state;
  uint32_t hash;
  uint16_t length;
  char text[SP_MAX_NAME + 1];
} name_slot;
static name_slot g_names[NAME_SLOTS];

/* ---- per-thread state --------------------------------------------------- */

typedef struct thread_state {
  sp_lane_control* lane; /* NULL: no lane yet */
  sp_record* records;
  uint64_t head;
  uint64_t cached_tail;
  uint64_t doorbell_at;   /* head at which to look at the lane's fill again */
  uint64_t claim_retry_at_ns; /* after a failed claim: CLOCK_MONOTONIC of the next try */
  int schedstat_fd;       /* 0: not opened yet, -1: unavailable, else fd + 1 */
  int io_fd;              /* /proc/thread-self/io, same encoding as schedstat_fd */
  /* The counter budget (see "counter budget" below): the counters may be read
   * again once CLOCK_MONOTONIC reaches this. 0: read them now. */
  uint64_t counters_free_at_ns;
  uint64_t announced[NAME_SLOTS / 64 + 1]; /* name ids already sent in this lane */
} thread_state;
static __thread thread_state t_state;

static uint32_t hash_bytes(const char* s, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; ++i) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h;
}

/* The per-thread /proc files name the thread that opened them: closed when
 * the thread releases its lane or exits, and in a forked child (where they
 * would still describe the parent's thread). */
static void close_thread_files(thread_state* t) {
  if (t->schedstat_fd > 0) close(t->schedstat_fd - 1);
  t->schedstat_fd = 0;
  if (t->io_fd > 0) close(t->io_fd - 1);
  t->io_fd = 0;
}

static void release_lane(thread_state* t) {
  if (t->lane != NULL) atomic_store_explicit(&t->lane->state, SP_LANE_RELEASED, memory_order_release);
  t->lane = NULL;
  close_thread_files(t);
}

static void on_thread_exit(void* unused) {
  (void)unused;
  release_lane(&t_state);
}

/* The forked child has only the forking thread; its lane belongs to the
 * parent, so forget it (without releasing it) and claim a fresh one. */
static void on_fork_child(void) {
  thread_state* t = &t_state;
  t->lane = NULL;
  t->claim_retry_at_ns = 0;
  t->counters_free_at_ns = 0;
  close_thread_files(t);
  if (atomic_load(&g_attach) == ATTACH_BUSY) atomic_store(&g_attach, ATTACH_NOT_TRIED);
  atomic_store_explicit(&g_dropped, 0, memory_order_relaxed);
}

static int fail_attach(int result, const char* message) {
  if (message != NULL) {
    /* One line, once per process; never abort the host. */
    fputs(message, stderr);
  }
  g_attach_result = result;
  atomic_store_explicit(&g_attach, ATTACH_OFF, memory_order_release);
  return result;
}

/* STALLPROF_COUNTER_SHARE: a number in (0, 1]; anything else keeps the default. */
static double counter_share_from_env(void) {
  const char* text = getenv("STALLPROF_COUNTER_SHARE");
  if (text == NULL || text[0] == '\0') return STALLPROF_DEFAULT_COUNTER_SHARE;
  char* end = NULL;
  const double share = strtod(text, &end);
  if (end == text || *end != '\0' || !(share > 0) || share > 1) return STALLPROF_DEFAULT_COUNTER_SHARE;
  return share;
}

static int do_attach(void) {
  const char* path = getenv(SP_RING_ENV);
  if (path == NULL || path[0] == '\0') return fail_attach(STALLPROF_DISABLED, NULL);
  g_counter_share = counter_share_from_env();
  char line[512];
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    snprintf(line, sizeof line, "stallprof: cannot open the ring %s (%s); not recording\n", path, strerror(errno));
    return fail_attach(STALLPROF_ERR_ATTACH, line);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)SP_HEADER_SIZE) {
    close(fd);
    snprintf(line, sizeof line, "stallprof: %s is not a stallprof ring (too small); not recording\n", path);
    return fail_attach(STALLPROF_ERR_ATTACH, line);
  }
  const uint64_t size = (uint64_t)st.st_size;
  void* base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    snprintf(line, sizeof line, "stallprof: cannot map the ring %s (%s); not recording\n", path, strerror(errno));
    return fail_attach(STALLPROF_ERR_ATTACH, line);
  }
  sp_ring_header* h = (sp_ring_header*)base;
  if (atomic_load_explicit(&h->magic, memory_order_acquire) != SP_RING_MAGIC) {
    munmap(base, size);
    snprintf(line, sizeof line, "stallprof: %s is not a stallprof ring (bad magic); not recording\n", path);
    return fail_attach(STALLPROF_ERR_ATTACH, line);
  }
  if (h->abi_major != SP_ABI_MAJOR) {
    const uint32_t major = h->abi_major;
    munmap(base, size);
    snprintf(line, sizeof line, "stallprof: ring ABI %u.x is not supported by this client (%u.x); not recording\n",
             major, SP_ABI_MAJOR);
    return fail_attach(STALLPROF_ERR_VERSION, line);
  }
  const uint64_t capacity = h->lane_capacity;
  const uint64_t lanes = h->lane_count;
  const uint64_t stride = h->lane_stride;
  const uint64_t offset = h->lane_offset;
  const int geometry_ok = h->record_size == sizeof(sp_record) && capacity >= 2 && (capacity & (capacity - 1)) == 0 &&
                          lanes >= 1 && lanes <= 65536 && offset >= sizeof(sp_ring_header) && offset % 64 == 0 &&
                          stride % 64 == 0 && stride >= sizeof(sp_lane_control) + capacity * sizeof(sp_record) &&
                          offset + lanes * stride <= size;
  if (!geometry_ok) {
    munmap(base, size);
    snprintf(line, sizeof line, "stallprof: the ring %s has an inconsistent header; not recording\n", path);
    return fail_attach(STALLPROF_ERR_ATTACH, line);
  }
  g_base = (uint8_t*)base;
  g_header = h;
  g_lane_count = (uint32_t)lanes;
  g_capacity = capacity;
  g_lane_offset = offset;
  g_lane_stride = stride;
  /* Older launchers leave these bytes 0 (ABI 1.0): CLOCK_MONOTONIC then. */
#if defined(__x86_64__) || defined(__i386__)
  g_use_tsc = h->abi_minor >= 1 && h->tsc_mult != 0;
#endif
  g_use_doorbell = h->abi_minor >= 2;
  g_count_laneless = h->abi_minor >= 3;
  g_attach_result = STALLPROF_OK;
  atomic_store_explicit(&g_attach, ATTACH_DONE, memory_order_release);
  return STALLPROF_OK;
}

/* Installed at load time, so a fork at any moment (even during an attach in
 * another thread) leaves the child in a consistent state. */
__attribute__((constructor)) static void install_hooks(void) {
  pthread_key_create(&g_release_key, on_thread_exit);
  pthread_atfork(NULL, NULL, on_fork_child);
}

STALLPROF_API int stallprof_attach(void) {
  for (;;) {
    int state = atomic_load_explicit(&g_attach, memory_order_acquire);
    if (state == ATTACH_DONE || state == ATTACH_OFF) return g_attach_result;
    int expected = ATTACH_NOT_TRIED;
    if (state == ATTACH_NOT_TRIED && atomic_compare_exchange_strong(&g_attach, &expected, ATTACH_BUSY)) {
      return do_attach();
    }
    /* Another thread is attaching (open + mmap, microseconds): let it finish,
     * so that no thread silently records nothing. */
    sched_yield();
  }
}

static inline int attached(void) {
  int state = atomic_load_explicit(&g_attach, memory_order_acquire);
  if (__builtin_expect(state == ATTACH_DONE, 1)) return 1;
  if (state == ATTACH_OFF) return 0;
  return stallprof_attach() == STALLPROF_OK;
}

STALLPROF_API int stallprof_enabled(void) { return attached(); }

STALLPROF_API uint64_t stallprof_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

STALLPROF_API uint32_t stallprof_name(const char* name) {
  if (name == NULL || !attached()) return 0;
  size_t length = strnlen(name, SP_MAX_NAME);
  const uint32_t hash = hash_bytes(name, length);
  for (uint32_t probe = 0; probe < NAME_SLOTS; ++probe) {
    const uint32_t index = (hash + probe) & (NAME_SLOTS - 1);
    name_slot* slot = &g_names[index];
    uint32_t state = atomic_load_explicit(&slot->state, memory_order_acquire);
    if (state == SLOT_EMPTY) {
      uint32_t expected = SLOT_EMPTY;
      if (atomic_compare_exchange_strong_explicit(&slot->state, &expected, SLOT_WRITING, memory_order_acq_rel,
                                                  memory_order_acquire)) {
        memcpy(slot->text, name, length);
        slot->text[length] = '\0';
        slot->length = (uint16_t)length;
        slot->hash = hash;
        atomic_store_explicit(&slot->state, SLOT_READY, memory_order_release);
        return index + 1;
      }
      state = expected;
    }
    /* A slot being written by another thread is skipped rather than waited
     * for: at worst one name gets two ids, which the consumer handles. */
    if (state == SLOT_READY && slot->hash == hash && slot->length == length && memcmp(slot->text, name, length) == 0) {
      return index + 1;
    }
  }
  return 0;
}

/* ---- lanes ---------------------------------------------------------------- */

/* 1: claimed; 0: skipped (backing off); -1: every lane was taken. */
static int claim_lane(thread_state* t) {
  if (t->claim_retry_at_ns != 0 && stallprof_now_ns() < t->claim_retry_at_ns) return 0;
  const uint32_t tid = (uint32_t)syscall(SYS_gettid);
  /* Before the CAS: a producer killed between its CAS and its generation bump
   * leaves the lane claimed for the rest of the run (the consumer cannot tell
   * it from a claim in progress), so the window holds no syscall. */
  const uint32_t pid = (uint32_t)getpid();
  for (uint32_t probe = 0; probe < g_lane_count; ++probe) {
    const uint32_t index = (tid + probe) % g_lane_count;
    sp_lane_control* lane = (sp_lane_control*)(g_base + g_lane_offset + (uint64_t)index * g_lane_stride);
    uint32_t expected = SP_LANE_FREE;
    if (atomic_load_explicit(&lane->state, memory_order_relaxed) != SP_LANE_FREE) continue;
    if (!atomic_compare_exchange_strong_explicit(&lane->state, &expected, SP_LANE_CLAIMED, memory_order_acq_rel,
                                                 memory_order_relaxed)) {
      continue;
    }
    lane->owner_pid = pid;
    lane->owner_tid = tid;
    lane->flags = atomic_load_explicit(&g_client_kind, memory_order_relaxed);
    atomic_fetch_add_explicit(&lane->generation, 1, memory_order_release);
    t->lane = lane;
    t->records = sp_lane_records(lane);
    t->head = atomic_load_explicit(&lane->head, memory_order_relaxed);
    t->cached_tail = atomic_load_explicit(&lane->tail, memory_order_acquire);
    t->doorbell_at = t->cached_tail + doorbell_fill();
    memset(t->announced, 0, sizeof t->announced);
    /* Non-NULL value so the destructor runs at thread exit. */
    pthread_setspecific(g_release_key, (void*)1);
    return 1;
  }
  /* Every lane is taken: retry in 1 ms, not on every call (a scan reads every
   * lane's control word: a few us, so under 1% of the thread's time). Lanes of
   * threads that ended without a release (a worker's os._exit) are only freed
   * when the launcher reclaims them, which it does at once when the doorbell
   * rings with laneless_dropped moved: a DataLoader worker that starts
   * while its predecessors' lanes hold the last ones loses a millisecond or
   * two of records, not its epoch. */
  t->claim_retry_at_ns = stallprof_now_ns() + 1000000;
  return -1;
}

static inline void count_drop(thread_state* t) {
  if (t->lane != NULL) {
    atomic_store_explicit(&t->lane->dropped, atomic_load_explicit(&t->lane->dropped, memory_order_relaxed) + 1,
                          memory_order_relaxed);
  }
  atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
}

/* Room for `n` more records? Reloads the consumer's tail only when needed. */
static inline int has_room(thread_state* t, uint64_t n) {
  if (t->head + n - t->cached_tail <= g_capacity) return 1;
  t->cached_tail = atomic_load_explicit(&t->lane->tail, memory_order_acquire);
  return t->head + n - t->cached_tail <= g_capacity;
}

static void ring_doorbell(void) {
  if (!g_use_doorbell) return;
  atomic_fetch_add_explicit(&g_header->doorbell, 1, memory_order_release);
  syscall(SYS_futex, (uint32_t*)&g_header->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* The lane looked a quarter full at the cached tail: if it really is, ring the
 * launcher's doorbell (a futex wake, about 1 us, at most once per eighth of a
 * lane while it stays over a quarter full), so a burst after an idle spell, when
 * the launcher polls only every 50 ms, is drained before the lane overflows. */
static void check_fill(thread_state* t) {
  t->cached_tail = atomic_load_explicit(&t->lane->tail, memory_order_acquire);
  if (t->head - t->cached_tail < doorbell_fill()) {
    t->doorbell_at = t->cached_tail + doorbell_fill();
    return;
  }
  t->doorbell_at = t->head + (g_capacity / 8 > 0 ? g_capacity / 8 : 1);
  ring_doorbell();
}

static inline int announced(const thread_state* t, uint32_t id) { return (t->announced[id >> 6] >> (id & 63)) & 1u; }

static uint64_t name_record_count(uint32_t id) {
  const uint64_t length = g_names[id - 1].length;
  return length <= SP_NAME_BYTES_PER_RECORD ? 1 : (length + SP_NAME_BYTES_PER_RECORD - 1) / SP_NAME_BYTES_PER_RECORD;
}

static void write_name(thread_state* t, uint32_t id) {
  const name_slot* slot = &g_names[id - 1];
  uint32_t offset = 0;
  int first = 1;
  do {
    sp_record r;
    memset(&r, 0, sizeof r);
    uint32_t take = slot->length - offset;
    if (take > SP_NAME_BYTES_PER_RECORD) take = SP_NAME_BYTES_PER_RECORD;
    memcpy(&r, slot->text + offset, take);
    r.name = id;
    r.kind = first ? SP_KIND_NAME : SP_KIND_NAME_PART;
    r.scope = first ? slot->length : (uint16_t)(offset / SP_NAME_BYTES_PER_RECORD);
    t->records[t->head & (g_capacity - 1)] = r;
    ++t->head;
    offset += take;
    first = 0;
  } while (offset < slot->length);
  t->announced[id >> 6] |= (uint64_t)1 << (id & 63);
}

/* Writes `r` (after the definitions of the names it uses), all or nothing. */
static inline __attribute__((always_inline)) void emit(const sp_record* r, uint32_t extra_name) {
  thread_state* const t = &t_state; /* one TLS lookup per record */
  if (__builtin_expect(t->lane == NULL, 0)) {
    const int claimed = claim_lane(t);
    if (claimed <= 0) {
      atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
      if (g_count_laneless) {
        atomic_fetch_add_explicit(&g_header->laneless_dropped, 1, memory_order_relaxed);
        if (claimed < 0) ring_doorbell(); /* the launcher reclaims dead lanes at once */
      }
      return;
    }
  }
  const uint32_t id = r->name;
  uint64_t needed = 1;
  const int need_name = !announced(t, id);
  const int need_extra = extra_name != 0 && extra_name != id && !announced(t, extra_name);
  if (__builtin_expect(need_name | need_extra, 0)) {
    if (need_name) needed += name_record_count(id);
    if (need_extra) needed += name_record_count(extra_name);
  }
  if (__builtin_expect(!has_room(t, needed), 0)) {
    count_drop(t);
    return;
  }
  if (__builtin_expect(need_name | need_extra, 0)) {
    if (need_name) write_name(t, id);
    if (need_extra) write_name(t, extra_name);
  }
  t->records[t->head & (g_capacity - 1)] = *r;
  ++t->head;
  atomic_store_explicit(&t->lane->head, t->head, memory_order_release);
  if (__builtin_expect(t->head >= t->doorbell_at, 0)) check_fill(t);
}

static inline int valid_name(uint32_t name) { return name != 0 && name <= NAME_SLOTS; }

/* ---- counter budget -------------------------------------------------------------
 * Thread CPU time, /proc/thread-self/schedstat and io, and getrusage cost a
 * syscall each (schedstat about 4.5 us on a VM): on a loader delivering
 * thousands of batches a second, reading them on every span slows the job by
 * 10% and more. So each thread may spend at most g_counter_share of its wall
 * time reading them: a read costing c ns makes the next one wait c / share ns.
 * Unused budget is kept for at most COUNTER_CREDIT_NS of wall time, so a thread
 * whose spans are all slow (each longer than its counters' cost / share) reads
 * them on every span, exactly, and a fast one reads them on a sample. */
#define COUNTER_CREDIT_NS 20000000ull /* 20 ms: at 0.5%, 100 us of reads in a burst */
#define MAX_COUNTER_CHARGE_NS 100000ull /* 20x what the reads of one span cost on a VM */

static inline int counters_due(const thread_state* t, uint64_t now) { return now >= t->counters_free_at_ns; }

/* Charges `cost_ns` of counter reads that ended at `now` to the thread's budget. */
static inline void charge_counters(thread_state* t, uint64_t now, uint64_t cost_ns) {
  if (g_counter_share >= 1) return;
  /* Reads that took longer were preempted (a busy machine): charging the
   * preemption would silence the counters for seconds. */
  if (cost_ns > MAX_COUNTER_CHARGE_NS) cost_ns = MAX_COUNTER_CHARGE_NS;
  uint64_t from = t->counters_free_at_ns;
  if (now > COUNTER_CREDIT_NS && from < now - COUNTER_CREDIT_NS) from = now - COUNTER_CREDIT_NS;
  t->counters_free_at_ns = from + (uint64_t)((double)cost_ns / g_counter_share);
}

/* The first span skipped tells the analysis that spans without CPU were
 * skipped by the budget, not unmeasurable (config "counter_share", once per
 * process tree; docs/analysis.md "Sampled counters"). */
static void note_skipped(void) {
  if (!atomic_load_explicit(&g_share_recorded, memory_order_relaxed) && !atomic_exchange(&g_share_recorded, 1))
    stallprof_config_f64(0, "counter_share", g_counter_share);
}

STALLPROF_API int stallprof_counters_due(void) {
  if (!attached()) return 0;
  if (g_counter_share >= 1 || counters_due(&t_state, stallprof_now_ns())) return 1;
  note_skipped();  /* the caller skips them now */
  return 0;
}

STALLPROF_API double stallprof_counter_share(void) { return attached() ? g_counter_share : 0; }

STALLPROF_API void stallprof_counter_budget_reset(void) { t_state.counters_free_at_ns = 0; }

/* ---- CPU time and run-queue delay ------------------------------------------ */

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Opens a per-thread /proc file into `*slot` (0 -> fd + 1, or -1 for good).
 * Also arms the thread-exit destructor, so the fd is closed even by a thread
 * that never got a lane. */
static void open_thread_file(int* slot, const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  *slot = fd < 0 ? -1 : fd + 1;
  if (fd >= 0) pthread_setspecific(g_release_key, (void*)1);
}

/* Run-queue delay of the calling thread (field 2 of schedstat). The CPU time in
 * field 1 is only updated at ticks and context switches, so CPU comes from
 * CLOCK_THREAD_CPUTIME_ID instead, which is exact. 0 when schedstat is missing. */
static uint64_t thread_delay_ns(thread_state* t) {
  if (t->schedstat_fd == 0) open_thread_file(&t->schedstat_fd, "/proc/thread-self/schedstat");
  if (t->schedstat_fd < 0) return 0;
  char buf[96];
  ssize_t n = pread(t->schedstat_fd - 1, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = buf;
  while (*p >= '0' && *p <= '9') ++p; /* field 1 */
  while (*p == ' ') ++p;
  uint64_t delay = 0;
  while (*p >= '0' && *p <= '9') delay = delay * 10 + (uint64_t)(*p++ - '0');
  return delay;
}

/* Value of the `key` line ("rchar: 123\n") in a NUL-terminated proc file. */
static int io_field(const char* text, const char* key, size_t key_length, uint64_t* out) {
  const char* p = text;
  for (;;) {
    if (strncmp(p, key, key_length) == 0) {
      p += key_length;
      while (*p == ' ') ++p;
      if (*p < '0' || *p > '9') return 0;
      uint64_t value = 0;
      while (*p >= '0' && *p <= '9') value = value * 10 + (uint64_t)(*p++ - '0');
      *out = value;
      return 1;
    }
    p = strchr(p, '\n');
    if (p == NULL) return 0;
    ++p;
  }
}

STALLPROF_API int stallprof_thread_io(uint64_t* rchar, uint64_t* read_bytes) {
  if (!attached()) return -1;
  thread_state* const t = &t_state;
  if (t->io_fd == 0) open_thread_file(&t->io_fd, "/proc/thread-self/io");
  if (t->io_fd < 0) return -1;
  const uint64_t t0 = stallprof_now_ns();
  /* 7 lines of at most ~45 bytes each today; room for a few more. */
  char buf[512];
  ssize_t n = pread(t->io_fd - 1, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  uint64_t r = 0, b = 0;
  if (!io_field(buf, "rchar:", 6, &r) || !io_field(buf, "read_bytes:", 11, &b)) return -1;
  const uint64_t t1 = stallprof_now_ns();
  charge_counters(t, t1, t1 - t0);
  if (rchar != NULL) *rchar = r;
  if (read_bytes != NULL) *read_bytes = b;
  return 0;
}

STALLPROF_API int stallprof_thread_system_ns(uint64_t* system_ns) {
  if (!attached()) return -1;
  const uint64_t t0 = stallprof_now_ns();
  struct rusage usage;
  if (getrusage(RUSAGE_THREAD, &usage) != 0) return -1;
  const uint64_t t1 = stallprof_now_ns();
  charge_counters(&t_state, t1, t1 - t0);
  if (system_ns != NULL)
    *system_ns = (uint64_t)usage.ru_stime.tv_sec * 1000000000u + (uint64_t)usage.ru_stime.tv_usec * 1000u;
  return 0;
}

/* ---- records ---------------------------------------------------------------- */

STALLPROF_API void stallprof_span_complete(uint32_t name, uint64_t start_ns, uint64_t duration_ns, uint64_t arg,
                                           uint16_t scope) {
  if (!attached() || !valid_name(name)) return;
  sp_record r = {.start_ns = start_ns, .duration_ns = duration_ns, .arg = arg, .name = name,
                 .kind = SP_KIND_SPAN, .scope = scope};
  emit(&r, 0);
}

/* Set in stallprof_span.flags (beside STALLPROF_SPAN_CPU) when start_ns holds
 * TSC ticks: the span's end is then read from the TSC too. */
#define SPAN_START_TSC 0x8000u

/* The span clock: TSC ticks when the ring has a calibration (one rdtsc, a few
 * ns, against ~25 ns for clock_gettime), else CLOCK_MONOTONIC ns. Spans begun
 * before the attach keep CLOCK_MONOTONIC to their end. */
static inline uint64_t span_clock(stallprof_span* span) {
  if (g_use_tsc) {
    span->flags |= SPAN_START_TSC;
    return sp_read_tsc();
  }
  return stallprof_now_ns();
}

STALLPROF_API void stallprof_span_begin(stallprof_span* span, uint32_t name, uint16_t scope, uint32_t flags) {
  if (span == NULL) return;
  span->name = name;
  span->scope = scope;
  span->flags = 0;
  span->cpu_ns = 0;
  span->delay_ns = 0;
  if ((flags & (STALLPROF_SPAN_CPU | STALLPROF_SPAN_CPU_ALWAYS)) && attached()) {
    /* The counter budget stays in CLOCK_MONOTONIC ns; these reads cost
     * microseconds anyway. */
    thread_state* const t = &t_state;
    const uint64_t before = stallprof_now_ns();
    if ((flags & STALLPROF_SPAN_CPU_ALWAYS) || g_counter_share >= 1 || counters_due(t, before)) {
      span->flags = STALLPROF_SPAN_CPU;
      span->delay_ns = thread_delay_ns(t);
      span->cpu_ns = thread_cpu_ns();
      const uint64_t after = stallprof_now_ns();
      charge_counters(t, after, after - before);
      span->start_ns = span_clock(span);
      return;
    }
    span->start_ns = span_clock(span);
    note_skipped();
    return;
  }
  span->start_ns = span_clock(span);
}

STALLPROF_API void stallprof_span_end(stallprof_span* span, uint64_t arg) {
  if (span == NULL) return;
  const int tsc = (span->flags & SPAN_START_TSC) != 0;
  const uint64_t end = tsc ? sp_read_tsc() : stallprof_now_ns();
  if (!attached() || !valid_name(span->name)) return;
  sp_record r = {.start_ns = span->start_ns, .duration_ns = end >= span->start_ns ? end - span->start_ns : 0,
                 .arg = arg, .name = span->name, .kind = SP_KIND_SPAN, .flags = tsc ? SP_SPAN_TSC : 0,
                 .scope = span->scope};
  if (span->flags & STALLPROF_SPAN_CPU) {
    thread_state* const t = &t_state;
    const uint64_t before = stallprof_now_ns();
    const uint64_t cpu = thread_cpu_ns();
    const uint64_t delay = thread_delay_ns(t);
    r.cpu_ns = cpu >= span->cpu_ns ? cpu - span->cpu_ns : 0;
    r.delay_ns = delay >= span->delay_ns ? delay - span->delay_ns : 0;
    r.flags |= SP_SPAN_HAS_CPU;
    const uint64_t after = stallprof_now_ns();
    charge_counters(t, after, after - before);
  }
  emit(&r, 0);
}

STALLPROF_API void stallprof_instant(uint32_t name, uint64_t arg, uint16_t scope) {
  if (!attached() || !valid_name(name)) return;
  sp_record r = {.start_ns = stallprof_now_ns(), .arg = arg, .name = name, .kind = SP_KIND_INSTANT, .scope = scope};
  emit(&r, 0);
}

STALLPROF_API void stallprof_counter(uint32_t name, uint64_t value) {
  if (!attached() || !valid_name(name)) return;
  sp_record r = {.start_ns = stallprof_now_ns(), .arg = value, .name = name, .kind = SP_KIND_COUNTER};
  emit(&r, 0);
}

static void config(uint16_t scope, const char* key, uint8_t kind, uint64_t value, uint32_t value_name) {
  if (!attached()) return;
  const uint32_t name = stallprof_name(key);
  if (!valid_name(name)) return;
  sp_record r = {.start_ns = stallprof_now_ns(), .arg = value, .name = name, .kind = kind, .scope = scope};
  emit(&r, value_name);
}

STALLPROF_API void stallprof_config_u64(uint16_t scope, const char* key, uint64_t value) {
  config(scope, key, SP_KIND_CONFIG_U64, value, 0);
}

STALLPROF_API void stallprof_config_f64(uint16_t scope, const char* key, double value) {
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  config(scope, key, SP_KIND_CONFIG_F64, bits, 0);
}

STALLPROF_API void stallprof_config_str(uint16_t scope, const char* key, const char* value) {
  if (!attached()) return;
  const uint32_t value_name = stallprof_name(value == NULL ? "" : value);
  if (!valid_name(value_name)) return;
  config(scope, key, SP_KIND_CONFIG_STR, value_name, value_name);
}

STALLPROF_API uint16_t stallprof_new_scope(void) {
  if (!attached()) return 0;
  uint32_t id = atomic_fetch_add_explicit(&g_header->next_loader_id, 1, memory_order_relaxed);
  return (uint16_t)(id == 0 ? atomic_fetch_add_explicit(&g_header->next_loader_id, 1, memory_order_relaxed) : id);
}

STALLPROF_API void stallprof_set_client_kind(uint32_t kind) {
  atomic_store_explicit(&g_client_kind, kind, memory_order_relaxed);
}

STALLPROF_API void stallprof_thread_release(void) {
  if (atomic_load_explicit(&g_attach, memory_order_acquire) != ATTACH_DONE) return;
  release_lane(&t_state);
}

STALLPROF_API uint64_t stallprof_dropped(void) { return atomic_load_explicit(&g_dropped, memory_order_relaxed); }
