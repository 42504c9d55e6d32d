#!/usr/bin/python3
"""A streaming text pipeline the way IterableDataset tutorials write one: the
dataset reads a corpus line by line, each worker keeping every
num_workers-th line (torch.utils.data.get_worker_info), tokenizes it in
Python, collate pads the batch; an EmbeddingBag classifier trained on the
CPU on one intra-op thread. Its fetches hold the GIL (Python) and its step is
short (about 1 ms), so two workers and the step oversubscribe 2 cores: the
kernel's scheduling of them is what whatif's figures miss here
(docs/model.md, "the kernel's scheduling").

  streaming_text.py --corpus FILE [--lines 60000] [--workers 0] [--epochs 2]

The corpus is generated on first use (seeded). Prints each epoch's samples/s.
"""
import argparse
import os
import random
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
VOCAB = {w: i + 1 for i, w in enumerate(WORDS)}


def make_corpus(path, lines):
    if os.path.exists(path) and sum(1 for _ in open(path)) == lines:
        return
    rng = random.Random(0)
    with open(path + ".partial", "w") as f:
        for _ in range(lines):
            f.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + "\n")
    os.replace(path + ".partial", path)


class Lines(IterableDataset):
    def __init__(self, path):
        self.path = path

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        with open(self.path) as f:
            for i, line in enumerate(f):
                if i % workers != worker:
                    continue
                tokens = [VOCAB.get(w, 0) for w in line.split()]
                tokens = [t * 3 % 13 for t in tokens for _ in range(8)]  # sub-word pieces
                yield torch.tensor(tokens[:256]), len(tokens) % 2


def collate(batch):
    x = nn.utils.rnn.pad_sequence([b[0] for b in batch], batch_first=True)
    return x, torch.tensor([b[1] for b in batch])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--lines", type=int, default=60000)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    make_corpus(args.corpus, args.lines)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    loader = DataLoader(Lines(args.corpus), batch_size=64, num_workers=args.workers, collate_fn=collate)
    model = nn.Sequential(nn.EmbeddingBag(13, 64), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        start, seen = time.perf_counter(), 0
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            seen += len(x)
        took = time.perf_counter() - start
        print(f"epoch {epoch}: {seen} samples in {took:.2f} s ({seen / took:.0f} samples/s)", flush=True)


if __name__ == "__main__":
    main()
