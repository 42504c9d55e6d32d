#!/bin/bash
# What a CPU quota's throttling costs the work it throttles: the CPU time per
# unit of work of THREADS single-threaded CPU-bound processes (default: the
# cores + 1, as the validation's quota case runs its step and 2 workers on 2
# cores) in a cgroup v1 CPU quota of QUOTA cores (default: half the cores),
# against the same processes without it, alternated ROUNDS times (default 5).
# The model takes a thread's CPU per batch to be the same with or without a
# quota; where this host runs throttled work slower per op (its vCPUs idle
# between the bursts: frequency, caches, another tenant), a profile taken in
# a quota overstates the CPU its work needs without one.
#
#   scripts/bench_quota_throttle.sh [rounds]    (as root, cgroup v1 cpu controller)
#
# Each process runs a Python loop (arithmetic over a 4 MiB list, more than
# the CPU's L2) for SECONDS (default 4) and prints its thread CPU per op.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-/usr/bin/python3}
ROUNDS=${1:-5}
SECONDS_EACH=${SECONDS_EACH:-4}
CORES=$(nproc)
THREADS=${THREADS:-$((CORES + 1))}
QUOTA_CORES=${QUOTA_CORES:-$(awk -v c="$CORES" 'BEGIN { print c / 2 }')}
source scripts/lib_cgroup.sh
trap remove_groups EXIT
cpu_quota "$QUOTA_CORES" || { echo "bench_quota_throttle: $QUOTA_WHY" >&2; exit 1; }

LOOP='
import sys, time
data = list(range(1 << 19))  # 4 MiB of pointers, their ints beside them
end = time.time() + float(sys.argv[1])
ops, start = 0, time.thread_time()
while time.time() < end:
    s = 0
    for i in range(0, len(data), 64):
        s += data[i] * data[i - 1]
    ops += 1
print((time.thread_time() - start) / ops * 1e6)
'
# run <prefix...>: THREADS loops side by side under the prefix; prints the mean us CPU per op.
run() {
  local pids=() outs=() i
  for ((i = 0; i < THREADS; i++)); do
    outs[i]=$(mktemp)
    "$@" "$PY" -c "$LOOP" "$SECONDS_EACH" >"${outs[i]}" &
    pids[i]=$!
  done
  wait "${pids[@]}"
  cat "${outs[@]}" | awk '{ s += $1 } END { printf "%.1f", s / NR }'
  rm -f "${outs[@]}"
}

echo "$THREADS CPU-bound processes, $SECONDS_EACH s each run, $CORES cores, quota $QUOTA_CORES cores; us of CPU per op"
free=() quota=()
for ((r = 1; r <= ROUNDS; r++)); do
  f=$(run env)
  q=$(run in_cpu_quota)
  free+=("$f") quota+=("$q")
  echo "round $r: free $f, in the quota $q ($(awk -v f="$f" -v q="$q" 'BEGIN { printf "%+.1f%%", (q / f - 1) * 100 }'))"
done
# The median of the rounds' own ratios: each round's pair ran a minute apart
# at most, while the host's speed drifts between rounds.
ratios=()
for ((r = 0; r < ROUNDS; r++)); do ratios+=("$(awk -v f="${free[r]}" -v q="${quota[r]}" 'BEGIN { print q / f - 1 }')"); done
printf '%s\n' "${ratios[@]}" | sort -g | awk '{ v[NR] = $1 } END {
  m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "median of the rounds: the quota'"'"'s throttled work took %+.1f%% CPU per op (rounds %+.1f%% to %+.1f%%)\n", m * 100, v[1] * 100, v[NR] * 100 }'
