#!/usr/bin/python3
"""A text classifier in the style of the torchtext tutorial, not written for
stallprof: __getitem__ tokenizes a line (split, vocabulary lookup), collate
concatenates the tokens for an EmbeddingBag, a validation pass follows each
epoch. Prints the training loop's samples/s (validation excluded).

  --workers N   DataLoader workers of both loaders (default 2)
  --pack        collate returns one tensor (a length, labels, offsets,
                tokens) instead of three (labels, tokens, offsets): each
                tensor costs the main process a receive from its worker
  --epochs N    (default 3)
"""
import argparse
import random
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--pack", action="store_true")
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

random.seed(0)
WORDS = [f"w{i}" for i in range(20000)]
VOCAB = {w: i + 1 for i, w in enumerate(WORDS)}


def make_text(n):
    return [(random.randrange(4), " ".join(random.choices(WORDS, k=random.randint(20, 200)))) for _ in range(n)]


class TextDS(Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        label, text = self.rows[i]
        return label, torch.tensor([VOCAB.get(t, 0) for t in text.lower().split()], dtype=torch.int64)


def collate(batch):
    labels = torch.tensor([b[0] for b in batch])
    offsets = [0]
    for _, t in batch[:-1]:
        offsets.append(offsets[-1] + len(t))
    if args.pack:
        return torch.cat([torch.tensor([len(batch)]), labels, torch.tensor(offsets)] + [b[1] for b in batch])
    return labels, torch.cat([b[1] for b in batch]), torch.tensor(offsets)


def unpack(batch):
    if not args.pack:
        return batch
    n = int(batch[0])
    return batch[1:1 + n], batch[1 + 2 * n:], batch[1 + n:1 + 2 * n]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(len(VOCAB) + 1, 64)
        self.fc = nn.Linear(64, 4)

    def forward(self, text, offsets):
        return self.fc(self.emb(text, offsets))


train = DataLoader(TextDS(make_text(20000)), batch_size=64, shuffle=True, collate_fn=collate, num_workers=args.workers)
val = DataLoader(TextDS(make_text(4000)), batch_size=64, collate_fn=collate, num_workers=args.workers)
model = Model()
opt = torch.optim.SGD(model.parameters(), lr=5)
crit = nn.CrossEntropyLoss()
trained_s, samples = 0.0, 0
for epoch in range(args.epochs):
    model.train()
    start = time.monotonic()
    for batch in train:
        labels, text, offsets = unpack(batch)
        opt.zero_grad()
        crit(model(text, offsets), labels).backward()
        opt.step()
        samples += len(labels)
    trained_s += time.monotonic() - start
    model.eval()
    correct = 0
    with torch.no_grad():
        for batch in val:
            labels, text, offsets = unpack(batch)
            correct += (model(text, offsets).argmax(1) == labels).sum().item()
    print(f"epoch {epoch}: accuracy {correct / len(val.dataset):.3f}, train {samples / trained_s:.1f} samples/s", flush=True)
