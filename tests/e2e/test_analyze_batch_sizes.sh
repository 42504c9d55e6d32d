#!/usr/bin/env bash
# Samples counted right where a loader has no batch_size: a stream of
# pre-batched shards (DataLoader(batch_size=None): each item is a whole batch)
# is counted by its first batch's leading dimension, which the hook measures
# in the main process with or without workers (it was counted one sample per
# batch: 256x too few samples/s); a batch sampler's batches of varying size
# by the mean getitem count per batch, not rounded (it lost the remainder); an
# IterableDataset's workers each ending on a partial batch by its getitem
# spans too (counted as full batches it had 8 x 4 = 32 samples an epoch for 26).
# Expected counts come from the workload's own sizes.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat > sizes.py <<'PY'
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info


class Shards(IterableDataset):  # 6 shards of 32 samples, split over the workers
    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        for shard in range(worker, 6, workers):
            yield torch.full((32, 4), float(shard)), torch.zeros(32, dtype=torch.long)


class Records(Dataset):  # 5 items, each a dict batch of 16 samples
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": torch.zeros(16, 3), "y": torch.ones(16)}


class Stream(IterableDataset):  # 13 samples from each worker
    def __iter__(self):
        for i in range(13):
            yield torch.zeros(4)


streamed = DataLoader(Shards(), batch_size=None)
partial = DataLoader(Stream(), batch_size=8, num_workers=2)
streamed_workers = DataLoader(Shards(), batch_size=None, num_workers=2)
records = DataLoader(Records(), batch_size=None)
bucketed = DataLoader(torch.arange(18), batch_sampler=[[0, 1, 2], [3, 4, 5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [15], [16, 17]])
for epoch in range(2):
    for loader in (streamed, streamed_workers, records, bucketed, partial):
        for _ in loader:
            pass
PY
$SP run -q -o sizes.pb -- "$PY" sizes.py >run.log 2>&1 || fail "the script failed under stallprof run: $(tail -3 run.log)"
$SP analyze sizes.pb --json >sizes.json || fail "analyze --json failed"
"$PY" - sizes.json <<'PY' || fail "samples counted wrong (above)"
import json, sys
loaders = {l["name"]: l for l in json.load(open(sys.argv[1]))["loaders"]}
# name: (samples over 2 epochs, batch size, how it was found)
expected = {"streamed": (384, 32, "first batch"), "streamed_workers": (384, 32, "first batch"),
            "records": (160, 16, "first batch"), "bucketed": (36, 3.6, "getitem spans"),
            "partial": (52, 6.5, "getitem spans")}
bad = []
for name, (samples, batch, source) in expected.items():
    l = loaders.get(name)
    got = (l["samples"], l["config"]["batch_size"], l["config"]["batch_size_from"]) if l else None
    print(name, got)
    if got is None or abs(got[0] - samples) > 1e-6 or abs(got[1] - batch) > 1e-6 or got[2] != source:
        bad.append(name)
assert not bad, bad
assert loaders["partial"]["config"]["batch_size_set"] == 8, loaders["partial"]["config"]
PY
$SP analyze sizes.pb >sizes.txt || fail "analyze failed"
grep -q "batch 32 (the first batch's leading dimension)" sizes.txt || fail "the text does not say how the batch size was found: $(grep batch sizes.txt | head -3)"
echo PASS
