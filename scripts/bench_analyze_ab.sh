#!/usr/bin/env bash
# Two stallprof builds' `analyze` on the same synthetic trace, runs alternated
# (old, new, old, new, ...) so that a change of load hits both alike: per run
# wall, user and system seconds of each, then the medians, spans/s and the
# new/old ratio, and the load average at the end. Prints figures; asserts
# nothing. A first run of each warms the page cache and the memory; it is not
# counted.
# Usage: scripts/bench_analyze_ab.sh OLD_BINARY NEW_BINARY [spans] [runs]
#   e.g. cp build/stallprof /tmp/stallprof-old (before the change), rebuild, then
#   scripts/bench_analyze_ab.sh /tmp/stallprof-old build/stallprof 10000000 7
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1
NEW=$2
SPANS=${3:-10000000}
RUNS=${4:-7}
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target gen_trace -j2 >/dev/null
TRACE=$(mktemp /tmp/stallprof-bench-ab.XXXXXX.pb)
TIMES=$(mktemp /tmp/stallprof-bench-ab.XXXXXX.txt)
trap 'rm -f "$TRACE" "$TIMES"' EXIT
"$BUILD_DIR/gen_trace" "$SPANS" "$TRACE" 4 >/dev/null
cat "$TRACE" >/dev/null

run() {  # run <label> <binary>: appends "label wall user sys" to $TIMES
  /usr/bin/time -f "$1 %e %U %S" -a -o "$TIMES" "$2" analyze "$TRACE" >/dev/null
}
"$OLD" analyze "$TRACE" >/dev/null
"$NEW" analyze "$TRACE" >/dev/null
for i in $(seq "$RUNS"); do
  run old "$OLD"
  run new "$NEW"
done
awk -v n="$SPANS" '
  { k[$1]++; wall[$1, k[$1]] = $2; user[$1, k[$1]] = $3; sys[$1, k[$1]] = $4 }
  function median(a, label, count,   i, j, t, s) {  # POSIX awk: no arrays of arrays
    for (i = 1; i <= count; i++) s[i] = a[label, i]
    for (i = 1; i <= count; i++) for (j = i + 1; j <= count; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
    return count % 2 ? s[(count + 1) / 2] : (s[count / 2] + s[count / 2 + 1]) / 2
  }
  END {
    for (i = 1; i <= k["old"]; i++)
      printf "run %d: old %.2f s wall (%.2f user, %.2f sys) | new %.2f s wall (%.2f user, %.2f sys)\n", i,
             wall["old", i], user["old", i], sys["old", i], wall["new", i], user["new", i], sys["new", i]
    wo = median(wall, "old", k["old"]); wn = median(wall, "new", k["new"])
    uo = median(user, "old", k["old"]); un = median(user, "new", k["new"])
    so = median(sys, "old", k["old"]); sn = median(sys, "new", k["new"])
    printf "median wall: old %.3f s (%.1f M spans/s), new %.3f s (%.1f M spans/s), new/old %.2fx\n",
           wo, n / wo / 1e6, wn, n / wn / 1e6, wn / wo
    printf "median user: old %.3f s, new %.3f s, new/old %.2fx; median sys: old %.3f s, new %.3f s\n",
           uo, un, un / uo, so, sn
  }' "$TIMES"
echo "load: $(uptime)"
