#!/usr/bin/env bash
# report where uPlot is not beside the binary (a copy of it elsewhere): the
# page is still written, with static SVG charts and no script of uPlot's,
# and stderr says so in one line.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
GEN="$STALLPROF_BUILD_DIR/gen_trace"
[ -x "$GEN" ] || skip "gen_trace is not built"
mkdir bin
cp "$SP" bin/stallprof
"$GEN" 20000 t.pb 2 --sampler-ms 100 >/dev/null
bin/stallprof report t.pb -o report.html 2>err.txt || fail "report failed without uPlot: $(cat err.txt)"
[ "$(grep -c "uPlot" err.txt)" = 1 ] || fail "expected one line about uPlot on stderr, got: $(cat err.txt)"
grep -q "static" err.txt || fail "the note does not say the charts are static: $(cat err.txt)"
grep -q "<svg" report.html || fail "no SVG charts in the page"
grep -q "<polyline" report.html || fail "no sampler chart in the page"
grep -q "new uPlot(" report.html && fail "the page calls uPlot that it does not carry"
grep -q 'class="chart-data"' report.html && fail "the page carries chart data without a chart library"
# With uPlot beside it (the build tree), no note and the charts are uPlot's.
if [ -f "$STALLPROF_BUILD_DIR/uplot/uPlot.iife.min.js" ]; then
  $SP report t.pb -o with.html 2>err2.txt || fail "report failed: $(cat err2.txt)"
  grep -q "uPlot" err2.txt && fail "report did not find uPlot beside the build: $(cat err2.txt)"
  grep -q "new uPlot(" with.html || fail "the page has no uPlot charts"
fi
echo PASS
