#!/usr/bin/python3
"""Runs a training script under torch.profiler the way a user wraps one
without editing it: CPU activities, default settings, the script run with
runpy as __main__. The comparison side of scripts/bench_overhead.sh.

    with_torch_profiler.py script.py [script args...]
"""
import runpy
import sys

import torch.profiler


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: with_torch_profiler.py script.py [args...]")
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
