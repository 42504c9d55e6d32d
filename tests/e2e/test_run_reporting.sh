#!/usr/bin/env bash
# What run says on stderr when nobody watches a terminal (batch jobs, SLURM
# logs): the one summary line (path, events, drops, duration) unless -q; a
# warning when python's -E/-I/-S kept the hook out; a note when no DataLoader
# iteration was recorded; a note that torchrun's
# ranks share one trace.
source "$(dirname "$0")/lib.sh"
cd "$TMP"

# stderr is a file here, not a terminal.
"$SP" run -o "$TMP/t.pb" -- sh -c 'sleep 0.1' 2>"$TMP/err" || fail "run failed"
grep -Eq "^stallprof: wrote $TMP/t.pb \([0-9]+ events, [0-9]+ dropped, [0-9.]+ s, .*\)$" "$TMP/err" \
  || fail "no summary line when stderr is not a terminal: $(cat "$TMP/err")"
"$SP" run -q -o "$TMP/t.pb" -- true 2>"$TMP/err"
[ ! -s "$TMP/err" ] || fail "-q printed: $(cat "$TMP/err")"

# python -E: nothing can be recorded, and run says why.
cat >"$TMP/stage.py" <<'PY'
import sys
try:
    import stallprof
    with stallprof.stage("s"):
        pass
except ImportError:
    pass
PY
for flag in -E -I; do
  "$SP" run -o "$TMP/e.pb" -- "$PY" $flag "$TMP/stage.py" 2>"$TMP/err" || fail "python $flag failed: $(cat "$TMP/err")"
  grep -q "stallprof: warning: no process was recorded: python ran with $flag" "$TMP/err" \
    || fail "no warning for python $flag: $(cat "$TMP/err")"
done
"$SP" run -o "$TMP/e.pb" -- "$PY" "$TMP/stage.py" 2>"$TMP/err" || fail "python failed: $(cat "$TMP/err")"
if grep -q "warning" "$TMP/err"; then fail "a warning without -E: $(cat "$TMP/err")"; fi
# That job took no batch from a DataLoader: a note says analyze will find no steps.
grep -q "^stallprof: note: no DataLoader iteration was recorded, so analyze will find no steps" "$TMP/err" \
  || fail "no note for a job without a DataLoader: $(cat "$TMP/err")"
# A torch program that slices tensors it holds (pytorch/examples'
# word_language_model) took no batch: analyze says so in one line, with how
# long it ran, and exits 5 (nothing to analyze), not "no spans".
cat >"$TMP/slices.py" <<'PY'
import torch
import torch.utils.data
data = torch.arange(100.)
for i in range(0, 100, 10):
    data[i:i + 10].sum()
PY
"$SP" run -q -o "$TMP/s.pb" -- "$PY" "$TMP/slices.py" || fail "the slicing job failed"
status=0
"$SP" analyze "$TMP/s.pb" >/dev/null 2>"$TMP/err" || status=$?
[ "$status" -eq 5 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] \
  && grep -Eq "ran [0-9.]+ m?s and exited 0 with stallprof's hook loaded in 1 Python process, but never took a batch" "$TMP/err" \
  || fail "analyze of a job without a DataLoader (exit $status): $(cat "$TMP/err")"
cat >"$TMP/loader.py" <<'PY'
import torch.utils.data
for _ in torch.utils.data.DataLoader(range(4), batch_size=2):
    pass
PY
"$SP" run -o "$TMP/l.pb" -- "$PY" "$TMP/loader.py" 2>"$TMP/err" || fail "the loader job failed: $(cat "$TMP/err")"
if grep -q "note: no DataLoader" "$TMP/err"; then fail "the no-DataLoader note for a job with one: $(cat "$TMP/err")"; fi

# torchrun: one line at the start saying that ranks share the trace.
mkdir -p "$TMP/bin"
printf '#!/bin/sh\nexit 0\n' >"$TMP/bin/torchrun"
chmod +x "$TMP/bin/torchrun"
PATH="$TMP/bin:$PATH" "$SP" run -o "$TMP/trace-%r.pb" -- torchrun --nproc_per_node 2 x.py 2>"$TMP/err" \
  || fail "fake torchrun failed: $(cat "$TMP/err")"
[ "$(grep -c "stallprof: note: every rank torchrun starts records into this one trace ($TMP/trace-0.pb); 'stallprof analyze $TMP/trace-0.pb' shows them per rank" "$TMP/err")" = 1 ] \
  || fail "no torchrun note: $(cat "$TMP/err")"
echo PASS
