#!/usr/bin/env bash
# The profiled command inherits no descriptor of the launcher: neither the ring
# memfd (a child writing to it could corrupt lanes) nor the trace file (a child
# writing to it breaks the trace's CRC). Clients still reach the ring through
# STALLPROF_RING=/proc/<launcher pid>/fd/<n>, which opens it anew.
source "$(dirname "$0")/lib.sh"
cd "$TMP"

# Descriptor targets the command sees, without and with stallprof in between
# (the test harness may pass its own descriptors down: those are in both).
targets() { sed -n 's/^.* [0-9]* -> //p' "$1" | grep -v "^/proc/[0-9]*/fd$" | sort; }
/bin/ls -l /proc/self/fd >"$TMP/fds" 2>"$TMP/err" || fail "ls failed"
cp "$TMP/fds" "$TMP/base"
"$SP" run -q -o "$TMP/t.pb" -- /bin/ls -l /proc/self/fd >"$TMP/fds" 2>"$TMP/err" || fail "run failed: $(cat "$TMP/err")"
if grep -q 'memfd:stallprof' "$TMP/fds"; then fail "the ring memfd leaks into the command: $(cat "$TMP/fds")"; fi
if grep -qE "$TMP/.*(pb|tmp)" "$TMP/fds"; then fail "the trace file leaks into the command: $(cat "$TMP/fds")"; fi
extra=$(comm -13 <(targets "$TMP/base") <(targets "$TMP/fds"))
[ -z "$extra" ] || fail "the command inherited descriptors it would not have without stallprof: $extra"

# The ring path still works for a client that opens it after exec.
need_torch
cat >"$TMP/stage.py" <<'PY'
import stallprof
with stallprof.stage("probe-stage"):
    pass
PY
"$SP" run -q -o "$TMP/s.pb" -- "$PY" "$TMP/stage.py" 2>"$TMP/err" || fail "python run failed: $(cat "$TMP/err")"
"$STALLPROF_BUILD_DIR/trace_check" --names "$TMP/s.pb" > "$TMP/names.txt" || fail "trace_check cannot read s.pb"
grep -q probe-stage "$TMP/names.txt" \
  || fail "the client did not record through the CLOEXEC ring"
echo PASS
