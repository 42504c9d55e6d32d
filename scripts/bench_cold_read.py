#!/usr/bin/python3
"""CPU a Python file read costs cold (from storage) and warm (page cache).

  bench_cold_read.py DIR COUNT LABEL [--torch] [--resident MIB] [--burn]

Reads COUNT of the files in DIR (shuffled, each in 1 MiB calls, as a dataset's
__getitem__ does) and prints the thread CPU per file (precise:
clock_gettime(CLOCK_THREAD_CPUTIME_ID)), the system and user time getrusage
splits it into (tick-sampled), and page faults. --torch imports torch and
--resident holds MIB more of memory, as a training process does: in a memory
cgroup they leave the page cache less room, and reclaim costs each miss more.
--burn runs a fixed pure-Python loop after each read and prints its CPU
(median): the cost user code pays after a cold read (caches the kernel's miss
work left cold), which lands in user time. Run by scripts/bench_cold_read.sh.
"""
import argparse
import os
import random
import resource
import statistics
import time


def burn():
    total = 0
    for i in range(20000):
        total += i * i
    return total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("count", type=int)
    p.add_argument("label")
    p.add_argument("--torch", action="store_true")
    p.add_argument("--resident", type=int, default=0)
    p.add_argument("--burn", action="store_true")
    a = p.parse_args()
    if a.torch:
        import torch
        held = torch.ones(a.resident << 18)  # noqa: F841 (MiB of floats, resident)
    elif a.resident:
        held = bytearray(a.resident << 20)  # noqa: F841
    files = sorted(os.listdir(a.dir))
    random.Random(1).shuffle(files)
    files = [os.path.join(a.dir, f) for f in files[: a.count]]
    reads, burns = 0.0, []
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    for path in files:
        t0 = time.thread_time()
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass
        t1 = time.thread_time()
        reads += t1 - t0
        if a.burn:
            burn()
            burns.append(time.thread_time() - t1)
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    n = len(files)
    line = (f"{a.label:<5} {'torch' if a.torch else 'plain':<5} +{a.resident:>3} MiB: read {reads / n * 1e6:6.0f} us CPU a file")
    if not a.burn:  # with the loop the tick split is the loop's, not the reads'
        line += (f" (getrusage: system {(r1.ru_stime - r0.ru_stime) / n * 1e6:4.0f}, user "
                 f"{(r1.ru_utime - r0.ru_utime) / n * 1e6:4.0f})")
    line += f", {(r1.ru_minflt - r0.ru_minflt) / n:.1f} minor / {r1.ru_majflt - r0.ru_majflt} major faults"
    if burns:
        line += f"; Python loop after the read {statistics.median(burns) * 1e6:.0f} us (median)"
    print(line, flush=True)


if __name__ == "__main__":
    main()
