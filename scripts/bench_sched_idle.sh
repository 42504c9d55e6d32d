#!/usr/bin/env bash
# What the kernel's scheduling of more busy threads than cores costs, which
# the model's fluid processor sharing does not see (docs/model.md, "What the
# misses say"): the validation's cpustep workload (a 16 ms CPU step, 8 ms of
# Python prep CPU a sample, batches of 4), run
#   - on 1 core (taskset): profiled without workers, 1 worker predicted and
#     run: on one core nothing can idle, so this isolates the rest of the
#     model (GIL, pickling, handoff);
#   - on 2 cores with 2 and 3 workers: the share of both CPUs idle in the
#     steady state (/proc/stat, 3 s from 2.5 s after the start), how many of
#     the job's threads were runnable but waiting for a CPU meanwhile, on
#     average (their run-queue delay, /proc/PID/task/TID/schedstat), the
#     main thread's share of a core, samples/s, and whatif's baseline on the
#     run's own trace (its own measured costs): the sum of those costs over
#     the 2 cores, against what they delivered.
#     These are averages over the 3 s: they do not show that a CPU idled at
#     the same moment as a thread waited. Where `perf` can record the
#     scheduler's tracepoints (root, or perf_event_paranoid -1), the 2-worker
#     run's same 3 s are also recorded (sched_switch, sched_waking) and the
#     script prints how long a CPU sat idle while one of the job's threads
#     waited for the other one, the main thread's and the workers' apart.
#   SWITCH_INTERVAL=S sets Python's GIL switch interval in the job and its
#   workers (default: Python's 5 ms).
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
# snapshot PID: "monotonic_ns total_ticks idle_ticks" of CPUs 0 and 1, then per
# thread of the job (PID, its main thread first, and its descendants)
# "tid run_ns wait_ns".
snapshot() {
  "$PY" - "$1" <<'PY'
import os, sys
root = int(sys.argv[1])
import time
cpus = [[int(v) for v in l.split()[1:9]] for l in open("/proc/stat") if l.startswith(("cpu0 ", "cpu1 "))]
print(time.monotonic_ns(), sum(map(sum, cpus)), sum(c[3] for c in cpus))
children = {}
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        children.setdefault(int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1]), []).append(int(p))
    except (OSError, IndexError, ValueError):
        pass
todo = [root]
while todo:
    pid = todo.pop()
    todo += children.get(pid, [])
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            run, wait, _ = open(f"/proc/{pid}/task/{tid}/schedstat").read().split()
            print(tid, run, wait)
    except OSError:
        pass
PY
}
JOB=("$PY" "$W")
if [ -n "${SWITCH_INTERVAL:-}" ]; then
  # Forked workers inherit the interval from the main process.
  printf 'import runpy, sys\nsys.setswitchinterval(float(sys.argv[1]))\nsys.argv = sys.argv[2:]\nrunpy.run_path(sys.argv[0], run_name="__main__")\n' \
    >"$TMP/interval.py"
  JOB=("$PY" "$TMP/interval.py" "$SWITCH_INTERVAL" "$W")
  echo "GIL switch interval: $SWITCH_INTERVAL s"
fi

PERF=
if command -v perf >/dev/null && perf record -q -a -o "$TMP/probe.data" -e sched:sched_switch -- true 2>/dev/null; then
  PERF=perf
else
  echo "(perf cannot record the scheduler's tracepoints here: the idle-while-waiting figure is left out)"
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$REPEATS"); do
  taskset -c 0 "$SP" run -q -o "$TMP/one0.pb" -- "${JOB[@]}" --workers 0 --batches 60 "${FLAGS[@]}" >/dev/null
  "$SP" whatif "$TMP/one0.pb" --workers 1 --json >"$TMP/one0.json"
  taskset -c 0 "$SP" run -q -o "$TMP/one1.pb" -- "${JOB[@]}" --workers 1 --batches 60 "${FLAGS[@]}" >/dev/null
  "$SP" whatif "$TMP/one1.pb" --json >"$TMP/one1.json"
  predicted=$(json "$TMP/one0.json" "d['scenarios'][0]['prediction']['samples_per_s']")
  measured=$(json "$TMP/one1.json" "d['measured_samples_per_s']")
  "$PY" -c "import sys; p, m = map(float, sys.argv[1:]); print(f'1 core, 0 -> 1 worker: predicted {p:.1f}, measured {m:.1f} samples/s, error {p / m - 1:+.1%}')" "$predicted" "$measured"
  for workers in 2 3; do
    taskset -c 0,1 "$SP" run -q -o "$TMP/two.pb" -- "${JOB[@]}" --workers "$workers" --batches 400 "${FLAGS[@]}" >"$TMP/out" 2>/dev/null &
    launcher=$!
    sleep 2.5
    job=$(pgrep -o -P "$launcher")  # the job, not the launcher
    snapshot "$job" >"$TMP/before"
    if [ "$workers" = 2 ] && [ -n "$PERF" ]; then
      perf record -q -a -o "$TMP/sched.data" -e sched:sched_switch -e sched:sched_waking -- sleep 3 2>/dev/null
    else
      sleep 3
    fi
    snapshot "$job" >"$TMP/after"
    wait "$launcher"
    "$SP" whatif "$TMP/two.pb" --json >"$TMP/two.json"
    "$PY" - "$workers" "$TMP/before" "$TMP/after" "$TMP/two.json" <<'PY'
import json, sys
workers = int(sys.argv[1])
def read(path):
    lines = [l.split() for l in open(path) if l.strip()]
    now, total, idle = map(int, lines[0])
    return now, total, idle, {f[0]: (int(f[1]), int(f[2])) for f in lines[1:]}, lines[1][0]
now0, total0, idle0, before, main = read(sys.argv[2])  # main: the job's main thread, listed first
now1, total1, idle1, after, _ = read(sys.argv[3])
idle = (idle1 - idle0) / (total1 - total0)
wall_ns = now1 - now0
waiting = sum(after[t][1] - before[t][1] for t in after if t in before) / wall_ns
step_share = (after[main][0] - before[main][0]) / wall_ns
d = json.load(open(sys.argv[4]))["loaders"][0]
measured, baseline = d["measured_samples_per_s"], d["baseline"]["samples_per_s"]
print(f"2 cores, {workers} workers: both CPUs {idle:.0%} idle in the steady state while {waiting:.2f} of the job's threads "
      f"waited for a CPU on average; main thread {step_share:.2f} of a core (fluid sharing: 2/{workers + 1} = "
      f"{2 / (workers + 1):.2f}); {measured:.1f} samples/s measured, "
      f"{baseline:.1f} predicted from the run's own costs ({baseline / measured - 1:+.1%})")
PY
    if [ "$workers" = 2 ] && [ -n "$PERF" ]; then
      perf script -i "$TMP/sched.data" -F cpu,time,event,trace >"$TMP/sched.txt" 2>/dev/null
      "$PY" - "$TMP/after" "$TMP/sched.txt" <<'PY'
import re, sys
# The job's threads: the snapshot's tids, the main thread first; the workers'
# main threads are the other processes' first tids (pid == tid).
tids = [l.split()[0] for l in open(sys.argv[1]).readlines()[1:]]
main = int(tids[0])
job = set(map(int, tids))
events = []
for line in open(sys.argv[2]):
    m = re.match(r"\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)", line)
    if m:
        events.append((float(m[2]), int(m[1]), m[3], dict(re.findall(r"(\w+)=(\S+)", m[4]))))
events.sort(key=lambda e: e[0])
running, idle_since = {}, {}  # cpu -> tid; cpu -> when it went idle (None: busy)
waiting = {}  # tid -> when it became runnable
idle_waits = {"main": 0.0, "other": 0.0}
waited = {"main": 0.0, "other": 0.0}
cpus = sorted({e[1] for e in events})
for t, cpu, name, kv in events:
    if name == "sched_waking":
        tid = int(kv["pid"])
        if tid in job and tid not in running.values():
            waiting.setdefault(tid, t)
    elif name == "sched_switch":
        prev, nxt = int(kv["prev_pid"]), int(kv["next_pid"])
        if prev in job and kv["prev_state"].startswith("R"):
            waiting[prev] = t
        if nxt in waiting:
            t0 = waiting.pop(nxt)
            who = "main" if nxt == main else "other"
            waited[who] += t - t0
            # the longest any other CPU had been idle through this wait
            idle = max((t - max(since, t0) for c, since in idle_since.items() if c != cpu and since is not None), default=0)
            idle_waits[who] += max(0.0, idle)
        running[cpu] = nxt
        idle_since[cpu] = t if nxt == 0 else None
span = events[-1][0] - events[0][0] if events else 0
if span > 0:
    total = idle_waits["main"] + idle_waits["other"]
    print(f"  perf sched, the same 3 s: a CPU sat idle while one of the job's threads waited for the other: "
          f"{total * 1e3:.0f} ms of {span:.2f} s ({total / (span * len(cpus)):.1%} of the CPUs' time); the main thread "
          f"waited {waited['main'] * 1e3:.0f} ms ({idle_waits['main'] * 1e3:.0f} ms of it with a CPU idle), its other "
          f"threads and the workers' {waited['other'] * 1e3:.0f} ms ({idle_waits['other'] * 1e3:.0f} ms)")
PY
    fi
  done
done
