#!/usr/bin/python3
"""A real decode pipeline: a torchvision ImageFolder of generated JPEGs,
decoded and augmented by PIL/torchvision in the DataLoader, feeding a small
CNN trained on the CPU (torch's default intra-op threads, so the step itself
uses the cores the workers want). For model validation and demos.

  imagefolder.py --data DIR [--images 256] [--workers 0] [--epochs 1]

The images (--size px, random noise with shapes, JPEG quality 90) are created
on first use. It never imports stallprof. Its last line is
  WORKLOAD {json}
with its own counts and wall time.
"""
import argparse
import json
import os
import random
import time

import torch
import torch.nn as nn
import torchvision
import torchvision.transforms as T
from PIL import Image, ImageDraw


def make_images(root, count, size, classes=4):
    marker = os.path.join(root, f".complete-{count}-{size}")
    if os.path.exists(marker):
        return
    rng = random.Random(0)
    for i in range(count):
        cls = os.path.join(root, f"class{i % classes}")
        os.makedirs(cls, exist_ok=True)
        img = Image.effect_noise((size, size), 40 + 10 * (i % classes)).convert("RGB")
        draw = ImageDraw.Draw(img)
        for _ in range(6):
            x0, y0 = rng.randrange(size), rng.randrange(size)
            draw.ellipse([x0, y0, x0 + size // 4, y0 + size // 4],
                         fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        img.save(os.path.join(cls, f"img{i:06d}.jpg"), quality=90)
    open(marker, "w").close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--size", type=int, default=320, help="generated image side, px")
    p.add_argument("--crop", type=int, default=96)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--width", type=int, default=1, help="the CNN's channels x this (the step's cost without the batch's bytes)")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    make_images(args.data, args.images, args.size)
    transform = T.Compose([T.RandomResizedCrop(args.crop), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])])
    dataset = torchvision.datasets.ImageFolder(args.data, transform=transform)
    train_loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                               num_workers=args.workers)
    c1, c2 = 16 * args.width, 32 * args.width
    model = nn.Sequential(
        nn.Conv2d(3, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c2, c2, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(c2, len(dataset.classes)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    counts = []
    t0 = time.monotonic()
    for epoch in range(args.epochs):
        n = 0
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            n += 1
        counts.append(n)
    elapsed = time.monotonic() - t0
    samples = min(len(dataset), sum(counts) * args.batch_size)
    print("WORKLOAD " + json.dumps({"iterations": {"train": sum(counts)}, "per_epoch": {"train": counts},
                                    "elapsed_s": elapsed, "samples": len(dataset) * args.epochs,
                                    "samples_per_s": len(dataset) * args.epochs / elapsed}), flush=True)


if __name__ == "__main__":
    main()
