/* The log cleaner's two walks over the records of one v2 batch (the bytes after the 61-byte header,
 * decompressed), in C: the cleaner touches every record twice, and in Python that was ~10 us a record.
 * storage/cleaner/record_filter.py holds the same rules in Python (used when this module is not built);
 * the tests hold the two to the same answers.
 *
 * map_keys(records, count, base_offset, offsets: dict) -> None
 *     offsets[key] = base_offset + offsetDelta for every record that has a key, in order.
 * filter_records(records, count, base_offset, offsets: dict, map_end, drop_tombstones)
 *         -> (body: bytes | None, kept: int, kept_tombstones: int)
 *     Kafka's cleaner rule per record: no key -> dropped; offset < map_end and a later offset for its
 *     key in ``offsets`` -> dropped; a null value (tombstone) -> dropped if drop_tombstones; else kept.
 *     ``body`` is the kept records' bytes back to back, unchanged, or None when every record was kept.
 * Both raise ValueError when the records do not parse.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_ssize_t start, end;      /* the whole record, length varint included */
    Py_ssize_t key, key_len;    /* key_len < 0: no key */
    int64_t offset_delta;
    int tombstone;
} rec_t;

static int read_varint(const uint8_t **p, const uint8_t *end, int max_bytes, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*p >= end) return -1;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* Parse one record at *p; 0 on success. */
static int parse(const uint8_t *buf, const uint8_t **p, const uint8_t *end, rec_t *r) {
    int64_t length, ts, od, klen, vlen;
    r->start = *p - buf;
    if (read_varint(p, end, 5, &length) || length <= 0 || length > end - *p) return -1;
    const uint8_t *rec_end = *p + length;
    *p += 1; /* attributes */
    if (read_varint(p, rec_end, 10, &ts)) return -1;
    if (read_varint(p, rec_end, 5, &od)) return -1;
    if (read_varint(p, rec_end, 5, &klen)) return -1;
    r->offset_delta = od;
    r->key = *p - buf;
    r->key_len = klen;
    if (klen > 0) {
        if (klen > rec_end - *p) return -1;
        *p += klen;
    }
    if (read_varint(p, rec_end, 5, &vlen)) return -1;
    r->tombstone = vlen < 0;
    r->end = rec_end - buf;
    *p = rec_end;
    return 0;
}

static rec_t *scan(Py_buffer *view, Py_ssize_t count) {
    if (count < 0 || count > view->len) {
        PyErr_SetString(PyExc_ValueError, "record count out of range");
        return NULL;
    }
    rec_t *recs = PyMem_Malloc(sizeof(rec_t) * (count ? count : 1));
    if (!recs) {
        PyErr_NoMemory();
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)view->buf;
    const uint8_t *p = buf, *end = buf + view->len;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        if (parse(buf, &p, end, &recs[i])) { bad = i; break; }
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyMem_Free(recs);
        PyErr_Format(PyExc_ValueError, "record %zd of the batch does not parse", bad);
        return NULL;
    }
    return recs;
}

static PyObject *map_keys(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base;
    PyObject *offsets;
    if (!PyArg_ParseTuple(args, "y*nLO!", &view, &count, &base, &PyDict_Type, &offsets)) return NULL;
    rec_t *recs = scan(&view, count);
    PyObject *result = NULL;
    if (!recs) goto done;
    const char *buf = (const char *)view.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (recs[i].key_len < 0) continue;
        PyObject *k = PyBytes_FromStringAndSize(buf + recs[i].key, recs[i].key_len);
        PyObject *v = k ? PyLong_FromLongLong(base + recs[i].offset_delta) : NULL;
        int rc = v ? PyDict_SetItem(offsets, k, v) : -1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc) goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(recs);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *filter_records(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t count;
    long long base, map_end;
    PyObject *offsets;
    int drop_tombstones;
    if (!PyArg_ParseTuple(args, "y*nLO!Lp", &view, &count, &base, &PyDict_Type, &offsets, &map_end,
                          &drop_tombstones))
        return NULL;
    rec_t *recs = scan(&view, count);
    PyObject *result = NULL, *body = NULL;
    char *keep = NULL;
    if (!recs) goto done;
    keep = PyMem_Malloc(count ? count : 1);
    if (!keep) { PyErr_NoMemory(); goto done; }
    const char *buf = (const char *)view.buf;
    Py_ssize_t kept = 0, tombstones = 0, kept_bytes = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        rec_t *r = &recs[i];
        keep[i] = 0;
        if (r->key_len < 0) continue;
        long long offset = base + r->offset_delta;
        if (offset < map_end) {
            PyObject *k = PyBytes_FromStringAndSize(buf + r->key, r->key_len);
            if (!k) goto done;
            PyObject *latest = PyDict_GetItemWithError(offsets, k);
            Py_DECREF(k);
            if (latest) {
                long long l = PyLong_AsLongLong(latest);
                if (l == -1 && PyErr_Occurred()) goto done;
                if (offset < l) continue;
            } else if (PyErr_Occurred()) {
                goto done;
            }
        }
        if (r->tombstone) {
            if (drop_tombstones) continue;
            tombstones++;
        }
        keep[i] = 1;
        kept++;
        kept_bytes += r->end - r->start;
    }
    if (kept == count) {
        body = Py_NewRef(Py_None);
    } else {
        body = PyBytes_FromStringAndSize(NULL, kept_bytes);
        if (!body) goto done;
        char *out = PyBytes_AS_STRING(body);
        for (Py_ssize_t i = 0; i < count; i++) {
            if (keep[i]) {
                memcpy(out, buf + recs[i].start, recs[i].end - recs[i].start);
                out += recs[i].end - recs[i].start;
            }
        }
    }
    result = Py_BuildValue("(Nnn)", body, kept, tombstones);
    body = NULL;
done:
    Py_XDECREF(body);
    PyMem_Free(keep);
    PyMem_Free(recs);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"map_keys", map_keys, METH_VARARGS, "offsets[key] = offset for every keyed record of a batch"},
    {"filter_records", filter_records, METH_VARARGS, "the records a cleaning keeps, back to back"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cleaner_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__cleaner_scan(void) { return PyModule_Create(&module); }
