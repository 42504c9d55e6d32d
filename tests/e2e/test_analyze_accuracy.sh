#!/usr/bin/env bash
# analyze against workloads whose true costs are set (scripts/workloads/synthetic.py):
# the stall fraction within 2 points of the true value, fetch and prep stall
# within 5 points, and the bottleneck that was set (storage, CPU prep, compute).
# The true value is what the set costs imply; when the main process fetches
# (num_workers=0) the kernel's run-queue delay (schedstat, not the spans) is
# added to the prep cost, because on a shared machine a CPU burn of 40 ms
# takes longer than 40 ms of wall time.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"

check() {  # check <name> <expected bottleneck> <workload flags...>
  local name=$1 bottleneck=$2
  shift 2
  $SP run -q -o "$name.pb" -- "$PY" "$WORKLOADS/synthetic.py" --batch-size 4 "$@" >"$name.out" || fail "$name: run failed"
  $SP analyze "$name.pb" --json >"$name.json" || fail "$name: analyze failed"
  "$PY" - "$name" "$bottleneck" "$name.out" "$name.json" <<'PY' || fail "$name: measured values are off (above)"
import json, sys
name, bottleneck, out, js = sys.argv[1:]
workload = json.loads(next(l for l in open(out) if l.startswith("WORKLOAD "))[len("WORKLOAD "):])
exp = workload["expected"]
d = json.load(open(js))
l = next(x for x in d["loaders"] if x["name"] == "train")
s = l["split"]
stall, fetch, prep = exp["stall_fraction"], exp["fetch_stall_fraction"], exp["prep_stall_fraction"]
if workload["workers"] == 0:
    # Serial fetch in next(): step = compute + fetch + prep (+ the kernel's run-queue delay).
    w = l["workers"][0]
    delay = w["delay_s"] / w["batches"]
    step = exp["step_s"] + delay
    compute = exp["step_s"] * (1 - stall)
    stall = 1 - compute / step
    fetch = fetch * exp["step_s"] / step
    prep = 1 - compute / step - fetch
got = {"stall": l["stall_fraction"], "fetch": s["fetch_stall_fraction"], "prep": s["prep_stall_fraction"]}
want = {"stall": stall, "fetch": fetch, "prep": prep}
print(f"{name}: measured " + ", ".join(f"{k} {v:.3f}" for k, v in got.items()) + f", bottleneck {l['bottleneck']}; "
      "true " + ", ".join(f"{k} {v:.3f}" for k, v in want.items()) + f", bottleneck {bottleneck}; "
      f"contention {s['contention_fraction']:.3f}, handoff {s['handoff_fraction']:.3f}")
ok = abs(got["stall"] - want["stall"]) <= 0.02 and abs(got["fetch"] - want["fetch"]) <= 0.05 and \
     abs(got["prep"] - want["prep"]) <= 0.05 and l["bottleneck"] == bottleneck
sys.exit(0 if ok else 1)
PY
}

check storage_serial storage --workers 0 --batches 30 --fetch-sleep-ms 10 --compute-ms 20
check prep_serial cpu_prep --workers 0 --batches 30 --prep-cpu-ms 10 --compute-ms 20
check storage_workers storage --workers 2 --batches 30 --fetch-sleep-ms 10 --compute-ms 10
check compute_workers compute --workers 2 --batches 20 --fetch-sleep-ms 1 --compute-ms 150
echo PASS
