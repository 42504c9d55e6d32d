#!/usr/bin/env bash
# A validation pass every 20 training steps, inside the training epoch (a
# common loop): the val loader's epochs run whole inside train's steps.
# analyze leaves them out of train's compute, step and epoch times (as it does
# a validation pass between epochs) and names them; val keeps its own account.
# Set costs: the training step sleeps 4 ms; a val epoch is 5 batches whose
# steps sleep 10 ms, run 4 times, after steps 20, 40, 60 and 80. A step that
# kept a val epoch would take 54 ms or more; the bound is 40 ms, since a 4 ms
# sleep beside other tests once took 13.6 ms (a CI run, 2026-11-27, when the
# val steps slept 2 ms and the bound was 12 ms).
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat > midval.py <<'PY'
import time, torch
from torch.utils.data import DataLoader, TensorDataset

train_loader = DataLoader(TensorDataset(torch.zeros(640, 4)), batch_size=8, shuffle=True)
val_loader = DataLoader(TensorDataset(torch.zeros(160, 4)), batch_size=32)
step = 0
for x, in train_loader:
    time.sleep(0.004)  # the training step
    step += 1
    if step % 20 == 0:
        for v, in val_loader:
            time.sleep(0.010)
PY
$SP run -q -o midval.pb -- "$PY" midval.py >run.log 2>&1 || fail "the run failed: $(tail -3 run.log)"
$SP analyze midval.pb >midval.txt || fail "analyze failed"
$SP analyze midval.pb --json >midval.json || fail "analyze --json failed"
grep -q "loader 'val' ran whole inside this loader's steps 4 time(s)" midval.txt ||
  fail "analyze does not name the nested loader: $(sed -n 1,8p midval.txt)"
"$PY" - midval.json <<'PY' || fail "the nested loader's time is not left out (above)"
import json, sys
loaders = {l["name"]: l for l in json.load(open(sys.argv[1]))["loaders"]}
train, val = loaders["train"], loaders["val"]
nested = train["nested_loaders"]
print("train compute p99 %.2f ms, max %.2f ms; nested %s" % (train["steady"]["compute"]["p99_s"] * 1e3,
      train["with_warmup"]["compute"]["max_s"] * 1e3, nested))
assert len(nested) == 1 and nested[0]["name"] == "val" and nested[0]["runs"] == 4, nested
# 5 x 10 ms of sleep at least per val epoch; without the fix, 4 steps take 4 + 50 ms.
assert nested[0]["seconds"] >= 4 * 0.050, nested
assert train["with_warmup"]["compute"]["max_s"] < 0.004 + 0.036, train["with_warmup"]["compute"]
wall = train["account"]["whole_run"]["wall_s"]
assert wall < train["active_s"] + 1e-6 and abs(wall - train["active_s"]) / wall < 0.01, (wall, train["active_s"])
assert val["iterations"] == 20, val["iterations"]
PY
echo PASS
