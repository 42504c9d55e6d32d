#!/usr/bin/env bash
# A WebDataset-style stream: an IterableDataset (no len) reading samples from
# tar shards, the shard list split among the workers by get_worker_info().
# whatif --cache refused it ("its fetches read no files"): without a len
# there were no items to size a dataset by. The items are now the samples an
# epoch delivered to StopIteration, the size the shards' files the hook finds
# (80 of them: past the walk's 64-item lists, a list of paths whose first is
# a tar), and the stream is read in its own order, the same each epoch.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat >shards.py <<'PY'
import glob, io, os, sys, tarfile, torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
SHARDS, PER_SHARD, SIZE = 80, 8, 16 * 1024
class TarStream(IterableDataset):
    def __init__(self, urls): self.urls = urls
    def __iter__(self):
        info = get_worker_info()
        for url in self.urls[info.id::info.num_workers] if info else self.urls:
            with tarfile.open(url) as t:
                for m in t:
                    data = t.extractfile(m).read()
                    yield torch.frombuffer(bytearray(data[::64]), dtype=torch.uint8)
if sys.argv[1] == "create":
    for s in range(SHARDS):
        with tarfile.open("shard-%03d.tar" % s, "w") as t:
            for i in range(PER_SHARD):
                info = tarfile.TarInfo("%03d%03d.bin" % (s, i)); info.size = SIZE
                t.addfile(info, io.BytesIO(os.urandom(SIZE)))
else:
    stream_loader = DataLoader(TarStream(sorted(glob.glob("shard-*.tar"))), batch_size=8, num_workers=2)
    for epoch in range(2):
        for batch in stream_loader:
            pass
PY
"$PY" shards.py create || fail "creating the shards failed"
mib=$(cat shard-*.tar | wc -c | awk '{printf "%.3f", $1/1048576}')
cat shard-*.tar >/dev/null  # warm
$SP run -q -o stream.pb -- "$PY" shards.py read || fail "run failed"
$SP whatif stream.pb --cache 1G >w.txt 2>err.txt || fail "whatif --cache 1G failed: $(cat err.txt)"
grep "bytes read per sample\|^  dataset:" w.txt
grep -q "bytes read per sample: .*(measured, the size of the 80 files the dataset reads from (tar" w.txt ||
  fail "the stream was not sized from its 80 shards: $(grep 'bytes read per sample' w.txt)"
grep -q "^  dataset: [0-9.]* MiB in 640 items, sequential order (.*the items: an epoch's samples to StopIteration" w.txt ||
  fail "not 640 items counted from an epoch, read in order: $(grep '^  dataset:' w.txt)"
got=$(sed -n 's/^  dataset: \([0-9.]*\) MiB in 640 items.*/\1/p' w.txt)
awk -v g="$got" -v m="$mib" 'BEGIN{exit !(g > 0.99 * m && g < 1.01 * m)}' ||
  fail "the stream is not its shards' $mib MiB: $(grep '^  dataset:' w.txt)"
echo PASS
