/* stallprof._stallprof: the CPython fast path over libstallprof_client.so.
 * Every function is a thin METH_FASTCALL wrapper; none raises when the ring is
 * not attached (the C calls are no-ops then). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

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

/* ---- stallprof.stage: a Span with CPU, built by vectorcall ----------------- */

/* The Python decorator stallprof/__init__.py registers: _decorate(name, scope, fn). */
static PyObject* g_stage_decorator;

typedef struct {
  SpanObject base;
  PyObject* name; /* as given, for the decorator */
} StageObject;

static PyTypeObject StageType;

static int Stage_set(StageObject* self, PyObject* name, PyObject* scope) {
  uint32_t id;
  uint64_t scope_value = 0;
  if (!name_id(name, &id)) return 0;
  if (scope != NULL && !to_u64(scope, &scope_value)) return 0;
  self->base.span.name = id;
  self->base.span.scope = (uint16_t)scope_value;
  self->base.span.flags = 0;
  self->base.flags = STALLPROF_SPAN_CPU;
  self->base.arg = 0;
  Py_INCREF(name);
  Py_XSETREF(self->name, name);
  return 1;
}

static int Stage_init(StageObject* self, PyObject* args, PyObject* kwargs) {
  static char* keywords[] = {"name", "scope", NULL};
  PyObject *name, *scope = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O", keywords, &name, &scope)) return -1;
  return Stage_set(self, name, scope) ? 0 : -1;
}

/* stage(name, scope=0) without building an args tuple: most of what `with
 * stallprof.stage(...)` costs beyond the clock reads is the call itself. */
static PyObject* Stage_vectorcall(PyObject* type, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject *name = nargs > 0 ? args[0] : NULL, *scope = nargs > 1 ? args[1] : NULL;
  Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, i);
    if (name == NULL && PyUnicode_CompareWithASCIIString(key, "name") == 0) {
      name = args[nargs + i];
    } else if (scope == NULL && PyUnicode_CompareWithASCIIString(key, "scope") == 0) {
      scope = args[nargs + i];
    } else {
      PyErr_Format(PyExc_TypeError, "stallprof.stage: unexpected argument %R", key);
      return NULL;
    }
  }
  if (name == NULL || nargs > 2) {
    PyErr_SetString(PyExc_TypeError, "stallprof.stage(name, scope=0)");
    return NULL;
  }
  PyTypeObject* tp = (PyTypeObject*)type;
  StageObject* self = (StageObject*)tp->tp_alloc(tp, 0);
  if (self == NULL) return NULL;
  if (!Stage_set(self, name, scope)) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject*)self;
}

static void Stage_dealloc(StageObject* self) {
  Py_XDECREF(self->name);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* @stallprof.stage("x") on a function: the registered Python decorator. */
static PyObject* Stage_call(StageObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* fn;
  if (kwargs != NULL || !PyArg_ParseTuple(args, "O:stage", &fn)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "stallprof.stage(...) decorates one function");
    return NULL;
  }
  if (g_stage_decorator == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "stallprof: the stage decorator is not registered");
    return NULL;
  }
  PyObject* scope = PyLong_FromUnsignedLong(self->base.span.scope);
  if (scope == NULL) return NULL;
  PyObject* wrapped = PyObject_CallFunctionObjArgs(g_stage_decorator, self->name, scope, fn, NULL);
  Py_DECREF(scope);
  return wrapped;
}

static PyTypeObject StageType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stallprof.stage",
    .tp_basicsize = sizeof(StageObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "stage(name, scope=0): a named stage of your pipeline, recorded as a span with thread CPU time\n"
              "and run-queue delay (read within the thread's counter budget: on every slow stage, on a\n"
              "sample of fast ones; analyze scales them). `with stallprof.stage(\"decode\"):` or\n"
              "`@stallprof.stage(\"decode\")`. Set `.arg` for a u64 argument.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Stage_init,
    .tp_dealloc = (destructor)Stage_dealloc,
    .tp_call = (ternaryfunc)Stage_call,
    .tp_vectorcall = Stage_vectorcall,
};

static PyObject* py_set_stage_decorator(PyObject* self, PyObject* fn) {
  (void)self;
  Py_INCREF(fn);
  Py_XSETREF(g_stage_decorator, fn);
  Py_RETURN_NONE;
}

/* ---- the DataLoader hook's per-batch path (stallprof/hook.py) ---------------
 * NextWrapper replaces _BaseDataLoaderIter.__next__ and Fetch the fetchers'
 * fetch(): each does in one C call what the Python wrappers did with a dozen
 * Python-level calls (a Span object, getattr, clock reads, a span per sample,
 * the thread's io counters). They record the same spans with the same args. */

/* Index of the batch the calling thread is fetching, -1 when unknown: set by
 * NextWrapper around the iterator's __next__ (num_workers=0: the iterator's
 * _num_yielded) and by set_batch_index (a worker, from its index queue), taken
 * (and cleared) by the fetch it is for. */
static _Thread_local int64_t t_batch_index = -1;
/* The loader this worker process serves (set_worker_scope), for fetchers that
 * carry no _stallprof_scope. */
static uint16_t g_worker_scope;
/* 0 once stallprof_thread_io failed in this process (kernel, permissions): stop paying for it. */
static int g_thread_io_ok = 1;
static PyObject *g_str_scope, *g_str_num_yielded, *g_str_dataset, *g_str_auto_collation, *g_str_collate_fn,
    *g_str_getitems, *g_str_dataset_iter, *g_str_ended, *g_str_drop_last, *g_str_count;

/* obj.<name>, or NULL without an exception set when it has none (1), or NULL
 * with one (-1): the common case of a missing attribute without building an
 * AttributeError. */
static int optional_attr(PyObject* obj, PyObject* name, PyObject** value) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyObject_GetOptionalAttr(obj, name, value) < 0 ? -1 : 1;
#else
  return _PyObject_LookupAttr(obj, name, value) < 0 ? -1 : 1;
#endif
}

/* obj.<name> as a u64 (ints only), `otherwise` when missing or not an int. */
static uint64_t attr_u64(PyObject* obj, PyObject* name, uint64_t otherwise) {
  PyObject* value;
  if (optional_attr(obj, name, &value) < 0) PyErr_Clear();
  if (value == NULL) return otherwise;
  uint64_t out = otherwise;
  if (PyLong_Check(value)) {
    out = PyLong_AsUnsignedLongLongMask(value);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      out = otherwise;
    }
  }
  Py_DECREF(value);
  return out;
}

/* A method descriptor's __get__: bound to an instance (super().__next__(), obj.fetch
 * looked up outside LOAD_METHOD), itself on the class. */
static PyObject* bind_method(PyObject* self, PyObject* obj, PyObject* type) {
  (void)type;
  if (obj == NULL || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* original; /* the __next__ it wraps */
  uint32_t wait_id, epoch_end_id;
  uint32_t handout_id; /* 0: no handout spans */
  int counters; /* Span's cpu argument: 0, COUNTERS_SAMPLED, COUNTERS_ALWAYS */
} NextWrapperObject;

/* The thread that imported the extension (the hook does, at start-up: the
 * process's main thread). */
static unsigned long g_main_thread;
/* A thread other than the main one iterating a loader (a prefetch thread that
 * hands batches to the training loop through a queue): its handout span, from
 * a next() returning a batch to its next call, open in between. */
static _Thread_local stallprof_span t_handout;
static _Thread_local int t_handout_open;
static _Thread_local uint64_t t_handout_index;

/* __next__(iterator): a wait span with the batch index as arg; when the call
 * raises StopIteration an epoch_end span from the call instead (worker
 * shutdown); any other exception ends the wait span and propagates. Batches
 * 0, 1, 2, 4, 8, ... (index a power of two or 0) read the counters whatever
 * the budget. */
static PyObject* NextWrapper_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  NextWrapperObject* w = (NextWrapperObject*)callable;
  if (PyVectorcall_NARGS(nargsf) < 1 || kwnames != NULL) return PyObject_Vectorcall(w->original, args, nargsf, kwnames);
  PyObject* iterator = args[0];
  const uint64_t index = attr_u64(iterator, g_str_num_yielded, 0);
  const uint16_t scope = (uint16_t)attr_u64(iterator, g_str_scope, 0);
  const int cpu = w->counters == COUNTERS_SAMPLED && (index & (index - 1)) == 0 ? COUNTERS_ALWAYS : w->counters;
  const uint32_t flags =
      cpu == COUNTERS_ALWAYS ? STALLPROF_SPAN_CPU_ALWAYS : cpu ? STALLPROF_SPAN_CPU : STALLPROF_SPAN_WALL;
  if (t_handout_open) {
    stallprof_span_end(&t_handout, t_handout_index);
    t_handout_open = 0;
  }
  const int64_t outer_index = t_batch_index;
  t_batch_index = (int64_t)(index & INT64_MAX);
  const uint64_t called = stallprof_now_ns();
  stallprof_span span;
  stallprof_span_begin(&span, w->wait_id, scope, flags);
  PyObject* result = PyObject_Vectorcall(w->original, args, nargsf, NULL);
  t_batch_index = outer_index;
  if (result == NULL && PyErr_ExceptionMatches(PyExc_StopIteration)) {
    const uint64_t end = stallprof_now_ns();
    stallprof_span_complete(w->epoch_end_id, called, end >= called ? end - called : 0, index, scope);
    return NULL;
  }
  stallprof_span_end(&span, index);
  if (w->handout_id != 0 && result != NULL && PyThread_get_thread_ident() != g_main_thread) {
    stallprof_span_begin(&t_handout, w->handout_id, scope, w->counters ? STALLPROF_SPAN_CPU : STALLPROF_SPAN_WALL);
    t_handout_index = index;
    t_handout_open = 1;
  }
  return result;
}

/* NextWrapper(original, wait_id, epoch_end_id, counters, handout_id=0) */
static PyObject* NextWrapper_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* original;
  PyObject *wait, *epoch_end;
  int counters;
  if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
    PyErr_SetString(PyExc_TypeError, "NextWrapper(original, wait, epoch_end, counters, handout=0)");
    return NULL;
  }
  PyObject* handout = NULL;
  if (!PyArg_ParseTuple(args, "OOOi|O:NextWrapper", &original, &wait, &epoch_end, &counters, &handout)) return NULL;
  uint32_t wait_id, epoch_end_id, handout_id = 0;
  if (!name_id(wait, &wait_id) || !name_id(epoch_end, &epoch_end_id)) return NULL;
  if (handout != NULL && !name_id(handout, &handout_id)) return NULL;
  NextWrapperObject* self = (NextWrapperObject*)type->tp_alloc(type, 0);
  if (self == NULL) return NULL;
  self->vectorcall = NextWrapper_vectorcall;
  Py_INCREF(original);
  self->original = original;
  self->wait_id = wait_id;
  self->epoch_end_id = epoch_end_id;
  self->handout_id = handout_id;
  self->counters = counters;
  return (PyObject*)self;
}

static int NextWrapper_traverse(NextWrapperObject* self, visitproc visit, void* arg) {
  Py_VISIT(self->original);
  return 0;
}

static int NextWrapper_clear(NextWrapperObject* self) {
  Py_CLEAR(self->original);
  return 0;
}

static void NextWrapper_dealloc(NextWrapperObject* self) {
  PyObject_GC_UnTrack(self);
  NextWrapper_clear(self);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

/* Attributes it does not have (__name__, __doc__, ...) are the wrapped function's. */
static PyObject* forward_getattro(PyObject* self, PyObject* name, PyObject* original) {
  PyObject* value = PyObject_GenericGetAttr(self, name);
  if (value != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError) || original == NULL) return value;
  PyErr_Clear();
  return PyObject_GetAttr(original, name);
}

static PyObject* NextWrapper_getattro(PyObject* self, PyObject* name) {
  return forward_getattro(self, name, ((NextWrapperObject*)self)->original);
}

static PyMemberDef NextWrapper_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(NextWrapperObject, original), READONLY, "the wrapped __next__"},
    {NULL, 0, 0, 0, NULL}};

static PyTypeObject NextWrapperType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stallprof._stallprof.NextWrapper",
    .tp_basicsize = sizeof(NextWrapperObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "NextWrapper(original, wait, epoch_end, counters, handout=0): a DataLoader iterator's __next__ with its wait span (and, off the main thread, a handout span until the next call).",
    .tp_new = NextWrapper_new,
    .tp_dealloc = (destructor)NextWrapper_dealloc,
    .tp_traverse = (traverseproc)NextWrapper_traverse,
    .tp_clear = (inquiry)NextWrapper_clear,
    .tp_vectorcall_offset = offsetof(NextWrapperObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = bind_method,
    .tp_getattro = NextWrapper_getattro,
    .tp_members = NextWrapper_members,
};

/* Fetch's counters argument: by the budget (batches 0, 1, 2, 4, ... always), or forced (calibration). */
#define FETCH_COUNTERS_BUDGET (-1)

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  int iterable; /* the fetcher is an _IterableDatasetFetcher, else a _MapDatasetFetcher */
  int counters; /* FETCH_COUNTERS_BUDGET, 0 never, 1 always */
  uint32_t fetch_id, getitem_id, collate_id, read_storage_id, read_calls_id, system_cpu_id;
} FetchObject;

static inline void getitem_span(uint32_t name, uint64_t start, PyObject* idx, uint16_t scope) {
  const uint64_t end = stallprof_now_ns();
  /* arg: the sample index when it is an int (type(idx) is int), else 0 */
  uint64_t arg = 0;
  if (idx != NULL && PyLong_CheckExact(idx)) {
    arg = PyLong_AsUnsignedLongLongMask(idx);
    if (arg == (uint64_t)-1 && PyErr_Occurred()) PyErr_Clear();
  }
  stallprof_span_complete(name, start, end >= start ? end - start : 0, arg, scope);
}

/* The fetcher's auto_collation (batches of indices, not single samples): 1, 0,
 * or -1 with an exception set. */
static int auto_collation(PyObject* fetcher) {
  PyObject* value = PyObject_GetAttr(fetcher, g_str_auto_collation);
  const int batched = value == NULL ? -1 : PyObject_IsTrue(value);
  Py_XDECREF(value);
  return batched;
}

/* _MapDatasetFetcher.fetch's samples, a getitem span each (torch's own logic:
 * __getitems__ when the dataset has it, then no getitem spans). New ref. */
static PyObject* map_samples(FetchObject* f, PyObject* fetcher, PyObject* indices, uint16_t scope) {
  PyObject* dataset = PyObject_GetAttr(fetcher, g_str_dataset);
  if (dataset == NULL) return NULL;
  const int batched = auto_collation(fetcher);
  PyObject* data = NULL;
  if (batched < 0) goto done;
  if (!batched) {
    const uint64_t start = stallprof_now_ns();
    data = PyObject_GetItem(dataset, indices);
    if (data != NULL) getitem_span(f->getitem_id, start, indices, scope);
    goto done;
  }
  PyObject* getitems;
  if (optional_attr(dataset, g_str_getitems, &getitems) < 0) goto done;
  if (getitems != NULL) {
    int has = PyObject_IsTrue(getitems);
    if (has != 0) {
      if (has > 0) data = PyObject_CallOneArg(getitems, indices);
      Py_DECREF(getitems);
      goto done;
    }
    Py_DECREF(getitems);
  }
  data = PyList_New(0);
  if (data == NULL) goto done;
  PyObject* iter = PyObject_GetIter(indices);
  if (iter == NULL) goto fail;
  PyObject* idx;
  while ((idx = PyIter_Next(iter)) != NULL) {
    const uint64_t start = stallprof_now_ns();
    PyObject* item = PyObject_GetItem(dataset, idx);
    if (item == NULL || PyList_Append(data, item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(idx);
      Py_DECREF(iter);
      goto fail;
    }
    Py_DECREF(item);
    getitem_span(f->getitem_id, start, idx, scope);
    Py_DECREF(idx);
  }
  Py_DECREF(iter);
  if (PyErr_Occurred()) goto fail;
  goto done;
fail:
  Py_CLEAR(data);
done:
  Py_DECREF(dataset);
  return data;
}

/* next(it) as the builtin does it; NULL with StopIteration set at the end. */
static PyObject* next_item(PyObject* it) {
  if (!PyIter_Check(it)) {
    PyErr_Format(PyExc_TypeError, "'%.200s' object is not an iterator", Py_TYPE(it)->tp_name);
    return NULL;
  }
  PyObject* item = (*Py_TYPE(it)->tp_iternext)(it);
  if (item == NULL && !PyErr_Occurred()) PyErr_SetNone(PyExc_StopIteration);
  return item;
}

/* _IterableDatasetFetcher.fetch's samples, a getitem span (arg 0) each; raises
 * StopIteration when the stream has no (complete, with drop_last) batch left. */
static PyObject* iterable_samples(FetchObject* f, PyObject* fetcher, PyObject* indices, uint16_t scope) {
  PyObject* it = PyObject_GetAttr(fetcher, g_str_dataset_iter);
  if (it == NULL) return NULL;
  const int batched = auto_collation(fetcher);
  PyObject* data = NULL;
  if (batched < 0) goto done;
  if (!batched) {
    const uint64_t start = stallprof_now_ns();
    data = next_item(it);
    if (data != NULL) getitem_span(f->getitem_id, start, NULL, scope);
    goto done;
  }
  data = PyList_New(0);
  if (data == NULL) goto done;
  PyObject* iter = PyObject_GetIter(indices);
  if (iter == NULL) goto fail;
  PyObject* idx;
  while ((idx = PyIter_Next(iter)) != NULL) {
    Py_DECREF(idx);
    const uint64_t start = stallprof_now_ns();
    PyObject* item = next_item(it);
    if (item == NULL) {
      if (!PyErr_ExceptionMatches(PyExc_StopIteration)) {
        Py_DECREF(iter);
        goto fail;
      }
      PyErr_Clear();
      if (PyObject_SetAttr(fetcher, g_str_ended, Py_True) < 0) {
        Py_DECREF(iter);
        goto fail;
      }
      break;
    }
    int rc = PyList_Append(data, item);
    Py_DECREF(item);
    if (rc < 0) {
      Py_DECREF(iter);
      goto fail;
    }
    getitem_span(f->getitem_id, start, NULL, scope);
  }
  Py_DECREF(iter);
  if (PyErr_Occurred()) goto fail;
  Py_ssize_t got = PyList_GET_SIZE(data);
  int short_batch = 0;
  if (got > 0) {
    PyObject* drop_last = PyObject_GetAttr(fetcher, g_str_drop_last);
    if (drop_last == NULL) goto fail;
    int drop = PyObject_IsTrue(drop_last);
    Py_DECREF(drop_last);
    if (drop < 0) goto fail;
    if (drop) {
      Py_ssize_t wanted = PyObject_Length(indices);
      if (wanted < 0) goto fail;
      short_batch = got < wanted;
    }
  }
  if (got == 0 || short_batch) {
    PyErr_SetNone(PyExc_StopIteration);
    goto fail;
  }
  goto done;
fail:
  Py_CLEAR(data);
done:
  Py_DECREF(it);
  return data;
}

/* The batch index this fetch is for: the one NextWrapper or set_batch_index
 * announced, else the fetcher's own count (a fetch called outside them). */
static int64_t take_batch_index(PyObject* fetcher) {
  const int64_t announced = t_batch_index;
  if (announced >= 0) {
    t_batch_index = -1;
    return announced;
  }
  PyObject* count;
  int64_t next = 0;
  if (optional_attr(fetcher, g_str_count, &count) < 0) PyErr_Clear();
  if (count != NULL) {
    if (PyLong_Check(count)) next = PyLong_AsLongLong(count) + 1;
    if (PyErr_Occurred()) PyErr_Clear();
    Py_DECREF(count);
  }
  PyObject* value = PyLong_FromLongLong(next);
  if (value == NULL || PyObject_SetAttr(fetcher, g_str_count, value) < 0) PyErr_Clear();
  Py_XDECREF(value);
  return next < 0 ? 0 : next;
}

/* ---- the GIL probe: does a fetch let the GIL go? ----------------------------
 * A worker's fetch that holds the GIL stalls the worker's sending thread, so
 * its batch reaches the main process only when the fetch ends (docs/model.md
 * "A fetch that holds the GIL"). A profile with workers sees that in when
 * batches arrive; one with num_workers=0 has no sending thread to watch. So
 * there a thread of the hook's own does what a sending thread does: at the
 * start of a main-process fetch it asks for the GIL, up to GIL_PROBE_ASKS
 * times with a pause off it between asks (a sending thread needs it several
 * times a batch: one ask won a torch op's brief release on a host that wakes
 * threads fast, while the real sends waited), and records a gil_probe span
 * from its first ask, as long as its waits summed, arg = the switch interval
 * in ns (after which the interpreter forces the holder to let go). Analysis
 * holds it against the fetch span it began in. The probe runs no Python code, but
 * where the main thread holds the GIL the forced switch costs it 0.6-1.4 ms
 * (wake-ups across cores; measured on a 2-vCPU VM; the asks that win brief
 * releases, 0.77 ms a probe of a fetch with a torch op per sample), so the first 16 probes
 * (analysis needs 10 that land inside a fetch) are 50 ms apart, the rest 1 s,
 * a process makes 64 at most (about 10-20 ms once, then 0.06-0.14% of the
 * main thread), and only after two fetches in a row of 1 ms or more: a probe
 * woken after a shorter fetch ended tells nothing and would cost all the
 * same (1.2% of a 2 s run of a fast loader, whose fetches take
 * microseconds). One long fetch is not enough: a process's first is cold
 * (0.87-0.90 ms where the later ones took 0.07-0.12 ms, over 1 ms in a slow
 * minute of the host, which then probed a fast loader).
 * In a worker process the same probe answers where the batches' arrival
 * cannot: a main loop that asks for each batch within 0.5 ms of the worker's
 * next fetch ending (a step shorter than the fetch) shows no held or sent
 * batch (analysis PrefetchStats::sends_held). There it runs beside the
 * worker's own sending threads, at most GIL_PROBE_WORKER_MAX a worker
 * process, 50 ms apart (a 1-worker epoch of 0.4 s gives 8), and at most
 * GIL_PROBE_LOADER_MAX over all the worker processes of one loader:
 * non-persistent workers start again each epoch, and a held probe of a fetch
 * longer than the switch interval costs its worker a forced switch (about a
 * millisecond), so each loader pays at most GIL_PROBE_LOADER_MAX of them.
 * The loader's budget is a counter in a shared page every forked process
 * inherits, taken from by the probes themselves: a loader whose fetches are
 * too short to probe spends none of it, and one loader's workers none of
 * another's (a budget handed to the first processes forked went to a fast
 * loader's workers, which never probed, and left a later held loader none). */
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

#define GIL_PROBE_FIRST 16
#define GIL_PROBE_FIRST_EVERY_NS 50000000ull
#define GIL_PROBE_THEN_EVERY_NS 1000000000ull
#define GIL_PROBE_MAX 64
#define GIL_PROBE_MIN_FETCH_NS 1000000ull
#define GIL_PROBE_ASKS 16
#define GIL_PROBE_PAUSE_NS 50000
#define GIL_PROBE_WORKER_MAX 12
#define GIL_PROBE_LOADER_MAX 48
#define GIL_PROBE_LOADER_SLOTS 256 /* loaders by scope modulo this */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int enabled;                 /* start_gil_probe was called in this process or its parent */
  int thread_started;          /* this process's probe thread runs */
  int busy;                    /* a probe is pending or running (main sets, probe clears) */
  uint64_t request_ns;         /* the probed fetch's start; 0: nothing asked */
  uint64_t fetch_end_ns;       /* the probed fetch's end (main sets); 0: not ended */
  uint16_t scope;
  uint32_t name;
  uint64_t switch_interval_ns;
  uint64_t next_due_ns;
  unsigned long_fetches; /* fetches of 1 ms or more in a row, of those timed (when a probe was due) */
  unsigned left;
  /* Probes left for each loader's worker processes (a MAP_SHARED page the
   * forked workers inherit); NULL where it could not be mapped, or in a
   * spawned worker: each worker process then has its own GIL_PROBE_WORKER_MAX. */
  uint32_t* loader_left;
  PyInterpreterState* interp;
} g_probe = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void* gil_probe_thread(void* unused) {
  (void)unused;
  PyThreadState* ts = PyThreadState_New(g_probe.interp); /* needs no GIL */
  if (ts == NULL) return NULL;
  for (;;) {
    pthread_mutex_lock(&g_probe.mu);
    while (g_probe.request_ns == 0) pthread_cond_wait(&g_probe.cv, &g_probe.mu);
    g_probe.request_ns = 0;
    const uint16_t scope = g_probe.scope;
    pthread_mutex_unlock(&g_probe.mu);
    /* Asks GIL_PROBE_ASKS times, as a sending thread does for one batch, a
     * pause off the GIL between asks (its syscalls; the main thread takes the
     * GIL back meanwhile). The span is the sum of the waits, each counted up
     * to the fetch's end only (the step after it may hold the GIL too), from
     * the first ask; it stops at the fetch's end or once the waits reach half
     * the switch interval (held either way: each further forced switch costs
     * the main thread about a millisecond). */
    const uint64_t first_ask = stallprof_now_ns();
    const uint64_t enough_ns = g_probe.switch_interval_ns / 2;
    uint64_t waited = 0;
    for (int n = 0; n < GIL_PROBE_ASKS; n++) {
      const uint64_t ask = n == 0 ? first_ask : stallprof_now_ns();
      PyEval_RestoreThread(ts); /* the wait a sending thread has; exits this thread if the interpreter is finalizing */
      const uint64_t got = stallprof_now_ns();
      ts = PyEval_SaveThread();
      const uint64_t ended = __atomic_load_n(&g_probe.fetch_end_ns, __ATOMIC_ACQUIRE);
      const uint64_t until = ended != 0 && ended < got ? ended : got;
      waited += until > ask ? until - ask : 0;
      if (ended != 0 || waited >= enough_ns) break;
      const struct timespec pause = {0, GIL_PROBE_PAUSE_NS};
      nanosleep(&pause, NULL);
    }
    __atomic_store_n(&g_probe.busy, 0, __ATOMIC_RELEASE);
    stallprof_span_complete(g_probe.name, first_ask, waited, g_probe.switch_interval_ns, scope);
  }
  return NULL;
}

/* Takes one probe from the budget of loader `scope`'s workers: 0 when spent. */
static int gil_probe_take_loader(uint16_t scope) {
  if (g_probe.loader_left == NULL) return 1;
  uint32_t* slot = &g_probe.loader_left[scope % GIL_PROBE_LOADER_SLOTS];
  uint32_t left = __atomic_load_n(slot, __ATOMIC_RELAXED);
  while (left > 0 && !__atomic_compare_exchange_n(slot, &left, left - 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return left > 0;
}

static void gil_probe_after_fork_child(void) {
  /* The child has no probe thread (and Python dropped its thread state). */
  pthread_mutex_init(&g_probe.mu, NULL);
  pthread_cond_init(&g_probe.cv, NULL);
  g_probe.thread_started = 0;
  g_probe.busy = 0;
  g_probe.request_ns = 0;
  g_probe.fetch_end_ns = 0;
  g_probe.left = GIL_PROBE_WORKER_MAX;
  g_probe.long_fetches = 0;
}

/* At the start of a fetch, holding the GIL: when a probe is due, asks the
 * probe thread to probe this fetch if the last two fetches timed took 1 ms or
 * more. Returns the fetch's start when gil_probe_fetch_ended should time it (a
 * probe is due), else 0: a fetch between probes reads one clock. */
static uint64_t gil_probe_fetch_started(uint16_t scope, int in_worker) {
  if (!g_probe.enabled || g_probe.left == 0) return 0;
  const uint64_t now = stallprof_now_ns();
  if (now < g_probe.next_due_ns || __atomic_load_n(&g_probe.busy, __ATOMIC_ACQUIRE)) return 0;
  if (g_probe.long_fetches < 2) return now; /* timed first */
  if (in_worker && g_probe.left > GIL_PROBE_WORKER_MAX) g_probe.left = GIL_PROBE_WORKER_MAX;
  if (in_worker && !gil_probe_take_loader(scope)) {
    g_probe.left = 0; /* its loader's workers have had theirs */
    return 0;
  }
  g_probe.left--;
  g_probe.next_due_ns = now + (in_worker || GIL_PROBE_MAX - g_probe.left <= GIL_PROBE_FIRST ? GIL_PROBE_FIRST_EVERY_NS
                                                                                           : GIL_PROBE_THEN_EVERY_NS);
  if (!g_probe.thread_started) {
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    const int rc = pthread_create(&thread, &attr, gil_probe_thread, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      g_probe.enabled = 0;
      return 0;
    }
    g_probe.thread_started = 1;
  }
  __atomic_store_n(&g_probe.busy, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&g_probe.fetch_end_ns, 0, __ATOMIC_RELEASE);
  pthread_mutex_lock(&g_probe.mu);
  g_probe.scope = scope;
  g_probe.request_ns = now;
  pthread_cond_signal(&g_probe.cv);
  pthread_mutex_unlock(&g_probe.mu);
  return now;
}

/* Before a main-process fetch, holding the GIL: a probe asked at an earlier
 * fetch may still wait for the GIL long after that fetch ended (its wait is
 * counted up to that end, so its answer is in). On two or more cores the main
 * thread can keep it from the GIL for hundreds of ms: each brief release (a
 * torch op's) is retaken before the probe thread, woken on the other core,
 * gets there, and every retake restarts the probe's wait for a forced switch.
 * Its busy flag then blocks the probes due (3-8 of 16 in a 1.4 s run here
 * against 17 on one core), and fewer than 10 leave the GIL unmeasured. So
 * where a probe is due and the last one is still waiting, the main thread lets
 * the GIL go until the probe has had it (2 ms at most), outside the fetch: at
 * most once per due probe (64 a process). */
static void gil_probe_unstick(void) {
  if (!g_probe.enabled || g_probe.left == 0 || !__atomic_load_n(&g_probe.busy, __ATOMIC_ACQUIRE)) return;
  const uint64_t now = stallprof_now_ns();
  if (now < g_probe.next_due_ns) return;
  Py_BEGIN_ALLOW_THREADS
  const struct timespec pause = {0, 20000};
  for (uint64_t t = now; __atomic_load_n(&g_probe.busy, __ATOMIC_ACQUIRE) && t < now + 2000000ull; t = stallprof_now_ns())
    nanosleep(&pause, NULL);
  Py_END_ALLOW_THREADS
}

static void gil_probe_fetch_ended(uint64_t started) {
  const uint64_t now = stallprof_now_ns();
  __atomic_store_n(&g_probe.fetch_end_ns, now, __ATOMIC_RELEASE); /* the probe thread stops asking */
  if (now >= started + GIL_PROBE_MIN_FETCH_NS) {
    g_probe.long_fetches++;
    return;
  }
  /* Too short to probe: time another fetch later, not every one from now on. */
  g_probe.long_fetches = 0;
  g_probe.next_due_ns = now + GIL_PROBE_FIRST_EVERY_NS;
}

/* start_gil_probe(name, switch_interval_s) */
static PyObject* py_start_gil_probe(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  ARGS_AT_LEAST(2, "start_gil_probe")
  uint32_t name;
  if (!name_id(args[0], &name)) return NULL;
  const double interval_s = PyFloat_AsDouble(args[1]);
  if (interval_s < 0 && PyErr_Occurred()) return NULL;
  if (name == 0 || g_probe.enabled) Py_RETURN_NONE; /* not recording, or started already */
  static int at_fork_registered;
  if (!at_fork_registered && pthread_atfork(NULL, NULL, gil_probe_after_fork_child) != 0) Py_RETURN_NONE;
  at_fork_registered = 1;
  g_probe.name = name;
  g_probe.switch_interval_ns = (uint64_t)(interval_s > 0 ? interval_s * 1e9 : 5e6);
  g_probe.interp = PyInterpreterState_Get();
  g_probe.left = GIL_PROBE_MAX;
  void* page = mmap(NULL, GIL_PROBE_LOADER_SLOTS * sizeof(uint32_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                    -1, 0);
  if (page != MAP_FAILED) {
    g_probe.loader_left = page;
    for (int i = 0; i < GIL_PROBE_LOADER_SLOTS; i++) g_probe.loader_left[i] = GIL_PROBE_LOADER_MAX;
  }
  g_probe.enabled = 1;
  Py_RETURN_NONE;
}

/* fetch(fetcher, possibly_batched_index): the batch (samples, then collate)
 * inside a fetch span (arg = batch index) with its getitem and collate spans.
 * The counters (CPU, delay, the thread's io and system CPU) all or none: by
 * the budget, always on batches 0, 1, 2, 4, 8, ...; with them, right after
 * the fetch span, read_storage, read_calls and system_cpu spans that contain
 * it. A StopIteration (the stream ended: no batch) records no fetch span. */
static PyObject* Fetch_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  FetchObject* f = (FetchObject*)callable;
  if (PyVectorcall_NARGS(nargsf) != 2 || kwnames != NULL) {
    PyErr_SetString(PyExc_TypeError, "fetch(possibly_batched_index)");
    return NULL;
  }
  PyObject *fetcher = args[0], *indices = args[1];
  if (f->iterable) {
    PyObject* ended = PyObject_GetAttr(fetcher, g_str_ended);
    if (ended == NULL) return NULL;
    int is_ended = PyObject_IsTrue(ended);
    Py_DECREF(ended);
    if (is_ended < 0) return NULL;
    if (is_ended) {
      PyErr_SetNone(PyExc_StopIteration);
      return NULL;
    }
  }
  uint16_t scope = (uint16_t)attr_u64(fetcher, g_str_scope, 0);
  const int main_process_fetch = scope != 0;
  if (scope == 0) scope = g_worker_scope;
  const int64_t index = take_batch_index(fetcher);
  gil_probe_unstick(); /* before the fetch's counters and span */
  const int sampled = f->counters == FETCH_COUNTERS_BUDGET
                          ? (index & (index - 1)) == 0 || stallprof_counters_due()
                          : f->counters;
  uint64_t rchar0 = 0, read_bytes0 = 0, system0 = 0;
  int have_io = 0, have_system0 = 0;
  if (sampled && g_thread_io_ok) {
    if (stallprof_thread_io(&rchar0, &read_bytes0) == 0) {
      have_io = 1;
      have_system0 = stallprof_thread_system_ns(&system0) == 0;
    } else {
      g_thread_io_ok = 0;
    }
  }
  const uint64_t io_start = have_io ? stallprof_now_ns() : 0; /* the read spans' start, only when they are recorded */
  stallprof_span span;
  stallprof_span_begin(&span, f->fetch_id, scope, sampled ? STALLPROF_SPAN_CPU_ALWAYS : STALLPROF_SPAN_WALL);
  /* Asked after the span began: a probe thread woken at once (15 us) asked
   * before the counter reads above ended, outside the fetch it was to probe. */
  const uint64_t probe_clock = gil_probe_fetch_started(scope, !main_process_fetch);
  PyObject* data = f->iterable ? iterable_samples(f, fetcher, indices, scope) : map_samples(f, fetcher, indices, scope);
  PyObject* batch = NULL;
  if (data != NULL) {
    PyObject* collate_fn = PyObject_GetAttr(fetcher, g_str_collate_fn);
    if (collate_fn != NULL) {
      const uint64_t start = stallprof_now_ns();
      batch = PyObject_CallOneArg(collate_fn, data);
      Py_DECREF(collate_fn);
      if (batch != NULL) {
        const uint64_t end = stallprof_now_ns();
        stallprof_span_complete(f->collate_id, start, end >= start ? end - start : 0, (uint64_t)index, scope);
      }
    }
    Py_DECREF(data);
  }
  if (probe_clock != 0) gil_probe_fetch_ended(probe_clock);
  if (batch == NULL) {
    /* no batch (the stream ended): not a fetch, so fetch spans == batches */
    if (!PyErr_ExceptionMatches(PyExc_StopIteration)) stallprof_span_end(&span, (uint64_t)index);
    return NULL;
  }
  stallprof_span_end(&span, (uint64_t)index);
  if (have_io) {
    /* After the fetch span, so the read spans contain it (start earlier, end
     * later) and come after it in the thread's record order. */
    uint64_t rchar1, read_bytes1, system1;
    if (stallprof_thread_io(&rchar1, &read_bytes1) != 0) {
      g_thread_io_ok = 0;
      return batch;
    }
    const int have_system1 = stallprof_thread_system_ns(&system1) == 0;
    const uint64_t end = stallprof_now_ns();
    const uint64_t duration = end >= io_start ? end - io_start : 0;
    stallprof_span_complete(f->read_storage_id, io_start, duration,
                            read_bytes1 > read_bytes0 ? read_bytes1 - read_bytes0 : 0, scope);
    stallprof_span_complete(f->read_calls_id, io_start, duration, rchar1 > rchar0 ? rchar1 - rchar0 : 0, scope);
    if (have_system0 && have_system1) /* the kernel's share of the fetch: holds what storage misses cost */
      stallprof_span_complete(f->system_cpu_id, io_start, duration, system1 > system0 ? system1 - system0 : 0, scope);
  }
  return batch;
}

/* Fetch(iterable, (fetch, getitem, collate, read_storage, read_calls, system_cpu), counters=None) */
static PyObject* Fetch_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  int iterable;
  PyObject *names, *counters = Py_None;
  if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
    PyErr_SetString(PyExc_TypeError, "Fetch(iterable, names, counters=None)");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "pO!|O:Fetch", &iterable, &PyTuple_Type, &names, &counters)) return NULL;
  if (PyTuple_GET_SIZE(names) != 6) {
    PyErr_SetString(PyExc_TypeError, "Fetch: names are (fetch, getitem, collate, read_storage, read_calls, system_cpu)");
    return NULL;
  }
  uint32_t ids[6];
  for (int i = 0; i < 6; i++)
    if (!name_id(PyTuple_GET_ITEM(names, i), &ids[i])) return NULL;
  int forced = counters == Py_None ? FETCH_COUNTERS_BUDGET : PyObject_IsTrue(counters);
  if (counters != Py_None && forced < 0) return NULL;
  FetchObject* self = (FetchObject*)type->tp_alloc(type, 0);
  if (self == NULL) return NULL;
  self->vectorcall = Fetch_vectorcall;
  self->iterable = iterable;
  self->counters = forced;
  self->fetch_id = ids[0];
  self->getitem_id = ids[1];
  self->collate_id = ids[2];
  self->read_storage_id = ids[3];
  self->read_calls_id = ids[4];
  self->system_cpu_id = ids[5];
  return (PyObject*)self;
}

static PyTypeObject FetchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stallprof._stallprof.Fetch",
    .tp_basicsize = sizeof(FetchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Fetch(iterable, names, counters=None): a dataset fetcher's fetch() with its fetch, getitem,\n"
              "collate and read spans.",
    .tp_new = Fetch_new,
    .tp_vectorcall_offset = offsetof(FetchObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = bind_method,
};

static PyObject* py_set_batch_index(PyObject* self, PyObject* index) {
  (void)self;
  long long value = PyLong_AsLongLong(index);
  if (value == -1 && PyErr_Occurred()) return NULL;
  t_batch_index = value < 0 ? -1 : value;
  Py_RETURN_NONE;
}

static PyObject* py_set_worker_scope(PyObject* self, PyObject* scope) {
  (void)self;
  uint64_t value;
  if (!to_u64(scope, &value)) return NULL;
  g_worker_scope = (uint16_t)value;
  Py_RETURN_NONE;
}

/* ---- the exception that ended the process ------------------------------------
 * record_uncaught(), registered with atexit by the hook: the exception the
 * interpreter printed as uncaught (sys.last_value, sys.last_traceback; set
 * whatever sys.excepthook is) as config "uncaught_error" (one line), with
 * "uncaught_error_batch" and the loader's scope where the traceback passed
 * through a loader's iterator (the innermost frame whose `self` has a
 * _stallprof_scope). In C and without Python-level attribute hooks
 * (PyObject_GenericGetAttr: no __getattr__ runs) so that no Python signal
 * handler can run inside it: torch's SIGCHLD handler raises again at each
 * worker's exit wherever the main thread runs Python code, and once did
 * inside a Python excepthook (the record lost, "Error in sys.excepthook"
 * printed). */

/* obj.<name> as a u64 by the generic lookup (instance dict, type), -1 when missing or not an int. */
static int64_t generic_attr_u64(PyObject* obj, const char* name) {
  PyObject* key = PyUnicode_FromString(name);
  if (key == NULL) {
    PyErr_Clear();
    return -1;
  }
  PyObject* value = PyObject_GenericGetAttr(obj, key);
  Py_DECREF(key);
  int64_t out = -1;
  if (value == NULL) {
    PyErr_Clear();
  } else {
    if (PyLong_Check(value)) {
      const long long v = PyLong_AsLongLong(value);
      if (PyErr_Occurred()) PyErr_Clear();
      else if (v >= 0) out = v;
    }
    Py_DECREF(value);
  }
  return out;
}

/* [*begin, *end): the first (or with `last`, the last) line of s that is not blank, trimmed. */
static void pick_line(const char* s, int last, const char** begin, const char** end) {
  *begin = *end = s;
  for (const char* p = s; *p;) {
    const char* b = p;
    while (*p && *p != '\n') ++p;
    const char* e = p;
    if (*p) ++p;
    while (b < e && (*b == ' ' || *b == '\t' || *b == '\r')) ++b;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) --e;
    if (b < e) {
      *begin = b;
      *end = e;
      if (!last) return;
    }
  }
}

/* The file name after its last '/'. */
static const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

/* "file.py:LINE in FUNC" of the last `File "...", line N, in F` line of a
 * traceback held in a message (torch's "Original Traceback" of a worker's
 * exception, torch.multiprocessing.spawn's of a rank's), into out; 0 when
 * there is none. */
static int original_site(const char* message, char* out, size_t size) {
  const char* at = NULL;
  for (const char* p = strstr(message, "File \""); p != NULL; p = strstr(p + 1, "File \"")) at = p;
  if (at == NULL) return 0;
  const char* path = at + 6;
  const char* path_end = strchr(path, '"');
  if (path_end == NULL || strncmp(path_end, "\", line ", 8) != 0) return 0;
  char* after;
  const long line = strtol(path_end + 8, &after, 10);
  if (strncmp(after, ", in ", 5) != 0) return 0;
  const char* func = after + 5;
  size_t func_len = strcspn(func, "\r\n");
  const char* base = path;
  for (const char* p = path; p < path_end; ++p)
    if (*p == '/') base = p + 1;
  return snprintf(out, size, "%.*s:%ld in %.*s", (int)(path_end - base), base, line, (int)func_len, func) > 0;
}

static PyObject* py_record_uncaught(PyObject* self, PyObject* library_dirs) {
  (void)self;
  PyObject* exc = PySys_GetObject("last_value"); /* borrowed */
  if (exc == NULL || exc == Py_None || !PyExceptionInstance_Check(exc) ||
      PyErr_GivenExceptionMatches(exc, PyExc_KeyboardInterrupt)) /* a signal the launcher reports */
    Py_RETURN_NONE;
  int64_t scope = 0, batch = -1;
  char site[512] = ""; /* the innermost frame of the program's own code: not the standard library's, not a package's */
#if PY_VERSION_HEX >= 0x030B0000
  PyObject* tb = PySys_GetObject("last_traceback");
  for (PyObject* t = tb; t != NULL && PyTraceBack_Check(t); t = (PyObject*)((PyTracebackObject*)t)->tb_next) {
    PyCodeObject* code = PyFrame_GetCode(((PyTracebackObject*)t)->tb_frame);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* func = PyUnicode_AsUTF8(code->co_name);
    if (file == NULL || func == NULL) {
      PyErr_Clear();
    } else {
      int library = strstr(file, "-packages/") != NULL || file[0] == '<';
      for (Py_ssize_t d = 0; !library && PyTuple_Check(library_dirs) && d < PyTuple_GET_SIZE(library_dirs); ++d) {
        const char* dir = PyUnicode_Check(PyTuple_GET_ITEM(library_dirs, d)) ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(library_dirs, d)) : NULL;
        if (dir == NULL) PyErr_Clear();
        else library = dir[0] != '\0' && strncmp(file, dir, strlen(dir)) == 0;
      }
      if (!library) snprintf(site, sizeof site, "%s:%d in %s", base_name(file), ((PyTracebackObject*)t)->tb_lineno, func);
    }
    Py_DECREF(code);
    PyObject* locals = PyFrame_GetLocals(((PyTracebackObject*)t)->tb_frame);
    if (locals == NULL) {
      PyErr_Clear();
      continue;
    }
    PyObject* owner = PyDict_Check(locals) ? PyDict_GetItemString(locals, "self") : NULL; /* borrowed */
    if (owner != NULL) {
      const int64_t owner_scope = generic_attr_u64(owner, "_stallprof_scope");
      if (owner_scope > 0 && owner_scope <= UINT16_MAX) {
        scope = owner_scope;
        batch = generic_attr_u64(owner, "_num_yielded");
      }
    }
    Py_DECREF(locals);
  }
#endif
  char text[1024];
  const char* type_name = Py_TYPE(exc)->tp_name;
  const char* dot = strrchr(type_name, '.'); /* a static type's tp_name has its module: keep the class */
  if (dot != NULL) type_name = dot + 1;
  PyObject* str = PyObject_Str(exc);
  const char* message = str != NULL ? PyUnicode_AsUTF8(str) : NULL;
  if (message == NULL) {
    PyErr_Clear();
    message = "";
  }
  const char *first, *first_end, *final, *final_end;
  pick_line(message, 0, &first, &first_end);
  pick_line(message, 1, &final, &final_end);
  int n;
  char original[512];
  if (first == first_end) n = snprintf(text, sizeof text, "%s", type_name);
  else if (final != first && strstr(message, "Traceback (most recent call last)") != NULL) /* another process's, re-raised */
    n = original_site(message, original, sizeof original)
            ? snprintf(text, sizeof text, "%s: %.*s (%.*s, at %s)", type_name, (int)(first_end - first), first,
                       (int)(final_end - final), final, original)
            : snprintf(text, sizeof text, "%s: %.*s (%.*s)", type_name, (int)(first_end - first), first,
                       (int)(final_end - final), final);
  else n = snprintf(text, sizeof text, "%s: %.*s", type_name, (int)(first_end - first), first);
  if (site[0] != '\0' && n >= 0 && (size_t)n < sizeof text && strstr(message, "Traceback (most recent call last)") == NULL)
    n += snprintf(text + n, sizeof text - (size_t)n, " (at %s)", site);
  Py_XDECREF(str);
  /* A trace string holds up to 255 bytes: cut at a character's start. */
  if (n > 255 || n < 0) {
    size_t cut = 252;
    while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80) --cut;
    memcpy(text + cut, "...", 4);
  }
  stallprof_config_str((uint16_t)scope, "uncaught_error", text);
  if (scope > 0 && batch >= 0) stallprof_config_u64((uint16_t)scope, "uncaught_error_batch", (uint64_t)batch);
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"record_uncaught", py_record_uncaught, METH_O,
     "record_uncaught(library_dirs): at exit, the exception sys.last_value holds (the uncaught one) as config "
     "uncaught_error, at the innermost frame of a file outside library_dirs (a tuple of path prefixes) and packages."},
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
    {"set_batch_index", py_set_batch_index, METH_O,
     "set_batch_index(i): the calling thread's next fetch is for batch i (a worker, from its index queue)."},
    {"set_worker_scope", py_set_worker_scope, METH_O, "set_worker_scope(scope): the loader this worker serves."},
    {"start_gil_probe", (PyCFunction)(void (*)(void))py_start_gil_probe, METH_FASTCALL,
     "start_gil_probe(name, switch_interval_s): probe whether main-process fetches hold the GIL."},
    {"set_stage_decorator", py_set_stage_decorator, METH_O,
     "set_stage_decorator(fn): fn(name, scope, function) makes @stage(name, scope) wrappers."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_stallprof", "stallprof C fast path", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__stallprof(void) {
  if (PyType_Ready(&SpanType) < 0) return NULL;
  StageType.tp_base = &SpanType;
  if (PyType_Ready(&StageType) < 0 || PyType_Ready(&NextWrapperType) < 0 || PyType_Ready(&FetchType) < 0) return NULL;
  const char* attrs[] = {"_stallprof_scope", "_num_yielded", "dataset", "auto_collation", "collate_fn",
                         "__getitems__", "dataset_iter", "ended", "drop_last", "_stallprof_count"};
  PyObject** interned[] = {&g_str_scope, &g_str_num_yielded, &g_str_dataset, &g_str_auto_collation,
                           &g_str_collate_fn, &g_str_getitems, &g_str_dataset_iter, &g_str_ended,
                           &g_str_drop_last, &g_str_count};
  for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
    if ((*interned[i] = PyUnicode_InternFromString(attrs[i])) == NULL) return NULL;
  g_main_thread = PyThread_get_thread_ident();
  PyObject* m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  g_name_cache = PyDict_New();
  if (g_name_cache == NULL) return NULL;
  Py_INCREF(&SpanType);
  if (PyModule_AddObject(m, "Span", (PyObject*)&SpanType) < 0) return NULL;
  PyTypeObject* types[] = {&StageType, &NextWrapperType, &FetchType};
  const char* type_names[] = {"Stage", "NextWrapper", "Fetch"};
  for (int i = 0; i < 3; i++) {
    Py_INCREF(types[i]);
    if (PyModule_AddObject(m, type_names[i], (PyObject*)types[i]) < 0) return NULL;
  }
  PyModule_AddIntConstant(m, "OK", STALLPROF_OK);
  PyModule_AddIntConstant(m, "DISABLED", STALLPROF_DISABLED);
  PyModule_AddIntConstant(m, "ERR_VERSION", STALLPROF_ERR_VERSION);
  PyModule_AddIntConstant(m, "ERR_ATTACH", STALLPROF_ERR_ATTACH);
  PyModule_AddIntConstant(m, "COUNTERS_SAMPLED", COUNTERS_SAMPLED);
  PyModule_AddIntConstant(m, "COUNTERS_ALWAYS", COUNTERS_ALWAYS);
  return m;
}
