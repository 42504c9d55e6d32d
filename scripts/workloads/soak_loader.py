#!/usr/bin/python3
"""Soak workload: a DataLoader with many workers, each sample one
stallprof.stage("soak.sample") span, for a given number of seconds of whole
epochs. Prints "loader samples=<n> epochs=<e>": every sample fetched was
delivered (whole epochs only), so n stage spans were emitted."""
import sys
import time

import stallprof
import torch
from torch.utils.data import DataLoader, Dataset


class Tiny(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, index):
        with stallprof.stage("soak.sample"):
            return index


def main():
    seconds, workers = float(sys.argv[1]), int(sys.argv[2])
    loader = DataLoader(Tiny(), batch_size=64, num_workers=workers, persistent_workers=True, prefetch_factor=4)
    end = time.monotonic() + seconds
    samples = epochs = 0
    while time.monotonic() < end:
        for batch in loader:
            samples += len(batch)
        epochs += 1
    print("loader samples=%d epochs=%d" % (samples, epochs))


if __name__ == "__main__":
    main()
