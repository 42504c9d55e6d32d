#!/usr/bin/env bash
# What a C client records under stallprof run reaches trace.pb: spans with CPU
# time, config records, thread and process info, /proc samples; a child that
# crashes (SIGSEGV) after recording still leaves a complete, readable trace.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
LIB="$STALLPROF_BUILD_DIR/libstallprof_client.so"
[ -e "$LIB" ] || skip "libstallprof_client.so is not built"
CHECK="$STALLPROF_BUILD_DIR/trace_check"

cat >producer.c <<'C'
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "stallprof/client.h"
/* producer NAME N [crash|linger MS]: N spans named NAME (arg = 0..N-1), one CPU
 * span, two config records; then crash with SIGSEGV or linger MS ms. */
int main(int argc, char** argv) {
  const char* label = argv[1];
  long n = atol(argv[2]);
  int attach = stallprof_attach();
  uint32_t id = stallprof_name(label);
  stallprof_config_str(1, "label", label);
  stallprof_config_u64(1, "count", (uint64_t)n);
  for (long i = 0; i < n; ++i) stallprof_span_complete(id, stallprof_now_ns(), 1000, (uint64_t)i, 1);
  stallprof_span s;
  stallprof_span_begin(&s, stallprof_name("cpu_work"), 1, STALLPROF_SPAN_CPU);
  volatile double x = 0;
  for (long i = 0; i < 3000000; ++i) x += i * 0.5;
  stallprof_span_end(&s, 7);
  printf("attach=%d\n", attach);
  fflush(stdout);
  if (argc > 3 && strcmp(argv[3], "crash") == 0) raise(SIGSEGV);
  if (argc > 4 && strcmp(argv[3], "linger") == 0) usleep(atoi(argv[4]) * 1000);
  return 0;
}
C
cc -O1 -I"$STALLPROF_SOURCE_DIR/lib/client/include" producer.c -o producer -L"$STALLPROF_BUILD_DIR" -lstallprof_client \
  -Wl,-rpath,"$STALLPROF_BUILD_DIR" || skip "no C compiler"

"$SP" run -q --sample-ms 20 -o "$TMP/a.pb" -- ./producer alpha 5000 linger 300 >"$TMP/out"
grep -qx "attach=0" "$TMP/out" || fail "the producer did not attach: $(cat "$TMP/out")"
"$CHECK" --names "$TMP/a.pb" >"$TMP/sum"
grep -qx "name alpha 5000" "$TMP/sum" || { cat "$TMP/sum"; fail "expected 5000 alpha spans"; }
grep -qx "name cpu_work 1" "$TMP/sum" || fail "the CPU span is missing"
grep -qx "footer=1" "$TMP/sum" || fail "no footer"
grep -qx "truncated=0" "$TMP/sum" || fail "trace truncated"
grep -qx "footer_spans=5001" "$TMP/sum" || fail "footer span total wrong: $(grep footer_spans "$TMP/sum")"
grep -q "^config pid=[0-9]* scope=1 label=alpha$" "$TMP/sum" || fail "string config missing"
grep -q "^config pid=[0-9]* scope=1 count=5000$" "$TMP/sum" || fail "u64 config missing"
grep -q "^thread pid=[0-9]* tid=[0-9]* name=producer dropped=0$" "$TMP/sum" || fail "thread info missing"
grep -qx "processes=1" "$TMP/sum" || fail "expected one process (the producer)"
samples=$(sed -n 's/^process_samples=//p' "$TMP/sum")
[ "$samples" -ge 3 ] || fail "expected /proc samples of the producer over 300 ms, got $samples"
sys=$(sed -n 's/^system_samples=//p' "$TMP/sum")
[ "$sys" -ge 3 ] || fail "expected system samples, got $sys"
grep -qx "command=./producer alpha 5000 linger 300" "$TMP/sum" || fail "header command wrong"
grep -qx "page_bytes=$(getconf PAGESIZE)" "$TMP/sum" || fail "header page size not the machine's $(getconf PAGESIZE): $(grep page_bytes "$TMP/sum")"
# MGLRU is on when /sys/kernel/mm/lru_gen/enabled (a hex mask) has bit 0; a kernel without the file has the lists.
reclaim=lists
if [ -r /sys/kernel/mm/lru_gen/enabled ] && (( $(cat /sys/kernel/mm/lru_gen/enabled) & 1 )); then reclaim=mglru; fi
grep -qx "page_reclaim=$reclaim" "$TMP/sum" || fail "header page reclaim not the kernel's $reclaim: $(grep page_reclaim "$TMP/sum")"

# A crash after recording: exit 139, every recorded span still in the trace.
set +e; "$SP" run -q -o "$TMP/c.pb" -- ./producer crashy 2000 crash >/dev/null 2>&1; rc=$?; set -e
[ "$rc" = 139 ] || fail "crashing child: expected 139, got $rc"
"$CHECK" --names "$TMP/c.pb" >"$TMP/sum"
grep -qx "name crashy 2000" "$TMP/sum" || { cat "$TMP/sum"; fail "spans of the crashed child are missing"; }
grep -qx "term_signal=11" "$TMP/sum" || fail "footer lacks term_signal=11"

# A small ring overflows: drops are counted in the trace and reported once on stderr.
"$SP" run -o "$TMP/d.pb" --ring-size 1M --lanes 2 -- ./producer many 200000 2>"$TMP/err" >/dev/null
"$CHECK" "$TMP/d.pb" >"$TMP/sum"
dropped=$(sed -n 's/^footer_dropped=//p' "$TMP/sum")
spans=$(sed -n 's/^footer_spans=//p' "$TMP/sum")
[ "$dropped" -gt 0 ] || fail "a 1M ring with 200000 spans dropped nothing?"
[ $((dropped + spans)) = 200001 ] || fail "spans ($spans) + dropped ($dropped) != 200001 span records"
grep -q "^stallprof: warning: $dropped events dropped (ring full); use --ring-size" "$TMP/err" \
  || fail "no drop warning: $(cat "$TMP/err")"
grep -qx "thread_dropped=$dropped" "$TMP/sum" || fail "per-thread drops do not add up"
# Names are arbitrary bytes from the producer: invalid UTF-8 still gives a
# trace that loads, analyzes and exports as valid JSON.
"$SP" run -q -o "$TMP/u.pb" -- ./producer "$(printf 'bad\377name')" 10 >/dev/null
"$CHECK" --names "$TMP/u.pb" >"$TMP/sum" || fail "a trace with an invalid UTF-8 name does not load"
grep -q "^name bad.*name 10$" "$TMP/sum" || { cat "$TMP/sum"; fail "the invalid UTF-8 name is missing"; }
"$SP" export "$TMP/u.pb" --format chrome -o "$TMP/u.json"
"$PY" -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$TMP/u.json" \
  || fail "the export of an invalid UTF-8 name is not valid JSON"
echo PASS
