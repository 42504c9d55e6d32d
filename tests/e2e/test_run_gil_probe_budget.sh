#!/usr/bin/env bash
# The GIL probe's budget in worker processes is per loader (48 probes over
# all of a loader's workers, a counter in a page they inherit), spent by the
# probes themselves. A fast loader whose non-persistent workers start four
# times first (fetches under 1 ms: they never probe) leaves a later held
# loader's workers their probes: when the budget went to the first four
# processes forked, whatever loader they served, the held loader got none
# and its GIL was "not measured".
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat > two.py <<'PY'
import time, torch
from torch.utils.data import DataLoader, Dataset


def burn(ms):  # CPU time in Python, holding the GIL
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


class PythonSamples(Dataset):
    def __init__(self, n, ms):
        self.n, self.ms = n, ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        burn(self.ms)
        return i


fast = DataLoader(PythonSamples(64, 0), batch_size=16, num_workers=2)
held = DataLoader(PythonSamples(1920, 0.1), batch_size=16, num_workers=1)
for epoch in range(2):
    for x in fast:
        pass
for epoch in range(3):
    for x in held:
        burn(1.5)
PY
$SP run -q -o t.pb -- "$PY" two.py >run.log 2>&1 || fail "the run failed: $(tail -3 run.log)"
$SP analyze t.pb --json >a.json || fail "analyze failed"
"$PY" - <<'PY' || fail "the held loader's workers were left without probes (above)"
import json
loaders = {l["name"]: l for l in json.load(open("a.json"))["loaders"]}
probes = {name: l["prefetch"]["gil_probes_held"] + l["prefetch"]["gil_probes_free"] for name, l in loaders.items()}
print("probes per loader:", probes)
assert probes["fast"] == 0, probes  # fetches under 1 ms are never probed
assert probes["held"] >= 10, probes  # 3 epochs of about 0.3 s, 50 ms apart: 12-18 here
PY
echo PASS
