#!/usr/bin/env bash
# recommend on a loader whose workers cost more than they save: batches of one
# trivial item (a few us to fetch) that the main process receives from a
# worker for hundreds of us (fast_loader.py), a 200 us step. Profiled with 2
# workers, recommend must propose num_workers=0, a DataLoader line torch
# accepts (no prefetch_factor, no persistent_workers), and a throughput
# within 20% of the bare runs without workers, which must beat the bare runs
# with 2 workers (what the workload's costs say, measured here; "no change"
# would miss by more than 2 x 20%).
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
cd "$TMP"
FLAGS=(--samples 3000 --epochs 2)

$SP run -q -o w2.pb -- "$PY" "$WORKLOADS/fast_loader.py" --workers 2 "${FLAGS[@]}" >/dev/null || fail "run failed"
$SP recommend w2.pb --json >plan.json || fail "recommend --json failed"
$SP recommend w2.pb >plan.txt || fail "recommend failed"
cat plan.txt

# Bare runs, alternated: the last epoch's samples/s.
rate() { "$PY" "$WORKLOADS/fast_loader.py" "$@" "${FLAGS[@]}" | sed -n 's/.*(\([0-9.]*\) samples\/s)$/\1/p' | tail -1; }
w0=() w2=()
for _ in 1 2 3; do
  w0+=("$(rate --workers 0)")
  w2+=("$(rate --workers 2)")
done
echo "bare runs: num_workers=0 ${w0[*]}; num_workers=2 ${w2[*]} samples/s"

"$PY" - plan.json "${w0[*]}" "${w2[*]}" <<'PY' || fail "recommend's plan without workers is off (above)"
import json, statistics, sys
plan = json.load(open(sys.argv[1]))["loaders"][0]
w0 = statistics.median(float(x) for x in sys.argv[2].split())
w2 = statistics.median(float(x) for x in sys.argv[3].split())
print(f"proposed num_workers={plan['num_workers']}, predicted {plan['predicted_samples_per_s']:.0f} samples/s; "
      f"measured {w0:.0f} without workers, {w2:.0f} with 2")
assert w0 > 1.5 * w2, "the workload's handoff no longer outweighs its fetch: the case tests nothing"
assert plan["num_workers"] == 0, plan["num_workers"]
assert plan["prefetch_factor"] is None
assert plan["dataloader"] == "DataLoader(..., num_workers=0, pin_memory=torch.cuda.is_available())", plan["dataloader"]
assert plan["lp_workers"]["num_workers"] >= 1
error = plan["predicted_samples_per_s"] / w0 - 1
print(f"error {error:+.1%}")
assert abs(error) <= 0.20, error
PY
# The line must be one torch accepts (torch raises ValueError for prefetch_factor or persistent_workers without workers).
"$PY" - plan.json <<'PY' || fail "torch rejects the proposed DataLoader line"
import json, sys, torch
from torch.utils.data import DataLoader
line = json.load(open(sys.argv[1]))["loaders"][0]["dataloader"]
loader = eval(line.replace("...", "range(8)"))
assert sum(1 for _ in loader) == 8
PY
echo "PASS"
