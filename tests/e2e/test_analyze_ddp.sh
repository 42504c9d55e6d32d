#!/usr/bin/env bash
# A data-parallel job of 2 ranks (gloo, CPU) recorded as one trace, each rank
# iterating a DataLoader held in a variable named `dl` (a generic name, so the
# hook names it by the line that created it, ddp_tiny.py:<line>, alike on
# every rank)
# and all-reducing every step, with the same set costs (1 ms fetch per sample,
# 20 ms compute per step): both ranks' loader has one name and one row per
# rank, and no rank is a straggler. Launched by torchrun when it starts here,
# else the way torchrun launches (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
# MASTER_PORT in each rank's environment). Then the ranks started by
# torch.multiprocessing.spawn with their rank given to init_process_group and
# no RANK anywhere: the hook's record of torch.distributed's rank makes them ranks.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
W="$WORKLOADS/ddp_tiny.py"
NAME="ddp_tiny.py:$(grep -n 'dl = DataLoader(' "$W" | cut -d: -f1)"
export NAME
cat >probe.py <<'PY'
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
PY
if timeout 120 "$PY" -m torch.distributed.run --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$(port)" probe.py >probe.log 2>&1; then
  echo "launcher: torchrun"
  $SP run -q -o ddp.pb -- "$PY" -m torch.distributed.run --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$(port)" "$W" \
    >run.log 2>&1 || fail "the job under torchrun failed: $(tail -5 run.log)"
else
  echo "launcher: by hand; torchrun does not start here: $(tail -1 probe.log)"
  # What torchrun does: one process per rank with its identity in the environment.
  cat >launch.sh <<SH
for r in 0 1; do
  RANK=\$r LOCAL_RANK=\$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=\$1 timeout 120 "$PY" "\${@:2}" &
done
wait %1 && wait %2
SH
  bash launch.sh "$(port)" probe.py >probe2.log 2>&1 || skip "a gloo process group of 2 ranks on 127.0.0.1 cannot start here: $(tail -1 probe2.log)"
  $SP run -q -o ddp.pb -- bash launch.sh "$(port)" "$W" >run.log 2>&1 || fail "the job launched by hand failed: $(tail -5 run.log)"
fi
$SP analyze ddp.pb >job.txt || fail "analyze of the job failed"
$SP analyze ddp.pb --json >job.json || fail "analyze --json of the job failed"
"$PY" - job.json <<'PY' || fail "the job's ranks are wrong: $(sed -n '/^Ranks/,/^$/p' job.txt)"
import json, sys
d = json.load(open(sys.argv[1]))
job = d["job"]
assert job is not None, "no job section"
assert job["ranks"] == [0, 1], job["ranks"]
# The same variable on both ranks, one name: the line that created it.
import os
names = sorted({l["name"] for l in d["loaders"]})
assert names == [os.environ["NAME"]], names
assert [l["name"] for l in job["loaders"]] == names, [l["name"] for l in job["loaders"]]
l = job["loaders"][0]
assert [r["rank"] for r in l["ranks"]] == [0, 1], l["ranks"]
for r in l["ranks"]:
    assert r["steps"] == 30, r  # --batches 30
    # Set costs: 20 ms of compute a step (plus the all-reduce), 4 ms of fetch a batch in one worker.
    assert 0.018 < r["compute_per_step_s"] + r["wait_per_step_s"] < 0.060, r
print("steady s/step", [round(r["steady_time_s"] / r["steps"], 4) for r in l["ranks"]],
      "epoch s", [round(r["epoch_time_s"], 3) for r in l["ranks"]], "slowest", l["slowest_rank"], round(l["slowest_slower_by"], 3))
assert l["stragglers"] == [], l["stragglers"]
assert not any(r["straggler"] for r in l["ranks"])
assert job["processes"] == [], job["processes"]
PY
grep -qF "  $NAME, 2 rank(s)" job.txt || fail "the text has no one-row-per-rank table for $NAME: $(sed -n '/^Ranks/,/^$/p' job.txt)"
grep -q "no straggler: the slowest rank" job.txt || fail "the text does not say there is no straggler"
if grep -q "<- straggler\|  straggler: rank" job.txt; then fail "a rank is called a straggler: $(sed -n '/^Ranks/,/^$/p' job.txt)"; fi
# whatif gives each rank's loader its share of the host's cores: the other
# rank runs the same loop, and is not outside load a scenario takes away.
$SP whatif ddp.pb --workers 1 >whatif.txt 2>&1 || fail "whatif of the job failed: $(tail -3 whatif.txt)"
[ "$(grep -c "ranks on this host: 2 (measured" whatif.txt)" = 2 ] ||
  fail "whatif does not give each of the 2 ranks its share of the host's cores: $(grep -i "rank" whatif.txt | head -5)"

# spawn: no RANK in any environment, ranks from init_process_group(rank=...).
$SP run -q -o spawn.pb -- env -u RANK -u LOCAL_RANK "$PY" "$W" --spawn 2 --port "$(port)" >spawn.log 2>&1 \
  || fail "the job started with torch.multiprocessing.spawn failed: $(tail -5 spawn.log)"
$SP analyze spawn.pb --json | "$PY" -c '
import json, os, sys
job = json.load(sys.stdin)["job"]
assert job is not None and job["ranks"] == [0, 1], job
assert [l["name"] for l in job["loaders"]] == [os.environ["NAME"]] and job["loaders"][0]["stragglers"] == [], job["loaders"]
assert job["processes"] == [], job["processes"]
' || fail "ranks started by mp.spawn with init_process_group(rank=...) are not ranks 0 and 1 of one loader"
echo PASS
