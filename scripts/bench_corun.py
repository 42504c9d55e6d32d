#!/usr/bin/env python3
"""How fast one CPU runs a fixed loop while another CPU is busy, against the
same loop with the other CPU idle, second by second.

    /usr/bin/python3 scripts/bench_corun.py [seconds]   (default 12)

The model takes a machine's cores as full cores: a thread on one runs as fast
whether the others are busy or idle. A VM's vCPUs need not be: two vCPUs that
are hyperthreads of one physical core, or that share it with other tenants,
slow each other down. Prints, per second, the median time of a 200 000-step
Python loop on CPU 0 divided by its fastest time with CPU 1 idle (measured
first), for a phase with CPU 1 idle and a phase with a busy loop pinned to
CPU 1. A ratio above 1 with CPU 1 busy is what the model does not see.
Needs 2 CPUs usable by this process; exits 77 otherwise.
"""
import os
import statistics
import subprocess
import sys
import time


def loop_ms(steps=200_000):
    start = time.monotonic()
    x = 0
    for i in range(steps):
        x += i
    return (time.monotonic() - start) * 1e3


def phase(seconds, base_ms):
    samples = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        samples.append((time.monotonic() - start, loop_ms() / base_ms))
    return [statistics.median(r for t, r in samples if s <= t < s + 1) for s in range(int(seconds))]


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        print("SKIP: needs 2 CPUs usable by this process")
        return 77
    os.sched_setaffinity(0, {cpus[0]})
    base = min(loop_ms() for _ in range(20))
    print(f"loop alone on CPU {cpus[0]}: {base:.2f} ms at its fastest; load average {open('/proc/loadavg').read().split()[0]}")
    idle = phase(seconds, base)
    busy_loop = subprocess.Popen(["taskset", "-c", str(cpus[1]), sys.executable, "-c", "while True: pass"])
    try:
        busy = phase(seconds, base)
    finally:
        busy_loop.kill()
        busy_loop.wait()
    print(f"{'second':>6} {'CPU ' + str(cpus[1]) + ' idle':>12} {'CPU ' + str(cpus[1]) + ' busy':>12}")
    for s, (a, b) in enumerate(zip(idle, busy)):
        print(f"{s:>6} {a:>12.2f} {b:>12.2f}")
    print(f"median slowdown: {statistics.median(idle):.2f}x with CPU {cpus[1]} idle, "
          f"{statistics.median(busy):.2f}x with it busy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
