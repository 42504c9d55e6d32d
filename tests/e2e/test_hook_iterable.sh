#!/usr/bin/env bash
# IterableDataset loaders (2 workers with batches, and num_workers=0 without
# batching): one wait, fetch and collate span per batch (and read_storage/
# read_calls per fetch span with CPU where /proc/thread-self/io exists: the
# counter budget samples them), none for the fetch that ends the stream.
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
cat > "$TMP/iterable.py" <<'PY'
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

class Stream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        wid, n = (info.id, info.num_workers) if info else (0, 1)
        return iter(range(wid, 22, n))

import os, sys
def mark_worker(worker_id):  # the user's own worker_init_fn must still run
    open(os.path.join(sys.argv[1], "init%d" % worker_id), "w").close()

stream_loader = DataLoader(Stream(), batch_size=4, num_workers=2, worker_init_fn=mark_worker)
single_loader = DataLoader(Stream(), batch_size=None, num_workers=0)
print("stream", sum(1 for _ in stream_loader))
print("single", sum(1 for _ in single_loader))
PY
record "$TMP/capture.jsonl" "$PY" "$TMP/iterable.py" "$TMP" > "$TMP/out.txt" || fail "workload failed"
[ -f "$TMP/init0" ] && [ -f "$TMP/init1" ] || fail "the user's worker_init_fn did not run in both workers"
"$PY" - "$TMP/capture.jsonl" "$TMP/out.txt" <<'PY' || fail "iterable records wrong"
import collections, json, os, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
counts = dict(line.split() for line in open(sys.argv[2]))
scope = {r["str"]: r["scope"] for r in recs if r.get("key") == "name"}
assert set(scope) == {"stream", "single"}, scope
# The loader's own worker_init_fn by name (not the hook's wrapper); none for the other.
inits = {r["scope"]: r["str"] for r in recs if r.get("key") == "worker_init_fn"}
assert inits == {scope["stream"]: "mark_worker"}, inits
c = collections.Counter((r.get("name"), r.get("scope")) for r in recs if r["type"] == "span")
for loader in ("stream", "single"):
    n = int(counts[loader])
    for kind in ("wait", "fetch", "collate"):
        got = c[("dataloader." + kind, scope[loader])]
        assert got == n, "%s: %d %s spans for %d batches" % (loader, got, kind, n)
    measured = sum(1 for r in recs if r.get("name") == "dataloader.fetch" and r["scope"] == scope[loader] and r["has_cpu"])
    assert measured >= 1, "%s: no fetch span with CPU" % loader
    if os.path.exists("/proc/thread-self/io"):
        for kind in ("read_storage", "read_calls"):  # one each per measured fetch, none for the one that ends the stream
            got = c[("dataloader." + kind, scope[loader])]
            assert got == measured, "%s: %d %s spans for %d fetch spans with CPU" % (loader, got, kind, measured)
    assert c[("dataloader.getitem", scope[loader])] == 22, loader
PY
echo OK
