#!/usr/bin/env bash
# What the kernel's scheduling of more busy threads than cores costs, which
# the model's fluid processor sharing does not see (docs/model.md, "What the
# misses say"): the validation's cpustep workload (a 16 ms CPU step, 8 ms of
# Python prep CPU a sample, batches of 4), run
#   - on 1 core (taskset): profiled without workers, 1 worker predicted and
#     run: on one core nothing can idle, so this isolates the rest of the
#     model (GIL, pickling, handoff);
#   - on 2 cores with 2 and 3 workers: the share of both CPUs idle in the
#     steady state (/proc/stat, 3 s from 2.5 s after the start), samples/s,
#     and whatif's baseline on the run's own trace (its own measured costs):
#     the sum of those costs over the 2 cores, against what they delivered.
#   scripts/bench_sched_idle.sh [repeats]     (default 2; about 40 s each)
set -euo pipefail
cd "$(dirname "$0")/.."
SP="${STALLPROF_BIN:-$PWD/build/stallprof}"
PY=/usr/bin/python3
W=scripts/workloads/synthetic.py
REPEATS="${1:-2}"
[ "$(nproc)" -ge 2 ] || { echo "SKIP: needs 2 cores"; exit 77; }
TMP=$(mktemp -d /tmp/stallprof-schedidle.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FLAGS=(--batch-size 4 --prep-cpu-ms 8 --compute-ms 16 --compute-mode cpu)
json() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1]))['loaders'][0]; print($2)" "$1"; }
cpu_times() { awk '/^cpu / {print $2+$3+$4+$5+$6+$7+$8+$9, $5}' /proc/stat; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$REPEATS"); do
  taskset -c 0 "$SP" run -q -o "$TMP/one0.pb" -- "$PY" "$W" --workers 0 --batches 60 "${FLAGS[@]}" >/dev/null
  "$SP" whatif "$TMP/one0.pb" --workers 1 --json >"$TMP/one0.json"
  taskset -c 0 "$SP" run -q -o "$TMP/one1.pb" -- "$PY" "$W" --workers 1 --batches 60 "${FLAGS[@]}" >/dev/null
  "$SP" whatif "$TMP/one1.pb" --json >"$TMP/one1.json"
  predicted=$(json "$TMP/one0.json" "d['scenarios'][0]['prediction']['samples_per_s']")
  measured=$(json "$TMP/one1.json" "d['measured_samples_per_s']")
  "$PY" -c "import sys; p, m = map(float, sys.argv[1:]); print(f'1 core, 0 -> 1 worker: predicted {p:.1f}, measured {m:.1f} samples/s, error {p / m - 1:+.1%}')" "$predicted" "$measured"
  for workers in 2 3; do
    "$SP" run -q -o "$TMP/two.pb" -- "$PY" "$W" --workers "$workers" --batches 400 "${FLAGS[@]}" >"$TMP/out" 2>/dev/null &
    pid=$!
    sleep 2.5
    read -r total0 idle0 < <(cpu_times)
    sleep 3
    read -r total1 idle1 < <(cpu_times)
    wait "$pid"
    "$SP" whatif "$TMP/two.pb" --json >"$TMP/two.json"
    "$PY" - "$workers" "$((idle1 - idle0))" "$((total1 - total0))" "$TMP/two.json" <<'PY'
import json, sys
workers, idle, total = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
d = json.load(open(sys.argv[4]))["loaders"][0]
measured, baseline = d["measured_samples_per_s"], d["baseline"]["samples_per_s"]
print(f"2 cores, {workers} workers: both CPUs {idle / total:.0%} idle in the steady state; {measured:.1f} samples/s measured, "
      f"{baseline:.1f} predicted from the run's own costs ({baseline / measured - 1:+.1%})")
PY
  done
done
