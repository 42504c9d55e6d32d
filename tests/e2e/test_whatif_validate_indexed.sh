#!/usr/bin/env bash
# Model validation against real runs, case 'indexed' (scripts/validate_model.sh
# documents each case): a dataset that opens its files by index and lists
# none, profiled cold on throttled storage in a 400M memory cgroup, predicted
# fully cached (its size estimated from the bytes its fetches read); the
# prediction must be within 20% of the cached run, and predicting "no change"
# must miss it by more than 40%. Skips (77) with the reason when cgroups, blkio
# throttling or drop_caches are not permitted, or when repeats of one
# configuration spread by more than the bound (the host, not the model).
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
STALLPROF_BIN="$SP" MAX_ERROR=0.20 bash "$STALLPROF_SOURCE_DIR/scripts/validate_model.sh" indexed
