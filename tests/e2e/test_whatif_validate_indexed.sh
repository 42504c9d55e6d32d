#!/usr/bin/env bash
# Model validation against real runs, case 'indexed' (scripts/validate_model.sh):
# a custom dataset that opens its files by index (lists none, so its size is
# estimated), profiled cold in a 400M memory cgroup on storage throttled to
# 200 MiB/s, predicted and run fully cached. The CPU a miss costs comes from
# the fetches' system time there, an upper estimate (its figure ran +3% to
# +26% high), so whatif gives its floor too (misses costing no CPU) and says
# the truth lies between: the test requires the measured samples/s inside
# that range, each end within 20% (paired medians), and "no change" to miss
# by more than 40%. The point figure is reported, not asserted.
# Skips (77) with the reason when cgroups, blkio throttling or drop_caches are
# not permitted.
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
STALLPROF_BIN="$SP" MAX_ERROR=0.20 bash "$STALLPROF_SOURCE_DIR/scripts/validate_model.sh" indexed
