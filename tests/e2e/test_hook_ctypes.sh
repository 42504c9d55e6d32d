#!/usr/bin/env bash
# The ctypes fallback (forced) records the same DataLoader activity and says so
# (config client=ctypes, lane flags SP_LANE_FLAG_PYTHON_CTYPES), in workers too.
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
STALLPROF_FORCE_CTYPES=1 record "$TMP/capture.jsonl" "$PY" "$WORKLOADS/synthetic.py" \
  --workers 2 --start-method fork --batches 4 --epochs 1 --val > "$TMP/out.txt" || fail "workload failed under the hook"
"$PY" "$STALLPROF_SOURCE_DIR/tests/tools/check_capture.py" "$TMP/capture.jsonl" "$TMP/out.txt" \
  --workers 2 --epochs 1 --client ctypes || fail "capture does not match the workload (ctypes)"
