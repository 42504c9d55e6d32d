#!/usr/bin/env bash
# Hook, num_workers=0: the main process fetches; train and val loaders, 2 epochs.
# Recorded wait/fetch/getitem/epoch counts must equal the script's own counts.
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
record "$TMP/capture.jsonl" "$PY" "$WORKLOADS/synthetic.py" \
  --workers 0 --batches 7 --batch-size 3 --epochs 2 --val > "$TMP/out.txt" || fail "workload failed under the hook"
"$PY" "$STALLPROF_SOURCE_DIR/tests/tools/check_capture.py" "$TMP/capture.jsonl" "$TMP/out.txt" \
  --workers 0 --epochs 2 || fail "capture does not match the workload"
grep -q '"key":"counter_share"' "$TMP/capture.jsonl" || fail "a loader this fast had no span skipped by the counter budget"
# STALLPROF_COUNTER_SHARE=1: the counters on every span, as before the budget.
STALLPROF_COUNTER_SHARE=1 record "$TMP/exact.jsonl" "$PY" "$WORKLOADS/synthetic.py" \
  --workers 0 --batches 7 --batch-size 3 --epochs 2 --val > "$TMP/out.txt" || fail "workload failed under the hook"
! grep -q '"key":"counter_share"' "$TMP/exact.jsonl" || fail "STALLPROF_COUNTER_SHARE=1 still skipped counters"
"$PY" "$STALLPROF_SOURCE_DIR/tests/tools/check_capture.py" "$TMP/exact.jsonl" "$TMP/out.txt" \
  --workers 0 --epochs 2 || fail "capture with every counter does not match the workload"
# A file-backed dataset (a `files` attribute): its files are counted and sized once.
record "$TMP/files.jsonl" "$PY" "$WORKLOADS/synthetic.py" \
  --workers 0 --batches 3 --batch-size 4 --files "$TMP/data" --file-bytes 1000 > "$TMP/out.txt" || fail "file-backed workload failed"
grep -q '"key":"dataset_files","u64":12}' "$TMP/files.jsonl" || fail "dataset_files is not 12"
grep -q '"key":"dataset_bytes","u64":12000}' "$TMP/files.jsonl" || fail "dataset_bytes is not 12000"
