#!/usr/bin/env bash
# The committed real traces (traces/README.md) keep their verdicts, bottlenecks
# and numbers, in text and JSON, and report and export still read them.
# Numbers are pinned to what the current definitions give these fixed traces,
# within +-0.01 of a fraction (a stall fraction moving from 0.25 to 0.20 fails);
# where the workload's set costs imply a value, the comment says it.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
T="$STALLPROF_SOURCE_DIR/traces"
# golden <trace> <loader> <verdict id> <bottleneck id> <verdict text> <stall> <steady shares: cause=share,...> <split: key=fraction,...>
golden() {
  local trace=$1 loader=$2 verdict=$3 bottleneck=$4 text=$5 stall=$6 shares=$7 split=$8
  $SP analyze "$T/$trace" >out.txt 2>err.txt || fail "$trace: analyze failed: $(cat err.txt)"
  grep -q "^$loader: $text" out.txt || fail "$trace: expected '$loader: $text', got: $(head -2 out.txt)"
  $SP analyze "$T/$trace" --json | "$PY" -c '
import json, sys
loader, verdict, bottleneck, stall, shares, split = sys.argv[1:]
d = json.load(sys.stdin)
assert d["schema"] == "stallprof.analysis/2"
l = next(x for x in d["loaders"] if x["name"] == loader)
assert l["verdict"] == verdict, (l["verdict"], verdict)
assert l["bottleneck"] == bottleneck, (l["bottleneck"], bottleneck)
tol = 0.01
assert abs(l["stall_fraction"] - float(stall)) <= tol, ("stall_fraction", l["stall_fraction"], stall)
got = {x["cause"]: x["share"] for x in l["account"]["steady"]["lines"]}
for key, want in (kv.split("=") for kv in shares.split(",")):
    assert abs(got[key] - float(want)) <= tol, ("steady share of " + key, got[key], want)
s = l["split"]
assert s["available"]
for key, want in (kv.split("=") for kv in split.split(",")):
    assert abs(s[key] - float(want)) <= tol, ("split " + key, s[key], want)
# The DS-Analyzer split is a view of the account: fetch = storage, prep = worker CPU + contention.
assert abs(s["fetch_stall_fraction"] - got["storage"]) <= 1e-9
assert abs(s["prep_stall_fraction"] - got["prep"] - got["contention"]) <= 1e-9
assert abs(s["handoff_fraction"] - got["handoff"]) <= 1e-9
' "$loader" "$verdict" "$bottleneck" "$stall" "$shares" "$split" || fail "$trace: JSON verdict, bottleneck or numbers changed"
  $SP report "$T/$trace" -o r.html 2>/dev/null || fail "$trace: report failed"
  grep -q "$text" r.html || fail "$trace: the report does not show the verdict"
  $SP export "$T/$trace" -o t.json 2>/dev/null || fail "$trace: export failed"
  "$PY" -c 'import json,sys; json.load(open("t.json"))' || fail "$trace: export is not JSON"
}
# train: the main process sleeps 4 x 5 ms per batch in next() (no device reads:
# other blocking), then 10 ms of compute: set costs imply a stall of 20/30 = 0.667.
# The verdict line's parts add up to the stall: the sleeps are named in it.
golden input_bound_serial.pb train highly_input_bound other_blocking \
  "HIGHLY input-bound: 68% of step time waiting for data (fetch 0%, prep 2%, handoff 1%, other blocking 64%)" 0.676 \
  "compute=0.324,other_blocking=0.644,storage=0,handoff=0.008" "fetch_stall_fraction=0,prep_stall_fraction=0.024,handoff_fraction=0.008"
# val: the same sleeps and no compute at all.
golden input_bound_serial.pb val highly_input_bound other_blocking "HIGHLY input-bound" 1.0 \
  "compute=0,other_blocking=0.961,storage=0" "fetch_stall_fraction=0,prep_stall_fraction=0.033"
# 2 workers, 8 ms of sleep per batch against a 60 ms step: set costs imply no stall.
golden balanced_workers.pb train not_input_bound compute "not input-bound" 0.022 \
  "compute=0.978,handoff=0.022,other_blocking=0" "fetch_stall_fraction=0,prep_stall_fraction=0,handoff_fraction=0.022"
# 2 workers burning 32 ms of CPU per batch on 2 shared cores against a 10 ms
# step: the run queue (contention) outweighs the CPU itself on that machine.
# (0.756 before the steady state left out each epoch's last 4 batches, which
# came out of the workers' queues faster than they were produced.)
golden cpu_prep_contended.pb train highly_input_bound contention "HIGHLY input-bound" 0.778 \
  "compute=0.222,prep=0.232,contention=0.546,storage=0" "fetch_stall_fraction=0,prep_stall_fraction=0.778,handoff_fraction=0"
# Two epochs: the epoch table has both.
$SP analyze "$T/input_bound_serial.pb" --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
l = next(x for x in d["loaders"] if x["name"] == "train")
assert len(l["epochs"]) == 2 and all(e["iterations"] == 40 for e in l["epochs"]), l["epochs"]
' || fail "epochs of input_bound_serial.pb are wrong"
echo PASS
