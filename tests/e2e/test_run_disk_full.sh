#!/usr/bin/env bash
# A trace that cannot be written completely (disk full) is impossible to miss:
# run keeps the command's status by default but prints one error naming how
# much was lost, the summary line says INCOMPLETE, the file ends at its last
# whole chunk and its footer (when it fits) says where writing failed, and
# --strict makes run exit 4. Needs root to mount a tiny tmpfs.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
mkdir -p "$TMP/small"
mount -t tmpfs -o size=64k tmpfs "$TMP/small" 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
trap 'umount "$TMP/small" 2>/dev/null; rm -rf "$TMP"' EXIT

# 200000 spans (about 1 MB of trace) cannot fit in 64 KiB. A 256M ring holds
# 32768 records a lane: even a drain that never ran before the loop ended
# hands the writer over 64 KiB (with the default 8192, CI once saw it all fit).
cat >"$TMP/many.py" <<'PY'
import stallprof
for i in range(200000):
    with stallprof.stage("s"):
        pass
PY
set +e; "$SP" run --ring-size 256M -o "$TMP/small/t.pb" -- "$PY" "$TMP/many.py" 2>"$TMP/err"; rc=$?; set -e
[ "$rc" = 0 ] || fail "without --strict run returned $rc, expected the command's 0: $(cat "$TMP/err")"
grep -q "stallprof: error: trace '$TMP/small/t.pb' is incomplete, writing it failed .* s into the run (no space left on device): it ends there with [0-9]* events (.*), [1-9][0-9]* events after that were lost" "$TMP/err" \
  || fail "no clear loss message: $(cat "$TMP/err")"
grep -q "stallprof: wrote $TMP/small/t.pb (.*INCOMPLETE" "$TMP/err" || fail "summary does not say INCOMPLETE: $(cat "$TMP/err")"
"$STALLPROF_BUILD_DIR/trace_check" "$TMP/small/t.pb" >"$TMP/check" || fail "the partial trace does not load"
grep -qx "truncated=0" "$TMP/check" || fail "the partial trace does not end at a whole chunk: $(cat "$TMP/check")"
if grep -qx "footer=1" "$TMP/check"; then
  grep -qx "write_failed=1" "$TMP/check" || fail "the footer does not say that writing failed"
  grep -q "^events_lost=[1-9]" "$TMP/check" || fail "the footer does not count the lost events"
  "$SP" analyze "$TMP/small/t.pb" >/dev/null 2>"$TMP/aerr" || true
  grep -q "stallprof: warning: trace '$TMP/small/t.pb' is incomplete" "$TMP/aerr" \
    || fail "analyze does not warn about the incomplete trace: $(cat "$TMP/aerr")"
fi

rm -f "$TMP/small/t.pb"
set +e; "$SP" run --ring-size 256M --strict -o "$TMP/small/t.pb" -- "$PY" "$TMP/many.py" 2>"$TMP/err"; rc=$?; set -e
[ "$rc" = 4 ] || fail "--strict returned $rc for an incomplete trace, expected 4: $(cat "$TMP/err")"

# --strict with a complete trace keeps the command's status.
set +e; "$SP" run -q --strict -o "$TMP/ok.pb" -- sh -c 'exit 3'; rc=$?; set -e
[ "$rc" = 3 ] || fail "--strict changed a complete run's status to $rc"
echo PASS
