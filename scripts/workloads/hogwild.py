#!/usr/bin/python3
"""The shape of pytorch/examples mnist_hogwild without MNIST, for the ranks
tests: torch.multiprocessing starts --processes trainer processes that each
iterate their own DataLoader (`train_loader`), then the main process iterates
a `test_loader`. No RANK anywhere: these are processes, not ranks of a job.
Trainer i computes --compute-ms x (1 + i x --skew) per step, so the trainers
differ in speed as hogwild trainers sharing cores do. It never imports stallprof.
"""
import argparse
import time

import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset


class SleepyDataset(Dataset):
    def __init__(self, length, fetch_s):
        self.length = length
        self.fetch_s = fetch_s

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        time.sleep(self.fetch_s)
        return torch.full((8,), float(index))


def train(index, args, dataset):
    train_loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=1)
    compute_s = args.compute_ms / 1000.0 * (1 + index * args.skew)
    for _ in train_loader:
        time.sleep(compute_s)


def test(args, dataset):
    test_loader = DataLoader(dataset, batch_size=args.batch_size, num_workers=1)
    for _ in test_loader:
        time.sleep(args.compute_ms / 2000.0)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--fetch-ms", type=float, default=1.0)
    p.add_argument("--compute-ms", type=float, default=20.0)
    p.add_argument("--skew", type=float, default=1.0, help="trainer i computes (1 + i x skew) x --compute-ms")
    args = p.parse_args()
    dataset = SleepyDataset(args.batches * args.batch_size, args.fetch_ms / 1000.0)
    trainers = [mp.Process(target=train, args=(i, args, dataset)) for i in range(args.processes)]
    for t in trainers:
        t.start()
    for t in trainers:
        t.join()
    test(args, dataset)


if __name__ == "__main__":
    main()
