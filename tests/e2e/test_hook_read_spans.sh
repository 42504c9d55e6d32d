#!/usr/bin/env bash
# Per-fetch reads: with a file-backed dataset and 2 fork workers, every fetch
# span is followed in its thread by one dataloader.read_storage and one
# dataloader.read_calls span containing it, read_calls counting at least the
# batch's file bytes; wait spans carry CPU. With the files evicted from the
# page cache, read_storage sees the device reads. Without io accounting the
# hook records no read spans and stops asking.
source "$(dirname "$0")/lib.sh"
need_torch
[ -e /proc/thread-self/io ] || skip "/proc/thread-self/io does not exist (no per-thread io accounting): no read spans"
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
run() {
  record "$TMP/capture.jsonl" "$PY" "$WORKLOADS/synthetic.py" --workers 2 --start-method fork \
    --batches 4 --batch-size 4 --epochs 2 --val --files "$TMP/data" --file-bytes 100000 > "$TMP/out.txt" \
    || fail "file-backed workload failed under the hook ($1)"
  "$PY" "$STALLPROF_SOURCE_DIR/tests/tools/check_capture.py" "$TMP/capture.jsonl" "$TMP/out.txt" \
    --workers 2 --epochs 2 --file-bytes 100000 || fail "capture does not match the workload ($1)"
}
run warm
# Cold: write back and drop the files' cached pages (only these files).
"$PY" - "$TMP/data" <<'PY' || fail "could not evict the dataset files"
import os, sys
for name in os.listdir(sys.argv[1]):
    fd = os.open(os.path.join(sys.argv[1], name), os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
run cold
fs=$(stat -f -c %T "$TMP/data")
case "$fs" in
  tmpfs|ramfs|overlayfs) echo "read_storage not checked: $TMP/data is on $fs (no storage device)" ;;
  *)
    storage=$("$PY" -c 'import json, sys
print(sum(r["arg"] for r in map(json.loads, open(sys.argv[1])) if r.get("name") == "dataloader.read_storage"))' \
      "$TMP/capture.jsonl")
    [ "$storage" -gt 0 ] || fail "read_storage is 0 after evicting the dataset files from the page cache ($fs)" ;;
esac
# A kernel without per-thread io accounting (thread_io() -> None): no read
# spans, and the hook stops asking after the first None. Simulated by replacing
# thread_io, which only the Python path (the ctypes fallback) calls through the
# module; the extension's fetch calls the C client directly, with the same rule.
cat > "$TMP/noio.py" <<'PY'
from stallprof import _backend
calls = []
def no_io():
    calls.append(1)
    return None
_backend.ext.thread_io = no_io  # before torch.utils.data is imported (and patched)
from torch.utils.data import DataLoader
print("batches", sum(1 for _ in DataLoader(list(range(12)), batch_size=3)))
print("thread_io calls", len(calls))
PY
STALLPROF_FORCE_CTYPES=1 record "$TMP/noio.jsonl" "$PY" "$TMP/noio.py" > "$TMP/noio.txt" || fail "no-io script failed"
grep -q "batches 4" "$TMP/noio.txt" || fail "no-io script: $(cat "$TMP/noio.txt")"
grep -q "thread_io calls 1$" "$TMP/noio.txt" || fail "thread_io still called after None: $(cat "$TMP/noio.txt")"
grep -q '"dataloader.read_' "$TMP/noio.jsonl" && fail "read spans recorded without io accounting"
[ "$(grep -c '"name":"dataloader.fetch"' "$TMP/noio.jsonl")" = 4 ] || fail "no-io: fetch spans missing"
echo OK
