# Sourced by tests/e2e/test_hook_*.sh after lib.sh (needs SP, TMP, fail).
# record JSONL CMD...: runs CMD under the real `stallprof run` (CMD's stdout and
# stderr are its own), then writes the trace's records as JSON lines
# (`trace_check --jsonl`) to JSONL, for tests/tools/check_capture.py. Returns
# CMD's exit status; fails the test when the trace cannot be read.
TRACE_CHECK="$STALLPROF_BUILD_DIR/trace_check"
[ -x "$TRACE_CHECK" ] || fail "$TRACE_CHECK is not built"
record() {
  local jsonl=$1 rc=0
  shift
  "$SP" run -q -o "$TMP/t.pb" -- "$@" || rc=$?
  "$TRACE_CHECK" --jsonl "$TMP/t.pb" > "$jsonl" || fail "trace_check cannot read the trace of: $*"
  return $rc
}
