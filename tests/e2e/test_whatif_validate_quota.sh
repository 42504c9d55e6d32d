#!/usr/bin/env bash
# Model validation against real runs, case 'quota' (scripts/validate_model.sh
# documents each case): profile one configuration, predict another with
# whatif, run it, and require the prediction within 20% of the measured
# (the target is 10%), and the case to tell the model apart from predicting
# "no change". Skips (77) with the reason when the machine cannot run it.
source "$(dirname "$0")/lib.sh"
need_torch
require_quiet_cpus
STALLPROF_BIN="$SP" MAX_ERROR=0.20 bash "$STALLPROF_SOURCE_DIR/scripts/validate_model.sh" quota
