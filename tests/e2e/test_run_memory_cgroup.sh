#!/usr/bin/env bash
# A job in a memory cgroup (a container's memory limit, a scheduler's): the
# handoff timing that `stallprof run` starts after a loader without workers
# sizes its fork-cost block from what the process may still allocate, the
# cgroup's room and not the machine's MemAvailable. Sized from
# /proc/meminfo (512 MiB at least), the block had the kernel's OOM killer end
# the timing in a 400 MiB cgroup: "could not time a worker's batch handoff",
# and whatif took the handoff as 0. First the room read from fake cgroup
# trees (v1 and v2); then, where the v1 memory controller is writable, a
# real run in a 400 MiB group, whose limit the trace records (the header's
# memory_limit_bytes) and whatif and recommend take as the job's memory.
source "$(dirname "$0")/lib.sh"
need_torch
PYTHONPATH="$(dirname "$SP")/python" "$PY" - "$TMP" <<'PY' || fail "the cgroup room read from fake trees is wrong (above)"
import os, sys
from stallprof.calibrate_ipc import cgroup_room_bytes
tmp = sys.argv[1]
def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write(text)
MiB = 1 << 20
# v1: the hierarchical limit (a parent's 300 MiB under the group's own 1 GiB), usage, inactive files.
write(f"{tmp}/v1.cgroup", "12:cpuset:/\n5:memory:/job\n0::/\n")
write(f"{tmp}/v1/memory/job/memory.limit_in_bytes", f"{1024 * MiB}\n")
write(f"{tmp}/v1/memory/job/memory.usage_in_bytes", f"{250 * MiB}\n")
write(f"{tmp}/v1/memory/job/memory.stat", f"cache 1\nhierarchical_memory_limit {300 * MiB}\ntotal_inactive_file {20 * MiB}\n")
# v2: the lowest memory.max on the way up (the group's "max", its parent's 400 MiB).
write(f"{tmp}/v2.cgroup", "0::/a/b\n")
write(f"{tmp}/v2/memory.stat", "")
write(f"{tmp}/v2/a/memory.max", f"{400 * MiB}\n")
write(f"{tmp}/v2/a/b/memory.max", "max\n")
write(f"{tmp}/v2/a/b/memory.current", f"{100 * MiB}\n")
write(f"{tmp}/v2/a/b/memory.stat", f"anon 5\ninactive_file {10 * MiB}\n")
# No limit: v1's "unlimited" (about 2^63) and v2's "max" all the way up.
write(f"{tmp}/free.cgroup", "5:memory:/\n")
write(f"{tmp}/free/memory/memory.limit_in_bytes", "9223372036854771712\n")
write(f"{tmp}/free/memory/memory.usage_in_bytes", f"{100 * MiB}\n")
write(f"{tmp}/free/memory/memory.stat", "total_inactive_file 0\n")
got = {case: cgroup_room_bytes(f"{tmp}/{case}.cgroup", f"{tmp}/{case}") for case in ("v1", "v2", "free")}
want = {"v1": 70 * MiB, "v2": 310 * MiB, "free": None}
print(got, "expected", want)
sys.exit(0 if got == want else 1)
PY

G=/sys/fs/cgroup/memory/stallprof-e2e-$$
make_test_group "$G" || skip "the fake trees passed; no real run: cgroup v1 memory controller not writable at /sys/fs/cgroup/memory"
echo $((400 << 20)) >"$G/memory.limit_in_bytes"
set +e
bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$G" \
  "$SP" run -o "$TMP/c.pb" -- "$PY" "$WORKLOADS/synthetic.py" --workers 0 --batches 30 --batch-size 8 --prep-cpu-ms 1 \
  --compute-ms 1 --exit-code 3 >/dev/null 2>"$TMP/c.err"
rc=$?
set -e
[ "$rc" = 3 ] || fail "exit code $rc, not the job's 3: $(cat "$TMP/c.err")"
! grep -q "could not time" "$TMP/c.err" || fail "the handoff timing failed in a 400 MiB cgroup: $(cat "$TMP/c.err")"
"$SP" analyze "$TMP/c.pb" --json >"$TMP/c.json"
"$PY" - "$TMP/c.json" <<'PY' || fail "no handoff timing recorded for the loader (above)"
import json, sys
c = json.load(open(sys.argv[1]))["loaders"][0]["config"]
print("receive", c["ipc_receive_cpu_s"], "startup", c["ipc_startup_s"])
sys.exit(0 if c["ipc_receive_cpu_s"] > 0 and c["ipc_startup_s"] > 0 else 1)
PY
# The limit is the memory the job had: whatif's machine and recommend's budget.
"$SP" whatif "$TMP/c.pb" --workers 1 >"$TMP/whatif.txt" || fail "whatif failed: $(cat "$TMP/whatif.txt")"
grep -q "profiled machine: .* 400.0 MiB memory (its memory cgroup's limit" "$TMP/whatif.txt" ||
  fail "whatif's machine is not the cgroup's 400 MiB: $(grep "profiled machine" "$TMP/whatif.txt")"
"$SP" recommend "$TMP/c.pb" --json >"$TMP/rec.json" || fail "recommend failed"
"$PY" -c "import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))['memory_bytes'] == 400 << 20 else 1)" "$TMP/rec.json" ||
  fail "recommend's memory budget is not the cgroup's 400 MiB: $(head -c 300 "$TMP/rec.json")"
# Of it, the training process's own peak RSS (python3 with torch: 100 MiB or
# more) is not planned for a cache or workers.
"$PY" - "$TMP/rec.json" <<'PY' || fail "recommend planned the training process's own memory (above)"
import json, sys
l = json.load(open(sys.argv[1]))["loaders"][0]
print("job", l["job_memory_bytes"], "plan", l["plan_memory_bytes"], "cache", l["cache"]["bytes"])
ok = l["job_memory_bytes"] > 100 << 20 and l["plan_memory_bytes"] == (400 << 20) - l["job_memory_bytes"]
sys.exit(0 if ok and l["cache"]["bytes"] <= l["plan_memory_bytes"] else 1)
PY
echo "PASS: the handoff timed in a 400 MiB memory cgroup, whatif and recommend took its limit (recommend less the job's RSS); the room read right from v1 and v2 trees"
