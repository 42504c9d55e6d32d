#!/usr/bin/env bash
# Non-persistent workers, 30 short epochs: 60 worker processes that each end
# with os._exit, leaving their lanes for the launcher to reclaim. Every
# sample is counted (an IterableDataset's 13 samples a worker and epoch,
# from its getitem spans, which needs a trace that lost none: a drain that
# freed a lane between a new worker's claim and its owner's write once lost
# a worker's whole epoch without a drop counted). With 4 lanes the workers
# find them all taken: the loss is counted and the advice names --lanes.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat > churn.py <<'PY'
import torch
from torch.utils.data import DataLoader, IterableDataset


class Stream(IterableDataset):  # 13 samples from each worker
    def __iter__(self):
        for i in range(13):
            yield torch.zeros(4)


partial = DataLoader(Stream(), batch_size=8, num_workers=2)
for epoch in range(30):
    for _ in partial:
        pass
PY
samples() {
  "$PY" -c "import json, sys; d = json.load(open(sys.argv[1])); l = d['loaders'][0]; print(l['samples'], l['config']['batch_size'], d['traces'][0]['quality']['dropped'])" "$1"
}
$SP run -q -o all.pb -- "$PY" churn.py >all.log 2>&1 || fail "the script failed under stallprof run: $(tail -3 all.log)"
$SP analyze all.pb --json >all.json || fail "analyze --json failed"
read -r got batch dropped < <(samples all.json)
echo "128 lanes: $got samples (batch $batch), $dropped dropped"
[ "$dropped" = 0 ] || fail "$dropped records dropped with 128 lanes: $(cat all.log)"
[ "$got" = 780 ] || [ "$got" = 780.0 ] || fail "$got samples counted for 30 epochs x 2 workers x 13"

$SP run -q --lanes 4 -o few.pb -- "$PY" churn.py >few.log 2>&1 || fail "the script failed under stallprof run --lanes 4: $(tail -3 few.log)"
cat few.log
grep -q "events dropped (all 4 ring lanes taken by threads at once); use --lanes 256" few.log ||
  fail "no warning that the lanes ran out: $(cat few.log)"
grep -q "ring full" few.log && fail "a lane shortage called a full ring: $(cat few.log)"
$SP analyze few.pb --json >few.json || fail "analyze --json failed"
read -r got batch dropped < <(samples few.json)
echo "4 lanes: $got samples (batch $batch), $dropped dropped"
[ "$dropped" -gt 0 ] || fail "the trace counts no drop"
# analyze says so under the verdict, not only in its data quality at the end.
$SP analyze few.pb >few.txt || fail "analyze failed"
sed -n 2p few.txt | grep -q "^$dropped records lost (.*: $dropped from threads that found all 4 ring lanes taken (\`stallprof run --lanes 256\`)" ||
  fail "no lost-records line under the verdict: $(head -3 few.txt)"
$SP report few.pb -o few.html >/dev/null 2>&1 || fail "report failed"
grep -q "<p class=\"note\" id=\"lost-records\">$dropped records lost (" few.html ||
  fail "the report does not say the trace lost records"
echo PASS
