#!/usr/bin/env bash
# Hook: each loader records the malloc its process runs (config "allocator"),
# which the page-fault advice follows: "glibc"; "glibc fixed thresholds" only
# where the environment fixes the mmap threshold at glibc's largest, 32 MiB
# (GLIBC_TUNABLES, or the older MALLOC_MMAP_THRESHOLD_ alias; a 128 KiB
# threshold maps more blocks afresh, and glibc rejects one above 32 MiB,
# keeping its dynamic thresholds); a preloaded caching allocator by its
# library's name.
source "$(dirname "$0")/lib.sh"
need_torch
source "$STALLPROF_SOURCE_DIR/tests/tools/hook_record.sh"
cat > "$TMP/loop.py" <<'PY'
import torch
from torch.utils.data import DataLoader, TensorDataset
for (x,) in DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=4):
    pass
PY
allocator() {  # allocator <env assignments...>: the allocator the hook recorded
  record "$TMP/c.jsonl" env "$@" "$PY" "$TMP/loop.py" >"$TMP/out.txt" 2>&1 || fail "the run failed ($*): $(tail -3 "$TMP/out.txt")"
  "$PY" - "$TMP/c.jsonl" <<'PY'
import json, sys
values = [r.get("str") for r in map(json.loads, open(sys.argv[1])) if r["type"] == "config" and r["key"] == "allocator"]
print(values[0] if len(values) == 1 else f"{len(values)} allocator configs: {values}")
PY
}
check() {  # check <expected> <env assignments...>
  local want=$1 got
  shift
  got=$(allocator "$@")
  [ "$got" = "$want" ] || fail "with $*: recorded '$got', expected '$want'"
  echo "$* -> $got"
}
check "glibc" GLIBC_TUNABLES=
check "glibc fixed thresholds" GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912
check "glibc" GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072
check "glibc" GLIBC_TUNABLES=glibc.malloc.mmap_threshold=67108864
check "glibc fixed thresholds" GLIBC_TUNABLES= MALLOC_MMAP_THRESHOLD_=33554432
TCMALLOC=libtcmalloc_minimal.so.4
if LD_PRELOAD=$TCMALLOC "$PY" -c 'print(1)' 2>&1 | grep -q "cannot be preloaded"; then
  skip "$TCMALLOC (libtcmalloc-minimal4) is not installed: scripts/setup.sh installs it"
fi
check "$TCMALLOC" GLIBC_TUNABLES= LD_PRELOAD=$TCMALLOC
echo PASS
