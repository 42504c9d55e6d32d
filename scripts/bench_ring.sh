#!/usr/bin/env bash
# Ring and client benchmark: prints figures, asserts nothing.
#   scripts/bench_ring.sh [build-dir]
# C: ns per span (1 and 2 threads), drain throughput (bench/bench_ring).
# Python (under `stallprof run`): ns per span through the C extension and
# through the ctypes fallback, the cost of one thread_io() (the hook calls it
# twice per fetch), and the cost the DataLoader hook adds per next() (wait span).
set -euo pipefail
BUILD=${1:-build}
BUILD=$(cd "$BUILD" && pwd)
PY=/usr/bin/python3
for tool in bench/bench_ring stallprof trace_check; do
  [ -x "$BUILD/$tool" ] || { echo "bench_ring: $BUILD/$tool missing, build first (cmake --build $BUILD)" >&2; exit 1; }
done
echo "== C client and drain ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
"$BUILD/bench/bench_ring" "${SPANS:-5000000}"

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

if "--dataloader" in sys.argv:
    import torch
    from torch.utils.data import DataLoader
    data = list(range(20000))
    loader = DataLoader(data, batch_size=None, num_workers=0)  # no collate/batching: next() is nearly free
    def loop_next():
        t = time.perf_counter_ns()
        n = 0
        for x in loader:
            n += 1
        return (time.perf_counter_ns() - t) / n
    print("DataLoader next() (num_workers=0, per sample incl. fetch/getitem/collate spans): %6.0f ns" % best(loop_next, 3))
print("dropped by this process: %d" % ext.dropped())
PY
# Recorded by the real `stallprof run` (a ring large enough that nothing drops);
# trace_check then says how many records reached the trace and how many dropped.
TRACE=/tmp/stallprof_bench_py.$$.pb
summary() { "$BUILD/trace_check" "$TRACE" | grep -E '^(spans|thread_dropped|footer_dropped|invalid)=' | paste -sd' '; }
echo "== Python (extension)"
"$BUILD/stallprof" run -q --ring-size 256M --lanes 8 -o "$TRACE" -- "$PY" /tmp/stallprof_bench_py.$$.py --dataloader
echo "trace: $(summary)"
echo "== Python (ctypes fallback)"
STALLPROF_FORCE_CTYPES=1 "$BUILD/stallprof" run -q --ring-size 256M --lanes 8 -o "$TRACE" -- "$PY" /tmp/stallprof_bench_py.$$.py
echo "trace: $(summary)"
rm -f "$TRACE"
echo "== DataLoader next() without stallprof, for comparison"
"$PY" - <<'PY'
import time
from torch.utils.data import DataLoader
loader = DataLoader(list(range(20000)), batch_size=None, num_workers=0)
def loop_next():
    t = time.perf_counter_ns(); n = 0
    for x in loader:
        n += 1
    return (time.perf_counter_ns() - t) / n
print("DataLoader next() (num_workers=0, per sample, bare): %6.0f ns" % min(loop_next() for _ in range(3)))
PY
rm -f /tmp/stallprof_bench_py.$$.py "$TRACE"
