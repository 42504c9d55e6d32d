#!/usr/bin/env bash
# An HDF5 dataset read through h5py, in the two ways real trainers write it:
# the file's path held as a string and the file opened in each __getitem__
# (yjn870/SRCNN-pytorch's TrainDataset), and an h5py.File opened lazily in
# each worker with its h5py.Dataset kept. Every open re-reads the file's
# superblock and B-tree nodes through read calls, so the read-call estimate
# sized SRCNN's 51 MiB file at 786 MiB. The hook finds the file (a path to a
# file with HDF5's signature, or the h5py objects) and whatif --cache sizes
# the dataset from it.
source "$(dirname "$0")/lib.sh"
need_torch
"$PY" -c 'import h5py' 2>/dev/null || skip "$PY cannot import h5py (Debian: python3-h5py)"
cd "$TMP"
cat >patches.py <<'PY'
import sys, h5py, numpy as np, torch
from torch.utils.data import DataLoader, Dataset
PATH, ITEMS = sys.argv[1], 512
class PerItemOpen(Dataset):  # the path held; the file opened for each item
    def __init__(self): self.h5_file = PATH
    def __len__(self): return ITEMS
    def __getitem__(self, i):
        with h5py.File(self.h5_file, "r") as f:
            return torch.from_numpy(f["lr"][i] / 255.), torch.from_numpy(f["hr"][i] / 255.)
class LazyFile(Dataset):  # one h5py.File a process, opened on its first item
    def __init__(self): self.path, self.lr = PATH, None
    def __len__(self): return ITEMS
    def __getitem__(self, i):
        if self.lr is None: self.lr = h5py.File(self.path, "r")["lr"]
        return torch.from_numpy(self.lr[i] / 255.)
if sys.argv[2] == "create":
    rng = np.random.default_rng(0)
    with h5py.File(PATH, "w") as f:
        for key in ("lr", "hr"):
            f.create_dataset(key, data=rng.random((ITEMS, 64, 64), dtype=np.float32) * 255)
else:
    dataset = PerItemOpen() if sys.argv[2] == "per-item" else LazyFile()
    patches_loader = DataLoader(dataset, batch_size=16, shuffle=True, num_workers=int(sys.argv[3]))
    for epoch in range(2):
        for batch in patches_loader:
            pass
PY
"$PY" patches.py data.h5 create || fail "creating the HDF5 file failed"
mib=$(awk -v b="$(stat -c %s data.h5)" 'BEGIN{printf "%.3f", b/1048576}')
cat data.h5 >/dev/null  # warm: the fetches read nothing from the device
for way in per-item:2 lazy:0 lazy:2; do
  kind=${way%:*} workers=${way#*:}
  $SP run -q -o $kind$workers.pb -- "$PY" patches.py data.h5 $kind $workers || fail "run ($way) failed"
  $SP whatif $kind$workers.pb --cache 1G >$kind$workers.txt 2>err.txt || fail "whatif --cache 1G ($way) failed: $(cat err.txt)"
  grep "bytes read per sample\|^  dataset:" $kind$workers.txt
  grep -q "bytes read per sample: .*(measured, the size of the file the dataset reads from (HDF5" $kind$workers.txt ||
    fail "$way: the dataset was not sized from its HDF5 file: $(grep 'bytes read per sample' $kind$workers.txt)"
  got=$(sed -n 's/^  dataset: \([0-9.]*\) MiB in 512 items.*/\1/p' $kind$workers.txt)
  [ -n "$got" ] && awk -v g="$got" -v m="$mib" 'BEGIN{exit !(g > 0.99 * m && g < 1.01 * m)}' ||
    fail "$way: the dataset is not its file's $mib MiB: $(grep '^  dataset:' $kind$workers.txt)"
done
$SP analyze per-item2.pb >a.txt || fail "analyze failed"
grep -q "dataset 512 samples ([0-9.]* MiB in the HDF5 file it reads)" a.txt ||
  fail "analyze does not name the HDF5 file: $(grep 'dataset 512' a.txt)"
echo PASS
