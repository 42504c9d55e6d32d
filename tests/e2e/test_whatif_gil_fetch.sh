#!/usr/bin/env bash
# A 1-worker loader whose samples are pure Python (16 x 0.3 ms of CPU a
# batch, holding the GIL) beside a 4 ms CPU step. The worker's threads that
# send a finished batch and hand its memory to the main process need the GIL
# its next fetch holds, and torch sends the next index only after the
# receive: the worker idles for it. whatif's baseline took the sending to run
# beside the fetch and missed by +14% (prefetch_factor=2) and +22% (4); the
# profile now measures the GIL held (sends_held) and the simulation holds the
# sending and the receive for the fetch.
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
cd "$TMP"
cat > pyloader.py <<'PY'
import sys, time, torch
from torch.utils.data import DataLoader, Dataset


def burn(ms):  # CPU time in Python, holding the GIL
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


class PythonSamples(Dataset):
    def __len__(self):
        return 1280

    def __getitem__(self, i):
        burn(0.3)
        return torch.zeros(8)


train_loader = DataLoader(PythonSamples(), batch_size=16, shuffle=True, num_workers=1,
                          prefetch_factor=int(sys.argv[1]))
for epoch in range(2):
    for x in train_loader:
        burn(4)  # the training step
PY
for depth in 2 4; do
  $SP run -q -o p$depth.pb -- "$PY" pyloader.py $depth >run$depth.log 2>&1 || fail "the run failed: $(tail -3 run$depth.log)"
  $SP whatif p$depth.pb --json >p$depth.json || fail "whatif failed"
  $SP analyze p$depth.pb --json >a$depth.json || fail "analyze failed"
done
"$PY" - a2.json p2.json a4.json p4.json <<'PY' || fail "the GIL-held fetch is measured or predicted wrong (above)"
import json, sys
for a, p in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    prefetch = json.load(open(a))["loaders"][0]["prefetch"]
    w = json.load(open(p))["loaders"][0]
    predicted, measured = w["baseline"]["samples_per_s"], w["measured_samples_per_s"]
    print(f"{a}: sends held {prefetch['sends_held']}, free {prefetch['sends_free']}; baseline predicted {predicted:.0f}, measured {measured:.0f}")
    assert prefetch["sends_held"] >= 10 and prefetch["sends_held"] > 2 * prefetch["sends_free"], prefetch
    assert abs(predicted / measured - 1) <= 0.07, f"baseline {predicted:.0f} against {measured:.0f}"
PY
echo PASS
