#!/usr/bin/env bash
# A loader without workers in a job that holds 2 GiB in memory, 4 batches an
# epoch over 12 epochs: its workers, were it given them, would be forked and
# joined every epoch, and a fork copies the page tables of the whole process
# (as the child's exit tears them down). The worker `stallprof run` times
# after such a job is forked from a fresh process of about 230 MiB, so its
# start-up is a floor: predicted from it alone, 2 workers' whole run came out
# +150% (a 33 ms start-up an epoch where the 2-worker runs spent 150 ms, and
# 69 ms joining). The timing now also times this process's fork and its
# child's exit per resident MiB, and whatif adds them for the job's larger
# process: the forks worker after worker, the exits once a wave of workers.
# Expected values come from the 2-worker runs; the check that the floor alone
# would miss by more than twice the bound keeps the case telling. This host's
# speed moves from minute to minute (one timing read the fork at 24.7 us a
# MiB, the next 37.7; single predictions erred -25% to +13%), so three
# profiles alternate with three 2-worker runs and their medians are held
# against each other (six when the three miss).
source "$(dirname "$0")/lib.sh"
need_torch
available=$(awk '/MemAvailable/ { print int($2 / 1024) }' /proc/meminfo)
[ "$available" -ge 6144 ] || skip "needs 6 GiB of available memory to hold 2 GiB in the job (has $available MiB)"
[ "$(nproc)" -ge 2 ] || skip "needs 2 cores"
require_quiet_cpus
cd "$TMP"
cat > held.py <<'PY'
import sys, time, torch
from torch.utils.data import DataLoader, Dataset


def burn(ms):  # CPU time in Python
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


HELD = torch.ones(int(sys.argv[2]) << 18)  # MiB of float32, every page written: resident


class InMemory(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        burn(0.2)
        return HELD[i * 64:(i + 1) * 64].clone()


train_loader = DataLoader(InMemory(), batch_size=16, num_workers=int(sys.argv[1]))
for epoch in range(12):
    for x in train_loader:
        burn(3)  # the training step
PY
pair() {  # pair <letter>: a profile without workers, its prediction for 2, and a 2-worker run
  local run=$1
  $SP run -q -o w0$run.pb -- "$PY" held.py 0 2048 >run0$run.log 2>&1 || fail "the run failed: $(tail -3 run0$run.log)"
  $SP analyze w0$run.pb --json >a0$run.json || fail "analyze failed"
  $SP whatif w0$run.pb --workers 2 --json >p2$run.json || fail "whatif failed"
  $SP run -q -o w2$run.pb -- "$PY" held.py 2 2048 >run2$run.log 2>&1 || fail "the run failed: $(tail -3 run2$run.log)"
  $SP analyze w2$run.pb --json >a2$run.json || fail "analyze failed"
}
for run in a b c; do pair $run; done
$SP whatif w0a.pb --workers 2 | grep "worker start-up"
# check <letters>: the medians of those pairs; exit 3 when only the bound on
# the error fails.
check() {
"$PY" - "$1" <<'PY'
import json, sys
epochs, samples = 12, 12 * 64
predictions, floors = [], []
for r in sys.argv[1]:
    config = json.load(open(f"a0{r}.json"))["loaders"][0]["config"]
    prediction = json.load(open(f"p2{r}.json"))["loaders"][0]["scenarios"][0]["prediction"]
    predicted = prediction["whole_run_samples_per_s"]
    # The floor: the same run with the timed worker's start-up and join alone
    # (2 workers on 2 cores: one wave, each joined).
    floor_startup = config["ipc_startup_s"] + 2 * config["ipc_shutdown_s"]
    floor_s = samples / predicted - epochs * (prediction["startup_s_per_epoch"] - floor_startup)
    predictions.append(predicted)
    floors.append(samples / floor_s)
    print(f"timed: start-up {config['ipc_startup_s'] * 1e3:.1f} ms, shutdown {config['ipc_shutdown_s'] * 1e3:.1f} ms, "
          f"from {config['ipc_rss_bytes'] / 2**20:.0f} MiB; fork {config['ipc_fork_s_per_mib'] * 1e6:.1f} us a MiB, "
          f"exit {config['ipc_exit_s_per_mib'] * 1e6:.1f} us a MiB: 2 workers predicted {predicted:.1f} samples/s "
          f"(start-up and shutdown {prediction['startup_s_per_epoch'] * 1e3:.0f} ms an epoch), "
          f"the timed worker's alone {samples / floor_s:.1f}")
runs = sorted(json.load(open(f"a2{r}.json"))["loaders"][0]["samples_per_s"] for r in sys.argv[1])
middle = len(runs) // 2  # 3 or 6 pairs: the median (the upper middle of 6)
measured, predicted, floor = runs[middle], sorted(predictions)[middle], sorted(floors)[middle]
error, floor_error = predicted / measured - 1, floor / measured - 1
print(f"2 workers, whole run: predicted {predicted:.1f} samples/s (median), measured {[round(r, 1) for r in runs]}, "
      f"median {measured:.1f} ({error:+.1%}); the timed worker's alone {floor:.1f} ({floor_error:+.1%})")
if floor_error <= 0.40:
    # The 2-worker runs forked as cheaply as the timed worker (2026-12-05
    # 05:28: measured 476-652 samples/s, the timed worker's floor -1.8%):
    # nothing here tells the scaling from the floor, so the case did not run.
    print("the case does not tell the scaling apart from the floor: the 2-worker runs paid no more than the timed worker")
    sys.exit(4)
# Still a floor on the start-up, so the figure errs high: the job's steps
# write its pages copy-on-write while the workers live, which no timing after
# the run prices (whatif says so). Medians +8.2% and +14.7% (2026-12-03),
# +20.8% in a CI run that day, +26.3% and then +20.2% over six pairs in a CI
# run of 2026-12-04; +33.7% and then +34.1% over six pairs in a CI run of
# 2026-12-05 on an Intel host (the timed fork 6.7-7.7 us a MiB there, where
# the AMD host's read 11-38): held to 40% above, 20% below.
if not -0.20 <= error <= 0.40:
    print(f"predicted {predicted:.1f} against {measured:.1f}: outside -20% to +40%")
    sys.exit(3)
PY
}
# Three pairs missed by +20.8% once in a fresh-clone CI run (2026-12-03) where
# they had met within 15% before: a miss gets three more pairs, and the
# medians of all six are held to the same bound.
status=0
check abc || status=$?
if [ "$status" = 3 ]; then
  for run in d e f; do pair $run; done
  status=0
  check abcdef || status=$?
fi
[ "$status" = 4 ] && skip "the 2-worker runs forked as cheaply as the timed worker, so the case could not tell the model from its floor (above)"
[ "$status" = 0 ] || fail "the start-up of a large process's workers is predicted wrong (above)"
echo PASS
