#!/usr/bin/env bash
# stallprof run returns the command's own exit status (signal death as 128+N,
# 127 for a missing command), passes arguments after -- and stdin untouched,
# and rejects a bad output path before starting the command.
source "$(dirname "$0")/lib.sh"
cd "$TMP"

expect_rc() {  # expect_rc WANT -- stallprof args...
  local want=$1; shift
  set +e; "$SP" run -q -o "$TMP/t.pb" "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?; set -e
  [ "$rc" = "$want" ] || { cat "$TMP/err" >&2; fail "stallprof run $* returned $rc, expected $want"; }
}

expect_rc 0 -- true
expect_rc 3 -- sh -c 'exit 3'
expect_rc 139 -- sh -c 'kill -SEGV $$'
expect_rc 143 -- sh -c 'kill -TERM $$'
expect_rc 127 -- stallprof-no-such-command-xyz
grep -q "stallprof: error: cannot run 'stallprof-no-such-command-xyz', no such file or directory" "$TMP/err" \
  || fail "missing command message: $(cat "$TMP/err")"
[ "$(grep -c . "$TMP/err")" = 1 ] || fail "expected one line on stderr, got: $(cat "$TMP/err")"
# A failed exec writes no trace (test_run_keeps_old_trace.sh: an existing one is kept).
"$STALLPROF_BUILD_DIR/trace_check" "$TMP/t.pb" > "$TMP/check.txt" 2>&1 || true  # no trace at all is right too
if grep -qx "exit_code=127" "$TMP/check.txt"; then
  fail "a failed exec replaced the trace"
fi

# Flags after -- belong to the command, untouched (including -o and --ring-size).
expect_rc 0 -- sh -c 'printf "%s|" "$@"' argv0 -o x.pb --ring-size 5 "two words" ""
[ "$(cat "$TMP/out")" = "-o|x.pb|--ring-size|5|two words||" ] || fail "arguments changed: $(cat "$TMP/out")"
[ ! -e "$TMP/x.pb" ] || fail "-o after -- was taken by stallprof"

# stdin passes through.
printf 'line one\nline two\n' | "$SP" run -q -o "$TMP/t.pb" -- cat >"$TMP/out"
[ "$(cat "$TMP/out")" = "$(printf 'line one\nline two')" ] || fail "stdin not passed through: $(cat "$TMP/out")"

# A missing output directory is an error before the command runs.
set +e; "$SP" run -o "$TMP/no/such/dir/t.pb" -- touch "$TMP/ran" 2>"$TMP/err"; rc=$?; set -e
[ "$rc" = 2 ] || fail "missing output dir returned $rc"
[ ! -e "$TMP/ran" ] || fail "the command ran although the output directory is missing"
grep -q "does not exist" "$TMP/err" || fail "unclear message: $(cat "$TMP/err")"

# Placeholders: %r (RANK or 0), %h (hostname), %p (launcher pid).
RANK=5 "$SP" run -q -o "$TMP/r%r-%h.pb" -- true
[ -s "$TMP/r5-$(hostname).pb" ] || fail "%r/%h not expanded: $(ls "$TMP")"
env -u RANK "$SP" run -q -o "$TMP/r%r.pb" -- true
[ -s "$TMP/r0.pb" ] || fail "%r without RANK is not 0"
"$SP" run -q -o "$TMP/p%p.pb" -- true
ls "$TMP"/p[0-9]*.pb >/dev/null || fail "%p not expanded"
set +e; "$SP" run -q -o "$TMP/x%q.pb" -- true 2>"$TMP/err"; rc=$?; set -e
[ "$rc" = 2 ] && grep -q "unknown placeholder" "$TMP/err" || fail "bad placeholder accepted (rc $rc)"

# An orphaned grandchild that outlives the command gets a short grace period,
# not an endless wait: stallprof returns the command's status within seconds.
start=$(date +%s)
set +e
"$SP" run -q -o "$TMP/t.pb" -- sh -c "sleep 30 & echo \$! > '$TMP/orphan'; exit 5" </dev/null >/dev/null 2>&1
rc=$?
set -e
kill "$(cat "$TMP/orphan")" 2>/dev/null || true
[ "$rc" = 5 ] || fail "with an orphan left behind: expected 5, got $rc"
[ $(( $(date +%s) - start )) -le 8 ] || fail "stallprof waited for the orphaned grandchild"

# No command at all is a usage error.
set +e; "$SP" run -q -o "$TMP/t.pb" 2>"$TMP/err"; rc=$?; set -e
[ "$rc" = 2 ] || fail "run without a command returned $rc"
echo PASS
