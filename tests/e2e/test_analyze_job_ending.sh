#!/usr/bin/env bash
# What ended a failed job, in analyze: the exception the training process
# died of (with the loader and batch when it came out of a loader's next()),
# a worker killed by SIGSEGV, the signal that killed the command, a
# program that failed before its first batch, a multiprocessing trainer and
# a torch.multiprocessing.spawn rank that raised, and a thread's exception
# in a job that went on. The expected values come from
# the workloads: the sample that raises, the batch size, the signal sent.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"

# run_job NAME RC [VAR=VALUE...]: $TMP/NAME.py under stallprof (into
# $TMP/NAME.pb, its output in $TMP/out and $TMP/err), which must exit RC.
run_job() {
  local name=$1 expected=$2 rc
  shift 2
  set +e; env "$@" "$SP" run -q -o "$TMP/$name.pb" -- "$PY" "$TMP/$name.py" >"$TMP/out" 2>"$TMP/err"; rc=$?; set -e
  [ "$rc" = "$expected" ] || fail "$name: run returned $rc, expected $expected: $(tail -3 "$TMP/err")"
}
# analyze_job NAME: analyze's text of $TMP/NAME.pb into $TMP/text.
analyze_job() {
  "$SP" analyze "$TMP/$1.pb" >"$TMP/text" 2>&1 || fail "$1: analyze failed: $(cat "$TMP/text")"
}

# 1. __getitem__ raises in the worker for sample 13 (line 11 of the script):
# with batch_size=4 and one worker in order, torch re-raises it in the main
# process while it waits for batch 3 (samples 12-15), after batches 0-2;
# nothing catches it. The ending gives the worker's raising line from
# torch's "Original Traceback".
cat >"$TMP/bad_sample.py" <<'PY'
import time
import torch
from torch.utils.data import DataLoader, Dataset

class D(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        time.sleep(0.002)
        if i == 13:
            raise ValueError("bad sample %d" % i)
        return torch.full((8,), float(i))

train = DataLoader(D(), batch_size=4, num_workers=1)
for batch in train:
    time.sleep(0.005)
PY
run_job bad_sample 1
analyze_job bad_sample
grep -Eq "the profiled command exited with code 1; pid [0-9]+ raised ValueError: Caught ValueError in DataLoader worker process 0\. \(ValueError: bad sample 13, at bad_sample\.py:11 in __getitem__\), waiting for batch 3 of loader train" "$TMP/text" \
  || fail "analyze does not name the exception, loader and batch: $(grep -n "exited\|raised" "$TMP/text")"
# Above the loaders, where a user looks first (the Data quality section has it too).
sed -n 2p "$TMP/text" | grep -Eq "^ended: the profiled command exited with code 1; pid [0-9]+ raised ValueError: .*\(the figures cover the run up to it\)$" \
  || fail "the second line is not the ending: $(sed -n 2p "$TMP/text")"
"$SP" analyze --json "$TMP/bad_sample.pb" >"$TMP/bad.json" || fail "analyze --json failed"
"$PY" - "$TMP/bad.json" <<'PY' || fail "the JSON's uncaught_errors"
import json, sys
q = json.load(open(sys.argv[1]))["traces"][0]["quality"]
errors = q["uncaught_errors"]
assert len(errors) == 1, errors
e = errors[0]
assert e["loader"] == "train" and e["batch"] == 3, e
assert e["message"].startswith("ValueError: Caught ValueError in DataLoader worker process 0."), e
assert q["exit_code"] == 1 and q["term_signal"] == 0, q
assert q["ending"].startswith("the profiled command exited with code 1; pid"), q["ending"]
PY

# The same through the ctypes fallback (its record is made in Python).
run_job bad_sample 1 STALLPROF_FORCE_CTYPES=1
analyze_job bad_sample
grep -Eq "pid [0-9]+ raised ValueError: Caught ValueError in DataLoader worker process 0\. \(ValueError: bad sample 13, at bad_sample\.py:11 in __getitem__\), waiting for batch 3 of loader train" "$TMP/text" \
  || fail "the ctypes fallback's record: $(grep -n "exited\|raised" "$TMP/text")"

# 2. A worker killed by SIGSEGV at sample 40: torch raises a RuntimeError
# that names the worker's pid (from next(), or from its SIGCHLD handler
# wherever the main thread is), and the job dies of it.
cat >"$TMP/segv.py" <<'PY'
import os, signal, time
import torch
from torch.utils.data import DataLoader, Dataset

class D(Dataset):
    def __len__(self):
        return 400
    def __getitem__(self, i):
        time.sleep(0.001)
        if i == 40:
            os.kill(os.getpid(), signal.SIGSEGV)
        return i

train = DataLoader(D(), batch_size=4, num_workers=2)
for batch in train:
    time.sleep(0.002)
PY
run_job segv 1
analyze_job segv
# What the job died of, as it printed it (its last line).
died=$( (grep -aE "^[A-Za-z.]*(Error|Exception): " "$TMP/err" || true) | tail -1 | sed "s/[[:space:]]*$//")
# Or Python lost sys.stderr as it died (torch's SIGCHLD handler raising in
# its exit, bare runs as well: 4 of 10 on a loaded machine), and its
# fallback printed the exception's type alone ("object type name: ...").
[ -n "$died" ] || died=$(sed -n "s/^object type name: //p" "$TMP/err" | tail -1)
[ -n "$died" ] || fail "the job printed no exception: $(tail -3 "$TMP/err")"
grep -Fq "the profiled command exited with code 1; pid" "$TMP/text" || fail "no ending: $(grep -n exited "$TMP/text")"
grep -Fq "raised ${died##*.}" "$TMP/text" || fail "analyze does not say '$died': $(grep -n raised "$TMP/text")"
# Where the main thread was: the loop (line 15) or its step (16), past torch's and the library's frames.
grep -Eq "raised .* \(at segv\.py:1[56] in <module>\)" "$TMP/text" || fail "no site in the script: $(grep -n raised "$TMP/text")"
# Recording it adds nothing to the job's output: torch's SIGCHLD handler
# raises wherever the main thread runs Python code, and once did inside a
# Python excepthook of the hook's ("Error in sys.excepthook").
if grep -aEq "Error in sys.excepthook|Exception ignored in atexit" "$TMP/err"; then
  fail "the hook's recording printed: $(grep -aE -A3 "Error in sys.excepthook|Exception ignored in atexit" "$TMP/err")"
fi

# 3. The command killed by a signal (SIGABRT) after some batches: named.
cat >"$TMP/abort.py" <<'PY'
import os, signal
import torch
from torch.utils.data import DataLoader
for i, batch in enumerate(DataLoader(torch.arange(64.), batch_size=4)):
    if i == 10:
        os.kill(os.getpid(), signal.SIGABRT)
PY
run_job abort 134
analyze_job abort
grep -Fq "the profiled command was killed by SIGABRT (signal 6)" "$TMP/text" || fail "the signal is not named: $(grep -n killed "$TMP/text")"

# 4. A wrong dataset path before the first batch: analyze's one-line error
# gives the exception, not only the exit code.
cat >"$TMP/no_data.py" <<'PY'
import torch.utils.data
open("/nonexistent/stallprof/train.csv")
PY
run_job no_data 1
status=0
"$SP" analyze "$TMP/no_data.pb" >/dev/null 2>"$TMP/err" || status=$?
[ "$status" != 0 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "analyze: status $status, $(cat "$TMP/err")"
grep -Fq "before it took a batch, the profiled command exited with code 1; pid" "$TMP/err" \
  && grep -Fq "raised FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/stallprof/train.csv' (at no_data.py:2 in <module>)" "$TMP/err" \
  || fail "the error does not name the exception: $(cat "$TMP/err")"
# 5. A hogwild-style trainer process (multiprocessing.Process, fork) raising
# at line 6 of its script: the child prints it and leaves by os._exit, and
# its parent exits with the child's code.
cat >"$TMP/trainers.py" <<'PY'
import torch, torch.multiprocessing as mp
from torch.utils.data import DataLoader
def train(rank):
    for i, batch in enumerate(DataLoader(torch.arange(64.), batch_size=4)):
        if rank == 1 and i == 5:
            raise ValueError("trainer %d diverged" % rank)
if __name__ == "__main__":
    procs = [mp.Process(target=train, args=(r,)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    raise SystemExit(max(p.exitcode for p in procs))
PY
run_job trainers 1
analyze_job trainers
grep -Eq "^ended: the profiled command exited with code 1; pid [0-9]+ raised ValueError: trainer 1 diverged \(at trainers\.py:6 in train\) \(the figures" "$TMP/text" \
  || fail "the trainer's exception: $(grep -n "ended\|raised" "$TMP/text")"

# 6. torch.multiprocessing.spawn: rank 1 raises at line 6; the parent raises
# ProcessRaisedException holding the rank's traceback, whose last line and
# frame the ending gives.
cat >"$TMP/spawned.py" <<'PY'
import torch, torch.multiprocessing as mp
from torch.utils.data import DataLoader
def run(rank):
    for i, batch in enumerate(DataLoader(torch.arange(64.), batch_size=4)):
        if rank == 1 and i == 5:
            raise KeyError("label")
if __name__ == "__main__":
    mp.spawn(run, nprocs=2)
PY
run_job spawned 1
analyze_job spawned
grep -Fq "raised ProcessRaisedException: -- Process 1 terminated with the following error: (KeyError: 'label', at spawned.py:6 in run)" "$TMP/text" \
  || fail "the rank's exception: $(grep -n "ended\|raised" "$TMP/text")"
# 7. A prefetch thread that raises at line 7 while the main loop goes on and
# exits 0: a note that the job went on, not "ended".
cat >"$TMP/thread.py" <<'PY'
import threading
import torch
from torch.utils.data import DataLoader
def prefetch():
    for i, batch in enumerate(DataLoader(torch.arange(64.), batch_size=4)):
        if i == 3:
            raise ValueError("prefetch failed")
t = threading.Thread(target=prefetch, name="prefetcher")
t.start()
t.join()
for batch in DataLoader(torch.arange(64.), batch_size=4):
    pass
PY
run_job thread 0
analyze_job thread
grep -Eq "^uncaught exception, the job went on: pid [0-9]+ \(thread prefetcher\) raised ValueError: prefetch failed \(at thread\.py:7 in prefetch\)$" "$TMP/text" \
  || fail "the thread's exception: $(grep -n "raised" "$TMP/text")"
echo PASS
