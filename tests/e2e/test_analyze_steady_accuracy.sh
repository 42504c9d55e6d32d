#!/usr/bin/env bash
# Steady samples/s on short epochs, against the workload's set costs: 130
# samples an epoch in batches of 16 (8 full batches and one of 2), 1 ms of CPU
# a sample, a 5 ms step (sleep).
# - A rank's share under a DistributedSampler (260 samples over 2 replicas,
#   rank 0): the hook records the sampler's length, and the partial last
#   batch counts 2 samples, not 16.
# - No workers: the steady state is 130 samples per 8 x 21 + 7 ms (743
#   samples/s, less the loop's own cost); counting the partial batch as full
#   read 900. The script times its own last 11 epochs: analyze's steady
#   figure is within 5% of that (a slow host slows both).
# - One worker: it cannot deliver more than its CPU allows (130 samples per
#   130 ms of CPU: 1000 samples/s); each epoch's last batches, in flight when
#   the sampler ran out, came out faster than that (the steady state read
#   1045 with them).
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
cat >"$TMP/short_epochs.py" <<'PY'
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

class Items(Dataset):
    def __len__(self):
        return 260
    def __getitem__(self, i):
        burn(0.001)
        return torch.zeros(4)

workers = int(sys.argv[1])
sampler = DistributedSampler(Items(), num_replicas=2, rank=0, shuffle=False)
loader = DataLoader(Items(), batch_size=16, sampler=sampler, num_workers=workers,
                    persistent_workers=workers > 0)
for epoch in range(12):
    if epoch == 1:
        since = time.monotonic()  # after the first epoch (the warm-up)
    for batch in loader:
        time.sleep(0.005)
print("epochs 1-11: %.1f samples/s" % (11 * 130 / (time.monotonic() - since)), flush=True)
PY
# check <trace> <python expression over the loader's JSON l and the script's
# own rate over its last 11 epochs (timed), True to pass> <what>
check() {
  "$SP" analyze "$1" --json >"$1.json" || fail "analyze $1 failed"
  "$PY" - "$1.json" "$2" "$(sed -n 's/^epochs 1-11: \([0-9.]*\) samples\/s$/\1/p' "$1.log")" <<'PY' || fail "$1: $3"
import json, sys
l = json.load(open(sys.argv[1]))["loaders"][0]
timed = float(sys.argv[3])
print(f"the script timed {timed:.1f} samples/s over its last 11 epochs")
ok = eval(sys.argv[2])
print(f"{sys.argv[1]}: steady {l['steady_samples_per_s']:.1f} samples/s, epochs of "
      f"{[e['samples'] for e in l['epochs']][:3]} samples, sampler_len {l['config']['sampler_len']}")
sys.exit(0 if ok else 1)
PY
}
"$SP" run -q -o "$TMP/w0.pb" -- "$PY" "$TMP/short_epochs.py" 0 >"$TMP/w0.pb.log" || fail "the run without workers failed"
check "$TMP/w0.pb" 'l["config"]["sampler_len"] == 130 and all(e["samples"] == 130 for e in l["epochs"])' \
  "the rank's epochs are not 130 samples each"
# Against the script's own timing (a slow host slows both; the partial batch
# counted as full reads 21% high) and at most the set costs' 743.
check "$TMP/w0.pb" '0.95 * timed <= l["steady_samples_per_s"] <= min(1.05 * timed, 743 * 1.05)' \
  "steady samples/s not the script's own (within 5%) or above the set costs' 743 (130 samples per 175 ms)"
"$SP" run -q -o "$TMP/w1.pb" -- "$PY" "$TMP/short_epochs.py" 1 >"$TMP/w1.pb.log" || fail "the run with a worker failed"
check "$TMP/w1.pb" 'l["drain_iterations"] == 2 and 0.75 * timed <= l["steady_samples_per_s"] <= 1000 * 1.02' \
  "one worker's steady samples/s above what its CPU allows (1000) or far below it"
echo PASS
