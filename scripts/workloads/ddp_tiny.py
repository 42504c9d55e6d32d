#!/usr/bin/python3
"""A tiny data-parallel job for the ranks tests: run once per rank by torchrun
(or by hand with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set, as torchrun
does). It joins a gloo process group, iterates one DataLoader held in a
variable named `dl` (a generic name: the hook falls back to loader1, counted
per process) and all-reduces a tensor every step, so the ranks run in lock
step like DDP. Costs are set: --fetch-ms per sample in the worker,
--compute-ms per step. With --spawn N it starts the N ranks itself with
torch.multiprocessing.spawn and passes each its rank in init_process_group
(tcp://127.0.0.1:--port), with no RANK in any environment. It never imports
stallprof.
"""
import argparse
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class SleepyDataset(Dataset):
    def __init__(self, length, fetch_s):
        self.length = length
        self.fetch_s = fetch_s

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        time.sleep(self.fetch_s)
        return torch.full((8,), float(index))


def run_rank(rank, args):
    if args.spawn:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=rank, world_size=args.spawn)
    else:
        dist.init_process_group("gloo")
    dataset = SleepyDataset(args.batches * args.batch_size, args.fetch_ms / 1000.0)
    dl = DataLoader(dataset, batch_size=args.batch_size, num_workers=1)
    total = torch.zeros(1)
    for batch in dl:
        time.sleep(args.compute_ms / 1000.0)
        total += batch.sum()
        dist.all_reduce(total)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--fetch-ms", type=float, default=1.0)
    p.add_argument("--compute-ms", type=float, default=20.0)
    p.add_argument("--spawn", type=int, default=0, help="start this many ranks with torch.multiprocessing.spawn")
    p.add_argument("--port", type=int, default=29500, help="rendezvous port with --spawn")
    args = p.parse_args()
    if args.spawn:
        import torch.multiprocessing as mp
        mp.spawn(run_rank, args=(args,), nprocs=args.spawn)
    else:
        run_rank(None, args)


if __name__ == "__main__":
    main()
