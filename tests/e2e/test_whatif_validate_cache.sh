#!/usr/bin/env bash
# Model validation against real runs, case 'cache' (scripts/validate_model.sh):
# profile a file-backed dataset cold under a memory cgroup on storage
# throttled to 200 MiB/s, predict everything cached and a larger LRU cache
# with whatif, run both, and require the predicted steady-state samples/s
# within 20% of the measured (the target is 10%), and "no change" to miss the
# cached run by more than 40%.
# Skips (77) with the reason when cgroups, blkio throttling or drop_caches are
# not permitted.
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
STALLPROF_BIN="$SP" MAX_ERROR=0.20 bash "$STALLPROF_SOURCE_DIR/scripts/validate_model.sh" cache
