#!/usr/bin/env bash
# Two loaders iterated together (`for a, b in zip(fast, slow)`, as in
# semi-supervised or domain-adaptation training): each loader's compute line
# holds the other's next(), and analyze names it there, in the headline and in
# the advice, so that the slow loader's wait is not read as the model's time.
# Set costs (no workers): fast's batch is 16 x 0.5 ms of CPU, slow's 16 x 2 ms,
# the step burns 10 ms.
# Then with a worker each, on 2 cores: the other loader's worker is the job's
# own load beside this one, kept in whatif's scenarios. Set costs: each batch
# 16 x 1 ms of CPU in either loader, a 10 ms step: 42 ms of CPU a step on 2
# cores, so no worker count delivers more than 16 / 21 ms = 762 samples/s.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat > burn.py <<'PY'
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
PY
cat > zipped.py <<'PY'
import time, torch
from burn import Burn

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
    own_wait = loaders[other]["steady"]["wait"]["mean_s"]
    print("%s: %s's next() %.1f ms a batch in its steps (set cost %.0f ms of CPU; %s's own wait %.1f ms a batch)"
          % (me["name"], other, per_batch * 1e3, set_cost * 1e3, other, own_wait * 1e3))
    assert len(zipped) == 1 and zipped[0]["name"] == other, zipped
    # At least the set CPU (a wait is never shorter than its burn), and the
    # other loader's own measured wait: a slow host stretches both alike.
    assert 0.8 * set_cost <= per_batch and abs(per_batch / own_wait - 1) <= 0.15, per_batch
    assert me["nested_loaders"] == [], me["nested_loaders"]
PY

[ "$(nproc)" -ge 2 ] || skip "the zipped loaders with workers need 2 cores (the first part passed)"
require_quiet_cpus
cat > workers.py <<'PY'
import time, torch
from burn import Burn
a = torch.utils.data.DataLoader(Burn(640, 0.001), batch_size=16, num_workers=1)
b = torch.utils.data.DataLoader(Burn(640, 0.001), batch_size=16, num_workers=1)
for epoch in range(2):
    for x, y in zip(a, b):
        t = time.thread_time()
        while time.thread_time() - t < 0.010:
            pass
PY
$SP run -q -o workers.pb -- "$PY" workers.py >run2.log 2>&1 || fail "the run with workers failed: $(tail -3 run2.log)"
$SP whatif workers.pb --loader a --workers 1,2 --json >whatif.json || fail "whatif failed"
$SP whatif workers.pb --loader a --workers 2 >whatif.txt || fail "whatif failed"
grep -q "the workers of the loaders iterated with this one ('b'): [0-9.]* busy threads" whatif.txt ||
  fail "whatif does not name b's workers as the job's load: $(grep -i 'outside load' whatif.txt)"
"$PY" - whatif.json <<'PY' || fail "whatif took the other loader's worker away (above)"
import json, sys
d = json.load(open(sys.argv[1]))["loaders"][0]
rows = {r["workers"]: r["prediction"] for r in d["scenarios"]}
measured, two = d["measured_samples_per_s"], rows[2]["samples_per_s"]
print("a: measured %.1f samples/s with 1 worker; 2 workers predicted %.1f; the set costs' ceiling 762" % (measured, two))
assert two <= 1.1 * 762, two
PY
echo PASS
