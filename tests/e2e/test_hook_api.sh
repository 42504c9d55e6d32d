#!/usr/bin/env bash
# The explicit Python API: stallprof.stage as context manager and decorator
# (spans with CPU time), instant, counter; and a silent no-op without a ring.
source "$(dirname "$0")/lib.sh"
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
cat > "$TMP/api.py" <<'PY'
import time
import stallprof

@stallprof.stage("decorated")
def work(n):
    end = time.thread_time() + 0.005
    while time.thread_time() < end:
        pass
    return n * 2

for i in range(3):
    with stallprof.stage("decode") as s:
        s.arg = i
        time.sleep(0.002)
    assert work(i) == i * 2
stallprof.instant("mark", arg=7)
stallprof.counter("queue_depth", 5)
print("enabled", stallprof.enabled(), stallprof.client_kind())
PY
record "$TMP/capture.jsonl" "$PY" "$TMP/api.py" > "$TMP/out.txt" || fail "API script failed under capture"
grep -q "enabled True cext" "$TMP/out.txt" || fail "not enabled under capture: $(cat "$TMP/out.txt")"
"$PY" - "$TMP/capture.jsonl" <<'PY' || fail "API records wrong"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
def named(n): return [r for r in recs if r.get("name") == n]
decode, deco = named("decode"), named("decorated")
assert [r["arg"] for r in decode] == [0, 1, 2], decode
assert all(r["has_cpu"] and r["dur"] >= 2_000_000 for r in decode), decode
assert len(deco) == 3 and all(r["has_cpu"] and r["cpu"] >= 4_000_000 for r in deco), deco
assert [(r["type"], r["arg"]) for r in named("mark")] == [("instant", 7)]
assert [(r["type"], r["arg"]) for r in named("queue_depth")] == [("counter", 5)]
PY
# Without a ring the same script runs and records nothing (no error output).
PYTHONPATH="$STALLPROF_BUILD_DIR/python" "$PY" "$TMP/api.py" > "$TMP/off.txt" 2> "$TMP/off.err" || fail "API script failed without a ring"
grep -q "enabled False" "$TMP/off.txt" || fail "enabled without a ring"
[ ! -s "$TMP/off.err" ] || fail "stderr without a ring: $(cat "$TMP/off.err")"
echo OK
