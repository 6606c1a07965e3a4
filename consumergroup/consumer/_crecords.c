/* The records of an uncompressed message-format v2 batch body, decoded straight into
 * ConsumerMessage objects (consumergroup/consumer/records.py is the caller).
 *
 * Record =>
 *   Length => varint            (bytes after this field)
 *   Attributes => int8          (unused)
 *   TimestampDelta => varlong
 *   OffsetDelta => varint
 *   Key => varint length (-1: null) + bytes
 *   Value => varint length (-1: null) + bytes
 *   Headers => varint count, then [varint length + UTF-8 key, varint length (-1: null) + bytes]
 *
 * Every read is bounds-checked against the record's own length, which is checked
 * against the buffer: a corrupt or truncated body raises ValueError, never reads past
 * the buffer. Messages are allocated with tp_alloc and their __slots__ filled directly
 * (offsets read from the class's member descriptors by bind()), skipping the Python
 * __init__ call, which costs more than the rest of the record's decoding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* The ConsumerMessage fields, in the order of FIELD_NAMES. */
enum { F_TOPIC, F_PARTITION, F_OFFSET, F_KEY, F_VALUE, F_HEADERS, F_TIMESTAMP, F_TS_TYPE, N_FIELDS };
static const char *const FIELD_NAMES[N_FIELDS] = {
    "topic", "partition", "offset", "key", "value", "headers", "timestamp_ms", "timestamp_type",
};

/* Smallest record: length, attributes, timestamp delta, offset delta, key length, value
 * length, header count: one byte each. Bounds the list preallocated for a call. */
#define MIN_RECORD_SIZE 7

typedef struct {
    PyTypeObject *msg_type;        /* the bound ConsumerMessage class (strong reference) */
    Py_ssize_t offsets[N_FIELDS];  /* byte offset of each slot in an instance */
} module_state;

static module_state *
get_state(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* A zigzag varint of up to 10 bytes (64 bits). Returns 0, or -1 when it runs past
 * `end` or is longer than 10 bytes. */
static inline int
read_varint(const uint8_t **pp, const uint8_t *end, int64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t raw = 0;
    unsigned shift = 0;
    for (;;) {
        if (p >= end || shift > 63) {
            return -1;
        }
        uint8_t b = *p++;
        raw |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            break;
        }
        shift += 7;
    }
    *pp = p;
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

/* Nullable bytes: varint length, -1 for None. New reference, or NULL with an error set. */
static PyObject *
read_bytes(const uint8_t **pp, const uint8_t *end, const char *what, int nullable)
{
    int64_t n;
    if (read_varint(pp, end, &n) < 0) {
        PyErr_Format(PyExc_ValueError, "truncated %s length", what);
        return NULL;
    }
    if (n < 0) {
        if (n == -1 && nullable) {
            Py_RETURN_NONE;
        }
        PyErr_Format(PyExc_ValueError, "invalid %s length %lld", what, (long long)n);
        return NULL;
    }
    if (n > end - *pp) {
        PyErr_Format(PyExc_ValueError, "%s length %lld overruns the record by %lld bytes", what,
                     (long long)n, (long long)(n - (end - *pp)));
        return NULL;
    }
    const char *start = (const char *)*pp;
    *pp += n;
    if (!nullable) { /* a header key: a non-null UTF-8 string */
        return PyUnicode_DecodeUTF8(start, (Py_ssize_t)n, "strict");
    }
    return PyBytes_FromStringAndSize(start, (Py_ssize_t)n);
}

/* The headers of one record: the empty tuple, or a tuple of (str, bytes | None). */
static PyObject *
read_headers(const uint8_t **pp, const uint8_t *end)
{
    int64_t count;
    if (read_varint(pp, end, &count) < 0) {
        PyErr_SetString(PyExc_ValueError, "truncated header count");
        return NULL;
    }
    /* Each header takes at least 2 bytes (two lengths): a larger count is corrupt, and
     * checking it first keeps a huge count from allocating a huge tuple. */
    if (count < 0 || count > (end - *pp) / 2) {
        PyErr_Format(PyExc_ValueError, "invalid header count %lld", (long long)count);
        return NULL;
    }
    PyObject *headers = PyTuple_New((Py_ssize_t)count); /* count 0: the shared () */
    if (headers == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        PyObject *key = read_bytes(pp, end, "header key", 0);
        if (key == NULL) {
            goto fail;
        }
        PyObject *value = read_bytes(pp, end, "header value", 1);
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto fail;
        }
        PyTuple_SET_ITEM(pair, 0, key);
        PyTuple_SET_ITEM(pair, 1, value);
        PyTuple_SET_ITEM(headers, i, pair);
    }
    return headers;
fail:
    Py_DECREF(headers); /* unset items are NULL, which tuple dealloc skips */
    return NULL;
}

static inline void
set_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    *(PyObject **)((char *)obj + offset) = value; /* steals the reference */
}

PyDoc_STRVAR(decode_v2_doc,
"decode_v2(body, pos, index, count, base_offset, timestamp, log_append_time, topic,\n"
"          partition, start, limit) -> (messages, pos, index)\n"
"\n"
"Decode the records of an uncompressed v2 batch body from byte `pos`, record `index`\n"
"(of `count`) on. Records with an offset below `start` are skipped; at most `limit`\n"
"messages are returned (0: no limit), with the position and index to resume from.\n"
"Raises ValueError on corrupt or truncated input.");

static PyObject *
decode_v2(PyObject *module, PyObject *args)
{
    module_state *st = get_state(module);
    Py_buffer view;
    Py_ssize_t pos, index, limit;
    int count, log_append_time;
    long long base_offset, timestamp, start;
    PyObject *topic, *partition;
    if (!PyArg_ParseTuple(args, "y*nniLLpUOLn:decode_v2", &view, &pos, &index, &count,
                          &base_offset, &timestamp, &log_append_time, &topic, &partition,
                          &start, &limit)) {
        return NULL;
    }
    PyObject *messages = NULL, *ts_type = NULL, *ts_obj = NULL, *result = NULL;
    PyTypeObject *msg_type = st->msg_type;
    const Py_ssize_t *off = st->offsets;
    if (msg_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "decode_v2 called before bind()");
        goto done;
    }
    if (pos < 0 || pos > view.len || index < 0 || limit < 0) {
        PyErr_SetString(PyExc_ValueError, "invalid decode position");
        goto done;
    }
    const uint8_t *const buf = (const uint8_t *)view.buf;
    const uint8_t *const end = buf + view.len;
    const uint8_t *p = buf + pos;

    /* The list is sized once: the records left, capped by what the bytes left can hold
     * (+1: with records left but no bytes, the loop must run once to raise). */
    Py_ssize_t want = count > index ? (Py_ssize_t)count - index : 0;
    if (want > (end - p) / MIN_RECORD_SIZE + 1) {
        want = (end - p) / MIN_RECORD_SIZE + 1;
    }
    if (limit && want > limit) {
        want = limit;
    }
    messages = PyList_New(want);
    ts_type = PyLong_FromLong(log_append_time ? 1 : 0);
    if (messages == NULL || ts_type == NULL) {
        goto done;
    }
    /* Consecutive records mostly share a timestamp (log-append time: all of them). */
    long long last_ts = timestamp;
    ts_obj = PyLong_FromLongLong(timestamp);
    if (ts_obj == NULL) {
        goto done;
    }
    Py_ssize_t n = 0;
    while (index < count && n < want) {
        const uint8_t *record_start = p;
        int64_t length, ts_delta, offset_delta;
        if (read_varint(&p, end, &length) < 0 || length < 0 || length > end - p) {
            PyErr_Format(PyExc_ValueError, "record %zd at byte %zd: invalid or truncated length",
                         index, (Py_ssize_t)(record_start - buf));
            goto done;
        }
        const uint8_t *const rec_end = p + length;
        if (p >= rec_end) {
            PyErr_Format(PyExc_ValueError, "record %zd at byte %zd: empty record", index,
                         (Py_ssize_t)(record_start - buf));
            goto done;
        }
        p++; /* attributes: unused */
        if (read_varint(&p, rec_end, &ts_delta) < 0 ||
            read_varint(&p, rec_end, &offset_delta) < 0) {
            PyErr_Format(PyExc_ValueError, "record %zd at byte %zd: truncated record header",
                         index, (Py_ssize_t)(record_start - buf));
            goto done;
        }
        long long offset, ts = timestamp;
        if (__builtin_add_overflow(base_offset, offset_delta, &offset) ||
            (!log_append_time && __builtin_add_overflow(timestamp, ts_delta, &ts))) {
            PyErr_Format(PyExc_ValueError, "record %zd: offset or timestamp out of range", index);
            goto done;
        }
        index++;
        if (offset < start) { /* below the fetch offset: already consumed */
            p = rec_end;
            continue;
        }
        PyObject *key = read_bytes(&p, rec_end, "key", 1);
        PyObject *value = key ? read_bytes(&p, rec_end, "value", 1) : NULL;
        PyObject *headers = value ? read_headers(&p, rec_end) : NULL;
        PyObject *offset_obj = headers ? PyLong_FromLongLong(offset) : NULL;
        if (offset_obj != NULL && p != rec_end) {
            PyErr_Format(PyExc_ValueError, "record %zd: %zd bytes left over after its headers",
                         index - 1, (Py_ssize_t)(rec_end - p));
            Py_CLEAR(offset_obj);
        }
        if (offset_obj != NULL && ts != last_ts) {
            Py_SETREF(ts_obj, PyLong_FromLongLong(ts));
            last_ts = ts;
        }
        PyObject *msg = (offset_obj && ts_obj) ? msg_type->tp_alloc(msg_type, 0) : NULL;
        if (msg == NULL) { /* an invalid header key is a UnicodeDecodeError, a ValueError */
            Py_XDECREF(key);
            Py_XDECREF(value);
            Py_XDECREF(headers);
            Py_XDECREF(offset_obj);
            goto done;
        }
        Py_INCREF(topic);
        set_slot(msg, off[F_TOPIC], topic);
        Py_INCREF(partition);
        set_slot(msg, off[F_PARTITION], partition);
        set_slot(msg, off[F_OFFSET], offset_obj);
        set_slot(msg, off[F_KEY], key);
        set_slot(msg, off[F_VALUE], value);
        set_slot(msg, off[F_HEADERS], headers);
        Py_INCREF(ts_obj);
        set_slot(msg, off[F_TIMESTAMP], ts_obj);
        Py_INCREF(ts_type);
        set_slot(msg, off[F_TS_TYPE], ts_type);
        PyList_SET_ITEM(messages, n, msg);
        n++;
    }
    if (index >= count && p != end) {
        PyErr_Format(PyExc_ValueError, "%zd unconsumed bytes after all %d records",
                     (Py_ssize_t)(end - p), count);
        goto done;
    }
    if (n < want) { /* records skipped below `start`: the tail of the list is unset */
        Py_SETREF(messages, PyList_GetSlice(messages, 0, n));
        if (messages == NULL) {
            goto done;
        }
    }
    result = Py_BuildValue("Onn", messages, (Py_ssize_t)(p - buf), index);
done:
    Py_XDECREF(messages); /* unset items are NULL, which list dealloc skips */
    Py_XDECREF(ts_type);
    Py_XDECREF(ts_obj);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(bind_doc,
"bind(cls)\n"
"\n"
"Use `cls` (consumergroup.message.ConsumerMessage) for decoded messages. Checks that its\n"
"__slots__ are exactly the 8 message fields, each an object slot of `cls` itself;\n"
"raises TypeError otherwise (the caller then keeps the Python decoder).");

static PyObject *
bind(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "bind() needs a class");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_itemsize != 0 || !(type->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        type->tp_base != &PyBaseObject_Type) {
        PyErr_Format(PyExc_TypeError, "%s is not a plain __slots__ class", type->tp_name);
        return NULL;
    }
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL) {
        return NULL;
    }
    Py_ssize_t n_slots = PySequence_Size(slots);
    Py_DECREF(slots);
    if (n_slots != N_FIELDS) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "%s has %zd __slots__, the decoder fills %d",
                         type->tp_name, n_slots, N_FIELDS);
        }
        return NULL;
    }
    Py_ssize_t offsets[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) {
        PyObject *descr = PyDict_GetItemString(type->tp_dict, FIELD_NAMES[i]); /* borrowed */
        if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type) ||
            PyDescr_TYPE(descr) != type) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", type->tp_name,
                         FIELD_NAMES[i]);
            return NULL;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY) ||
            member->offset < (Py_ssize_t)sizeof(PyObject) ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name,
                         FIELD_NAMES[i]);
            return NULL;
        }
        offsets[i] = member->offset;
    }
    module_state *st = get_state(module);
    memcpy(st->offsets, offsets, sizeof(offsets));
    Py_INCREF(cls);
    Py_XSETREF(st->msg_type, type);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_v2", decode_v2, METH_VARARGS, decode_v2_doc},
    {"bind", bind, METH_O, bind_doc},
    {NULL, NULL, 0, NULL},
};

static int
module_traverse(PyObject *module, visitproc visit, void *arg)
{
    Py_VISIT(get_state(module)->msg_type);
    return 0;
}

static int
module_clear(PyObject *module)
{
    Py_CLEAR(get_state(module)->msg_type);
    return 0;
}

static void
module_free(void *module)
{
    module_clear((PyObject *)module);
}

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "consumergroup.consumer._crecords",
    .m_doc = "Message-format v2 record decoding into ConsumerMessage objects.",
    .m_size = sizeof(module_state),
    .m_methods = methods,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC
PyInit__crecords(void)
{
    PyObject *module = PyModule_Create(&moduledef);
    if (module != NULL) {
        memset(get_state(module), 0, sizeof(module_state));
    }
    return module;
}
