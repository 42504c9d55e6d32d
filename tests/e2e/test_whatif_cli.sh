#!/usr/bin/env bash
# whatif through the real binary on a real recorded run: a prep-bound loader
# (1 worker burning CPU per sample, a sleeping step) predicts its own baseline,
# more workers on more cores lift the prep bottleneck up to compute, the JSON
# and the SVG plot are well formed, and bad flags fail with the flag named.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"

$SP run -q -o prep.pb -- "$PY" "$WORKLOADS/synthetic.py" --workers 1 --batches 50 --batch-size 4 \
  --prep-cpu-ms 10 --compute-ms 10 >prep.out || fail "run failed"

$SP whatif prep.pb --cores 1,2,4 --workers 1,auto --plot sweep.svg >text.out || fail "whatif text failed"
cat text.out
grep -q "model error" text.out || fail "no model error against the measured baseline"
grep -q "cpu prep" text.out || fail "the 1-worker prep-bound loader is not reported as cpu prep bound"
grep -q "<svg" sweep.svg || fail "no SVG written"
grep -q "bound</title>" sweep.svg || fail "the SVG marks no bottleneck region"
grep -Eq "^ +[0-9.]+ +auto [0-9]+ " text.out || fail "the rows --workers auto chose do not say so"

$SP whatif prep.pb --cores 1,4 --workers 1,3 --json >sweep.json || fail "whatif --json failed"
$SP whatif prep.pb --cores 4 --workers 1,auto --json >auto.json || fail "whatif --workers auto --json failed"
"$PY" -c 'import json, sys; r = [s["auto_workers"] for s in json.load(open(sys.argv[1]))["loaders"][0]["scenarios"]]; assert r == [False, True], r' auto.json ||
  fail "the JSON does not mark the scenario --workers auto chose"
"$PY" - sweep.json <<'PY' || fail "whatif JSON is off (above)"
import json, sys
d = json.load(open(sys.argv[1]))
l = d["loaders"][0]
assert l["loader"] == "train", l["loader"]
base, measured = l["baseline"], l["measured_samples_per_s"]
print(f"baseline predicted {base['samples_per_s']:.1f}, measured {measured:.1f}, error {l['model_error']:+.3f}")
# The profiled configuration reuses the measured costs: a loose bound against noise on a shared machine.
assert abs(l["model_error"]) < 0.25, l["model_error"]
rows = {(s["cores"], s["workers"]): s["prediction"] for s in l["scenarios"]}
assert len(rows) == 4, rows.keys()
# 40 ms of CPU per batch in one worker vs a 10 ms step: prep bound; 3 workers on 4 cores are faster.
assert rows[(1, 1)]["bottleneck"] == "cpu prep", rows[(1, 1)]
assert rows[(4, 3)]["samples_per_s"] > 2 * rows[(4, 1)]["samples_per_s"], (rows[(4, 3)], rows[(4, 1)])
# Set costs: 40 ms of worker CPU and a 10 ms sleep a batch of 4. One worker on
# 2+ cores: a batch per ~40 ms, 100 samples/s; 3 workers on 4 cores: the step
# and the main loop's receive bind, well above 200. Within the model's 20%.
assert 75 < rows[(4, 1)]["samples_per_s"] < 125, rows[(4, 1)]
assert rows[(4, 1)]["prep_stall_fraction"] > 0.5, rows[(4, 1)]
PY

# analyze's advice for the prep-bound loader carries the model's prediction
# for more workers: the same figure whatif prints for that count.
$SP analyze prep.pb --json >analyze.json || fail "analyze --json failed"
workers=$("$PY" -c 'import json, sys; p = json.load(open(sys.argv[1]))["loaders"][0]["worker_predictions"]; print(p[-1]["num_workers"] if p else "")' analyze.json)
[ -n "$workers" ] || fail "analyze predicted no worker count for the prep-bound loader: $(grep -o '"advice".*' analyze.json | head -c 600)"
$SP whatif prep.pb --workers "$workers" --json >count.json || fail "whatif --workers $workers failed"
"$PY" - analyze.json count.json "$workers" <<'PY' || fail "analyze's advice and whatif disagree (above)"
import json, sys
l = json.load(open(sys.argv[1]))["loaders"][0]
p = {x["num_workers"]: x for x in l["worker_predictions"]}[int(sys.argv[3])]
w = json.load(open(sys.argv[2]))["loaders"][0]["scenarios"][0]["prediction"]
print(f"analyze: num_workers={sys.argv[3]} predicted {p['samples_per_s']:.1f} samples/s ({p['change']:+.3f}); whatif {w['samples_per_s']:.1f}")
print(l["advice"][0])
assert abs(p["samples_per_s"] - w["samples_per_s"]) <= 1e-5 * w["samples_per_s"], (p, w)  # whatif prints 6 digits
assert l["advice"][0].startswith("worker CPU ("), l["advice"][0]
# The advice names the fewest workers within 1% of the best predicted rate (kAsGoodAsMore).
top = max(x["samples_per_s"] for x in l["worker_predictions"])
best = min((x for x in l["worker_predictions"] if x["samples_per_s"] >= 0.99 * top), key=lambda x: x["num_workers"])
assert f"num_workers={best['num_workers']} is predicted at {best['samples_per_s']:.1f} samples/s" in l["advice"][0], l["advice"][0]
PY

expect_usage() {  # expect_usage <flag> <args...>: exit 2 and the flag in the message
  local flag=$1
  shift
  set +e
  $SP whatif prep.pb "$@" 2>err.txt
  local rc=$?
  set -e
  [ "$rc" = 2 ] || fail "whatif $* exited $rc, not 2"
  grep -q -- "$flag" err.txt || fail "whatif $*: the error does not name $flag: $(cat err.txt)"
  grep -q "^stallprof: error: " err.txt || fail "whatif $*: not one error line"
}
expect_usage --cores --cores 0
expect_usage "--cores ''" --cores ''
expect_usage "at most 4096" --cores 1e9
expect_usage --cache --cache -5G
expect_usage --cache --cache 10Q
expect_usage --disk-bw --disk-bw 2G
expect_usage --workers --workers lots
expect_usage --loader --loader nosuch
expect_usage --prefetch-factor --prefetch-factor 0
# An option of another name, or a stray word: the first one named as given,
# with the subcommand's help (CLI11 listed them last to first: "0 --prefetch").
expect_usage "unknown option '--prefetch' for 'stallprof whatif' (see 'stallprof whatif --help')" --prefetch 0
expect_usage "unexpected argument 'stray' for 'stallprof whatif'" --workers 1 stray
set +e
$SP whatif prep.pb --cache 1G 2>err.txt
rc=$?
set -e
[ "$rc" = 5 ] || fail "--cache on a dataset without files exited $rc, not 5 (unsupported)"
grep -q "dataset size" err.txt || fail "the error does not name the missing dataset size: $(cat err.txt)"
grep -q -- "--cache all" err.txt || fail "the error does not offer --cache all: $(cat err.txt)"
# Everything cached needs no dataset size: its row reads "all", hit 100%,
# and nothing to remove, since this loader reads no files: no change in io.
$SP whatif prep.pb --cache all >all.txt 2>&1 || fail "--cache all on a dataset without files failed: $(cat all.txt)"
grep -Eq "^ +[0-9.]+ +[0-9]+ +all +100% " all.txt || fail "no 'all' row at 100% hit: $(cat all.txt)"
$SP whatif prep.pb --cache all --json >all.json
"$PY" - all.json <<'PY' || fail "--cache all's JSON row is off"
import json, sys
row = json.load(open(sys.argv[1]))["loaders"][0]["scenarios"][0]
assert row["cache_all"] is True and row["cache_bytes"] is None, row
assert row["prediction"]["hit_ratio"] == 1, row["prediction"]
PY

# Two loaders (neither named train, so both are predicted), one file-backed:
# --cache predicts the one and names the other as not predicted.
mkdir -p files
for i in $(seq 0 31); do head -c 4096 /dev/urandom >"files/$i.bin"; done
cat >zip.py <<'PY'
import os, torch
from torch.utils.data import DataLoader, Dataset, TensorDataset
class Files(Dataset):
    def __init__(self):
        self.files = sorted(os.path.join("files", f) for f in os.listdir("files"))
    def __len__(self):
        return len(self.files)
    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            return torch.tensor(len(f.read()))
src = DataLoader(Files(), batch_size=4)
tgt = DataLoader(TensorDataset(torch.zeros(32)), batch_size=4)
for epoch in range(3):
    for a, b in zip(src, tgt):
        pass
PY
$SP run -q -o zip.pb -- "$PY" zip.py || fail "run of two zipped loaders failed"
$SP whatif zip.pb --cache 1G >zip.txt 2>&1 || fail "--cache with one file-backed loader of two failed: $(cat zip.txt)"
grep -q "loader 'src'" zip.txt || fail "the file-backed loader is not predicted: $(cat zip.txt)"
grep -q "^not predicted: loader 'tgt' has no dataset size" zip.txt || fail "the other loader is not named: $(cat zip.txt)"
$SP whatif zip.pb --cache 1G --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
assert [l["loader"] for l in d["loaders"]] == ["src"], d["loaders"]
assert [n["loader"] for n in d["not_predicted"]] == ["tgt"], d["not_predicted"]
' || fail "the JSON does not list the loader not predicted"

# A train and a validation loader: whatif and recommend predict train by
# default and name the loader they left out; --loader all predicts both.
cat >trainval.py <<'PY'
import torch
from torch.utils.data import DataLoader, TensorDataset
train_loader = DataLoader(TensorDataset(torch.zeros(64, 8)), batch_size=8)
val_loader = DataLoader(TensorDataset(torch.zeros(32, 8)), batch_size=16)
for epoch in range(2):
    for (x,) in train_loader:
        pass
    for (x,) in val_loader:
        pass
PY
$SP run -q -o tv.pb -- "$PY" trainval.py || fail "run of a train and a val loader failed"
$SP whatif tv.pb >tv.txt || fail "whatif of train and val failed"
grep -q "^other loaders in the trace: val (--loader NAME or --loader all" tv.txt || fail "whatif does not name the loader it left out: $(tail -3 tv.txt)"
grep -q "loader 'val'" tv.txt && fail "whatif predicted val without --loader"
$SP recommend tv.pb >tv_rec.txt || fail "recommend of train and val failed"
grep -q "^other loaders in the trace: val" tv_rec.txt || fail "recommend does not name the loader it left out: $(tail -3 tv_rec.txt)"
$SP whatif tv.pb --loader all --json >tv_all.json || fail "whatif --loader all failed"
$SP recommend tv.pb --json >tv_rec.json || fail "recommend --json failed"
"$PY" - tv_all.json tv_rec.json <<'PY' || fail "--loader all or the JSON's other_loaders is wrong (above)"
import json, sys
d = json.load(open(sys.argv[1]))
assert [l["loader"] for l in d["loaders"]] == ["train", "val"], [l["loader"] for l in d["loaders"]]
assert d["other_loaders"] == [], d["other_loaders"]
r = json.load(open(sys.argv[2]))
assert [l["loader"] for l in r["loaders"]] == ["train"], r["loaders"]
assert r["other_loaders"] == ["val"], r["other_loaders"]
PY
echo "PASS"
