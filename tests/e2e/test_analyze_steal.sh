#!/usr/bin/env bash
# The machine's steal (/proc/stat's eighth field: time the hypervisor ran
# other guests while this machine's CPUs had work) is recorded by the
# sampler and shown by analyze (text and --json) and whatif, apart from other
# processes' CPU: within the readings taken around the run.
source "$(dirname "$0")/lib.sh"
need_torch
cd "$TMP"
cat >loop.py <<'PY'
import time, torch
from torch.utils.data import DataLoader
loader = DataLoader(list(range(400)), batch_size=4)
for epoch in range(2):
    for x in loader:
        time.sleep(0.002)
PY
ticks() { head -1 /proc/stat | awk '{ for (i = 2; i <= 9; i++) t += $i; print $9, t }'; }
before=$(ticks)
"$SP" run -q --sample-ms 20 -o s.pb -- "$PY" loop.py >run.log 2>&1 || fail "run failed: $(tail -3 run.log)"
after=$(ticks)
"$SP" analyze s.pb >s.txt || fail "analyze failed"
grep -Eq "machine CPU [0-9]+% busy \(steal [0-9.]+%: the hypervisor running other guests\)" s.txt ||
  fail "analyze's System line does not name the steal: $(grep 'machine CPU' s.txt)"
"$SP" analyze s.pb --json >s.json || fail "analyze --json failed"
"$SP" whatif s.pb >w.txt || fail "whatif failed"
grep -q "outside load in the profiled run: .*by /proc/stat, [0-9.]*" w.txt || fail "whatif names no outside load: $(cat w.txt)"
"$PY" - s.json $before $after <<'PY' || fail "the steal share is not the machine's (above)"
import json, os, sys
system = json.load(open(sys.argv[1]))["traces"][0]["system"]
steal = system["steal_fraction"]
s0, t0, s1, t1 = (int(x) for x in sys.argv[2:6])
# The sampled span's steal in clock ticks, from the share and the span's CPU
# time, against the ticks of steal /proc/stat counted around the run (one
# tick of rounding at each end).
ticks = steal * system["seconds"] * os.cpu_count() * os.sysconf("SC_CLK_TCK")
print(f"steal {steal:.4f} of the run's CPU time: {ticks:.1f} ticks; {s1 - s0} ticks around the run")
assert type(steal) in (int, float) and 0 <= steal <= 1, steal  # a number (0 prints as an integer), not null
assert ticks <= (s1 - s0) + 2, "more steal than the machine counted around the run"
PY
echo PASS
