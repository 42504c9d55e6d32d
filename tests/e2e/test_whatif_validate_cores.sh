#!/usr/bin/env bash
# Model validation against real runs, case 'cores' (scripts/validate_model.sh):
# profile one configuration, predict another with whatif, run it, and require
# the predicted steady-state samples/s within 20% of the measured (the target
# is 10%).
# Skips (77) with the reason when the machine cannot run the case.
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
STALLPROF_BIN="$SP" MAX_ERROR=0.20 bash "$STALLPROF_SOURCE_DIR/scripts/validate_model.sh" cores
