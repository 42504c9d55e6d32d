#!/usr/bin/env bash
# A loader that delivers thousands of batches a second (scripts/workloads/
# fast_loader.py): the counter budget reads CPU, delay and io on a sample of
# its fetch and wait spans only, the trace says so (config counter_share), and
# analyze estimates the rest: the account's CPU lines say "estimated" with how
# many spans were measured and a 95% bound, the wall-time lines do not.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
$SP run -q -o fast.pb -- "$PY" "$WORKLOADS/fast_loader.py" --samples 2000 --epochs 1 --step-us 100 > out.txt \
  || fail "fast_loader.py failed under stallprof run"
grep -q "^epoch 0: 2000 samples" out.txt || fail "fast_loader.py did not report its samples/s: $(cat out.txt)"
$SP analyze fast.pb --json > fast.json || fail "analyze failed"
$SP analyze fast.pb > fast.txt || fail "analyze (text) failed"
"$PY" - <<'PY' || fail "the sampled counters are not estimated and labelled (above)"
import json
l = next(x for x in json.load(open("fast.json"))["loaders"] if x["name"] == "train")
c = l["counters"]
print("counters:", json.dumps(c))
assert 0 < c["share"] < 1, c
for kind in ("fetches", "waits"):
    x = c[kind]
    assert x["spans"] == 2000, (kind, x)
    # Batches 0, 1, 2, 4, ... are always measured; the budget samples a few
    # more. It is a share of the thread's time, so a job slowed by the tests
    # beside it gets more of its spans measured (quiet: 1-18%; failed once at
    # an upper bound of half under ctest -j2): most must still be estimated.
    assert 11 <= x["measured"] < x["spans"] * 0.9, (kind, x)
    assert x["estimated"] == x["spans"] - x["measured"], (kind, x)
f = c["fetches"]
# The 95% bound's coverage is unit-tested (test_analysis_sampling); here it
# must be there and sane. Its relative width shrinks as 1.96 CV / sqrt(n): a
# heavy-tailed CPU per wall second (CV up to 5) on 24 measured spans once gave
# 104%, so the bound allows 10 / sqrt(n), and never less than 100%.
import math
assert f["cpu_estimated_s"] > 0 and f["cpu_error_s"] > 0, f
assert f["cpu_error_s"] < f["cpu_estimated_s"] * max(1.0, 10 / math.sqrt(f["measured"])), f
lines = {x["cause"]: x for x in l["account"]["whole_run"]["lines"]}
assert lines["prep"]["estimated"] and "of 2000 fetch spans" in lines["prep"]["evidence"], lines["prep"]
assert not lines["compute"]["estimated"] and not lines["handoff"]["estimated"], lines
assert "counters read on" in lines["stallprof"]["evidence"], lines["stallprof"]
PY
grep -q "~ estimated in part" fast.txt || fail "the text report does not mark the estimated lines"
echo PASS
