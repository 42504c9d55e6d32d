#!/usr/bin/env bash
# The kernel adds a reaped child's I/O counters to its parent's
# /proc/<pid>/io, so a DataLoader's main process jumps by its workers' reads
# each time an epoch's non-persistent workers are joined. The step's own
# reads (the compute line's evidence, the advice on a step that waits for its
# reads) must not carry them. Set costs: 2 workers each read() a 1 MiB file
# per sample (16 samples an epoch, 3 epochs: 48 MiB through read calls), the
# step reads nothing.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
head -c 1048576 /dev/urandom >blob
cat > reaped.py <<'PY'
import time, torch

class Files(torch.utils.data.Dataset):
    def __len__(self):
        return 16
    def __getitem__(self, i):
        with open("blob", "rb") as f:
            return len(f.read())

loader = torch.utils.data.DataLoader(Files(), batch_size=2, num_workers=2)
for epoch in range(3):
    for batch in loader:
        time.sleep(0.03)
PY
$SP run -q -o reaped.pb -- "$PY" reaped.py >run.log 2>&1 || fail "the run failed: $(tail -3 run.log)"
$SP analyze reaped.pb --json >reaped.json || fail "analyze --json failed"
"$PY" - reaped.json <<'PY' || fail "the step carries the reaped workers' reads (above)"
import json, sys
l = json.load(open(sys.argv[1]))["loaders"][0]
step = l["main_step"]
assert step is not None, "no main_step"
print("the step's read calls: %.0f bytes in all (the workers read 48 MiB)" % step["read_call_bytes"])
assert step["read_call_bytes"] < 1 << 20, step
PY
echo PASS
