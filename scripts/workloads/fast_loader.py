#!/usr/bin/python3
"""A loader that delivers thousands of batches a second: the worst case for a
per-batch hook. Batch size 1, trivial items (an int), collated by the default
collate_fn, and a training step that reads its batch and burns --step-us of
CPU in the main thread (a busy loop on the thread CPU clock, so the step costs
the same whatever the machine's load). Prints one line per epoch:

    epoch E: N samples in S s (R samples/s)

the format scripts/bench_overhead.sh reads (as for train_demo.py).
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Trivial(Dataset):
    def __init__(self, count):
        self.count = count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        return index


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=5000, help="samples per epoch")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    parser.add_argument("--step-us", type=float, default=200, help="CPU time of one training step, in us")
    args = parser.parse_args()
    train_loader = DataLoader(Trivial(args.samples), batch_size=1, shuffle=True, num_workers=args.workers)
    step_ns = int(args.step_us * 1000)
    cpu = time.thread_time_ns
    for epoch in range(args.epochs):
        seen = 0
        start = time.perf_counter()
        for batch in train_loader:
            # A step reads its batch, as training does (a batch from a worker
            # is in shared memory the step faults in at that first read).
            seen += batch.shape[0] + 0 * int(batch[0])
            until = cpu() + step_ns
            while cpu() < until:
                pass
        train_s = time.perf_counter() - start
        print(f"epoch {epoch}: {seen} samples in {train_s:.2f} s ({seen / train_s:.0f} samples/s)", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
