#!/usr/bin/python3
"""The demo workload: a small but real PyTorch training job with an input pipeline.

A file-backed image dataset (random 3x64x64 uint8 images stored one .npy file per
sample, created on first use under --data), decoded and augmented in the
DataLoader workers (random crop, flip, normalisation), a small CNN trained with
SGD on the CPU, and a val loader after each epoch. It knows nothing of
stallprof: `stallprof run -- python3 train_demo.py` profiles it unchanged.
"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class NpyImageFolder(Dataset):
    """One .npy file per image, like an ImageFolder of decoded images."""

    def __init__(self, root, count, classes=10, size=64, seed=0):
        os.makedirs(root, exist_ok=True)
        rng = np.random.default_rng(seed)
        self.samples = []
        for i in range(count):
            label = i % classes
            path = os.path.join(root, f"img_{i:06d}_c{label}.npy")
            if not os.path.exists(path):
                np.save(path, rng.integers(0, 256, size=(3, size, size), dtype=np.uint8))
            self.samples.append((path, label))
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1) * 255
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1) * 255

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, label = self.samples[index]
        image = torch.from_numpy(np.load(path)).float()
        # Augmentation: pad + random 56x56 crop, random flip, a little blur work.
        image = F.pad(image, (4, 4, 4, 4), mode="reflect")
        top, left = np.random.randint(0, image.shape[1] - 56, size=2)
        image = image[:, top:top + 56, left:left + 56]
        if np.random.rand() < 0.5:
            image = image.flip(2)
        image = F.avg_pool2d(image.unsqueeze(0), 3, stride=1, padding=1).squeeze(0)
        return (image - self.mean) / self.std, label


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 14 * 14, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", default="/tmp/stallprof-demo-data")
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=1)
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    train_set = NpyImageFolder(os.path.join(args.data, "train"), args.samples)
    val_set = NpyImageFolder(os.path.join(args.data, "val"), args.samples // 4, seed=1)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                              num_workers=args.workers, persistent_workers=args.workers > 0)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, num_workers=args.workers)

    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(args.epochs):
        start = time.monotonic()
        model.train()
        seen = 0
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            seen += len(labels)
        train_s = time.monotonic() - start
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for images, labels in val_loader:
                correct += (model(images).argmax(1) == labels).sum().item()
                total += len(labels)
        print(f"epoch {epoch}: {seen} samples in {train_s:.2f} s ({seen / train_s:.0f} samples/s), "
              f"loss {loss.item():.3f}, val acc {correct / total:.3f}", flush=True)


if __name__ == "__main__":
    main()
