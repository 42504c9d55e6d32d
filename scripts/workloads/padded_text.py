#!/usr/bin/python3
"""A text classifier a user might write, not for stallprof: a map-style
dataset of sentences tokenized in __getitem__ (split, dictionary lookup), a
pad_sequence collate, an EmbeddingBag on the CPU on one intra-op thread.
Its batches are cheap to make (about 0.5 ms) and its step short (about
0.8 ms), so with workers the main process's receiving (about 0.5 ms a
batch) and the workers' share of the 2 cores cost more than they save: it
ran 1.3x faster without workers on the 2-core VM (2026-12-06).

  padded_text.py [--workers 2] [--epochs 4]

Prints each epoch's samples/s.
"""
import argparse
import random
import time

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()
torch.set_num_threads(1)
rng = random.Random(0)
WORDS = [f"w{i}" for i in range(5000)]
SENTENCES = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 80))) for _ in range(20000)]
VOCAB = {w: i + 1 for i, w in enumerate(WORDS)}


class Sentences(Dataset):
    def __len__(self):
        return len(SENTENCES)

    def __getitem__(self, i):
        tokens = [VOCAB.get(t.lower().strip(".,"), 0) for t in SENTENCES[i].split()]
        return torch.tensor(tokens), len(tokens) % 4


def collate(batch):
    tokens, labels = zip(*batch)
    return pad_sequence(tokens, batch_first=True), torch.tensor(labels)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(len(WORDS) + 1, 32)
        self.fc = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc(self.emb(x))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Sentences(), batch_size=32, shuffle=True, num_workers=args.workers, collate_fn=collate)
for epoch in range(args.epochs):
    start, samples = time.monotonic(), 0
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        samples += len(y)
    print(f"epoch {epoch}: {samples / (time.monotonic() - start):.0f} samples/s", flush=True)
