#!/usr/bin/env bash
# Hook, 2 spawn workers (fresh interpreters that find the ring and their loader
# id on their own), persistent workers off (1 epoch) and on (2 epochs).
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
record "$TMP/capture.jsonl" "$PY" "$WORKLOADS/synthetic.py" \
  --workers 2 --start-method spawn --batches 5 --epochs 1 > "$TMP/out.txt" || fail "workload failed under the hook"
"$PY" "$STALLPROF_SOURCE_DIR/tests/tools/check_capture.py" "$TMP/capture.jsonl" "$TMP/out.txt" \
  --workers 2 --epochs 1 || fail "capture does not match the workload (spawn)"
record "$TMP/capture.jsonl" "$PY" "$WORKLOADS/synthetic.py" \
  --workers 2 --start-method spawn --batches 5 --epochs 2 --persistent > "$TMP/out.txt" || fail "workload failed (persistent)"
"$PY" "$STALLPROF_SOURCE_DIR/tests/tools/check_capture.py" "$TMP/capture.jsonl" "$TMP/out.txt" \
  --workers 2 --epochs 2 --persistent || fail "capture does not match the workload (spawn, persistent)"
