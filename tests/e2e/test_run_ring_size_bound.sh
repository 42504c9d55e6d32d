#!/usr/bin/env bash
# --ring-size is bounded by the machine's memory (half of it): a ring that size
# would keep its touched pages resident for the whole run. Rejected before the
# command starts, with one clear line and the usage exit code.
source "$(dirname "$0")/lib.sh"
cd "$TMP"

mem_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
[ -n "$mem_kib" ] || skip "no MemTotal in /proc/meminfo"
twice_mem="$((mem_kib * 2 / 1024))M"
for size in "$twice_mem" 1000000T 100000000T; do
  set +e; "$SP" run -o "$TMP/t.pb" --ring-size "$size" -- touch "$TMP/ran" 2>"$TMP/err"; rc=$?; set -e
  [ "$rc" = 2 ] || fail "--ring-size $size returned $rc, expected 2: $(cat "$TMP/err")"
  [ ! -e "$TMP/ran" ] || fail "the command ran with --ring-size $size"
  grep -q "stallprof: error: bad --ring-size .*machine's memory\|stallprof: error: --ring-size .*too large" "$TMP/err" \
    || fail "unclear message for --ring-size $size: $(cat "$TMP/err")"
  [ "$(grep -c . "$TMP/err")" = 1 ] || fail "expected one line: $(cat "$TMP/err")"
done
# A sane size still works, and --help says what the ring costs.
"$SP" run -q -o "$TMP/t.pb" --ring-size 8M -- true || fail "--ring-size 8M was rejected"
help=$("$SP" run --help | tr -s ' \n' ' ')
grep -q "half of the machine's memory" <<<"$help" || fail "--help does not bound the ring"
echo PASS
