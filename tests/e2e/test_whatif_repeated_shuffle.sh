#!/usr/bin/env bash
# A DistributedSampler whose set_epoch is never called shuffles every epoch
# the same way (PyTorch's docs warn of it): analyze says so, and whatif
# takes the order as a cycle, which a page cache smaller than the
# dataset keeps none of (a fresh shuffle each epoch keeps about the cache's
# share or so). With set_epoch(epoch) the order is random; with shuffle=False it
# is sequential. Set sizes: 64 files of 64 KiB (4 MiB), listed in the
# dataset's .files; 3 epochs of batch 8; --cache 2M is half of it.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
mkdir -p data
for i in $(seq 0 63); do head -c 65536 /dev/zero > "data/$i.bin"; done
cat > shuffle.py <<'PY'
import os, sys
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Files(Dataset):
    def __init__(self, root):
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root))

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            return torch.tensor(len(f.read()))


mode = sys.argv[1]
sampler = DistributedSampler(Files("data"), num_replicas=1, rank=0, shuffle=mode != "ordered")
train_loader = DataLoader(sampler.dataset, batch_size=8, sampler=sampler)
for epoch in range(3):
    if mode == "set_epoch":
        sampler.set_epoch(epoch)
    for batch in train_loader:
        pass
PY

check() {  # check <mode> <sampler kind> <repeats: true/false> <order in whatif> <hit range low high>
  local mode=$1 kind=$2 repeats=$3 order=$4 low=$5 high=$6
  "$SP" run -o "$mode.pb" -- "$PY" shuffle.py "$mode" > "$mode.run" 2>&1 || fail "$mode: run failed: $(tail -3 "$mode.run")"
  "$SP" analyze "$mode.pb" --json > "$mode.json" || fail "$mode: analyze failed"
  "$SP" analyze "$mode.pb" > "$mode.txt" || fail "$mode: analyze failed"
  "$SP" whatif "$mode.pb" --cache 2M > "$mode.whatif" || fail "$mode: whatif failed"
  "$SP" whatif "$mode.pb" --cache 2M --json > "$mode.whatif.json" || fail "$mode: whatif --json failed"
  "$PY" - "$mode" "$kind" "$repeats" "$low" "$high" <<'PY' || fail "$mode: wrong order"
import json, sys
mode, kind, repeats, low, high = sys.argv[1], sys.argv[2], sys.argv[3] == "true", float(sys.argv[4]), float(sys.argv[5])
(l,) = json.load(open(mode + ".json"))["loaders"]
assert l["config"]["sampler"] == kind, l["config"]["sampler"]
assert l["config"]["sampler_order_repeats"] == repeats, l["config"]
(w,) = json.load(open(mode + ".whatif.json"))["loaders"]
hit = w["scenarios"][0]["prediction"]["hit_ratio"]
assert low <= hit <= high, (hit, low, high)
print(f"{mode}: sampler {kind}, repeats {repeats}, hit ratio at half the dataset {hit:.2f}")
PY
  grep -q "dataset: 4.00 MiB in 64 items, $order order" "$mode.whatif" ||
    fail "$mode: whatif does not take the order as $order: $(grep 'dataset:' "$mode.whatif")"
}
check set_epoch DistributedSampler false random 0.05 1
check no_set_epoch DistributedSampler true sequential 0 0.01
check ordered sequential false sequential 0 0.01
grep -q "the same order every epoch: set_epoch(epoch) was not called" no_set_epoch.txt ||
  fail "analyze does not tell the repeated shuffle: $(grep -m1 'batch 8' no_set_epoch.txt)"
grep -q "same shuffle every epoch: the sampler's set_epoch was not called" no_set_epoch.whatif ||
  fail "whatif does not say why the order is a cycle: $(grep 'dataset:' no_set_epoch.whatif)"
if grep -q "the same order every epoch" set_epoch.txt; then fail "a sampler given set_epoch is told it repeats"; fi
echo "PASS"
