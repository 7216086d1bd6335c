/* wsgi.c: a WSGI request on a Python thread (PEP 3333).
 *
 * Notes about the implementation
 * ------------------------------
 * wsgi_run is the job's run function. In one go, attached, it builds the
 * environ from the request block Go prepared, calls the app inside a fresh
 * contextvars.Context, collects the response and returns. C->Go calls
 * happen only for blocking I/O and always with the GIL released:
 * go_ts_wsgi_read (body bytes that have not arrived) and go_ts_wsgi_flush
 * (hand the head and buffered body to the socket).
 *
 * Buffering (PEP 3333, "Buffering and Streaming"): a server must not delay
 * a block. When the iterator is a list or tuple iterator (a list, Django's
 * HttpResponse) every block already exists, so they are gathered and sent
 * with the head in one write, with a Content-Length. Any other iterable
 * (a generator) has each non-empty block flushed before the next is asked
 * for; a full buffer is flushed too (the bound rule).
 *
 * Validation (DESIGN.md, the bytes rule): the status and every header are
 * checked here before they become bytes: latin-1 str, a token name, no
 * CR/LF/NUL or other control byte in the value. start_response raises
 * into the app otherwise, so the app's error handling sees it and the
 * server answers 500.
 */
#include "wsgi.h"
#include "_cgo_export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT_MAX (64 * 1024)     /* body bytes gathered before a flush */
#define HEAD_MAX (64 * 1024)    /* status line + headers from the app */
#define INPUT_CHUNK (64 * 1024) /* wsgi.input reads from Go at most this */

static const char **key_names;
static int key_count;
static PyObject **key_objs;          /* interned environ keys by id-1 */
static PyObject *environ_template;   /* wsgi.* constants */
static PyObject *str_wsgi_input, *str_close, *str_fileno, *str_read;
static int url_scheme_id;            /* id of "wsgi.url_scheme", 0 if none */
static PyObject *str_https;          /* its value on TLS or behind a proxy */
static PyObject *errors_stream;

static PyTypeObject *InputType, *StartResponseType, *FileWrapperType;

/* ---- the request block ----------------------------------------------- */

void
ts_wsgi_register_keys(const char **names, int n)
{
    key_names = names;
    key_count = n;
}

ts_wsgi_job *
ts_wsgi_job_new(void)
{
    ts_wsgi_job *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return NULL;
    }
    job->req_cap = 4096;
    job->req = malloc(job->req_cap);
    job->head_cap = 1024;
    job->head = malloc(job->head_cap);
    job->body_cap = 4096;
    job->body = malloc(job->body_cap);
    job->file_fd = -1;
    job->body_fd = -1;
    if (job->req == NULL || job->head == NULL || job->body == NULL) {
        free(job->req);
        free(job->head);
        free(job->body);
        free(job);
        return NULL;
    }
    return job;
}

void
ts_wsgi_job_free(ts_wsgi_job *job)
{
    free(job->req);
    free(job->head);
    free(job->body);
    free(job);
}

/* ts_wsgi_job_trim frees the buffers of an idle job that grew past
 * TS_WSGI_KEEP_BYTES (a large request block or response), so that the
 * slots kept for reuse hold little memory; every write grows its buffer
 * first (ts_buf_reserve, ts_buf_grow), so a freed one comes back on use. */
void
ts_wsgi_job_trim(ts_wsgi_job *job)
{
    if (job->req_cap > TS_WSGI_KEEP_BYTES) {
        free(job->req);
        job->req = NULL;
        job->req_cap = 0;
    }
    if (job->head_cap > TS_WSGI_KEEP_BYTES) {
        free(job->head);
        job->head = NULL;
        job->head_cap = 0;
    }
    if (job->body_cap > TS_WSGI_KEEP_BYTES) {
        free(job->body);
        job->body = NULL;
        job->body_cap = 0;
    }
}

int
ts_wsgi_submit(ts_pool *pool, ts_wsgi_job *job, const char *block, size_t len, int nentries,
               size_t body_off, size_t body_len, int body_done, int is_head)
{
    if (ts_buf_reserve(&job->req, &job->req_cap, len) != 0) {
        return TS_WSGI_SUBMIT_NOMEM;
    }
    if (len > 0) {
        memcpy(job->req, block, len);
    }
    job->nentries = nentries;
    job->body_off = body_off;
    job->body_len = body_len;
    job->body_done = body_done;
    job->is_head = is_head;
    job->status = 0;
    job->status_len = 0;
    job->header_len = 0;
    job->content_length = -1;
    job->close = 0;
    job->head_sent = 0;
    job->out_len = 0;
    job->result = TS_WSGI_OK;
    job->file_fd = -1;
    job->file_offset = 0;
    job->file_count = 0;
    job->error = NULL;
    job->base.started_ns = 0;
    if (ts_pool_submit(pool, &job->base) != 0) {
        return TS_WSGI_SUBMIT_FULL;
    }
    return 0;
}

/* build_environ returns a new dict: the template, then every entry of the
 * request block. New reference, or NULL with an exception set. */
static PyObject *
build_environ(ts_wsgi_job *job)
{
    PyObject *env = PyDict_Copy(environ_template);
    const char *p = job->req;
    int i;

    if (env == NULL) {
        return NULL;
    }
    for (i = 0; i < job->nentries; i++) {
        uint16_t id, klen;
        uint32_t vlen;
        PyObject *key, *val;
        int rc;

        memcpy(&id, p, 2);
        memcpy(&klen, p + 2, 2);
        memcpy(&vlen, p + 4, 4);
        p += TS_ENTRY_HDR;
        if (id > 0 && id <= key_count) {
            key = Py_NewRef(key_objs[id - 1]);
        }
        else {
            key = PyUnicode_DecodeLatin1(p, klen, NULL);
        }
        p += klen;
        if (id == url_scheme_id && id > 0 && vlen == 5 && memcmp(p, "https", 5) == 0) {
            val = Py_NewRef(str_https);
        }
        else {
            val = PyUnicode_DecodeLatin1(p, vlen, NULL);
        }
        p += vlen;
        if (key == NULL || val == NULL) {
            Py_XDECREF(key);
            Py_XDECREF(val);
            Py_DECREF(env);
            return NULL;
        }
        rc = PyDict_SetItem(env, key, val);
        Py_DECREF(key);
        Py_DECREF(val);
        if (rc < 0) {
            Py_DECREF(env);
            return NULL;
        }
    }
    return env;
}

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

/* ---- wsgi.input ------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    ts_wsgi_job *job;        /* NULL once the request is over */
    char *buf;               /* bytes from Go not yet consumed */
    size_t pos, len, cap;
    int eof;
    const char *pre;         /* prefetched body bytes (in job->req) */
    size_t pre_len;
    int fd;                  /* job->body_fd: the spooled rest of the body */
    int64_t fd_off, fd_len;
} Input;

/* input_fill makes buffered bytes available. Returns the number of bytes
 * available (0 at EOF), or -1 with an exception set. */
static Py_ssize_t
input_fill(Input *self)
{
    ts_wsgi_job *job = self->job;
    ts_thread *t;
    long n;

    if (self->len > self->pos) {
        return (Py_ssize_t)(self->len - self->pos);
    }
    if (self->eof || job == NULL) {
        return 0;
    }
    self->pos = self->len = 0;
    if (self->pre_len > 0) {
        size_t k = self->pre_len;
        if (k > self->cap) {
            char *p = realloc(self->buf, k);
            if (p == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            self->buf = p;
            self->cap = k;
        }
        memcpy(self->buf, self->pre, k);
        self->len = k;
        self->pre_len = 0;
        if (job->body_done) {
            /* The block held the whole body: no read ever goes to Go. */
        }
        return (Py_ssize_t)k;
    }
    if (self->fd >= 0 && self->fd_off < self->fd_len) {
        /* The spooled rest of a buffered body: read back here, the GIL
         * released, without a call into Go. */
        size_t want;
        ssize_t r;
        int err;
        if (self->cap < INPUT_CHUNK) {
            char *p = realloc(self->buf, INPUT_CHUNK);
            if (p == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            self->buf = p;
            self->cap = INPUT_CHUNK;
        }
        want = self->cap;
        if ((int64_t)want > self->fd_len - self->fd_off) {
            want = (size_t)(self->fd_len - self->fd_off);
        }
        t = ts_thread_current();
        ts_thread_detach(t, 0);
        do {
            r = pread(self->fd, self->buf, want, (off_t)self->fd_off);
        } while (r < 0 && errno == EINTR);
        err = errno;
        ts_thread_attach(t);
        if (r <= 0) {
            if (r < 0) {
                errno = err;
                PyErr_SetFromErrno(PyExc_OSError);
            } else {
                PyErr_SetString(PyExc_OSError, "turnstile: the spooled request body is shorter than written");
            }
            return -1;
        }
        self->fd_off += r;
        self->len = (size_t)r;
        return (Py_ssize_t)r;
    }
    if (job->body_done) {
        self->eof = 1;
        return 0;
    }
    if (self->cap < INPUT_CHUNK) {
        char *p = realloc(self->buf, INPUT_CHUNK);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->buf = p;
        self->cap = INPUT_CHUNK;
    }
    t = ts_thread_current();
    ts_thread_detach(t, 0);
    n = go_ts_wsgi_read(job->handle, self->buf, self->cap);
    ts_thread_attach(t);
    if (n < 0) {
        PyErr_SetString(PyExc_OSError, "turnstile: request body could not be read (client gone, timeout or bad framing)");
        return -1;
    }
    if (n == 0) {
        self->eof = 1;
        return 0;
    }
    self->len = (size_t)n;
    return n;
}

static PyObject *
input_read(Input *self, PyObject *args)
{
    Py_ssize_t size = -1, avail;
    PyObject *arg = Py_None;
    char *acc = NULL;
    size_t acc_len = 0, acc_cap = 0;
    PyObject *res;

    if (!PyArg_ParseTuple(args, "|O:read", &arg)) {
        return NULL;
    }
    if (arg != Py_None) {
        size = PyLong_AsSsize_t(arg);
        if (size == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (size == 0) {
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    if (size > 0) {
        /* read(n) has file semantics (PEP 3333, "Input and Error Streams"):
         * n bytes, fewer only at the end of the body (case B04). The
         * common case, one fill that holds them all, makes no copy. */
        avail = input_fill(self);
        if (avail < 0) {
            return NULL;
        }
        if (avail >= size || avail == 0) {
            if (avail > size) {
                avail = size;
            }
            res = PyBytes_FromStringAndSize(self->buf + self->pos, avail);
            self->pos += avail;
            return res;
        }
    }
    for (;;) {
        if (size > 0 && (Py_ssize_t)acc_len >= size) {
            break;
        }
        avail = input_fill(self);
        if (avail < 0) {
            free(acc);
            return NULL;
        }
        if (avail == 0) {
            break;
        }
        if (size > 0 && (Py_ssize_t)acc_len + avail > size) {
            avail = size - (Py_ssize_t)acc_len;
        }
        if (acc_len + avail > acc_cap) {
            size_t c = acc_cap ? acc_cap * 2 : 65536;
            char *p;
            while (c < acc_len + avail) {
                c *= 2;
            }
            p = realloc(acc, c);
            if (p == NULL) {
                free(acc);
                return PyErr_NoMemory();
            }
            acc = p;
            acc_cap = c;
        }
        memcpy(acc + acc_len, self->buf + self->pos, avail);
        acc_len += avail;
        self->pos += avail;
    }
    res = PyBytes_FromStringAndSize(acc, acc_len);
    free(acc);
    return res;
}

static PyObject *
input_readline_impl(Input *self, Py_ssize_t limit)
{
    PyObject *res;
    char *acc = NULL;
    size_t acc_len = 0, acc_cap = 0;

    for (;;) {
        Py_ssize_t avail = input_fill(self), take;
        char *nl;
        int found = 0;

        if (avail < 0) {
            free(acc);
            return NULL;
        }
        if (avail == 0) {
            break;
        }
        take = avail;
        nl = memchr(self->buf + self->pos, '\n', avail);
        if (nl != NULL) {
            take = nl - (self->buf + self->pos) + 1;
            found = 1;
        }
        if (limit >= 0 && (Py_ssize_t)acc_len + take >= limit) {
            take = limit - acc_len;
            found = 1;
        }
        if (acc_len + take > acc_cap) {
            size_t c = acc_cap ? acc_cap * 2 : 256;
            char *p;
            while (c < acc_len + take) {
                c *= 2;
            }
            p = realloc(acc, c);
            if (p == NULL) {
                free(acc);
                return PyErr_NoMemory();
            }
            acc = p;
            acc_cap = c;
        }
        memcpy(acc + acc_len, self->buf + self->pos, take);
        acc_len += take;
        self->pos += take;
        if (found) {
            break;
        }
    }
    res = PyBytes_FromStringAndSize(acc, acc_len);
    free(acc);
    return res;
}

static PyObject *
input_readline(Input *self, PyObject *args)
{
    PyObject *arg = Py_None;
    Py_ssize_t limit = -1;

    if (!PyArg_ParseTuple(args, "|O:readline", &arg)) {
        return NULL;
    }
    if (arg != Py_None) {
        limit = PyLong_AsSsize_t(arg);
        if (limit == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (limit == 0) {
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    return input_readline_impl(self, limit);
}

static PyObject *
input_readlines(Input *self, PyObject *args)
{
    PyObject *arg = Py_None, *list;
    Py_ssize_t hint = -1, total = 0;

    if (!PyArg_ParseTuple(args, "|O:readlines", &arg)) {
        return NULL;
    }
    if (arg != Py_None) {
        hint = PyLong_AsSsize_t(arg);
        if (hint == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    list = PyList_New(0);
    if (list == NULL) {
        return NULL;
    }
    for (;;) {
        PyObject *line = input_readline_impl(self, -1);
        if (line == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        if (PyBytes_GET_SIZE(line) == 0) {
            Py_DECREF(line);
            break;
        }
        total += PyBytes_GET_SIZE(line);
        if (PyList_Append(list, line) < 0) {
            Py_DECREF(line);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(line);
        if (hint > 0 && total >= hint) {
            break;
        }
    }
    return list;
}

static PyObject *
input_iternext(Input *self)
{
    PyObject *line = input_readline_impl(self, -1);
    if (line != NULL && PyBytes_GET_SIZE(line) == 0) {
        Py_DECREF(line);
        return NULL;  /* StopIteration, no exception set */
    }
    return line;
}

static void
input_dealloc(Input *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    free(self->buf);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef input_methods[] = {
    {"read", (PyCFunction)input_read, METH_VARARGS, "read(size=-1) -> bytes"},
    {"readline", (PyCFunction)input_readline, METH_VARARGS, "readline(size=-1) -> bytes"},
    {"readlines", (PyCFunction)input_readlines, METH_VARARGS, "readlines(hint=-1) -> list"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot input_slots[] = {
    {Py_tp_dealloc, input_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, input_iternext},
    {Py_tp_methods, input_methods},
    {Py_tp_doc, "wsgi.input: the request body stream (PEP 3333)"},
    {0, NULL},
};

static PyType_Spec input_spec = {
    "turnstile.Input", sizeof(Input), 0, Py_TPFLAGS_DEFAULT, input_slots,
};

/* ---- start_response and write ---------------------------------------- */

typedef struct {
    PyObject_HEAD
    ts_wsgi_job *job;  /* NULL once the request is over */
    int called;
} StartResponse;

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
    return PyObject_GetAttrString((PyObject *)self, "write");

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

static void
start_response_dealloc(StartResponse *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef start_response_methods[] = {
    {"write", (PyCFunction)start_response_write, METH_O, "write(data): the imperative write callable (PEP 3333)"},
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

/* ---- wsgi.file_wrapper ------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *filelike;
    Py_ssize_t blksize;
} FileWrapper;

static PyObject *
file_wrapper_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"filelike", "block_size", NULL};
    PyObject *filelike;
    Py_ssize_t blksize = 8192;
    FileWrapper *self;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|n:file_wrapper", kwlist,
                                     &filelike, &blksize)) {
        return NULL;
    }
    self = (FileWrapper *)tp->tp_alloc(tp, 0);
    if (self == NULL) {
        return NULL;
    }
    self->filelike = Py_NewRef(filelike);
    self->blksize = blksize > 0 ? blksize : 8192;
    return (PyObject *)self;
}

static PyObject *
file_wrapper_iternext(FileWrapper *self)
{
    PyObject *data = PyObject_CallMethod(self->filelike, "read", "n", self->blksize);
    if (data == NULL) {
        return NULL;
    }
    if (PyBytes_Check(data) && PyBytes_GET_SIZE(data) == 0) {
        Py_DECREF(data);
        return NULL;
    }
    return data;
}

static PyObject *
file_wrapper_close(FileWrapper *self, PyObject *unused)
{
    if (PyObject_HasAttr(self->filelike, str_close)) {
        return PyObject_CallMethodNoArgs(self->filelike, str_close);
    }
    Py_RETURN_NONE;
}

static void
file_wrapper_dealloc(FileWrapper *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_CLEAR(self->filelike);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef file_wrapper_methods[] = {
    {"close", (PyCFunction)file_wrapper_close, METH_NOARGS, "close the file"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot file_wrapper_slots[] = {
    {Py_tp_new, file_wrapper_new},
    {Py_tp_dealloc, file_wrapper_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, file_wrapper_iternext},
    {Py_tp_methods, file_wrapper_methods},
    {Py_tp_doc, "wsgi.file_wrapper(filelike, block_size=8192): sent by the server with sendfile"},
    {0, NULL},
};

static PyType_Spec file_wrapper_spec = {
    "turnstile.FileWrapper", sizeof(FileWrapper), 0, Py_TPFLAGS_DEFAULT,
    file_wrapper_slots,
};

/* try_sendfile hands a file_wrapper over a regular file to Go: dup its fd
 * from the current position. Returns 1 if taken, 0 to iterate instead. */
static int
try_sendfile(ts_wsgi_job *job, FileWrapper *fw)
{
    PyObject *r = PyObject_CallMethodNoArgs(fw->filelike, str_fileno);
    struct stat stt;
    long fd;
    off_t pos;
    int dupfd;
    int64_t count;

    if (r == NULL) {
        PyErr_Clear();
        return 0;
    }
    fd = PyLong_AsLong(r);
    Py_DECREF(r);
    if (fd < 0) {
        PyErr_Clear();
        return 0;
    }
    /* A buffered file object may hold read-ahead: use tell() for the
     * logical position. */
    r = PyObject_CallMethod(fw->filelike, "tell", NULL);
    if (r == NULL) {
        PyErr_Clear();
        return 0;
    }
    pos = (off_t)PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (pos < 0 || fstat((int)fd, &stt) < 0 || !S_ISREG(stt.st_mode)) {
        PyErr_Clear();
        return 0;
    }
    count = stt.st_size > pos ? (int64_t)(stt.st_size - pos) : 0;
    if (job->content_length >= 0 && job->content_length < count) {
        count = job->content_length;
    }
    dupfd = fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
    if (dupfd < 0) {
        return 0;
    }
    job->file_fd = dupfd;
    job->file_offset = pos;
    job->file_count = count;
    job->result = TS_WSGI_FILE;
    return 1;
}

/* ---- the job --------------------------------------------------------- */

static void
fail(ts_wsgi_job *job)
{
    job->result = TS_WSGI_ERROR;
    if (job->error == NULL) {
        job->error = ts_format_exception();
    }
    else {
        PyErr_Clear();
    }
}

/* iterate collects the body of result. Attached. Sets job->result. */
static void
iterate(ts_wsgi_job *job, StartResponse *sr, PyObject *result)
{
    PyObject *it, *chunk;
    int gather, rc;

    if (Py_IS_TYPE(result, FileWrapperType) && sr->called
        && try_sendfile(job, (FileWrapper *)result)) {
        return;
    }
    it = PyObject_GetIter(result);
    if (it == NULL) {
        fail(job);
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
            fail(job);
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
            fail(job);
            break;
        }
        rc = append(job, PyBytes_AS_STRING(chunk), n);
        Py_DECREF(chunk);
        if (rc == 0 && !gather) {
            rc = flush(job) < 0 ? -2 : 0;
        }
        if (rc == -1) {
            fail(job);
            break;
        }
        if (rc == -2) {
            break;  /* client gone: stop iterating; close() still runs */
        }
    }
    if (chunk == NULL && PyErr_Occurred()) {
        fail(job);
    }
    Py_DECREF(it);
    if (job->result == TS_WSGI_OK && !sr->called) {
        PyErr_SetString(PyExc_AssertionError, "the app returned without calling start_response()");
        fail(job);
    }
}

static void
call_close(ts_wsgi_job *job, PyObject *result)
{
    PyObject *meth, *r;

    /* PEP 3333: close() is called whatever happened, including after an
     * error or a client that went away. */
    if (!PyObject_HasAttr(result, str_close)) {
        return;
    }
    meth = PyObject_GetAttr(result, str_close);
    if (meth == NULL) {
        fail(job);
        return;
    }
    r = PyObject_CallNoArgs(meth);
    Py_DECREF(meth);
    if (r == NULL) {
        fail(job);
        return;
    }
    Py_DECREF(r);
}

static void
wsgi_run(ts_job *base, ts_thread *t)
{
    ts_wsgi_job *job = (ts_wsgi_job *)base;
    PyObject *ctx, *environ = NULL, *result = NULL, *args[2];
    Input *input = NULL;
    StartResponse *sr = NULL;

    /* PEP 567: a fresh Context per request; the app call and every next()
     * and close() run in it, so a ContextVar set by one request never
     * leaks into the next one on this thread. */
    ctx = PyContext_New();
    if (ctx == NULL || PyContext_Enter(ctx) < 0) {
        fail(job);
        Py_XDECREF(ctx);
        goto signal;
    }
    environ = build_environ(job);
    input = PyObject_New(Input, InputType);
    sr = PyObject_New(StartResponse, StartResponseType);
    if (environ == NULL || input == NULL || sr == NULL) {
        fail(job);
        goto out;
    }
    input->job = job;
    input->buf = NULL;
    input->pos = input->len = input->cap = 0;
    input->eof = 0;
    input->pre = job->req + job->body_off;
    input->pre_len = job->body_len;
    input->fd = job->body_fd;
    input->fd_off = 0;
    input->fd_len = job->body_fd_len;
    sr->job = job;
    sr->called = 0;
    if (PyDict_SetItem(environ, str_wsgi_input, (PyObject *)input) < 0) {
        fail(job);
        goto out;
    }
    args[0] = environ;
    args[1] = (PyObject *)sr;
    result = PyObject_Vectorcall(ts_app, args, 2, NULL);
    if (result == NULL) {
        fail(job);
        goto out;
    }
    iterate(job, sr, result);
    call_close(job, result);

out:
    if (input != NULL) {
        input->job = NULL;
    }
    if (sr != NULL) {
        sr->job = NULL;
    }
    Py_XDECREF(result);
    Py_XDECREF(environ);
    Py_XDECREF((PyObject *)input);
    Py_XDECREF((PyObject *)sr);
    if (PyContext_Exit(ctx) < 0) {
        PyErr_Clear();
    }
    Py_DECREF(ctx);
signal:
    if (PyErr_Occurred()) {
        PyErr_Clear();  /* no exception may be set when the thread detaches */
    }
    job->base.gil_wait_ns = t->gil_wait_ns;
    /* Completion: listed for Go's dispatcher (pool.c, the done list of
     * the pool running it). */
    ts_pool_done(t->pool, &job->base);
}

void
ts_wsgi_job_init(ts_wsgi_job *job, uintptr_t handle)
{
    job->base.run = wsgi_run;
    job->base.go_id = handle;
    job->handle = handle;
}

/* ---- setup ----------------------------------------------------------- */

int
ts_wsgi_setup(void)
{
    int i;
    PyObject *version, *scheme;

    key_objs = calloc(key_count > 0 ? key_count : 1, sizeof(PyObject *));
    if (key_objs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < key_count; i++) {
        key_objs[i] = PyUnicode_InternFromString(key_names[i]);
        if (key_objs[i] == NULL) {
            return -1;
        }
        if (strcmp(key_names[i], "wsgi.url_scheme") == 0) {
            url_scheme_id = i + 1;
        }
    }
    str_https = PyUnicode_InternFromString("https");
    if (str_https == NULL) {
        return -1;
    }
    str_wsgi_input = PyUnicode_InternFromString("wsgi.input");
    str_close = PyUnicode_InternFromString("close");
    str_fileno = PyUnicode_InternFromString("fileno");
    str_read = PyUnicode_InternFromString("read");
    InputType = (PyTypeObject *)PyType_FromSpec(&input_spec);
    StartResponseType = (PyTypeObject *)PyType_FromSpec(&start_response_spec);
    FileWrapperType = (PyTypeObject *)PyType_FromSpec(&file_wrapper_spec);
    errors_stream = PyObject_GetAttrString(ts_bootstrap, "wsgi_errors");
    if (str_wsgi_input == NULL || str_close == NULL || str_fileno == NULL
        || str_read == NULL || InputType == NULL || StartResponseType == NULL
        || FileWrapperType == NULL || errors_stream == NULL) {
        return -1;
    }
    environ_template = PyDict_New();
    version = Py_BuildValue("(ii)", 1, 0);
    scheme = PyUnicode_InternFromString("http");
    if (environ_template == NULL || version == NULL || scheme == NULL) {
        return -1;
    }
    if (PyDict_SetItemString(environ_template, "wsgi.version", version) < 0
        || PyDict_SetItemString(environ_template, "wsgi.url_scheme", scheme) < 0
        || PyDict_SetItemString(environ_template, "wsgi.errors", errors_stream) < 0
        || PyDict_SetItemString(environ_template, "wsgi.multithread", Py_True) < 0
        || PyDict_SetItemString(environ_template, "wsgi.multiprocess",
                                ts_workers > 1 ? Py_True : Py_False) < 0
        || PyDict_SetItemString(environ_template, "wsgi.run_once", Py_False) < 0
        || PyDict_SetItemString(environ_template, "wsgi.input_terminated", Py_True) < 0
        || PyDict_SetItemString(environ_template, "wsgi.file_wrapper",
                                (PyObject *)FileWrapperType) < 0) {
        return -1;
    }
    Py_DECREF(version);
    Py_DECREF(scheme);
    return 0;
}
