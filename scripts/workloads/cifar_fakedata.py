"""The PyTorch tutorial "Training a classifier" (beginner/blitz/cifar10_tutorial:
its Net, CrossEntropyLoss and SGD with momentum, a test loop after each
epoch) with the usual CIFAR-10 augmentation (RandomCrop(32, padding=4),
RandomHorizontalFlip, ToTensor, Normalize) and batch 64, on
torchvision.datasets.FakeData (32 x 32 RGB, 10 classes: no download), for
checking stallprof on code not written for it. Each FakeData item seeds
torch's generator by its index (torch.manual_seed), which on a build without
CUDA initialised formats the Python stack every call: an item costs more the
deeper the stack it runs on, and a DataLoader worker's stack carries the
parent's frames from the fork (docs/validation.md, 2026-12-04). Prints each
epoch's training samples/s. Needs python3-torchvision.

  cifar_fakedata.py [--workers W] [--epochs E] [--samples N] [--persistent]
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms as transforms


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=3000, help="training samples (the test set is a sixth)")
    parser.add_argument("--persistent", action="store_true", help="persistent_workers=True")
    args = parser.parse_args()
    transform_train = transforms.Compose([
        transforms.RandomCrop(32, padding=4),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    ])
    transform_test = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    ])
    trainset = torchvision.datasets.FakeData(size=args.samples, image_size=(3, 32, 32), num_classes=10,
                                             transform=transform_train)
    testset = torchvision.datasets.FakeData(size=args.samples // 6, image_size=(3, 32, 32), num_classes=10,
                                            transform=transform_test, random_offset=args.samples)
    persistent = args.persistent and args.workers > 0
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=64, shuffle=True, num_workers=args.workers,
                                              persistent_workers=persistent)
    testloader = torch.utils.data.DataLoader(testset, batch_size=100, shuffle=False, num_workers=args.workers,
                                             persistent_workers=persistent)

    net = Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    for epoch in range(args.epochs):
        start = time.monotonic()
        running_loss = 0.0
        for inputs, labels in trainloader:
            optimizer.zero_grad()
            loss = criterion(net(inputs), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        train_s = time.monotonic() - start
        correct = total = 0
        with torch.no_grad():
            for images, labels in testloader:
                predicted = net(images).argmax(1)
                total += labels.size(0)
                correct += (predicted == labels).sum().item()
        print(f"epoch {epoch}: {args.samples / train_s:.1f} samples/s, loss {running_loss / len(trainloader):.3f}, "
              f"test accuracy {correct / total:.2f}")


if __name__ == "__main__":
    main()
