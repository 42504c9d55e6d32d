#!/usr/bin/env bash
# analyze of a gen_trace trace counts what gen_trace's set shape implies: the
# decoder's fast paths and the streamed analysis lose, add or misfile no span.
# gen_trace 100000 spans, 4 workers: iteration i writes 32 getitem, a collate,
# a fetch and a wait span (35), plus an epoch instant every 1000 iterations;
# the last iteration starts at 70003 + 857 * 35 = 99998 spans, so it gets 2
# getitems and the trace holds 2858 iterations in 3 epochs (1000, 1000, 858),
# 100003 spans, 2857 * 32 + 2 = 91426 getitems, 2858 collates, fetches round
# robin over the workers (715, 715, 714, 714), batch size 91426 / 2858 -> 32.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
GEN="$STALLPROF_BUILD_DIR/gen_trace"
[ -x "$GEN" ] || skip "gen_trace is not built"
"$GEN" 100000 t.pb 4 >/dev/null
$SP analyze --json t.pb >out.json 2>err.txt || fail "analyze failed: $(cat err.txt)"
"$PY" - out.json <<'PY' || fail "analyze --json does not count what gen_trace wrote"
import json, sys
d = json.load(open(sys.argv[1]))
[l] = d["loaders"]
q = d["traces"][0]["quality"]
want = {
    "spans": (q["spans"], 100003),
    "iterations": (l["iterations"], 2858),
    "epochs": (len(l["epochs"]), 3),
    "workers": (l["config"]["num_workers"], 4),
    "batches per worker": (sorted(w["batches"] for w in l["workers"]), [714, 714, 715, 715]),
    "stages": (sorted((s["name"], s["count"]) for s in l["stages"]),
               [("dataloader.collate", 2858), ("dataloader.getitem", 91426)]),
}
bad = [f"{k}: got {g}, expected {e}" for k, (g, e) in want.items() if g != e]
assert not bad, bad
PY
grep -q "batch 32 (mean, from getitem spans), 4 workers" <($SP analyze t.pb) || fail "the text does not infer batch 32 and 4 workers"
echo PASS
