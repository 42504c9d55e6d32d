"""The smallest everyday training job: an in-memory TensorDataset (20000
samples of 32 features, 10 classes), batch 64, shuffled, and a 2-layer MLP
trained with SGD on one intra-op thread, the way tutorials write it. Its
batches cost a few hundred microseconds to make and to train on, so
num_workers > 0 costs more in handing batches over than it saves, and the
step itself runs slower beside workers (docs/model.md "What the misses say":
its thread waits in next() before each batch, and each batch is mapped from
shared memory). Prints each epoch's samples/s.

  tensor_mlp.py [--workers W] [--epochs E]
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(20000, 32)
    y = torch.randint(0, 10, (20000,))
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, num_workers=args.workers)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        start, seen = time.perf_counter(), 0
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            seen += len(xb)
        took = time.perf_counter() - start
        print(f"epoch {epoch}: {seen} samples in {took:.2f} s ({seen / took:.0f} samples/s)", flush=True)


if __name__ == "__main__":
    main()
