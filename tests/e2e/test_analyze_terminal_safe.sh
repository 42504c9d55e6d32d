#!/usr/bin/env bash
# Names the job records (stage, loader, sampler, the exception that ended it) reach analyze's and
# recommend's text output escaped: an escape sequence in a stage name must not
# retitle the window or clear the screen of whoever reads the report.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat >"$TMP/evil.py" <<'PY'
import torch
import stallprof
from torch.utils.data import DataLoader, Dataset, SequentialSampler

EVIL = "\x1b]0;pwned\x07\x1b[2J\u009b31m"

class Evil(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        with stallprof.stage(EVIL + "decode"):
            return torch.zeros(4)

class EvilSampler(SequentialSampler):
    pass
EvilSampler.__name__ = EvilSampler.__qualname__ = "S" + EVIL

loader = DataLoader(Evil(), batch_size=4, sampler=EvilSampler(range(64)))
for epoch in range(2):
    for batch in loader:
        pass
raise RuntimeError("E" + EVIL)  # the exception that ends the job: analyze's "ended:" line quotes it
PY
set +e; "$SP" run -q -o "$TMP/t.pb" -- "$PY" "$TMP/evil.py" 2>/dev/null; rc=$?; set -e
[ "$rc" = 1 ] || fail "the workload returned $rc, not its exception's 1"
"$STALLPROF_BUILD_DIR/trace_check" --names "$TMP/t.pb" > "$TMP/names.txt" || fail "trace_check cannot read the trace"
grep -q "pwned" "$TMP/names.txt" || fail "the hostile name was not recorded"
"$SP" analyze "$TMP/t.pb" >"$TMP/out" 2>"$TMP/err" || fail "analyze failed: $(cat "$TMP/err")"
grep -q 'pwned' "$TMP/out" || skip "analyze did not show the hostile stage name (nothing to check): $(head -20 "$TMP/out")"
"$PY" - "$TMP/out" <<'PY' || fail "analyze wrote raw control characters: $(cat -v "$TMP/out" | grep pwned)"
import sys
data = open(sys.argv[1], "rb").read()
bad = [b for b in (b"\x1b", b"\x07", b"\xc2\x9b") if b in data]
assert not bad, bad
assert b"\\e]0;pwned\\x07\\e[2J\\u{009b}31m" in data, data
assert b"raised RuntimeError: E\\e]0;pwned" in data, data  # the ending line, escaped too
PY
"$SP" recommend "$TMP/t.pb" >"$TMP/rec" 2>"$TMP/err" || true
if grep -q $'\x1b' "$TMP/rec"; then fail "recommend wrote a raw escape: $(cat -v "$TMP/rec")"; fi
echo PASS
