#!/usr/bin/env bash
# SIGTERM, SIGINT and SIGHUP sent to the launcher reach the command's process
# group; the command's own handler runs and its exit status is stallprof's.
source "$(dirname "$0")/lib.sh"
cd "$TMP"

for sig in TERM INT HUP; do
  rm -f "$TMP/ready" "$TMP/out"
  # The child announces its trap is set, then loops; its handler exits 7.
  "$SP" run -q -o "$TMP/t.pb" -- sh -c "trap 'echo got-$sig; exit 7' $sig; touch '$TMP/ready'; while :; do sleep 0.05; done" \
    >"$TMP/out" 2>"$TMP/err" &
  launcher=$!
  for _ in $(seq 100); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
  [ -e "$TMP/ready" ] || fail "child did not start"
  kill -"$sig" "$launcher"
  set +e; wait "$launcher"; rc=$?; set -e
  [ "$rc" = 7 ] || { cat "$TMP/err" >&2; fail "SIG$sig: stallprof returned $rc, expected the handler's 7"; }
  grep -qx "got-$sig" "$TMP/out" || fail "SIG$sig: the child's handler did not run"
  "$STALLPROF_BUILD_DIR/trace_check" "$TMP/t.pb" > "$TMP/check.txt" || fail "SIG$sig: trace_check cannot read the trace"
  grep -qx "exit_code=7" "$TMP/check.txt" || fail "SIG$sig: footer lacks exit_code=7"
done

# A child without a handler dies of the forwarded signal: 128+15.
rm -f "$TMP/ready"
"$SP" run -q -o "$TMP/t.pb" -- sh -c "touch '$TMP/ready'; exec sleep 30" &
launcher=$!
for _ in $(seq 100); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
sleep 0.2
kill -TERM "$launcher"
set +e; wait "$launcher"; rc=$?; set -e
[ "$rc" = 143 ] || fail "forwarded SIGTERM to a handler-less child: got $rc, expected 143"
"$STALLPROF_BUILD_DIR/trace_check" "$TMP/t.pb" > "$TMP/check.txt" || fail "trace_check cannot read the trace"
grep -qx "term_signal=15" "$TMP/check.txt" || fail "footer lacks term_signal=15"
echo PASS
