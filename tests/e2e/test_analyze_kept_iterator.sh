#!/usr/bin/env bash
# A DataLoader subclass that draws every epoch from one iterator made in its
# constructor (YOLOv5's InfiniteDataLoader and timm's MultiEpochsDataLoader,
# as their repositories write them): the loop's epochs are epochs, each
# ending at its generator's StopIteration (or where the loop left it), not
# one endless epoch whose last steps run on through the pause between epochs
# (0.4 s of "validation" here: it read as the compute of each epoch's last
# batch). A subclass whose __iter__ makes an iterator is recorded as before;
# one that reads a batch ahead (accelerate's DataLoaderShard) meets its
# iterator's StopIteration inside the next() that returns the last batch,
# and that batch's step (30 ms here) runs on to the loop's own
# StopIteration: it was left out of the epoch. One that serves the batches
# it cached in the first epoch makes no iterator after it, but draws from
# none either: its later epochs are not taken for a kept iterator's.
# Set costs: 8 batches an epoch (128 items, batch 16), 3 epochs, a 10 ms
# step, 1 ms an item in 2 workers.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat > kept.py <<'PY'
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset


class InfiniteDataLoader(DataLoader):  # YOLOv5 utils/dataloaders.py
    """ Dataloader that reuses workers

    Uses same syntax as vanilla DataLoader
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        object.__setattr__(self, 'batch_sampler', _RepeatSampler(self.batch_sampler))
        self.iterator = super().__iter__()

    def __len__(self):
        return len(self.batch_sampler.sampler)

    def __iter__(self):
        for _ in range(len(self)):
            yield next(self.iterator)


class Nested(InfiniteDataLoader):  # a subclass's __iter__ over its parent's, both wrapped by the hook
    def __iter__(self):
        yield from super().__iter__()


class _RepeatSampler:
    """ Sampler that repeats forever

    Args:
        sampler (Sampler)
    """

    def __init__(self, sampler):
        self.sampler = sampler

    def __iter__(self):
        while True:
            yield from iter(self.sampler)


class MultiEpochsDataLoader(torch.utils.data.DataLoader):  # timm/data/loader.py

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._DataLoader__initialized = False
        if self.batch_sampler is None:
            self.sampler = _RepeatSampler(self.sampler)
        else:
            self.batch_sampler = _RepeatSampler(self.batch_sampler)
        self._DataLoader__initialized = True
        self.iterator = super().__iter__()

    def __len__(self):
        return len(self.sampler) if self.batch_sampler is None else len(self.batch_sampler.sampler)

    def __iter__(self):
        for i in range(len(self)):
            yield next(self.iterator)


class PlainSubclass(DataLoader):  # an __iter__ of its own that makes an iterator
    def __iter__(self):
        return super().__iter__()


class Cached(DataLoader):  # keeps the first epoch's batches and serves them after: no iterator, no kept one
    def __iter__(self):
        if not hasattr(self, "cache"):
            self.cache = []
            for batch in super().__iter__():
                self.cache.append(batch)
                yield batch
        else:
            yield from self.cache


class DataLoaderShard(DataLoader):  # accelerate/data_loader.py, its batch-ahead loop
    def __iter__(self):
        dataloader_iter = super().__iter__()
        # We iterate one batch ahead to check when we are at the end
        try:
            current_batch = next(dataloader_iter)
        except StopIteration:
            yield
        batch_index = 0
        while True:
            try:
                next_batch = next(dataloader_iter)
                yield current_batch
                batch_index += 1
                current_batch = next_batch
            except StopIteration:
                self.end_of_dataloader = True
                yield current_batch
                break


def busy(seconds):
    # The thread's own CPU: a step's wall time is at least its busy time
    # (the process's CPU would count the queues' feeder threads too).
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass


class Items(Dataset):
    def __len__(self):
        return 128

    def __getitem__(self, i):
        busy(0.001)
        return torch.zeros(8)


kind, leave = sys.argv[1], int(sys.argv[2])
cls = {"yolo": InfiniteDataLoader, "timm": MultiEpochsDataLoader, "plain": PlainSubclass,
       "shard": DataLoaderShard, "cached": Cached, "nested": Nested}[kind]
if kind == "nested":  # the parent class made first: the hook wraps its __iter__ as well
    probe = InfiniteDataLoader(Items(), batch_size=16)
train_loader = cls(Items(), batch_size=16, shuffle=True, num_workers=2)
for epoch in range(3):
    for i, batch in enumerate(train_loader):
        busy(0.030 if kind == "shard" else 0.010)
        if leave and i + 1 == leave:
            break
    time.sleep(0.4)  # validation, checkpoint
PY

check() {  # check <kind> <leave after (0: the whole epoch)> <iterations an epoch> <kept_by> [epochs seen]
  local kind=$1 leave=$2 per_epoch=$3 kept_by=$4 epochs=${5:-3}
  "$SP" run -o "$kind$leave.pb" -- "$PY" kept.py "$kind" "$leave" > "$kind$leave.run" 2>&1 || fail "$kind: run failed: $(tail -3 "$kind$leave.run")"
  "$SP" analyze "$kind$leave.pb" --json > "$kind$leave.json" || fail "$kind: analyze --json failed"
  "$SP" analyze "$kind$leave.pb" > "$kind$leave.txt" || fail "$kind: analyze failed"
  "$PY" - "$kind$leave.json" "$per_epoch" "$kept_by" "$epochs" <<'PY' || fail "$kind (leaving after $leave): wrong epochs"
import json, sys
doc = json.load(open(sys.argv[1]))
per_epoch, kept_by, seen = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
if kept_by == "-":
    kept_by = ""
(l,) = [l for l in doc["loaders"] if l["name"] == "train"]  # named by the loop (the constructor iterated first)
epochs = [e["iterations"] for e in l["epochs"]]
assert epochs == [per_epoch] * seen, epochs
# The 0.4 s pause after each epoch is not the last batch's compute (10 ms
# of CPU, some 40 ms with both workers on the 2 cores).
compute = l["with_warmup"]["compute"]
assert compute["max_s"] < 0.25, compute
if sys.argv[1].startswith("shard"):
    # Every 30 ms step lies in its epoch, the last batch's too (it holds
    # the step after the iterator's end: the one read ahead had none).
    assert compute["total_s"] >= 24 * 0.030, compute
    assert compute["max_s"] >= 2 * 0.030, compute
# Every batch's compute is known: an epoch the loop left ends as it drops
# the epoch's iterator, not at the next epoch's first next().
assert compute["count"] == seen * per_epoch, compute
assert l["config"]["iterator_kept_by"] == kept_by, l["config"]
# Batches ready at a next() never exceed what the workers may hold ahead (2
# workers x prefetch_factor 2): a kept iterator's batch is found by its
# running index, so the 8 or 16 batches of the epochs before count as taken
# (indexed within the epoch, epoch 3's first wait would see 16 ready).
prefetch = l["prefetch"]
assert prefetch["capacity"] == 4, prefetch
assert prefetch["max_ready"] <= prefetch["capacity"] + 1, prefetch
# shuffle=True, inside the repeating wrapper the kept iterators put around the BatchSampler
assert l["config"]["sampler"] == "random", l["config"]["sampler"]
assert l["config"]["persistent_workers"] == bool(kept_by), l["config"]
print(f"{sys.argv[1]}: epochs {epochs}, compute max {compute['max_s'] * 1e3:.1f} ms, kept by '{kept_by}'")
PY
  if [ -n "${kept_by#-}" ]; then
    grep -q "workers kept across epochs ($kept_by: one iterator for every epoch)" "$kind$leave.txt" ||
      fail "$kind: the text does not say the workers are kept: $(grep -m1 'batch 16' "$kind$leave.txt")"
    # Each batch's fetch is found by the iterator's running batch index (the
    # first batches of an epoch were made during the pause before it).
    if grep -q "without a matching fetch span" "$kind$leave.txt"; then
      fail "$kind: waits left without their fetch: $(grep -m1 'without a matching fetch span' "$kind$leave.txt")"
    fi
  fi
}
check yolo 0 8 InfiniteDataLoader
check timm 0 8 MultiEpochsDataLoader
check yolo 4 4 InfiniteDataLoader   # the loop leaves each epoch after 4 batches
check plain 0 8 -
check nested 0 8 Nested   # one epoch recorded for the two generators, not two
"$STALLPROF_BUILD_DIR/trace_check" --names nested0.pb > nested0.names || fail "trace_check cannot read nested0.pb"
grep -q "^name dataloader.kept_epoch 3$" nested0.names ||
  fail "the nested generators recorded each epoch twice: $(grep kept_epoch nested0.names)"
check shard 0 8 -
check cached 0 8 - 1   # the later epochs drew from no DataLoader iterator: not epochs of a kept one
# The HTML report's loader header says it too.
"$SP" report yolo0.pb -o yolo0.html 2> report.err || fail "report failed: $(cat report.err)"
grep -q "workers kept across epochs (InfiniteDataLoader: one iterator for every epoch)" yolo0.html ||
  fail "the report does not say the workers are kept: $(grep -o 'class="meta">[^<]*' yolo0.html | head -1)"
echo "PASS"
