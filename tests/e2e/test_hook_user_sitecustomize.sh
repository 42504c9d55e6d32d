#!/usr/bin/env bash
# The bootstrap sitecustomize chains to the one it shadows, and that module is
# the job's `sitecustomize` afterwards: `import sitecustomize` in the job sees
# the user's names, not the bootstrap.
source "$(dirname "$0")/lib.sh"
mkdir -p "$TMP/site"
cat >"$TMP/site/sitecustomize.py" <<'PY'
MAGIC = 42
PY
cat >"$TMP/job.py" <<'PY'
import sitecustomize
import stallprof
print("magic", sitecustomize.MAGIC, "file", sitecustomize.__file__, "enabled", stallprof.enabled())
PY
PYTHONPATH="$TMP/site" "$SP" run -q -o "$TMP/t.pb" -- "$PY" "$TMP/job.py" >"$TMP/out" 2>"$TMP/err" \
  || fail "the job failed under run: $(cat "$TMP/err")"
grep -q "^magic 42 file $TMP/site/sitecustomize.py enabled True$" "$TMP/out" \
  || fail "the user's sitecustomize is not the one imported: $(cat "$TMP/out") $(cat "$TMP/err")"
[ ! -s "$TMP/err" ] || fail "unexpected stderr: $(cat "$TMP/err")"
echo PASS
