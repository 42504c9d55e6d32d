#!/usr/bin/python3
"""What a copy-on-write fault costs on this machine: after a fork, the parent's
first write to each page it shares with the child faults, and the kernel
copies the page while the child lives (a DataLoader worker forked each epoch
without persistent_workers) or only re-maps it once the child has exited.
Times writing a byte a 4 KiB page of resident memory after a fork, the child
alive and then gone, against the same writes to private pages (docs/model.md,
start-up: the steps beside a worker).

  scripts/bench_cow_fault.py [MiB, default 64] [repeats, default 3]
"""
import mmap
import os
import sys
import time

PAGE = 4096


def write(buf, pages, value):
    start = time.thread_time_ns()
    for i in range(pages):
        buf[i * PAGE] = value
    return time.thread_time_ns() - start


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    pages = (mib << 20) // PAGE
    buf = mmap.mmap(-1, pages * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(buf, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
        buf.madvise(mmap.MADV_NOHUGEPAGE)  # 4 KiB pages, as a Python heap's
    write(buf, pages, 1)  # resident
    for _ in range(repeats):
        private = write(buf, pages, 2)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.read(read_end, 1)  # alive until the parent has written
            os._exit(0)
        alive = write(buf, pages, 3)
        os.write(write_end, b"x")
        os.waitpid(pid, 0)
        os.close(read_end)
        os.close(write_end)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        gone = write(buf, pages, 4)
        print(f"{pages} pages: private {private / pages / 1e3:.3f} us a page; after a fork, a copy-on-write fault "
              f"costs {(alive - private) / pages / 1e3:.2f} us with the child alive (the page copied), "
              f"{(gone - private) / pages / 1e3:.2f} us after it exited")
    buf.close()


if __name__ == "__main__":
    main()
