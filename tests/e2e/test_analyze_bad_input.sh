#!/usr/bin/env bash
# analyze, report and export on bad input: an empty file, random bytes, a
# truncated trace, a trace of a newer major version, a missing file and a trace
# without DataLoader (a plain C program): one "stallprof: error:" line and a
# non-zero exit (never a crash), or for the truncated trace a result that says so.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
GEN="$STALLPROF_BUILD_DIR/gen_trace"
[ -x "$GEN" ] || skip "gen_trace is not built"

# expect_error <name> <file> <message part>: every offline subcommand fails cleanly.
expect_error() {
  local name=$1 file=$2 part=$3
  for cmd in "analyze $file" "analyze $file --json" "report $file -o $TMP/r.html" "export $file -o $TMP/t.json"; do
    set +e
    $SP $cmd >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    set -e
    [ $rc -ne 0 ] || fail "$name: 'stallprof $cmd' exited 0"
    [ $rc -lt 128 ] || fail "$name: 'stallprof $cmd' crashed (exit $rc): $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$name: expected one error line, got: $(cat "$TMP/err")"
    grep -q "^stallprof: error: " "$TMP/err" || fail "$name: no 'stallprof: error:' line: $(cat "$TMP/err")"
    grep -qi -- "$part" "$TMP/err" || fail "$name: message does not mention '$part': $(cat "$TMP/err")"
    [ ! -s "$TMP/out" ] || fail "$name: 'stallprof $cmd' printed on stdout: $(head -3 "$TMP/out")"
  done
  [ ! -e "$TMP/t.json" ] || fail "$name: export left a partial output behind"
}

: >empty.pb
expect_error "empty file" empty.pb "empty.pb"
head -c 4096 /dev/urandom >random.pb
expect_error "random bytes" random.pb "random.pb"
expect_error "missing file" nonexistent.pb "nonexistent.pb"
# A device is not "empty": it is not a trace.
expect_error "a device" /dev/urandom "is not a stallprof trace"

"$GEN" 50000 good.pb 2 >/dev/null
# A newer major version: rewrite the header's version_major (first chunk) and its CRC.
"$PY" - good.pb newer.pb <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"SPTRACE\n"
pos, length, shift = 8, 0, 0
while True:
    b = data[pos]; pos += 1
    length |= (b & 0x7F) << shift; shift += 7
    if not b & 0x80: break
body = bytearray(data[pos:pos + length])
# Chunk.header (field 1, bytes), then TraceHeader.version_major (field 1, varint) first.
assert body[0] == 0x0A
i = 1
while body[i] & 0x80: i += 1
i += 1
assert body[i] == 0x08, body[i]
body[i + 1] = 99
crc = struct.pack("<I", zlib.crc32(bytes(body)) & 0xFFFFFFFF)
open(sys.argv[2], "wb").write(data[:pos] + bytes(body) + crc + data[pos + length + 4:])
PY
expect_error "newer major version" newer.pb "version"

# A CRC-valid chunk that protobuf rejects (a string field with invalid UTF-8):
# libprotobuf's own "[libprotobuf ERROR ...]" line must not come before ours.
"$PY" - good.pb badutf8.pb <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
pos, length, shift = 8, 0, 0
while True:
    b = data[pos]; pos += 1
    length |= (b & 0x7F) << shift; shift += 7
    if not b & 0x80: break
header_end = pos + length + 4
# Chunk.strings (field 2) = Strings{first_id: 1, value: "\xff\xfe"}.
strings = bytes([0x08, 0x01, 0x12, 0x02, 0xFF, 0xFE])
body = bytes([0x12, len(strings)]) + strings
chunk = bytes([len(body)]) + body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)
open(sys.argv[2], "wb").write(data[:header_end] + chunk + data[header_end:])
PY
expect_error "chunk protobuf rejects" badutf8.pb "badutf8.pb"

# Truncated in the middle of a chunk: analyze still reports, and says so.
size=$(stat -c %s good.pb)
# Cut before any iteration was written: the error says the file is truncated,
# not only that it holds no DataLoader.
# (gen_trace's file: its first chunks end at 200 bytes, the next runs past 300.)
# export converts what there is; analyze and report have nothing to say.
head -c 300 good.pb >cut_early.pb
head -c 200 good.pb >cut_at_chunk.pb
for cut in "cut_early.pb:the file is truncated: it ends inside a chunk after 300 bytes" \
           "cut_at_chunk.pb:the file has no footer: the run that wrote it did not finish"; do
  for cmd in "analyze ${cut%%:*}" "report ${cut%%:*} -o $TMP/r.html"; do
    if $SP $cmd >out.txt 2>err.txt; then fail "'stallprof $cmd' exited 0"; fi
    [ "$(wc -l <err.txt)" -eq 1 ] && grep -qF "${cut#*:}" err.txt || fail "'stallprof $cmd': $(cat err.txt)"
  done
done
head -c $((size / 2 + 7)) good.pb >truncated.pb
$SP analyze truncated.pb >out.txt 2>err.txt || fail "a truncated trace should still analyze: $(cat err.txt)"
grep -q "truncated" out.txt || fail "analyze did not say the trace is truncated"
$SP analyze truncated.pb --json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert d["traces"][0]["quality"]["truncated"] is True'
$SP export truncated.pb -o "$TMP/trunc.json" 2>err.txt || fail "export of a truncated trace failed: $(cat err.txt)"
grep -q "truncated" err.txt || fail "export did not warn about the truncation"
"$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/trunc.json" || fail "export of a truncated trace is not valid JSON"

# A plain C program traced with spans only: no DataLoader.
LIB="$STALLPROF_BUILD_DIR/libstallprof_client.so"
if [ -e "$LIB" ] && command -v cc >/dev/null; then
  cat >plain.c <<'C'
#include "stallprof/client.h"
int main(void) {
  stallprof_attach();
  uint32_t id = stallprof_name("work");
  for (int i = 0; i < 100; ++i) stallprof_span_complete(id, stallprof_now_ns(), 1000, (uint64_t)i, 0);
  return 0;
}
C
  cc -O1 -I"$STALLPROF_SOURCE_DIR/lib/client/include" plain.c -o plain -L"$STALLPROF_BUILD_DIR" -lstallprof_client \
    -Wl,-rpath,"$STALLPROF_BUILD_DIR"
  $SP run -q -o plain.pb -- ./plain
  for cmd in "analyze plain.pb" "report plain.pb -o $TMP/p.html"; do
    set +e
    $SP $cmd >/dev/null 2>err.txt
    rc=$?
    set -e
    [ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "$cmd of a trace without loaders: exit $rc"
    grep -q "^stallprof: error: no DataLoader found in plain.pb" err.txt || fail "$cmd: unexpected message: $(cat err.txt)"
  done
  # export does not need loaders
  $SP export plain.pb -o plain.json 2>/dev/null || fail "export of a trace without loaders failed"
else
  partial="no C compiler or client library, the no-loader case was not run"
fi
# An unknown subcommand is named, with the choices.
set +e
$SP bogus >/dev/null 2>err.txt
rc=$?
set -e
[ $rc -eq 2 ] || fail "stallprof bogus: exit $rc, expected 2"
[ "$(wc -l <err.txt)" -eq 1 ] && grep -q "unknown subcommand 'bogus': use one of run, analyze" err.txt \
  || fail "stallprof bogus: unexpected message: $(cat err.txt)"
# So is an option before any subcommand (CLI11 said only "A subcommand is required").
set +e
$SP --bogus >/dev/null 2>err.txt
rc=$?
set -e
[ $rc -eq 2 ] || fail "stallprof --bogus: exit $rc, expected 2"
[ "$(wc -l <err.txt)" -eq 1 ] && grep -q "unknown option before a subcommand '--bogus': use one of run, analyze" err.txt \
  || fail "stallprof --bogus: unexpected message: $(cat err.txt)"
# A bad whole number says what is expected, in one line, in every subcommand
# (CLI11 said "Could not convert: --warmup = -3" or gave a range up to 1.8e308).
for args in "analyze --warmup -3" "whatif --warmup 1.5" "report --warmup abc" "recommend --warmup 99999999999" \
  "analyze --jobs -1" "run --sample-ms 0 -- true" "run --lanes 70000 -- true"; do
  set +e
  # shellcheck disable=SC2086 # the words of $args are the arguments
  $SP $args >/dev/null 2>err.txt
  rc=$?
  set -e
  option=$(echo "$args" | cut -d' ' -f2)
  value=$(echo "$args" | cut -d' ' -f3)
  [ $rc -eq 2 ] || fail "stallprof $args: exit $rc, expected 2"
  # The one line names the option and value, and the subcommand's own help.
  [ "$(wc -l <err.txt)" -eq 1 ] && grep -qF -- "$option: '$value' is not a whole number from" err.txt \
    && grep -qF -- "(see 'stallprof ${args%% *} --help')" err.txt \
    || fail "stallprof $args: unexpected message: $(cat err.txt)"
done
$SP --version >/dev/null || fail "stallprof --version failed"
[ -z "${partial:-}" ] || skip "$partial"
echo "PASS"
