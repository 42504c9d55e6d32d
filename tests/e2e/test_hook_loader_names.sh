#!/usr/bin/env bash
# The names loaders get, through the whole pipeline (run, analyze --json): a
# telling variable name; else the line that called DataLoader(...) (past a
# subclass's __init__), so a loader built anew each epoch inside the loop
# (`for x in DataLoader(...)`) is one loader with every epoch, not one per
# epoch (it was loader1..loader6); two loaders built on one line and
# iterated together (zip) are told apart by "#2"; a loader iterated through
# an installed package's wrapper (tqdm(val_loader) holds it as `iterable`)
# keeps the script's name for it; so does one iterated through the script's
# own wrapper with a generic parameter (torchvision's references:
# MetricLogger.log_every(iterable) inside evaluate(data_loader), called with
# data_loader_test -> "test"; with generic names all the way up, the line
# that built it). DataLoader.__init__, wrapped to see where
# the loader is built, keeps its signature.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
mkdir -p site-packages
cat > site-packages/progress.py <<'PY'
class Progress:  # what tqdm does: keeps the iterable, iterates it in its own frame
    def __init__(self, iterable):
        self.iterable = iterable

    def __iter__(self):
        for item in self.iterable:
            yield item
PY
cat > names.py <<'PY'
import torch
from progress import Progress
from torch.utils.data import DataLoader, TensorDataset


class MyLoader(DataLoader):
    def __init__(self, dataset, **kwargs):
        super().__init__(dataset, **kwargs)


# Libraries read DataLoader.__init__'s signature to re-create loaders
# (Lightning): the hook's wrapper must keep it.
import inspect
assert "num_workers" in inspect.signature(DataLoader.__init__).parameters, inspect.signature(DataLoader.__init__)

ds = TensorDataset(torch.arange(64).float())
train_loader = DataLoader(ds, batch_size=8)
val_loader = DataLoader(ds, batch_size=32)
loader = MyLoader(ds, batch_size=4)  # SUBCLASS
for epoch in range(3):
    for _ in train_loader:
        pass
    for _ in DataLoader(ds, batch_size=16):  # INLINE
        pass
    for _ in loader:
        pass
    for _ in Progress(val_loader):
        pass
for a, b in zip(DataLoader(ds, batch_size=2), DataLoader(ds, batch_size=2)):  # ZIP
    pass


def log_every(iterable):  # torchvision references' MetricLogger.log_every
    for obj in iterable:
        yield obj


def evaluate(data_loader):
    for _ in log_every(data_loader):
        pass


def main():
    data_loader = DataLoader(ds, batch_size=64)  # GENERIC
    data_loader_test = DataLoader(ds, batch_size=16)
    for epoch in range(2):
        evaluate(data_loader)
        evaluate(data_loader_test)


main()
PY
line() { grep -n "# $1\$" names.py | cut -d: -f1; }
export SUBCLASS="names.py:$(line SUBCLASS)" INLINE="names.py:$(line INLINE)" ZIP="names.py:$(line ZIP)" GENERIC="names.py:$(line GENERIC)"
PYTHONPATH="$TMP/site-packages" $SP run -q -o names.pb -- "$PY" names.py >run.log 2>&1 || fail "the script failed under stallprof run: $(tail -3 run.log)"
$SP analyze names.pb --json >names.json || fail "analyze --json failed"
"$PY" - names.json <<'PY' || fail "loader names wrong (above)"
import json, os, sys
loaders = {l["name"]: l for l in json.load(open(sys.argv[1]))["loaders"]}
print(sorted(loaders))
expected = {"train", "val", os.environ["SUBCLASS"], os.environ["INLINE"], os.environ["ZIP"], os.environ["ZIP"] + "#2",
            "test", os.environ["GENERIC"]}
assert set(loaders) == expected, (sorted(loaders), sorted(expected))
inline = loaders[os.environ["INLINE"]]
assert inline["objects"] == 3 and len(inline["epochs"]) == 3, (inline["objects"], len(inline["epochs"]))
assert inline["iterations"] == 3 * 4, inline["iterations"]  # 64 samples in batches of 16, three epochs
assert loaders[os.environ["SUBCLASS"]]["objects"] == 1 and len(loaders[os.environ["SUBCLASS"]]["epochs"]) == 3
PY
echo PASS
