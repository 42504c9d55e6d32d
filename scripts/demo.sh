#!/usr/bin/env bash
# Sets up, builds, profiles the bundled demo training script and analyzes it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p demo-out
# The demo job decodes and augments in the main process (num_workers=0), as many
# first versions of a training script do: stallprof finds the stall and the fix.
build/stallprof run -o demo-out/trace.pb -- /usr/bin/python3 scripts/workloads/train_demo.py --workers 0 "$@"
build/stallprof analyze demo-out/trace.pb
build/stallprof whatif demo-out/trace.pb --workers 0,1,2
build/stallprof recommend demo-out/trace.pb
build/stallprof report demo-out/trace.pb -o demo-out/report.html
