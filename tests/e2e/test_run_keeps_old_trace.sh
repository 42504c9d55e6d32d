#!/usr/bin/env bash
# A command that cannot be executed (a typo) leaves an existing trace alone:
# the trace is written under a temporary name and renamed once the command
# has started. No temporary file is left behind either way.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
"$SP" run -q -o "$TMP/trace.pb" -- sh -c 'sleep 0.2' || fail "first run failed"
before=$(sha256sum <"$TMP/trace.pb")
set +e; "$SP" run -o "$TMP/trace.pb" -- /usr/bin/pyhton3-no-such x.py 2>"$TMP/err"; rc=$?; set -e
[ "$rc" = 127 ] || fail "a missing command returned $rc, expected 127"
grep -q "stallprof: error: cannot run '/usr/bin/pyhton3-no-such'" "$TMP/err" || fail "no launch error: $(cat "$TMP/err")"
[ "$(sha256sum <"$TMP/trace.pb")" = "$before" ] || fail "a failed launch replaced the existing trace"
if grep -q "wrote" "$TMP/err"; then fail "a failed launch claims to have written a trace: $(cat "$TMP/err")"; fi
[ -z "$(ls -A "$TMP" | grep '\.tmp$')" ] || fail "a temporary trace was left behind: $(ls -A "$TMP")"
# A command that starts replaces it, under the final name.
"$SP" run -q -o "$TMP/trace.pb" -- true
[ "$(sha256sum <"$TMP/trace.pb")" != "$before" ] || fail "a successful run did not replace the trace"
[ -z "$(ls -A "$TMP" | grep '\.tmp$')" ] || fail "a temporary trace was left behind: $(ls -A "$TMP")"
"$STALLPROF_BUILD_DIR/trace_check" "$TMP/trace.pb" > "$TMP/check.txt" || fail "trace_check cannot read the new trace"
grep -qx "footer=1" "$TMP/check.txt" || fail "the new trace is not complete"
echo PASS
