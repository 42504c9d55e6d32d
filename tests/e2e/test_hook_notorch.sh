#!/usr/bin/env bash
# A script that never imports torch behaves exactly as without stallprof (same
# stdout, stderr and exit code; torch never loaded), with both interpreters,
# and STALLPROF_RING unset means the bootstrap does nothing at all.
source "$(dirname "$0")/lib.sh"
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
cat > "$TMP/plain.py" <<'PY'
import sys
print("args", sys.argv[1:])
print("torch loaded:", "torch" in sys.modules, "stallprof loaded:", "stallprof" in sys.modules)
print("to stderr", file=sys.stderr)
sys.exit(3)
PY
BOOT="$STALLPROF_BUILD_DIR/python/bootstrap:$STALLPROF_BUILD_DIR/python"
for py in "$PY" python3; do
  command -v "$py" >/dev/null || continue
  set +e
  "$py" "$TMP/plain.py" a "b c" > "$TMP/bare.out" 2> "$TMP/bare.err"; bare_rc=$?
  "$SP" run -q -o "$TMP/t.pb" -- "$py" "$TMP/plain.py" a "b c" > "$TMP/hook.out" 2> "$TMP/hook.err"; hook_rc=$?
  # Bootstrap on the path but no ring: nothing of stallprof may load.
  PYTHONPATH="$BOOT" "$py" "$TMP/plain.py" a "b c" > "$TMP/off.out" 2> "$TMP/off.err"; off_rc=$?
  set -e
  [ "$bare_rc" = 3 ] || fail "$py: bare run exit $bare_rc"
  [ "$hook_rc" = 3 ] || fail "$py: exit code $hook_rc under the hook, expected 3"
  [ "$off_rc" = 3 ] || fail "$py: exit code $off_rc with STALLPROF_RING unset"
  grep -q "torch loaded: False" "$TMP/hook.out" || fail "$py: torch was imported by the hook"
  # Only difference allowed under the hook: the stallprof package is loaded.
  sed 's/stallprof loaded: True/stallprof loaded: False/' "$TMP/hook.out" | cmp -s - "$TMP/bare.out" \
    || fail "$py: stdout differs under the hook"
  cmp -s "$TMP/hook.err" "$TMP/bare.err" || fail "$py: stderr differs under the hook: $(cat "$TMP/hook.err")"
  cmp -s "$TMP/off.out" "$TMP/bare.out" || fail "$py: stdout differs with the bootstrap but no ring"
  cmp -s "$TMP/off.err" "$TMP/bare.err" || fail "$py: stderr differs with the bootstrap but no ring"
  "$TRACE_CHECK" --jsonl "$TMP/t.pb" > "$TMP/capture.jsonl" || fail "$py: trace_check cannot read the trace"
  grep -q '"type":"summary".*"exit_code":3,' "$TMP/capture.jsonl" || fail "$py: the trace does not record exit code 3"
  grep -q '"type":"\(span\|instant\|counter\|config\)"' "$TMP/capture.jsonl" && fail "$py: records from a script without torch"
  # The sitecustomize the bootstrap shadows still runs (chained, not replaced).
  mkdir -p "$TMP/chain"
  echo 'print("chained sitecustomize ran")' > "$TMP/chain/sitecustomize.py"
  out=$(PYTHONPATH="$TMP/chain" "$SP" run -q -o "$TMP/chain.pb" -- "$py" -c 'print("main")')
  [ "$out" = $'chained sitecustomize ran\nmain' ] || fail "$py: shadowed sitecustomize not chained: $out"
done
echo "OK"
