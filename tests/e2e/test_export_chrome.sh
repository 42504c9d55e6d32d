#!/usr/bin/env bash
# export --format chrome: valid trace-event JSON with one X/i event per span and
# instant of the trace, process/thread metadata (threads named by role), args
# named for what they hold, sampler counters, strings that need escaping
# (quotes, backslashes, control characters, non-ASCII), and gzip for .json.gz.
# (Names with invalid UTF-8 are not tested here: the trace writer stores them in
# proto3 string fields, which then fail to parse; see the analysis engineer's report.)
source "$(dirname "$0")/lib.sh"
cd "$TMP"
GEN="$STALLPROF_BUILD_DIR/gen_trace"
[ -x "$GEN" ] || skip "gen_trace is not built"

"$GEN" 200000 big.pb 3 >gen.txt
$SP export big.pb --format chrome -o big.json 2>err.txt || fail "export failed: $(cat err.txt)"
"$PY" - big.json <<'PY' || fail "big.json is not the expected Chrome JSON"
import json, sys
from collections import Counter
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
c = Counter(e["ph"] for e in ev)
# gen_trace writes 200000 records (spans + epoch instants; a few more to finish the last batch).
assert 200000 <= c["X"] + c["i"] <= 200100, c
names = Counter(e["name"] for e in ev if e["ph"] in "Xi")
assert names["dataloader.fetch"] > 0 and names["dataloader.wait"] > 0 and names["dataloader.epoch"] > 0, names
meta = [e for e in ev if e["ph"] == "M"]
threads = sorted(e["args"]["name"] for e in meta if e["name"] == "thread_name")
assert threads == ["main (loader 1)", "worker 0 of loader 1", "worker 1 of loader 1", "worker 2 of loader 1"], threads
for e in ev:
    if e["ph"] == "X":
        assert e["dur"] >= 0 and e["ts"] >= 0 and "pid" in e and "tid" in e, e
fetch = next(e for e in ev if e["name"] == "dataloader.fetch")
assert "cpu_us" in fetch["args"] and "runq_us" in fetch["args"], fetch
assert "batch" in fetch["args"] and "arg" not in fetch["args"], fetch
wait = next(e for e in ev if e["name"] == "dataloader.wait")
assert "iteration_in_epoch" in wait["args"], wait
getitem = next(e for e in ev if e["name"] == "dataloader.getitem")
assert "sample" in getitem["args"], getitem
print("events", dict(c))
PY
$SP export big.pb -o - | "$PY" -c 'import json,sys; json.load(sys.stdin)' || fail "export to stdout is not valid JSON"
# .json.gz: the same events, gzipped, several times smaller.
$SP export big.pb -o big.json.gz 2>err.txt || fail "export to .json.gz failed: $(cat err.txt)"
grep -q "gzip of" err.txt || fail "the summary line does not mention gzip: $(cat err.txt)"
"$PY" - big.json big.json.gz <<'PY' || fail "big.json.gz is not the gzipped export"
import gzip, json, os, sys
plain = json.load(open(sys.argv[1]))
with gzip.open(sys.argv[2], "rt") as f:
    packed = json.load(f)
assert packed == plain, "the gzipped export differs from the plain one"
ratio = os.path.getsize(sys.argv[1]) / os.path.getsize(sys.argv[2])
print(f"gzip: {os.path.getsize(sys.argv[1])} -> {os.path.getsize(sys.argv[2])} bytes ({ratio:.1f}x)")
assert ratio > 4, ratio
PY

# A real run: sampler counters and names needing escapes, from a C client.
LIB="$STALLPROF_BUILD_DIR/libstallprof_client.so"
command -v cc >/dev/null && [ -e "$LIB" ] || skip "the C client part did not run: no compiler or client library"
cat >odd.c <<'C'
#include <unistd.h>
#include "stallprof/client.h"
int main(void) {
  stallprof_attach();
  const char* names[] = {"quote\"back\\slash", "tab\tnew\nline", "ok \xc3\xa9t\xc3\xa9"};
  for (int k = 0; k < 3; ++k) {
    uint32_t id = stallprof_name(names[k]);
    for (int i = 0; i < 10; ++i) stallprof_span_complete(id, stallprof_now_ns(), 1000, (uint64_t)i, 0);
  }
  usleep(300000);
  return 0;
}
C
cc -O1 -I"$STALLPROF_SOURCE_DIR/lib/client/include" odd.c -o odd -L"$STALLPROF_BUILD_DIR" -lstallprof_client \
  -Wl,-rpath,"$STALLPROF_BUILD_DIR"
$SP run -q --sample-ms 20 -o odd.pb -- ./odd
$SP export odd.pb -o odd.json 2>/dev/null || fail "export of odd.pb failed"
"$PY" - odd.json <<'PY' || fail "odd.json is wrong"
import json, sys
from collections import Counter
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = Counter(e["name"] for e in ev if e["ph"] == "X")
assert names['quote"back\\slash'] == 10, names
assert names["tab\tnew\nline"] == 10, names
assert names["ok \u00e9t\u00e9"] == 10, names
counters = [e for e in ev if e["ph"] == "C"]
assert any(e["name"] == "page cache" for e in counters), "no page cache counter"
assert any(e["name"] == "RSS" for e in counters), "no RSS counter"
assert any(e["name"] == "process_name" for e in ev if e["ph"] == "M")
PY
echo PASS
