#!/usr/bin/env bash
# Sets up, builds, profiles the bundled demo training script and analyzes it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p demo-out
build/stallprof run -o demo-out/trace.pb -- /usr/bin/python3 scripts/workloads/train_demo.py "$@"
build/stallprof analyze demo-out/trace.pb
