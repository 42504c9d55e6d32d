#!/usr/bin/env bash
# A burst of spans after an idle spell is not lost: idle, the launcher polls
# the ring only every 50 ms, in which a Python stage loop writes four times
# what a default lane (8192 records) holds; the producer rings the ring's
# doorbell when its lane is a quarter full, and the launcher drains it at once.
# Before the doorbell, 70-90% of such a burst was dropped (this paced one:
# 16-35% with the doorbell taken out, 3 runs; 0 of 60001 in 10 runs with it). Runs alone (the
# drain must get a core within the 9 ms the rest of the lane lasts; it did in
# 20 of 20 runs beside a CPU hog, and missed once by 2.8% in a CI run).
# The loop spends 1.5 us a span by the clock (667 k spans a second from one
# thread, 25x the fast loader's), not a fixed sum: on 2026-12-06's faster host
# `sum(range(60))` took 0.35 us a span, the lane filled in 2.9 ms, and 2 of 8
# runs lost 8-9% of the burst to the drain's wake-up, a test of the host's
# vCPU wake-up latency rather than of the doorbell.
source "$(dirname "$0")/lib.sh"
cat >"$TMP/burst.py" <<'PY'
import time
import stallprof
with stallprof.stage("s"):  # the thread's lane is claimed and seen before the burst, as a hooked loop's is
    pass
time.sleep(0.5)  # the launcher backs off to its idle poll
for i in range(60000):
    with stallprof.stage("s"):
        until = time.perf_counter_ns() + 1500
        while time.perf_counter_ns() < until:
            pass
PY
"$SP" run -o "$TMP/t.pb" -- "$PY" "$TMP/burst.py" 2>"$TMP/err" || fail "run failed: $(cat "$TMP/err")"
# Every span is accounted for, and at most 5% of the burst is dropped: the
# drain needs a core within 4 ms of the doorbell, and a fresh-clone CI run
# once lost 1669 of 60001 (2.8%) when this VM's vCPU stalled longer (0 in
# every other run); without the doorbell 23% (2026-11-29) to 90% are lost.
counts=$(sed -n "s|^stallprof: wrote $TMP/t.pb (\([0-9]*\) events, \([0-9]*\) dropped.*|\1 \2|p" "$TMP/err")
[ -n "$counts" ] || fail "no summary line: $(cat "$TMP/err")"
read -r events dropped <<<"$counts"
[ $((events + dropped)) -eq 60001 ] || fail "$events events and $dropped dropped are not the 60001 written: $(cat "$TMP/err")"
[ $((dropped * 20)) -le 60001 ] || fail "the burst overflowed the ring: $dropped of 60001 dropped: $(cat "$TMP/err")"
echo "PASS ($dropped of 60001 dropped)"
