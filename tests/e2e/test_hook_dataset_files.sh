#!/usr/bin/env bash
# Hook: a file-backed dataset's files are counted and sized through the
# wrappers torch builds around one: random_split's Subset takes its indices'
# files, ConcatDataset its parts' (every part with files), and a part without
# files leaves the size to be estimated (no dataset_files). A custom dataset's
# list of one existing file per sample counts under any attribute name
# (pytorch/examples' super_resolution: image_filenames); a list of text
# samples does not.
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
mkdir -p "$TMP/data"
cat > "$TMP/wrapped.py" <<'PY'
import os, sys
import torch
from torch.utils.data import ConcatDataset, DataLoader, Dataset, Subset

class Files(Dataset):
    def __init__(self, root, prefix, count, size):
        self.files = []
        for i in range(count):
            path = os.path.join(root, f"{prefix}{i}.bin")
            with open(path, "wb") as f:
                f.write(b"x" * size)
            self.files.append(path)
    def __len__(self):
        return len(self.files)
    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            return torch.tensor(len(f.read()))

class Named(Dataset):  # the files under a name of its own, beside a list of labels
    def __init__(self, root, count, size):
        self.labels = list(range(count))
        self.image_filenames = []
        for i in range(count):
            path = os.path.join(root, f"n{i}.jpg")
            with open(path, "wb") as f:
                f.write(b"x" * size)
            self.image_filenames.append(path)
    def __len__(self):
        return len(self.image_filenames)
    def __getitem__(self, i):
        return torch.tensor(self.labels[i])

class Texts(Dataset):  # one string per sample, not a path
    def __init__(self, count):
        self.lines = [f"line {i} of the corpus" for i in range(count)]
    def __len__(self):
        return len(self.lines)
    def __getitem__(self, i):
        return torch.tensor(len(self.lines[i]))

class NoFiles(Dataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return torch.tensor(i)

root, kind = sys.argv[1], sys.argv[2]
both = ConcatDataset([Files(root, "a", 10, 1000), Files(root, "b", 6, 3000)])
if kind == "subset":      # files 0, 1 (1000 B each) and 12, 13, 14 (3000 B each)
    dataset = Subset(both, torch.tensor([0, 1, 12, 13, 14]))
elif kind == "concat":    # all 16: 10 x 1000 + 6 x 3000
    dataset = both
elif kind == "named":     # 7 x 2000
    dataset = Named(root, 7, 2000)
elif kind == "texts":
    dataset = Texts(9)
else:                     # a part without files
    dataset = ConcatDataset([both, NoFiles()])
for _ in DataLoader(dataset, batch_size=4):
    pass
PY
record "$TMP/subset.jsonl" "$PY" "$TMP/wrapped.py" "$TMP/data" subset || fail "the Subset workload failed"
grep -q '"key":"dataset_files","u64":5}' "$TMP/subset.jsonl" || fail "a Subset of 5 items does not count 5 files"
grep -q '"key":"dataset_bytes","u64":11000}' "$TMP/subset.jsonl" || fail "a Subset's files are not 2 x 1000 + 3 x 3000 bytes"
record "$TMP/concat.jsonl" "$PY" "$TMP/wrapped.py" "$TMP/data" concat || fail "the ConcatDataset workload failed"
grep -q '"key":"dataset_files","u64":16}' "$TMP/concat.jsonl" || fail "a ConcatDataset of 10 + 6 files does not count 16"
grep -q '"key":"dataset_bytes","u64":28000}' "$TMP/concat.jsonl" || fail "a ConcatDataset's files are not 10 x 1000 + 6 x 3000 bytes"
record "$TMP/mixed.jsonl" "$PY" "$TMP/wrapped.py" "$TMP/data" mixed || fail "the mixed workload failed"
grep -q '"key":"dataset_len","u64":20}' "$TMP/mixed.jsonl" || fail "the mixed dataset's length was not recorded"
! grep -q '"key":"dataset_files"' "$TMP/mixed.jsonl" || fail "a ConcatDataset with a part without files counted files"
record "$TMP/named.jsonl" "$PY" "$TMP/wrapped.py" "$TMP/data" named || fail "the image_filenames workload failed"
grep -q '"key":"dataset_files","u64":7}' "$TMP/named.jsonl" || fail "a dataset's 7 files under image_filenames are not counted"
grep -q '"key":"dataset_bytes","u64":14000}' "$TMP/named.jsonl" || fail "a dataset's files under image_filenames are not 7 x 2000 bytes"
record "$TMP/texts.jsonl" "$PY" "$TMP/wrapped.py" "$TMP/data" texts || fail "the text workload failed"
grep -q '"key":"dataset_len","u64":9}' "$TMP/texts.jsonl" || fail "the text dataset's length was not recorded"
! grep -q '"key":"dataset_files"' "$TMP/texts.jsonl" || fail "a list of text lines was taken for files"
