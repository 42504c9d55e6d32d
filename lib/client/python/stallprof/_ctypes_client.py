"""ctypes fallback over libstallprof_client.so (STALLPROF_CLIENT_LIB), used when
the C extension cannot be loaded (another Python version, a venv). Slower than
the extension, same functions."""
import ctypes
import os

_lib = ctypes.CDLL(os.environ["STALLPROF_CLIENT_LIB"])

_u64, _u32, _u16, _int = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint16, ctypes.c_int


class _SpanStruct(ctypes.Structure):
    _fields_ = [("start_ns", _u64), ("cpu_ns", _u64), ("delay_ns", _u64),
                ("name", _u32), ("scope", _u16), ("flags", _u16)]


def _sig(fn, res, *args):
    f = getattr(_lib, fn)
    f.restype = res
    f.argtypes = list(args)
    return f


_attach = _sig("stallprof_attach", _int)
_enabled = _sig("stallprof_enabled", _int)
_name = _sig("stallprof_name", _u32, ctypes.c_char_p)
now = _sig("stallprof_now_ns", _u64)
_span = _sig("stallprof_span_complete", None, _u32, _u64, _u64, _u64, _u16)
_begin = _sig("stallprof_span_begin", None, ctypes.POINTER(_SpanStruct), _u32, _u16, _u32)
_end = _sig("stallprof_span_end", None, ctypes.POINTER(_SpanStruct), _u64)
_instant = _sig("stallprof_instant", None, _u32, _u64, _u16)
_counter = _sig("stallprof_counter", None, _u32, _u64)
_config_u64 = _sig("stallprof_config_u64", None, _u16, ctypes.c_char_p, _u64)
_config_f64 = _sig("stallprof_config_f64", None, _u16, ctypes.c_char_p, ctypes.c_double)
_config_str = _sig("stallprof_config_str", None, _u16, ctypes.c_char_p, ctypes.c_char_p)
new_scope = _sig("stallprof_new_scope", _u16)
set_client_kind = _sig("stallprof_set_client_kind", None, _u32)
dropped = _sig("stallprof_dropped", _u64)
thread_release = _sig("stallprof_thread_release", None)
_thread_io = _sig("stallprof_thread_io", _int, ctypes.POINTER(_u64), ctypes.POINTER(_u64))
_thread_system_ns = _sig("stallprof_thread_system_ns", _int, ctypes.POINTER(_u64))
_counters_due = _sig("stallprof_counters_due", _int)
counter_share = _sig("stallprof_counter_share", ctypes.c_double)
counter_budget_reset = _sig("stallprof_counter_budget_reset", None)

OK, DISABLED, ERR_VERSION, ERR_ATTACH = 0, 1, 2, 3
# Span's cpu argument (= the extension's): within the counter budget, always.
COUNTERS_SAMPLED, COUNTERS_ALWAYS = 1, 2
_MASK = (1 << 64) - 1
_names = {}


def attach():
    return _attach()


def enabled():
    return bool(_enabled())


def name(text):
    if type(text) is int:
        return text
    cached = _names.get(text)
    if cached is not None:
        return cached
    ident = _name(str(text).encode("utf-8", "replace"))
    if ident:
        _names[text] = ident
    return ident


def thread_io():
    """(rchar, read_bytes, system_ns) of this thread (/proc/thread-self/io,
    getrusage), or None; system_ns is -1 when unavailable."""
    # Fresh buffers per call: ctypes drops the GIL during the call, so shared
    # ones could be overwritten by another thread.
    rchar, read_bytes, system_ns = _u64(), _u64(), _u64()
    if _thread_io(ctypes.byref(rchar), ctypes.byref(read_bytes)) != 0:
        return None
    system = system_ns.value if _thread_system_ns(ctypes.byref(system_ns)) == 0 else -1
    return (rchar.value, read_bytes.value, system)


def counters_due():
    return bool(_counters_due())


def span(n, start, duration, arg=0, scope=0):
    _span(name(n), start, duration, arg & _MASK, scope)


def span_since(n, start, arg=0, scope=0):
    end = now()
    _span(name(n), start, end - start if end >= start else 0, arg & _MASK, scope)


def instant(n, arg=0, scope=0):
    _instant(name(n), arg & _MASK, scope)


def counter(n, value):
    _counter(name(n), value & _MASK)


def config(scope, key, value):
    k = key.encode()
    if isinstance(value, bool):
        _config_u64(scope, k, int(value))
    elif isinstance(value, int):
        _config_u64(scope, k, value & _MASK)
    elif isinstance(value, float):
        _config_f64(scope, k, value)
    else:
        _config_str(scope, k, str(value).encode("utf-8", "replace"))


class Span:
    """Span(name, scope=0, cpu=False): begin()/end(arg) or `with`; cpu True
    (COUNTERS_SAMPLED) within the counter budget, COUNTERS_ALWAYS always."""
    __slots__ = ("_s", "_flags", "arg")

    def __init__(self, n, scope=0, cpu=False):
        self._s = _SpanStruct()
        self._s.name = name(n)
        self._s.scope = scope
        self._flags = 2 if cpu == COUNTERS_ALWAYS else 1 if cpu else 0
        self.arg = 0

    def begin(self):
        _begin(ctypes.byref(self._s), self._s.name, self._s.scope, self._flags)
        return self

    @property
    def sampled(self):
        return bool(self._s.flags & 1)

    def end(self, arg=None):
        _end(ctypes.byref(self._s), (self.arg if arg is None else arg) & _MASK)

    def __enter__(self):
        return self.begin()

    def __exit__(self, *exc):
        self.end()
        return False
