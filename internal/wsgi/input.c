/* input.c: wsgi.input, the request body stream (PEP 3333, "Input and
 * Error Streams").
 *
 * Notes about the implementation
 * ------------------------------
 * The body comes from three places, in order: the bytes Go prefetched
 * into the request block (no callback needed), the spool file of a
 * buffered body (read here with pread, GIL released, no call into Go),
 * and the socket through go_ts_wsgi_read (a C->Go call for blocking I/O,
 * GIL released; DESIGN.md, the crossing rule). read(n) has file semantics:
 * n bytes, fewer only at the end of the body.
 */
#include "wsgi.h"
#include "_cgo_export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INPUT_CHUNK (64 * 1024) /* wsgi.input reads from Go at most this */

typedef ts_wsgi_input Input;

PyTypeObject *ts_wsgi_input_type;

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

/* ts_wsgi_input_new returns a new wsgi.input over job's body. New
 * reference, or NULL with an exception set. Attached. */
Input *
ts_wsgi_input_new(ts_wsgi_job *job)
{
    Input *input = PyObject_New(Input, ts_wsgi_input_type);

    if (input == NULL) {
        return NULL;
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
    return input;
}

int
ts_wsgi_input_setup(void)
{
    ts_wsgi_input_type = (PyTypeObject *)PyType_FromSpec(&input_spec);
    return ts_wsgi_input_type == NULL ? -1 : 0;
}
