#!/usr/bin/env bash
# A loop that reads a batch ahead (apex's data_prefetcher, timm's
# PrefetchLoader: the wrapper asks for batch i + 1 before the step on batch
# i) meets each epoch's StopIteration before its last batch's step. The
# analysis sees every epoch's first two next() calls come together, takes
# the loop as reading ahead, and counts that last step up to the next
# iter(): the compute per batch is the step, and the whole run matches the
# script's own clock. Before, each epoch had a compute of next to nothing:
# 2-batch epochs of a 100 ms step read a 50 ms compute and 1098 samples/s
# where the script measured 768. A plain loop over the same loader does not
# read ahead. whatif's whole run of either is the run's own.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat > ahead.py <<'PY'
import sys, time, torch
from torch.utils.data import DataLoader, Dataset


class Busy(Dataset):  # 0.5 ms of CPU a sample
    def __len__(self):
        return 64

    def __getitem__(self, i):
        t = time.thread_time()
        while time.thread_time() - t < 0.0005:
            pass
        return torch.zeros(16)


class DataPrefetcher:  # apex's examples/imagenet data_prefetcher, without CUDA
    def __init__(self, loader):
        self.loader = iter(loader)
        self.preload()

    def preload(self):
        try:
            self.next_input = next(self.loader)
        except StopIteration:
            self.next_input = None

    def next(self):
        batch = self.next_input
        self.preload()
        return batch


workers, mode = int(sys.argv[1]), sys.argv[2]
loader = DataLoader(Busy(), batch_size=16, num_workers=workers)
t0 = time.perf_counter()
n = 0
for epoch in range(6):
    if mode == "ahead":
        prefetcher = DataPrefetcher(loader)
        x = prefetcher.next()
        while x is not None:
            time.sleep(0.04)
            n += len(x)
            x = prefetcher.next()
    else:
        for x in loader:
            time.sleep(0.04)
            n += len(x)
print(f"own: {n / (time.perf_counter() - t0):.1f}")
PY
for workers in 0 2; do
  for mode in ahead plain; do
    $SP run -q -o $mode$workers.pb -- "$PY" ahead.py $workers $mode >$mode$workers.log 2>&1 ||
      fail "the $mode run failed: $(tail -3 $mode$workers.log)"
    $SP analyze $mode$workers.pb --json >$mode$workers.json || fail "analyze of the $mode run failed"
    "$PY" - $mode$workers.json "$(sed -n 's/^own: //p' $mode$workers.log)" $mode $workers <<'PY' ||
import json, sys
l = json.load(open(sys.argv[1]))["loaders"][0]
own, mode, workers = float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
lines = {x["cause"]: x for x in l["account"]["whole_run"]["lines"]}
compute = lines["compute"]["seconds"] / l["stepped_iterations"]
print(f"{mode}, {workers} workers: reads_ahead {l['reads_ahead']}; whole run {l['samples_per_s']:.1f} samples/s, "
      f"the script's own {own:.1f}; {l['iterations']} iterations, {l['stepped_iterations']} stepped, "
      f"compute {compute * 1e3:.1f} ms a step")
assert l["reads_ahead"] == (mode == "ahead"), l["reads_ahead"]
assert l["iterations"] == 24, l["iterations"]
# The last epoch's last step has no iter() after it: not seen.
assert l["stepped_iterations"] == (23 if mode == "ahead" else 24), l["stepped_iterations"]
assert 0.039 <= compute <= 0.046, compute  # the 40 ms sleep
# The run's last step, unseen, and its batch's wait, seen: 1/24 of the run at most.
assert abs(l["samples_per_s"] / own - 1) <= 0.06, (l["samples_per_s"], own)
PY
      fail "the $mode loop's steps are not the script's (above)"
  done
done
# whatif's baseline whole run from the profile without workers is the run's
# own: it simulates 4 batches an epoch, and counts 4 batches' samples in
# them, where the profile stepped 23 of 24 (3.83 an epoch's samples in 4
# batches' time was 1/24 = 4.2% low).
for mode in ahead plain; do
  $SP whatif ${mode}0.pb --json >${mode}0.whatif.json || fail "whatif of the $mode run failed"
  "$PY" - ${mode}0.whatif.json $mode <<'PY' || fail "whatif's baseline whole run of the $mode loop is not the run's (above)"
import json, sys
l = json.load(open(sys.argv[1]))["loaders"][0]
print(f"{sys.argv[2]}: whatif's baseline whole run {l['baseline']['whole_run_samples_per_s']:.1f} samples/s, "
      f"measured {l['measured_whole_run_samples_per_s']:.1f}: error {l['whole_run_model_error']:+.1%}")
assert abs(l["whole_run_model_error"]) <= 0.025, l["whole_run_model_error"]
PY
done
echo PASS
