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

/* Checks `n` headers (`items`: (str, bytes | None) pairs) and adds their encoded size to
 * `*body` (their `estimate`, what buffer_memory counts, to `*estimate` when not NULL): 0, or
 * -1 with TypeError (or the key's UTF-8 error) set. */
static int
check_headers(PyObject *const *items, Py_ssize_t n, Py_ssize_t *body, Py_ssize_t *estimate)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *h = items[i];
        if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(h, 0))) {
            PyErr_SetString(PyExc_TypeError, "a header must be a (str, bytes | None) pair");
            return -1;
        }
        Py_ssize_t hk_len, hv_len = -1;
        const char *hv = NULL;
        if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &hk_len) == NULL ||
            as_field(PyTuple_GET_ITEM(h, 1), "header value", &hv, &hv_len) < 0) {
            return -1;
        }
        *body += varint_size(hk_len) + hk_len + varint_size(hv_len) + (hv_len > 0 ? hv_len : 0);
        if (estimate != NULL) { /* record_size()'s: 3 bytes a character at worst */
            *estimate += 10 + 3 * PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(h, 0)) +
                         (hv_len > 0 ? hv_len : 0);
        }
    }
    return 0;
}

/* One v2 record at the end of the bytearray `buf`, its headers checked by check_headers()
 * (which gave `headers_body`); returns the bytes it took, or -1 (MemoryError). */
static Py_ssize_t
encode_record(PyObject *buf, long long offset_delta, long long ts_delta, const char *key,
              Py_ssize_t key_len, const char *value, Py_ssize_t value_len,
              PyObject *const *items, Py_ssize_t n_headers, Py_ssize_t headers_body)
{
    /* The body's size first: the length prefix comes before it. */
    Py_ssize_t body = 1 + varint_size(ts_delta) + varint_size(offset_delta) +
                      varint_size(key_len) + (key_len > 0 ? key_len : 0) +
                      varint_size(value_len) + (value_len > 0 ? value_len : 0) +
                      varint_size(n_headers) + headers_body;
    Py_ssize_t total = varint_size(body) + body;
    Py_ssize_t start = PyByteArray_GET_SIZE(buf), need = start + total;
    /* bytearray grows by an eighth when full, so a batch of a megabyte would be
     * reallocated (and copied) ~80 times, 8 bytes moved per byte appended: grown by half
     * here instead (2 per byte), then sized down to `need`, which, being over half of
     * the allocation, keeps it (CPython's "minor downsize"). */
    if (need >= ((PyByteArrayObject *)buf)->ob_alloc &&
        PyByteArray_Resize(buf, need + need / 2) < 0) {
        return -1;
    }
    if (PyByteArray_Resize(buf, need) < 0) {
        return -1;
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
        Py_ssize_t hk_len, hv_len = -1;
        const char *hk = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(h, 0), &hk_len); /* cached */
        const char *hv = NULL;
        as_field(PyTuple_GET_ITEM(h, 1), "header value", &hv, &hv_len); /* checked before */
        p = put_field(p, hk, hk_len);
        p = put_field(p, hv, hv_len);
    }
    return total;
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
    Py_ssize_t headers_body = 0, total = -1;
    if (check_headers(items, n_headers, &headers_body, NULL) == 0) {
        total = encode_record(buf, offset_delta, ts_delta, key, key_len, value, value_len, items,
                              n_headers, headers_body);
    }
    Py_DECREF(fast);
    return total < 0 ? NULL : PyLong_FromSsize_t(total);
}

/* A future the fast path left out of the collector's lists (see FastSend) goes back in. */
static inline void
track(PyObject *fut)
{
    if (!PyObject_GC_IsTracked(fut)) {
        PyObject_GC_Track(fut);
    }
}

/* Whether its owner set attributes on `obj` (a non-empty instance __dict__). */
static inline int
has_attributes(PyObject *obj)
{
    PyObject **dict = _PyObject_GetDictPtr(obj);
    return dict != NULL && *dict != NULL && PyDict_GET_SIZE(*dict) > 0;
}

PyDoc_STRVAR(track_doc,
"track(futures)\n"
"\n"
"Give the garbage collector back every future of the list that send()'s fast path kept\n"
"from it while it was queued (complete() does this for the futures it completes).");

static PyObject *
track_all(PyObject *module, PyObject *futures)
{
    if (!PyList_Check(futures)) {
        PyErr_SetString(PyExc_TypeError, "track() needs a list");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(futures); i++) {
        track(PyList_GET_ITEM(futures, i));
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(untrack_doc,
"untrack(obj) -> obj\n"
"\n"
"Take `obj` out of the garbage collector's lists, and return it: a batch's lists of\n"
"timestamps (ints) and of futures, which close no reference cycle (a tracked future's own\n"
"references are still walked), and a future while it is queued (complete() or track()\n"
"give it back). Walked by every collection that reaches them, they would cost the\n"
"collector a visit per record.");

static PyObject *
untrack(PyObject *module, PyObject *obj)
{
    if (PyObject_IS_GC(obj) && PyObject_GC_IsTracked(obj)) {
        PyObject_GC_UnTrack(obj);
    }
    return Py_NewRef(obj);
}

PyDoc_STRVAR(trim_doc,
"trim(buf)\n"
"\n"
"Give back what the bytearray `buf` holds beyond its size (the room append() grew it by),\n"
"in place: a closed batch then holds its bytes only. Left as it is while `buf` is viewed.");

static PyObject *
trim(PyObject *module, PyObject *buf)
{
    if (!PyByteArray_CheckExact(buf)) {
        PyErr_SetString(PyExc_TypeError, "trim() needs a bytearray");
        return NULL;
    }
    PyByteArrayObject *b = (PyByteArrayObject *)buf;
    Py_ssize_t size = Py_SIZE(b);
    if (b->ob_exports == 0 && b->ob_start == b->ob_bytes && b->ob_alloc > size + 1) {
        /* bytearray's own allocator; shrinking in place moves nothing */
        char *bytes = PyObject_Realloc(b->ob_bytes, (size_t)size + 1);
        if (bytes != NULL) {
            b->ob_bytes = b->ob_start = bytes;
            b->ob_alloc = size + 1;
        }
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(complete_doc,
"complete(futures, timestamps, topic, partition, base_offset, append_time)\n"
"\n"
"Set each future's result to RecordMetadata(topic, partition, offset, timestamp): offsets\n"
"from `base_offset` on (all -1 when it is -1), each record's timestamp from `timestamps`,\n"
"or `append_time` for all when it is not -1. A future already done (cancelled by its\n"
"owner) is left as it is, and goes back to the garbage collector (track()), as does one\n"
"its owner set attributes on. Another future the fast path kept from the collector stays\n"
"out of it, as does every RecordMetadata: each holds only its loop and a RecordMetadata\n"
"(a str and ints), so it can close no reference cycle the loop does not.");

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
        /* A str and ints: it can be in no reference cycle, so the collector skips it. */
        PyObject_GC_UnTrack(md);
        PyObject *fut = PyList_GET_ITEM(futures, i);
        if (has_attributes(fut)) {
            track(fut);
        }
        PyObject *call[2] = {fut, md};
        PyObject *r = PyObject_VectorcallMethod(set_result_name, call,
                                                2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(md);
        if (r == NULL) {
            if (!PyErr_ExceptionMatches(st->invalid_state)) {
                track(fut);
                Py_XDECREF(unknown);
                return NULL;
            }
            PyErr_Clear();
            track(fut); /* cancelled by its owner: it holds its CancelledError */
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

/* ---------------------------------------------------------------- send()'s fast path
 *
 * FastSend(accumulator, topics, loop, future_type, max_record, topic_type, queue_type,
 * batch_type)(topic, value, key, partition, headers, timestamp_ms) queues one record the
 * way Producer._send() does and returns its future, when nothing needs Python: the
 * producer is open, key and value are bytes or None, the headers well formed, the record
 * fits max_record, the topic's partition count is fresh, the partition is known without
 * switching the sticky partitioner, there is room in buffer_memory, and the partition's
 * open batch takes the record and belongs to the transaction records go to (its txn is
 * the accumulator's appending: a transactional producer's partition then joined the
 * transaction when the Python path started that batch). Otherwise it returns None having changed nothing, and
 * send() takes the Python path (which raises, waits, or starts a batch).
 *
 * The future is kept out of the garbage collector's lists while it is queued (a pending
 * future is reachable from its batch, and a queue of many thousands would otherwise be
 * traversed by every collection); complete() and track() give it back when its batch is
 * answered. Slots are read at byte offsets taken from the classes' member descriptors
 * (member_offsets), each object's exact type checked first. */

enum { A_ACCEPTING, A_APPENDING, A_BATCH_SIZE, A_BUFFER_MEMORY, A_READY, A_USED, N_ACC };
static const char *const ACC_SLOTS[N_ACC] = {"accepting", "appending",     "batch_size",
                                             "buffer_memory", "ready", "used"};
enum { T_COUNT, T_QUEUES, T_RECHECK, T_STICKY, N_TOPIC };
static const char *const TOPIC_SLOTS[N_TOPIC] = {"count", "queues", "recheck_ms", "sticky"};
enum { S_CURRENT, S_LEFT, N_STICKY };
static const char *const STICKY_SLOTS[N_STICKY] = {"current", "left"};
enum { Q_QUEUE, N_QUEUE };
static const char *const QUEUE_SLOTS[N_QUEUE] = {"queue"};
enum { B_ATTEMPTS, B_BASE_TS, B_BUFFER, B_FUTURES, B_SIZE, B_TIMESTAMPS, B_TXN, N_BATCH };
static const char *const BATCH_SLOTS[N_BATCH] = {"attempts", "base_timestamp", "buffer", "futures",
                                                 "size",     "timestamps",     "txn"};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *acc;            /* the Accumulator */
    PyObject *topics;         /* the producer's {topic: _Topic} */
    PyObject *future_type;    /* asyncio.Future */
    PyObject *future_args;    /* () */
    PyObject *future_kwargs;  /* {"loop": the producer's loop} */
    PyTypeObject *topic_type, *sticky_type, *queue_type, *batch_type;
    Py_ssize_t max_record;
    Py_ssize_t acc_off[N_ACC], topic_off[N_TOPIC], sticky_off[N_STICKY], queue_off[N_QUEUE],
        batch_off[N_BATCH];
} FastSend;

static PyObject *str_set; /* "set" */

/* Kafka's Utils.murmur2 (seed 0x9747b28c), as partitioner.murmur2. */
static int32_t
murmur2(const uint8_t *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cU ^ (uint32_t)length;
    Py_ssize_t end = length - length % 4;
    for (Py_ssize_t i = 0; i < end; i += 4) {
        uint32_t k = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 |
                     (uint32_t)data[i + 2] << 16 | (uint32_t)data[i + 3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (length % 4) {
    case 3:
        h ^= (uint32_t)data[end + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[end + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[end];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

/* Milliseconds since the epoch, as int(time.time() * 1000). */
static long long
now_ms(void)
{
#ifdef _WIN32
    FILETIME ft;
    GetSystemTimePreciseAsFileTime(&ft);
    unsigned long long t = ((unsigned long long)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
    return (long long)(t / 10000ULL) - 11644473600000LL;
#else
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
#endif
}

/* An exact int slot's value into *out: 1, or 0 when it is not one (nothing raised). */
static inline int
int_slot(PyObject *obj, Py_ssize_t offset, long long *out)
{
    PyObject *v = SLOT_AT(obj, offset);
    if (v == NULL || !PyLong_CheckExact(v)) {
        return 0;
    }
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    return !overflow && !(*out == -1 && PyErr_Occurred());
}

static inline void
replace_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT_AT(obj, offset);
    SLOT_AT(obj, offset) = value;
    Py_XDECREF(old);
}

static PyObject *
fast_send(FastSend *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 6 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "FastSend(topic, value, key, partition, headers, timestamp_ms)");
        return NULL;
    }
    PyObject *topic = args[0], *value_obj = args[1], *key_obj = args[2],
             *partition_obj = args[3], *headers = args[4], *ts_obj = args[5];
    PyObject *acc = self->acc;
    if (SLOT_AT(acc, self->acc_off[A_ACCEPTING]) != Py_True || !PyUnicode_CheckExact(topic)) {
        Py_RETURN_NONE;
    }
    const char *key = NULL, *value = NULL;
    Py_ssize_t key_len = -1, value_len = -1;
    if ((value_obj != Py_None && !PyBytes_CheckExact(value_obj)) ||
        (key_obj != Py_None && !PyBytes_CheckExact(key_obj))) {
        Py_RETURN_NONE; /* the Python path converts or refuses it */
    }
    as_field(key_obj, "key", &key, &key_len);
    as_field(value_obj, "value", &value, &value_len);
    Py_ssize_t size = 21 + (key_len > 0 ? key_len : 0) + (value_len > 0 ? value_len : 0);
    PyObject *const *items = NULL;
    Py_ssize_t n_headers = 0, headers_body = 0;
    if (headers != Py_None) {
        if (PyTuple_CheckExact(headers)) {
            items = &PyTuple_GET_ITEM(headers, 0);
            n_headers = PyTuple_GET_SIZE(headers);
        }
        else if (PyList_CheckExact(headers)) {
            items = PySequence_Fast_ITEMS(headers);
            n_headers = PyList_GET_SIZE(headers);
        }
        else {
            Py_RETURN_NONE;
        }
        if (check_headers(items, n_headers, &headers_body, &size) < 0) {
            PyErr_Clear(); /* the Python path says what is wrong */
            Py_RETURN_NONE;
        }
    }
    if (size > self->max_record) {
        Py_RETURN_NONE;
    }
    long long now = now_ms(), recheck, count, used, memory, batch_size;
    PyObject *info = PyDict_GetItemWithError(self->topics, topic); /* borrowed */
    if (info == NULL || !Py_IS_TYPE(info, self->topic_type) ||
        !int_slot(info, self->topic_off[T_RECHECK], &recheck) || now > recheck ||
        !int_slot(info, self->topic_off[T_COUNT], &count) || count <= 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    long long partition, left = 0;
    PyObject *sticky = NULL;
    if (partition_obj != Py_None) {
        if (!PyLong_CheckExact(partition_obj)) {
            Py_RETURN_NONE;
        }
        int overflow;
        partition = PyLong_AsLongLongAndOverflow(partition_obj, &overflow);
        if (overflow || partition < 0 || partition >= count) {
            Py_RETURN_NONE;
        }
    }
    else if (key_obj != Py_None) {
        partition = (long long)((uint32_t)murmur2((const uint8_t *)key, key_len) & 0x7fffffffU) % count;
    }
    else {
        sticky = SLOT_AT(info, self->topic_off[T_STICKY]);
        if (sticky == NULL || !Py_IS_TYPE(sticky, self->sticky_type) ||
            !int_slot(sticky, self->sticky_off[S_LEFT], &left) || left <= 0 ||
            !int_slot(sticky, self->sticky_off[S_CURRENT], &partition) || partition < 0 ||
            partition >= count) {
            Py_RETURN_NONE; /* time to switch partitions */
        }
    }
    if (!int_slot(acc, self->acc_off[A_USED], &used) ||
        !int_slot(acc, self->acc_off[A_BUFFER_MEMORY], &memory) || used + size > memory ||
        !int_slot(acc, self->acc_off[A_BATCH_SIZE], &batch_size)) {
        Py_RETURN_NONE; /* send() waits for room */
    }
    PyObject *queues = SLOT_AT(info, self->topic_off[T_QUEUES]);
    if (queues == NULL || !PyList_CheckExact(queues) || partition >= PyList_GET_SIZE(queues)) {
        Py_RETURN_NONE;
    }
    PyObject *q = PyList_GET_ITEM(queues, partition);
    PyObject *deque = Py_IS_TYPE(q, self->queue_type) ? SLOT_AT(q, self->queue_off[Q_QUEUE]) : NULL;
    Py_ssize_t depth = deque == NULL ? -1 : PySequence_Size(deque);
    if (depth <= 0) {
        PyErr_Clear();
        Py_RETURN_NONE; /* the first batch: the Python path starts it */
    }
    PyObject *batch = PySequence_GetItem(deque, depth - 1); /* new reference */
    if (batch == NULL) {
        return NULL;
    }
    long long attempts, base_ts, batch_bytes, ts, batch_txn, appending;
    PyObject *buf = SLOT_AT(batch, self->batch_off[B_BUFFER]);
    PyObject *futures = SLOT_AT(batch, self->batch_off[B_FUTURES]);
    PyObject *timestamps = SLOT_AT(batch, self->batch_off[B_TIMESTAMPS]);
    if (!Py_IS_TYPE(batch, self->batch_type) ||
        !int_slot(batch, self->batch_off[B_ATTEMPTS], &attempts) || attempts != 0 ||
        !int_slot(batch, self->batch_off[B_TXN], &batch_txn) ||
        !int_slot(acc, self->acc_off[A_APPENDING], &appending) || batch_txn != appending ||
        !int_slot(batch, self->batch_off[B_SIZE], &batch_bytes) ||
        batch_bytes + size > batch_size ||
        !int_slot(batch, self->batch_off[B_BASE_TS], &base_ts) || buf == NULL ||
        !PyByteArray_CheckExact(buf) || futures == NULL || !PyList_CheckExact(futures) ||
        timestamps == NULL || !PyList_CheckExact(timestamps)) {
        Py_DECREF(batch);
        Py_RETURN_NONE; /* sent already, full, or of a transaction that was cut or is
                           ending: the Python path starts the next one (or refuses) */
    }
    if (ts_obj == Py_None) {
        ts = now;
    }
    else {
        int overflow;
        ts = PyLong_CheckExact(ts_obj) ? PyLong_AsLongLongAndOverflow(ts_obj, &overflow) : 0;
        if (!PyLong_CheckExact(ts_obj) || overflow) {
            Py_DECREF(batch);
            Py_RETURN_NONE;
        }
    }
    /* Everything that can fail before anything changes. */
    Py_ssize_t n = PyList_GET_SIZE(futures);
    PyObject *new_used = PyLong_FromLongLong(used + size);
    PyObject *new_size = PyLong_FromLongLong(batch_bytes + size);
    PyObject *new_left = sticky != NULL ? PyLong_FromLongLong(left - size) : NULL;
    PyObject *ts_int = ts_obj == Py_None ? PyLong_FromLongLong(ts) : Py_NewRef(ts_obj);
    PyObject *fut = NULL;
    if (new_used != NULL && new_size != NULL && (sticky == NULL || new_left != NULL) &&
        ts_int != NULL) {
        fut = PyObject_Call(self->future_type, self->future_args, self->future_kwargs);
    }
    Py_ssize_t start = PyByteArray_GET_SIZE(buf);
    if (fut == NULL ||
        encode_record(buf, n, ts - base_ts, key, key_len, value, value_len, items, n_headers,
                      headers_body) < 0) {
        goto fail;
    }
    if (PyList_Append(timestamps, ts_int) < 0) {
        PyByteArray_Resize(buf, start);
        goto fail;
    }
    if (PyList_Append(futures, fut) < 0) {
        PyList_SetSlice(timestamps, n, n + 1, NULL);
        PyByteArray_Resize(buf, start);
        goto fail;
    }
    Py_DECREF(ts_int);
    PyObject_GC_UnTrack(fut); /* while queued: complete() or track() gives it back */
    replace_slot(acc, self->acc_off[A_USED], new_used);
    replace_slot(batch, self->batch_off[B_SIZE], new_size);
    if (sticky != NULL) {
        replace_slot(sticky, self->sticky_off[S_LEFT], new_left);
    }
    if (batch_bytes + size >= batch_size) { /* full: wake the sender */
        PyObject *ready = SLOT_AT(acc, self->acc_off[A_READY]);
        PyObject *r = ready == NULL ? NULL : PyObject_CallMethodNoArgs(ready, str_set);
        if (r == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "the accumulator has no ready event");
            }
            Py_DECREF(batch);
            Py_DECREF(fut);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(batch);
    return fut;
fail:
    Py_DECREF(batch);
    Py_XDECREF(new_used);
    Py_XDECREF(new_size);
    Py_XDECREF(new_left);
    Py_XDECREF(ts_int);
    Py_XDECREF(fut);
    return NULL;
}

static int
fastsend_init(FastSend *self, PyObject *args, PyObject *kwds)
{
    PyObject *acc, *topics, *loop, *future_type;
    Py_ssize_t max_record;
    PyTypeObject *topic_type, *sticky_type, *queue_type, *batch_type;
    if (!PyArg_ParseTuple(args, "OO!OOnO!O!O!O!:FastSend", &acc, &PyDict_Type, &topics, &loop,
                          &future_type, &max_record, &PyType_Type, &topic_type, &PyType_Type,
                          &sticky_type, &PyType_Type, &queue_type, &PyType_Type, &batch_type)) {
        return -1;
    }
    if (member_offsets(Py_TYPE(acc), ACC_SLOTS, N_ACC, self->acc_off) < 0 ||
        member_offsets(topic_type, TOPIC_SLOTS, N_TOPIC, self->topic_off) < 0 ||
        member_offsets(sticky_type, STICKY_SLOTS, N_STICKY, self->sticky_off) < 0 ||
        member_offsets(queue_type, QUEUE_SLOTS, N_QUEUE, self->queue_off) < 0 ||
        member_offsets(batch_type, BATCH_SLOTS, N_BATCH, self->batch_off) < 0) {
        return -1;
    }
    PyObject *kwargs = Py_BuildValue("{sO}", "loop", loop);
    PyObject *empty = PyTuple_New(0);
    if (kwargs == NULL || empty == NULL) {
        Py_XDECREF(kwargs);
        Py_XDECREF(empty);
        return -1;
    }
    Py_XSETREF(self->acc, Py_NewRef(acc));
    Py_XSETREF(self->topics, Py_NewRef(topics));
    Py_XSETREF(self->future_type, Py_NewRef(future_type));
    Py_XSETREF(self->future_args, empty);
    Py_XSETREF(self->future_kwargs, kwargs);
    Py_XSETREF(self->topic_type, (PyTypeObject *)Py_NewRef(topic_type));
    Py_XSETREF(self->sticky_type, (PyTypeObject *)Py_NewRef(sticky_type));
    Py_XSETREF(self->queue_type, (PyTypeObject *)Py_NewRef(queue_type));
    Py_XSETREF(self->batch_type, (PyTypeObject *)Py_NewRef(batch_type));
    self->max_record = max_record;
    return 0;
}

static int
fastsend_traverse(FastSend *self, visitproc visit, void *arg)
{
    Py_VISIT(self->acc);
    Py_VISIT(self->topics);
    Py_VISIT(self->future_type);
    Py_VISIT(self->future_kwargs);
    Py_VISIT(self->topic_type);
    Py_VISIT(self->sticky_type);
    Py_VISIT(self->queue_type);
    Py_VISIT(self->batch_type);
    return 0;
}

static int
fastsend_clear(FastSend *self)
{
    Py_CLEAR(self->acc);
    Py_CLEAR(self->topics);
    Py_CLEAR(self->future_type);
    Py_CLEAR(self->future_args);
    Py_CLEAR(self->future_kwargs);
    Py_CLEAR(self->topic_type);
    Py_CLEAR(self->sticky_type);
    Py_CLEAR(self->queue_type);
    Py_CLEAR(self->batch_type);
    return 0;
}

static void
fastsend_dealloc(FastSend *self)
{
    PyObject_GC_UnTrack(self);
    fastsend_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
fastsend_call(FastSend *self, PyObject *args, PyObject *kwds)
{
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "FastSend takes no keyword arguments");
        return NULL;
    }
    return fast_send(self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), NULL);
}

static PyObject *
fastsend_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return fast_send((FastSend *)self, args, nargsf, kwnames);
}

static PyObject *
fastsend_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    FastSend *self = (FastSend *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->vectorcall = fastsend_vectorcall;
    }
    return (PyObject *)self;
}

PyDoc_STRVAR(fastsend_doc,
"FastSend(accumulator, topics, loop, future_type, max_record, topic_type, sticky_type,\n"
"         queue_type, batch_type)\n"
"\n"
"send()'s per-record path: called with (topic, value, key, partition, headers,\n"
"timestamp_ms), queues the record and returns its future, or returns None having changed\n"
"nothing when the Python path must decide (see the comment above fast_send()).");

static PyTypeObject FastSendType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "consumergroup.producer._cproduce.FastSend",
    .tp_basicsize = sizeof(FastSend),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = fastsend_doc,
    .tp_new = fastsend_new,
    .tp_init = (initproc)fastsend_init,
    .tp_traverse = (traverseproc)fastsend_traverse,
    .tp_clear = (inquiry)fastsend_clear,
    .tp_dealloc = (destructor)fastsend_dealloc,
    .tp_call = (ternaryfunc)fastsend_call,
    .tp_vectorcall_offset = offsetof(FastSend, vectorcall),
};

static PyMethodDef methods[] = {
    {"append", (PyCFunction)(void (*)(void))append, METH_FASTCALL, append_doc},
    {"complete", (PyCFunction)(void (*)(void))complete, METH_FASTCALL, complete_doc},
    {"track", (PyCFunction)track_all, METH_O, track_doc},
    {"untrack", (PyCFunction)untrack, METH_O, untrack_doc},
    {"trim", (PyCFunction)trim, METH_O, trim_doc},
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
    if (PyType_Ready(&FastSendType) < 0) {
        return NULL;
    }
    if (str_set == NULL && (str_set = PyUnicode_InternFromString("set")) == NULL) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&moduledef);
    if (module == NULL) {
        return NULL;
    }
    memset(get_state(module), 0, sizeof(module_state));
    if (PyModule_AddObjectRef(module, "FastSend", (PyObject *)&FastSendType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
