#!/usr/bin/python3
"""Where a traced job's extra CPU goes: the training process, its DataLoader
workers and the launcher, bare against `stallprof run`, alternated.

Each run executes the script through a small wrapper (runpy, as `python3
script.py` would) that prints, at exit, the training process's own CPU and
that of the children it reaped (the DataLoader workers), user and system
apart. "after_exit" is what the whole command took beyond that: the
interpreter's teardown after the report and workers reaped after it, on both
sides, and the launcher's own CPU when traced, so its traced - bare
difference is the launcher's. Prints the medians per side and the
traced - bare differences; asserts nothing. Usage:
  bench_job_cpu.py [pairs] [stallprof binary] -- script.py [args...]
(default: 5 pairs, build/stallprof, scripts/workloads/train_demo.py --epochs 2)
glibc's malloc thresholds are fixed as in bench_overhead.sh (under its dynamic
ones the demo's main process faulted 200 K to 800 K pages a run, bare and
traced alike: a lottery larger than the difference measured);
BENCH_DEFAULT_MALLOC=1 keeps the defaults.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRAPPER = r'''
import atexit, json, os, resource, runpy, sys, time
start = time.monotonic()
def report():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["JOB_CPU_OUT"], "w") as f:
        json.dump({"wall": time.monotonic() - start, "main_user": me.ru_utime, "main_sys": me.ru_stime,
                   "workers_user": kids.ru_utime, "workers_sys": kids.ru_stime,
                   "main_minflt": me.ru_minflt, "workers_minflt": kids.ru_minflt}, f)
atexit.register(report)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def run(cmd, out):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, JOB_CPU_OUT=out))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out) as f:
        row = json.load(f)
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row["after_exit"] = total - (row["main_user"] + row["main_sys"] + row["workers_user"] + row["workers_sys"])
    return row


FIXED_MALLOC = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=536870912"


def main():
    if os.environ.get("BENCH_DEFAULT_MALLOC") != "1":
        os.environ["GLIBC_TUNABLES"] = FIXED_MALLOC
    args = sys.argv[1:]
    script = [os.path.join(ROOT, "scripts/workloads/train_demo.py"), "--epochs", "2"]
    if "--" in args:
        script = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    pairs = int(args[0]) if args else 5
    binary = args[1] if len(args) > 1 else os.path.join(ROOT, "build/stallprof")
    with tempfile.TemporaryDirectory(prefix="stallprof-job-cpu-") as tmp:
        wrapper, out, trace = os.path.join(tmp, "wrap.py"), os.path.join(tmp, "cpu.json"), os.path.join(tmp, "t.pb")
        with open(wrapper, "w") as f:
            f.write(WRAPPER)
        python = "/usr/bin/python3"
        sides = {"bare": [python, wrapper] + script,
                 "traced": [binary, "run", "-q", "--no-handoff-timing", "-o", trace, "--", python, wrapper] + script}
        rows = {side: [] for side in sides}
        print(f"load average before: {os.getloadavg()[0]:.2f}; {pairs} pairs of {' '.join(script)}")
        run(sides["bare"], out)  # warm the page cache and the dataset
        for p in range(pairs):
            order = list(sides) if p % 2 == 0 else list(reversed(sides))
            for side in order:
                rows[side].append(run(sides[side], out))
                r = rows[side][-1]  # progress, and shows a run that fell into another allocator regime
                print(f"  pair {p + 1} {side:<6} wall {r['wall']:.3f} s, main {r['main_user']:.3f} + {r['main_sys']:.3f} s, "
                      f"{r['main_minflt']:.0f} faults", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        keys = ["wall", "main_user", "main_sys", "workers_user", "workers_sys", "after_exit", "main_minflt", "workers_minflt"]
        med = {s: {k: statistics.median(r[k] for r in rows[s]) for k in keys} for s in rows}
        print(f"{'median':<16}" + "".join(f"{k:>15}" for k in keys))
        for s in rows:
            print(f"{s:<16}" + "".join(f"{med[s][k]:>15.3f}" if "minflt" not in k else f"{med[s][k]:>15.0f}" for k in keys))
        diffs = {k: statistics.median(t[k] - b[k] for t, b in zip(rows["traced"], rows["bare"])) for k in keys}
        print(f"{'traced - bare':<16}" + "".join(f"{diffs[k]:>+15.3f}" if "minflt" not in k else f"{diffs[k]:>+15.0f}" for k in keys))
        print("(seconds; minflt in pages; traced - bare is the median of the paired differences)")


if __name__ == "__main__":
    main()
