#!/usr/bin/env bash
# The kernel's page cache against the model's (model::SimulatePageCacheHitRatio)
# and a plain LRU: FILES files of FILE_KIB KiB read whole in a fresh shuffle
# each epoch by one Python process inside a cgroup v1 memory limit, after
# drop_caches. Prints each epoch's byte hit ratio (from /proc/self/io
# read_bytes), the mean of the epochs after the first, the page cache the
# files held at the end (fincore), and the model's steady state for that
# cache. Needs root, cgroup v1 memory, fincore. Asserts nothing.
# Usage: scripts/bench_page_cache.sh [limits...] (default 200M 250M 400M; EPOCHS=10, FILES=1504, FILE_KIB=512)
set -euo pipefail
cd "$(dirname "$0")/.."
LIMITS=("$@")
[ ${#LIMITS[@]} -gt 0 ] || LIMITS=(200M 250M 400M)
EPOCHS=${EPOCHS:-10} FILES=${FILES:-1504} FILE_KIB=${FILE_KIB:-512}
BUILD_DIR=${BUILD_DIR:-build}
[ -w /sys/fs/cgroup/memory ] || { echo "needs a writable cgroup v1 memory controller at /sys/fs/cgroup/memory" >&2; exit 1; }
command -v fincore >/dev/null || { echo "needs fincore (util-linux)" >&2; exit 1; }
cmake --build "$BUILD_DIR" --target stallprof_model -j2 >/dev/null
WORK=$(mktemp -d /tmp/stallprof-bench-page-cache.XXXXXX)
CG=/sys/fs/cgroup/memory/stallprof-bench-page-cache-$$
trap 'rmdir "$CG" 2>/dev/null || true; rm -rf "$WORK"' EXIT
${CXX:-g++} -std=c++20 -O2 -I lib bench/model/page_cache_hit.cpp -o "$WORK/page_cache_hit" \
  "$BUILD_DIR/lib/model/libstallprof_model.a" "$BUILD_DIR/lib/common/libstallprof_common.a" -lglpk -lfmt
mkdir "$WORK/files"
for i in $(seq 0 $((FILES - 1))); do head -c $((FILE_KIB << 10)) /dev/urandom >"$WORK/files/$i.bin"; done
cat >"$WORK/epochs.py" <<'PY'
import os, random, sys
directory, epochs = sys.argv[1], int(sys.argv[2])
files = [os.path.join(directory, name) for name in os.listdir(directory)]
size = sum(os.path.getsize(f) for f in files)
def read_bytes():
    for line in open("/proc/self/io"):
        if line.startswith("read_bytes"):
            return int(line.split()[1])
hits = []
for epoch in range(epochs):
    random.shuffle(files)
    before = read_bytes()
    for f in files:
        with open(f, "rb") as fh:
            fh.read()
    hits.append(max(0.0, 1 - (read_bytes() - before) / size))
print(" ".join("%.3f" % h for h in hits), "mean after the first %.3f" % (sum(hits[1:]) / len(hits[1:])))
PY
echo "$FILES files of $FILE_KIB KiB, $EPOCHS epochs, a fresh shuffle each; kernel $(uname -r), MGLRU $(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent)"
for limit in "${LIMITS[@]}"; do
  mkdir -p "$CG"
  echo "$limit" >"$CG/memory.limit_in_bytes"
  sync
  echo 1 >/proc/sys/vm/drop_caches
  measured=$(bash -c 'echo $$ >"$1/cgroup.procs" && exec /usr/bin/python3 "$2" "$3" "$4"' _ "$CG" "$WORK/epochs.py" "$WORK/files" "$EPOCHS")
  resident=$(fincore -b -n -o RES "$WORK/files"/* | awk '{s += $1} END {printf "%.0f\n", s}')
  echo "limit $limit: measured hit by epoch $measured; the files held $((resident >> 20)) MiB at the end"
  echo "  model: $("$WORK/page_cache_hit" "$FILES" $((FILE_KIB << 10)) 20 "$resident")"
  rmdir "$CG"
done
