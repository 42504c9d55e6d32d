# Sourced by scripts/validate_model.sh and scripts/bench_cold_read.sh: a
# memory cgroup and throttled storage (cgroup v1) for the cache experiments,
# and a CPU quota (a container's CPU limit). The caller sets WORK (a
# directory on the storage to throttle) and removes the groups in $CGROUP,
# $SLOW and $QUOTA on exit (remove_groups).
CGROUP=""
SLOW=""
QUOTA=""

# The cache cases read their files from storage throttled to SLOW_STORAGE_MIBS
# (default 200 MiB/s, a network volume; cgroup v1 blkio) so that a cache
# matters: on this VM's local disk (about 500 MiB/s) the cold run was only
# ~25% slower than the cached one, and "no change" could not be told from the
# model. slow_storage: creates the throttled group, or fails with the reason in SLOW_WHY.
slow_storage() {
  local blkio=/sys/fs/cgroup/blkio device
  [ -w "$blkio" ] && [ -e "$blkio/blkio.throttle.read_bps_device" ] || { SLOW_WHY="cgroup v1 blkio throttling not available at $blkio"; return 1; }
  device=$(findmnt -no MAJ:MIN -T "$WORK" | tr -d ' ')
  # Throttling applies to a whole disk: a partition's parent.
  [ -e "/sys/dev/block/$device/partition" ] && device=$(cat "/sys/dev/block/$device/../dev")
  SLOW=$blkio/stallprof-$$
  mkdir -p "$SLOW" && echo "$device $((${SLOW_STORAGE_MIBS:-200} << 20))" >"$SLOW/blkio.throttle.read_bps_device" 2>/dev/null ||
    { SLOW_WHY="cannot throttle reads of block device $device (holding $WORK)"; return 1; }
}
# in_slow_storage <command...>: runs the command with its reads throttled.
in_slow_storage() { in_group "$SLOW" "$@"; }
# in_group <group directory> <command...>: runs the command in that cgroup.
in_group() { bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$@"; }
# run_in_cgroup <limit bytes> <command...>: runs the command inside a fresh
# memory cgroup (and the throttled storage when there is one).
run_in_cgroup() {
  local limit=$1
  shift
  CGROUP=/sys/fs/cgroup/memory/stallprof-$$
  mkdir -p "$CGROUP"
  echo "$limit" >"$CGROUP/memory.limit_in_bytes"
  bash -c 'echo $$ >"$1/cgroup.procs" && { [ -z "$2" ] || echo $$ >"$2/cgroup.procs"; } && shift 2 && exec "$@"' _ "$CGROUP" "$SLOW" "$@"
}
# cpu_quota <cores>: a cgroup v1 cpu group whose threads share that many
# cores' CPU time (cfs quota over a 100 ms period), or fails with the reason
# in QUOTA_WHY. in_cpu_quota <command...>: runs the command in it.
cpu_quota() {
  local cpu=/sys/fs/cgroup/cpu
  [ -e "$cpu/cpu.cfs_quota_us" ] || { QUOTA_WHY="no cgroup v1 cpu controller at $cpu"; return 1; }
  QUOTA=$cpu/stallprof-$$
  mkdir -p "$QUOTA" 2>/dev/null && echo 100000 >"$QUOTA/cpu.cfs_period_us" &&
    echo "$(awk -v c="$1" 'BEGIN { printf "%d", c * 100000 }')" >"$QUOTA/cpu.cfs_quota_us" 2>/dev/null ||
    { QUOTA_WHY="cgroup v1 cpu controller not writable at $cpu"; QUOTA=""; return 1; }
}
in_cpu_quota() { in_group "$QUOTA" "$@"; }
cgroup_cache_bytes() { awk '$1 == "total_cache" || $1 == "cache" {print $2; exit}' "$CGROUP/memory.stat"; }
drop_cgroup() {
  rmdir "$CGROUP" 2>/dev/null || true
  CGROUP=""
}
# remove_groups: moves any process left in the groups out and removes them.
remove_groups() {
  local group pid
  for group in "$CGROUP" "$SLOW" "$QUOTA"; do
    if [ -n "$group" ] && [ -d "$group" ]; then
      for pid in $(cat "$group/cgroup.procs" 2>/dev/null); do echo "$pid" >"$(dirname "$group")/cgroup.procs" 2>/dev/null || true; done
      rmdir "$group" 2>/dev/null || true
    fi
  done
}
