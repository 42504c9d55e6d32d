#!/usr/bin/env bash
# Soak test: `scripts/soak.sh MINUTES [C_THREADS] [C_RATE] [WORKERS]`.
# One `stallprof run` over a DataLoader with many workers (each sample one
# stage span) and C-API producer threads (every span numbered), for MINUTES.
# Prints events emitted (per producer), recorded and dropped (they must add
# up, per producer thread), the launcher's RSS over time (flat after the first
# minute) and how long analyze takes on the result. Exit 1 if counts disagree.
# C_RATE is spans/s per C thread (0 = as fast as they can; default 200000).
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-2}
C_THREADS=${2:-4}
C_RATE=${3:-200000}
WORKERS=${4:-8}
BUILD=${BUILD_DIR:-build}
SP="$BUILD/cmd/stallprof/stallprof"
[ -x "$SP" ] || SP="$BUILD/stallprof"
[ -x "$SP" ] || { echo "soak: build first (scripts/build.sh)" >&2; exit 2; }
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/stallprof-soak.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
SECONDS_RUN=$(awk "BEGIN {print $MINUTES * 60}")

cc -O2 -pthread -I lib/client/include scripts/workloads/soak_producer.c -o "$WORK/soak_producer" \
  -L"$BUILD" -lstallprof_client -Wl,-rpath,"$(cd "$BUILD" && pwd)"

echo "soak: $MINUTES min, $C_THREADS C threads at ${C_RATE}/s each, DataLoader with $WORKERS workers"
"$SP" run -q -o "$WORK/soak.pb" -- sh -c "
  $PY scripts/workloads/soak_loader.py $SECONDS_RUN $WORKERS > '$WORK/loader.out' &
  '$WORK/soak_producer' $C_THREADS $C_RATE $SECONDS_RUN > '$WORK/producer.out'
  wait" 2>"$WORK/run.err" &
run_pid=$!
# The launcher's RSS every 10 s.
: >"$WORK/rss"
start=$(date +%s)
while kill -0 "$run_pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$run_pid/status" 2>/dev/null || true)
  [ -n "$rss" ] && echo "$(( $(date +%s) - start )) $rss" >>"$WORK/rss"
  sleep 10
done
wait "$run_pid" || { cat "$WORK/run.err" >&2; echo "soak: the run failed" >&2; exit 1; }
cat "$WORK/run.err" >&2

"$BUILD/trace_check" --names "$WORK/soak.pb" >"$WORK/check"
t0=$(date +%s.%N)
"$SP" analyze "$WORK/soak.pb" >/dev/null
t1=$(date +%s.%N)
trace_bytes=$(stat -c %s "$WORK/soak.pb")

"$PY" - "$WORK" "$trace_bytes" "$(awk "BEGIN {print $t1 - $t0}")" <<'PY'
import re, sys
work, trace_bytes, analyze_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
check = open(work + "/check").read()
names = {m[0]: int(m[1]) for m in re.findall(r"^name (\S+) (\d+)$", check, re.M)}
threads = [(int(p), int(t), int(d)) for p, t, d in re.findall(r"^thread pid=(\d+) tid=(\d+) name=.*? dropped=(\d+)$", check, re.M)]
dropped_by_tid = {}
for pid, tid, d in threads:
    dropped_by_tid[tid] = dropped_by_tid.get(tid, 0) + d
footer_dropped = int(re.search(r"^footer_dropped=(\d+)$", check, re.M).group(1))
spans = int(re.search(r"^spans=(\d+)$", check, re.M).group(1))
ok = True
emitted_total = recorded_total = dropped_total = 0
print("producer        emitted     recorded      dropped  adds up")
for line in open(work + "/producer.out"):
    m = re.match(r"producer (\d+) tid=(\d+) emitted=(\d+)", line)
    i, tid, emitted = int(m[1]), int(m[2]), int(m[3])
    recorded = names.get("soak.c.%d" % i, 0)
    dropped = dropped_by_tid.get(tid, 0)
    adds = recorded + dropped == emitted
    ok &= adds
    emitted_total += emitted; recorded_total += recorded; dropped_total += dropped
    print("c.%-10d %12d %12d %12d  %s" % (i, emitted, recorded, dropped, "yes" if adds else "NO"))
m = re.search(r"loader samples=(\d+) epochs=(\d+)", open(work + "/loader.out").read())
samples = int(m[1])
recorded = names.get("soak.sample", 0)
# Worker lanes also carry the hook's own spans: their drops bound the gap.
worker_drops = footer_dropped - dropped_total
adds = recorded <= samples and samples - recorded <= worker_drops
ok &= adds
print("loader     %12d %12d %12s  %s" % (samples, recorded, "<=%d" % worker_drops, "yes" if adds else "NO"))
print("total spans in trace %d, dropped (footer) %d, trace %.1f MB (%.2f B/span), analyze %.1f s"
      % (spans, footer_dropped, trace_bytes / 1e6, trace_bytes / max(spans, 1), analyze_s))
rss = [tuple(map(int, l.split())) for l in open(work + "/rss")]
print("launcher RSS (s: MiB): " + ", ".join("%d: %.1f" % (t, kb / 1024) for t, kb in rss))
after_first = [kb for t, kb in rss if t >= 60]
if len(after_first) >= 2:
    growth = (max(after_first) - min(after_first)) / 1024
    print("RSS after the first minute: min %.1f MiB, max %.1f MiB (growth %.1f MiB)"
          % (min(after_first) / 1024, max(after_first) / 1024, growth))
sys.exit(0 if ok else 1)
PY
