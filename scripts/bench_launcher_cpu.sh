#!/usr/bin/env bash
# The launcher's own CPU over a run of the bundled demo, per thread: the
# main thread (waits for the job), the drain thread (empties the ring into the
# trace) and the /proc sampler, in that order (thread creation order), read
# from /proc/PID/task/*/stat just before the launcher exits. Several builds
# alternate run by run. Prints figures; asserts nothing.
# Usage: scripts/bench_launcher_cpu.sh [runs, default 3] [stallprof binaries, default build/stallprof]
# (a binary must sit in a build directory with its Python hook, e.g. a copy
# named build/stallprof-old).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
shift || true
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=(build/stallprof)
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912
TRACE=$(mktemp /tmp/stallprof-launcher-cpu.XXXXXX.pb)
trap 'rm -f "$TRACE"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq "$RUNS"); do
  for bin in "${BINS[@]}"; do
    "$bin" run -q --no-handoff-timing -o "$TRACE" -- /usr/bin/python3 scripts/workloads/train_demo.py --epochs 2 >/dev/null 2>&1 &
    pid=$!
    last=""
    while kill -0 "$pid" 2>/dev/null; do
      cur=$(for t in $(ls /proc/"$pid"/task 2>/dev/null | sort -n); do
              awk '{ printf "%.3f ", $1 / 1e9 }' /proc/"$pid"/task/"$t"/schedstat 2>/dev/null
            done) || true
      [ -z "$cur" ] || last=$cur
      sleep 0.05
    done
    wait "$pid" || true
    echo "run $run $bin: launcher CPU s by thread (main drain sampler ...): $last"
  done
done
