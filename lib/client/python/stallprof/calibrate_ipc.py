"""What handing one batch from a DataLoader worker to the main process costs
in CPU, for a batch of tensors of the given sizes: run by `stallprof run`
after a job, for its loaders without workers, where the profile cannot see
it, and for those with workers, whose profile cannot take the shared-memory
costs (collate_shm_cpu_s, touch_cpu_s and free_cpu_s below) apart from the
fetches and steps they are in (--no-fork-timing when all had workers).

  python3 -m stallprof.calibrate_ipc BATCH [BATCH ...] [--batches N] [--job-rss-bytes B] [--no-fork-timing]
                                    [--start-method spawn|forkserver ...]

BATCH is a batch's tensor sizes in bytes, comma-separated, optionally
"@S", the job's seconds a batch (the pace below), and optionally "/K", the
loader's batch size for next_own_cpu_s below (0: batch_size=None):
"16384000,2048@0.036/64". The
batches are timed in turn in this one process, so torch is imported once
(1.7-2.3 s here): the torchaudio speech-command tutorial's two loaders
took 7.7 s, against 5.0 and 4.8 s timed in a process each.
For each, a DataLoader with one persistent worker delivers N batches (after
a warm-up) whose tensors the worker allocates in shared memory and fills, as
torch's collate does. Printed as one line a batch, in order, "loop_cpu_s X
receive_cpu_s Y receive_wall_s W collate_shm_cpu_s Z touch_cpu_s T free_cpu_s V
batches N pace_s P startup_s U shutdown_s D rss_bytes R fork_s_per_mib F
exit_s_per_mib E [M_startup_s S M_shutdown_s J ...] [next_own_cpu_s O]", in
seconds per batch (the last five, and each --start-method M's pair: once),
or "failed <why>" where its timing raised:
  loop_cpu_s         the worker process's CPU per batch outside __getitem__
                     (its queue feeder pickling, the fd sharer, the loop);
  receive_cpu_s      the main thread's CPU per next() (unpickling, receiving
                     the tensors' file descriptors, mapping them);
  receive_wall_s     the wall time of a next() that found its batch made:
                     the CPU above and the main thread's waits on the worker
                     (each tensor's file descriptor is fetched from a thread
                     in the worker process over a socket, which must wake and
                     run), -1 when fewer than MIN_BATCHES calls found theirs
                     made;
  collate_shm_cpu_s  what torch's default_collate costs the worker, which
                     stacks each tensor into a fresh shared-memory segment
                     (created, mapped, a view resized to the batch, faulted
                     in page by page), beyond the same stack into the heap
                     (the main thread's collate without workers). The
                     segment's set-up is most of it for small tensors: a
                     TensorDataset's 8 KiB and 512 B tensors cost 128 us a
                     batch more (74-77 us timed as a fresh tensor's
                     share_memory_(), against about 140 measured in a worker);
  touch_cpu_s        the main thread's CPU to read the received batch once,
                     a byte a page, beyond the same read of resident memory:
                     faulting in the segment's pages, which the step pays
                     at its first use of the batch;
  free_cpu_s         the main thread's CPU to free a received batch (unmapping
                     its segments, closing their descriptors) beyond freeing
                     a heap copy of it, as a loop without workers does: the
                     step pays it when its loop variable takes the next
                     batch, after next() has returned;
  startup_s          starting the worker (fork) and its loop: the time from
                     iter() to the first batch beyond a later batch's (the
                     median wall time of a timed next()). It is this process's
                     fork, smaller than a training job's, and no
                     worker_init_fn: a floor for the job's own start-up.
                     The first batch's pace and making are not start-up.
  shutdown_s         joining the worker (the iterator's _shutdown_workers,
                     which a non-persistent loader runs in each epoch's last
                     next()): the worker's exit, a floor as the fork above;
                     -1 where torch has no such method.
  rss_bytes          this process's resident memory as it forked the worker;
  fork_s_per_mib     what a fork costs the parent per MiB of resident memory
                     (it copies the page tables of the whole process): this
                     process's fork timed as it is and with the job's extra
                     resident MiB more (--job-rss-bytes less this process's;
                     at least 512, at most 4096), the fastest of 5 each
                     (256 MiB more read 17-45 us a MiB here where 2 GiB read
                     23-29: too little beside the host's noise), when twice
                     that is available; -1 otherwise. analysis adds it for
                     the job's larger process (14.7 ms to start a worker
                     from 229 MiB here, 60.5 ms from 2.2 GiB).
  exit_s_per_mib     the same for the forked child's exit (it tears down those
                     page tables), from the fork to the child reaped beyond
                     the fork itself: a worker's shutdown grows with it.
  M_startup_s        with --start-method M: a worker started that way (a fresh
                     interpreter importing torch), iter() to its first batch
                     beyond a later one's, and M_shutdown_s its join
                     (time_start);
  next_own_cpu_s     with "/K": the DataLoader's own code in a next() without
                     workers (the sampler drawing K indices, the iterator's
                     bookkeeping, torch's record_function) beside the fetch,
                     which is left out (the fetcher replaced by one that
                     returns its indices): what a loop without workers pays
                     beyond its fetches and steps, which a profile with
                     workers cannot tell from receiving (its main thread
                     runs both in next()). A RandomSampler's, as training
                     loaders shuffle (a SequentialSampler's was 0-15% less
                     here: 3.9 us a batch of 1, 5.6-6.6 of 64).
On a virtual machine a page fault can cost 50x what it does on bare metal,
and both shared-memory figures grow with it.

A pace of S makes the worker take S seconds a batch (a sleep before each), as
the job's loop did: threads that sleep between batches and are woken for
each cost more than threads kept busy (on this VM the loop and receive CPU
of a 288-byte batch were 1.6-1.8x higher at a 20 ms pace than back to back
on a quiet machine, 2.5-3x while other jobs kept the cores busy; docs/model.md,
input `loop`). The pace is capped at 20 ms. Before each timed next() the
main thread stays on CPU (as the job's step would, letting the GIL go as
torch ops do) for as long as the worker took for the previous batch (the
pace and making it), so that the batch is made when next() is called.

The timing holds the user up after their job, so it is cut by time as well as
by count: the warm-up ends after --warmup batches or 0.5 s (at least 3), the
timed batches after --batches or 2 s (at least 20). A 9.4 MiB batch took 11 s
for 200 batches on this VM; small batches run all 1000, about a second: the
host's speed drifts over tenths of a second, and 200 batches of a skorch
MLP's 11 KiB batch (0.3 s) read a receive of 442-673 us in six timings
(medians 410-632 us, the fastest tenth 387-411), where 1000 read 433-473
(2026-12-06; whatif's 2-worker figure for that loader read -26% and -56%
in two profiles with it).
"""
import argparse
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data._utils.collate import default_collate

from .hook import resident_bytes

WARMUP_S = 0.5    # the warm-up ends after this long (and at least 3 batches)
MIN_BLOCK_MIB = 512  # fork_cost's block: at least this (below it the host's noise decides)
MAX_BLOCK_MIB = 4096
TIMED_S = 2.0     # the timed batches end after this long (and at least MIN_BATCHES)
MIN_BATCHES = 20


class Batches(Dataset):
    def __init__(self, sizes, count, pace_s):
        self.sizes = sizes
        self.elements = None  # made in the worker, as a dataset's samples are
        self.count = count
        self.pace_s = pace_s

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        if self.pace_s > 0:
            time.sleep(self.pace_s)
        # The worker process's CPU (all its threads: the loop, the queue
        # feeder pickling, the fd sharer) as this batch starts: stamps at batch
        # boundaries, so a timing cut short counts no part-done batch.
        entered_cpu_ns = time.process_time_ns()
        made_from = time.monotonic()
        # torch's default_collate itself: in a worker it stacks into a fresh
        # shared-memory segment (_new_shared, a view resized to the batch,
        # stack(out=)); the main thread stacks into its heap.
        if self.elements is None:
            self.elements = [torch.ones(size, dtype=torch.uint8) for size in self.sizes]
        start = time.thread_time_ns()
        heap = tuple(torch.stack([e], 0) for e in self.elements)
        heap_ns = time.thread_time_ns() - start
        del heap
        start = time.thread_time_ns()
        tensors = tuple(default_collate([e]).view(-1) for e in self.elements)
        shared_ns = time.thread_time_ns() - start
        made = time.monotonic()
        return tensors, heap_ns, shared_ns, entered_cpu_ns, made - made_from, made


def fork_seconds(tries=5):
    """The fastest of `tries` forks of this process in the parent, and of the
    child's exit beyond it (from the fork to the child reaped; it exits at once)."""
    fork = exited = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        forked = time.perf_counter()
        os.waitpid(pid, 0)
        fork, exited = min(fork, forked - start), min(exited, time.perf_counter() - forked)
    return fork, exited


def available_bytes():
    """What this process may still allocate: the machine's MemAvailable, or
    less where a memory cgroup limits it (a container's memory limit, a job
    scheduler's): /proc/meminfo shows the machine, and a block sized from it
    had the kernel's OOM killer end this timing in a 400 MiB cgroup."""
    available = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    room = cgroup_room_bytes()
    return available if room is None else min(available, room)


def read_number(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (v2): no limit


def read_stat(path, key):
    try:
        with open(path) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


def cgroup_room_bytes(proc_cgroup="/proc/self/cgroup", root="/sys/fs/cgroup"):
    """The memory cgroup's limit less its usage, its inactive file pages
    counted as room (the kernel reclaims them first); None without a limit.
    The lowest limit on the way up counts (v2 memory.max; v1's
    hierarchical_memory_limit already is it)."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if "memory" in controllers.split(","):  # v1
            group = os.path.join(root, "memory", path.lstrip("/"))
            limit = read_stat(os.path.join(group, "memory.stat"), "hierarchical_memory_limit")
            limit = limit if limit is not None else read_number(os.path.join(group, "memory.limit_in_bytes"))
            usage = read_number(os.path.join(group, "memory.usage_in_bytes"))
            inactive = read_stat(os.path.join(group, "memory.stat"), "total_inactive_file") or 0
        elif hierarchy == "0" and controllers == "":  # v2
            group = os.path.join(root, path.lstrip("/"))
            limit, up = None, group
            while True:
                value = read_number(os.path.join(up, "memory.max"))
                if value is not None:
                    limit = value if limit is None else min(limit, value)
                if os.path.normpath(up) == os.path.normpath(root):
                    break
                up = os.path.dirname(up)
            usage = read_number(os.path.join(group, "memory.current"))
            inactive = read_stat(os.path.join(group, "memory.stat"), "inactive_file") or 0
        else:
            continue
        if limit is None or usage is None or limit >= 1 << 60:  # v1 writes "no limit" as about 2^63
            continue
        return max(0, limit - usage + inactive)
    return None


def fork_block_mib(job_rss_bytes):
    """The MiB to grow by for fork_cost: the job's size beyond this process's
    (a block near it measures the job's cost a MiB; 512 MiB more read 21-42 us
    a MiB from one timing to the next where 2 GiB more read 22-28), at least
    MIN_BLOCK_MIB, at most MAX_BLOCK_MIB and half of what is available."""
    extra = (job_rss_bytes - resident_bytes()) >> 20 if job_rss_bytes > 0 else 0
    return int(max(MIN_BLOCK_MIB, min(MAX_BLOCK_MIB, extra, (available_bytes() >> 20) // 2)))


def fork_cost(extra_mib=512):
    """(seconds a fork, seconds a child's exit) per resident MiB, -1 each where it cannot tell."""
    try:
        if available_bytes() < 2 * (extra_mib << 20):
            return -1.0, -1.0
        rss = resident_bytes()
        small = fork_seconds()
        block = b"\x01" * (extra_mib << 20)  # resident: every page written
        grown = (resident_bytes() - rss) / 2**20
        large = fork_seconds()
        del block
    except (OSError, MemoryError):
        return -1.0, -1.0
    if grown < 1:
        return -1.0, -1.0
    return max(0.0, large[0] - small[0]) / grown, max(0.0, large[1] - small[1]) / grown


def parse_batch(text):
    """ "B1,B2,...[@PACE][/K]" -> ([B1, B2, ...], pace_s, K or None); argparse's type."""
    rest, slash, batch_size = text.partition("/")
    sizes, _, pace = rest.partition("@")
    try:
        parsed = ([int(b) for b in sizes.split(",")], float(pace) if pace else 0.0,
                  int(batch_size) if slash else None)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not BYTES[,BYTES...][@SECONDS][/BATCH_SIZE]: {text!r}")
    if (not parsed[0] or min(parsed[0]) < 0 or not 0 <= parsed[1] < float("inf") or
            (slash and not 0 <= parsed[2] <= 1 << 30)):
        raise argparse.ArgumentTypeError(f"not BYTES[,BYTES...][@SECONDS][/BATCH_SIZE]: {text!r}")
    return parsed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("batch", type=parse_batch, nargs="+",
                   help="BYTES[,BYTES...][@SECONDS a batch in the job's loop][/BATCH_SIZE to time next()'s own code at]")
    p.add_argument("--batches", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--job-rss-bytes", type=int, default=0, help="the job's resident bytes (0: unknown)")
    p.add_argument("--no-fork-timing", action="store_true",
                   help="time no fork (the job's loaders had workers, whose forks it measured): -1 each")
    p.add_argument("--start-method", action="append", choices=["spawn", "forkserver"], default=[],
                   help="also start a worker this way (a loader without workers that would): its start-up and join")
    args = p.parse_args()
    torch.set_num_threads(1)
    fork_s_per_mib, exit_s_per_mib = (-1.0, -1.0) if args.no_fork_timing else fork_cost(
        fork_block_mib(args.job_rss_bytes))
    started = ""
    for method in dict.fromkeys(args.start_method):
        try:
            startup, shutdown = time_start(method)
            started += " %s_startup_s %.6f %s_shutdown_s %.6f" % (method, startup, method, shutdown)
        except Exception:  # left untimed: whatif then leaves such a start-up out, as before
            pass
    for sizes, pace, batch_size in args.batch:
        try:
            line = time_handoff(sizes, min(max(pace, 0), 0.02), args.warmup, args.batches)
            line += " fork_s_per_mib %.9f exit_s_per_mib %.9f" % (fork_s_per_mib, exit_s_per_mib) + started
            if batch_size is not None:
                line += " next_own_cpu_s %.9f" % time_next_own(batch_size)
        except Exception as e:  # this batch's timing alone: the next ones still run
            line = f"failed {type(e).__name__}: {e}".replace("\n", " ")
        print(line, flush=True)


def time_handoff(sizes, pace, warmup, batch_count):
    loader = DataLoader(Batches(sizes, warmup + batch_count + 1, pace), batch_size=None, num_workers=1,
                        persistent_workers=True, multiprocessing_context="fork")
    rss = resident_bytes()  # as it forks the worker
    start = time.monotonic()
    it = iter(loader)
    first_making_s = next(it)[4]
    # Beyond the batch itself (the worker's pace and making it): the fork and the loop's start.
    first_batch_s = time.monotonic() - start - pace - first_making_s
    start = time.monotonic()
    for done in range(warmup):
        if done >= 3 and time.monotonic() - start > WARMUP_S:
            break
        next(it)
    resident = [torch.ones(size, dtype=torch.uint8) for size in sizes]  # the same read without faults
    receive = shared_extra = touch = 0
    freed_shared = freed_heap = 0  # freeing a received batch, and a heap copy of it
    tensors = None
    batches = 0
    worker_from = worker_to = fetch = previous_fetch = 0  # the worker's CPU at the first and the last batch; fetch CPU between
    walls = []
    ready_walls = []  # next() calls that found their batch made
    making_s = 0.0    # the worker's wall time to make the previous batch
    timed_from = time.monotonic()
    while batches < batch_count and (batches < MIN_BATCHES or time.monotonic() - timed_from < TIMED_S):
        # On CPU as a step would be, the GIL let go as torch ops do, until the
        # worker has made this batch.
        on_cpu_until = time.monotonic() + pace + making_s
        while time.monotonic() < on_cpu_until:
            time.sleep(0)
        wall_start = time.monotonic()
        start = time.thread_time_ns()
        batch = next(it)
        received = time.thread_time_ns()
        wall = time.monotonic() - wall_start
        # Rebinding `tensors` frees the previous batch: the job's loop does it
        # after its next() returns, in its step, so it is timed apart from the receive.
        tensors, heap_ns, shared_ns, entered_cpu_ns, making_s, made = batch
        unpacked = time.thread_time_ns()
        if batches > 0:  # the first frees nothing: the warm-up's last batch went in its own next()
            freed_shared += unpacked - received
        walls.append(wall)
        if made < wall_start:
            ready_walls.append(wall)
        for t in tensors:
            t[::4096].sum()  # a byte a page, as the step's first read of the batch
        touched = time.thread_time_ns()
        for t in resident:
            t[::4096].sum()
        resident_read = time.thread_time_ns()
        touch += 2 * touched - unpacked - resident_read
        if batches > 0:
            heap = [t.clone() for t in tensors]  # the batch a loop without workers frees instead
            copied = time.thread_time_ns()
            heap = None
            freed_heap += time.thread_time_ns() - copied
        receive += received - start
        shared_extra += shared_ns - heap_ns
        if batches == 0:
            worker_from = entered_cpu_ns
        else:
            fetch += previous_fetch  # the previous batch lies between the two stamps, this one does not
        worker_to = entered_cpu_ns
        previous_fetch = heap_ns + shared_ns
        batches += 1
    loop = (worker_to - worker_from - fetch) / max(1, batches - 1)  # over the batches between the two stamps
    n = batches * 1e9
    startup = max(0.0, first_batch_s - sorted(walls)[len(walls) // 2]) if walls else 0.0
    # Wall time is not thread CPU: the mean of the calls that found their batch
    # made, no less than their CPU (clocks of different resolution).
    receive_wall = max(sum(ready_walls) / len(ready_walls), receive / n) if len(ready_walls) >= MIN_BATCHES else -1
    shutdown = time_join(it)
    free = (freed_shared - freed_heap) / max(1, batches - 1) / 1e9
    return ("loop_cpu_s %.9f receive_cpu_s %.9f receive_wall_s %.9f collate_shm_cpu_s %.9f touch_cpu_s %.9f "
            "free_cpu_s %.9f batches %d pace_s %.6f startup_s %.6f shutdown_s %.6f rss_bytes %d"
            % (max(0, loop) / 1e9, receive / n, receive_wall, max(0, shared_extra) / n, max(0, touch) / n,
               max(0, free), batches, pace, startup, shutdown, rss))


def time_start(method):
    """A worker started by `method` ("spawn" or "forkserver"), as a loader
    without workers that would start them so: (start-up, shutdown) seconds,
    iter() to its first batch beyond a later batch's, and its join. Such a
    worker starts a fresh interpreter that imports torch (0.64-0.68 s here
    either way; a fork: 0.01-0.02), a floor for the job's, whose workers
    also import its __main__'s modules and unpickle its dataset."""
    loader = DataLoader(Indices(3), batch_size=None, num_workers=1, multiprocessing_context=method)
    start = time.monotonic()
    it = iter(loader)
    next(it)
    first = time.monotonic() - start
    start = time.monotonic()
    next(it)
    later = time.monotonic() - start
    return max(0.0, first - later), time_join(it)


def time_join(it):
    """Seconds the iterator takes to join its workers (torch's own
    _shutdown_workers, a private method: -1 where torch has none)."""
    join = getattr(it, "_shutdown_workers", None)
    if not callable(join):
        return -1.0
    start = time.monotonic()
    join()
    return time.monotonic() - start


class Indices(Dataset):
    """Indices only: the timed next() never fetches from it."""
    def __init__(self, count):
        self.count = count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        return index


NEXT_OWN_INDICES = 1 << 18  # a round's indices at most: a permutation of millions took seconds
NEXT_OWN_LARGEST = 1 << 16  # larger batches: timed at this size and scaled (the sampler's loop is per index)
# The CPU a training step takes between two timed next() calls (a loop in
# Python, as the step's own code): a step evicts the iterator's code and data
# from the caches, and next() pays to bring them back. A batch of 1 here:
# 8.1 us back to back, 11.2 us with 200 us between, 12.4 with 1 ms; a
# 2-worker profile of scripts/workloads/fast_loader.py planned its run
# without workers 4.5 us a batch short, timed back to back.
NEXT_OWN_STEP_S = 0.0005


def time_next_own(batch_size, batch_count=200, timed_s=0.1):
    """The main thread's CPU a next() without workers spends outside its
    fetch: a RandomSampler drawing `batch_size` indices (0: one, as for
    batch_size=None) and the iterator's bookkeeping, with the fetcher
    replaced by one that hands back its indices, each call after a step of
    NEXT_OWN_STEP_S on CPU. The median of 5 rounds, a round `batch_count`
    calls (fewer for large batches: NEXT_OWN_INDICES indices, at least 10
    calls) or `timed_s`, after a tenth as many (at most 100) untimed: 0.5 s
    in all for batches of 1. Larger batches are timed at NEXT_OWN_LARGEST
    indices and scaled: 43 ns an index here at 65536 and at 1048576 (which
    took 6.7 s timed whole)."""
    if batch_size > NEXT_OWN_LARGEST:
        return time_next_own(NEXT_OWN_LARGEST, batch_count, timed_s) * batch_size / NEXT_OWN_LARGEST
    indices = max(1, batch_size)
    calls_most = max(10, min(batch_count, NEXT_OWN_INDICES // indices))
    warmup = min(100, max(2, calls_most // 10))
    loader = DataLoader(Indices((warmup + calls_most + 1) * indices), batch_size=batch_size or None,
                        shuffle=True, num_workers=0)
    clock = time.thread_time_ns
    step_ns = int(NEXT_OWN_STEP_S * 1e9)
    # What a pair of clock reads adds to a timed call.
    pairs = []
    for _ in range(200):
        a = clock()
        pairs.append(clock() - a)
    clock_ns = sorted(pairs)[len(pairs) // 2]
    rounds = []
    for _ in range(5):
        it = iter(loader)
        it._dataset_fetcher.fetch = lambda index: index  # the fetch span's work: not this timing's
        for _ in range(warmup):
            next(it)
        own = 0
        until = time.monotonic() + timed_s
        calls = 0
        while calls < calls_most and (calls < 10 or time.monotonic() < until):
            start = clock()
            next(it)
            end = clock()
            own += end - start - clock_ns
            calls += 1
            step_end = end + step_ns
            while clock() < step_end:
                pass
        rounds.append(max(0, own) / calls / 1e9)
    return sorted(rounds)[len(rounds) // 2]


if __name__ == "__main__":
    main()
