/* Decrypt every whole TLS record waiting in an ssl.SSLObject's incoming memory BIO in one call.
 *
 * ssl.SSLObject.read returns one TLS record per call, and each call pays Python's method dispatch, a GIL
 * release and re-acquire, and the C wrapper's bookkeeping. Clients such as librdkafka write a 1 KiB
 * message as two records (about 16 B + 1 KiB), so over SASL_SSL the broker made one read call per
 * ~1.8 KB (docs/performance-profile.md, section 4). drain() calls SSL_read_ex in a loop with the GIL
 * released once, until the buffer is full or OpenSSL wants more bytes.
 *
 * The SSL* is taken from CPython's _ssl._SSLSocket object, whose C layout begins with PyObject_HEAD, the
 * weakref to its socket, then the SSL* (every CPython from 3.7 to 3.13). usable() checks the guess: the
 * type is _ssl._SSLSocket and the SSL's app data points back at that object (_ssl sets it so). Anything
 * else than data or "want more bytes" is left to ssl.SSLObject.read, which reports it as it always did.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <openssl/ssl.h>

#define SSL_OFFSET (sizeof(PyObject) + sizeof(PyObject *))

enum { STOP_WANT_READ = 0, STOP_FULL = 1, STOP_OTHER = 2 };

static SSL *ssl_of(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (strcmp(tp->tp_name, "_ssl._SSLSocket") != 0 || (size_t)tp->tp_basicsize < SSL_OFFSET + sizeof(SSL *)) {
        return NULL;
    }
    SSL *ssl = *(SSL **)((char *)obj + SSL_OFFSET);
    if (ssl == NULL || SSL_get_app_data(ssl) != (void *)obj) {
        return NULL;
    }
    return ssl;
}

static PyObject *usable(PyObject *self, PyObject *obj)
{
    (void)self;
    return PyBool_FromLong(ssl_of(obj) != NULL);
}

/* drain(sslobj, buffer, size) -> (bytes written into buffer, why it stopped) */
static PyObject *drain(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "drain(sslobj, buffer, size)");
        return NULL;
    }
    SSL *ssl = ssl_of(args[0]);
    if (ssl == NULL) {
        PyErr_SetString(PyExc_TypeError, "not an _ssl._SSLSocket this module understands");
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[2]);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_WRITABLE | PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    size_t room = (size_t)(size < 0 || size > view.len ? view.len : size);
    char *dst = (char *)view.buf;
    size_t got = 0;
    int stop = STOP_FULL;
    Py_BEGIN_ALLOW_THREADS
    while (got < room) {
        size_t n = 0;
        if (SSL_read_ex(ssl, dst + got, room - got, &n) == 1) {
            got += n;
            continue;
        }
        stop = SSL_get_error(ssl, 0) == SSL_ERROR_WANT_READ ? STOP_WANT_READ : STOP_OTHER;
        break;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("ni", (Py_ssize_t)got, stop);
}

static PyMethodDef methods[] = {
    {"usable", usable, METH_O, "Whether drain() can read this _ssl._SSLSocket."},
    {"drain", (PyCFunction)(void (*)(void))drain, METH_FASTCALL, "Read every whole record: (nbytes, stop)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tls_drain", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__tls_drain(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "STOP_WANT_READ", STOP_WANT_READ) < 0 ||
        PyModule_AddIntConstant(m, "STOP_FULL", STOP_FULL) < 0 ||
        PyModule_AddIntConstant(m, "STOP_OTHER", STOP_OTHER) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
