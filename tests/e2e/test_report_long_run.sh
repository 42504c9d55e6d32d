#!/usr/bin/env bash
# report on a run of a million iterations (generated: 1,000 epochs, a /proc
# sampler row every 100 ms, one iteration that waits a second more than the
# others): the page stays small (< 5 MB) with uPlot inlined, the timeline's
# data keeps the one-iteration spike, the 1,000 epochs fold to a summary, and
# headless Chromium draws the timeline with no JavaScript error.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
GEN="$STALLPROF_BUILD_DIR/gen_trace"
[ -x "$GEN" ] || skip "gen_trace is not built"
[ -f "$STALLPROF_BUILD_DIR/uplot/uPlot.iife.min.js" ] || skip "uPlot is not installed (scripts/setup.sh installs it from npm)"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || skip "chromium is not installed (apt-get install -y chromium)"

# No getitem spans: 3 spans per iteration (wait, collate, fetch) and an epoch instant per 1,000.
"$GEN" 3001000 long.pb 2 --samples-per-batch 0 --spike-at 654321 --sampler-ms 100 >gen.txt
$SP report long.pb -o report.html 2>err.txt || fail "report failed: $(cat err.txt)"
grep -q "uPlot" err.txt && fail "report did not find uPlot: $(cat err.txt)"
size=$(stat -c %s report.html)
echo "report.html: $size bytes"
[ "$size" -lt 5000000 ] || fail "report.html is $size bytes, over 5 MB"
"$PY" - report.html <<'PY' || fail "the page's chart data is wrong"
import json, re, sys
page = open(sys.argv[1]).read()
charts = {}
for m in re.finditer(r'<script type="application/json" class="chart-data">(.*?)</script>', page, re.S):
    spec = json.loads(m.group(1))
    charts[spec["id"]] = spec
timeline = next(s for k, s in charts.items() if k.startswith("timeline-"))
step = timeline["series"][0]["values"]
assert len(step) <= 4000 and len(timeline["x"]) == len(step), len(step)
assert timeline["x"][-1] > 999000, timeline["x"][-1]
# The spike: one iteration of a million waits > 1 s; every other step is a few ms.
peak = max(range(len(step)), key=lambda i: step[i])
assert step[peak] > 1000, step[peak]
assert abs(timeline["x"][peak] - 654321) < 500, timeline["x"][peak]  # within its bucket of 500 iterations
assert sorted(step)[-3] < 100, sorted(step)[-3:]
assert len(timeline["marks"]) >= 999, len(timeline["marks"])
for k in ("system-cpu", "system-disk", "system-cache"):
    assert k in charts and len(charts[k]["x"]) <= 4000, k
assert re.search(r"<details><summary>1000 epochs: ", page), "the epochs table did not fold"
PY

profile=$(mktemp -d)
# One browser run gives both the DOM after the scripts ran and the screenshot.
timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --hide-scrollbars --user-data-dir="$profile" --window-size=840,900 \
  --enable-logging=stderr --v=0 --screenshot="$TMP/report.png" --dump-dom "file://$TMP/report.html" >dom.html 2>chromium.log || true
rm -rf "$profile"
[ -s dom.html ] || fail "chromium produced no DOM: $(tail -5 chromium.log)"
if grep -q "Uncaught" chromium.log; then fail "console errors: $(grep Uncaught chromium.log | head -3)"; fi
[ -s report.png ] || fail "chromium made no screenshot: $(tail -5 chromium.log)"
"$PY" - dom.html report.png <<'PY' || fail "the rendered page is wrong"
import re, sys
from PIL import Image
dom = open(sys.argv[1]).read()
errors = re.search(r'<div id="errors">(.*?)</div>', dom, re.S)
assert errors is not None and errors.group(1).strip() == "", f"page errors: {errors.group(1) if errors else 'no errors div'}"
# uPlot built every chart: its root element in each holder, the points it was given recorded.
holders = dict(re.findall(r'<div class="uplot-chart" id="([^"]+)" data-points="(\d+)"><div class="uplot', dom))
assert any(i.startswith("timeline-") for i in holders) and "system-cpu" in holders, holders
# The screenshot shows the spike: one column where the timeline's colours
# (step #4a7bd0, wait #d9534f) run at least 100 px down. Nothing else on the
# page is that tall in them (the account bars are 26 px).
img = Image.open(sys.argv[2]).convert("RGB")
w, h = img.size
px = img.load()
def coloured(c): return any(all(abs(a - b) <= 40 for a, b in zip(c, ref)) for ref in ((0x4a, 0x7b, 0xd0), (0xd9, 0x53, 0x4f)))
def longest_run(x):
    best = run = 0
    for y in range(h):
        run = run + 1 if coloured(px[x, y]) else 0
        best = max(best, run)
    return best
runs = [longest_run(x) for x in range(w)]
tallest = max(range(w), key=lambda x: runs[x])
print(f"screenshot {w}x{h}: the tallest run of timeline colour is {runs[tallest]} px, at x={tallest}")
assert runs[tallest] >= 100, "no spike drawn in the timeline"
PY
echo PASS
