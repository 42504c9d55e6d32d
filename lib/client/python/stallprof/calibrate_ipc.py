"""What handing one batch from a DataLoader worker to the main process costs
in CPU, for a batch of tensors of the given sizes: run by `stallprof run`
after a job whose loaders had no workers, where the profile cannot see it.

  python3 -m stallprof.calibrate_ipc BYTES [BYTES ...] [--batches N]

A DataLoader with one persistent worker delivers N batches (after a warm-up)
whose tensors the worker allocates in shared memory and fills, as torch's
collate does. Printed as one line, "loop_cpu_s X receive_cpu_s Y fetch_cpu_s
Z batches N", in seconds per batch:
  loop_cpu_s     the worker process's CPU per batch outside __getitem__
                 (its queue feeder pickling, the fd sharer, the loop);
  receive_cpu_s  the main thread's CPU per next() (unpickling, receiving
                 the tensors' file descriptors, mapping them).
"""
import argparse
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Batches(Dataset):
    def __init__(self, sizes, count):
        self.sizes = sizes
        self.count = count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        start = time.thread_time_ns()
        tensors = tuple(torch.empty(size, dtype=torch.uint8).share_memory_().fill_(1) for size in self.sizes)
        return tensors, time.thread_time_ns() - start


def process_cpu_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended
    return total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bytes", type=int, nargs="+")
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(1)
    loader = DataLoader(Batches(args.bytes, args.warmup + args.batches), batch_size=None, num_workers=1,
                        persistent_workers=True)
    it = iter(loader)
    for _ in range(args.warmup):
        next(it)
    worker = it._workers[0].pid
    worker_from = process_cpu_ns(worker)
    receive = fetch = 0
    for _ in range(args.batches):
        start = time.thread_time_ns()
        _, fetch_ns = next(it)
        receive += time.thread_time_ns() - start
        fetch += fetch_ns
    loop = process_cpu_ns(worker) - worker_from - fetch
    print("loop_cpu_s %.9f receive_cpu_s %.9f fetch_cpu_s %.9f batches %d"
          % (max(0, loop) / args.batches / 1e9, receive / args.batches / 1e9, fetch / args.batches / 1e9, args.batches))


if __name__ == "__main__":
    main()
