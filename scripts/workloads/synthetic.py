#!/usr/bin/python3
"""A PyTorch training loop whose costs are set by flags, for tests and validation.

Per sample the dataset sleeps --fetch-sleep-ms (blocked, like storage) and burns
--prep-cpu-ms of thread CPU time (like decoding and augmentation); per step the
"model" takes --compute-ms (a sleep, like waiting on an accelerator, or CPU
with --compute-mode cpu). With --files DIR the dataset reads one real file per
sample (--file-bytes each, created on first use). With --scratch-mib each sample
writes a fresh buffer of that size, one byte a page (a decoder's output: under
glibc's malloc a buffer this large may be mapped and unmapped every time, so its
pages fault in again on each sample). With --worker-setup-ms each process burns
that much CPU in its first item (a lazy set-up: a database opened, a decoder
imported on first use), so each worker pays it once per start.

It never imports stallprof. Its last line is
  WORKLOAD {json}
with its own counts (iterations per loader and epoch) and the stall fraction
and fetch/prep split that follow from the set costs, for tests to compare with
what stallprof measured.
"""
import argparse
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


def burn_cpu(seconds):
    """Spins until this thread has used `seconds` of CPU time."""
    if seconds <= 0:
        return
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for _ in range(200):
            x += 1
    return x


class SyntheticDataset(Dataset):
    def __init__(self, length, fetch_sleep_s, prep_cpu_s, sample_floats, files=None, file_bytes=0,
                 tail_every=0, tail_factor=1.0, scratch_bytes=0, setup_s=0.0):
        self.length = length
        self.setup_s = setup_s
        self._set_up_in = None  # the pid that paid setup_s: a forked worker inherits its parent's
        self.fetch_sleep_s = fetch_sleep_s
        self.prep_cpu_s = prep_cpu_s
        self.sample_floats = sample_floats
        self.files = files  # list of paths, one per sample, when file-backed
        self.file_bytes = file_bytes
        self.tail_every = tail_every    # every Nth sample costs tail_factor x the sleep and prep CPU
        self.tail_factor = tail_factor
        self.scratch_bytes = scratch_bytes
        self._page_marks = b"\x01" * len(range(0, scratch_bytes, 4096))

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.setup_s > 0 and self._set_up_in != os.getpid():
            burn_cpu(self.setup_s)
            self._set_up_in = os.getpid()
        if self.files is not None:
            with open(self.files[index % len(self.files)], "rb") as f:
                while f.read(1 << 20):
                    pass
        tail = self.tail_every > 0 and index % self.tail_every == 0
        factor = self.tail_factor if tail else 1.0
        if self.fetch_sleep_s > 0:
            time.sleep(self.fetch_sleep_s * factor)
        burn_cpu(self.prep_cpu_s * factor)
        if self.scratch_bytes:
            scratch = bytearray(self.scratch_bytes)
            scratch[::4096] = self._page_marks
        return torch.full((self.sample_floats,), float(index)), index % 10


class IndexedFilesDataset(SyntheticDataset):
    """Opens its files by index and lists none (no .files/.samples): the
    common custom dataset, whose size stallprof has to estimate."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._directory = os.path.dirname(self.files[0])
        self.files = None

    def __getitem__(self, index):
        with open(os.path.join(self._directory, f"sample_{index:07d}.bin"), "rb") as f:
            while f.read(1 << 20):
                pass
        return super().__getitem__(index)


def make_files(directory, count, size):
    os.makedirs(directory, exist_ok=True)
    paths = []
    block = os.urandom(min(size, 1 << 20)) if size > 0 else b""
    for i in range(count):
        path = os.path.join(directory, f"sample_{i:07d}.bin")
        if not os.path.exists(path) or os.path.getsize(path) != size:
            with open(path, "wb") as f:
                left = size
                while left > 0:
                    f.write(block[: min(left, len(block))])
                    left -= len(block)
        paths.append(path)
    return paths


def expected_costs(args, batches):
    """Stall fraction and split implied by the set costs (steady state, enough cores)."""
    b = args.batch_size
    fetch = b * args.fetch_sleep_ms / 1000.0  # per batch, blocked
    prep = b * args.prep_cpu_ms / 1000.0      # per batch, CPU
    compute = args.compute_ms / 1000.0
    if args.workers == 0:
        step = compute + fetch + prep
        step_prep = compute + prep
    else:
        step = max(compute, (fetch + prep) / args.workers)
        step_prep = max(compute, prep / args.workers)
    stall = 1 - compute / step if step > 0 else 0.0
    return {
        "stall_fraction": stall,
        "prep_stall_fraction": (step_prep - compute) / step if step > 0 else 0.0,
        "fetch_stall_fraction": (step - step_prep) / step if step > 0 else 0.0,
        "step_s": step,
        "batches": batches,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batches", type=int, default=20, help="batches per epoch of the train loader")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--start-method", choices=["fork", "spawn", "forkserver"], default=None)
    p.add_argument("--persistent", action="store_true", help="persistent_workers=True")
    p.add_argument("--pin-memory", action="store_true")
    p.add_argument("--prefetch-factor", type=int, default=2)
    p.add_argument("--val", action="store_true", help="also iterate a val loader after each epoch")
    p.add_argument("--sequential", action="store_true", help="sequential sampler instead of shuffle")
    p.add_argument("--fetch-sleep-ms", type=float, default=0.0, help="per sample, blocked")
    p.add_argument("--prep-cpu-ms", type=float, default=0.0, help="per sample, thread CPU")
    p.add_argument("--compute-ms", type=float, default=0.0, help="per step")
    p.add_argument("--compute-mode", choices=["sleep", "cpu"], default="sleep")
    p.add_argument("--sample-floats", type=int, default=16)
    p.add_argument("--files", default=None, help="file-backed dataset in this directory")
    p.add_argument("--file-bytes", type=int, default=64 << 10)
    p.add_argument("--hide-files", action="store_true",
                   help="with --files: a dataset that opens its files by index and lists none")
    p.add_argument("--tail-every", type=int, default=0, help="every Nth sample is slow (long-tailed item cost)")
    p.add_argument("--tail-factor", type=float, default=1.0, help="how many times the sleep and prep CPU a slow sample costs")
    p.add_argument("--scratch-mib", type=float, default=0.0,
                   help="per sample, a fresh buffer of this size written one byte a page")
    p.add_argument("--worker-setup-ms", type=float, default=0.0,
                   help="CPU each process burns in its first item (a lazy set-up), once per worker start")
    p.add_argument("--exit-code", type=int, default=0, help="exit with this code at the end")
    args = p.parse_args()

    torch.set_num_threads(1)
    n = args.batches * args.batch_size
    files = make_files(args.files, n, args.file_bytes) if args.files else None
    dataset_class = IndexedFilesDataset if files and args.hide_files else SyntheticDataset
    train_set = dataset_class(n, args.fetch_sleep_ms / 1000.0, args.prep_cpu_ms / 1000.0,
                              args.sample_floats, files, args.file_bytes, args.tail_every, args.tail_factor,
                              int(args.scratch_mib * (1 << 20)), args.worker_setup_ms / 1000.0)
    common = dict(batch_size=args.batch_size, num_workers=args.workers, pin_memory=args.pin_memory)
    if args.workers > 0:
        common.update(prefetch_factor=args.prefetch_factor, persistent_workers=args.persistent)
        if args.start_method:
            common["multiprocessing_context"] = args.start_method
    train_loader = DataLoader(train_set, shuffle=not args.sequential, **common)
    val_loader = None
    if args.val:
        val_set = SyntheticDataset(max(args.batch_size, n // 2), args.fetch_sleep_ms / 1000.0,
                                   args.prep_cpu_ms / 1000.0, args.sample_floats)
        val_loader = DataLoader(val_set, shuffle=False, **common)

    counts = {"train": [], "val": []}
    t0 = time.monotonic()
    for epoch in range(args.epochs):
        iterations = 0
        for x, y in train_loader:
            if args.compute_mode == "cpu":
                burn_cpu(args.compute_ms / 1000.0)
            elif args.compute_ms > 0:
                time.sleep(args.compute_ms / 1000.0)
            iterations += 1
        counts["train"].append(iterations)
        if val_loader is not None:
            iterations = 0
            for x, y in val_loader:
                iterations += 1
            counts["val"].append(iterations)
    elapsed = time.monotonic() - t0

    report = {
        "iterations": {k: sum(v) for k, v in counts.items() if v},
        "per_epoch": {k: v for k, v in counts.items() if v},
        "epochs": args.epochs,
        "workers": args.workers,
        "batch_size": args.batch_size,
        "samples": sum(counts["train"]) * args.batch_size,
        "elapsed_s": elapsed,
        "samples_per_s": sum(counts["train"]) * args.batch_size / elapsed if elapsed > 0 else 0.0,
        "expected": expected_costs(args, args.batches),
    }
    print("WORKLOAD " + json.dumps(report), flush=True)
    sys.exit(args.exit_code)


if __name__ == "__main__":
    main()
