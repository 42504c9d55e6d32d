"""An HDF5 image dataset opened lazily in each worker (the pattern of PyTorch
forum answers and many repositories: h5py handles do not survive a fork, so
__getitem__ opens the file on first use), and a small CNN trained on the CPU.
Not written for stallprof; used to check its storage verdicts on a dataset
that lists no files but holds one (docs/analysis.md, "Dataset fits in
memory"). Needs python3-h5py.

  h5_images.py --data FILE --generate N     # N random 3 x 128 x 128 uint8 images (48 KiB each) and labels
  h5_images.py --data FILE [--workers W] [--epochs E]
"""
import argparse

import h5py
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class H5Dataset(Dataset):
    def __init__(self, path):
        self.path = path
        self.images = None
        with h5py.File(self.path, "r") as file:
            self.length = len(file["images"])

    def __getitem__(self, index):
        if self.images is None:
            file = h5py.File(self.path, "r")
            self.images, self.labels = file["images"], file["labels"]
        image = torch.from_numpy(self.images[index]).float().div(255)
        return image, int(self.labels[index])

    def __len__(self):
        return self.length


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 5, stride=2)
        self.conv2 = nn.Conv2d(8, 16, 5, stride=2)
        self.fc = nn.Linear(16 * 29 * 29, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


def generate(path, n):
    import numpy as np

    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        images = f.create_dataset("images", (n, 3, 128, 128), dtype="u1")
        for start in range(0, n, 500):
            count = min(500, n - start)
            images[start:start + count] = rng.integers(0, 256, (count, 3, 128, 128), dtype=np.uint8)
        f.create_dataset("labels", data=rng.integers(0, 10, n))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--generate", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    if args.generate:
        generate(args.data, args.generate)
        return
    loader = DataLoader(H5Dataset(args.data), batch_size=32, shuffle=True, num_workers=args.workers)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
