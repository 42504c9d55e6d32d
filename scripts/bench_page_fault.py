#!/usr/bin/python3
"""What a page fault costs on this machine: the CPU to touch fresh anonymous
memory a byte a 4 KiB page (each touch faults a zeroed page in), against
touching it again once resident. On bare metal a fault costs a fraction of
a microsecond; on some virtual machines tens of times more, and every batch a
DataLoader worker collates into fresh shared memory pays it page by page
(docs/model.md, input `shm`).

  scripts/bench_page_fault.py [MiB, default 256] [repeats, default 3]
"""
import mmap
import sys
import time

PAGE = 4096


def touch(buf, pages):
    start = time.thread_time_ns()
    for i in range(pages):
        buf[i * PAGE] = 1
    return time.thread_time_ns() - start


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    pages = (mib << 20) // PAGE
    for _ in range(repeats):
        buf = mmap.mmap(-1, pages * PAGE)  # private anonymous: every first touch faults
        if hasattr(buf, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
            buf.madvise(mmap.MADV_NOHUGEPAGE)  # 4 KiB faults, as a shared-memory segment takes them
        fresh = touch(buf, pages)
        resident = touch(buf, pages)
        buf.close()
        print(f"{pages} pages: first touch {fresh / pages / 1e3:.2f} us a page, resident {resident / pages / 1e3:.3f} us "
              f"a page: a fault costs {(fresh - resident) / pages / 1e3:.2f} us")


if __name__ == "__main__":
    main()
