#!/usr/bin/env bash
# analyze against workloads whose true costs are set (scripts/workloads/synthetic.py,
# --batch-size 4): the account's lines per batch against the set costs, the
# stall fraction against the one the set costs imply, and the bottleneck.
# Expected values come from the flags only (never from what analyze reports).
# The workload sleeps to stand for slow I/O: no device bytes, so that is
# "other blocking", never storage (storage is tests/e2e/test_analyze_account.sh).
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"

# Per-batch tolerances: 15% for the serial cases (a 20 ms sleep wakes late on a
# busy shared machine), 30% where two workers share the cores with the main loop.
# check <name> <bottleneck(s), |-separated> <stall low> <stall high> <expected per batch: cause=seconds,...> <tolerance (relative)> <flags...>
check() {
  local name=$1 bottleneck=$2 stall_lo=$3 stall_hi=$4 lines=$5 rel=$6
  shift 6
  $SP run -q -o "$name.pb" -- "$PY" "$WORKLOADS/synthetic.py" --batch-size 4 "$@" >"$name.out" || fail "$name: run failed"
  $SP analyze "$name.pb" --json >"$name.json" || fail "$name: analyze failed"
  "$PY" - "$name" "$bottleneck" "$stall_lo" "$stall_hi" "$lines" "$rel" <<'PY' || fail "$name: measured values are off (above)"
import json, sys
name, bottleneck, stall_lo, stall_hi, lines, rel = sys.argv[1:]
stall_lo, stall_hi, rel = float(stall_lo), float(stall_hi), float(rel)
want = {k: float(v) for k, v in (x.split("=") for x in lines.split(","))}
l = next(x for x in json.load(open(name + ".json"))["loaders"] if x["name"] == "train")
acc = l["account"]["steady"]
got = {x["cause"]: x["seconds"] / acc["batches"] for x in acc["lines"]}
print(f"{name}: stall {l['stall_fraction']:.3f} (set {stall_lo:.3f}..{stall_hi:.3f}), bottleneck {l['bottleneck']} (set {bottleneck}); per batch "
      + ", ".join(f"{k} {got[k] * 1e3:.2f} ms (set {v * 1e3:.2f} +- {rel:.0%})" for k, v in want.items())
      + "; others " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in got.items() if k not in want))
ok = stall_lo <= l["stall_fraction"] <= stall_hi and l["bottleneck"] in bottleneck.split("|")
ok = ok and all(abs(got[k] - v) <= rel * v for k, v in want.items())
sys.exit(0 if ok else 1)
PY
}

# Serial (num_workers=0): each batch sleeps 4 x 10 ms in next(), then a 20 ms step: stall 40/60.
check sleep_serial other_blocking 0.637 0.697 "other_blocking=0.040,compute=0.020" 0.15 \
  --workers 0 --batches 30 --fetch-sleep-ms 10 --compute-ms 20
# Serial: each batch burns 4 x 10 ms of CPU in next() (thread CPU time), then a
# 20 ms step: stall 40/60, more when the shared machine's run queue (the
# contention line, its own cause) stretches the burn; on a busy shared machine
# that stretch can exceed the burn itself, so either is the bottleneck, while
# the prep line must still be the 40 ms set.
check prep_serial "prep|contention" 0.637 0.95 "prep=0.040,compute=0.020" 0.15 \
  --workers 0 --batches 30 --prep-cpu-ms 10 --compute-ms 20
# 2 workers sleeping 40 ms per batch: a batch every 20 ms against a 10 ms step,
# so 10 ms of each step waits on sleeping workers: stall 0.5.
check sleep_workers other_blocking 0.45 0.55 "other_blocking=0.010,compute=0.010" 0.30 \
  --workers 2 --batches 30 --fetch-sleep-ms 10 --compute-ms 10
# 2 workers, 4 ms per batch against a 150 ms step: compute-bound, no stall.
check compute_workers compute 0.0 0.05 "compute=0.150" 0.05 \
  --workers 2 --batches 20 --fetch-sleep-ms 1 --compute-ms 150
echo PASS
