#!/usr/bin/env bash
# Ring and client benchmark: prints figures, asserts nothing.
#   scripts/bench_ring.sh [build-dir]
# C (bench/bench_ring, Google Benchmark, ${REPS:-5} repetitions): ns per span
# alone and with 1 and 2 threads while a consumer drains, drain throughput;
# each figure is the median over the repetitions with their range. The raw
# JSON (--benchmark_format=json) is kept in ${BENCH_JSON:-/tmp/bench_ring.json}.
# The span clock side by side: clock_gettime(CLOCK_MONOTONIC) against rdtsc,
# and the full C span (begin + end, no CPU counters) with the ring's TSC
# calibration (as under `stallprof run` on an invariant-TSC CPU) and without
# (STALLPROF_BENCH_CLOCK=monotonic, a second pass of those benchmarks only).
# Python (under `stallprof run`): ns per span through the C extension and
# through the ctypes fallback, `with stallprof.stage()`, the cost of one
# thread_io() (the hook calls it twice per sampled fetch), and the cost the
# DataLoader hook adds per next() (median of paired traced - bare rounds).
set -euo pipefail
BUILD=${1:-build}
BUILD=$(cd "$BUILD" && pwd)
PY=/usr/bin/python3
for tool in bench/bench_ring stallprof trace_check; do
  [ -x "$BUILD/$tool" ] || { echo "bench_ring: $BUILD/$tool missing, build first (cmake --build $BUILD; bench_ring needs libbenchmark-dev)" >&2; exit 1; }
done
echo "== C client and drain ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
BENCH_JSON=${BENCH_JSON:-/tmp/bench_ring.json}
"$BUILD/bench/bench_ring" --benchmark_repetitions="${REPS:-5}" --benchmark_format=json --benchmark_out="$BENCH_JSON" \
  --benchmark_out_format=json >/dev/null
BENCH_JSON_MONO=${BENCH_JSON%.json}.monotonic.json
STALLPROF_BENCH_CLOCK=monotonic "$BUILD/bench/bench_ring" --benchmark_repetitions="${REPS:-5}" \
  --benchmark_filter='span_begin_end_wall' --benchmark_format=json --benchmark_out="$BENCH_JSON_MONO" \
  --benchmark_out_format=json >/dev/null
"$PY" - "$BENCH_JSON" "$BENCH_JSON_MONO" <<'PY'
import json, statistics, sys
doc = json.load(open(sys.argv[1]))
mono_doc = json.load(open(sys.argv[2]))
def by_name(d):
    out = {}  # run_name -> the repetitions (aggregates are recomputed here, with the range)
    for b in d["benchmarks"]:
        if b.get("run_type") == "iteration":
            out.setdefault(b["run_name"], []).append(b)
    return out
runs, mono_runs = by_name(doc), by_name(mono_doc)
UNIT_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
def ns(name, runs=runs):
    """ns per iteration and per thread: with N threads Google Benchmark divides
    the wall time by the iterations of all threads, so multiply back."""
    reps = runs[name]
    return [b["real_time"] * UNIT_NS[b["time_unit"]] * b.get("threads", 1) for b in reps]
def fig(values, fmt="%.1f"):
    return (fmt + " (%s-%s over %d)") % (statistics.median(values), fmt % min(values), fmt % max(values), len(values))
def dropped(name):
    return int(sum(b.get("dropped", 0) for b in runs[name]))
reps = len(runs["BM_ClockRead"])
print("lane capacity %s records, median over %d repetitions (range)" % (doc["context"].get("lane_capacity", "?"), reps))
def cpu_ns(name, runs=runs):
    """CPU ns per iteration: on a loaded machine the wall figure also counts the
    time another process held the core; single-threaded loops only."""
    return [b["cpu_time"] * UNIT_NS[b["time_unit"]] for b in runs[name]]
med = lambda v: statistics.median(v)
def both(name, runs=runs):
    return "%s ns wall, %.1f ns CPU" % (fig(ns(name, runs)), med(cpu_ns(name, runs)))
print("clock: stallprof_now_ns() (clock_gettime MONOTONIC): %s /call" % both("BM_ClockRead"))
print("clock: rdtsc                                       : %s /call" % both("BM_TscRead"))
print("clock read, rdtsc / clock_gettime: %.2f wall, %.2f CPU" % (med(ns("BM_TscRead")) / med(ns("BM_ClockRead")),
      med(cpu_ns("BM_TscRead")) / med(cpu_ns("BM_ClockRead"))))
tsc_clock = doc["context"].get("span_clock", "?")
print("C span begin+end (wall, no CPU counters), alone on a warm lane, target <= 12 ns:")
alone = "BM_SpanAlone/span_begin_end_wall"
print("  ring clock %-9s: %s /span" % (mono_doc["context"].get("span_clock", "?"), both(alone, mono_runs)))
print("  ring clock %-9s: %s /span" % (tsc_clock, both(alone)))
print("  %s / monotonic: %.2f wall, %.2f CPU" % (tsc_clock, med(ns(alone)) / med(ns(alone, mono_runs)),
      med(cpu_ns(alone)) / med(cpu_ns(alone, mono_runs))))
print("  the span without its clock reads (span_complete, given times): %s" % both("BM_SpanAlone/span_complete_given_times"))
for threads in (1, 2):
    name = "BM_SpanDrained/span_begin_end_wall/real_time/threads:%d" % threads
    print("C span begin+end (wall) drained, %d thread%s: monotonic %s, %s %s ns/span per thread"
          % (threads, " " if threads == 1 else "s", fig(ns(name, mono_runs)), tsc_clock, fig(ns(name))))
print("C span, producer alone (warm lane, no concurrent drain): now_ns() + span_complete %s ns, span_complete %s ns"
      % (fig(ns("BM_SpanAlone/now_ns_and_span_complete")), fig(ns("BM_SpanAlone/span_complete_given_times"))))
for threads in (1, 2):
    for label, what in (("span_complete_now_ns", "span_complete(now_ns(), ...)"),
                        ("span_complete_given_times", "span_complete(given times)"),
                        ("span_begin_end_wall", "span_begin/span_end (wall, %s)" % tsc_clock)):
        name = "BM_SpanDrained/%s/real_time/threads:%d" % (label, threads)
        print("C span %-30s %d thread%s: %s ns/span per thread (dropped %d)"
              % (what, threads, " " if threads == 1 else "s", fig(ns(name)), dropped(name)))
name = next(n for n in runs if n.startswith("BM_DrainFullLanes"))
rates = [b["items_per_second"] / 1e6 for b in runs[name]]
print("drain: %s M spans/s on one core (4 full lanes a round, dropped %d)" % (fig(rates), dropped(name)))
PY

cat > /tmp/stallprof_bench_py.$$.py <<'PY'
import sys, time
import stallprof
from stallprof import _backend
ext = _backend.ext
N = 200_000
wid = ext.name("bench.py")
now, span_since, Span, thread_io = ext.now, ext.span_since, ext.Span, ext.thread_io

def best(fn, rounds=5):
    return min(fn() for _ in range(rounds))

def loop_empty():
    t = time.perf_counter_ns()
    for i in range(N):
        pass
    return (time.perf_counter_ns() - t) / N

def loop_span_since():
    t = time.perf_counter_ns()
    for i in range(N):
        span_since(wid, now(), i, 1)
    return (time.perf_counter_ns() - t) / N

def loop_with_span():
    t = time.perf_counter_ns()
    for i in range(N):
        with Span(wid, 1):
            pass
    return (time.perf_counter_ns() - t) / N

def loop_stage():
    t = time.perf_counter_ns()
    for i in range(N):
        with stallprof.stage("bench.stage"):
            pass
    return (time.perf_counter_ns() - t) / N

def loop_thread_io():
    t = time.perf_counter_ns()
    for i in range(N):
        thread_io()
    return (time.perf_counter_ns() - t) / N

empty = best(loop_empty)
print("Python %-6s span_since(name, now(), arg, scope): %6.0f ns/span" % (stallprof.client_kind(), best(loop_span_since) - empty))
print("Python %-6s with Span(name, scope):             %6.0f ns/span" % (stallprof.client_kind(), best(loop_with_span) - empty))
print("Python %-6s with stallprof.stage(name) (+CPU):  %6.0f ns/span" % (stallprof.client_kind(), best(loop_stage) - empty))
if thread_io() is None:
    print("Python %-6s thread_io(): unavailable (no /proc/thread-self/io)" % stallprof.client_kind())
else:
    print("Python %-6s thread_io() (/proc/thread-self/io): %6.0f ns/call" % (stallprof.client_kind(), best(loop_thread_io) - empty))

print("dropped by this process: %d" % ext.dropped())
PY
# Recorded by the real `stallprof run` (a ring large enough that nothing drops);
# trace_check then says how many records reached the trace and how many dropped.
TRACE=/tmp/stallprof_bench_py.$$.pb
summary() { "$BUILD/trace_check" "$TRACE" | grep -E '^(spans|thread_dropped|footer_dropped|invalid)=' | paste -sd' '; }
echo "== Python (extension)"
"$BUILD/stallprof" run -q --no-handoff-timing --ring-size 256M --lanes 8 -o "$TRACE" -- "$PY" /tmp/stallprof_bench_py.$$.py
echo "trace: $(summary)"
echo "== Python (ctypes fallback)"
STALLPROF_FORCE_CTYPES=1 "$BUILD/stallprof" run -q --no-handoff-timing --ring-size 256M --lanes 8 -o "$TRACE" -- "$PY" /tmp/stallprof_bench_py.$$.py
echo "trace: $(summary)"
rm -f "$TRACE"
# The hook's cost per next(): a num_workers=0 loader of trivial samples (wait,
# fetch, getitem and collate spans, counters within the budget), traced and
# bare alternated for ${NEXT_ROUNDS:-5} rounds; each run's figure is its fastest
# of 3 epochs of 20000 batches. batch_size=None skips collation, batch_size=1
# is fast_loader.py's shape (bench_overhead.sh fast).
# Wall time and the loop thread's CPU time per batch: on a busy machine the
# CPU time is the steadier figure (the drain of `stallprof run` competes for
# the same cores, which the traced run's wall time pays for too).
cat > /tmp/stallprof_bench_next.$$.py <<'PY'
import time
from torch.utils.data import DataLoader
def per_batch(batch_size, clock):
    loader = DataLoader(list(range(20000)), batch_size=batch_size, num_workers=0)
    def epoch():
        t = clock(); n = 0
        for _ in loader:
            n += 1
        return (clock() - t) / n
    return min(epoch() for _ in range(3))
print(" ".join("%.0f" % per_batch(b, c) for c in (time.perf_counter_ns, time.thread_time_ns) for b in (None, 1)))
PY
echo "== DataLoader next() per batch, traced and bare alternated (load before: $(cut -d' ' -f1 /proc/loadavg))"
: > /tmp/stallprof_bench_next.$$.traced
: > /tmp/stallprof_bench_next.$$.bare
for _ in $(seq "${NEXT_ROUNDS:-5}"); do
  "$BUILD/stallprof" run -q --no-handoff-timing --ring-size 256M --lanes 8 -o "$TRACE" -- "$PY" /tmp/stallprof_bench_next.$$.py \
    >> /tmp/stallprof_bench_next.$$.traced
  "$PY" /tmp/stallprof_bench_next.$$.py >> /tmp/stallprof_bench_next.$$.bare
done
"$PY" - /tmp/stallprof_bench_next.$$.traced /tmp/stallprof_bench_next.$$.bare <<'PY'
import statistics, sys
traced, bare = ([list(map(float, l.split())) for l in open(f)] for f in sys.argv[1:3])
def fig(values):
    return "%6.0f ns (%.0f-%.0f)" % (statistics.median(values), min(values), max(values))
for column, label in ((0, "batch_size=None, wall      "), (1, "batch_size=1,    wall      "),
                      (2, "batch_size=None, thread CPU"), (3, "batch_size=1,    thread CPU")):
    t, b = [r[column] for r in traced], [r[column] for r in bare]
    added = [x - y for x, y in zip(t, b)]
    print("DataLoader next() %s: traced %s, bare %s, added (paired) %s over %d rounds"
          % (label, fig(t), fig(b), fig(added), len(t)))
PY
echo "load after: $(cut -d' ' -f1 /proc/loadavg)"
rm -f /tmp/stallprof_bench_next.$$.*
rm -f /tmp/stallprof_bench_py.$$.py "$TRACE"
