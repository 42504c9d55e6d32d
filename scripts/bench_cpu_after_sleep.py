#!/usr/bin/python3
"""The same CPU work back to back and after short sleeps: why a cold profile's CPU overstates a warm cache's.

Reads cached 512 KiB files (a Python file read: open, read, close) in a loop,
back to back and with a 0.5 ms or 2 ms sleep before each read, and prints the
thread CPU per read (the sleep's own CPU is measured alone and taken out). A
worker that waits on storage between reads runs its CPU in the second way; a
cached run's worker in the first. Usage: bench_cpu_after_sleep.py [rounds]
"""
import os
import sys
import tempfile
import time

FILES, SIZE = 400, 512 << 10  # 200 MiB: more than the CPU caches hold, as a dataset


def per_read_us(paths, sleep_s):
    start = time.thread_time_ns()
    for path in paths:
        if sleep_s:
            time.sleep(sleep_s)
        with open(path, "rb") as f:
            f.read()
    return (time.thread_time_ns() - start) / len(paths) / 1e3


def sleep_only_us(count, sleep_s):
    start = time.thread_time_ns()
    for _ in range(count):
        time.sleep(sleep_s)
    return (time.thread_time_ns() - start) / count / 1e3


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory(prefix="stallprof-sleep-") as root:
        block, paths = os.urandom(SIZE), [os.path.join(root, f"{i:03d}.bin") for i in range(FILES)]
        for path in paths:
            with open(path, "wb") as f:
                f.write(block)
        per_read_us(paths * 2, 0)  # warm the page cache and the code
        print(f"CPU per read of a cached {SIZE >> 10} KiB file, {FILES} files a pass (us)")
        for r in range(rounds):
            steady = per_read_us(paths * 4, 0)
            rows = [f"back to back {steady:6.1f}"]
            for sleep_s in (0.0005, 0.002):
                after = per_read_us(paths, sleep_s) - sleep_only_us(FILES, sleep_s)
                rows.append(f"after a {sleep_s * 1e3:g} ms sleep {after:6.1f} ({after / steady:.2f}x)")
            print(f"round {r + 1}: " + ", ".join(rows))


if __name__ == "__main__":
    main()
