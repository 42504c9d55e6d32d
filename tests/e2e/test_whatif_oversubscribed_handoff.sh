#!/usr/bin/env bash
# Two workers and a CPU step on one core: the handoff the profile measures
# (next() calls whose batch was already fetched) is mostly the main thread's
# run-queue delay and the workers' sending, which the simulation predicts from
# the core they share. Taken as receive CPU whole (the larger of handoff and
# receive), the delay was paid twice and the profile's own baseline predicted
# -10% to -18% (-14.5% in this test); calibrated, -0.3% to -6.7%. On
# 2026-12-03/04 this host ran the job faster (1430-1510 samples/s against
# 1330) and the calibrated baseline read -8.8% to -10.4% in every run (a
# fresh-clone CI run failed at -10.4%), while the receive taken whole came
# to about -19%. The bound is 15%, between the two, and the text must name
# the receive calibrated. (Holding the calibrated receive to the measured step
# made the baseline exact but predicted 2 cores +27% against +15% for this
# calibration, measured 2216-2298 samples/s: the receive's excess wall time
# stands for contention that more cores relieve, and as CPU the simulation
# relieves it.) On a slower host (a CI
# run at 833 samples/s against 1330 here) the simulation with the receive
# taken whole came out no longer than the measured handoff, so there was no
# double count to calibrate away: the baseline still held (-0.5%), and the
# test reports a skip, since the calibration went unexercised.
source "$(dirname "$0")/lib.sh"
need_torch
taskset -c 0 true 2>/dev/null || skip "taskset cannot pin to core 0"
require_quiet_cpus
cd "$TMP"
taskset -c 0 $SP run -q -o one.pb -- "$PY" "$WORKLOADS/synthetic.py" --workers 2 --batches 300 --batch-size 16 \
  --sample-floats 16384 --prep-cpu-ms 0.3 --compute-ms 4 --compute-mode cpu >/dev/null 2>&1 || fail "run failed"
$SP whatif one.pb --json >w.json || fail "whatif failed"
$SP whatif one.pb >w.txt || fail "whatif failed"
grep "receive per batch" w.txt || fail "whatif's inputs do not list the main loop's receive"
"$PY" - w.json <<'PY' || fail "the oversubscribed profile's baseline is off (above)"
import json, sys
l = json.load(open(sys.argv[1]))["loaders"][0]
base = l["baseline"]
error = base["samples_per_s"] / l["measured_samples_per_s"] - 1
print(f"baseline predicted {base['samples_per_s']:.0f}, measured {l['measured_samples_per_s']:.0f}: {error:+.1%}; "
      f"the main loop's receive {base['handoff_s'] * 1e3:.2f} ms a batch")
assert abs(error) <= 0.15, error
PY
if ! grep -q "calibrated" w.txt; then
  grep -q "handoff came out no longer" w.txt &&
    skip "the baseline held, but this run's handoff needed no calibration (the receive taken whole simulated no longer than measured): the calibration went untested"
  fail "the receive was not calibrated: $(grep 'receive per batch' w.txt)"
fi
echo PASS
