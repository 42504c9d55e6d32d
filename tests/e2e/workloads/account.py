#!/usr/bin/python3
"""Workloads with set costs for the account's attribution tests
(tests/e2e/test_analyze_account.sh). Never imports stallprof.

  sleep     __getitem__ sleeps --sleep-ms (no device reads), 2 fork workers
  files     __getitem__ reads 64 random 4 KiB blocks of one file per sample
            (--dir; readahead off, so each is a device round trip when the
            caller dropped the page cache first: far more time waiting on the
            device than on CPU); num_workers 0
  spawn     2 spawn workers, short epochs of cheap items (start-up dominates)
  forkserver  the same with forkserver workers (forked by a server process the
              hook must reach too)
  trivial   tensor items already in memory, batch 1, a tiny step; num_workers 0
  laststep  16 items, batch 8, a --step-ms busy step; num_workers 0

Its last line is ACCOUNT {json}: the wall time it measured itself around all
its epochs (wall_s), and its set costs.
"""
import argparse
import json
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset


def busy(seconds, clock=time.perf_counter):
    end = clock() + seconds
    while clock() < end:
        pass


class Sleepy(Dataset):
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return torch.zeros(4)


class Files(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        fd = os.open(self.paths[i], os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            got = 0
            block = 4096
            for k in range(64):
                offset = (k * 2654435761 + i * 40503) % (size // block) * block
                got += len(os.pread(fd, block, offset))
        finally:
            os.close(fd)
        return torch.tensor(got)


class InMemory(Dataset):
    def __init__(self, n):
        self.items = [torch.full((4,), float(i)) for i in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["sleep", "files", "spawn", "forkserver", "trivial", "laststep"])
    p.add_argument("--sleep-ms", type=float, default=20)
    p.add_argument("--step-ms", type=float, default=0, help="a busy step of this much wall time")
    p.add_argument("--cpu-step-ms", type=float, default=0,
                   help="a busy step of this much thread CPU time (stretches with the run queue, as the loader's own code does)")
    p.add_argument("--items", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    torch.set_num_threads(1)

    if args.mode == "sleep":
        loader = DataLoader(Sleepy(args.items or 60, args.sleep_ms / 1000), batch_size=1, num_workers=2)
    elif args.mode == "files":
        paths = sorted(os.path.join(args.dir, f) for f in os.listdir(args.dir))
        loader = DataLoader(Files(paths), batch_size=1, num_workers=0)
    elif args.mode in ("spawn", "forkserver"):
        loader = DataLoader(InMemory(args.items or 16), batch_size=4, num_workers=2, multiprocessing_context=args.mode)
    elif args.mode == "trivial":
        loader = DataLoader(InMemory(args.items or 3000), batch_size=1, num_workers=0)
    else:
        loader = DataLoader(InMemory(args.items or 16), batch_size=8, num_workers=0)

    step_s = args.step_ms / 1000
    cpu_step_s = args.cpu_step_ms / 1000
    batches = 0
    t0 = time.monotonic()
    for _ in range(args.epochs):
        for _batch in loader:
            if step_s > 0:
                busy(step_s)
            if cpu_step_s > 0:
                busy(cpu_step_s, time.thread_time)
            batches += 1
    wall = time.monotonic() - t0
    print("ACCOUNT " + json.dumps({"mode": args.mode, "wall_s": wall, "batches": batches, "epochs": args.epochs,
                                   "sleep_ms": args.sleep_ms, "step_ms": args.step_ms,
                                   "cpu_step_ms": args.cpu_step_ms}), flush=True)


if __name__ == "__main__":
    main()
