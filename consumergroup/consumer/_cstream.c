/* MessageStream: PartitionConsumer.messages() without CPython's async-generator protocol
 * per message (consumergroup/consumer/partition.py is the caller).
 *
 * An async generator hands out each value through a fresh `asend` awaitable, a wrapped
 * value and a StopIteration set and fetched by the caller: ~1,000 instructions per
 * message. This object is its own awaitable: its await takes the next message of the
 * current list iterator (the PartitionConsumer's `_current`) and returns it through
 * am_send's PYGEN_RETURN, with no allocation and no exception. When that list
 * runs out it awaits the Python coroutine `pc._refill()` instead (waiting for data,
 * stop(), errors, the end), forwarding send/throw/close to it, and then continues
 * with the new `_current`.
 *
 * The list iterator is the PartitionConsumer's own, so stop()/seek() (which exhaust it)
 * end the stream between two messages, and a new stream resumes where one left off.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    PyObject_HEAD
    PyObject *pc;     /* the PartitionConsumer */
    PyObject *it;     /* its `_current` list iterator as last seen, or NULL */
    PyObject *slow;   /* the pc._refill() coroutine being awaited, or NULL */
    int pending;      /* __anext__ was called and its await has not completed */
    int running;      /* inside pc._refill(): send/throw/close from there are refused */
} Stream;

static PyObject *str_refill;   /* "_refill" */
static PyObject *str_current;  /* "_current" */

static int
stream_init(Stream *self, PyObject *args, PyObject *kwds)
{
    PyObject *pc;
    if (!PyArg_ParseTuple(args, "O:MessageStream", &pc)) {
        return -1;
    }
    if (self->running) { /* re-initialised from inside pc._refill(): it would be freed */
        PyErr_SetString(PyExc_ValueError, "MessageStream already executing");
        return -1;
    }
    Py_INCREF(pc);
    Py_XSETREF(self->pc, pc);
    Py_CLEAR(self->it);  /* the first await asks pc._refill(), which reads _current */
    Py_CLEAR(self->slow);
    self->pending = 0;
    self->running = 0;
    return 0;
}

static int
stream_traverse(Stream *self, visitproc visit, void *arg)
{
    Py_VISIT(self->pc);
    Py_VISIT(self->it);
    Py_VISIT(self->slow);
    return 0;
}

static int
stream_clear(Stream *self)
{
    Py_CLEAR(self->pc);
    Py_CLEAR(self->it);
    Py_CLEAR(self->slow);
    return 0;
}

static void
stream_dealloc(Stream *self)
{
    PyObject_GC_UnTrack(self);
    stream_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
stream_self(PyObject *self)
{
    Py_INCREF(self);
    return self;
}

/* __anext__: the stream is its own awaitable; the message is taken when awaited, so an
 * __anext__() never awaited loses nothing. */
static PyObject *
stream_anext(Stream *self)
{
    self->pending = 1;
    Py_INCREF(self);
    return (PyObject *)self;
}

/* The pc's current list iterator after pc._refill() returned (NULL if none). */
static int
stream_reload(Stream *self)
{
    PyObject *current = PyObject_GetAttr(self->pc, str_current);
    if (current == NULL) {
        return -1;
    }
    if (current == Py_None) {
        Py_DECREF(current);
        current = NULL;
    }
    else if (!PyIter_Check(current)) { /* its tp_iternext is called directly */
        PyErr_Format(PyExc_TypeError, "MessageStream: _current is a %.100s, not an iterator",
                     Py_TYPE(current)->tp_name);
        Py_DECREF(current);
        return -1;
    }
    Py_XSETREF(self->it, current);
    return 0;
}

/* Refuse a stream that cannot be driven now: made by __new__ without __init__ (no pc),
 * or re-entered from inside its own pc._refill() (which would free the running
 * coroutine). Returns 0, or -1 with an error set. */
static int
stream_check(Stream *self)
{
    if (self->pc == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "MessageStream is not initialised: create it as MessageStream(pc)");
        return -1;
    }
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "MessageStream already executing");
        return -1;
    }
    return 0;
}

static PySendResult
stream_am_send(Stream *self, PyObject *arg, PyObject **result)
{
    if (stream_check(self) < 0) {
        *result = NULL;
        return PYGEN_ERROR;
    }
    if (!self->pending) {
        PyErr_SetString(PyExc_RuntimeError,
                        "MessageStream: await of a __anext__() that already completed");
        *result = NULL;
        return PYGEN_ERROR;
    }
    if (self->slow == NULL && self->it != NULL) {
        PyObject *msg = Py_TYPE(self->it)->tp_iternext(self->it);
        if (msg != NULL) {
            self->pending = 0;
            *result = msg;
            return PYGEN_RETURN;
        }
        if (PyErr_Occurred()) {
            self->pending = 0;
            *result = NULL;
            return PYGEN_ERROR;
        }
        Py_CLEAR(self->it);  /* this list is done: pc._refill() says what comes next */
    }
    if (self->slow == NULL) {
        self->slow = PyObject_CallMethodNoArgs(self->pc, str_refill);
        if (self->slow == NULL) {
            self->pending = 0;
            *result = NULL;
            return PYGEN_ERROR;
        }
    }
    self->running = 1;
    PySendResult status = PyIter_Send(self->slow, arg, result);
    self->running = 0;
    if (status == PYGEN_NEXT) {
        return status;  /* waiting for data: the yielded future goes up to the task */
    }
    Py_CLEAR(self->slow);
    self->pending = 0;
    if (status == PYGEN_RETURN && stream_reload(self) < 0) {
        Py_CLEAR(*result);
        return PYGEN_ERROR;
    }
    return status;
}

/* Iterator and `send` protocol (used by the interpreter while tracing is on). */
static PyObject *
stream_send_value(Stream *self, PyObject *arg)
{
    PyObject *result;
    PySendResult status = stream_am_send(self, arg, &result);
    if (status == PYGEN_NEXT) {
        return result;
    }
    if (status == PYGEN_RETURN) {
        PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, result);
        Py_DECREF(result);
        if (stop != NULL) {
            PyErr_SetObject(PyExc_StopIteration, stop);
            Py_DECREF(stop);
        }
    }
    return NULL;
}

static PyObject *
stream_iternext(Stream *self)
{
    return stream_send_value(self, Py_None);
}

static PyObject *
stream_send(Stream *self, PyObject *arg)
{
    return stream_send_value(self, arg);
}

/* throw(): cancellation while waiting in pc._refill() reaches it there. */
static PyObject *
stream_throw(Stream *self, PyObject *args)
{
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "MessageStream already executing");
        return NULL;
    }
    if (self->slow != NULL) {
        PyObject *meth = PyObject_GetAttrString(self->slow, "throw");
        if (meth == NULL) {
            return NULL;
        }
        self->running = 1;
        PyObject *ret = PyObject_Call(meth, args, NULL);
        self->running = 0;
        Py_DECREF(meth);
        if (ret == NULL) {
            /* pc._refill() ended (returned through StopIteration, or raised): the next
             * __anext__ asks it again, which reads the current iterator itself. */
            Py_CLEAR(self->slow);
            self->pending = 0;
        }
        return ret;
    }
    PyObject *typ, *val = NULL, *tb = NULL;
    if (!PyArg_UnpackTuple(args, "throw", 1, 3, &typ, &val, &tb)) {
        return NULL;
    }
    self->pending = 0;
    if (PyExceptionInstance_Check(typ)) {
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
    }
    else {
        PyErr_SetObject(typ, val);
    }
    return NULL;
}

static PyObject *
stream_close(Stream *self, PyObject *Py_UNUSED(ignored))
{
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "MessageStream already executing");
        return NULL;
    }
    self->pending = 0;
    if (self->slow != NULL) {
        PyObject *slow = self->slow;
        self->slow = NULL;
        self->running = 1;
        PyObject *ret = PyObject_CallMethod(slow, "close", NULL);
        self->running = 0;
        Py_DECREF(slow);
        if (ret == NULL) {
            return NULL;
        }
        Py_DECREF(ret);
    }
    Py_RETURN_NONE;
}

static PyMethodDef stream_methods[] = {
    {"send", (PyCFunction)stream_send, METH_O, "Send a value into the pending await."},
    {"throw", (PyCFunction)stream_throw, METH_VARARGS, "Raise in the pending await."},
    {"close", (PyCFunction)stream_close, METH_NOARGS, "Abandon the pending await."},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods stream_as_async = {
    .am_await = (unaryfunc)stream_self,
    .am_aiter = (unaryfunc)stream_self,
    .am_anext = (unaryfunc)stream_anext,
    .am_send = (sendfunc)stream_am_send,
};

static PyTypeObject StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "consumergroup.consumer._cstream.MessageStream",
    .tp_doc = PyDoc_STR("MessageStream(pc): pc.messages() as an async iterator in C."),
    .tp_basicsize = sizeof(Stream),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)stream_init,
    .tp_dealloc = (destructor)stream_dealloc,
    .tp_traverse = (traverseproc)stream_traverse,
    .tp_clear = (inquiry)stream_clear,
    .tp_as_async = &stream_as_async,
    .tp_iter = stream_self,
    .tp_iternext = (iternextfunc)stream_iternext,
    .tp_methods = stream_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "consumergroup.consumer._cstream",
    .m_doc = "PartitionConsumer.messages() as an async iterator in C (see partition.py).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__cstream(void)
{
    str_refill = PyUnicode_InternFromString("_refill");
    str_current = PyUnicode_InternFromString("_current");
    if (str_refill == NULL || str_current == NULL || PyType_Ready(&StreamType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&StreamType);
    if (PyModule_AddObject(m, "MessageStream", (PyObject *)&StreamType) < 0) {
        Py_DECREF(&StreamType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
