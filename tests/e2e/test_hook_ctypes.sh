#!/usr/bin/env bash
# The ctypes fallback (forced) records the same DataLoader activity and says so
# (config client=ctypes, lane flags SP_LANE_FLAG_PYTHON_CTYPES), in workers too,
# including the read_storage/read_calls spans around each fetch of a
# file-backed dataset (where /proc/thread-self/io exists).
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
STALLPROF_FORCE_CTYPES=1 record "$TMP/capture.jsonl" "$PY" "$WORKLOADS/synthetic.py" \
  --workers 2 --start-method fork --batches 4 --epochs 1 --val --files "$TMP/data" --file-bytes 20000 > "$TMP/out.txt" \
  || fail "workload failed under the hook"
"$PY" "$STALLPROF_SOURCE_DIR/tests/tools/check_capture.py" "$TMP/capture.jsonl" "$TMP/out.txt" \
  --workers 2 --epochs 1 --client ctypes --file-bytes 20000 || fail "capture does not match the workload (ctypes)"
