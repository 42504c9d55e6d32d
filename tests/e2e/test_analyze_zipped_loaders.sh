#!/usr/bin/env bash
# Two loaders iterated together (`for a, b in zip(fast, slow)`, as in
# semi-supervised or domain-adaptation training): each loader's compute line
# holds the other's next(), and analyze names it there, in the headline and in
# the advice, so that the slow loader's wait is not read as the model's time.
# Set costs (no workers): fast's batch is 16 x 0.5 ms of CPU, slow's 16 x 2 ms,
# the step burns 10 ms.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat > zipped.py <<'PY'
import time, torch

class Burn(torch.utils.data.Dataset):
    def __init__(self, n, cpu_s):
        self.n, self.cpu_s = n, cpu_s
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        t = time.thread_time()
        while time.thread_time() - t < self.cpu_s:
            pass
        return torch.zeros(8)

fast = torch.utils.data.DataLoader(Burn(320, 0.0005), batch_size=16)
slow = torch.utils.data.DataLoader(Burn(320, 0.002), batch_size=16)
for epoch in range(2):
    for a, b in zip(fast, slow):
        t = time.thread_time()
        while time.thread_time() - t < 0.010:
            pass
PY
$SP run -q -o zipped.pb -- "$PY" zipped.py >run.log 2>&1 || fail "the run failed: $(tail -3 run.log)"
$SP analyze zipped.pb >zipped.txt || fail "analyze failed"
$SP analyze zipped.pb --json >zipped.json || fail "analyze --json failed"
grep -q "^fast: .*; and [0-9]*% for loader 'slow' (zipped)" zipped.txt ||
  fail "fast's headline does not name slow's wait: $(sed -n 1,2p zipped.txt)"
grep -q "compute: loader 'slow''s next() takes [0-9]*% of the step" zipped.txt ||
  fail "fast's advice does not name slow's wait: $(grep -A4 advice: zipped.txt)"
"$PY" - zipped.json <<'PY' || fail "the zipped loaders' waits are not measured (above)"
import json, sys
loaders = {l["name"]: l for l in json.load(open(sys.argv[1]))["loaders"]}
fast, slow = loaders["fast"], loaders["slow"]
for me, other, set_cost in ((fast, "slow", 0.032), (slow, "fast", 0.008)):
    zipped = me["zipped_loaders"]
    per_batch = zipped[0]["steady_seconds"] / me["steady"]["step"]["count"] if zipped else 0
    print("%s: %s's next() %.1f ms a batch in its steps (set cost %.0f ms)" % (me["name"], other, per_batch * 1e3, set_cost * 1e3))
    assert len(zipped) == 1 and zipped[0]["name"] == other, zipped
    assert 0.8 * set_cost <= per_batch <= 1.25 * set_cost, per_batch
    assert me["nested_loaders"] == [], me["nested_loaders"]
PY
echo PASS
