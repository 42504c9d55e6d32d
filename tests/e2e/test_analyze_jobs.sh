#!/usr/bin/env bash
# analyze of several traces prints the same text and JSON whether the traces
# are analyzed one at a time (--jobs 1) or in parallel (--jobs 4, and the
# default), with the ranks compared; a trace that fails stops it with that
# trace's error whatever the jobs; --jobs 0 is a usage error; on a terminal a
# progress line counts the traces done.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
GEN="$STALLPROF_BUILD_DIR/gen_trace"
[ -x "$GEN" ] || skip "gen_trace is not built"
for r in 0 1 2 3 4; do "$GEN" 40000 "rank$r.pb" 2 "$r" >/dev/null; done

$SP analyze --jobs 1 rank*.pb >one.txt 2>err.txt || fail "--jobs 1 failed: $(cat err.txt)"
grep -q "Ranks (5 ranks: 0-4" one.txt || fail "the ranks are not compared: $(head -20 one.txt)"
for jobs in 4 default; do
  args=(--jobs "$jobs")
  [ "$jobs" = default ] && args=()
  $SP analyze "${args[@]}" rank*.pb >par.txt || fail "--jobs $jobs failed"
  cmp -s one.txt par.txt || fail "--jobs $jobs prints other text than --jobs 1: $(diff one.txt par.txt | head -5)"
  $SP analyze "${args[@]}" --json rank*.pb >par.json
  $SP analyze --jobs 1 --json rank*.pb >one.json
  cmp -s one.json par.json || fail "--jobs $jobs prints other JSON than --jobs 1"
done

# Not a terminal (above): no progress on stderr. On one (script(1) gives the
# command a pseudo-terminal): a line counting the traces done, ending at all
# of them, then erased.
[ ! -s err.txt ] || fail "progress or other text on a non-terminal stderr: $(cat err.txt)"
if command -v script >/dev/null; then
  script -qec "$SP analyze --jobs 2 rank*.pb >/dev/null" /dev/null >tty.txt || fail "analyze on a terminal failed: $(cat tty.txt)"
  grep -q "stallprof: analyzed 5 of 5 traces" tty.txt || fail "no progress on a terminal: $(od -c tty.txt | head -5)"
  [ "$(tail -c 4 tty.txt | od -An -c | tr -d ' ')" = '\r033[K' ] || fail "the progress line is not erased: $(od -c tty.txt | tail -3)"
fi

set +e
$SP analyze --jobs 4 rank0.pb missing.pb rank1.pb 2>err.txt >/dev/null; rc=$?
set -e
[ "$rc" = 3 ] || fail "a missing trace among several returned $rc, expected 3"
grep -q "stallprof: error: cannot read trace 'missing.pb'" err.txt || fail "the error does not name the missing trace: $(cat err.txt)"
set +e
$SP analyze --jobs 0 rank0.pb 2>err.txt >/dev/null; rc=$?
set -e
[ "$rc" = 2 ] || fail "--jobs 0 returned $rc, expected the usage error 2"
echo PASS
