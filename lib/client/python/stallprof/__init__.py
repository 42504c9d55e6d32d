"""stallprof: record input-pipeline activity of a PyTorch program into the ring
of `stallprof run`. Everything here is a cheap no-op when not running under
`stallprof run` (STALLPROF_RING unset).

    with stallprof.stage("decode"):          # span with thread CPU time
        ...
    @stallprof.stage("augment")              # same, as a decorator
    def augment(x): ...
    stallprof.instant("checkpoint", arg=step)
    stallprof.counter("queue_depth", n)
"""
import functools

from . import _backend

__all__ = ["stage", "span", "instant", "counter", "config", "now", "enabled", "client_kind"]

_ext = _backend.ext


def enabled():
    """True when this process records into a stallprof ring."""
    return _ext is not None and _ext.enabled()


def client_kind():
    """'cext', 'ctypes', or 'none' (no client library could be loaded)."""
    return _backend.client


if _ext is not None:
    now = _ext.now
    _Span = _ext.Span

    def span(name, start_ns, duration_ns, arg=0, scope=0):
        """Records a finished span (CLOCK_MONOTONIC ns)."""
        _ext.span(name, start_ns, duration_ns, arg, scope)

    def instant(name, arg=0, scope=0):
        """Records a point event now."""
        _ext.instant(name, arg, scope)

    def counter(name, value):
        """Records a counter sample now."""
        _ext.counter(name, value)

    def config(scope, key, value):
        """Records configuration key = value (int, float or str) for a scope."""
        _ext.config(scope, key, value)
else:
    import time as _time

    def now():
        return _time.monotonic_ns()

    class _Span:
        __slots__ = ("arg",)

        def __init__(self, name, scope=0, cpu=False):
            self.arg = 0

        def begin(self):
            return self

        def end(self, arg=None):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def span(name, start_ns, duration_ns, arg=0, scope=0):
        pass

    def instant(name, arg=0, scope=0):
        pass

    def counter(name, value):
        pass

    def config(scope, key, value):
        pass


def _decorate(name, scope, fn):
    """@stallprof.stage(name, scope) on fn."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with stage(name, scope):
            return fn(*args, **kwargs)
    return wrapper


if _ext is not None and hasattr(_ext, "Stage"):
    # The extension's stage: built by vectorcall, begin/end in C (the whole
    # `with` costs the clock reads and little more).
    stage = _ext.Stage
    _ext.set_stage_decorator(_decorate)
else:
    class stage(_Span):
        """A named stage of your pipeline, recorded as a span with thread CPU time
        and run-queue delay (read within the thread's counter budget: on every
        slow stage, on a sample of fast ones; analyze scales them). Use as
        `with stallprof.stage("decode"):` or as a decorator
        `@stallprof.stage("decode")`. Set `.arg` for a u64 argument."""
        __slots__ = ("_stage_name", "_stage_scope")

        def __init__(self, name, scope=0):
            super().__init__(name, scope, True)
            self._stage_name = name
            self._stage_scope = scope

        def __call__(self, fn):
            return _decorate(self._stage_name, self._stage_scope, fn)
