"""The PyTorch tutorials' own training job, for checking stallprof on code not
written for it: the custom image dataset of "Datasets & DataLoaders"
(beginner/basics/data_tutorial: labels in a CSV read with pandas, each image
read by torchvision.io.read_image, which memory-maps the file and decodes the
JPEG in C++) and the training loop of the "Quickstart" (its MLP and
train_loop), unchanged but for the input size (32 x 32 RGB crops instead of
28 x 28 grey), a crop and flip as the transform, and this command line.
Needs python3-torchvision and python3-pandas.

  tutorial_images.py --data DIR --generate N    # N JPEGs (160 px) and labels.csv
  tutorial_images.py --data DIR [--workers W] [--epochs E]
"""
import argparse
import os

import pandas as pd
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms
from torchvision.io import read_image


class CustomImageDataset(Dataset):
    def __init__(self, annotations_file, img_dir, transform=None, target_transform=None):
        self.img_labels = pd.read_csv(annotations_file, header=None)
        self.img_dir = img_dir
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.img_labels)

    def __getitem__(self, idx):
        img_path = os.path.join(self.img_dir, self.img_labels.iloc[idx, 0])
        image = read_image(img_path)
        label = self.img_labels.iloc[idx, 1]
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return image, label


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(3 * 32 * 32, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


def train_loop(dataloader, model, loss_fn, optimizer):
    size = len(dataloader.dataset)
    for batch, (X, y) in enumerate(dataloader):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if batch % 10 == 0:
            loss, current = loss.item(), (batch + 1) * len(X)
            print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")


def generate(data, n):
    """n 160 px JPEGs of a gradient with noise (about 19 KiB each), 10 labels."""
    import numpy as np
    from PIL import Image

    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(os.path.join(data, "labels.csv"), "w") as f:
        for i in range(n):
            label = i % 10
            base = np.linspace(0, 255, 160 * 160 * 3).reshape(160, 160, 3) * (label + 1) / 10
            pixels = np.clip(base + rng.normal(0, 40, base.shape), 0, 255).astype(np.uint8)
            name = f"img{i:05d}.jpg"
            Image.fromarray(pixels).save(os.path.join(data, name), quality=90)
            f.write(f"{name},{label}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--generate", type=int, default=0)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    if args.generate:
        generate(args.data, args.generate)
        return
    transform = transforms.Compose([
        transforms.ConvertImageDtype(torch.float),
        transforms.RandomResizedCrop(32),
        transforms.RandomHorizontalFlip(),
    ])
    training_data = CustomImageDataset(os.path.join(args.data, "labels.csv"), args.data, transform=transform)
    train_dataloader = DataLoader(training_data, batch_size=64, shuffle=True, num_workers=args.workers)
    model = NeuralNetwork()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for t in range(args.epochs):
        print(f"Epoch {t+1}\n-------------------------------")
        train_loop(train_dataloader, model, loss_fn, optimizer)
    print("Done!")


if __name__ == "__main__":
    main()
