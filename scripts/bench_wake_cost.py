#!/usr/bin/env python3
"""What a training step costs when its thread waits between batches.

A small CPU training step (an MLP of 32-64-10 features, batch 64, one
intra-op thread: the TensorDataset MLP of docs/validation.md) timed by its
thread's CPU clock:

1. In a DataLoader loop with 0 and with 2 workers, the step run on a heap
   copy of each batch (so that the same work is timed in both: no shared
   memory in it), and apart from it the copy out of the received batch and
   freeing it. With workers the main thread waits in next() for every
   batch; without them it fetches and steps back to back.
2. The same step alone in a loop, pinned to CPU 0: back to back, and with a
   0.3 ms sleep after each step, beside nothing, beside a busy process on
   the other CPU (Python; a matrix product; a memory-bound loop), and beside
   a process on the same CPU that wakes while the step's thread sleeps.

Prints the medians (us of CPU per step) and their ratios to the step back to
back. Asserts nothing. Usage: /usr/bin/python3 scripts/bench_wake_cost.py
"""
import os
import subprocess
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
CLOCK = time.thread_time_ns


def median_us(values):
    values = sorted(values)
    return values[len(values) // 2] / 1e3


def make_step():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(xb, yb):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()

    return step


def in_loader(workers, epochs=4):
    x = torch.randn(20000, 32)
    y = torch.randint(0, 10, (20000,))
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, num_workers=workers,
                        persistent_workers=workers > 0)
    step = make_step()
    copy, free, work = [], [], []
    for epoch in range(epochs):
        for xb, yb in loader:
            t0 = CLOCK()
            xc, yc = xb.clone(), yb.clone()
            t1 = CLOCK()
            del xb, yb
            t2 = CLOCK()
            step(xc, yc)
            t3 = CLOCK()
            if epoch > 0:  # the first epoch warms up
                copy.append(t1 - t0)
                free.append(t2 - t1)
                work.append(t3 - t2)
    return median_us(work), median_us(copy), median_us(free)


def alone(steps, sleep_s):
    step = make_step()
    xb, yb = torch.randn(64, 32), torch.randint(0, 10, (64,))
    times = []
    for _ in range(steps):
        t0 = CLOCK()
        step(xb, yb)
        times.append(CLOCK() - t0)
        if sleep_s:
            time.sleep(sleep_s)
    return median_us(times)


NEIGHBOURS = [
    ("nothing else", None),
    ("a Python loop on CPU 1", "import os; os.sched_setaffinity(0, {1})\nx = 0\nwhile True: x += 1"),
    ("a matrix product on CPU 1", "import os, torch; os.sched_setaffinity(0, {1}); torch.set_num_threads(1)\n"
                                  "a = torch.randn(256, 256)\nwhile True: a @ a"),
    ("a memory-bound loop on CPU 1", "import os, torch; os.sched_setaffinity(0, {1})\n"
                                     "a = torch.zeros(8 << 20, dtype=torch.uint8)\nwhile True: a.add_(1)"),
    ("a process on CPU 0 waking every 0.3 ms", "import os, time, torch; os.sched_setaffinity(0, {0})\n"
                                               "a = torch.zeros(2 << 20, dtype=torch.uint8)\n"
                                               "while True:\n a.add_(1); time.sleep(0.0003)"),
]


def main():
    if len(os.sched_getaffinity(0)) < 2:
        print("skipped: needs 2 CPUs (the loader part runs 2 workers, the neighbours use CPU 1)")
        return
    print("1. the step in a DataLoader loop (us of the main thread's CPU per batch, medians of epochs 2-4)")
    for round_ in range(2):
        for workers in (0, 2):
            work, copy, free = in_loader(workers)
            print(f"   round {round_ + 1}, num_workers={workers}: step on a heap copy {work:.0f} us; copying the "
                  f"received batch out {copy:.0f} us, freeing it {free:.0f} us", flush=True)
    print("2. the same step alone in a loop on CPU 0 (us of CPU per step, medians)")
    os.sched_setaffinity(0, {0})
    for round_ in range(2):
        for name, code in NEIGHBOURS:
            neighbour = subprocess.Popen([sys.executable, "-c", code]) if code else None
            try:
                if neighbour:
                    time.sleep(1.0)
                busy = alone(1500, 0)
                waking = alone(800, 0.0003)
            finally:
                if neighbour:
                    neighbour.kill()
                    neighbour.wait()
            print(f"   round {round_ + 1}, beside {name}: back to back {busy:.0f} us; sleeping 0.3 ms after each "
                  f"{waking:.0f} us ({waking / busy:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
