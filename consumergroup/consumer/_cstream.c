/* MessageStream and BatchStream: PartitionConsumer.messages() and .batches() without
 * CPython's async-generator protocol (consumergroup/consumer/partition.py is the caller).
 *
 * An async generator hands out each value through a fresh `asend` awaitable, a wrapped
 * value and a StopIteration set and fetched by the caller: ~1,000 instructions per
 * item. These objects are their own awaitables: an await returns the next item through
 * am_send's PYGEN_RETURN, with no allocation and no exception.
 *
 * MessageStream takes the next message of the current list iterator (the
 * PartitionConsumer's `_current`). When that runs out it calls `pc._next_messages()`, a
 * plain method, which returns the next iterator, or what to wait for first: a future
 * (the stream then awaits it itself, through the future's own iterator, and asks again
 * once it is resolved) or None (yield once to the event loop, then ask again); it raises
 * StopAsyncIteration at the end, or the partition's error. BatchStream is the same over
 * `pc._next_batch()`, whose lists are handed out as they are. So a reader that waits for
 * its next record set costs one future and no coroutine: a caught-up partition does
 * that for each record set.
 *
 * The list iterator is the PartitionConsumer's own, so stop()/seek() (which exhaust it)
 * end the stream between two messages, and a new stream resumes where one left off.
 * A cancellation while waiting reaches the future's iterator and ends the await; the
 * stream can be awaited again afterwards.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "../_cslots.h"

typedef struct {
    PyObject_HEAD
    PyObject *pc;     /* the PartitionConsumer */
    PyObject *it;     /* MessageStream: its `_current` list iterator as last returned */
    PyObject *slow;   /* the iterator of the awaitable being waited on, or NULL */
    PyObject *step;   /* the pc's method name: "_next_messages" or "_next_batch" */
    int pending;      /* __anext__ was called and its await has not completed */
    int running;      /* inside the pc's step or the wait: send/throw/close are refused */
} Stream;

static PyObject *str_next_messages;  /* "_next_messages" */
static PyObject *str_next_batch;     /* "_next_batch" */
static PyTypeObject BatchStreamType;  /* StreamType's copy (made at import), its own name */

static int
stream_init(Stream *self, PyObject *args, PyObject *kwds)
{
    PyObject *pc;
    if (!PyArg_ParseTuple(args, "O:MessageStream", &pc)) {
        return -1;
    }
    if (self->running) { /* re-initialised from inside its own step: it would be freed */
        PyErr_SetString(PyExc_ValueError, "MessageStream already executing");
        return -1;
    }
    Py_INCREF(pc);
    Py_XSETREF(self->pc, pc);
    Py_CLEAR(self->it);  /* the first await asks the pc, which reads _current */
    Py_CLEAR(self->slow);
    Py_XSETREF(self->step, Py_NewRef(PyObject_TypeCheck(self, &BatchStreamType)
                                         ? str_next_batch
                                         : str_next_messages));
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
    Py_CLEAR(self->step);
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

/* __anext__: the stream is its own awaitable; the item is taken when awaited, so an
 * __anext__() never awaited loses nothing. */
static PyObject *
stream_anext(Stream *self)
{
    self->pending = 1;
    Py_INCREF(self);
    return (PyObject *)self;
}

/* Refuse a stream that cannot be driven now: made by __new__ without __init__ (no pc),
 * or re-entered from inside its own step or wait. Returns 0, or -1 with an error set. */
static int
stream_check(Stream *self)
{
    if (self->pc == NULL || self->step == NULL) {
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

/* One send into the awaitable's iterator `slow`. PYGEN_RETURN: the wait is over (its
 * result dropped), the caller asks the pc again. */
static PySendResult
stream_wait(Stream *self, PyObject *arg, PyObject **result)
{
    self->running = 1;
    PySendResult status = PyIter_Send(self->slow, arg, result);
    self->running = 0;
    if (status == PYGEN_NEXT) {
        return status; /* the future goes up to the task */
    }
    Py_CLEAR(self->slow);
    if (status == PYGEN_RETURN) {
        Py_CLEAR(*result);
    }
    return status;
}

static PySendResult
stream_am_send(Stream *self, PyObject *arg, PyObject **result)
{
    *result = NULL;
    if (stream_check(self) < 0) {
        return PYGEN_ERROR;
    }
    if (!self->pending) {
        PyErr_SetString(PyExc_RuntimeError,
                        "MessageStream: await of a __anext__() that already completed");
        return PYGEN_ERROR;
    }
    PySendResult status;
    if (self->slow != NULL) {
        status = stream_wait(self, arg, result);
        if (status != PYGEN_RETURN) {
            goto out;
        }
    }
    for (;;) {
        if (self->it != NULL) {
            PyObject *msg = Py_TYPE(self->it)->tp_iternext(self->it);
            if (msg != NULL) {
                *result = msg;
                status = PYGEN_RETURN;
                goto out;
            }
            if (PyErr_Occurred()) {
                status = PYGEN_ERROR;
                goto out;
            }
            Py_CLEAR(self->it); /* this list is done: the pc says what comes next */
        }
        self->running = 1;
        PyObject *got = PyObject_CallMethodNoArgs(self->pc, self->step);
        self->running = 0;
        if (got == NULL) { /* StopAsyncIteration at the end, or the partition's error */
            status = PYGEN_ERROR;
            goto out;
        }
        if (got == Py_None) { /* yield once to the loop, then ask again */
            *result = got;
            return PYGEN_NEXT;
        }
        if (self->step == str_next_batch) {
            if (PyList_CheckExact(got)) {
                *result = got;
                status = PYGEN_RETURN;
                goto out;
            }
        }
        else if (PyIter_Check(got)) { /* its tp_iternext is called directly */
            Py_XSETREF(self->it, got);
            continue;
        }
        unaryfunc am_await = Py_TYPE(got)->tp_as_async ? Py_TYPE(got)->tp_as_async->am_await
                                                       : NULL;
        if (am_await == NULL) {
            PyErr_Format(PyExc_TypeError, "MessageStream: the partition's %U returned a "
                         "%.100s, not an item or an awaitable", self->step,
                         Py_TYPE(got)->tp_name);
            Py_DECREF(got);
            status = PYGEN_ERROR;
            goto out;
        }
        self->slow = am_await(got);
        Py_DECREF(got);
        if (self->slow == NULL) {
            status = PYGEN_ERROR;
            goto out;
        }
        status = stream_wait(self, Py_None, result);
        if (status != PYGEN_RETURN) {
            goto out;
        }
    }
out:
    if (status != PYGEN_NEXT) {
        self->pending = 0;
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

/* throw(): a cancellation while waiting reaches the awaitable being waited on. */
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
            /* The wait ended (returned through StopIteration, or raised): the next
             * __anext__ asks the pc again, which reads the current iterator itself. */
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



/* ---- Marks: OffsetManager.mark_message in C (consumergroup/group/offsets.py) ----
 *
 * session.mark_message(msg) runs once per message of a messages() loop; in Python it
 * is a function call of ~1,000 instructions, more than the iteration and the decoding's
 * share. This does the same in C: the position marked last (one claim's messages come
 * in runs of one partition) is compared with the message's topic and partition, and its
 * `last` offset moves forward; on a miss the position is looked up in the manager's
 * dict by (topic, partition), and nothing happens for a partition not owned. Slots are
 * read and written at their offsets (bound by the constructor) when the message is
 * exactly the bound ConsumerMessage class and the position the bound position class;
 * any other message type goes through getattr. `forget()` drops the cached position:
 * the manager calls it whenever its dict changes, so a released position is never
 * marked and a re-assigned partition's new position is found.
 */

enum { M_TOPIC, M_PARTITION, M_OFFSET, N_MSG_FIELDS };
static const char *const MSG_FIELDS[N_MSG_FIELDS] = {"topic", "partition", "offset"};
enum { P_TOPIC, P_PARTITION, P_LAST, P_METADATA, N_POS_FIELDS };
static const char *const POS_FIELDS[N_POS_FIELDS] = {"topic", "partition", "last", "metadata"};

typedef struct {
    PyObject_HEAD
    PyObject *positions;       /* the manager's {(topic, partition): position} dict */
    PyTypeObject *pos_type;    /* the position class */
    PyTypeObject *msg_type;    /* the message class read at fixed offsets */
    PyObject *hot;             /* the position marked last, or NULL */
    PyObject *empty;           /* "": the default metadata */
    Py_ssize_t msg_off[N_MSG_FIELDS];
    Py_ssize_t pos_off[N_POS_FIELDS];
} Marks;

static PyObject *str_metadata; /* "metadata" */
static PyObject *msg_names[N_MSG_FIELDS];

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

static int
marks_init(Marks *self, PyObject *args, PyObject *kwds)
{
    PyObject *positions;
    PyTypeObject *pos_type, *msg_type;
    if (!PyArg_ParseTuple(args, "O!O!O!:Marks", &PyDict_Type, &positions, &PyType_Type,
                          &pos_type, &PyType_Type, &msg_type)) {
        return -1;
    }
    if (member_offsets(pos_type, POS_FIELDS, N_POS_FIELDS, self->pos_off) < 0 ||
        member_offsets(msg_type, MSG_FIELDS, N_MSG_FIELDS, self->msg_off) < 0) {
        return -1;
    }
    Py_INCREF(positions);
    Py_XSETREF(self->positions, positions);
    Py_INCREF(pos_type);
    Py_XSETREF(self->pos_type, pos_type);
    Py_INCREF(msg_type);
    Py_XSETREF(self->msg_type, msg_type);
    Py_CLEAR(self->hot);
    Py_XSETREF(self->empty, PyUnicode_New(0, 0));
    return self->empty == NULL ? -1 : 0;
}

static int
marks_traverse(Marks *self, visitproc visit, void *arg)
{
    Py_VISIT(self->positions);
    Py_VISIT(self->pos_type);
    Py_VISIT(self->msg_type);
    Py_VISIT(self->hot);
    return 0;
}

static int
marks_clear(Marks *self)
{
    Py_CLEAR(self->positions);
    Py_CLEAR(self->pos_type);
    Py_CLEAR(self->msg_type);
    Py_CLEAR(self->hot);
    Py_CLEAR(self->empty);
    return 0;
}

static void
marks_dealloc(Marks *self)
{
    PyObject_GC_UnTrack(self);
    marks_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1 when `a` equals `b` (identity first: the decoder shares one topic and partition
 * object per chunk), 0 when not, -1 on error. */
static inline int
same(PyObject *a, PyObject *b)
{
    return a == b ? 1 : PyObject_RichCompareBool(a, b, Py_EQ);
}

/* A new reference to a slot of a position, which must be set (a dataclass sets them). */
static PyObject *
pos_slot(Marks *self, PyObject *pos, int field)
{
    PyObject *value = SLOT(pos, self->pos_off[field]);
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "Marks: position has no %s", POS_FIELDS[field]);
    }
    return Py_XNewRef(value);
}

/* The position of (topic, partition), as a new reference: the cached one when it
 * matches, else the dict's (then cached). NULL with no error: not owned. */
static PyObject *
marks_find(Marks *self, PyObject *topic, PyObject *partition)
{
    PyObject *pos = Py_XNewRef(self->hot);
    if (pos != NULL) {
        /* References held across the comparisons, which may run Python code. */
        PyObject *p_partition = pos_slot(self, pos, P_PARTITION);
        PyObject *p_topic = p_partition ? pos_slot(self, pos, P_TOPIC) : NULL;
        int hit = p_topic == NULL ? -1 : same(partition, p_partition);
        if (hit > 0) {
            hit = same(topic, p_topic);
        }
        Py_XDECREF(p_partition);
        Py_XDECREF(p_topic);
        if (hit) {
            if (hit < 0) {
                Py_CLEAR(pos);
            }
            return pos;
        }
        Py_CLEAR(pos);
    }
    PyObject *key = PyTuple_Pack(2, topic, partition);
    if (key == NULL) {
        return NULL;
    }
    pos = Py_XNewRef(PyDict_GetItemWithError(self->positions, key));
    Py_DECREF(key);
    if (pos == NULL) {
        return NULL;
    }
    if (!Py_IS_TYPE(pos, self->pos_type)) {
        PyErr_Format(PyExc_TypeError, "Marks: a position is a %.100s, not a %.100s",
                     Py_TYPE(pos)->tp_name, self->pos_type->tp_name);
        Py_DECREF(pos);
        return NULL;
    }
    Py_XSETREF(self->hot, Py_NewRef(pos));
    return pos;
}

static PyObject *
marks_mark_message(Marks *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs < 1 || nargs + nkw > 2 ||
        (nkw && PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), str_metadata) != 0)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "mark_message(msg, metadata='') takes a message "
                                             "and, optionally, its metadata string");
        }
        return NULL;
    }
    if (self->positions == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Marks is not initialised: create it as Marks(positions, position "
                        "class, message class)");
        return NULL;
    }
    PyObject *metadata = nargs + nkw == 2 ? args[1] : self->empty;
    PyObject *msg = args[0];
    PyObject *fields[N_MSG_FIELDS] = {NULL, NULL, NULL}; /* new references */
    PyObject *pos = NULL, *last = NULL, *result = NULL;
    int exact = Py_IS_TYPE(msg, self->msg_type);
    for (int i = 0; i < N_MSG_FIELDS; i++) {
        if (exact) {
            fields[i] = Py_XNewRef(SLOT(msg, self->msg_off[i]));
            if (fields[i] == NULL) {
                PyErr_SetObject(PyExc_AttributeError, msg_names[i]);
            }
        }
        else {
            fields[i] = PyObject_GetAttr(msg, msg_names[i]);
        }
        if (fields[i] == NULL) {
            goto done;
        }
    }
    pos = marks_find(self, fields[M_TOPIC], fields[M_PARTITION]);
    if (pos == NULL) {
        if (!PyErr_Occurred()) {
            result = Py_NewRef(Py_None); /* not owned (never assigned, or released) */
        }
        goto done;
    }
    last = pos_slot(self, pos, P_LAST);
    int ahead = last ? PyObject_RichCompareBool(fields[M_OFFSET], last, Py_GT) : -1;
    if (ahead < 0) {
        goto done;
    }
    if (ahead) {
        Py_XSETREF(SLOT(pos, self->pos_off[P_LAST]), Py_NewRef(fields[M_OFFSET]));
        Py_XSETREF(SLOT(pos, self->pos_off[P_METADATA]), Py_NewRef(metadata));
    }
    result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < N_MSG_FIELDS; i++) {
        Py_XDECREF(fields[i]);
    }
    Py_XDECREF(pos);
    Py_XDECREF(last);
    return result;
}

static PyObject *
marks_forget(Marks *self, PyObject *Py_UNUSED(ignored))
{
    Py_CLEAR(self->hot);
    Py_RETURN_NONE;
}

static PyMethodDef marks_methods[] = {
    {"mark_message", (PyCFunction)(void (*)(void))marks_mark_message,
     METH_FASTCALL | METH_KEYWORDS,
     "mark_message(msg, metadata='')\n--\n\nMove the position of msg's partition to "
     "msg.offset (the next to commit is one past it) if that is forward; ignored for a "
     "partition not owned."},
    {"forget", (PyCFunction)marks_forget, METH_NOARGS,
     "Drop the cached position (after the positions dict changed)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MarksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "consumergroup.consumer._cstream.Marks",
    .tp_doc = PyDoc_STR("Marks(positions, position class, message class): an "
                        "OffsetManager's mark_message in C."),
    .tp_basicsize = sizeof(Marks),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)marks_init,
    .tp_dealloc = (destructor)marks_dealloc,
    .tp_traverse = (traverseproc)marks_traverse,
    .tp_clear = (inquiry)marks_clear,
    .tp_methods = marks_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "consumergroup.consumer._cstream",
    .m_doc = "The per-message steps of a messages() or batches() loop in C: the streams "
             "(partition.py) and session.mark_message (offsets.py).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__cstream(void)
{
    str_next_messages = PyUnicode_InternFromString("_next_messages");
    str_next_batch = PyUnicode_InternFromString("_next_batch");
    str_metadata = PyUnicode_InternFromString("metadata");
    if (str_next_messages == NULL || str_next_batch == NULL || str_metadata == NULL) {
        return NULL;
    }
    for (int i = 0; i < N_MSG_FIELDS; i++) {
        if ((msg_names[i] = PyUnicode_InternFromString(MSG_FIELDS[i])) == NULL) {
            return NULL;
        }
    }
    BatchStreamType = StreamType; /* both not yet readied: a plain copy of the slots */
    BatchStreamType.tp_name = "consumergroup.consumer._cstream.BatchStream";
    BatchStreamType.tp_doc = PyDoc_STR("BatchStream(pc): pc.batches() as an async iterator in C.");
    if (PyType_Ready(&StreamType) < 0 || PyType_Ready(&BatchStreamType) < 0 ||
        PyType_Ready(&MarksType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "MessageStream", (PyObject *)&StreamType) < 0 ||
        PyModule_AddObjectRef(m, "BatchStream", (PyObject *)&BatchStreamType) < 0 ||
        PyModule_AddObjectRef(m, "Marks", (PyObject *)&MarksType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
