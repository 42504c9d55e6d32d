#!/usr/bin/env bash
# Hook, 2 fork workers, train + val, with persistent_workers off and on.
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
for persistent in "" "--persistent"; do
  record "$TMP/capture.jsonl" "$PY" "$WORKLOADS/synthetic.py" \
    --workers 2 --start-method fork --batches 6 --epochs 2 --val $persistent > "$TMP/out.txt" \
    || fail "workload failed under the hook ($persistent)"
  "$PY" "$STALLPROF_SOURCE_DIR/tests/tools/check_capture.py" "$TMP/capture.jsonl" "$TMP/out.txt" \
    --workers 2 --epochs 2 $persistent || fail "capture does not match the workload ($persistent)"
done
