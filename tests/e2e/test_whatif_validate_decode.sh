#!/usr/bin/env bash
# Model validation against real runs, case 'decode' (scripts/validate_model.sh
# documents each case): a torchvision ImageFolder decode pipeline and a CNN
# trained on the CPU, profiled without workers, predicted for 1 and 2 workers
# on the same 2 cores; each prediction within 15% of the measured (the target
# is 10%) and predicting "no change" missing by more than 2 x 15%. 15%, not
# the other cases' 20%: 2 cores cap this case's gain at 2x, so "no change"
# misses by 39-45%, which tells the model apart only from a bound below 20%.
# Skips (77) with the reason when the machine cannot run it, or when a miss
# comes from the host slowing both busy vCPUs (the 1-worker run's step ran
# slower than predicted with its core to itself; validate_model.sh compare).
source "$(dirname "$0")/lib.sh"
need_torch
"$PY" -c "import torchvision, PIL" 2>/dev/null || skip "$PY cannot import torchvision and PIL (python3-torchvision, python3-pil)"
require_quiet_cpus
STALLPROF_BIN="$SP" MAX_ERROR=0.15 bash "$STALLPROF_SOURCE_DIR/scripts/validate_model.sh" decode
