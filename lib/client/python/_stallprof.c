/* stallprof._stallprof: the CPython fast path over libstallprof_client.so.
 * Every function is a thin METH_FASTCALL wrapper; none raises when the ring is
 * not attached (the C calls are no-ops then). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "stallprof/client.h"

static PyObject* g_name_cache; /* str -> int id */

static int to_u64(PyObject* o, uint64_t* out) {
  unsigned long long v = PyLong_AsUnsignedLongLongMask(o);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return 0;
  *out = v;
  return 1;
}

/* Name id of a str (cached) or an int id passed through. */
static int name_id(PyObject* o, uint32_t* out) {
  if (PyLong_CheckExact(o)) {
    uint64_t v;
    if (!to_u64(o, &v)) return 0;
    *out = (uint32_t)v;
    return 1;
  }
  if (!PyUnicode_Check(o)) {
    PyErr_SetString(PyExc_TypeError, "stallprof: a name must be a str or a name id");
    return 0;
  }
  PyObject* cached = PyDict_GetItemWithError(g_name_cache, o);
  if (cached != NULL) {
    *out = (uint32_t)PyLong_AsUnsignedLong(cached);
    return 1;
  }
  if (PyErr_Occurred()) return 0;
  const char* text = PyUnicode_AsUTF8(o);
  if (text == NULL) return 0;
  *out = stallprof_name(text);
  if (*out == 0) return 1; /* not attached or table full: do not cache */
  PyObject* id = PyLong_FromUnsignedLong(*out);
  if (id == NULL) return 0;
  int rc = PyDict_SetItem(g_name_cache, o, id);
  Py_DECREF(id);
  return rc == 0;
}

#define ARGS_AT_LEAST(n, what)                                             \
  if (nargs < (n)) {                                                       \
    PyErr_SetString(PyExc_TypeError, "stallprof." what ": missing arguments"); \
    return NULL;                                                           \
  }

static PyObject* py_attach(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(stallprof_attach());
}

static PyObject* py_enabled(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyBool_FromLong(stallprof_enabled());
}

static PyObject* py_name(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  ARGS_AT_LEAST(1, "name");
  uint32_t id;
  if (!name_id(args[0], &id)) return NULL;
  return PyLong_FromUnsignedLong(id);
}

static PyObject* py_now(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromUnsignedLongLong(stallprof_now_ns());
}

/* span(name, start_ns, duration_ns, arg=0, scope=0) */
static PyObject* py_span(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  ARGS_AT_LEAST(3, "span");
  uint32_t name;
  uint64_t start, duration, arg = 0, scope = 0;
  if (!name_id(args[0], &name) || !to_u64(args[1], &start) || !to_u64(args[2], &duration)) return NULL;
  if (nargs > 3 && !to_u64(args[3], &arg)) return NULL;
  if (nargs > 4 && !to_u64(args[4], &scope)) return NULL;
  stallprof_span_complete(name, start, duration, arg, (uint16_t)scope);
  Py_RETURN_NONE;
}

/* span_since(name, start_ns, arg=0, scope=0): a span from start_ns to now. */
static PyObject* py_span_since(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  ARGS_AT_LEAST(2, "span_since");
  const uint64_t end = stallprof_now_ns();
  uint32_t name;
  uint64_t start, arg = 0, scope = 0;
  if (!name_id(args[0], &name) || !to_u64(args[1], &start)) return NULL;
  if (nargs > 2 && !to_u64(args[2], &arg)) return NULL;
  if (nargs > 3 && !to_u64(args[3], &scope)) return NULL;
  stallprof_span_complete(name, start, end >= start ? end - start : 0, arg, (uint16_t)scope);
  Py_RETURN_NONE;
}

/* instant(name, arg=0, scope=0) */
static PyObject* py_instant(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  ARGS_AT_LEAST(1, "instant");
  uint32_t name;
  uint64_t arg = 0, scope = 0;
  if (!name_id(args[0], &name)) return NULL;
  if (nargs > 1 && !to_u64(args[1], &arg)) return NULL;
  if (nargs > 2 && !to_u64(args[2], &scope)) return NULL;
  stallprof_instant(name, arg, (uint16_t)scope);
  Py_RETURN_NONE;
}

/* counter(name, value) */
static PyObject* py_counter(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  ARGS_AT_LEAST(2, "counter");
  uint32_t name;
  uint64_t value;
  if (!name_id(args[0], &name) || !to_u64(args[1], &value)) return NULL;
  stallprof_counter(name, value);
  Py_RETURN_NONE;
}

/* config(scope, key, value): int -> u64, float -> f64, anything else -> str(value) */
static PyObject* py_config(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  ARGS_AT_LEAST(3, "config");
  uint64_t scope;
  if (!to_u64(args[0], &scope)) return NULL;
  const char* key = PyUnicode_AsUTF8(args[1]);
  if (key == NULL) return NULL;
  PyObject* value = args[2];
  if (PyBool_Check(value)) {
    stallprof_config_u64((uint16_t)scope, key, value == Py_True);
  } else if (PyLong_Check(value)) {
    uint64_t v;
    if (!to_u64(value, &v)) return NULL;
    stallprof_config_u64((uint16_t)scope, key, v);
  } else if (PyFloat_Check(value)) {
    stallprof_config_f64((uint16_t)scope, key, PyFloat_AsDouble(value));
  } else {
    PyObject* text = PyObject_Str(value);
    if (text == NULL) return NULL;
    const char* s = PyUnicode_AsUTF8(text);
    if (s == NULL) {
      Py_DECREF(text);
      return NULL;
    }
    stallprof_config_str((uint16_t)scope, key, s);
    Py_DECREF(text);
  }
  Py_RETURN_NONE;
}

static PyObject* py_new_scope(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(stallprof_new_scope());
}

static PyObject* py_set_client_kind(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  ARGS_AT_LEAST(1, "set_client_kind");
  uint64_t kind;
  if (!to_u64(args[0], &kind)) return NULL;
  stallprof_set_client_kind((uint32_t)kind);
  Py_RETURN_NONE;
}

static PyObject* py_dropped(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyLong_FromUnsignedLongLong(stallprof_dropped());
}

static PyObject* py_thread_release(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  stallprof_thread_release();
  Py_RETURN_NONE;
}

/* thread_io() -> (rchar, read_bytes, system_ns) of the calling thread, or None;
 * system_ns is -1 when getrusage cannot give it. */
static PyObject* py_thread_io(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  uint64_t rchar, read_bytes, system_ns;
  if (stallprof_thread_io(&rchar, &read_bytes) != 0) Py_RETURN_NONE;
  long long system = stallprof_thread_system_ns(&system_ns) == 0 ? (long long)system_ns : -1;
  return Py_BuildValue("(KKL)", (unsigned long long)rchar, (unsigned long long)read_bytes, system);
}

static PyObject* py_counters_due(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyBool_FromLong(stallprof_counters_due());
}

static PyObject* py_counter_share(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return PyFloat_FromDouble(stallprof_counter_share());
}

static PyObject* py_counter_budget_reset(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  stallprof_counter_budget_reset();
  Py_RETURN_NONE;
}

/* ---- Span: begin()/end(arg) and a context manager --------------------------- */

/* Span's cpu argument: 1 (True) within the counter budget, 2 always. */
#define COUNTERS_SAMPLED 1
#define COUNTERS_ALWAYS 2

typedef struct {
  PyObject_HEAD
  stallprof_span span;
  uint32_t flags;
  uint64_t arg;
} SpanObject;

/* Span(name, scope=0, cpu=False): cpu True (or COUNTERS_SAMPLED) measures thread
 * CPU and run-queue delay within the thread's counter budget, COUNTERS_ALWAYS
 * on this span whatever the budget. */
static int Span_init(SpanObject* self, PyObject* args, PyObject* kwargs) {
  static char* keywords[] = {"name", "scope", "cpu", NULL};
  PyObject* name;
  unsigned int scope = 0;
  int cpu = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|Ii", keywords, &name, &scope, &cpu)) return -1;
  uint32_t id;
  if (!name_id(name, &id)) return -1;
  self->span.name = id;
  self->span.scope = (uint16_t)scope;
  self->flags = cpu == COUNTERS_ALWAYS ? STALLPROF_SPAN_CPU_ALWAYS : cpu ? STALLPROF_SPAN_CPU : STALLPROF_SPAN_WALL;
  self->span.flags = 0;
  self->arg = 0;
  return 0;
}

static PyObject* Span_begin(SpanObject* self, PyObject* unused) {
  (void)unused;
  stallprof_span_begin(&self->span, self->span.name, self->span.scope, self->flags);
  Py_INCREF(self);
  return (PyObject*)self;
}

static PyObject* Span_end(SpanObject* self, PyObject* const* args, Py_ssize_t nargs) {
  uint64_t arg = self->arg;
  if (nargs > 0 && !to_u64(args[0], &arg)) return NULL;
  stallprof_span_end(&self->span, arg);
  Py_RETURN_NONE;
}

static PyObject* Span_exit(SpanObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)args;
  (void)nargs;
  stallprof_span_end(&self->span, self->arg);
  Py_RETURN_FALSE;
}

static PyObject* Span_get_arg(SpanObject* self, void* unused) {
  (void)unused;
  return PyLong_FromUnsignedLongLong(self->arg);
}

static int Span_set_arg(SpanObject* self, PyObject* value, void* unused) {
  (void)unused;
  if (value == NULL) return -1;
  return to_u64(value, &self->arg) ? 0 : -1;
}

static PyMethodDef Span_methods[] = {
    {"begin", (PyCFunction)Span_begin, METH_NOARGS, "Start the span; returns self."},
    {"end", (PyCFunction)(void (*)(void))Span_end, METH_FASTCALL, "end(arg=self.arg): record the span."},
    {"__enter__", (PyCFunction)Span_begin, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))Span_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};

/* True after begin() when this span measures CPU and delay (the budget allowed it). */
static PyObject* Span_get_sampled(SpanObject* self, void* unused) {
  (void)unused;
  return PyBool_FromLong((self->span.flags & STALLPROF_SPAN_CPU) != 0);
}

static PyGetSetDef Span_getset[] = {
    {"arg", (getter)Span_get_arg, (setter)Span_set_arg, "u64 argument recorded with the span", NULL},
    {"sampled", (getter)Span_get_sampled, NULL, "True when begin() started measuring CPU and run-queue delay", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject SpanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stallprof._stallprof.Span",
    .tp_basicsize = sizeof(SpanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Span(name, scope=0, cpu=False): begin()/end(arg) or `with`.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Span_init,
    .tp_methods = Span_methods,
    .tp_getset = Span_getset,
};

static PyMethodDef module_methods[] = {
    {"attach", py_attach, METH_NOARGS, "Attach to the ring; returns STALLPROF_* status."},
    {"enabled", py_enabled, METH_NOARGS, "True when recording."},
    {"name", (PyCFunction)(void (*)(void))py_name, METH_FASTCALL, "name(str) -> id (0 when not recording)."},
    {"now", py_now, METH_NOARGS, "CLOCK_MONOTONIC in ns."},
    {"span", (PyCFunction)(void (*)(void))py_span, METH_FASTCALL, "span(name, start_ns, duration_ns, arg=0, scope=0)"},
    {"span_since", (PyCFunction)(void (*)(void))py_span_since, METH_FASTCALL, "span_since(name, start_ns, arg=0, scope=0)"},
    {"instant", (PyCFunction)(void (*)(void))py_instant, METH_FASTCALL, "instant(name, arg=0, scope=0)"},
    {"counter", (PyCFunction)(void (*)(void))py_counter, METH_FASTCALL, "counter(name, value)"},
    {"config", (PyCFunction)(void (*)(void))py_config, METH_FASTCALL, "config(scope, key, value)"},
    {"new_scope", py_new_scope, METH_NOARGS, "A new loader id (0 when not recording)."},
    {"set_client_kind", (PyCFunction)(void (*)(void))py_set_client_kind, METH_FASTCALL, "set_client_kind(kind)"},
    {"dropped", py_dropped, METH_NOARGS, "Records this process dropped."},
    {"thread_release", py_thread_release, METH_NOARGS, "Release this thread's lane."},
    {"thread_io", py_thread_io, METH_NOARGS,
     "(rchar, read_bytes, system_ns) of this thread (/proc/thread-self/io, getrusage), or None when unavailable."},
    {"counters_due", py_counters_due, METH_NOARGS,
     "True when this thread's counter budget allows reading CPU, schedstat and io now."},
    {"counter_share", py_counter_share, METH_NOARGS, "Share of a thread's wall time its counter reads may cost."},
    {"counter_budget_reset", py_counter_budget_reset, METH_NOARGS, "Forget this thread's spent counter budget."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_stallprof", "stallprof C fast path", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__stallprof(void) {
  if (PyType_Ready(&SpanType) < 0) return NULL;
  PyObject* m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  g_name_cache = PyDict_New();
  if (g_name_cache == NULL) return NULL;
  Py_INCREF(&SpanType);
  if (PyModule_AddObject(m, "Span", (PyObject*)&SpanType) < 0) return NULL;
  PyModule_AddIntConstant(m, "OK", STALLPROF_OK);
  PyModule_AddIntConstant(m, "DISABLED", STALLPROF_DISABLED);
  PyModule_AddIntConstant(m, "ERR_VERSION", STALLPROF_ERR_VERSION);
  PyModule_AddIntConstant(m, "ERR_ATTACH", STALLPROF_ERR_ATTACH);
  PyModule_AddIntConstant(m, "COUNTERS_SAMPLED", COUNTERS_SAMPLED);
  PyModule_AddIntConstant(m, "COUNTERS_ALWAYS", COUNTERS_ALWAYS);
  return m;
}
