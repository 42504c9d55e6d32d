#!/usr/bin/env bash
# A sampler whose __iter__ does its per-epoch work eagerly (a 250 ms
# permutation or sort, set here as 250 ms on the CPU) runs it at the first
# draw of each epoch, on the main thread: in the first next() without
# workers, in the iterator's creation with them. analyze calls it epoch
# start-up with the sampler named (it was handoff, 81% of the whole run), and
# whatif's whole-run prediction pays it in every scenario (it predicted the
# 0-worker profile's own whole run +432% before; the 2-worker profile's
# prediction for 0 workers +210%). Runs alone (timed).
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
cd "$TMP"
cat >"$TMP/sampler_work.py" <<'PY'
import sys, time, torch
from torch.utils.data import DataLoader, Dataset, Sampler
class Items(Dataset):
    def __len__(self): return 64
    def __getitem__(self, i): return torch.zeros(4)
class SortingSampler(Sampler):
    def __init__(self, n): self.n = n
    def __len__(self): return self.n
    def __iter__(self):  # eager: the whole epoch's order before the first index
        start = time.perf_counter()
        while time.perf_counter() - start < 0.25:
            pass
        return iter(range(self.n))
if __name__ == "__main__":
    loader = DataLoader(Items(), batch_size=8, sampler=SortingSampler(64), num_workers=int(sys.argv[1]))
    for epoch in range(3):
        for x in loader:
            time.sleep(0.01)
PY
for w in 0 2; do
  "$SP" run -o "$TMP/w$w.pb" -- "$PY" "$TMP/sampler_work.py" $w >"$TMP/out$w" 2>&1 || fail "run failed: $(cat "$TMP/out$w")"
  "$SP" analyze "$TMP/w$w.pb" --json >"$TMP/a$w.json" || fail "analyze failed"
  "$SP" analyze "$TMP/w$w.pb" >"$TMP/a$w.txt" || fail "analyze failed"
done
"$SP" whatif "$TMP/w0.pb" --workers 0 --json >"$TMP/p0.json" || fail "whatif on the 0-worker profile failed"
"$SP" whatif "$TMP/w2.pb" --workers 0 --json >"$TMP/p2.json" || fail "whatif on the 2-worker profile failed"
"$PY" - "$TMP" <<'PY' || fail "the sampler's per-epoch work was misread (above)"
import json, sys
d = sys.argv[1]
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)
def lines(w):
    loader = json.load(open(f"{d}/a{w}.json"))["loaders"][0]
    return loader, {x["cause"]: x for x in loader["account"]["whole_run"]["lines"]}
l0, a0 = lines(0)
startup = a0["startup"]["seconds"]
check(0.6 <= startup <= 1.0, f"0 workers: start-up {startup:.3f} s, set 3 x 0.25 s")
check(a0["handoff"]["seconds"] < 0.1, f"0 workers: handoff {a0['handoff']['seconds']:.3f} s, not the sampler's")
check("the sampler's first draw" in a0["startup"]["evidence"], "0 workers: the start-up evidence names the sampler")
draws = [e["sampler_first_s"] for e in l0["epochs"]]
check(len(draws) == 3 and all(0.24 <= d <= 0.4 for d in draws), f"0 workers: each epoch's first draw {draws}, set 0.25 s")
check(any("the sampler's first draw takes" in a for a in l0["advice"]), "0 workers: the advice names the sampler")
l2, a2 = lines(2)
check("priming the workers" in a2["startup"]["evidence"], "2 workers: the start-up evidence names the sampler in the creation")
measured0 = l0["samples_per_s"]
p0 = json.load(open(f"{d}/p0.json"))["loaders"][0]
e0 = p0["whole_run_model_error"]
check(abs(e0) <= 0.20, f"0-worker profile, its own whole run: error {e0:+.1%} (within 20%)")
p2 = json.load(open(f"{d}/p2.json"))["loaders"][0]
predicted = p2["scenarios"][0]["prediction"]["whole_run_samples_per_s"]
e2 = predicted / measured0 - 1
check(abs(e2) <= 0.20, f"2-worker profile, 0 workers whole run: predicted {predicted:.0f} samples/s, measured {measured0:.0f}: error {e2:+.1%} (within 20%)")
sys.exit(0 if ok else 1)
PY
echo PASS
