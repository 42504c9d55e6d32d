"""Auto-instrumentation of torch.utils.data, installed by the bootstrap
sitecustomize of `stallprof run`.

Nothing is imported or patched until the program itself imports
torch.utils.data (a meta-path finder watches for it), so a script without
torch runs exactly as it would without stallprof. The names recorded are the
contract with the analysis (lib/trace/trace.h, namespace names).

Per DataLoader (main process): a loader id (scope), its configuration (with
its name: the variable that holds it, else the line that created it,
"train.py:42", else "loader<n>" in the order this process first iterated its
loaders, so every rank of a job names it alike; and
torch.distributed's rank when initialized), an epoch span per iterator (from
the DataLoader.__iter__ call to the iterator's creation: worker start-up), a
wait span per next() (with the main thread's CPU time and run-queue delay while
in next()) and an epoch_end span covering the next() that raised StopIteration
(worker shutdown), or a shutdown span where the loop deleted the iterator
before that (for ... break; zero-length without workers). Traces of older
hooks hold instants for both (epoch: iterator created; epoch_end: the raise).
Wherever batches are fetched (workers, or the main process with
num_workers=0): fetch spans with CPU time, getitem spans, collate spans, and a
worker_start instant per worker. Right after each fetch span, in the same
thread, a read_storage span (arg = read_bytes) and a read_calls span (arg =
rchar) that contain it: what the fetching thread read during the fetch, from
/proc/thread-self/io (not recorded where the kernel lacks that file), and a
system_cpu span (arg = the thread's system CPU ns during the fetch). The
pin-memory thread: pin spans. A loader without workers also records its
first batch's tensors (batch_tensors, batch_bytes) and leaves a request in
STALLPROF_IPC_DIR for `stallprof run` to time a worker's handoff of such a
batch after the job (stallprof.calibrate_ipc), and, with the extension,
gil_probe spans: a thread of the hook's asks for the GIL as a main-process
fetch of 1 ms or more starts, up to 16 times with a pause between (the first
16 probes 50 ms apart, then one a second, 64 a process), as a worker's
sending thread would, so analysis can tell whether the fetch holds it. A
worker process probes its fetches alike, 12 at most, for where its batches'
arrival does not tell.

Counters (a span's thread CPU time and run-queue delay, the fetching thread's
/proc/thread-self/io and getrusage) cost a syscall each, so the C client gives
each thread a budget (STALLPROF_COUNTER_SHARE of its wall time, default 0.5%):
slow spans get them every time, fast ones on a sample. A fetch reads all its
counters (CPU, delay, read and system spans) or none, decided once by
counters_due(); wait spans and stallprof.stage spans ask the budget at begin.
Batches 0, 1, 2, 4, 8, ... of every epoch get their wait's and fetch's
counters whatever the budget (log2 of the batches, a few per epoch), so every
loader has measured spans to estimate the rest from, even a short val loader
that runs right after a train loader spent its thread's budget.
The wall times are recorded on every span. The trace's "counter_share" config
(written by the client when it first skips) tells the analysis to estimate the
skipped spans (docs/analysis.md "Sampled counters").

The per-batch path is one C call per patch point: with the extension,
_BaseDataLoaderIter.__next__ is a _stallprof.NextWrapper and the fetchers'
fetch() a _stallprof.Fetch (lib/client/python/_stallprof.c), which do all of
the above without running Python code of their own (no Span object, no
closure, no frame lookup). The fetch learns its batch index from the thread:
NextWrapper announces the iterator's _num_yielded around the call (num_workers
=0), a worker's wrapped index queue (_IndexQueue) the idx of each batch it
hands out. The ctypes fallback runs the same logic in Python (_python_next,
_python_fetch; its fetch reads the index from the caller's frame).

The hook's own cost, measured at start (main process only, when it patches
torch, < 20 ms): ~200 repetitions of each event kind it emits, run through the
same code as the real events (the same NextWrapper and Fetch) around no-op
work, minus the no-op work alone (for a fetch: torch's own fetch of the same
samples, which the hook's replaces). Recorded as config values of scope 0 in
ns per event: hook_ns_wait (the next() wrapper with its wait span, counters
skipped), hook_ns_fetch (a fetch span without counters, with its collate span:
one C call records both, so hook_ns_collate is 0), hook_ns_sample (a getitem
span), and what reading the counters adds to a sampled wait
(hook_ns_wait_counters) and a sampled fetch with its read and system spans
(hook_ns_fetch_counters). The calibration's own spans are named
"stallprof.calibration.*", which analysis ignores.
"""
import functools
import os
import sys
import time
import weakref

WAIT = "dataloader.wait"
EPOCH = "dataloader.epoch"
KEPT_EPOCH = "dataloader.kept_epoch"
LOOP_END = "dataloader.loop_end"
EPOCH_END = "dataloader.epoch_end"
SHUTDOWN = "dataloader.shutdown"
SAMPLER_FIRST = "dataloader.sampler_first"
FETCH = "dataloader.fetch"
GETITEM = "dataloader.getitem"
COLLATE = "dataloader.collate"
PIN = "dataloader.pin"
WORKER_START = "dataloader.worker_start"
READ_STORAGE = "dataloader.read_storage"
READ_CALLS = "dataloader.read_calls"
SYSTEM_CPU = "dataloader.system_cpu"
GIL_PROBE = "dataloader.gil_probe"
HANDOUT = "dataloader.handout"
CALIBRATION = "stallprof.calibration."
# Repetitions per event kind when the hook times itself at start.
_CALIBRATION_REPS = 200

_TARGET = "torch.utils.data"
_installed = False
_patched = False
_ext = None
_client = "none"
# Scope of the loader this worker process serves (set by _WorkerInit).
_worker_scope = 0
# Thread ident of a pin-memory thread -> scope of its loader.
_pin_scopes = {}
# Each loader's (scope's) start method for workers, "fork", "spawn" or
# "forkserver": a loader without workers asks the handoff timing to start one
# that way too (_request_handoff_timing).
_start_methods = {}
# False once thread_io() said None in this process: per-thread io accounting is
# missing (kernel, permissions), so stop paying for the call.
_thread_io_ok = True
# Loaders this process has named so far, for the fallback name "loader<n>":
# counted per process (a forked child starts again at 1), so the same script
# names its loaders alike on every rank; the scope id is global to the ring.
_loaders_named = {"pid": 0, "count": 0}
# Installed packages (site-packages, dist-packages): code that is not the script's.
_LIBRARY_DIR = "-packages" + os.sep
# Names that say nothing about which loader it is: a wrapper's parameter
# (tqdm's and torchvision's MetricLogger.log_every's `iterable`) or a
# function's generic one; the search goes on to the callers' frames.
_GENERIC_NAMES = {"loader", "dataloader", "data_loader", "dl", "it", "iterator", "iterable", "self", "_", "x", "l"}


def install():
    """Installs the lazy import hook (idempotent). Returns False when there is
    no ring to record into."""
    global _installed, _ext, _client
    if _installed:
        return True
    from . import _backend
    if _backend.ext is None:
        _warn("neither the stallprof extension nor STALLPROF_CLIENT_LIB could be loaded by %s; not recording"
              % sys.executable)
        return False
    if _backend.ext.attach() != _backend.ext.OK:
        return False  # the client already said why, once
    _ext, _client = _backend.ext, _backend.client
    _installed = True
    if _TARGET in sys.modules:
        _patch()
    else:
        sys.meta_path.insert(0, _Finder())
    return True


class _Finder:
    """Patches torch.utils.data right after it finishes executing."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            try:
                spec = finder.find_spec(fullname, path, target)
            except Exception:
                continue  # someone else's finder failing is not ours to report
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original_exec = loader.exec_module

        def exec_module(module):
            # Put the real loader back so nothing downstream sees our wrapper.
            module.__loader__ = loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = loader
            original_exec(module)
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
            _safe_patch()

        spec.loader = _ExecWrapper(loader, exec_module)
        return spec


class _ExecWrapper:
    def __init__(self, loader, exec_module):
        self._loader = loader
        self.exec_module = exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _safe_patch():
    try:
        _patch()
    except Exception as error:  # never break the user's program
        _warn("could not instrument torch.utils.data (%s: %s); DataLoader activity is not recorded"
              % (type(error).__name__, error))


def _warn(message):
    try:
        sys.stderr.write("stallprof: warning: %s\n" % message)
    except Exception:
        pass


# ---- main process: loaders and iterators -----------------------------------

def _loader_name(loader, fallback=True):
    """The variable that refers to the loader in the calling frames:
    train_loader -> "train"; generic names (dl, loader, ...) fall back to
    where the DataLoader was created ("train.py:42"), else "loader<n>", n
    counting the loaders this process first iterated (None without
    `fallback`)."""
    frames = []
    frame = sys._getframe(2)
    while frame is not None and len(frames) < 6:
        frames.append(frame)
        frame = frame.f_back
    # The script's own frames first: a library that iterates the loader for
    # it (tqdm(train_loader) holds it as `iterable`) names it by its own
    # parameter; a framework that builds the loader itself (a Trainer's
    # `train_dataloader`) is the only one to name it.
    library = [f for f in frames if _LIBRARY_DIR in f.f_code.co_filename]
    for frame in [f for f in frames if _LIBRARY_DIR not in f.f_code.co_filename] + library:
        candidates = list(frame.f_locals.items())
        owner = frame.f_locals.get("self")
        if owner is not None and hasattr(owner, "__dict__"):
            try:
                candidates += list(vars(owner).items())
            except TypeError:
                pass
        for var, value in candidates:
            if value is loader and var.lower() not in _GENERIC_NAMES:
                return _readable(var)
    # Module globals of the script as a last resort.
    main = sys.modules.get("__main__")
    for var, value in list(getattr(main, "__dict__", {}).items()):
        if value is loader and var.lower() not in _GENERIC_NAMES:
            return _readable(var)
    if not fallback:
        return None
    site = loader.__dict__.get("_stallprof_site")
    return site if site else "loader%d" % _next_loader_ordinal()


def _creation_site(loader):
    """"file.py:line" of the code that called DataLoader(...): past the
    __init__ of a DataLoader subclass and past torch itself. A loader built
    anew each epoch (`for x in DataLoader(...)`) is built at one site, so
    its objects share a name and the analysis sees one loader."""
    frame = sys._getframe(2)
    while frame is not None and (frame.f_locals.get("self") is loader
                                 or "torch" + os.sep + "utils" + os.sep + "data" in frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    return "%s:%d" % (os.path.basename(frame.f_code.co_filename), frame.f_lineno)


def _next_loader_ordinal():
    pid = os.getpid()
    if _loaders_named["pid"] != pid:
        _loaders_named["pid"] = pid
        _loaders_named["count"] = 0
    _loaders_named["count"] += 1
    return _loaders_named["count"]


def _readable(var):
    name = var.lstrip("_")
    lower = name.lower()
    for suffix in ("_dataloader", "_data_loader", "_loader", "dataloader", "loader", "_dl"):
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)].rstrip("_") or name
    for prefix in ("dataloader_", "data_loader_", "loader_", "dl_"):  # data_loader_test -> test
        if lower.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    return name or var


def resident_bytes():
    """This process's resident bytes (/proc/self/statm); stallprof.calibrate_ipc uses it too."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _rss_line():
    """"rss_bytes N\n": this process's resident bytes, for the handoff timing to
    time a fork at about the job's size; "" where /proc cannot tell."""
    try:
        return "rss_bytes %d\n" % resident_bytes()
    except (OSError, ValueError, IndexError):
        return ""


def _cuda_available():
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _index_sampler(loader):
    """The sampler whose indices the loader's batches hold."""
    sampler = getattr(loader, "sampler", None)
    # With batch_sampler= the loader's own sampler is an unused default
    # SequentialSampler: the order is the batch sampler's (its .sampler when
    # it wraps one, as BatchSampler(RandomSampler(ds), ...) does).
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is not None and getattr(batch_sampler, "sampler", None) is not sampler:
        sampler = getattr(batch_sampler, "sampler", batch_sampler)
    # With batch_size=None and a BatchSampler as sampler= the dataset takes
    # whole batches of indices: the order, and the samples, are the wrapped
    # sampler's (the BatchSampler's length counts batches).
    if batch_sampler is None and getattr(loader, "batch_size", 0) is None:
        import torch.utils.data as tud
        if isinstance(sampler, tud.BatchSampler):
            sampler = sampler.sampler
    # A wrapper of a sampler (InfiniteDataLoader's _RepeatSampler around the
    # BatchSampler): the order is the one inside.
    for _ in range(4):
        inner = getattr(sampler, "sampler", None)
        if inner is None or inner is sampler or not hasattr(inner, "__iter__"):
            break
        sampler = inner
    return sampler


def _sampler_kind(loader):
    import torch.utils.data as tud
    sampler = _index_sampler(loader)
    if isinstance(sampler, tud.RandomSampler):
        return "random"
    if isinstance(sampler, tud.SequentialSampler):
        return "sequential"
    if isinstance(sampler, tud.distributed.DistributedSampler) and not sampler.shuffle:
        return "sequential"  # its rank's share, in order
    return type(sampler).__name__ if sampler is not None else "none"


def _as_paths(items):
    """The paths in a sequence of paths or of (path, label, ...) items."""
    try:
        paths = [item[0] if isinstance(item, (tuple, list)) else item for item in items]
    except (TypeError, IndexError):
        return None
    return [p for p in paths if isinstance(p, (str, bytes, os.PathLike))]


def _listed_files(dataset):
    """A list or tuple attribute of the dataset's own with one item per sample
    whose items are paths of existing files (checked at the first, middle and
    last): the files of a custom dataset under any attribute name
    (image_filenames, img_paths, file_list). None when there is none."""
    try:
        length = len(dataset)
        attrs = vars(dataset)
    except Exception:
        return None
    if not length:
        return None
    for value in attrs.values():
        if not isinstance(value, (list, tuple)) or len(value) != length:
            continue
        paths = _as_paths(value)
        if paths and len(paths) == length and all(os.path.isfile(paths[i]) for i in {0, length // 2, length - 1}):
            return paths
    return None


def _dataset_files(dataset, depth=0):
    """Paths of a file-backed dataset (ImageFolder-like .samples/.imgs, a
    files/paths attribute, or any list of one existing file per sample),
    through the wrappers torch builds around one: a Subset (random_split)
    has its indices' files, a ConcatDataset its parts' files when every part
    has them. None when there are none."""
    for attr in ("samples", "imgs", "files", "paths"):
        items = getattr(dataset, attr, None)
        if items is None or isinstance(items, (str, bytes)):
            continue
        paths = _as_paths(items)
        if paths:
            return paths
    paths = _listed_files(dataset)
    if paths:
        return paths
    if depth >= 8:
        return None
    inner, indices = getattr(dataset, "dataset", None), getattr(dataset, "indices", None)
    if inner is not None and indices is not None:
        paths = _dataset_files(inner, depth + 1)
        try:
            if hasattr(indices, "tolist"):  # a tensor or array: plain ints index a list fastest
                indices = indices.tolist()
            return [paths[i] for i in indices] if paths else None
        except (IndexError, TypeError):
            return None
    parts = getattr(dataset, "datasets", None)
    if isinstance(parts, (list, tuple)) and parts:
        paths = []
        for part in parts:
            part_paths = _dataset_files(part, depth + 1)
            if not part_paths:
                return None  # a part without files: the size is not the files'
            paths += part_paths
        return paths
    return None


def _files_bytes(paths):
    """The summed sizes of the files at `paths` (one gone meanwhile counts 0)."""
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_size
        except OSError:
            pass
    return total


# The signatures of the single-file containers a dataset names by path and
# reads its samples from (a path to anything else, a label file, names no
# dataset), by offset: HDF5's superblock, a .npy header, a zip (.npz,
# torch.save), a POSIX tar (WebDataset-style shards).
_CONTAINER_MAGIC = ((0, b"\x89HDF\r\n\x1a\n", "HDF5"), (0, b"\x93NUMPY", "numpy"), (0, b"PK\x03\x04", "zip"),
                    (257, b"ustar", "tar"))


def _container_kind(path):
    """The container kind of the regular file at `path`, else None."""
    try:
        if len(path) > 4096 or not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            head = f.read(262)
    except (OSError, ValueError, TypeError):
        return None
    for offset, magic, kind in _CONTAINER_MAGIC:
        if head[offset:offset + len(magic)] == magic:
            return kind
    return None


# The most paths of a long list of containers (shards) the walk sizes.
_MOST_SHARDS = 100000


def _add_held(found, kind, path):
    """Adds the file at `path` to `found[kind]` by its real path."""
    found.setdefault(kind, set()).add(os.path.realpath(path))


def _held_files(obj, found, seen, depth=0):
    """The files a dataset reads its samples from, by kind, reachable from
    `obj` through attributes, short lists, tuples and dicts, and arrays'
    bases: numpy memmaps (np.load(mmap_mode=...), np.memmap) and LMDB
    environments (lmdb.open), read through page faults (no read calls, and no
    device reads when the page cache holds them); h5py files, groups and
    datasets; and paths to single-file containers (HDF5, numpy, zip, tar) that a
    dataset opening its file in each __getitem__ holds as a string, whose
    read calls re-read the container's metadata each time (an HDF5 file of
    51 MiB was estimated at 786 MiB from them). `found` maps a kind to a set
    of real paths (one file reached two ways, a path and a memmap of it,
    counts once)."""
    if depth > 4 or obj is None or isinstance(obj, (bytes, int, float, bool, type)):
        return
    if isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        kind = _container_kind(path) if isinstance(path, str) else None
        if kind:
            _add_held(found, kind, path)
        return
    if id(obj) in seen:
        return
    seen.add(id(obj))
    lmdb = sys.modules.get("lmdb")
    if lmdb is not None and isinstance(obj, getattr(lmdb, "Environment", ())):
        try:
            path = obj.path()
            _add_held(found, "LMDB", os.path.join(path, "data.mdb") if obj.flags().get("subdir") else path)
        except Exception:
            pass  # a closed environment
        return
    h5py = sys.modules.get("h5py")
    if h5py is not None and isinstance(obj, (getattr(h5py, "Group", ()), getattr(h5py, "Dataset", ()))):
        try:
            _add_held(found, "HDF5", obj.file.filename)
        except Exception:
            pass  # a closed file
        return
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        base = obj
        for _ in range(4):  # views of a memmap: np.asarray(m), m[i]
            if isinstance(base, np.memmap):
                name = getattr(base, "filename", None)
                if name:
                    _add_held(found, "numpy memmap", os.fspath(name))
                return
            base = getattr(base, "base", None)
            if base is None or not isinstance(base, np.ndarray):
                return
        return
    if isinstance(obj, (list, tuple)):
        items = obj if len(obj) <= 64 else ()
        if not items and len(obj) <= _MOST_SHARDS and isinstance(obj[0], (str, os.PathLike)):
            # A long list of paths: shards when its first is a container,
            # all of one kind (a list of a sample's files each is the
            # listed-files case, _dataset_files).
            kind = _container_kind(os.fspath(obj[0]))
            if kind:
                for item in obj:
                    if isinstance(item, (str, os.PathLike)):
                        _add_held(found, kind, item)
            return
    elif isinstance(obj, dict):
        items = list(obj.values()) if len(obj) <= 64 else ()
    else:
        try:
            items = list(vars(obj).values())
        except TypeError:
            return
    for item in items:
        _held_files(item, found, seen, depth + 1)


def _record_held_files(dataset, scope):
    """Config "held_files", "held_bytes" and "held_kinds" for the loader
    `scope`: the files its dataset reads from as found after a fetch (in the
    process that fetches: a dataset opening them lazily has them in its
    workers only), sized from their files. Nothing when there are none."""
    found = {}
    _held_files(dataset, found, set())
    files = set().union(*found.values()) if found else set()
    total = _files_bytes(files)
    if total > 0:
        # The fetching process's parent: a worker that exits before the
        # launcher reads its /proc entry leaves the trace without it.
        _ext.config(scope, "held_parent", os.getppid())
        _ext.config(scope, "held_files", len(files))
        _ext.config(scope, "held_bytes", total)
        _ext.config(scope, "held_kinds", ", ".join(sorted(found)))


def _allocator():
    """A preloaded caching malloc by its library's name, else "glibc fixed
    thresholds" where the environment fixes glibc's mmap threshold at its
    largest, 32 MiB on 64-bit (every smaller block then reuses the heap; a
    larger value glibc rejects, keeping its dynamic thresholds, and a smaller
    one maps the blocks above it afresh), else "glibc"."""
    for lib in os.environ.get("LD_PRELOAD", "").replace(":", " ").split():
        name = os.path.basename(lib)
        if any(k in name for k in ("tcmalloc", "jemalloc", "mimalloc")):
            return name
    values = [os.environ.get("MALLOC_MMAP_THRESHOLD_", "")]  # the older alias, read first
    for tunable in os.environ.get("GLIBC_TUNABLES", "").split(":"):
        key, _, value = tunable.partition("=")
        if key == "glibc.malloc.mmap_threshold":
            values.append(value)
    try:
        if values[-1] and int(values[-1], 0) == 32 << 20:
            return "glibc fixed thresholds"
    except ValueError:
        pass
    return "glibc"


def _watch_shuffle_epoch(loader, scope):
    """A shuffling sampler with set_epoch (DistributedSampler) draws its
    permutation from its seed and epoch: where its epoch did not move from
    one iterator to the next (set_epoch never called), every epoch sees the
    same order (PyTorch's docs warn of it). Recorded once, as the key
    "sampler_order_repeats": the order is then a cycle, which a page
    cache smaller than the dataset cannot hold any of."""
    sampler = _index_sampler(loader)
    if not getattr(sampler, "shuffle", False) or not hasattr(sampler, "set_epoch"):
        return
    epoch = getattr(sampler, "epoch", None)
    state = loader.__dict__
    last = state.get("_stallprof_sampler_epoch")
    state["_stallprof_sampler_epoch"] = epoch
    if last is not None and epoch == last and not state.get("_stallprof_order_told"):
        state["_stallprof_order_told"] = True
        try:
            _ext.config(scope, "sampler_order_repeats", 1)
        except Exception:
            pass


def _record_config(loader, scope, name):
    cfg = _ext.config
    cfg(scope, "name", name)
    cfg(scope, "client", _client)
    cfg(scope, "batch_size", loader.batch_size if loader.batch_size is not None else 0)
    cfg(scope, "num_workers", loader.num_workers)
    prefetch = getattr(loader, "prefetch_factor", None)
    cfg(scope, "prefetch_factor", prefetch if isinstance(prefetch, int) else 0)
    # What the iterator will do: torch pins only where CUDA is available
    # (pin_memory=True on a CPU-only machine warns and pins nothing).
    cfg(scope, "pin_memory", bool(loader.pin_memory) and _cuda_available())
    if loader.pin_memory and not _cuda_available():
        cfg(scope, "pin_memory_unavailable", True)  # asked for, and nothing to pin for
    cfg(scope, "persistent_workers", bool(loader.persistent_workers))
    # The user's worker_init_fn, by name: each worker runs it at its start,
    # which a start-up timed without the loader's workers does not include.
    init = loader.worker_init_fn
    if isinstance(init, _WorkerInit):
        init = init.inner
    if init is not None:
        cfg(scope, "worker_init_fn", getattr(init, "__qualname__", None) or type(init).__name__)
    cfg(scope, "sampler", _sampler_kind(loader))
    cfg(scope, "drop_last", bool(loader.drop_last))
    context = loader.multiprocessing_context
    if context is None:
        import multiprocessing
        method = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_context().get_start_method()
    else:
        method = context.get_start_method()
    cfg(scope, "multiprocessing_context", method)
    _start_methods[scope] = method
    # How workers hand tensors over: "file_descriptor" (Linux's default) costs
    # the main process a connection to the worker per tensor (the handoff advice).
    try:
        cfg(scope, "sharing_strategy", sys.modules["torch"].multiprocessing.get_sharing_strategy())
    except Exception:
        pass
    # Which malloc the process runs, for the page-fault advice (a user who set
    # glibc's thresholds or preloaded a caching allocator already).
    cfg(scope, "allocator", _allocator())
    # The step's intra-op threads: a parallel step beside workers that want
    # the same cores slows far more than its share (docs/model.md).
    try:
        cfg(scope, "intra_op_threads", sys.modules["torch"].get_num_threads())
    except Exception:
        pass
    # The rank torch.distributed gave this process, when it was initialized
    # before the loader's first iteration: rank identity without RANK in the
    # environment (mp.spawn + init_process_group(rank=...)). Only read when the
    # script imported torch.distributed itself.
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            cfg(scope, "rank", dist.get_rank())
    except Exception:
        pass
    dataset = loader.dataset
    try:
        cfg(scope, "dataset_len", len(dataset))
    except Exception:
        pass
    # The samples an epoch holds: a rank's share under a DistributedSampler
    # (its partial last batch is told by it). A batch sampler of its own
    # counts batches, not samples: not recorded then.
    sampler = _index_sampler(loader)
    if sampler is not None and sampler is not getattr(loader, "batch_sampler", None):
        try:
            cfg(scope, "sampler_len", len(sampler))
        except Exception:
            pass
    paths = _dataset_files(dataset)
    if paths:
        cfg(scope, "dataset_files", len(paths))
        cfg(scope, "dataset_bytes", _files_bytes(paths))


def _tensor_bytes(batch, out, depth=0):
    """The byte sizes of the tensors in a collated batch (tuples, lists and
    dicts walked as torch's collate builds them)."""
    import torch
    if isinstance(batch, torch.Tensor):
        out.append(batch.element_size() * batch.numel())
    elif depth < 8 and isinstance(batch, (tuple, list)):
        for item in batch:
            _tensor_bytes(item, out, depth + 1)
    elif depth < 8 and isinstance(batch, dict):
        for item in batch.values():
            _tensor_bytes(item, out, depth + 1)
    return out


def _leading_dimension(batch, depth=0):
    """Samples in a batch as its producer built it: the first tensor's (or
    array's) leading dimension, found through tuples, lists and dicts; a list
    of plain items (strings) counts its items; 0 = no telling."""
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) > 0 else 0
    if depth >= 8:
        return 0
    if isinstance(batch, dict):
        return _leading_dimension(next(iter(batch.values())), depth + 1) if batch else 0
    if isinstance(batch, (tuple, list)):
        if not batch:
            return 0
        first = batch[0]
        if hasattr(first, "shape") or isinstance(first, (tuple, list, dict)):
            return _leading_dimension(first, depth + 1)
        return len(batch)
    return 0


def _measure_first_batch(iterator, scope, samples, tensors):
    """The first delivered batch, in the main process whatever the workers
    (the iterator's _next_data is shadowed for that one call): with
    `samples`, for a loader without automatic batching (batch_size=None: each
    dataset item is a whole batch, as a stream of pre-batched shards yields),
    the samples per batch as config (batch_size, batch_size_from), its leading
    dimension; with `tensors`, for a loader with workers, its tensors as
    config (batch_tensors, batch_bytes): the main process receives each
    tensor apart (the handoff advice), and the bytes are what a prefetched
    batch holds (recommend's memory); and a request for `stallprof run` to
    time after the job what the worker's collate into shared memory and the
    step's read and free of the received batch cost beyond the same batch in
    the heap (_request_handoff_timing): what a loop without workers would not
    pay, which this profile cannot take apart from its fetches and steps,
    nor the iterator's own code in a next() without workers from receiving
    (the request carries the batch size for it)."""
    original = iterator._next_data

    def first_batch():
        try:
            data = original()
        finally:
            iterator.__dict__.pop("_next_data", None)  # back to the class's method
        try:
            if samples:
                n = _leading_dimension(data)
                if n > 0:
                    _ext.config(scope, "batch_size", n)
                    _ext.config(scope, "batch_size_from", "first batch")
            if tensors:
                sizes = _tensor_bytes(data, [])
                _ext.config(scope, "batch_tensors", len(sizes))
                _ext.config(scope, "batch_bytes", sum(sizes))
                _request_handoff_timing(scope, sizes, True, batch_size=_indices_per_batch(iterator, data))
        except Exception:
            pass  # optional: analysis counts batches as samples, the advice goes without the count
        return data

    iterator._next_data = first_batch


def _indices_per_batch(iterator, batch):
    """The indices the sampler draws a batch: 0 without automatic batching
    (batch_size=None: one), the batch sampler's batch_size, else the first
    batch's leading dimension; None where unknown."""
    if not getattr(iterator, "_auto_collation", True):
        return 0
    size = getattr(getattr(iterator, "_index_sampler", None), "batch_size", None)
    if isinstance(size, int) and size > 0:
        return size
    return _leading_dimension(batch) or None


def _request_handoff_timing(scope, sizes, workers, pace_s=0, batch_size=None):
    """Asks `stallprof run` (STALLPROF_IPC_DIR) to time after the job a worker
    handing over a batch of these tensor sizes (stallprof.calibrate_ipc);
    "workers" says the loader had them, so only the shared-memory costs are
    wanted, and with `batch_size` the iterator's own code in a next() without
    workers. Rewritten when the pace is known; returns the request's path, or
    None where no timing can be asked for."""
    folder = os.environ.get("STALLPROF_IPC_DIR")
    if not folder or not 0 < len(sizes) <= 256 or not os.path.isabs(sys.executable or ""):
        return None
    path = os.path.join(folder, "%d-%d" % (os.getpid(), scope))
    with open(path + ".tmp", "w") as f:
        f.write("%d %d\n%s\n%s\n" % (os.getpid(), scope, sys.executable, " ".join(map(str, sizes))) +
                ("pace_s %.6f\n" % pace_s if pace_s > 0 else "") + ("workers 1\n" if workers else _rss_line()) +
                ("batch_size %d\n" % batch_size if batch_size is not None else "") +
                ("start_method %s\n" % _start_methods[scope] if not workers and scope in _start_methods else ""))
    os.rename(path + ".tmp", path + ".req")
    return path


# Batches whose collate calls _watch_first_batch times: the pace is the median
# gap between them (the first batch, often slow, only starts the clock).
_PACE_BATCHES = 9


def _watch_first_batch(fetcher, scope):
    """For a loader without workers: its first batch's tensors, as config
    (batch_tensors, batch_bytes), and a request for `stallprof run` to time
    after the job what handing such a batch from a worker to the main process
    costs (stallprof.calibrate_ipc; STALLPROF_IPC_DIR), which no profile
    without workers can see. The request is rewritten with the pace of the
    loop (the median time between the first batches) once it is known: a
    thread woken for each batch costs more than one kept busy, so the timing
    paces its worker the same way. The collate function is wrapped for the
    first _PACE_BATCHES calls."""
    original = fetcher.collate_fn
    request = {}  # path, sizes
    times = []

    def watched(data):
        batch = original(data)
        times.append(time.monotonic())
        try:
            if len(times) == 1:
                sizes = _tensor_bytes(batch, [])
                _ext.config(scope, "batch_tensors", len(sizes))
                _ext.config(scope, "batch_bytes", sum(sizes))
                request["sizes"] = sizes
                request["path"] = _request_handoff_timing(scope, sizes, False)
            elif len(times) == _PACE_BATCHES and request.get("path"):
                gaps = sorted(b - a for a, b in zip(times, times[1:]))
                _request_handoff_timing(scope, request["sizes"], False, gaps[len(gaps) // 2])
        except Exception:
            pass  # optional: whatif says the handoff was not timed
        finally:
            if len(times) >= _PACE_BATCHES or not request.get("path"):
                fetcher.collate_fn = original
        if len(times) == 1:
            try:
                _record_held_files(fetcher.dataset, scope)
            except Exception:
                pass  # optional: the dataset's size is then estimated from its reads
        return batch

    fetcher.collate_fn = watched


class _OwnIterEpoch:
    """What a DataLoader subclass's own __iter__ returned, when it is not an
    iterator torch made (a generator of the subclass). At the first next()
    it tells which of two kinds it is.

    No iterator made (the loader's count of them did not move), and its
    latest iterator returned the batch (not batches the subclass cached): YOLOv5's
    InfiniteDataLoader, timm's MultiEpochsDataLoader, a generator drawing
    len(self) batches from one iterator made in the constructor over a
    sampler that repeats forever, so the workers outlive the epochs. The
    hook would see one endless epoch, each epoch's last step running on
    through validation to the next epoch's first batch. It records a
    kept_epoch span at iter() (arg: the loop's count of its own epochs; the
    analysis takes it as an epoch of the iterator made before), the next()
    that raises StopIteration as the epoch_end span, or a shutdown span
    where the loop dropped the epoch early.

    An iterator made (the generator iterates super().__iter__()): recorded
    as ever; this only adds a loop_end span at the next() that raises
    StopIteration. A generator reading a batch ahead (accelerate's
    DataLoaderShard) meets its iterator's StopIteration inside the next()
    that returns the last batch: the loop's end comes one step later, and
    the last batch's step runs to it."""

    __slots__ = ("_inner", "_loader", "_called", "_made", "_yielded", "_scope", "_state", "__weakref__")

    def __init__(self, loader, inner, called, made):
        self._inner = inner
        self._loader = loader
        self._called = called
        self._made = made
        self._yielded = _batches_yielded(loader)
        self._scope = 0
        self._state = 0  # 0: first next() to come, 1: a kept iterator's epoch, 2: an iterator made, 3: ended

    def __iter__(self):
        return self

    def __next__(self):
        if self._state == 0:
            return self._first()
        try:
            return next(self._inner)
        except StopIteration:
            self._ended(False)
            raise

    def _first(self):
        # A subclass's generator over its parent's own __iter__ (both wrapped)
        # calls it in here: that one is left to this epoch, not recorded twice.
        d = self._loader.__dict__
        d["_stallprof_first_next"] = True
        try:
            data = next(self._inner)
        except StopIteration:
            self._decide()
            self._ended(False)
            raise
        finally:
            d["_stallprof_first_next"] = False
        self._decide()
        return data

    def _decide(self):
        state = self._loader.__dict__.get("_stallprof")
        self._state = 2
        if state is None or _ext is None:
            return
        self._scope = state[0]
        # An iterator made, or none drawn from (batches the subclass cached):
        # not an epoch of a kept iterator.
        if state[1] != self._made or _batches_yielded(self._loader) <= self._yielded:
            return
        epochs = self._loader.__dict__.get("_stallprof_kept_epochs", 0)
        self._loader.__dict__["_stallprof_kept_epochs"] = epochs + 1
        try:
            if epochs == 0:
                _ext.config(self._scope, "iterator_kept_by", type(self._loader).__name__)
                # Its iterator, made in the constructor, was named before the
                # loop's variable referred to it: the loop names it now.
                name = _loader_name(self._loader, fallback=False)
                if name is not None:
                    _ext.config(self._scope, "name", name)
            _ext.span(_ext.name(KEPT_EPOCH), self._called, 0, epochs, self._scope)
            self._state = 1
        except Exception:
            pass

    def _ended(self, left):
        kept = self._state == 1
        if self._state == 3 or self._scope == 0 or (left and not kept):
            return
        self._state = 3
        try:
            name = SHUTDOWN if left else EPOCH_END if kept else LOOP_END
            _ext.span(_ext.name(name), _ext.now(), 0, 0, self._scope)
        except Exception:
            pass

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __len__(self):  # a torch iterator has one; special methods skip __getattr__
        return len(self._inner)

    def __del__(self):
        self._ended(True)


def _batches_yielded(loader):
    """How many batches the loader's latest iterator has returned (-1: none)."""
    ref = loader.__dict__.get("_stallprof_iterator")
    iterator = ref() if ref is not None else None
    return getattr(iterator, "_num_yielded", -1) if iterator is not None else -1


def _wrap_own_iter(cls, base_iter):
    """Wraps the __iter__ of a DataLoader subclass that defines its own (once
    per class): its iterations become _OwnIterEpoch."""
    own = cls.__iter__
    if own is base_iter or getattr(own, "_stallprof_own_iter", False):
        return

    from torch.utils.data.dataloader import _BaseDataLoaderIter

    @functools.wraps(own)
    def __iter__(self):
        if self.__dict__.get("_stallprof_first_next"):  # called by a subclass's own __iter__: it records the epoch
            return own(self)
        state = self.__dict__.get("_stallprof")
        made = state[1] if state is not None else -1  # the loader's iterators so far
        called = _ext.now()
        inner = own(self)
        if isinstance(inner, _BaseDataLoaderIter):  # an iterator made (super().__iter__()): recorded as ever
            return inner
        return _OwnIterEpoch(self, inner, called, made)

    __iter__._stallprof_own_iter = True
    cls.__iter__ = __iter__


class _WorkerInit:
    """Wraps a DataLoader's worker_init_fn so each worker (fork or spawn)
    learns its loader id and announces itself. Picklable: top-level class."""

    def __init__(self, scope, inner):
        self.scope = scope
        self.inner = inner

    def __call__(self, worker_id):
        global _worker_scope
        _worker_scope = self.scope
        try:
            if _ext is not None:
                if hasattr(_ext, "set_worker_scope"):
                    _ext.set_worker_scope(self.scope)
                _ext.instant(WORKER_START, worker_id, self.scope)
        except Exception:
            pass
        if self.inner is not None:
            self.inner(worker_id)


def _patch():
    global _patched, _original_worker_loop
    if _patched:
        return
    _patched = True
    import torch.utils.data.dataloader as dl
    from torch.utils.data._utils import fetch as fetch_mod
    from torch.utils.data._utils import pin_memory as pin_mod

    ext = _ext
    span_since = ext.span_since
    now = ext.now
    wait_id, epoch_id, epoch_end_id = ext.name(WAIT), ext.name(EPOCH), ext.name(EPOCH_END)
    fetch_id, getitem_id, collate_id, pin_id = ext.name(FETCH), ext.name(GETITEM), ext.name(COLLATE), ext.name(PIN)
    read_storage_id, read_calls_id = ext.name(READ_STORAGE), ext.name(READ_CALLS)
    system_cpu_id = ext.name(SYSTEM_CPU)
    SAMPLED = ext.COUNTERS_SAMPLED

    # -- DataLoader.__init__: where it was created (the name of last resort) ----
    original_init = dl.DataLoader.__init__

    @functools.wraps(original_init)  # libraries read its signature (Lightning re-creates loaders)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        try:
            self.__dict__["_stallprof_site"] = _creation_site(self)
            if type(self) is not dl.DataLoader:
                _wrap_own_iter(type(self), __iter__)
        except Exception:
            pass

    dl.DataLoader.__init__ = __init__

    # -- DataLoader.__iter__: loader id, config, epochs, worker scope -----------
    original_iter = dl.DataLoader.__iter__

    def __iter__(self):
        start = now()
        state = self.__dict__.get("_stallprof")
        if state is None:
            scope = ext.new_scope()
            state = self.__dict__["_stallprof"] = [scope, 0]
            try:
                _record_config(self, scope, _loader_name(self))
            except Exception as error:
                _warn("could not record the DataLoader configuration (%s)" % error)
        scope = state[0]
        epoch = state[1]
        state[1] += 1
        inner_init = self.worker_init_fn
        wrap = self.num_workers > 0 and not isinstance(inner_init, _WorkerInit)
        if wrap:
            self.worker_init_fn = _WorkerInit(scope, inner_init)
        try:
            iterator = original_iter(self)
        finally:
            if wrap:
                self.worker_init_fn = inner_init
        iterator._stallprof_scope = scope
        self.__dict__["_stallprof_iterator"] = weakref.ref(iterator)
        fetcher = getattr(iterator, "_dataset_fetcher", None)
        if fetcher is not None:
            fetcher._stallprof_scope = scope
            if epoch == 0 and self.num_workers == 0 and hasattr(fetcher, "collate_fn"):
                _watch_first_batch(fetcher, scope)
        samples = self.batch_size is None and self.batch_sampler is None
        if epoch == 0 and (samples or self.num_workers > 0) and hasattr(iterator, "_next_data"):
            _measure_first_batch(iterator, scope, samples, self.num_workers > 0)
        pin_thread = getattr(iterator, "_pin_memory_thread", None)
        if pin_thread is not None and pin_thread.ident is not None:
            _pin_scopes[pin_thread.ident] = scope
        _watch_shuffle_epoch(self, scope)
        span_since(epoch_id, start, epoch, scope)
        return iterator

    dl.DataLoader.__iter__ = __iter__

    # -- workers shut down: an iterator left before its StopIteration -----------
    # (for ... break, itertools.islice) shuts its workers down when it is
    # deleted; the one that ran to its end did so inside the epoch_end span.
    shutdown_id = ext.name(SHUTDOWN)
    original_shutdown = dl._MultiProcessingDataLoaderIter._shutdown_workers

    def _exiting():
        """An iterator deleted now was kept to the interpreter's exit (a
        persistent_workers loader's, one held in a variable), not left by a
        loop: its deletion ends no step. Recorded, it ended the last one
        where the exit came within the analysis's bound (3 x the median
        compute): a loop of 20 ms steps read its last step 51 ms long, the
        print and the exit in it, and the whole run 5.4% slow."""
        return sys.is_finalizing() or getattr(dl._utils, "python_exit_status", False) is True

    def _shutdown_workers(self):
        scope = getattr(self, "_stallprof_scope", None)
        if scope is None or getattr(self, "_shutdown", True) or _exiting():  # nothing left to shut down, or the exit's
            return original_shutdown(self)
        start = now()
        try:
            return original_shutdown(self)
        finally:
            span_since(shutdown_id, start, 0, scope)

    dl._MultiProcessingDataLoaderIter._shutdown_workers = _shutdown_workers

    # Without workers nothing shuts down, but the iterator is deleted as the
    # loop leaves it (CPython frees it at once): an instant shutdown span
    # there ends the epoch's last step as the workers' shutdown does (a
    # `for ... break` epoch's last step is otherwise unseen). Recorded after a
    # StopIteration too, where the epoch_end span already ended the epoch and
    # the analysis takes that one.
    single = dl._SingleProcessDataLoaderIter
    if not hasattr(single, "__del__"):  # a torch that deletes them itself keeps its own
        def _single_del(self):
            try:
                scope = self.__dict__.get("_stallprof_scope")
                if scope and not _exiting():
                    span_since(shutdown_id, now(), 0, scope)
            except Exception:  # a finalizer never raises (at exit, names may be gone)
                pass

        single.__del__ = _single_del

    # -- the sampler's first draw of each epoch ---------------------------------
    # iter() on the default BatchSampler is a generator, so the sampler's own
    # per-epoch work (RandomSampler's randperm, DistributedSampler's shuffle,
    # a sort by length) runs in the first _next_index() after the iterator's
    # __init__ or _reset: in the first next() without workers, in the
    # iterator's creation with workers (_reset primes them). One span for that
    # call and none for the rest: the instance attribute removes itself, so
    # later batches pay nothing. It holds the iterator weakly: a cycle would
    # keep an abandoned iterator, and its workers, alive until the next GC.
    sampler_first_id = ext.name(SAMPLER_FIRST)
    original_base_init = dl._BaseDataLoaderIter.__init__
    original_base_reset = dl._BaseDataLoaderIter._reset

    class _FirstDraw:
        __slots__ = ("iterator", "scope")

        def __init__(self, iterator, scope):
            self.iterator = weakref.ref(iterator)
            self.scope = scope

        def __call__(self):
            iterator = self.iterator()
            iterator.__dict__.pop("_next_index", None)
            start = now()
            try:
                return iterator._next_index()
            finally:
                span_since(sampler_first_id, start, 0, self.scope)

    def _time_first_draw(iterator, loader):
        state = getattr(loader, "__dict__", {}).get("_stallprof")
        if state is not None:
            iterator._next_index = _FirstDraw(iterator, state[0])

    def base_init(self, *args, **kwargs):
        original_base_init(self, *args, **kwargs)
        _time_first_draw(self, args[0] if args else kwargs.get("loader"))

    def base_reset(self, *args, **kwargs):
        original_base_reset(self, *args, **kwargs)
        _time_first_draw(self, args[0] if args else kwargs.get("loader"))

    dl._BaseDataLoaderIter.__init__ = base_init
    dl._BaseDataLoaderIter._reset = base_reset

    # -- _BaseDataLoaderIter.__next__ and the fetchers' fetch() --------------------
    # The extension's NextWrapper and Fetch do the per-batch work in one C call
    # each; the ctypes fallback runs the same logic in Python (_python_next,
    # _python_fetch).
    make_next = getattr(ext, "NextWrapper", _python_next)
    make_fetch = getattr(ext, "Fetch", _python_fetch)
    dl._BaseDataLoaderIter.__next__ = make_next(dl._BaseDataLoaderIter.__next__, wait_id, epoch_end_id, SAMPLED,
                                                ext.name(HANDOUT))
    fetch_names = (fetch_id, getitem_id, collate_id, read_storage_id, read_calls_id, system_cpu_id)
    original_map_fetch = fetch_mod._MapDatasetFetcher.fetch
    fetch_mod._MapDatasetFetcher.fetch = make_fetch(False, fetch_names)
    fetch_mod._IterableDatasetFetcher.fetch = make_fetch(True, fetch_names)
    if hasattr(ext, "set_batch_index"):
        # Workers: the C fetch learns each batch's index from the index queue.
        from torch.utils.data._utils import worker as worker_mod
        if worker_mod._worker_loop is not _worker_loop:
            _original_worker_loop = worker_mod._worker_loop
            worker_mod._worker_loop = _worker_loop

    # -- pin-memory thread -----------------------------------------------------------
    original_pin = pin_mod.pin_memory

    def pin_memory(data, device=None):
        import threading
        scope = _pin_scopes.get(threading.get_ident())
        if scope is None:
            return original_pin(data, device)
        start = now()
        try:
            idx = sys._getframe(1).f_locals.get("idx", 0)
        except Exception:
            idx = 0
        result = original_pin(data, device)
        span_since(pin_id, start, idx if type(idx) is int else 0, scope)
        return result

    pin_mod.pin_memory = pin_memory

    # -- the exception that ends the process, where it came from ------------------
    _watch_uncaught()

    # -- the hook's own cost, timed once in the main process ----------------------
    try:
        import multiprocessing
        if multiprocessing.parent_process() is None:
            _calibrate(ext, make_next, make_fetch, original_map_fetch)
    except Exception as error:  # the figures are optional; the recording is not
        _warn("could not time the hook's own cost (%s); analysis takes it as 0" % error)

    # -- whether main-process fetches (num_workers=0) hold the GIL -----------------
    # (the extension's probe thread; see _stallprof.c "the GIL probe"). After
    # the calibration, so its fetches are not probed.
    if hasattr(ext, "start_gil_probe"):
        ext.start_gil_probe(ext.name(GIL_PROBE), sys.getswitchinterval())


# ---- the exception that ends a process --------------------------------------------
# A job that fails in its data pipeline (a worker killed by a signal, an
# exception raised in __getitem__ and re-raised by torch in the main process)
# ends with "exited with code 1"; the trace keeps what ended it, and the loader
# and batch when the traceback passes through a loader's iterator.
# The main thread's: at exit, from sys.last_value (the interpreter sets it
# before it prints an uncaught exception, whatever sys.excepthook is), by the
# extension's record_uncaught in C, where no Python signal handler can run
# (torch's SIGCHLD handler raises at each worker's exit wherever the main
# thread runs Python code: inside a Python excepthook it lost the record and
# printed "Error in sys.excepthook"). Other threads' (a prefetch thread's):
# threading.excepthook, in Python (signal handlers run in the main thread only).

@functools.lru_cache(maxsize=None)
def _library_dirs():
    """Where code that is not the program's lives, besides packages (whose
    paths hold "-packages/"): the standard library and this hook."""
    import sysconfig
    dirs = {sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib")} | {os.path.dirname(__file__)}
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs if d))


def _error_summary(exc_type, exc, tb, library_dirs):
    """One line, as record_uncaught in _stallprof.c makes it: the type and
    the message's first line, and for a message that holds another
    process's traceback (torch's re-raise of a worker's exception, "Caught
    ValueError in DataLoader worker process 0." with its "Original
    Traceback"; torch.multiprocessing.spawn's ProcessRaisedException) its
    last line and last frame ("at file.py:LINE in FUNC"); else the innermost
    frame of the program's own code in the traceback."""
    message = str(exc)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    text = "%s: %s" % (getattr(exc_type, "__name__", "Exception"), lines[0]) if lines else exc_type.__name__
    if len(lines) > 1 and "Traceback (most recent call last)" in message:
        import re
        frames = re.findall(r'File "([^"]*)", line (\d+), in ([^\r\n]*)', message)
        text += " (%s, at %s:%s in %s)" % ((lines[-1], os.path.basename(frames[-1][0])) + frames[-1][1:]) if frames \
            else " (%s)" % lines[-1]
    elif "Traceback (most recent call last)" not in message:
        site = None
        while tb is not None:
            code = tb.tb_frame.f_code
            path = code.co_filename
            if "-packages/" not in path and not path.startswith("<") and not path.startswith(library_dirs):
                site = "%s:%d in %s" % (os.path.basename(path), tb.tb_lineno, code.co_name)
            tb = tb.tb_next
        if site:
            text += " (at %s)" % site
    encoded = text.encode("utf-8", "replace")  # a trace string holds up to 255 bytes (SP_MAX_NAME)
    return text if len(encoded) <= 255 else encoded[:252].decode("utf-8", "ignore") + "..."


def _record_uncaught(exc_type, exc, tb, thread=None):
    scope, batch, tb_start = 0, None, tb
    while tb is not None:  # the innermost iterator in the traceback owns it
        # The instance's own dict, as the C path reads it: no __getattr__ runs (nn.Module's).
        owner = getattr(tb.tb_frame.f_locals.get("self"), "__dict__", None)
        owner_scope = owner.get("_stallprof_scope", 0) if type(owner) is dict else 0
        if type(owner_scope) is int and owner_scope > 0:
            scope = owner_scope
            yielded = owner.get("_num_yielded")
            batch = yielded if type(yielded) is int else None
        tb = tb.tb_next
    summary = _error_summary(exc_type, exc, tb_start, _library_dirs())
    # A thread's (the process goes on): "[thread NAME] " ahead, which analysis reads off.
    _ext.config(scope, "uncaught_error", summary if thread is None else "[thread %s] %s" % (thread, summary))
    if scope and batch is not None:
        _ext.config(scope, "uncaught_error_batch", batch)


def _record_last_uncaught():
    # The ctypes fallback's: in Python, so a signal handler may interrupt it.
    exc = getattr(sys, "last_value", None)
    if isinstance(exc, BaseException) and not isinstance(exc, KeyboardInterrupt):
        try:
            _record_uncaught(type(exc), exc, getattr(sys, "last_traceback", None))
        except Exception:
            pass


def _watch_uncaught():
    import atexit
    import threading
    import multiprocessing.process
    if hasattr(_ext, "record_uncaught"):
        atexit.register(_ext.record_uncaught, _library_dirs())
    else:
        atexit.register(_record_last_uncaught)
    previous_thread = threading.excepthook

    def thread_excepthook(args):
        if args.exc_type is not None and not issubclass(args.exc_type, SystemExit):
            try:
                name = getattr(args.thread, "name", None) or "?"
                _record_uncaught(args.exc_type, args.exc_value, args.exc_traceback, name.replace("]", ")"))
            except Exception:
                pass
        previous_thread(args)

    threading.excepthook = thread_excepthook

    # A multiprocessing child (hogwild's trainers, a producer process): its
    # bootstrap prints the exception and exits 1 with os._exit (no atexit,
    # no sys.last_value), so its run() is wrapped as the child starts.
    original_bootstrap = multiprocessing.process.BaseProcess._bootstrap
    if getattr(original_bootstrap, "_stallprof", False):
        return

    def _bootstrap(self, *args, **kwargs):
        run = self.run

        def recorded_run():
            try:
                return run()
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as error:
                try:
                    _record_uncaught(type(error), error, error.__traceback__)
                except Exception:
                    pass
                raise

        try:
            self.run = recorded_run
        except Exception:
            pass
        return original_bootstrap(self, *args, **kwargs)

    _bootstrap._stallprof = True
    multiprocessing.process.BaseProcess._bootstrap = _bootstrap


# ---- the per-batch path in Python (the ctypes fallback) ------------------------
# What the extension's NextWrapper and Fetch do in C (lib/client/python/_stallprof.c),
# for a process that reaches the ring through ctypes.

def _python_next(original_next, wait_id, epoch_end_id, counters, handout_id=0):
    """A DataLoader iterator's __next__ with its wait span (arg: the batch
    index; with CPU within the thread's counter budget, always on batches 0, 1,
    2, 4, ...). The next() that raises StopIteration records an epoch_end span
    from the call instead (worker shutdown); another exception ends the wait
    span and propagates. Off the main thread (a prefetch thread handing
    batches on), a handout span runs from a batch returned to the next call."""
    import threading
    ext = _ext
    Span, now, span_since = ext.Span, ext.now, ext.span_since
    SAMPLED, ALWAYS = ext.COUNTERS_SAMPLED, ext.COUNTERS_ALWAYS
    main_ident = threading.main_thread().ident
    handouts = threading.local()

    def __next__(self):
        open_handout = getattr(handouts, "span", None)
        if open_handout is not None:
            open_handout[0].end(open_handout[1])
            handouts.span = None
        # With CPU: the main thread's own work in next() (num_workers=0
        # fetches, unpickling batches from workers) tells it apart from waiting.
        index = getattr(self, "_num_yielded", 0)
        scope = getattr(self, "_stallprof_scope", 0)
        span = Span(wait_id, scope, ALWAYS if counters == SAMPLED and not index & (index - 1) else counters)
        called = now()
        span.begin()
        try:
            data = original_next(self)
        except StopIteration:
            span_since(epoch_end_id, called, index, scope)
            raise
        except BaseException:
            span.end(index)
            raise
        span.end(index)
        if handout_id and threading.get_ident() != main_ident:
            handout = Span(handout_id, scope, counters)
            handout.begin()
            handouts.span = (handout, index)
        return data
    return __next__


def _frame_batch_index(fetcher, caller):
    # The worker loop (the fetch's caller) has the batch index in its local
    # `idx`; in the main process (num_workers=0) the iterator's count of
    # yielded batches is it.
    try:
        local = caller.f_locals
        idx = local.get("idx")
        if isinstance(idx, int):
            return idx
        yielded = getattr(local.get("self"), "_num_yielded", None)
        if isinstance(yielded, int):
            return yielded
    except Exception:
        pass
    fetcher._stallprof_count = getattr(fetcher, "_stallprof_count", -1) + 1
    return fetcher._stallprof_count


def _python_fetch(iterable, names, counters=None):
    """A dataset fetcher's fetch(fetcher, possibly_batched_index): the batch
    inside a fetch span with getitem and collate spans, and the read spans
    after it when the counters are read (see the module docstring). `names`:
    (fetch, getitem, collate, read_storage, read_calls, system_cpu);
    `counters`: None by the budget, True/False forced (calibration)."""
    ext = _ext
    now, span_since, Span = ext.now, ext.span_since, ext.Span
    thread_io, counters_due, ALWAYS = ext.thread_io, ext.counters_due, ext.COUNTERS_ALWAYS
    fetch_id, getitem_id, collate_id, read_storage_id, read_calls_id, system_cpu_id = names

    def map_samples(fetcher, indices, scope):
        dataset = fetcher.dataset
        if fetcher.auto_collation:
            if hasattr(dataset, "__getitems__") and dataset.__getitems__:
                return dataset.__getitems__(indices)
            data = []
            append = data.append
            for idx in indices:
                start = now()
                append(dataset[idx])
                span_since(getitem_id, start, idx if type(idx) is int else 0, scope)
            return data
        start = now()
        data = dataset[indices]
        span_since(getitem_id, start, indices if type(indices) is int else 0, scope)
        return data

    def iterable_samples(fetcher, indices, scope):
        if fetcher.auto_collation:
            data = []
            for _ in indices:
                start = now()
                try:
                    data.append(next(fetcher.dataset_iter))
                except StopIteration:
                    fetcher.ended = True
                    break
                span_since(getitem_id, start, 0, scope)
            if len(data) == 0 or (fetcher.drop_last and len(data) < len(indices)):
                raise StopIteration
            return data
        start = now()
        data = next(fetcher.dataset_iter)
        span_since(getitem_id, start, 0, scope)
        return data

    samples = iterable_samples if iterable else map_samples

    def io_now():
        global _thread_io_ok
        io = thread_io() if _thread_io_ok else None
        if io is None:
            _thread_io_ok = False
        return io

    def fetch(fetcher, indices):
        if iterable and fetcher.ended:
            raise StopIteration
        scope = getattr(fetcher, "_stallprof_scope", 0) or _worker_scope
        index = _frame_batch_index(fetcher, sys._getframe(1))
        sampled = (not index & (index - 1) or counters_due()) if counters is None else counters
        span = Span(fetch_id, scope, ALWAYS if sampled else 0)
        io0 = io_now() if sampled else None
        io_start = now()
        span.begin()
        try:
            data = samples(fetcher, indices, scope)
            start = now()
            batch = fetcher.collate_fn(data)
            span_since(collate_id, start, index, scope)
        except StopIteration:
            raise  # no batch (the stream ended): not a fetch, so fetch spans == batches
        except BaseException:
            span.end(index)
            raise
        span.end(index)
        if io0 is not None:
            # After the fetch span, so the read spans contain it (start earlier,
            # end later) and come after it in the thread's record order.
            io1 = io_now()
            if io1 is not None:
                span_since(read_storage_id, io_start, max(0, io1[1] - io0[1]), scope)
                span_since(read_calls_id, io_start, max(0, io1[0] - io0[0]), scope)
                if io0[2] >= 0 and io1[2] >= 0:  # the kernel's share of the fetch: holds what storage misses cost
                    span_since(system_cpu_id, io_start, max(0, io1[2] - io0[2]), scope)
        return batch
    return fetch


# ---- workers: the batch index for the C fetch ------------------------------------
_original_worker_loop = None


class _IndexQueue:
    """A worker's index queue: each get() that hands out a batch, (idx,
    indices), tells the C fetch the index of the batch it fetches next, the
    same whatever order the batches arrive in. The second such get() comes
    after the worker's first fetch: the files its dataset reads from are
    recorded then (_record_held_files)."""
    __slots__ = ("_queue", "_announce", "_dataset", "_batches")

    def __init__(self, queue, announce, dataset):
        self._queue = queue
        self._announce = announce
        self._dataset = dataset
        self._batches = 0

    def get(self, *args, **kwargs):
        item = self._queue.get(*args, **kwargs)
        if type(item) is tuple and item and type(item[0]) is int:
            self._batches += 1
            if self._batches == 2:
                try:
                    _record_held_files(self._dataset, _worker_scope)
                except Exception:
                    pass  # optional: the dataset's size is then estimated from its reads
            self._announce(item[0])
        return item

    def __getattr__(self, name):
        return getattr(self._queue, name)


def _worker_loop(*args, **kwargs):
    """torch's DataLoader worker loop with its index queue wrapped in
    _IndexQueue. Top-level, so a spawn context pickles it by name."""
    original = _original_worker_loop
    if original is None:  # a spawned worker whose torch the hook did not patch
        from torch.utils.data._utils import worker
        original = worker._worker_loop
    announce = getattr(_ext, "set_batch_index", None)
    if announce is not None and original is not _worker_loop:
        import inspect
        names = list(inspect.signature(original).parameters)

        def argument(name):
            if name in kwargs:
                return kwargs[name]
            position = names.index(name) if name in names else len(args)
            return args[position] if position < len(args) else None

        if "index_queue" in kwargs:
            kwargs["index_queue"] = _IndexQueue(kwargs["index_queue"], announce, argument("dataset"))
        elif "index_queue" in names and names.index("index_queue") < len(args):
            position = names.index("index_queue")
            args = args[:position] + (_IndexQueue(args[position], announce, argument("dataset")),) + args[position + 1:]
    return original(*args, **kwargs)


# ---- the hook's own cost ----------------------------------------------------------

class _CalibrationIterator:
    """Stands in for a DataLoader iterator while the hook times its wrapper."""
    _num_yielded = 0
    _stallprof_scope = 0


class _CalibrationFetcher:
    """Stands in for a map-style dataset fetcher while the hook times its fetch."""
    _stallprof_scope = 0
    auto_collation = True
    drop_last = False
    dataset = list(range(9))

    @staticmethod
    def collate_fn(data):
        return data


def _calibrate(ext, make_next, make_fetch, bare_fetch):
    """Times _CALIBRATION_REPS events of each kind through the hook's own code
    (the same NextWrapper and Fetch the loaders use) around no-op work, minus
    the no-op work alone (torch's own fetch for the fetches), and records the ns
    per event as config values of scope 0 (see the module docstring): without
    the counters, and what reading them adds. A fetch of 1 sample and one of 9
    give the getitem span's cost (the difference over 8) and the fetch span's
    with its collate span (the rest; hook_ns_collate is 0). Against torch's own
    fetch, which the hook's replaces: what the hook adds over an untraced run,
    so the C fetch's savings on torch's Python loop count against its spans."""
    now = ext.now
    ids = {kind: ext.name(CALIBRATION + kind)
           for kind in ("wait", "epoch_end", "fetch", "collate", "getitem", "read_storage", "read_calls", "system_cpu")}

    def per_event(hooked, bare):
        # One warm-up call each (first-use costs: name interning, lane claim),
        # then _CALIBRATION_REPS calls in 10 chunks; the fastest chunk counts,
        # so a preemption on a busy machine does not. One pass only: the whole
        # calibration must stay under 10 ms.
        hooked()
        bare()
        chunk = range(_CALIBRATION_REPS // 10)
        fastest = []
        for fn in (hooked, bare):
            best = None
            for _ in range(10):
                t0 = now()
                for _ in chunk:
                    fn()
                elapsed = now() - t0
                best = elapsed if best is None or elapsed < best else best
            fastest.append(best)
        return max(0, (fastest[0] - fastest[1]) // len(chunk))

    iterator = _CalibrationIterator()

    def noop_next(self):
        return 0

    wrapped_next = make_next(noop_next, ids["wait"], ids["epoch_end"], 0)
    wait_ns = per_event(lambda: wrapped_next(iterator), lambda: noop_next(iterator))
    counted_next = make_next(noop_next, ids["wait"], ids["epoch_end"], ext.COUNTERS_ALWAYS)
    wait_counters_ns = max(0, per_event(lambda: counted_next(iterator), lambda: noop_next(iterator)) - wait_ns)

    fetcher = _CalibrationFetcher()
    names = tuple(ids[kind] for kind in ("fetch", "getitem", "collate", "read_storage", "read_calls", "system_cpu"))
    fetch, counted_fetch = make_fetch(False, names, False), make_fetch(False, names, True)
    # The index NextWrapper announces to the fetch in a real next() (its cost is the wait's).
    announce = getattr(ext, "set_batch_index", None) or (lambda index: None)
    one, nine = [0], list(range(9))

    def timed(fn, indices):
        def call():
            announce(0)
            fn(fetcher, indices)
        return call
    one_sample_ns = per_event(timed(fetch, one), timed(bare_fetch, one))
    nine_samples_ns = per_event(timed(fetch, nine), timed(bare_fetch, nine))
    fetch_counters_ns = max(0, per_event(timed(counted_fetch, one), timed(bare_fetch, one)) - one_sample_ns)
    sample_ns = max(0, (nine_samples_ns - one_sample_ns) // 8)
    # The collate span is timed with its fetch (one C call records both).
    collate_ns = 0
    fetch_ns = max(0, one_sample_ns - sample_ns)

    cfg = ext.config
    cfg(0, "hook_ns_wait", int(wait_ns))
    cfg(0, "hook_ns_fetch", int(fetch_ns))
    cfg(0, "hook_ns_sample", int(sample_ns))
    cfg(0, "hook_ns_collate", int(collate_ns))
    cfg(0, "hook_ns_wait_counters", int(wait_counters_ns))
    cfg(0, "hook_ns_fetch_counters", int(fetch_counters_ns))
    # The calibration read the counters ~800 times on purpose: not the budget's business.
    ext.counter_budget_reset()
