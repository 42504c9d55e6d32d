#!/usr/bin/env bash
# report -o report.html: one self-contained file (no external assets) that
# headless Chromium loads without script errors and that shows the verdict;
# with uPlot in the build, its charts are drawn by uPlot.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || skip "chromium is not installed (apt-get install -y chromium)"
GEN="$STALLPROF_BUILD_DIR/gen_trace"

# A real recording when torch is there, else a generated trace.
if "$PY" -c 'import torch' 2>/dev/null; then
  $SP run -q -o t.pb -- "$PY" "$WORKLOADS/synthetic.py" --workers 1 --batches 20 --fetch-sleep-ms 3 --compute-ms 5 >/dev/null
elif [ -x "$GEN" ]; then
  "$GEN" 20000 t.pb 2 --sampler-ms 100 >/dev/null
else
  skip "neither torch nor gen_trace to make a trace"
fi
$SP report t.pb -o report.html 2>err.txt || fail "report failed: $(cat err.txt)"
verdict=$($SP analyze t.pb | sed -n 1p)  # sed reads it all: no SIGPIPE under pipefail
[ -n "$verdict" ] || fail "analyze printed no verdict"
# Self-contained: no external URLs in src/href attributes.
if grep -Eo '(src|href)="[^"#][^"]*"' report.html | grep -v '^href="data:' | grep -q .; then
  fail "report.html references external assets: $(grep -Eo '(src|href)="[^"]*"' report.html | head -3)"
fi
profile=$(mktemp -d)
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --user-data-dir="$profile" --enable-logging=stderr --v=0 \
  --dump-dom "file://$TMP/report.html" >dom.html 2>chromium.log || true
rm -rf "$profile"
[ -s dom.html ] || fail "chromium produced no DOM: $(tail -5 chromium.log)"
UPLOT=0
[ -f "$STALLPROF_BUILD_DIR/uplot/uPlot.iife.min.js" ] && UPLOT=1
"$PY" - dom.html "$verdict" "$UPLOT" <<'PY' || fail "the rendered page is wrong"
import html, re, sys
dom = open(sys.argv[1]).read()
verdict = sys.argv[2]
text = html.unescape(re.sub(r"<[^>]+>", "", dom))
assert verdict in text, f"verdict {verdict!r} not in the rendered page"
errors = re.search(r'<div id="errors">(.*?)</div>', dom, re.S)
assert errors is not None and errors.group(1).strip() == "", f"page errors: {errors.group(1) if errors else 'no errors div'}"
if sys.argv[3] == "1":
    assert dom.count("<svg") >= 2, "expected the inline SVG charts (account, workers)"
    assert dom.count('<div class="uplot') >= 4, "expected uPlot charts (timeline, machine CPU, disk, page cache)"
else:
    assert dom.count("<svg") >= 4, "expected the inline SVG charts"
PY
if grep -q "Uncaught" chromium.log; then fail "console errors: $(grep Uncaught chromium.log | head -3)"; fi
echo PASS
