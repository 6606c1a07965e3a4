/* The records of an uncompressed message-format v2 batch body, decoded straight into
 * ConsumerMessage objects (consumergroup/consumer/records.py is the caller). A compressed
 * body is decoded the same way, from a bounded window of its decompressed bytes
 * (consumer/inflate.py) that may end inside a record: in window mode (`max_record` > 0)
 * such a record ends the call, to be decoded once the window holds it whole, and so does
 * a record longer than `max_record`, for the caller to skip.
 *
 * Record =>
 *   Length => varint            (bytes after this field)
 *   Attributes => int8          (unused)
 *   TimestampDelta => varlong
 *   OffsetDelta => varint
 *   Key => varint length (negative: null) + bytes
 *   Value => varint length (negative: null) + bytes
 *   Headers => varint count, then [varint length + UTF-8 key, varint length (negative:
 *              null) + bytes]
 *
 * Any negative length reads as null, as Kafka's Java client reads it; an offset delta
 * outside the batch header's 0..lastOffsetDelta is corrupt. Every read is bounds-checked
 * against the record's own length, which is checked against the buffer: a corrupt or
 * truncated body raises ValueError, never reads past the buffer. consumer/_pyrecords.py
 * is the pure-Python twin of decode_v2 (same results, same errors). Messages are allocated with tp_alloc and their __slots__ filled directly
 * (offsets read from the class's member descriptors by bind()), skipping the Python
 * __init__ call, which costs more than the rest of the record's decoding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_cslots.h"

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
    int untrack;                   /* decoded messages leave the cyclic collector (bind) */
} module_state;

/* Decoded messages are not tracked by the cyclic garbage collector.
 *
 * A message's fields are str, int, bytes, None and a tuple of (str, bytes) pairs (which
 * the collector untracks at its first pass over it): it cannot be part of a reference
 * cycle, so the collector can never free anything by scanning it, as CPython reasons for
 * a tuple of atomic values, which it untracks too. Tracked, every message a handler
 * keeps is scanned by each young collection it survives and by every full collection
 * after that (CPython runs one each time the objects surviving into the oldest
 * generation grow by a quarter): most of a keeping handler's CPU. Untracked, it costs
 * the collector nothing, and nothing else changes: young collections still run (every
 * allocation counts towards them), a full one only when the user's own long-lived
 * objects grow.
 *
 * The one way a message can join a cycle is a user storing an object that refers back
 * to it in one of its fields: bind() makes the class's attribute assignment track the
 * message again when the value assigned is one the collector tracks. (A store that goes
 * around it, object.__setattr__ or a slot descriptor's __set__, does not: a cycle built
 * that way is not collected.) */
static int
msg_setattro(PyObject *self, PyObject *name, PyObject *value)
{
    if (PyObject_GenericSetAttr(self, name, value) < 0) {
        return -1;
    }
    if (value != NULL && PyObject_IS_GC(value) && !PyObject_GC_IsTracked(self)) {
        PyObject_GC_Track(self);
    }
    return 0;
}

/* A message's deallocation, subtype_dealloc's work for a class that has nothing but object
 * slots (no __del__, no __weakref__, no __dict__: bind() checks): clear the slots, free.
 * subtype_dealloc does the same after checks for what such a class lacks, and took ~11 %
 * of a fetching member's CPU. A subclass's instances reach it through their own
 * subtype_dealloc (which clears the subclass's slots first), as they reach any base's
 * tp_dealloc. The trashcan bounds the C stack when freeing one message frees a chain of
 * others (values users assigned). */
static void
msg_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyTypeObject *owner = type; /* the class whose slots these are */
    while (owner->tp_dealloc != msg_dealloc) {
        owner = owner->tp_base;
    }
    PyObject_GC_UnTrack(self);
    Py_TRASHCAN_BEGIN(self, msg_dealloc)
    for (PyMemberDef *member = owner->tp_members; member->name != NULL; member++) {
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY)) {
            Py_CLEAR(*(PyObject **)((char *)self + member->offset));
        }
    }
    type->tp_free(self);
    Py_DECREF(type);
    Py_TRASHCAN_END
}

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

/* A nullable byte string: varint length (any negative: null) and the bytes. Sets `*data`
 * and `*len` (-1 for null; only when `nullable`) and returns 0, or -1 with ValueError set. */
static int
read_span(const uint8_t **pp, const uint8_t *end, const char *what, int nullable,
          const uint8_t **data, int64_t *len)
{
    int64_t n;
    if (read_varint(pp, end, &n) < 0) {
        PyErr_Format(PyExc_ValueError, "truncated %s length", what);
        return -1;
    }
    if (n < 0) {
        if (nullable) {
            *data = NULL;
            *len = -1;
            return 0;
        }
        PyErr_Format(PyExc_ValueError, "invalid %s length %lld", what, (long long)n);
        return -1;
    }
    if (n > end - *pp) {
        PyErr_Format(PyExc_ValueError, "%s length %lld overruns the record by %lld bytes", what,
                     (long long)n, (long long)(n - (end - *pp)));
        return -1;
    }
    *data = *pp;
    *len = n;
    *pp += n;
    return 0;
}

/* Nullable bytes: varint length, -1 for None. New reference, or NULL with an error set. */
static PyObject *
read_bytes(const uint8_t **pp, const uint8_t *end, const char *what, int nullable)
{
    const uint8_t *data;
    int64_t n;
    if (read_span(pp, end, what, nullable, &data, &n) < 0) {
        return NULL;
    }
    if (n < 0) {
        Py_RETURN_NONE;
    }
    if (!nullable) { /* a header key: a non-null UTF-8 string */
        return PyUnicode_DecodeUTF8((const char *)data, (Py_ssize_t)n, "strict");
    }
    return PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)n);
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
    if (count == 0) {
        return headers;
    }
    /* Not visible to the collector (gc.get_objects() in a callback) while half filled:
     * the items allocated below can run a collection. */
    PyObject_GC_UnTrack(headers);
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
    PyObject_GC_Track(headers);
    return headers;
fail:
    Py_DECREF(headers); /* unset items are NULL, which tuple dealloc skips */
    return NULL;
}

/* A record's length, attributes, timestamp delta and offset delta, from `*pp` (record
 * `index`, `buf` the body's start for messages; offset deltas at most `last_delta`).
 * Sets its end, absolute offset and timestamp and returns 0, or -1 with ValueError set.
 * With `max_record` > 0 (the buffer is a window on a longer body), a record that runs
 * past `end`, or is longer than `max_record`, is not an error: returns 1, `*pp`
 * unchanged, for the caller to stop there. */
static int
read_record_head(const uint8_t **pp, const uint8_t *buf, const uint8_t *end, Py_ssize_t index,
                 long long base_offset, long long last_delta, long long timestamp,
                 int log_append_time, Py_ssize_t max_record, const uint8_t **rec_end_out,
                 long long *offset, long long *ts)
{
    const uint8_t *record_start = *pp;
    const uint8_t *p = *pp;
    int64_t length, ts_delta, offset_delta;
    if (max_record > 0) {
        /* Cut short by the window's end, not corrupt: a length varint that has not ended
         * within the (fewer than 10) bytes left, or a record longer than what is left;
         * or too long to be read at all. */
        const uint8_t *q = p;
        if (read_varint(&q, end, &length) < 0
                ? end - p < 10
                : length >= 0 && (length > end - q || length > max_record)) {
            return 1;
        }
    }
    if (read_varint(&p, end, &length) < 0 || length < 0 || length > end - p) {
        PyErr_Format(PyExc_ValueError, "record %zd at byte %zd: invalid or truncated length",
                     index, (Py_ssize_t)(record_start - buf));
        return -1;
    }
    const uint8_t *const rec_end = p + length;
    if (p >= rec_end) {
        PyErr_Format(PyExc_ValueError, "record %zd at byte %zd: empty record", index,
                     (Py_ssize_t)(record_start - buf));
        return -1;
    }
    p++; /* attributes: unused */
    if (read_varint(&p, rec_end, &ts_delta) < 0 || read_varint(&p, rec_end, &offset_delta) < 0) {
        PyErr_Format(PyExc_ValueError, "record %zd at byte %zd: truncated record header", index,
                     (Py_ssize_t)(record_start - buf));
        return -1;
    }
    if (offset_delta < 0 || offset_delta > last_delta) {
        PyErr_Format(PyExc_ValueError, "record %zd: offset delta %lld outside the batch's 0..%lld",
                     index, (long long)offset_delta, last_delta);
        return -1;
    }
    *ts = timestamp;
    if (__builtin_add_overflow(base_offset, offset_delta, offset) ||
        (!log_append_time && __builtin_add_overflow(timestamp, ts_delta, ts))) {
        PyErr_Format(PyExc_ValueError, "record %zd: offset or timestamp out of range", index);
        return -1;
    }
    *pp = p;
    *rec_end_out = rec_end;
    return 0;
}

PyDoc_STRVAR(decode_v2_doc,
"decode_v2(body, pos, index, count, base_offset, last_delta, timestamp, log_append_time,\n"
"          topic, partition, start, limit, max_record=0) -> (messages, pos, index)\n"
"\n"
"Decode the records of an uncompressed v2 batch body from byte `pos`, record `index`\n"
"(of `count`, offset deltas at most `last_delta`) on. Records with an offset below `start` are skipped; at most `limit`\n"
"messages are returned (0: no limit), with the position and index to resume from.\n"
"Raises ValueError on corrupt or truncated input. With `max_record` > 0, `body` is a\n"
"window on a longer body: decoding stops (no error) at a record that runs past its end\n"
"or is longer than `max_record`.");

/* What decode_v2 and decode_v2_batch decode: records `index` .. `count` of a body from
 * byte `pos` (the arguments of decode_v2). */
typedef struct {
    const uint8_t *buf;
    Py_ssize_t len, pos, index, limit, max_record;
    int count, log_append_time;
    long long base_offset, last_delta, timestamp, start;
    PyObject *topic, *partition;
} records_spec;

/* The messages of `spec`'s records (a new list), moving spec->pos and spec->index to
 * where the next call resumes; NULL with an error set. */
static PyObject *
decode_records(module_state *st, records_spec *spec)
{
    Py_ssize_t index = spec->index, limit = spec->limit, max_record = spec->max_record;
    const int count = spec->count, log_append_time = spec->log_append_time;
    const long long base_offset = spec->base_offset, last_delta = spec->last_delta;
    const long long timestamp = spec->timestamp, start = spec->start;
    PyObject *topic = spec->topic, *partition = spec->partition;
    PyObject *messages = NULL, *ts_type = NULL, *ts_obj = NULL, *result = NULL;
    PyTypeObject *msg_type = st->msg_type;
    const Py_ssize_t *off = st->offsets;
    const int untrack = st->untrack;
    if (msg_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "decode_v2 called before bind()");
        goto done;
    }
    if (spec->pos < 0 || spec->pos > spec->len || index < 0 || limit < 0) {
        PyErr_SetString(PyExc_ValueError, "invalid decode position");
        goto done;
    }
    const uint8_t *const buf = spec->buf;
    const uint8_t *const end = buf + spec->len;
    const uint8_t *p = buf + spec->pos;

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
    /* Not visible to the collector while half filled (its unset items are NULL): every
     * message allocated below can run a collection, and a gc callback can list objects. */
    PyObject_GC_UnTrack(messages);
    /* Consecutive records mostly share a timestamp (log-append time: all of them). */
    long long last_ts = timestamp;
    ts_obj = PyLong_FromLongLong(timestamp);
    if (ts_obj == NULL) {
        goto done;
    }
    Py_ssize_t n = 0;
    while (index < count && n < want) {
        const uint8_t *rec_end;
        long long offset, ts;
        int head = read_record_head(&p, buf, end, index, base_offset, last_delta, timestamp,
                                    log_append_time, max_record, &rec_end, &offset, &ts);
        if (head < 0) {
            goto done;
        }
        if (head > 0) { /* a window: it ends inside this record, or the record is too long */
            break;
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
        /* Not tp_alloc (PyType_GenericAlloc), which zeroes the object and tracks it: every
         * slot is stored right below with nothing that can fail or run code in between,
         * and the message stays untracked unless its class tracks assignments itself. */
        PyObject *msg = (offset_obj && ts_obj) ? (PyObject *)PyObject_GC_New(PyObject, msg_type)
                                               : NULL;
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
        if (!untrack) {
            PyObject_GC_Track(msg); /* see msg_setattro */
        }
        PyList_SET_ITEM(messages, n, msg);
        n++;
    }
    if (index >= count && p != end) {
        PyErr_Format(PyExc_ValueError, "%zd unconsumed bytes after all %d records",
                     (Py_ssize_t)(end - p), count);
        goto done;
    }
    if (n < want) { /* records skipped below `start`: the tail of the list is unset */
        Py_SETREF(messages, PyList_GetSlice(messages, 0, n)); /* a new, tracked list */
        if (messages == NULL) {
            goto done;
        }
    }
    else {
        PyObject_GC_Track(messages);
    }
    spec->pos = p - buf;
    spec->index = index;
    result = Py_NewRef(messages);
done:
    Py_XDECREF(messages); /* unset items are NULL, which list dealloc skips */
    Py_XDECREF(ts_type);
    Py_XDECREF(ts_obj);
    return result;
}

static PyObject *
decode_v2(PyObject *module, PyObject *args)
{
    Py_buffer view;
    records_spec spec = {.max_record = 0};
    if (!PyArg_ParseTuple(args, "y*nniLLLpUOLn|n:decode_v2", &view, &spec.pos, &spec.index,
                          &spec.count, &spec.base_offset, &spec.last_delta, &spec.timestamp,
                          &spec.log_append_time, &spec.topic, &spec.partition, &spec.start,
                          &spec.limit, &spec.max_record)) {
        return NULL;
    }
    spec.buf = (const uint8_t *)view.buf;
    spec.len = view.len;
    PyObject *messages = decode_records(get_state(module), &spec);
    PyObject *result = NULL;
    if (messages != NULL) {
        result = Py_BuildValue("Onn", messages, spec.pos, spec.index);
        Py_DECREF(messages);
    }
    PyBuffer_Release(&view);
    return result;
}

/* Big-endian integers of a batch header. */
static inline uint64_t
be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}

static inline uint32_t
be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The v2 batch header: base offset, attributes, last offset delta, first and max
 * timestamps, record count (at these byte positions), then the records. */
enum { H_BASE = 0, H_MAGIC = 16, H_ATTRIBUTES = 21, H_LAST_DELTA = 23, H_FIRST_TS = 27,
       H_MAX_TS = 35, H_COUNT = 57, V2_HEADER_SIZE = 61 };
#define CODEC_MASK 0x07
#define LOG_APPEND_TIME 0x08

PyDoc_STRVAR(scan_v2_doc,
"scan_v2(records, fetch_offset) -> (kept, count, next_offset, end) | None\n\n"
"records.scan_records for a record set of v2 batches read uncommitted, without CRC\n"
"checks: the kept batches as (memoryview, 2, byte position), the records they hold at or\n"
"after `fetch_offset`, the offset to fetch next and the bytes the complete batches\n"
"cover. None at anything else (another format, a batch too short, offsets out of\n"
"range): scan it in Python, which raises or reads the other formats.");

#define CONTROL 0x20
#define LOG_OVERHEAD 12
#define V2_MIN_LENGTH 49

static PyObject *
scan_v2(PyObject *module, PyObject *args)
{
    PyObject *records;
    long long fetch_offset;
    if (!PyArg_ParseTuple(args, "OL:scan_v2", &records, &fetch_offset)) {
        return NULL;
    }
    PyObject *view = PyMemoryView_FromObject(records);
    if (view == NULL) {
        return NULL;
    }
    PyObject *kept = PyList_New(0), *result = NULL;
    if (kept == NULL) {
        goto done;
    }
    Py_buffer *buf = PyMemoryView_GET_BUFFER(view);
    if (!PyBuffer_IsContiguous(buf, 'C') || buf->itemsize != 1) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    const uint8_t *data = (const uint8_t *)buf->buf;
    const Py_ssize_t end = buf->len;
    Py_ssize_t pos = 0;
    long long count = 0, next_offset = fetch_offset;
    while (end - pos >= LOG_OVERHEAD) {
        int32_t length = (int32_t)be32(data + pos + 8);
        if (length >= 0 && (Py_ssize_t)length > end - pos - LOG_OVERHEAD) {
            break; /* cut short by the fetch size: the set ends there */
        }
        /* length >= 49: the header's 61 bytes are inside the buffer */
        if (length < V2_MIN_LENGTH || data[pos + H_MAGIC] != 2) {
            result = Py_NewRef(Py_None); /* another format, or an error to word */
            goto done;
        }
        Py_ssize_t batch_end = pos + LOG_OVERHEAD + length;
        long long first = (int64_t)be64(data + pos + H_BASE);
        long long last_delta = (int32_t)be32(data + pos + H_LAST_DELTA);
        int attributes = (int)(int16_t)(((uint16_t)data[pos + H_ATTRIBUTES] << 8) |
                                        data[pos + H_ATTRIBUTES + 1]);
        long long batch_next;
        if (__builtin_add_overflow(first, last_delta + 1, &batch_next)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (!(attributes & CONTROL) && batch_next > fetch_offset) {
            PyObject *slice = PySequence_GetSlice(view, pos, batch_end);
            PyObject *item = slice ? Py_BuildValue("(Nin)", slice, 2, pos) : NULL;
            if (item == NULL || PyList_Append(kept, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
            count += batch_next - (first > fetch_offset ? first : fetch_offset);
        }
        if (batch_next > next_offset) {
            next_offset = batch_next;
        }
        pos = batch_end;
    }
    result = Py_BuildValue("OLLn", kept, count, next_offset, pos);
done:
    Py_XDECREF(kept);
    Py_DECREF(view);
    return result;
}

PyDoc_STRVAR(decode_v2_batch_doc,
"decode_v2_batch(batch, topic, partition, start, limit) -> list | None\n\n"
"The messages of a whole uncompressed v2 batch (its header included) of at most `limit`\n"
"records (0: any number), none below `start`, in one call: what decode_v2 returns for its\n"
"body, read with the header's fields. None for a batch it is not for (compressed, more\n"
"records than `limit`, not v2): decode it in steps then. ValueError on corrupt input.");

static PyObject *
decode_v2_batch(PyObject *module, PyObject *args)
{
    Py_buffer view;
    records_spec spec = {.max_record = 0};
    if (!PyArg_ParseTuple(args, "y*UOLn:decode_v2_batch", &view, &spec.topic, &spec.partition,
                          &spec.start, &spec.limit)) {
        return NULL;
    }
    const uint8_t *h = (const uint8_t *)view.buf;
    PyObject *result = NULL;
    if (view.len < V2_HEADER_SIZE || h[H_MAGIC] != 2) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int attributes = (int)(int16_t)(((uint16_t)h[H_ATTRIBUTES] << 8) | h[H_ATTRIBUTES + 1]);
    spec.count = (int32_t)be32(h + H_COUNT);
    if ((attributes & CODEC_MASK) || (spec.limit && spec.count > spec.limit)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    spec.log_append_time = (attributes & LOG_APPEND_TIME) != 0;
    spec.base_offset = (int64_t)be64(h + H_BASE);
    spec.last_delta = (int32_t)be32(h + H_LAST_DELTA);
    spec.timestamp = (int64_t)be64(h + (spec.log_append_time ? H_MAX_TS : H_FIRST_TS));
    spec.buf = h + V2_HEADER_SIZE;
    spec.len = view.len - V2_HEADER_SIZE;
    spec.pos = spec.index = 0;
    result = decode_records(get_state(module), &spec);
done:
    PyBuffer_Release(&view);
    return result;
}

/* ---- decode_v2_columns: the same records into Arrow-layout column buffers ----
 *
 * The Spark source's path: no Python object per record. Each column is a bytearray that
 * grows call after call: binary columns as int32 offsets (starting with 0) + data +
 * validity bitmap (LSB first, as Arrow's), fixed-width columns as native integers. A call
 * reserves the room its records can need at most, writes, then trims every buffer to
 * what it wrote (bytearray keeps its allocation on a small shrink, so the next call's
 * reserve is free). */

enum { C_KEY_OFFSETS, C_KEY_DATA, C_KEY_VALID, C_VALUE_OFFSETS, C_VALUE_DATA, C_VALUE_VALID,
       C_OFFSETS, C_TIMESTAMPS, C_TS_TYPES, N_COLUMN_BUFS };
enum { H_LIST_OFFSETS, H_KEY_OFFSETS, H_KEY_DATA, H_VALUE_OFFSETS, H_VALUE_DATA, H_VALUE_VALID,
       N_HEADER_BUFS };

typedef struct {
    PyObject *ba;    /* the bytearray (borrowed from the caller's tuple) */
    Py_ssize_t used; /* bytes written */
    char *data;      /* its storage while reserved */
} outbuf;

/* Make room for `extra` bytes after `used`, zeroing them when `zero` (bitmaps). The
 * bytearray's size is left alone: the bytes are written into its allocation, and
 * ob_trim() sets the size once. Capacity grows at least 2x, so appending a batch at a time
 * costs no realloc per call (PyByteArray_Resize alone reallocates on most of them). */
static int
ob_reserve(outbuf *b, Py_ssize_t extra, int zero)
{
    PyByteArrayObject *ba = (PyByteArrayObject *)b->ba;
    if (ba->ob_exports > 0) { /* a memoryview or an Arrow buffer still reads it */
        PyErr_SetString(PyExc_BufferError, "a column buffer is exported: cannot append to it");
        return -1;
    }
    if (extra > PY_SSIZE_T_MAX / 2 - b->used) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->used + extra;
    Py_ssize_t room = ba->ob_alloc - (ba->ob_start - ba->ob_bytes) - 1; /* - trailing NUL */
    if (need > room) {
        if (PyByteArray_Resize(b->ba, need > 2 * b->used ? need : 2 * b->used) < 0) {
            return -1;
        }
        Py_SET_SIZE(ba, b->used); /* the capacity stays; ob_trim() sets the final size */
    }
    /* Not PyByteArray_AS_STRING: at size 0 it gives a shared empty string. */
    b->data = ba->ob_start;
    if (zero && extra > 0) {
        memset(b->data + b->used, 0, (size_t)extra);
    }
    return 0;
}

/* Set the size of a reserved buffer to what was written. Returns 0, or -1 (a
 * RuntimeError set unless one is) when the bytearray's storage is no longer the one
 * reserved: code run by the collector (a finalizer, a gc callback) resized it meanwhile,
 * and what was written there is gone; the bytearray is then left as that code left it. */
static int
ob_trim(outbuf *b)
{
    PyByteArrayObject *ba = (PyByteArrayObject *)b->ba;
    if (b->data == NULL) { /* an empty bytearray reserved nothing: nothing was written */
        return 0;
    }
    if (ba->ob_start != b->data || ba->ob_alloc - (ba->ob_start - ba->ob_bytes) <= b->used) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError,
                            "decode_v2_columns: a column buffer was changed while decoding");
        }
        return -1;
    }
    Py_SET_SIZE(ba, b->used);
    b->data[b->used] = '\0'; /* bytearray keeps a trailing NUL */
    return 0;
}

static inline void
ob_put(outbuf *b, const void *src, Py_ssize_t n)
{
    memcpy(b->data + b->used, src, (size_t)n);
    b->used += n;
}

static inline void
set_bit(outbuf *bitmap, int64_t i)
{
    bitmap->data[i >> 3] |= (char)(1 << (i & 7));
}

/* Take `n` bytearrays from `tuple` into `out`, checking they are distinct from each
 * other and from the `n_taken` taken before `out` (each is resized on its own: one
 * bytearray twice would be written through a pointer its other resize freed). */
static int
take_buffers(PyObject *tuple, outbuf *out, Py_ssize_t n, Py_ssize_t n_taken, const char *what)
{
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != n) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of %zd bytearrays", what, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ba = PyTuple_GET_ITEM(tuple, i);
        if (!PyByteArray_CheckExact(ba)) {
            PyErr_Format(PyExc_TypeError, "%s must be a tuple of %zd bytearrays", what, n);
            return -1;
        }
        for (Py_ssize_t j = -n_taken; j < i; j++) {
            if (out[j].ba == ba) {
                PyErr_Format(PyExc_ValueError, "%s: the same bytearray twice", what);
                return -1;
            }
        }
        out[i].ba = ba;
        out[i].used = PyByteArray_GET_SIZE(ba);
        out[i].data = PyByteArray_AS_STRING(ba); /* for the checks; ob_reserve() resets it */
    }
    return 0;
}

static inline int32_t
last_int32(const outbuf *b)
{
    int32_t v;
    memcpy(&v, b->data + b->used - 4, 4);
    return v;
}

/* A binary column (offsets, data) of `rows` rows is consistent: rows + 1 offsets, the last
 * one the data's size. */
static int
binary_consistent(const outbuf *offsets, const outbuf *data, int64_t rows)
{
    return offsets->used == 4 * (rows + 1) && last_int32(offsets) == data->used;
}

/* Append a span (NULL data: a null) to a binary column of `row` rows so far. */
static int
put_binary(outbuf *offsets, outbuf *data, outbuf *valid, int64_t row, const uint8_t *src,
           int64_t n, const char *what)
{
    if (n > 0) {
        if (n > INT32_MAX - data->used) {
            PyErr_Format(PyExc_ValueError,
                         "%s data passes 2 GiB, the limit of an Arrow binary column", what);
            return -1;
        }
        ob_put(data, src, (Py_ssize_t)n);
    }
    if (src != NULL && valid != NULL) {
        set_bit(valid, row);
    }
    int32_t end = (int32_t)data->used;
    ob_put(offsets, &end, 4);
    return 0;
}

PyDoc_STRVAR(decode_v2_columns_doc,
"decode_v2_columns(body, pos, index, count, base_offset, last_delta, timestamp,\n"
"                  log_append_time, start, stop, limit, max_bytes, columns, headers,\n"
"                  max_record=0)\n"
"                  -> (pos, index, ended)\n"
"\n"
"Decode the records of an uncompressed v2 batch body from byte `pos`, record `index`\n"
"(of `count`, offset deltas at most `last_delta`) on, appending them to Arrow-layout buffers: `columns` is a tuple of 9\n"
"bytearrays (key offsets, key data, key validity, value offsets, value data, value\n"
"validity, offsets int64, timestamps int64 in microseconds, timestamp types int32);\n"
"`headers` None (headers are checked, not kept) or 6 bytearrays (list offsets, key\n"
"offsets, key data, value offsets, value data, value validity); all distinct. Records\n"
"below `start` are skipped; decoding ends before the first record at or after `stop` (`ended` True),\n"
"after `limit` appended rows, or once the key and value data reach `max_bytes`.\n"
"Raises ValueError on corrupt or truncated input (the buffers are then unspecified).\n"
"`max_record`: as for decode_v2.");

static PyObject *
decode_v2_columns(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, index, limit, max_bytes;
    Py_ssize_t max_record = 0;
    int count, log_append_time;
    long long base_offset, last_delta, timestamp, start, stop;
    PyObject *columns, *headers;
    if (!PyArg_ParseTuple(args, "y*nniLLLpLLnnOO|n:decode_v2_columns", &view, &pos, &index,
                          &count, &base_offset, &last_delta, &timestamp, &log_append_time,
                          &start, &stop, &limit, &max_bytes, &columns, &headers, &max_record)) {
        return NULL;
    }
    PyObject *result = NULL;
    /* One array: the header buffers follow the column ones (checked distinct from them). */
    outbuf all[N_COLUMN_BUFS + N_HEADER_BUFS];
    outbuf *const c = all, *const h = all + N_COLUMN_BUFS;
    int keep_headers = headers != Py_None;
    int ended = 0, n_reserved = 0, ok = 0;
    Py_ssize_t resume = 0;
    int64_t rows0 = 0, rows = 0, entries = 0;
    if (pos < 0 || pos > view.len || index < 0 || limit <= 0 || max_bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "invalid decode position");
        goto done;
    }
    if (take_buffers(columns, c, N_COLUMN_BUFS, 0, "columns") < 0 ||
        (keep_headers && take_buffers(headers, h, N_HEADER_BUFS, N_COLUMN_BUFS, "headers") < 0)) {
        goto done;
    }
    rows0 = rows = c[C_OFFSETS].used / 8;
    entries = keep_headers ? h[H_KEY_OFFSETS].used / 4 - 1 : 0;
    if (c[C_OFFSETS].used % 8 || !binary_consistent(&c[C_KEY_OFFSETS], &c[C_KEY_DATA], rows) ||
        !binary_consistent(&c[C_VALUE_OFFSETS], &c[C_VALUE_DATA], rows) ||
        c[C_KEY_VALID].used != (rows + 7) / 8 || c[C_VALUE_VALID].used != (rows + 7) / 8 ||
        c[C_TIMESTAMPS].used != 8 * rows || c[C_TS_TYPES].used != 4 * rows ||
        (keep_headers &&
         (h[H_LIST_OFFSETS].used != 4 * (rows + 1) || entries < 0 ||
          h[H_KEY_OFFSETS].used % 4 || last_int32(&h[H_LIST_OFFSETS]) != entries ||
          !binary_consistent(&h[H_KEY_OFFSETS], &h[H_KEY_DATA], entries) ||
          !binary_consistent(&h[H_VALUE_OFFSETS], &h[H_VALUE_DATA], entries) ||
          h[H_VALUE_VALID].used != (entries + 7) / 8))) {
        PyErr_SetString(PyExc_ValueError, "decode_v2_columns: inconsistent column buffers");
        goto done;
    }
    const uint8_t *const buf = (const uint8_t *)view.buf;
    const uint8_t *const end = buf + view.len;
    const uint8_t *p = buf + pos;
    const Py_ssize_t left = end - p;

    /* Room for the most rows this call can append (records left, capped by the bytes
     * left and by `limit`) and for all the bytes left in each data buffer. */
    Py_ssize_t want = count > index ? (Py_ssize_t)count - index : 0;
    if (want > left / MIN_RECORD_SIZE + 1) {
        want = left / MIN_RECORD_SIZE + 1;
    }
    if (want > limit) {
        want = limit;
    }
    /* Bitmap bytes for `n` more bits after `have`. */
#define BITMAP_MORE(have, n) (((have) + (n) + 7) / 8 - ((have) + 7) / 8)
    const Py_ssize_t most = keep_headers ? left / 2 : 0; /* a header takes at least 2 bytes */
    const struct {
        outbuf *buf;
        Py_ssize_t extra;
        int zero;
    } plan[N_COLUMN_BUFS + N_HEADER_BUFS] = {
        {&c[C_KEY_OFFSETS], 4 * want, 0},
        {&c[C_KEY_DATA], left, 0},
        {&c[C_KEY_VALID], BITMAP_MORE(rows, want), 1},
        {&c[C_VALUE_OFFSETS], 4 * want, 0},
        {&c[C_VALUE_DATA], left, 0},
        {&c[C_VALUE_VALID], BITMAP_MORE(rows, want), 1},
        {&c[C_OFFSETS], 8 * want, 0},
        {&c[C_TIMESTAMPS], 8 * want, 0},
        {&c[C_TS_TYPES], 4 * want, 0},
        {&h[H_LIST_OFFSETS], 4 * want, 0},
        {&h[H_KEY_OFFSETS], 4 * most, 0},
        {&h[H_KEY_DATA], left, 0},
        {&h[H_VALUE_OFFSETS], 4 * most, 0},
        {&h[H_VALUE_DATA], left, 0},
        {&h[H_VALUE_VALID], BITMAP_MORE(entries, most), 1},
    };
    const int n_plan = keep_headers ? N_COLUMN_BUFS + N_HEADER_BUFS : N_COLUMN_BUFS;
    for (; n_reserved < n_plan; n_reserved++) {
        if (ob_reserve(plan[n_reserved].buf, plan[n_reserved].extra, plan[n_reserved].zero) < 0) {
            goto done;
        }
    }
#undef BITMAP_MORE
    const int32_t ts_type = log_append_time ? 1 : 0;
    while (index < count && rows - rows0 < want) {
        if (c[C_KEY_DATA].used + c[C_VALUE_DATA].used >= max_bytes) {
            break;
        }
        const uint8_t *const rec_start = p, *rec_end;
        long long offset, ts;
        int head = read_record_head(&p, buf, end, index, base_offset, last_delta, timestamp,
                                    log_append_time, max_record, &rec_end, &offset, &ts);
        if (head < 0) {
            goto done;
        }
        if (head > 0) { /* a window: it ends inside this record, or the record is too long */
            break;
        }
        if (offset >= stop) { /* past the range: this record and the rest are not read */
            p = rec_start;
            ended = 1;
            break;
        }
        index++;
        if (offset < start) { /* below the fetch offset: already consumed */
            p = rec_end;
            continue;
        }
        const uint8_t *key, *value;
        int64_t key_len, value_len, n_headers;
        if (read_span(&p, rec_end, "key", 1, &key, &key_len) < 0 ||
            read_span(&p, rec_end, "value", 1, &value, &value_len) < 0) {
            goto done;
        }
        if (read_varint(&p, rec_end, &n_headers) < 0) {
            PyErr_SetString(PyExc_ValueError, "truncated header count");
            goto done;
        }
        if (n_headers < 0 || n_headers > (rec_end - p) / 2) {
            PyErr_Format(PyExc_ValueError, "invalid header count %lld", (long long)n_headers);
            goto done;
        }
        for (int64_t i = 0; i < n_headers; i++) {
            const uint8_t *hkey, *hvalue;
            int64_t hkey_len, hvalue_len;
            if (read_span(&p, rec_end, "header key", 0, &hkey, &hkey_len) < 0 ||
                read_span(&p, rec_end, "header value", 1, &hvalue, &hvalue_len) < 0) {
                goto done;
            }
            if (keep_headers) { /* UTF-8 of the keys: checked by the caller, on the array */
                if (put_binary(&h[H_KEY_OFFSETS], &h[H_KEY_DATA], NULL, entries, hkey,
                               hkey_len, "header key") < 0 ||
                    put_binary(&h[H_VALUE_OFFSETS], &h[H_VALUE_DATA], &h[H_VALUE_VALID],
                               entries, hvalue, hvalue_len, "header value") < 0) {
                    goto done;
                }
                entries++;
            }
        }
        if (p != rec_end) {
            PyErr_Format(PyExc_ValueError, "record %zd: %zd bytes left over after its headers",
                         index - 1, (Py_ssize_t)(rec_end - p));
            goto done;
        }
        long long micros;
        if (__builtin_mul_overflow(ts, 1000LL, &micros)) {
            PyErr_Format(PyExc_ValueError, "record %zd: timestamp %lld out of range", index - 1,
                         ts);
            goto done;
        }
        if (put_binary(&c[C_KEY_OFFSETS], &c[C_KEY_DATA], &c[C_KEY_VALID], rows, key, key_len,
                       "key") < 0 ||
            put_binary(&c[C_VALUE_OFFSETS], &c[C_VALUE_DATA], &c[C_VALUE_VALID], rows, value,
                       value_len, "value") < 0) {
            goto done;
        }
        int64_t offset64 = offset, micros64 = micros;
        ob_put(&c[C_OFFSETS], &offset64, 8);
        ob_put(&c[C_TIMESTAMPS], &micros64, 8);
        ob_put(&c[C_TS_TYPES], &ts_type, 4);
        if (keep_headers) {
            int32_t list_end = (int32_t)entries;
            if (entries > INT32_MAX) {
                PyErr_SetString(PyExc_ValueError, "more than 2**31 headers in one Arrow batch");
                goto done;
            }
            ob_put(&h[H_LIST_OFFSETS], &list_end, 4);
        }
        rows++;
    }
    if (!ended && index >= count && p != end) {
        PyErr_Format(PyExc_ValueError, "%zd unconsumed bytes after all %d records",
                     (Py_ssize_t)(end - p), count);
        goto done;
    }
    /* Success: what to return is built once the buffers are trimmed (below). Building it
     * first would allocate, which can run a collection, and so Python code that resizes
     * a buffer under the pointers still to be written through. */
    ok = 1;
    resume = (Py_ssize_t)(p - buf);
done:
    if (n_reserved > 0) { /* size every reserved buffer to what was written (on error too) */
        c[C_KEY_VALID].used = c[C_VALUE_VALID].used = (Py_ssize_t)((rows + 7) / 8);
        if (keep_headers) {
            h[H_VALUE_VALID].used = (Py_ssize_t)((entries + 7) / 8);
        }
        for (int i = 0; i < n_reserved; i++) {
            if (ob_trim(&all[i]) < 0) {
                ok = 0;
            }
        }
    }
    PyBuffer_Release(&view);
    if (ok) {
        result = Py_BuildValue("nnO", resume, index, ended ? Py_True : Py_False);
    }
    return result;
}

PyDoc_STRVAR(frame_buffer_doc,
"frame_buffer(size)\n"
"\n"
"A bytearray of `size` bytes that are not zeroed: for a buffer written whole before any of\n"
"it is read (a response frame the socket fills). bytearray(size) writes `size` zero bytes\n"
"first, a pass over every fetched byte.");

static PyObject *
frame_buffer(PyObject *module, PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

PyDoc_STRVAR(bind_doc,
"bind(cls)\n"
"\n"
"Use `cls` (consumergroup.message.ConsumerMessage) for decoded messages. Checks that its\n"
"__slots__ are exactly the 8 message fields, each an object slot of `cls` itself;\n"
"raises TypeError otherwise (the caller then keeps the Python decoder). Decoded messages\n"
"are not tracked by the cyclic collector; assigning a field a value the collector tracks\n"
"tracks the message again (`cls` gets that attribute assignment, unless it has its own).");

static PyObject *
bind(PyObject *module, PyObject *cls)
{
    Py_ssize_t offsets[N_FIELDS];
    if (slot_offsets(cls, FIELD_NAMES, N_FIELDS, offsets) < 0) {
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    module_state *st = get_state(module);
    memcpy(st->offsets, offsets, sizeof(offsets));
    /* Messages are untracked only where an assignment can track them again: a class
     * with its own __setattr__ keeps them tracked. */
    if (type->tp_setattro == PyObject_GenericSetAttr) {
        type->tp_setattro = msg_setattro;
        PyType_Modified(type);
    }
    st->untrack = type->tp_setattro == msg_setattro;
    if (type->tp_finalize == NULL && type->tp_del == NULL && type->tp_weaklistoffset == 0 &&
        type->tp_dictoffset == 0 && (type->tp_flags & Py_TPFLAGS_HAVE_GC)) {
        type->tp_dealloc = msg_dealloc;
    }
    Py_INCREF(cls);
    Py_XSETREF(st->msg_type, type);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_v2", decode_v2, METH_VARARGS, decode_v2_doc},
    {"decode_v2_batch", decode_v2_batch, METH_VARARGS, decode_v2_batch_doc},
    {"scan_v2", scan_v2, METH_VARARGS, scan_v2_doc},
    {"decode_v2_columns", decode_v2_columns, METH_VARARGS, decode_v2_columns_doc},
    {"bind", bind, METH_O, bind_doc},
    {"frame_buffer", frame_buffer, METH_O, frame_buffer_doc},
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
