/* The producer's per-record work in C (consumergroup/producer/batch.py is the caller; its
 * pure-Python twins _py_append and _py_complete give the same results):
 *
 * append() encodes one message-format v2 record at the end of a batch's bytearray, when
 * send() queues it, so a batch is ready to go as soon as it is closed (no list of record
 * tuples, no builder pass):
 *
 *   Record => Length varint (bytes after it), Attributes int8 (0), TimestampDelta varlong,
 *             OffsetDelta varint, Key (varint length, -1: null) + bytes,
 *             Value (varint length, -1: null) + bytes,
 *             Headers varint count, then [varint length + UTF-8 key, varint length
 *             (-1: null) + bytes]
 *
 * complete() gives every record's future its RecordMetadata when the batch is
 * acknowledged: the objects are allocated with tp_alloc and their __slots__ filled
 * directly (offsets read from the class's member descriptors by bind()), skipping the
 * Python __init__ call, as _crecords.c does for ConsumerMessage.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_cslots.h"

/* The RecordMetadata fields, in the order of FIELD_NAMES. */
enum { F_TOPIC, F_PARTITION, F_OFFSET, F_TIMESTAMP, N_FIELDS };
static const char *const FIELD_NAMES[N_FIELDS] = {"topic", "partition", "offset", "timestamp_ms"};

typedef struct {
    PyTypeObject *md_type;          /* the bound RecordMetadata class (strong reference) */
    PyObject *invalid_state;        /* asyncio.InvalidStateError (strong reference) */
    Py_ssize_t offsets[N_FIELDS];   /* byte offset of each slot in an instance */
} module_state;

static module_state *
get_state(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* A zigzag varint of `v` into `p` (room for 10 bytes); returns the bytes written. */
static inline Py_ssize_t
put_varint(uint8_t *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 0;
    while (z >= 0x80) {
        p[n++] = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    p[n++] = (uint8_t)z;
    return n;
}

static inline Py_ssize_t
varint_size(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

/* bytes or None as (data, length); length -1 for None. */
static int
as_field(PyObject *obj, const char *what, const char **data, Py_ssize_t *len)
{
    if (obj == Py_None) {
        *data = NULL;
        *len = -1;
        return 0;
    }
    if (!PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "the record's %s must be bytes or None, not %s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *data = PyBytes_AS_STRING(obj);
    *len = PyBytes_GET_SIZE(obj);
    return 0;
}

static inline uint8_t *
put_field(uint8_t *p, const char *data, Py_ssize_t len)
{
    p += put_varint(p, len);
    if (len > 0) {
        memcpy(p, data, (size_t)len);
        p += len;
    }
    return p;
}

PyDoc_STRVAR(append_doc,
"append(buf, offset_delta, timestamp_delta, key, value, headers) -> int\n"
"\n"
"Encode one v2 record at the end of the bytearray `buf`; return the bytes it took.\n"
"`key`, `value`: bytes or None; `headers`: a tuple or list of (str, bytes | None).");

static PyObject *
append(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "append() takes 6 arguments");
        return NULL;
    }
    PyObject *buf = args[0], *headers = args[5];
    if (!PyByteArray_Check(buf)) {
        PyErr_SetString(PyExc_TypeError, "append() needs a bytearray");
        return NULL;
    }
    long long offset_delta = PyLong_AsLongLong(args[1]);
    long long ts_delta = PyLong_AsLongLong(args[2]);
    if ((offset_delta == -1 || ts_delta == -1) && PyErr_Occurred()) {
        return NULL;
    }
    const char *key, *value;
    Py_ssize_t key_len, value_len;
    if (as_field(args[3], "key", &key, &key_len) < 0 ||
        as_field(args[4], "value", &value, &value_len) < 0) {
        return NULL;
    }
    PyObject *fast = PySequence_Fast(headers, "headers must be a tuple or list");
    if (fast == NULL) {
        return NULL;
    }
    Py_ssize_t n_headers = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    /* The body's size first: the length prefix comes before it. */
    Py_ssize_t body = 1 + varint_size(ts_delta) + varint_size(offset_delta) +
                      varint_size(key_len) + (key_len > 0 ? key_len : 0) +
                      varint_size(value_len) + (value_len > 0 ? value_len : 0) +
                      varint_size(n_headers);
    for (Py_ssize_t i = 0; i < n_headers; i++) {
        PyObject *h = items[i];
        if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(h, 0))) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_TypeError, "a header must be a (str, bytes | None) pair");
            return NULL;
        }
        Py_ssize_t hk_len, hv_len;
        const char *hv;
        if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &hk_len) == NULL ||
            as_field(PyTuple_GET_ITEM(h, 1), "header value", &hv, &hv_len) < 0) {
            Py_DECREF(fast);
            return NULL;
        }
        body += varint_size(hk_len) + hk_len + varint_size(hv_len) + (hv_len > 0 ? hv_len : 0);
    }
    Py_ssize_t total = varint_size(body) + body;
    Py_ssize_t start = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, start + total) < 0) {
        Py_DECREF(fast);
        return NULL;
    }
    uint8_t *p = (uint8_t *)PyByteArray_AS_STRING(buf) + start;
    p += put_varint(p, body);
    *p++ = 0; /* attributes */
    p += put_varint(p, ts_delta);
    p += put_varint(p, offset_delta);
    p = put_field(p, key, key_len);
    p = put_field(p, value, value_len);
    p += put_varint(p, n_headers);
    for (Py_ssize_t i = 0; i < n_headers; i++) {
        PyObject *h = items[i];
        Py_ssize_t hk_len, hv_len;
        const char *hk = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &hk_len); /* cached */
        const char *hv;
        as_field(PyTuple_GET_ITEM(h, 1), "header value", &hv, &hv_len); /* checked above */
        p = put_field(p, hk, hk_len);
        p = put_field(p, hv, hv_len);
    }
    Py_DECREF(fast);
    return PyLong_FromSsize_t(total);
}

PyDoc_STRVAR(complete_doc,
"complete(futures, timestamps, topic, partition, base_offset, append_time)\n"
"\n"
"Set each future's result to RecordMetadata(topic, partition, offset, timestamp): offsets\n"
"from `base_offset` on (all -1 when it is -1), each record's timestamp from `timestamps`,\n"
"or `append_time` for all when it is not -1. A future already done (cancelled by its\n"
"owner) is left as it is.");

static PyObject *
complete(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    module_state *st = get_state(module);
    if (st->md_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "complete() called before bind()");
        return NULL;
    }
    if (nargs != 6 || !PyList_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "complete(list, list, topic, partition, int, int)");
        return NULL;
    }
    PyObject *futures = args[0], *timestamps = args[1], *topic = args[2], *partition = args[3];
    long long base_offset = PyLong_AsLongLong(args[4]);
    if (base_offset == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *append_time = args[5];
    int log_append = !(PyLong_Check(append_time) && PyLong_AsLong(append_time) == -1);
    Py_ssize_t n = PyList_GET_SIZE(futures);
    if (PyList_GET_SIZE(timestamps) != n) {
        PyErr_SetString(PyExc_ValueError, "complete(): as many timestamps as futures");
        return NULL;
    }
    static PyObject *set_result_name = NULL;
    if (set_result_name == NULL && (set_result_name = PyUnicode_InternFromString("set_result")) == NULL) {
        return NULL;
    }
    const Py_ssize_t *off = st->offsets;
    PyTypeObject *md_type = st->md_type;
    PyObject *unknown = NULL;
    if (base_offset < 0 && (unknown = PyLong_FromLong(-1)) == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *offset = unknown ? Py_NewRef(unknown) : PyLong_FromLongLong(base_offset + i);
        PyObject *md = offset ? md_type->tp_alloc(md_type, 0) : NULL;
        if (md == NULL) {
            Py_XDECREF(offset);
            Py_XDECREF(unknown);
            return NULL;
        }
        set_slot(md, off[F_TOPIC], Py_NewRef(topic));
        set_slot(md, off[F_PARTITION], Py_NewRef(partition));
        set_slot(md, off[F_OFFSET], offset);
        set_slot(md, off[F_TIMESTAMP],
                 Py_NewRef(log_append ? append_time : PyList_GET_ITEM(timestamps, i)));
        PyObject *call[2] = {PyList_GET_ITEM(futures, i), md};
        PyObject *r = PyObject_VectorcallMethod(set_result_name, call,
                                                2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(md);
        if (r == NULL) {
            if (!PyErr_ExceptionMatches(st->invalid_state)) { /* cancelled: left as it is */
                Py_XDECREF(unknown);
                return NULL;
            }
            PyErr_Clear();
        }
        Py_XDECREF(r);
    }
    Py_XDECREF(unknown);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(bind_doc,
"bind(cls, invalid_state_error)\n"
"\n"
"Use `cls` (consumergroup.RecordMetadata) for complete()'s results, and take\n"
"`invalid_state_error` (asyncio.InvalidStateError) for a future already done. Checks that\n"
"cls's __slots__ are exactly the 4 fields, each an object slot of `cls` itself; raises\n"
"TypeError otherwise (the caller then keeps the Python twin).");

static PyObject *
bind(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t offsets[N_FIELDS];
    if (nargs != 2 || !PyExceptionClass_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "bind(cls, exception class)");
        return NULL;
    }
    if (slot_offsets(args[0], FIELD_NAMES, N_FIELDS, offsets) < 0) {
        return NULL;
    }
    module_state *st = get_state(module);
    memcpy(st->offsets, offsets, sizeof(offsets));
    Py_XSETREF(st->md_type, (PyTypeObject *)Py_NewRef(args[0]));
    Py_XSETREF(st->invalid_state, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"append", (PyCFunction)(void (*)(void))append, METH_FASTCALL, append_doc},
    {"complete", (PyCFunction)(void (*)(void))complete, METH_FASTCALL, complete_doc},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL, bind_doc},
    {NULL, NULL, 0, NULL},
};

static int
module_traverse(PyObject *module, visitproc visit, void *arg)
{
    Py_VISIT(get_state(module)->md_type);
    Py_VISIT(get_state(module)->invalid_state);
    return 0;
}

static int
module_clear(PyObject *module)
{
    Py_CLEAR(get_state(module)->md_type);
    Py_CLEAR(get_state(module)->invalid_state);
    return 0;
}

static void
module_free(void *module)
{
    module_clear((PyObject *)module);
}

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "consumergroup.producer._cproduce",
    .m_doc = "The producer's per-record work: v2 record encoding and delivery reports.",
    .m_size = sizeof(module_state),
    .m_methods = methods,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC
PyInit__cproduce(void)
{
    PyObject *module = PyModule_Create(&moduledef);
    if (module != NULL) {
        memset(get_state(module), 0, sizeof(module_state));
    }
    return module;
}
