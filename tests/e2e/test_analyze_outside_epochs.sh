#!/usr/bin/env bash
# A GAN-style loop over itertools.cycle(loader) trains on after the loader's
# one epoch: cycle replays the batches it saved and never asks the loader
# again. analyze's verdict covers the epoch only, so it says how much of the
# run passed outside every epoch. Set costs (no workers): 4 batches, a step
# that burns 30 ms of CPU, 100 iterations: the epoch about 4 x 30 ms, after it
# the replay (about 96 x 30 = 2.9 s, timed by the script) and an immediate
# exit (os._exit: no teardown, whose time stretches under load). Before the
# loader, 3 s of sleep stand for a slow host's torch import (a CI host's hid
# the note when it counted against the run's whole time).
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat > cycle.py <<'PY'
import itertools, os, time, torch

class Items(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        return torch.zeros(4)

time.sleep(3)  # a slow host's imports, before the first epoch
loader = torch.utils.data.DataLoader(Items(), batch_size=2)
for it, batch in enumerate(itertools.cycle(loader)):
    if it == 4:
        replay_from = time.monotonic()  # cycle's first saved batch: the loader is done
    if it == 100:
        break
    t = time.thread_time()
    while time.thread_time() - t < 0.030:
        pass
print("replayed %.3f s" % (time.monotonic() - replay_from), flush=True)
os._exit(0)  # no interpreter teardown: its time under load is not this test's
PY
$SP run -q -o cycle.pb -- "$PY" cycle.py >run.log 2>&1 || fail "the run failed: $(tail -3 run.log)"
replayed=$(sed -n 's/^replayed \([0-9.]*\) s$/\1/p' run.log)
[ -n "$replayed" ] || fail "the script did not time its replay: $(cat run.log)"
$SP analyze cycle.pb >cycle.txt || fail "analyze failed"
$SP analyze cycle.pb --json >cycle.json || fail "analyze --json failed"
grep -q "^[0-9.]* s of the run's [0-9.]* s ([0-9]*%) passed outside the loaders' epochs" cycle.txt ||
  fail "no note of the time outside the epochs: $(sed -n 1,3p cycle.txt)"
grep -q "^  run [0-9.]* s: in the loaders' epochs" cycle.txt || fail "no run line under System: $(grep -A2 ^System cycle.txt)"
"$PY" - cycle.json "$replayed" <<'PY' || fail "the time outside the epoch is not measured (above)"
import json, sys
c = json.load(open(sys.argv[1]))["traces"][0]["coverage"]
replayed = float(sys.argv[2])
print("in epochs %.3f s (set cost 0.12), after %.3f s (the script replayed for %.3f s, then exited)"
      % (c["in_epochs_s"], c["after_s"], replayed))
assert 0.08 <= c["in_epochs_s"] <= 0.6, c  # 0.25 s beside two busy loops
# The script leaves by os._exit right after its print; the launcher's handoff
# timing after the exit (about a second) is not the run's.
assert replayed <= c["after_s"] <= replayed + 0.3, c
PY
echo PASS
