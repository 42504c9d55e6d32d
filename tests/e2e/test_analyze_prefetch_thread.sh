#!/usr/bin/env bash
# A loader iterated on a prefetch thread (the DataLoaderX pattern:
# prefetch_generator's BackgroundGenerator fills a queue of one batch from the
# DataLoader, the training loop takes from it). The loader's steps are the
# thread's, so its "compute" is the hand-off, not the training step. Set costs,
# no workers: a batch is 16 x 2 ms of CPU (32 ms); the training step sleeps
# 50 ms (an accelerator's step, off the CPU) or 5 ms.
# - step 50 ms: the loop sets the pace; the thread waits (50 - 32) / 50 = 36%
#   of the time for it to take a batch: not input-bound, and more workers
#   would not help (a profile that took the hand-off for the step predicted
#   +176% for 2 workers where the job ran 312 samples/s against 315).
# - step 5 ms: the data sets the pace; the thread never waits for the loop.
# whatif and recommend cannot see the step: they refuse, naming the thread.
# A training loop run on a thread of its own (as a framework may run it), with a
# step of 10 ms of CPU, is no prefetch thread: its steps are the training
# steps, and whatif predicts it.
source "$(dirname "$0")/lib.sh"
need_torch
# The waits are checked against set CPU costs: a busy machine stretches them.
require_quiet_cpus
cd "$TMP"
cat > prefetch.py <<'PY'
import queue, sys, threading, time, torch

mode, step_s = sys.argv[1], float(sys.argv[2])

class Burn(torch.utils.data.Dataset):
    def __len__(self):
        return 1024
    def __getitem__(self, i):
        t = time.thread_time()
        while time.thread_time() - t < 0.002:
            pass
        return torch.zeros(8)

class BackgroundGenerator(threading.Thread):
    def __init__(self, generator, max_prefetch=1):
        super().__init__(daemon=True)
        self.queue = queue.Queue(max_prefetch)
        self.generator = generator
        self.start()
    def run(self):
        global put_s, run_s
        start = time.monotonic()
        for item in self.generator:
            t = time.monotonic()
            self.queue.put(item)  # blocks while the loop has not taken the last batch
            put_s += time.monotonic() - t
        run_s += time.monotonic() - start
        self.queue.put(None)
    def __iter__(self):
        return self
    def __next__(self):
        item = self.queue.get()
        if item is None:
            raise StopIteration
        return item

class DataLoaderX(torch.utils.data.DataLoader):
    def __iter__(self):
        return BackgroundGenerator(super().__iter__())

def train(loader):
    for epoch in range(2):
        for batch in loader:
            if mode == "thread":  # a CPU step
                t = time.thread_time()
                while time.thread_time() - t < step_s:
                    pass
            else:
                time.sleep(step_s)

if mode == "thread":
    trainer = threading.Thread(target=train, args=(torch.utils.data.DataLoader(Burn(), batch_size=16),))
    trainer.start()
    trainer.join()
else:
    put_s = run_s = 0.0
    train(DataLoaderX(Burn(), batch_size=16))
    print("the thread waited %.4f of its %.4f s in put()" % (put_s, run_s), flush=True)
PY
for step in 0.050 0.005; do
  $SP run -q -o p$step.pb -- "$PY" prefetch.py prefetch $step >p$step.log 2>&1 || fail "the run failed: $(tail -3 p$step.log)"
  $SP analyze p$step.pb >p$step.txt || fail "analyze failed"
  $SP analyze p$step.pb --json >p$step.json || fail "analyze --json failed"
  sed -n 1p p$step.txt
done
grep -q "^prefetch.py:[0-9]*: not input-bound: iterated on a prefetch thread (tid [0-9]*) that waited [0-9]*% of the time for the training loop" p0.050.txt ||
  fail "the 50 ms step's headline does not say the loop sets the pace: $(sed -n 1p p0.050.txt)"
grep -q "compute: the training loop sets the pace" p0.050.txt || fail "the 50 ms step's advice: $(grep -A3 advice: p0.050.txt)"
if grep -q -- "- worker CPU ([0-9]*%)" p0.050.txt; then fail "the 50 ms step is advised more workers: $(grep -A3 advice: p0.050.txt)"; fi
grep -q "^prefetch.py:[0-9]*: HIGHLY input-bound: up to [0-9]*% of step time waiting for data.*prefetch thread" p0.005.txt ||
  fail "the 5 ms step's headline: $(sed -n 1p p0.005.txt)"
# Against the thread's own timing of its put() calls (a slow host stretches
# the 32 ms batches and shortens the wait; the set costs' share is printed).
"$PY" - p0.050.json p0.005.json <<'PY' || fail "the prefetch thread's waits (above)"
import json, re, sys
for path, set_share in zip(sys.argv[1:], (0.36, 0.0)):
    l = json.load(open(path))["loaders"][0]
    p = l["prefetch_thread"]
    put, ran = map(float, re.search(r"waited ([0-9.]+) of its ([0-9.]+) s", open(path[:-5] + ".log").read()).groups())
    print("%s: the thread waited %.0f%% of the steady state for the loop (its own timing: %.0f%%; set costs: %.0f%%), %d hand-offs, %s"
          % (path, p["steady_blocked_share"] * 100, put / ran * 100, set_share * 100, p["handouts"], l["verdict"]))
    assert p["handouts"] >= 120, p
    assert abs(p["steady_blocked_share"] - put / ran) <= 0.06, p
    assert p["loop_bound"] == (set_share > 0), p
    assert p["hands_on"], p
PY
for cmd in whatif recommend; do
  set +e
  $SP $cmd p0.050.pb >$cmd.out 2>$cmd.err
  rc=$?
  set -e
  [ $rc -ne 0 ] || fail "$cmd predicted a prefetch thread's loader: $(head -3 $cmd.out)"
  grep -q "^stallprof: error: loader 'prefetch.py:[0-9]*' is iterated on a prefetch thread (tid [0-9]*)" $cmd.err ||
    fail "$cmd: $(cat $cmd.err)"
done
$SP run -q -o thread.pb -- "$PY" prefetch.py thread 0.010 >run.log 2>&1 || fail "the run failed: $(tail -3 run.log)"
$SP analyze thread.pb >thread.txt || fail "analyze failed"
$SP analyze thread.pb --json >thread.json || fail "analyze --json failed"
sed -n 1p thread.txt
if grep -q "prefetch thread" thread.txt; then fail "a training loop on its own thread is called a prefetch thread: $(sed -n 1p thread.txt)"; fi
grep -q "main loop between next() calls (on thread tid [0-9]*, not the process's main thread)" thread.txt ||
  fail "the compute line does not name the loop's thread: $(grep '^    compute  ' thread.txt)"
"$PY" -c "import json, sys; p = json.load(open('thread.json'))['loaders'][0]['prefetch_thread']; print(p); assert not p['hands_on'] and not p['loop_bound']" ||
  fail "the training loop's thread is taken for a prefetch thread"
$SP whatif thread.pb --workers 1 >thread-whatif.txt || fail "whatif refused a training loop on its own thread"
echo PASS
