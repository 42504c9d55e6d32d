#!/usr/bin/env bash
# The committed real traces (traces/README.md) keep their verdicts and
# bottlenecks, in text and JSON, and report and export still read them.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
T="$STALLPROF_SOURCE_DIR/traces"
golden() {  # golden <trace> <loader> <verdict id> <bottleneck id> <verdict text>
  local trace=$1 loader=$2 verdict=$3 bottleneck=$4 text=$5
  $SP analyze "$T/$trace" >out.txt 2>err.txt || fail "$trace: analyze failed: $(cat err.txt)"
  grep -q "^$loader: $text" out.txt || fail "$trace: expected '$loader: $text', got: $(head -2 out.txt)"
  $SP analyze "$T/$trace" --json | "$PY" -c '
import json, sys
loader, verdict, bottleneck = sys.argv[1:]
d = json.load(sys.stdin)
assert d["schema"] == "stallprof.analysis/2"
l = next(x for x in d["loaders"] if x["name"] == loader)
assert l["verdict"] == verdict, (l["verdict"], verdict)
assert l["bottleneck"] == bottleneck, (l["bottleneck"], bottleneck)
s = l["split"]
assert s["available"]
assert s["fetch_stall_s"] + s["prep_stall_s"] + s["handoff_s"] <= s["measured_stall_s"] * (1 + 1e-6) + 1e-9
' "$loader" "$verdict" "$bottleneck" || fail "$trace: JSON verdict or bottleneck changed"
  $SP report "$T/$trace" -o r.html 2>/dev/null || fail "$trace: report failed"
  grep -q "$text" r.html || fail "$trace: the report does not show the verdict"
  $SP export "$T/$trace" -o t.json 2>/dev/null || fail "$trace: export failed"
  "$PY" -c 'import json,sys; json.load(open("t.json"))' || fail "$trace: export is not JSON"
}
golden input_bound_serial.pb train highly_input_bound storage "HIGHLY input-bound"
golden input_bound_serial.pb val highly_input_bound storage "HIGHLY input-bound"
golden balanced_workers.pb train not_input_bound compute "not input-bound"
golden cpu_prep_contended.pb train highly_input_bound cpu_prep "HIGHLY input-bound"
# Two epochs: the epoch table has both.
$SP analyze "$T/input_bound_serial.pb" --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
l = next(x for x in d["loaders"] if x["name"] == "train")
assert len(l["epochs"]) == 2 and all(e["iterations"] == 40 for e in l["epochs"]), l["epochs"]
' || fail "epochs of input_bound_serial.pb are wrong"
echo PASS
