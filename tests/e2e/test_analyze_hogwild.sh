#!/usr/bin/env bash
# mnist_hogwild's shape (scripts/workloads/hogwild.py): torch.multiprocessing
# starts 2 trainers that each iterate their own DataLoader, trainer 1 computing
# twice as long a step (40 ms against 20), then the main process iterates a
# test loader; no RANK anywhere. analyze shows 3 processes (pid, command,
# loaders, samples/s), no ranks, and no straggler, though one trainer is slower.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
$SP run -q -o hogwild.pb -- "$PY" "$WORKLOADS/hogwild.py" --processes 2 --batches 20 --compute-ms 20 --skew 1 >run.log 2>&1 \
  || fail "the hogwild workload failed: $(tail -5 run.log)"
$SP analyze hogwild.pb >job.txt || fail "analyze failed"
$SP analyze hogwild.pb --json >job.json || fail "analyze --json failed"
"$PY" - job.json <<'PY' || fail "the hogwild processes are wrong: $(sed -n '/^Processes/,/^$/p' job.txt)"
import json, sys
d = json.load(open(sys.argv[1]))
job = d["job"]
assert job is not None, "no job section"
assert job["ranks"] == [] and job["loaders"] == [], job
procs = job["processes"]
assert len(procs) == 3, procs
loaders = sorted((p["loaders"][0]["name"], p["loaders"][0]["steps"]) for p in procs)
assert loaders == [("test", 20), ("train", 20), ("train", 20)], loaders
main = next(p for p in procs if p["loaders"][0]["name"] == "test")
trainers = [p for p in procs if p["loaders"][0]["name"] == "train"]
assert all(t["ppid"] == main["pid"] for t in trainers), (main["pid"], [t["ppid"] for t in trainers])
assert all("hogwild.py" in p["command"] for p in procs), [p["command"] for p in procs]
rates = sorted(t["loaders"][0]["samples_per_s"] for t in trainers)
print("trainers' samples/s", [round(r, 1) for r in rates])
# 4 samples a step: at most 200/s at 20 ms a step (less with the start-up).
assert 0 < rates[0] and rates[1] < 210, rates
PY
grep -q "^Processes (no rank identity" job.txt || fail "the text has no processes section"
if grep -q "^Ranks\|straggler: rank\|<- straggler" job.txt; then fail "processes are shown as ranks or stragglers: $(sed -n '/^Ranks/,/^$/p' job.txt)"; fi
echo PASS
