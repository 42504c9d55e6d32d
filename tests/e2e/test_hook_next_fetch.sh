#!/usr/bin/env bash
# The hook's per-batch path (the extension's NextWrapper and Fetch, and the
# ctypes fallback's Python copy of them): the next() that ends an epoch records
# an epoch_end span from the call; another exception propagates unchanged and
# ends its wait and fetch spans; an iterator subclass whose __next__ calls
# super().__next__() is still timed; in workers each fetch span's arg is the
# index of the batch it fetched, whatever order each worker gets them in; and
# stallprof.stage takes its arguments by keyword.
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
cat > "$TMP/batches.py" <<'PY'
import sys, time
import torch
import stallprof
from torch.utils.data import DataLoader, Dataset, IterableDataset
from torch.utils.data.dataloader import _SingleProcessDataLoaderIter

case = sys.argv[1]


class Items(Dataset):
    """Sample i is i; sample 7 raises (case boom); samples of even batches of
    4 are slow (case workers), so the two workers finish out of turn."""
    def __len__(self):
        return 24

    def __getitem__(self, i):
        if case == "boom" and i == 7:
            raise ValueError("boom at 7")
        if case == "workers" and (i // 4) % 2 == 0:
            time.sleep(0.004)
        return i


class SlowEnd(IterableDataset):
    """Five items, then 60 ms before the stream ends: the next() that raises
    StopIteration takes at least that long."""
    def __iter__(self):
        for i in range(5):
            yield i
        time.sleep(0.06)


class DoublingIter(_SingleProcessDataLoaderIter):
    def __next__(self):
        return super().__next__() * 2


class DoublingLoader(DataLoader):
    def _get_iterator(self):
        return DoublingIter(self)


if case == "epoch_end":
    print("items", [int(x) for x in DataLoader(SlowEnd(), batch_size=None)])
elif case == "boom":
    seen = []
    try:
        for batch in DataLoader(Items(), batch_size=1):
            seen.append(int(batch))
    except ValueError as error:
        print("raised", type(error).__name__, error, "after", seen)
elif case == "subclass":
    print("batches", [int(b.sum()) for b in DoublingLoader(Items(), batch_size=4)])
elif case == "workers":
    print("batches", [int(b[0]) for b in DataLoader(Items(), batch_size=4, num_workers=2, prefetch_factor=3)])
elif case == "stage":
    with stallprof.stage(name="kw", scope=3) as s:
        s.arg = 5
    with stallprof.stage("pos", 4):
        pass
    print("stages done", stallprof.client_kind())
PY
# check JSONL <<'PY' ... PY: a Python check of the trace's records.
check() {
  "$PY" - "$@" || fail "$CLIENT: $CASE: recorded spans are wrong"
}
for CLIENT in cext ctypes; do
  if [ "$CLIENT" = ctypes ]; then export STALLPROF_FORCE_CTYPES=1; else unset STALLPROF_FORCE_CTYPES; fi

  CASE=epoch_end
  record "$TMP/$CASE.jsonl" "$PY" "$TMP/batches.py" $CASE > "$TMP/out.txt" || fail "$CLIENT: $CASE failed"
  grep -q "items \[0, 1, 2, 3, 4\]" "$TMP/out.txt" || fail "$CLIENT: $CASE: $(cat "$TMP/out.txt")"
  check "$TMP/$CASE.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
waits = [r for r in recs if r.get("name") == "dataloader.wait"]
ends = [r for r in recs if r.get("name") == "dataloader.epoch_end"]
assert [w["arg"] for w in waits] == [0, 1, 2, 3, 4], waits
assert len(ends) == 1 and ends[0]["arg"] == 5, ends
last = waits[-1]["start"] + waits[-1]["dur"]
# From the call of the sixth next() (after the fifth returned) to its raise, 60 ms of which the dataset slept.
assert ends[0]["start"] >= last, (ends, last)
assert 60_000_000 <= ends[0]["dur"] < 1_000_000_000, ends
PY

  CASE=boom
  record "$TMP/$CASE.jsonl" "$PY" "$TMP/batches.py" $CASE > "$TMP/out.txt" || fail "$CLIENT: $CASE failed"
  grep -q "raised ValueError boom at 7 after \[0, 1, 2, 3, 4, 5, 6\]" "$TMP/out.txt" \
    || fail "$CLIENT: $CASE: the exception did not propagate unchanged: $(cat "$TMP/out.txt")"
  check "$TMP/$CASE.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
def args(name): return [r["arg"] for r in recs if r.get("name") == name]
assert args("dataloader.wait") == list(range(8)), args("dataloader.wait")  # the failed next() too
assert args("dataloader.fetch") == list(range(8)), args("dataloader.fetch")
assert args("dataloader.getitem") == list(range(7)), args("dataloader.getitem")
assert args("dataloader.collate") == list(range(7)), args("dataloader.collate")
assert args("dataloader.epoch_end") == [], args("dataloader.epoch_end")
PY

  CASE=subclass
  record "$TMP/$CASE.jsonl" "$PY" "$TMP/batches.py" $CASE > "$TMP/out.txt" || fail "$CLIENT: $CASE failed"
  grep -q "batches \[12, 44, 76, 108, 140, 172\]" "$TMP/out.txt" || fail "$CLIENT: $CASE: $(cat "$TMP/out.txt")"
  check "$TMP/$CASE.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
def args(name): return [r["arg"] for r in recs if r.get("name") == name]
assert args("dataloader.wait") == list(range(6)), args("dataloader.wait")
assert args("dataloader.fetch") == list(range(6)), args("dataloader.fetch")
assert args("dataloader.epoch_end") == [6], args("dataloader.epoch_end")
PY

  CASE=workers
  record "$TMP/$CASE.jsonl" "$PY" "$TMP/batches.py" $CASE > "$TMP/out.txt" || fail "$CLIENT: $CASE failed"
  grep -q "batches \[0, 4, 8, 12, 16, 20\]" "$TMP/out.txt" || fail "$CLIENT: $CASE: $(cat "$TMP/out.txt")"
  check "$TMP/$CASE.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
fetches = [r for r in recs if r.get("name") == "dataloader.fetch"]
getitems = [r for r in recs if r.get("name") == "dataloader.getitem"]
assert len(fetches) == 6 and len({f["pid"] for f in fetches}) == 2, fetches
for f in fetches:
    inside = [g["arg"] for g in getitems if (g["pid"], g["tid"]) == (f["pid"], f["tid"])
              and f["start"] <= g["start"] and g["start"] + g["dur"] <= f["start"] + f["dur"]]
    # Batch b holds samples 4b .. 4b+3.
    assert inside == [4 * f["arg"] + k for k in range(4)], (f, inside)
PY

  CASE=stage
  record "$TMP/$CASE.jsonl" "$PY" "$TMP/batches.py" $CASE > "$TMP/out.txt" || fail "$CLIENT: $CASE failed"
  grep -q "stages done $CLIENT" "$TMP/out.txt" || fail "$CLIENT: $CASE: not recorded through $CLIENT: $(cat "$TMP/out.txt")"
  check "$TMP/$CASE.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
kw = [r for r in recs if r.get("name") == "kw"]
pos = [r for r in recs if r.get("name") == "pos"]
assert len(kw) == 1 and kw[0]["arg"] == 5 and kw[0]["scope"] == 3, kw
assert len(pos) == 1 and pos[0]["scope"] == 4, pos
PY
done
echo OK
