#!/usr/bin/env bash
# Two stallprof runs at the same time each record only their own command's
# events; a launcher killed with SIGKILL mid-run leaves a trace readable up to
# its last complete chunk and nothing in /dev/shm.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
LIB="$STALLPROF_BUILD_DIR/libstallprof_client.so"
[ -e "$LIB" ] || skip "libstallprof_client.so is not built"
CHECK="$STALLPROF_BUILD_DIR/trace_check"

cat >ticker.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "stallprof/client.h"
/* ticker NAME MS: one span named NAME every millisecond for MS ms. */
int main(int argc, char** argv) {
  uint32_t id = stallprof_name(argv[1]);
  long ms = atol(argv[2]);
  for (long i = 0; i < ms; ++i) {
    stallprof_span_complete(id, stallprof_now_ns(), 500, (uint64_t)i, 0);
    usleep(1000);
  }
  return stallprof_enabled() ? 0 : 9;
}
C
cc -O1 -I"$STALLPROF_SOURCE_DIR/lib/client/include" ticker.c -o ticker -L"$STALLPROF_BUILD_DIR" -lstallprof_client \
  -Wl,-rpath,"$STALLPROF_BUILD_DIR" || skip "no C compiler"

# /dev/shm as stallprof could change it: POSIX named semaphores (Python
# multiprocessing's, "sem.mp-..." or "sem.<random>", seen "sem.dD3ZZW" in a
# CI run) and torch's shared tensors belong to jobs running beside this test
# (its ticker is C), and come and go while it runs. stallprof opens neither
# (its ring and calibration buffers are memfds, never in /dev/shm).
shm_listing() { ls /dev/shm | { grep -v -E '^(sem\.|torch_)' || true; } | sort; }
shm_before=$(shm_listing)
"$SP" run -q -o "$TMP/one.pb" -- ./ticker one 700 &
a=$!
"$SP" run -q -o "$TMP/two.pb" -- ./ticker two 700 &
b=$!
wait $a || fail "first run failed"
wait $b || fail "second run failed"
"$CHECK" --names "$TMP/one.pb" >"$TMP/s1"
"$CHECK" --names "$TMP/two.pb" >"$TMP/s2"
grep -q "^name one " "$TMP/s1" || fail "run one recorded nothing"
grep -q "^name two " "$TMP/s2" || fail "run two recorded nothing"
grep -q "^name two " "$TMP/s1" && fail "run one saw run two's events"
grep -q "^name one " "$TMP/s2" && fail "run two saw run one's events"
[ "$(sed -n 's/^run_id=//p' "$TMP/s1")" != "$(sed -n 's/^run_id=//p' "$TMP/s2")" ] || fail "run ids equal"

# SIGKILL the launcher mid-run: the trace loads up to its last complete chunk.
# Killed once its file holds 10 system samples (the sampler's rows reach it
# at each 1 s flush; a fixed 1.2 s sleep left none where the launcher's
# start took over 0.2 s on a loaded host), at most 8 s in.
mkdir "$TMP/tmpdir"
TMPDIR="$TMP/tmpdir" "$SP" run -q --sample-ms 20 -o "$TMP/killed.pb" -- ./ticker k 10000 &
launcher=$!
for _ in $(seq 80); do
  sleep 0.1
  [ "$("$CHECK" "$TMP/killed.pb" 2>/dev/null | sed -n 's/^system_samples=//p')" -ge 10 ] 2>/dev/null && break
done
ticker=$(pgrep -P "$launcher" -x ticker || true)
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null || true
# The ticker, orphaned, is stopped here (it would tick on for up to 10 s).
[ -n "$ticker" ] && kill "$ticker" 2>/dev/null || true
"$CHECK" --names "$TMP/killed.pb" >"$TMP/sk" || fail "the killed run's trace does not load"
grep -qx "footer=0" "$TMP/sk" || fail "a killed launcher cannot have written a footer"
grep -q "^name k [0-9]" "$TMP/sk" || { cat "$TMP/sk"; fail "no spans survived the killed launcher"; }
samples=$(sed -n 's/^system_samples=//p' "$TMP/sk")
[ "$samples" -ge 10 ] || fail "expected ~1 s of system samples in the killed run, got $samples"
# Its handoff directory (loaders without workers leave their batch sizes
# there) outlives it; the next run removes it.
[ -d "$TMP/tmpdir/stallprof-handoff.$launcher".* ] || fail "no handoff directory of the killed launcher: $(ls "$TMP/tmpdir")"
TMPDIR="$TMP/tmpdir" "$SP" run -q -o "$TMP/next.pb" -- true || fail "the next run failed"
[ -z "$(ls "$TMP/tmpdir")" ] || fail "the killed launcher's handoff directory was left behind: $(ls "$TMP/tmpdir")"
shm_after=$(shm_listing)
[ "$shm_before" = "$shm_after" ] || fail "/dev/shm changed: $(diff <(echo "$shm_before") <(echo "$shm_after"))"
echo PASS
