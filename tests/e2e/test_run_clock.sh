#!/usr/bin/env bash
# The span clock of a real `stallprof run`: spans the Python extension times
# (Span, stallprof.stage) start and end when the script's own
# time.monotonic_ns() says, within 200 us, whether they were timed with the
# TSC (the default where the CPU has an invariant one) or with CLOCK_MONOTONIC
# (STALLPROF_CLOCK=monotonic); the trace header and `analyze` say which.
source "$(dirname "$0")/lib.sh"
TRACE_CHECK="$STALLPROF_BUILD_DIR/trace_check"
[ -x "$TRACE_CHECK" ] || skip "trace_check not built"
need_torch  # analyze needs a DataLoader's steps
cat > "$TMP/probe.py" <<'PY'
import time
import stallprof
from stallprof import _backend
ext = _backend.ext
assert ext is not None, "no client backend (extension or ctypes) loaded"
for i in range(8):
    t0 = time.monotonic_ns()
    if i % 2:
        with stallprof.stage("clock.probe") as s:  # the CPU-counter path
            s.arg = i
            time.sleep(0.02)
    else:
        s = ext.Span("clock.probe", 0).begin()  # the wall-only path
        time.sleep(0.02)
        s.end(i)
    t1 = time.monotonic_ns()
    print("probe", i, t0, t1, flush=True)
from torch.utils.data import DataLoader
for batch in DataLoader(list(range(40)), batch_size=4):
    time.sleep(0.001)
PY
if grep -qw constant_tsc /proc/cpuinfo && grep -qw nonstop_tsc /proc/cpuinfo; then default_clock=tsc; else default_clock=monotonic; fi

# check CLOCK_ENV EXPECTED_SOURCE
check() {
  local name=$1 expected=$2
  shift 2
  env "$@" "$SP" run -q -o "$TMP/$name.pb" -- "$PY" "$TMP/probe.py" > "$TMP/$name.out" 2> "$TMP/$name.err" ||
    fail "$name: stallprof run failed: $(cat "$TMP/$name.err")"
  "$TRACE_CHECK" "$TMP/$name.pb" > "$TMP/$name.summary" || fail "$name: trace does not load"
  grep -qx "clock_source=$expected" "$TMP/$name.summary" ||
    fail "$name: expected clock_source=$expected: $(grep clock_source "$TMP/$name.summary")"
  "$TRACE_CHECK" --jsonl "$TMP/$name.pb" > "$TMP/$name.jsonl"
  "$PY" - "$TMP/$name.out" "$TMP/$name.jsonl" "$name" <<'PY' || fail "$name: span times disagree with CLOCK_MONOTONIC"
import json, statistics, sys
probes = {}
for line in open(sys.argv[1]):
    if line.startswith("probe "):
        _, i, t0, t1 = line.split()
        probes[int(i)] = (int(t0), int(t1))
spans = {r["arg"]: r for r in map(json.loads, open(sys.argv[2])) if r.get("name") == "clock.probe"}
assert sorted(spans) == sorted(probes) == list(range(8)), (sorted(spans), sorted(probes))
BOUND = 200_000  # ns
start_err, end_err = [], []
for i, (t0, t1) in probes.items():
    s = spans[i]
    start, end = s["start"], s["start"] + s["dur"]
    start_err.append(start - t0)  # the script read its clock just before the span began
    end_err.append(t1 - end)      # and just after it ended
    # Each span lies within its probe's readings (give or take the bound) and lasts the sleep.
    assert t0 - BOUND <= start and end <= t1 + BOUND, (i, start - t0, t1 - end)
    assert s["dur"] >= 20_000_000, (i, s["dur"])
# A preempted probe may take longer between its clock read and the span;
# most do not: the median error says whether the times agree.
med_start, med_end = statistics.median(start_err), statistics.median(end_err)
print(f"{sys.argv[3]}: span start - monotonic before: median {med_start/1e3:.1f} us; "
      f"monotonic after - span end: median {med_end/1e3:.1f} us")
assert abs(med_start) <= BOUND and abs(med_end) <= BOUND, (start_err, end_err)
PY
  "$SP" analyze "$TMP/$name.pb" > "$TMP/$name.analyze" 2>&1 || true
  if [ "$expected" = tsc ]; then
    grep -q "clock TSC .* GHz converted to CLOCK_MONOTONIC, drift" "$TMP/$name.analyze" ||
      fail "$name: analyze does not name the TSC clock: $(grep -i clock "$TMP/$name.analyze")"
  else
    grep -q "clock CLOCK_MONOTONIC" "$TMP/$name.analyze" ||
      fail "$name: analyze does not name CLOCK_MONOTONIC: $(grep -i clock "$TMP/$name.analyze")"
  fi
}
check default "$default_clock"
check monotonic monotonic STALLPROF_CLOCK=monotonic
check ctypes "$default_clock" STALLPROF_FORCE_CTYPES=1
[ "$default_clock" = tsc ] || skip "no invariant TSC here: only the CLOCK_MONOTONIC runs were checked"
echo OK
