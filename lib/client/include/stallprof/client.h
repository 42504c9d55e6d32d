/*
 * libstallprof_client.so: the C ABI an instrumented process calls to record
 * spans into the shared-memory ring of `stallprof run` (C11 and C++).
 *
 * Every call is safe at any time: when STALLPROF_RING is unset, or the ring
 * cannot be attached, calls are cheap no-ops. Producers never block, allocate,
 * throw or abort; a full lane drops the record and counts it. Each thread
 * claims its own lane on first use and releases it when it exits. A forked
 * child claims fresh lanes of its own.
 */
#ifndef STALLPROF_CLIENT_H
#define STALLPROF_CLIENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(STALLPROF_CLIENT_BUILD)
#define STALLPROF_API __attribute__((visibility("default")))
#else
#define STALLPROF_API
#endif

/* Results of stallprof_attach. */
#define STALLPROF_OK 0
#define STALLPROF_DISABLED 1        /* STALLPROF_RING unset: nothing is recorded */
#define STALLPROF_ERR_VERSION 2     /* the ring has another ABI major: not recording */
#define STALLPROF_ERR_ATTACH 3      /* the ring could not be opened/mapped/validated: not recording */

/* Span flags for stallprof_span_begin. */
#define STALLPROF_SPAN_WALL 0u
/* Also measure thread CPU time and run-queue delay, when the thread's counter
 * budget allows: every span of a thread whose spans are slow, a sample of the
 * spans of a fast one (see stallprof_counters_due). */
#define STALLPROF_SPAN_CPU 1u
/* Measure them on this span whatever the budget (the caller decided, e.g. with
 * stallprof_counters_due); the cost is still charged to the budget. */
#define STALLPROF_SPAN_CPU_ALWAYS 2u

/* Default share of a thread's wall time its counter reads may cost
 * (STALLPROF_COUNTER_SHARE overrides it; 1 reads them on every span). 0.5%
 * keeps the hook's cost under the run-to-run noise of a training job. */
#define STALLPROF_DEFAULT_COUNTER_SHARE 0.005

/* Client kinds for stallprof_set_client_kind (= SP_LANE_FLAG_*). */
#define STALLPROF_CLIENT_C 0u
#define STALLPROF_CLIENT_PYTHON_CEXT 1u
#define STALLPROF_CLIENT_PYTHON_CTYPES 2u

/* An open span (caller-owned storage, e.g. on the stack). Its fields are the
 * client's own: start_ns holds TSC ticks, not ns, when the run calibrated the
 * TSC (the recorded span is in CLOCK_MONOTONIC ns all the same). */
typedef struct stallprof_span {
  uint64_t start_ns;
  uint64_t cpu_ns;   /* thread CPU time at begin (STALLPROF_SPAN_CPU) */
  uint64_t delay_ns; /* run-queue delay at begin (STALLPROF_SPAN_CPU) */
  uint32_t name;
  uint16_t scope;
  uint16_t flags;    /* STALLPROF_SPAN_CPU after begin: the counters are being measured */
} stallprof_span;

/* Attaches to the ring named by STALLPROF_RING. Idempotent; every other call
 * attaches lazily. Returns STALLPROF_OK, or why nothing will be recorded
 * (STALLPROF_ERR_* print one line to stderr, once per process). */
STALLPROF_API int stallprof_attach(void);
/* 1 when attached and recording, 0 otherwise (attaches lazily). */
STALLPROF_API int stallprof_enabled(void);
/* Process-wide id of `name` (truncated to 255 bytes). 0 when not attached,
 * when `name` is NULL, or when the name table (4096 names) is full; records
 * with name 0 are ignored. */
STALLPROF_API uint32_t stallprof_name(const char* name);
/* CLOCK_MONOTONIC in nanoseconds (the ring's clock: every time passed in or
 * recorded is in it; spans timed by begin/end may be read from the TSC and
 * are converted to it by `stallprof run`). */
STALLPROF_API uint64_t stallprof_now_ns(void);
/* Records a finished span. Dropped (and counted) when the lane is full. */
STALLPROF_API void stallprof_span_complete(uint32_t name, uint64_t start_ns, uint64_t duration_ns, uint64_t arg,
                                           uint16_t scope);
/* Starts a span in `span`; STALLPROF_SPAN_CPU also samples thread CPU time and
 * run-queue delay. */
STALLPROF_API void stallprof_span_begin(stallprof_span* span, uint32_t name, uint16_t scope, uint32_t flags);
/* Ends and records a span started by stallprof_span_begin. */
STALLPROF_API void stallprof_span_end(stallprof_span* span, uint64_t arg);
/* Records a point event now. */
STALLPROF_API void stallprof_instant(uint32_t name, uint64_t arg, uint16_t scope);
/* Records a counter sample now. */
STALLPROF_API void stallprof_counter(uint32_t name, uint64_t value);
/* Records configuration key = value for `scope` (a loader id, 0 = process). */
STALLPROF_API void stallprof_config_u64(uint16_t scope, const char* key, uint64_t value);
STALLPROF_API void stallprof_config_f64(uint16_t scope, const char* key, double value);
STALLPROF_API void stallprof_config_str(uint16_t scope, const char* key, const char* value);
/* A new scope (loader) id, unique across all processes of the run, from 1.
 * 0 when not attached. */
STALLPROF_API uint16_t stallprof_new_scope(void);
/* Says how this process reaches the client (STALLPROF_CLIENT_*); recorded in
 * the flags of lanes claimed afterwards. */
STALLPROF_API void stallprof_set_client_kind(uint32_t kind);
/* Releases the calling thread's lane now (it is claimed again on next use). */
STALLPROF_API void stallprof_thread_release(void);
/* The calling thread's I/O counters from /proc/thread-self/io: `rchar` (bytes
 * through read syscalls, page-cache hits included) and `read_bytes` (bytes
 * fetched from the storage device). Returns 0 and sets both, or -1 (outputs
 * untouched) when not attached or when the file is missing, unreadable or
 * malformed. The file stays open per thread; never blocks or allocates. Its
 * cost is charged to the thread's counter budget. */
STALLPROF_API int stallprof_thread_io(uint64_t* rchar, uint64_t* read_bytes);
/* The calling thread's system (kernel) CPU time in ns, from
 * getrusage(RUSAGE_THREAD): the total is exact, its split from user time
 * follows the scheduler ticks. Returns 0 and sets it, or -1 (output untouched)
 * when not attached or unavailable. One syscall, charged to the counter
 * budget; never blocks or allocates. */
STALLPROF_API int stallprof_thread_system_ns(uint64_t* system_ns);
/* 1 when the calling thread's counter budget allows reading the expensive
 * counters (thread CPU, schedstat, /proc io, getrusage) now, 0 otherwise or
 * when not attached. Reads CLOCK_MONOTONIC only; charges nothing. A caller
 * told 0 must skip them (the trace then says spans were sampled). */
STALLPROF_API int stallprof_counters_due(void);
/* The share of its wall time a thread may spend reading counters (from
 * STALLPROF_COUNTER_SHARE at attach, recorded as config "counter_share" of
 * scope 0); 0 when not attached. */
STALLPROF_API double stallprof_counter_share(void);
/* Forgets the calling thread's spent budget (after a deliberate burst of
 * reads, such as the hook timing itself at start). */
STALLPROF_API void stallprof_counter_budget_reset(void);
/* Records this process dropped since it attached (full lanes, no free lane). */
STALLPROF_API uint64_t stallprof_dropped(void);

#ifdef __cplusplus
}
#endif
#endif /* STALLPROF_CLIENT_H */
