#!/usr/bin/env bash
# The access order the hook records (config "sampler": whatif's cache model
# uses it): the sampler the loader draws indices from, also when a
# batch_sampler is given (torch then leaves loader.sampler a default
# SequentialSampler that nothing uses; a random batch sampler was recorded as
# "sequential", and an LRU cache predicted to thrash). And pin_memory as the
# iterator does it: torch pins only where CUDA is available (and, without
# CUDA, that it was asked for: "pin_memory_unavailable"). And the samples an
# epoch holds (config "sampler_len") where the dataset takes whole batches
# (batch_size=None, a BatchSampler given as sampler=): the batch sampler's
# length counts batches; it was recorded as samples, and the epochs' samples
# were left at full batches (a tabular job: 400384 samples for 400000).
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
cat > "$TMP/samplers.py" <<'PY'
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler, WeightedRandomSampler
ds = torch.arange(40)
shuffled = DataLoader(ds, batch_size=4, shuffle=True)
ordered = DataLoader(ds, batch_size=4)
batched_random = DataLoader(ds, batch_sampler=BatchSampler(RandomSampler(ds), batch_size=4, drop_last=False))
batched_ordered = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), batch_size=4, drop_last=False))
weighted = DataLoader(ds, batch_size=4, sampler=WeightedRandomSampler([1.0] * 40, 40), pin_memory=True)
listed = DataLoader(ds, batch_sampler=[[i, i + 1] for i in range(0, 40, 2)])
whole_batches = DataLoader(ds, sampler=BatchSampler(RandomSampler(ds), batch_size=6, drop_last=False), batch_size=None)
for loader in (shuffled, ordered, batched_random, batched_ordered, weighted, listed, whole_batches):
    for _ in loader:
        pass
PY
record "$TMP/capture.jsonl" "$PY" "$TMP/samplers.py" || fail "workload failed"
"$PY" - "$TMP/capture.jsonl" <<'PY' || fail "sampler kinds recorded wrong (above)"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
name = {r["scope"]: r["str"] for r in recs if r.get("key") == "name"}
sampler = {name[r["scope"]]: r["str"] for r in recs if r.get("key") == "sampler"}
print(sampler)
assert sampler == {"shuffled": "random", "ordered": "sequential", "batched_random": "random",
                   "batched_ordered": "sequential", "weighted": "WeightedRandomSampler", "listed": "list",
                   "whole_batches": "random"}, sampler
sampler_len = {name[r["scope"]]: r.get("u64") for r in recs if r.get("key") == "sampler_len"}
print(sampler_len)
assert sampler_len.get("whole_batches") == 40, sampler_len
pinned = {name[r["scope"]] for r in recs if r.get("key") == "pin_memory" and (r.get("u64") or r.get("f64") or r.get("str") in ("1", "True"))}
import torch
assert pinned == ({"weighted"} if torch.cuda.is_available() else set()), pinned
# Asked for without CUDA: said so, so analyze can tell the user it did nothing.
unavailable = {name[r["scope"]] for r in recs if r.get("key") == "pin_memory_unavailable" and r.get("u64")}
assert unavailable == (set() if torch.cuda.is_available() else {"weighted"}), unavailable
PY
echo PASS
