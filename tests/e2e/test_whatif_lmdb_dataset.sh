#!/usr/bin/env bash
# An LMDB dataset opened lazily in each worker (the ImageFolderLMDB pattern:
# lmdb.open(readonly=True, lock=False, readahead=False) on the first
# __getitem__) reads its records through page faults: no read calls, and no
# device reads when the page cache holds it. Its size is the LMDB file's,
# found by the hook in the worker, so whatif --cache can answer. Before, the
# median of the fetches' read calls sized it: fresh non-persistent workers
# import PIL's image plugins in their first fetch (400 KiB of .pyc files),
# and with two batches a worker an epoch that was half the fetches (a 16 MiB
# LMDB was given 2.44 MiB).
source "$(dirname "$0")/lib.sh"
need_torch
"$PY" -c 'import lmdb' 2>/dev/null || skip "$PY cannot import lmdb (Debian: python3-lmdb)"
cd "$TMP"
cat >records.py <<'PY'
import io, os, pickle, sys, lmdb, torch
from torch.utils.data import DataLoader, Dataset
PATH, RECORDS, SIZE = sys.argv[1], 96, 64 * 1024
class Records(Dataset):
    def __init__(self): self.path = PATH
    def __len__(self): return RECORDS
    def open_lmdb(self):
        self.env = lmdb.open(self.path, subdir=os.path.isdir(self.path), readonly=True, lock=False,
                             readahead=False, meminit=False)
        self.txn = self.env.begin(write=False, buffers=True)
    def __getitem__(self, i):
        if not hasattr(self, "txn"): self.open_lmdb()
        value = pickle.loads(self.txn.get(b"%d" % i))
        return torch.frombuffer(bytearray(value[::4096]), dtype=torch.uint8)
if sys.argv[2] == "create":
    env = lmdb.open(PATH, subdir=sys.argv[3] == "dir", map_size=1 << 30)
    with env.begin(write=True) as txn:
        for i in range(RECORDS): txn.put(b"%d" % i, pickle.dumps(os.urandom(SIZE)))
    env.sync(); env.close()
else:
    for epoch in range(2):  # fresh workers each epoch, two batches each
        records_loader = DataLoader(Records(), batch_size=8, shuffle=True, num_workers=6)
        for x in records_loader:
            pass
PY
for layout in file dir; do
  "$PY" records.py db.$layout create $layout || fail "creating the $layout LMDB failed"
  data=db.$layout; [ $layout = dir ] && data=db.dir/data.mdb
  mib=$(awk -v b="$(stat -c %s $data)" 'BEGIN{printf "%.3f", b/1048576}')
  cat $data >/dev/null  # warm: the fetches read nothing from the device
  $SP run -q -o $layout.pb -- "$PY" records.py db.$layout read || fail "run ($layout) failed"
  $SP whatif $layout.pb --cache 1G >$layout.txt 2>err.txt || fail "whatif --cache 1G ($layout LMDB) failed: $(cat err.txt)"
  grep "bytes read per sample\|^  dataset:" $layout.txt
  grep -q "bytes read per sample: .*(measured, the size of the file the dataset reads from (LMDB" $layout.txt ||
    fail "the $layout LMDB was not sized from its file: $(grep 'bytes read per sample' $layout.txt)"
  got=$(sed -n 's/^  dataset: \([0-9.]*\) MiB in 96 items.*/\1/p' $layout.txt)
  [ -n "$got" ] && awk -v g="$got" -v m="$mib" 'BEGIN{exit !(g > 0.99 * m && g < 1.01 * m)}' ||
    fail "the $layout LMDB is not its file's $mib MiB: $(grep '^  dataset:' $layout.txt)"
done
echo PASS
