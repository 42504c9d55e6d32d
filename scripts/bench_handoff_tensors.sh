#!/usr/bin/env bash
# What the handoff advice's "fewer tensors per batch" is worth on a job not
# written for stallprof (scripts/workloads/text_classifier.py: a collate that
# returns 3 tensors, or with --pack the same data in one): bare runs of the
# two alternated, then each one's training samples/s, their medians and the
# pairs' ratios; and, profiled once each, analyze's handoff line and advice.
# Prints figures; asserts nothing.
#   scripts/bench_handoff_tensors.sh [pairs]     (default 5; about 30 s a pair)
set -euo pipefail
cd "$(dirname "$0")/.."
SP="${STALLPROF_BIN:-$PWD/build/stallprof}"
PY=/usr/bin/python3
W=scripts/workloads/text_classifier.py
PAIRS="${1:-5}"
TMP=$(mktemp -d /tmp/stallprof-tensors.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
rate() { sed -n 's/.*train \([0-9.]*\) samples\/s$/\1/p' | tail -1; }
for pair in $(seq "$PAIRS"); do
  three=$("$PY" "$W" 2>/dev/null | rate)
  one=$("$PY" "$W" --pack 2>/dev/null | rate)
  echo "pair $pair: 3 tensors $three, 1 tensor $one samples/s (x$(awk -v a="$three" -v b="$one" 'BEGIN { printf "%.3f", b / a }'))"
  echo "$three $one" >>"$TMP/pairs"
done
"$PY" - "$TMP/pairs" <<'PY'
import statistics, sys
pairs = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
three, one = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
ratios = sorted(b / a for a, b in pairs)
print(f"median: 3 tensors {three:.1f}, 1 tensor {one:.1f} samples/s; pairs' ratios {ratios[0]:.3f}-{ratios[-1]:.3f}, median {statistics.median(ratios):.3f}")
PY
for pack in "" --pack; do
  "$SP" run -q -o "$TMP/t.pb" -- "$PY" "$W" $pack >/dev/null 2>&1
  echo "profiled${pack:+ $pack}:"
  "$SP" analyze "$TMP/t.pb" | grep -E "^train:|^    handoff |^      - handoff" | cut -c1-400
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
