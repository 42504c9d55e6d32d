#!/usr/bin/env bash
# A user's text classifier (scripts/workloads/padded_text.py: tokenizing in
# __getitem__, a pad_sequence collate, a short EmbeddingBag step) whose 2
# workers cost more than they save: its batches take a worker about as long
# to make as the main process takes to receive them, and workers and step
# share the 2 cores. A few of its next() calls found their batch held by the
# worker's next fetch (8 of 2500), so the handoff advice named the GIL and
# left fetching in the main process out, which ran 1.3x faster. analyze must
# advise num_workers=0 with its predicted gain, and runs without workers,
# alternated with runs with 2, must show a gain (what the workload's costs
# say, measured here).
source "$(dirname "$0")/lib.sh"
need_torch
[ "$(nproc)" -ge 2 ] || skip "needs 2 cores"
require_quiet_cpus
cd "$TMP"
rate() { $SP run -q -o "$1.pb" -- "$PY" "$WORKLOADS/padded_text.py" --workers "$2" --epochs 3 >/dev/null || fail "run failed"
         $SP analyze "$1.pb" --json >"$1.json" || fail "analyze --json failed"
         "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["loaders"][0]["steady_samples_per_s"])' "$1.json"; }
w2=() w0=()
for round in 1 2; do
  w2+=("$(rate w2_$round 2)")
  w0+=("$(rate w0_$round 0)")
done
$SP analyze w2_1.pb | sed -n '/advice:/,/DS-Analyzer/p'
echo "runs: num_workers=2 ${w2[*]}; num_workers=0 ${w0[*]} samples/s (steady state)"
status=0
"$PY" - "${w2[*]}" "${w0[*]}" <<'PY' || status=$?
import json, statistics, sys
w2 = [float(x) for x in sys.argv[1].split()]
w0 = [float(x) for x in sys.argv[2].split()]
gain = statistics.median(w0) / statistics.median(w2) - 1
print(f"measured: no workers {gain:+.1%} on 2 workers (medians)")
if gain < 0.10:
    # On this host the workload's costs no longer make the workers a loss:
    # the advice cannot be judged here (exit 77: skipped, not passed).
    print(f"SKIP: no workers measured {gain:+.1%} (10% needed for the test's premise)")
    sys.exit(77)
for r in (1, 2):
    loader = json.load(open(f"w2_{r}.json"))["loaders"][0]
    handoff = [a for a in loader["advice"] if a.startswith("handoff")]
    print(f"round {r}: {handoff}")
    assert handoff and "or no workers" in handoff[0] and "num_workers=0 is predicted at" in handoff[0], handoff
    assert "the batches wait in their workers" not in handoff[0], handoff
PY
[ "$status" = 77 ] && exit 77
[ "$status" = 0 ] || fail "the advice is wrong (above)"
