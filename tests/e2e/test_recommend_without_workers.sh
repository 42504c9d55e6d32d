#!/usr/bin/env bash
# recommend on a loader whose workers cost more than they save: batches of one
# trivial item (a few us to fetch) that the main process receives from a
# worker for hundreds of us (fast_loader.py), a 200 us step. Profiled with 2
# workers, recommend must propose num_workers=0, a DataLoader line torch
# accepts (no prefetch_factor, no persistent_workers), and a throughput
# within 20% of the bare runs without workers, which must beat the bare runs
# with 2 workers (what the workload's costs say, measured here; "no change"
# would miss by more than 2 x 20%): the shared memory's costs the profile's
# fetches and steps paid, timed after the run, taken out.
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
cd "$TMP"
FLAGS=(--samples 3000 --epochs 2)

# Alternated rounds: a profile with 2 workers and its plan, then the bare runs
# (the last epoch's samples/s). The host's speed drifts by more than the
# bound between runs a minute apart: each plan is judged against the bare
# runs of its own round.
rate() { "$PY" "$WORKLOADS/fast_loader.py" "$@" "${FLAGS[@]}" | sed -n 's/.*(\([0-9.]*\) samples\/s)$/\1/p' | tail -1; }
w0=() w2=()
for round in 1 2 3; do
  $SP run -q -o w2_$round.pb -- "$PY" "$WORKLOADS/fast_loader.py" --workers 2 "${FLAGS[@]}" >/dev/null || fail "run failed"
  $SP recommend w2_$round.pb --json >plan$round.json || fail "recommend --json failed"
  $SP analyze w2_$round.pb --json >analysis$round.json || fail "analyze --json failed"
  w0+=("$(rate --workers 0)")
  w2+=("$(rate --workers 2)")
done
$SP recommend w2_1.pb >plan.txt || fail "recommend failed"
cat plan.txt
echo "bare runs: num_workers=0 ${w0[*]}; num_workers=2 ${w2[*]} samples/s"

set +e
"$PY" - "${w0[*]}" "${w2[*]}" <<'PY'
import json, statistics, sys
w0 = [float(x) for x in sys.argv[1].split()]
w2 = [float(x) for x in sys.argv[2].split()]
plans = [json.load(open(f"plan{r}.json"))["loaders"][0] for r in (1, 2, 3)]
for plan, a, b in zip(plans, w0, w2):
    print(f"proposed num_workers={plan['num_workers']}, predicted {plan['predicted_samples_per_s']:.0f} samples/s; "
          f"measured {a:.0f} without workers, {b:.0f} with 2 in the same round")
assert statistics.median(w0) > 1.5 * statistics.median(w2), "the workload's handoff no longer outweighs its fetch: the case tests nothing"
for plan in plans:
    assert plan["num_workers"] == 0, plan["num_workers"]
    assert plan["prefetch_factor"] is None
    assert plan["dataloader"] == "DataLoader(..., num_workers=0, pin_memory=torch.cuda.is_available())", plan["dataloader"]
    assert plan["lp_workers"]["num_workers"] >= 1
errors = sorted(plan["predicted_samples_per_s"] / a - 1 for plan, a in zip(plans, w0))
error = statistics.median(errors)
print(f"error {error:+.1%} (median of the rounds' {', '.join(f'{e:+.1%}' for e in errors)})")
# Profiled with workers, the fetches include collating into shared memory and
# the steps reading and freeing each received batch, which fetching in the
# main process does not pay: `stallprof run` times both after the job and the
# model takes them out. Untimed, the figure erred -10% to -23% a round here
# (2026-12-04, medians -12.2% to -22.4%); timed, -5.6% to +1.0% (medians
# -4.2%). "No change" misses by about -75%. A profile with workers cannot
# tell the 0-worker iterator's own code in next() (sampler, bookkeeping:
# 5.7 us of a 212 us batch in a 0-worker profile here on 2026-12-05, 19.7 of
# 234 the day before) from receiving: until it was timed after the run too
# (ipc_next_own_cpu_s), the plan left it out, and on 2026-12-04 the rounds
# read +5.3% to +23.1% (a fresh-clone CI run failed at a median of +22.3%;
# the bound was -20% to +25% until 2026-12-05). A CI run of 2026-12-06
# failed at +25.6%: the step's process CPU held the index queues' feeder
# threads beside the step (read as a step on 1.2 threads), and next() was
# timed back to back, not after a step; with the main thread's CPU measured
# apart and next() timed after a step, +1.8% to +8.7% here (median +3.4%).
own = [json.load(open(f"analysis{r}.json"))["loaders"][0]["config"]["ipc_next_own_cpu_s"] for r in (1, 2, 3)]
print("the iterator's own code in a next() without workers, timed after each run: " +
      ", ".join(f"{o * 1e6:.1f} us" if o is not None else "not timed" for o in own))
# At least what the bare iterator costs (about 4 us here), at most a fifth of the batch.
assert all(o is not None and 1e-6 < o < 0.2 / statistics.median(w0) for o in own), own
if not -0.20 <= error <= 0.20:
    sys.exit(78 if errors[-1] - errors[0] > 0.20 else 1)
PY
rc=$?
set -e
[ $rc -ne 78 ] || skip "the rounds' errors spread beyond the 20% bound (above): the host's speed moved between runs"
[ $rc -eq 0 ] || fail "recommend's plan without workers is off (above)"
# Timed, the figure is not low: recommend does not say it is.
! grep -qF "the first figure is low" plan.txt || fail "recommend calls its figure low though the shared memory's costs were timed"
# Without the timing, it does.
$SP run -q --no-handoff-timing -o untimed.pb -- "$PY" "$WORKLOADS/fast_loader.py" --workers 2 --samples 300 --epochs 1 >/dev/null ||
  fail "run --no-handoff-timing failed"
$SP recommend untimed.pb | grep -qF "profiled with workers, the first figure is low" ||
  fail "recommend does not say its figure without workers is low when the shared memory was not timed"
# The line must be one torch accepts (torch raises ValueError for prefetch_factor or persistent_workers without workers).
"$PY" - plan1.json <<'PY' || fail "torch rejects the proposed DataLoader line"
import json, sys, torch
from torch.utils.data import DataLoader
line = json.load(open(sys.argv[1]))["loaders"][0]["dataloader"]
loader = eval(line.replace("...", "range(8)"))
assert sum(1 for _ in loader) == 8
PY
echo "PASS"
