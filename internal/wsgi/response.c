/* response.c: start_response, write() and the body of the app's
 * iterable (PEP 3333, "The start_response() Callable", "Buffering and
 * Streaming").
 *
 * Notes about the implementation
 * ------------------------------
 * Buffering (PEP 3333, "Buffering and Streaming"): a server must not delay
 * a block. When the iterator is a list or tuple iterator (a list, Django's
 * HttpResponse) every block already exists, so they are gathered and sent
 * with the head in one write, with a Content-Length. Any other iterable
 * (a generator) has each non-empty block flushed before the next is asked
 * for; a full buffer is flushed too (the bound rule). A flush is the one
 * C->Go call of the response (go_ts_wsgi_flush), with the GIL released.
 *
 * Validation (DESIGN.md, the bytes rule): the status and every header are
 * checked here before they become bytes: latin-1 str, a token name, no
 * CR/LF/NUL or other control byte in the value. start_response raises
 * into the app otherwise, so the app's error handling sees it and the
 * server answers 500.
 */
#include "wsgi.h"
#include "_cgo_export.h"

#include <stdlib.h>
#include <string.h>

#define OUT_MAX (64 * 1024)     /* body bytes gathered before a flush */
#define HEAD_MAX (64 * 1024)    /* status line + headers from the app */

typedef ts_wsgi_start_response StartResponse;

PyTypeObject *ts_wsgi_start_response_type;

/* ---- flushing to Go --------------------------------------------------- */

/* flush hands the head (if not sent) and the buffered body to Go, with the
 * GIL released. Returns 0, or -1 when the client is gone (no exception
 * set). Attached on entry and return. */
static int
flush(ts_wsgi_job *job)
{
    ts_thread *t = ts_thread_current();
    int rc;

    ts_thread_detach(t, 0);
    rc = go_ts_wsgi_flush(job->handle);
    ts_thread_attach(t);
    job->out_len = 0;
    if (rc < 0) {
        job->result = TS_WSGI_GONE;
        return -1;
    }
    return 0;
}

/* append adds data to the body buffer, flushing first when it would pass
 * OUT_MAX. Returns 0, -1 with an exception set, or -2 client gone. */
static int
append(ts_wsgi_job *job, const char *data, size_t n)
{
    if (job->out_len > 0 && job->out_len + n > OUT_MAX) {
        if (flush(job) < 0) {
            return -2;
        }
    }
    if (n > OUT_MAX && job->out_len == 0) {
        /* A large block: write it through in OUT_MAX pieces. */
        while (n > 0) {
            size_t k = n > OUT_MAX ? OUT_MAX : n;
            if (ts_buf_grow(&job->body, &job->body_cap, 0, k, OUT_MAX) < 0) {
                return -1;
            }
            memcpy(job->body, data, k);
            job->out_len = k;
            data += k;
            n -= k;
            if (n > 0 && flush(job) < 0) {
                return -2;
            }
        }
        return 0;
    }
    if (ts_buf_grow(&job->body, &job->body_cap, job->out_len, n, OUT_MAX) < 0) {
        return -1;
    }
    memcpy(job->body + job->out_len, data, n);
    job->out_len += n;
    return 0;
}

/* start_response_methods (below) by index: start_response returns write
 * bound to itself, and the job puts early_hints in the environ, with
 * PyCFunction_New rather than an attribute lookup per request. */
static PyMethodDef start_response_methods[];
enum { METHOD_WRITE, METHOD_EARLY_HINTS };

/* ---- start_response and write ---------------------------------------- */


/* latin1 returns the bytes of a str that must be latin-1, borrowed from a
 * new bytes object stored in *holder. NULL with an exception set. */
static const char *
latin1(PyObject *s, const char *what, PyObject **holder, Py_ssize_t *len)
{
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %.100s", what,
                     Py_TYPE(s)->tp_name);
        return NULL;
    }
    *holder = PyUnicode_AsLatin1String(s);
    if (*holder == NULL) {
        PyErr_Format(PyExc_ValueError, "%s is not latin-1 (PEP 3333, Unicode Issues)", what);
        return NULL;
    }
    *len = PyBytes_GET_SIZE(*holder);
    return PyBytes_AS_STRING(*holder);
}

/* add_header validates one (name, value) pair and appends it to the head,
 * unless it is a hop-by-hop field the server frames itself. */
static int
add_header(ts_wsgi_job *job, PyObject *item, size_t *hlen)
{
    PyObject *nh = NULL, *vh = NULL;
    const char *name, *val;
    Py_ssize_t nlen, vlen;
    int rc = -1;

    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_TypeError, "each header must be a (name, value) tuple of two str");
        return -1;
    }
    name = latin1(PyTuple_GET_ITEM(item, 0), "header name", &nh, &nlen);
    if (name == NULL) {
        goto done;
    }
    val = latin1(PyTuple_GET_ITEM(item, 1), "header value", &vh, &vlen);
    if (val == NULL) {
        goto done;
    }
    if (ts_check_field(name, nlen, val, vlen, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1)) < 0) {
        goto done;
    }
    if (ts_ascii_ieq(name, nlen, "content-length")) {
        int64_t n;
        if (ts_parse_content_length(val, vlen, &n) < 0) {
            goto done;
        }
        if (job->content_length >= 0 && job->content_length != n) {
            /* RFC 9110 §8.6: one length; two that differ would frame the
             * response wrongly whichever was sent. */
            PyErr_Format(PyExc_ValueError,
                         "conflicting Content-Length headers: %lld and %lld",
                         (long long)job->content_length, (long long)n);
            goto done;
        }
        job->content_length = n;
        rc = 0;
        goto done;  /* the server writes Content-Length itself */
    }
    if (ts_ascii_ieq(name, nlen, "connection")) {
        /* PEP 3333: hop-by-hop headers are the server's; honour a "close"
         * token anywhere in the list (RFC 9110 §7.6.1: "keep-alive, close") */
        if (ts_list_has_token(val, vlen, "close")) {
            job->close = 1;
        }
        rc = 0;
        goto done;
    }
    if (ts_ascii_ieq(name, nlen, "date")) {
        /* http1 writes Date (RFC 9110 §6.6.1); the field must appear once */
        rc = 0;
        goto done;
    }
    if (ts_ascii_ieq(name, nlen, "transfer-encoding") || ts_ascii_ieq(name, nlen, "keep-alive")
        || ts_ascii_ieq(name, nlen, "te") || ts_ascii_ieq(name, nlen, "trailer")
        || ts_ascii_ieq(name, nlen, "upgrade") || ts_ascii_ieq(name, nlen, "proxy-connection")) {
        rc = 0;
        goto done;
    }
    if (ts_buf_grow(&job->head, &job->head_cap, *hlen, nlen + vlen + 4, HEAD_MAX) < 0) {
        goto done;
    }
    memcpy(job->head + *hlen, name, nlen);
    *hlen += nlen;
    job->head[(*hlen)++] = ':';
    job->head[(*hlen)++] = ' ';
    memcpy(job->head + *hlen, val, vlen);
    *hlen += vlen;
    job->head[(*hlen)++] = '\r';
    job->head[(*hlen)++] = '\n';
    rc = 0;
done:
    Py_XDECREF(nh);
    Py_XDECREF(vh);
    return rc;
}

static PyObject *
start_response_call(StartResponse *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"status", "headers", "exc_info", NULL};
    PyObject *status, *headers, *exc_info = Py_None, *sh = NULL, *seq = NULL;
    ts_wsgi_job *job = self->job;
    const char *st;
    Py_ssize_t slen, i, n;
    size_t hlen;
    int code;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:start_response", kwlist,
                                     &status, &headers, &exc_info)) {
        return NULL;
    }
    if (job == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "start_response called after the request ended");
        return NULL;
    }
    if (exc_info != Py_None) {
        if (job->head_sent) {
            /* PEP 3333: "if the headers have already been sent, it must
             * raise an error, and should re-raise using the exc_info" */
            PyObject *v;
            if (!PyTuple_Check(exc_info) || PyTuple_GET_SIZE(exc_info) != 3) {
                PyErr_SetString(PyExc_TypeError, "exc_info must be a 3-tuple");
                return NULL;
            }
            v = PyTuple_GET_ITEM(exc_info, 1);
            if (PyExceptionInstance_Check(v)) {
                PyErr_SetObject((PyObject *)Py_TYPE(v), v);
            }
            else {
                PyErr_SetString(PyExc_RuntimeError, "start_response(exc_info) after the headers were sent");
            }
            return NULL;
        }
    }
    else if (self->called) {
        PyErr_SetString(PyExc_AssertionError,
                        "start_response called a second time without exc_info (PEP 3333)");
        return NULL;
    }

    st = latin1(status, "status", &sh, &slen);
    if (st == NULL) {
        return NULL;
    }
    if (slen < 4 || st[0] < '1' || st[0] > '9' || st[1] < '0' || st[1] > '9'
        || st[2] < '0' || st[2] > '9' || st[3] != ' ') {
        PyErr_Format(PyExc_ValueError, "invalid status %R: want \"NNN Reason\"", status);
        goto error;
    }
    for (i = 0; i < slen; i++) {
        unsigned char c = (unsigned char)st[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            PyErr_Format(PyExc_ValueError, "invalid byte in status %R", status);
            goto error;
        }
    }
    code = (st[0] - '0') * 100 + (st[1] - '0') * 10 + (st[2] - '0');
    if (code < TS_STATUS_FINAL_MIN) {
        PyErr_Format(PyExc_ValueError, "status %R: a WSGI app cannot send 1xx", status);
        goto error;
    }
    if (code > TS_STATUS_FINAL_MAX) {
        PyErr_Format(PyExc_ValueError, "status %R is not an HTTP status (RFC 9110 section 15: 100-599)", status);
        goto error;
    }
    if (!PyList_Check(headers) && !PyTuple_Check(headers)) {
        PyErr_Format(PyExc_TypeError, "headers must be a list, not %.100s",
                     Py_TYPE(headers)->tp_name);
        goto error;
    }
    seq = PySequence_Fast(headers, "headers must be a list");
    if (seq == NULL) {
        goto error;
    }
    if (ts_buf_grow(&job->head, &job->head_cap, 0, slen, HEAD_MAX) < 0) {
        goto error;
    }
    memcpy(job->head, st, slen);
    hlen = slen;
    job->content_length = -1;
    job->close = 0;
    n = PySequence_Fast_GET_SIZE(seq);
    for (i = 0; i < n; i++) {
        if (add_header(job, PySequence_Fast_GET_ITEM(seq, i), &hlen) < 0) {
            job->status_len = 0;
            job->header_len = 0;
            goto error;
        }
    }
    job->status = code;
    job->status_len = slen;
    job->header_len = hlen - slen;
    self->called = 1;
    Py_DECREF(seq);
    Py_DECREF(sh);
    /* the write() callable (PEP 3333): a bound method of this object */
    return PyCFunction_New(&start_response_methods[METHOD_WRITE], (PyObject *)self);

error:
    Py_XDECREF(seq);
    Py_XDECREF(sh);
    return NULL;
}

static PyObject *
start_response_write(StartResponse *self, PyObject *data)
{
    ts_wsgi_job *job = self->job;
    int rc;

    if (job == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "write() called after the request ended");
        return NULL;
    }
    if (!self->called) {
        PyErr_SetString(PyExc_AssertionError, "write() called before start_response()");
        return NULL;
    }
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "write() argument must be bytes, not %.100s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    rc = append(job, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
    if (rc == 0) {
        rc = flush(job) < 0 ? -2 : 0;
    }
    if (rc == -1) {
        return NULL;
    }
    if (rc == -2) {
        PyErr_SetString(PyExc_OSError, "turnstile: client disconnected");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* start_response.early_hints(headers): environ["wsgi.early_hints"], as
 * gunicorn offers it: headers is a list of (name, value) str pairs, sent
 * at once as a 103 Early Hints (RFC 8297), validated as start_response's
 * are. Nothing is sent once the head is on the wire, to an HTTP/1.0
 * client (Go's side), or for an empty list; a client gone is not an
 * error here (the next write sees it). */
static PyObject *
start_response_early_hints(StartResponse *self, PyObject *headers)
{
    ts_wsgi_job *job = self->job;
    PyObject *seq, *nh = NULL, *vh = NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    Py_ssize_t i, n;
    ts_thread *t;

    if (job == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "wsgi.early_hints called after the request ended");
        return NULL;
    }
    seq = PySequence_Fast(headers, "wsgi.early_hints takes a list of (name, value) tuples");
    if (seq == NULL) {
        return NULL;
    }
    n = PySequence_Fast_GET_SIZE(seq);
    for (i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        const char *name, *val;
        Py_ssize_t nlen, vlen;

        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "each header must be a (name, value) tuple of two str");
            goto error;
        }
        if ((name = latin1(PyTuple_GET_ITEM(item, 0), "header name", &nh, &nlen)) == NULL
            || (val = latin1(PyTuple_GET_ITEM(item, 1), "header value", &vh, &vlen)) == NULL
            || ts_check_field(name, nlen, val, vlen, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1)) < 0
            || ts_buf_grow(&buf, &cap, len, nlen + vlen + 4, HEAD_MAX) < 0) {
            goto error;
        }
        memcpy(buf + len, name, nlen);
        len += nlen;
        memcpy(buf + len, ": ", 2);
        len += 2;
        memcpy(buf + len, val, vlen);
        len += vlen;
        memcpy(buf + len, "\r\n", 2);
        len += 2;
        Py_CLEAR(nh);
        Py_CLEAR(vh);
    }
    Py_DECREF(seq);
    if (len > 0 && !job->head_sent) {
        t = ts_thread_current();
        ts_thread_detach(t, 0);
        go_ts_wsgi_early_hints(job->handle, buf, len);
        ts_thread_attach(t);
    }
    free(buf);
    Py_RETURN_NONE;

error:
    Py_XDECREF(nh);
    Py_XDECREF(vh);
    Py_DECREF(seq);
    free(buf);
    return NULL;
}

static void
start_response_dealloc(StartResponse *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* ts_wsgi_early_hints_callable returns environ["wsgi.early_hints"] for
 * the request of sr: its early_hints method, bound. New reference, or NULL
 * with an exception set. Attached. */
PyObject *
ts_wsgi_early_hints_callable(PyObject *sr)
{
    return PyCFunction_New(&start_response_methods[METHOD_EARLY_HINTS], sr);
}

static PyMethodDef start_response_methods[] = {
    {"write", (PyCFunction)start_response_write, METH_O, "write(data): the imperative write callable (PEP 3333)"},
    {"early_hints", (PyCFunction)start_response_early_hints, METH_O, "early_hints(headers): a 103 Early Hints now (environ['wsgi.early_hints'])"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot start_response_slots[] = {
    {Py_tp_dealloc, start_response_dealloc},
    {Py_tp_call, start_response_call},
    {Py_tp_methods, start_response_methods},
    {Py_tp_doc, "start_response(status, headers, exc_info=None) (PEP 3333)"},
    {0, NULL},
};

static PyType_Spec start_response_spec = {
    "turnstile.StartResponse", sizeof(StartResponse), 0, Py_TPFLAGS_DEFAULT,
    start_response_slots,
};

/* ---- the body --------------------------------------------------------- */

/* ts_wsgi_iterate collects the body of result. Attached. Sets job->result. */
void
ts_wsgi_iterate(ts_wsgi_job *job, StartResponse *sr, PyObject *result)
{
    PyObject *it, *chunk;
    int gather, rc;

    if (Py_IS_TYPE(result, ts_wsgi_file_wrapper_type) && sr->called
        && ts_wsgi_try_sendfile(job, (ts_wsgi_file_wrapper *)result)) {
        return;
    }
    it = PyObject_GetIter(result);
    if (it == NULL) {
        ts_wsgi_fail(job);
        return;
    }
    gather = Py_IS_TYPE(it, &PyListIter_Type) || Py_IS_TYPE(it, &PyTupleIter_Type);
    while ((chunk = PyIter_Next(it)) != NULL) {
        Py_ssize_t n;
        if (!PyBytes_Check(chunk)) {
            PyErr_Format(PyExc_TypeError,
                         "the app's iterable yielded %.100s, not bytes (PEP 3333)",
                         Py_TYPE(chunk)->tp_name);
            Py_DECREF(chunk);
            ts_wsgi_fail(job);
            break;
        }
        n = PyBytes_GET_SIZE(chunk);
        if (n == 0) {
            Py_DECREF(chunk);
            continue;
        }
        if (!sr->called) {
            Py_DECREF(chunk);
            PyErr_SetString(PyExc_AssertionError,
                            "the app yielded body bytes before calling start_response()");
            ts_wsgi_fail(job);
            break;
        }
        rc = append(job, PyBytes_AS_STRING(chunk), n);
        Py_DECREF(chunk);
        if (rc == 0 && !gather) {
            rc = flush(job) < 0 ? -2 : 0;
        }
        if (rc == -1) {
            ts_wsgi_fail(job);
            break;
        }
        if (rc == -2) {
            break;  /* client gone: stop iterating; close() still runs */
        }
    }
    if (chunk == NULL && PyErr_Occurred()) {
        ts_wsgi_fail(job);
    }
    Py_DECREF(it);
    if (job->result == TS_WSGI_OK && !sr->called) {
        PyErr_SetString(PyExc_AssertionError, "the app returned without calling start_response()");
        ts_wsgi_fail(job);
    }
}

/* ts_wsgi_start_response_new returns a new start_response callable for
 * job. New reference, or NULL with an exception set. Attached. */
StartResponse *
ts_wsgi_start_response_new(ts_wsgi_job *job)
{
    StartResponse *sr = PyObject_New(StartResponse, ts_wsgi_start_response_type);

    if (sr == NULL) {
        return NULL;
    }
    sr->job = job;
    sr->called = 0;
    return sr;
}

int
ts_wsgi_response_setup(void)
{
    ts_wsgi_start_response_type = (PyTypeObject *)PyType_FromSpec(&start_response_spec);
    return ts_wsgi_start_response_type == NULL ? -1 : 0;
}
