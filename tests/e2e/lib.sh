# Shared helpers for end-to-end tests (sourced, not run).
set -euo pipefail
: "${STALLPROF_BIN:?run through ctest}"
: "${STALLPROF_SOURCE_DIR:?run through ctest}"
SP="$STALLPROF_BIN"
WORKLOADS="$STALLPROF_SOURCE_DIR/scripts/workloads"
# The interpreter that has torch (Debian's python3-torch).
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/stallprof-e2e.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
need_torch() { "$PY" -c 'import torch' 2>/dev/null || skip "python3-torch is not importable by $PY"; }
