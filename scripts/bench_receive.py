#!/usr/bin/python3
"""The main thread's CPU per next() when a worker's batch is ready against
when the main thread blocked for it (docs/model.md, limits): one worker hands
over 768 KiB batches; its __getitem__ sleeps 0 or 20 ms. Alternates the two,
REPEAT times each (default 3), and prints ms of thread CPU per next().

  scripts/bench_receive.py [REPEAT]
"""
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Batches(Dataset):
    def __init__(self, sleep_s):
        self.sleep_s = sleep_s

    def __len__(self):
        return 220

    def __getitem__(self, index):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.empty(196608, dtype=torch.float32).share_memory_().fill_(1), index


def main():
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for _ in range(repeat):
        for sleep_s in (0, 0.02):
            it = iter(DataLoader(Batches(sleep_s), batch_size=None, num_workers=1))
            for _ in range(20):
                next(it)
            cpu = 0
            for _ in range(200):
                start = time.thread_time_ns()
                next(it)
                cpu += time.thread_time_ns() - start
            print("worker sleeps %2.0f ms a batch: main thread CPU per next() %.3f ms"
                  % (sleep_s * 1e3, cpu / 200 / 1e6), flush=True)


if __name__ == "__main__":
    main()
