#!/usr/bin/env bash
# Model validation against real runs, case 'cores' (scripts/validate_model.sh):
# profile one configuration, predict another with whatif, run it, and require
# the predicted steady-state samples/s within 25% of the measured (the target
# is 10%; the bound is loose so noise on a shared machine does not flake it).
# Skips (77) with the reason when the machine cannot run the case.
source "$(dirname "$0")/lib.sh"
need_torch
# This case predicts CPU scaling; other processes competing for the same cores
# (ctest -j, builds) change the measured side after the profile was taken.
load=$(cut -d' ' -f1 /proc/loadavg)
cores=$(nproc)
"$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 0.75 * float(sys.argv[2]) else 1)" "$load" "$cores" \
  || skip "the machine is busy (load $load on $cores cores): CPU scaling cannot be validated against other processes"
STALLPROF_BIN="$SP" MAX_ERROR=0.25 bash "$STALLPROF_SOURCE_DIR/scripts/validate_model.sh" cores
