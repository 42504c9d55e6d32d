#!/usr/bin/env bash
# recommend through the real binary on a real recorded run: a paste-ready
# DataLoader line, more workers for a prep-bound loader, a binding constraint
# with its shadow price, Little's-law prefetch, and clear refusals.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"

$SP run -q -o prep.pb -- "$PY" "$WORKLOADS/synthetic.py" --workers 1 --batches 50 --batch-size 4 \
  --prep-cpu-ms 10 --compute-ms 10 >prep.out || fail "run failed"

$SP recommend prep.pb --cores 8 >text.out || fail "recommend failed"
cat text.out
grep -Eq "DataLoader\(\.\.\., num_workers=[0-9]+, prefetch_factor=[0-9]+, pin_memory=torch.cuda.is_available\(\), persistent_workers=True\)" text.out \
  || fail "no paste-ready DataLoader line"
grep -q "shadow price" text.out || fail "no shadow price"

$SP recommend prep.pb --cores 8 --json >plan.json || fail "recommend --json failed"
"$PY" - plan.json <<'PY' || fail "recommend JSON is off (above)"
import json, sys
d = json.load(open(sys.argv[1]))
l = d["loaders"][0]
print({k: l[k] for k in ("num_workers", "prefetch_factor", "predicted_samples_per_s", "measured_samples_per_s", "speedup", "advice")})
# 40 ms of CPU per batch against a 10 ms step: about 4 workers feed it; 1 worker cannot.
assert 2 <= l["num_workers"] <= 7, l["num_workers"]
assert l["prefetch_factor"] >= 1
assert l["speedup"] > 1.5, l["speedup"]
assert l["binding"]["kind"] in ("model ingest", "cores"), l["binding"]
assert l["binding"]["shadow_price"] > 0
PY

# Two cores: CPU binds; one more core has a positive price.
$SP recommend prep.pb --cores 1.5 --json >small.json || fail "recommend --cores 1.5 failed"
"$PY" -c 'import json,sys; l=json.load(open(sys.argv[1]))["loaders"][0]; print(l["advice"]); assert l["binding"]["kind"]=="cores", l["binding"]; assert "one more core adds" in l["advice"]' small.json \
  || fail "a CPU-bound plan does not price a core"

# The training process's own peak RSS comes out of the memory first: 1 KiB
# holds not even that, and 1 KiB beside it holds no worker.
job=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["loaders"][0]["job_memory_bytes"])' small.json)
[ "$job" -gt $((50 << 20)) ] || fail "the training process's peak RSS in recommend's JSON is $job bytes, not a python3 with torch's"
set +e
$SP recommend prep.pb --memory 1K 2>err.txt
rc=$?
set -e
[ "$rc" = 5 ] || fail "a memory budget below the training process's RSS exited $rc, not 5"
grep -q "the training process alone holds .* (peak RSS) of the 1.00 KiB memory" err.txt || fail "no explanation: $(cat err.txt)"
set +e
$SP recommend prep.pb --memory $((job + 1024)) 2>err.txt
rc=$?
set -e
[ "$rc" = 5 ] || fail "a memory budget below one worker's RSS exited $rc, not 5"
grep -q "the memory left beside the training process, 1.00 KiB, is below one DataLoader worker's RSS" err.txt || fail "no explanation: $(cat err.txt)"
set +e
$SP recommend prep.pb --cores 0 2>err.txt
rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--cores" err.txt || fail "--cores 0 not refused as usage: $rc $(cat err.txt)"
# The same bound as whatif's (one parser): a typo of 1e30 cores is not planned for.
set +e
$SP recommend prep.pb --cores 1e30 2>err.txt
rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--cores 1e30: more than 4096 cores" err.txt || fail "--cores 1e30 not refused as usage: $rc $(cat err.txt)"
set +e
$SP recommend prep.pb --memory 12Q 2>err.txt
rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--memory" err.txt || fail "--memory 12Q not refused as usage: $rc $(cat err.txt)"
echo "PASS"
