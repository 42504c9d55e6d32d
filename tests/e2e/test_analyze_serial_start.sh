#!/usr/bin/env bash
# Spawned workers whose pickled Dataset overflows the pipe (64 KiB) start one
# after another inside __iter__: analyze's start-up advice names it, and whatif
# scales that part with the workers (1 worker: about half the start-up of 2).
# A Dataset of 1 KB starts its workers in parallel: no such advice. The set
# costs are the Dataset's pickled sizes (200 KB and 1 KB), not times.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat >"$TMP/spawn_start.py" <<'PY'
import sys, time, torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __init__(self, size): self.pad = b"x" * size
    def __len__(self): return 32
    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.zeros(4)
if __name__ == "__main__":
    train = DataLoader(D(int(sys.argv[1])), batch_size=4, num_workers=2, multiprocessing_context="spawn")
    for epoch in range(2):
        for x in train:
            time.sleep(0.01)
PY
for size in 200000 1000; do
  "$SP" run -o "$TMP/t$size.pb" -- "$PY" "$TMP/spawn_start.py" $size >"$TMP/out$size" 2>&1 || fail "run failed: $(cat "$TMP/out$size")"
  "$SP" analyze "$TMP/t$size.pb" >"$TMP/a$size" || fail "analyze failed"
done
grep -q "starting the 2 workers one after another" "$TMP/a200000" || fail "no serial start-up advice for a 200 KB Dataset: $(grep -A4 advice "$TMP/a200000")"
grep -q "one after another (" "$TMP/a1000" && fail "serial start-up advice for a 1 KB Dataset: $(grep -A4 advice "$TMP/a1000")"
"$SP" whatif "$TMP/t200000.pb" --workers 1,2 --json >"$TMP/w.json" || fail "whatif failed"
"$PY" - "$TMP/w.json" <<'PY' || fail "whatif did not scale the serial start-up with the workers"
import json, sys
loader = json.load(open(sys.argv[1]))["loaders"][0]
startup = {row["workers"]: row["prediction"]["startup_s_per_epoch"] for row in loader["scenarios"]}
ratio = startup[1] / startup[2]
print(f"start-up per epoch: 1 worker {startup[1]:.3f} s, 2 workers {startup[2]:.3f} s, ratio {ratio:.2f}")
# By the workers per core (2 cores) the ratio would be 1.
sys.exit(0 if 0.4 <= ratio <= 0.65 else 1)
PY
echo PASS
