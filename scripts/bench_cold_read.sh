#!/usr/bin/env bash
# What a storage miss costs the reading thread's CPU, and how memory pressure
# raises it: the files-by-index validation case (docs/model.md "What the
# misses say"). 1504 files of 512 KiB on storage throttled to 200 MiB/s,
# read cold (drop_caches) in a 400M memory cgroup and warm, by a plain
# Python, one that imported torch, and one holding 250 MiB more (a training
# process's share of the cgroup), then with a fixed Python loop after each
# read (the user-mode cost a cold read leaves behind).
#
#   scripts/bench_cold_read.sh [files to read, default 400]
#
# Needs root, cgroup v1 memory and blkio, drop_caches, and /usr/bin/python3
# with torch; prints SKIP and exits 77 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=/usr/bin/python3
COUNT=${1:-400}
WORK=$(mktemp -d /tmp/stallprof-coldread.XXXXXX)
source "$ROOT/scripts/lib_cgroup.sh"
trap 'remove_groups; rm -rf "$WORK"' EXIT
[ -w /sys/fs/cgroup/memory ] || { echo "SKIP: cgroup v1 memory controller not writable"; exit 77; }
sync && echo 1 >/proc/sys/vm/drop_caches 2>/dev/null || { echo "SKIP: drop_caches not permitted"; exit 77; }
slow_storage || { echo "SKIP: $SLOW_WHY"; exit 77; }
"$PY" -c 'import torch' 2>/dev/null || { echo "SKIP: $PY cannot import torch"; exit 77; }
"$PY" "$ROOT/scripts/workloads/synthetic.py" --workers 0 --batches 1504 --batch-size 1 --epochs 1 \
  --files "$WORK/files" --file-bytes $((512 << 10)) >/dev/null
echo "bench_cold_read: load average $(cut -d' ' -f1-3 /proc/loadavg); $COUNT of 1504 files of 512 KiB, storage at 200 MiB/s, 400M cgroup"
for flags in "" "--torch" "--torch --resident 250" "--torch --resident 250 --burn"; do
  sync
  echo 1 >/proc/sys/vm/drop_caches
  # shellcheck disable=SC2086
  run_in_cgroup $((400 << 20)) "$PY" "$ROOT/scripts/bench_cold_read.py" "$WORK/files" "$COUNT" cold $flags
  drop_cgroup
  cat "$WORK/files"/* >/dev/null
  # shellcheck disable=SC2086
  "$PY" "$ROOT/scripts/bench_cold_read.py" "$WORK/files" "$COUNT" warm $flags
done
