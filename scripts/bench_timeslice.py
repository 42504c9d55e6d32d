#!/usr/bin/python3
"""What time-slicing costs a decode worker: the CPU an image takes to decode
and augment (the validation's decode transform) alone on core 0, beside a
second decoder on the same core (time-sliced), and beside one on core 1.
The model's processor sharing assumes the first two equal.

  scripts/bench_timeslice.py [--images DIR] [--rounds 3]

DIR defaults to a temporary ImageFolder of 256 generated 640 px JPEGs.
"""
import argparse
import os
import subprocess
import sys
import tempfile

DECODE = r'''
import sys, time, torch, torchvision, torchvision.transforms as T
torch.set_num_threads(1)
tr = T.Compose([T.RandomResizedCrop(64), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize([0.5] * 3, [0.25] * 3)])
ds = torchvision.datasets.ImageFolder(sys.argv[1], transform=tr)
n = 300
t0 = time.thread_time()
for i in range(n):
    ds[i % len(ds)]
print((time.thread_time() - t0) / n * 1e3)
'''


def decoders(images, cores):
    procs = [subprocess.Popen(["taskset", "-c", str(c), sys.executable, "-c", DECODE, images],
                              stdout=subprocess.PIPE, text=True) for c in cores]
    return [float(p.communicate()[0]) for p in procs]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if os.cpu_count() < 2:
        sys.exit("bench_timeslice: needs 2 cores")
    with tempfile.TemporaryDirectory() as tmp:
        images = args.images
        if not images:  # generate only into our own folder, never into the caller's
            images = os.path.join(tmp, "images")
            workload = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads", "imagefolder.py")
            subprocess.run([sys.executable, workload, "--data", images, "--images", "256", "--size", "640", "--epochs", "0"],
                           check=True, stdout=subprocess.DEVNULL)
        print(f"load average {open('/proc/loadavg').read().split()[0]}; ms of CPU an image (decode, crop, flip)")
        alone, sliced, paired = [], [], []
        for _ in range(args.rounds):  # alternated, so a change in the host's speed hits all three
            alone += decoders(images, [0])
            sliced += decoders(images, [0, 0])
            paired += decoders(images, [0, 1])
        med = lambda v: sorted(v)[len(v) // 2]
        for name, v in (("alone on core 0", alone), ("two time-sliced on core 0", sliced), ("two on cores 0 and 1", paired)):
            print(f"  {name:<28} median {med(v):6.3f} ms, {med(v) / med(alone):.3f}x alone  ({' '.join(f'{x:.2f}' for x in v)})")


if __name__ == "__main__":
    main()
