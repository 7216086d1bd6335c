/* layer.c: the _turnstile_layer builtin module, the C entry of the Channels
 * layer held by Go (internal/chlayer; the Python side is
 * python/turnstile/channels.py, importable as turnstile.channels).
 *
 * Each function is one call into Go (go_ts_layer_* in exports.go) with the
 * GIL released around it (the crossing rule): the store's mutex is held
 * only for a map lookup and an append, but a Go call can wait for the
 * runtime (a GC phase), and no Python thread may wait for that with the
 * GIL. Names cross as UTF-8 (the str's cached UTF-8), payloads as the bytes
 * object's buffer; Go copies both before it returns, so the references the
 * arguments hold keep them alive for the call. Results come back as
 * malloc'd bytes that this file turns into bytes objects and frees.
 *
 * Return codes (channels.py maps them to exceptions): 0 done, 1 the
 * channel is full, 2 the host-wide memory limit, 3 the message size limit,
 * 4 no such layer or endpoint, 5 (receive) nothing queued: a waiter is
 * registered.
 */
#include "tspy.h"
#include "_cgo_export.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *layer_source = "";

/* ts_layer_set_source keeps channels.py's text (Go's, kept for the
 * process's life) for the module's `source` attribute. */
void
ts_layer_set_source(const char *src)
{
    layer_source = src;
}

/* GO_CALL runs stmt (a Go call) with the GIL released: a thread of ours
 * through its attach pair, any other (the app's, pytest's) through
 * PyEval_SaveThread, as ts_log_fields does. */
#define GO_CALL(stmt)                                    \
    do {                                                 \
        ts_thread *t_ = ts_thread_current();             \
        if (t_ != NULL && t_->attached) {                \
            ts_thread_detach(t_, 0);                     \
            stmt;                                        \
            ts_thread_attach(t_);                        \
        }                                                \
        else {                                           \
            PyThreadState *s_ = PyEval_SaveThread();     \
            stmt;                                        \
            PyEval_RestoreThread(s_);                    \
        }                                                \
    } while (0)

static int
utf8_arg(PyObject *o, const char **p, Py_ssize_t *n)
{
    if (!PyUnicode_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "name must be a str");
        return -1;
    }
    *p = PyUnicode_AsUTF8AndSize(o, n);
    return *p == NULL ? -1 : 0;
}

/* open(config_json: bytes) -> handle */
static PyObject *
l_open(PyObject *self, PyObject *arg)
{
    char *err = NULL;
    int h;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "open() takes bytes");
        return NULL;
    }
    GO_CALL(h = go_ts_layer_open(PyBytes_AS_STRING(arg), (int)PyBytes_GET_SIZE(arg), &err));
    if (h < 0) {
        PyErr_SetString(PyExc_ValueError, err ? err : "bad layer config");
        free(err);
        return NULL;
    }
    return PyLong_FromLong(h);
}

/* send(handle, channel: str, data: bytes) -> code */
static PyObject *
l_send(PyObject *self, PyObject *args)
{
    int h, rc;
    PyObject *name, *data;
    const char *np;
    Py_ssize_t nn;
    if (!PyArg_ParseTuple(args, "iUS", &h, &name, &data) || utf8_arg(name, &np, &nn) < 0) {
        return NULL;
    }
    GO_CALL(rc = go_ts_layer_send(h, (char *)np, (int)nn, PyBytes_AS_STRING(data),
                                  (long long)PyBytes_GET_SIZE(data)));
    return PyLong_FromLong(rc);
}

/* group_send(handle, group: str, data: bytes) -> (code, members, full) */
static PyObject *
l_group_send(PyObject *self, PyObject *args)
{
    int h, rc, members = 0, full = 0;
    PyObject *name, *data;
    const char *np;
    Py_ssize_t nn;
    if (!PyArg_ParseTuple(args, "iUS", &h, &name, &data) || utf8_arg(name, &np, &nn) < 0) {
        return NULL;
    }
    GO_CALL(rc = go_ts_layer_group_send(h, (char *)np, (int)nn, PyBytes_AS_STRING(data),
                                        (long long)PyBytes_GET_SIZE(data), &members, &full));
    return Py_BuildValue("(iii)", rc, members, full);
}

/* group_send_frames(handle, group: str, text: bool, data: bytes) ->
 * (code, sockets): data written by Go to the WebSocket of every member
 * linked to one (bind_socket); sockets counts this worker's. */
static PyObject *
l_group_send_frames(PyObject *self, PyObject *args)
{
    int h, text, rc, sockets = 0;
    PyObject *name, *data;
    const char *np;
    Py_ssize_t nn;
    if (!PyArg_ParseTuple(args, "iUpS", &h, &name, &text, &data) || utf8_arg(name, &np, &nn) < 0) {
        return NULL;
    }
    GO_CALL(rc = go_ts_layer_group_send_frames(h, (char *)np, (int)nn, text, PyBytes_AS_STRING(data),
                                               (long long)PyBytes_GET_SIZE(data), &sockets));
    return Py_BuildValue("(ii)", rc, sockets);
}

/* bind_socket(channel: str, tag: int): channel belongs to the WebSocket
 * session tag (slot << 32 | generation) until it ends. */
static PyObject *
l_bind_socket(PyObject *self, PyObject *args)
{
    unsigned long long tag;
    PyObject *name;
    const char *np;
    Py_ssize_t nn;
    if (!PyArg_ParseTuple(args, "UK", &name, &tag) || utf8_arg(name, &np, &nn) < 0) {
        return NULL;
    }
    GO_CALL(go_ts_layer_bind_socket((char *)np, (int)nn, tag));
    Py_RETURN_NONE;
}

/* receive(handle, endpoint, channel) -> bytes, or an int code (5: a
 * waiter is registered) */
static PyObject *
l_receive(PyObject *self, PyObject *args)
{
    int h, rc;
    unsigned long long ep;
    PyObject *name, *res;
    const char *np;
    Py_ssize_t nn;
    char *out = NULL;
    long long outlen = 0;
    if (!PyArg_ParseTuple(args, "iKU", &h, &ep, &name) || utf8_arg(name, &np, &nn) < 0) {
        return NULL;
    }
    GO_CALL(rc = go_ts_layer_receive(h, ep, (char *)np, (int)nn, &out, &outlen));
    if (rc != 0) {
        return PyLong_FromLong(rc);
    }
    res = PyBytes_FromStringAndSize(out, (Py_ssize_t)outlen);
    free(out);
    return res;
}

/* unwait(handle, endpoint, channel): a cancelled receive's waiter */
static PyObject *
l_unwait(PyObject *self, PyObject *args)
{
    int h;
    unsigned long long ep;
    PyObject *name;
    const char *np;
    Py_ssize_t nn;
    if (!PyArg_ParseTuple(args, "iKU", &h, &ep, &name) || utf8_arg(name, &np, &nn) < 0) {
        return NULL;
    }
    GO_CALL(go_ts_layer_unwait(h, ep, (char *)np, (int)nn));
    Py_RETURN_NONE;
}

/* group(handle, op, group, channel) -> code; op 0 add, 1 discard */
static PyObject *
l_group(PyObject *self, PyObject *args)
{
    int h, op, rc;
    PyObject *g, *c;
    const char *gp, *cp;
    Py_ssize_t gn, cn;
    if (!PyArg_ParseTuple(args, "iiUU", &h, &op, &g, &c) || utf8_arg(g, &gp, &gn) < 0 ||
        utf8_arg(c, &cp, &cn) < 0) {
        return NULL;
    }
    GO_CALL(rc = go_ts_layer_group(h, op, (char *)gp, (int)gn, (char *)cp, (int)cn));
    return PyLong_FromLong(rc);
}

/* flush(handle) -> code */
static PyObject *
l_flush(PyObject *self, PyObject *arg)
{
    int rc;
    long h = PyLong_AsLong(arg);
    if (h == -1 && PyErr_Occurred()) {
        return NULL;
    }
    GO_CALL(rc = go_ts_layer_flush((int)h));
    return PyLong_FromLong(rc);
}

/* endpoint() -> (id, eventfd) */
static PyObject *
l_endpoint(PyObject *self, PyObject *unused)
{
    unsigned long long id = 0;
    int fd = -1;
    GO_CALL(id = go_ts_layer_endpoint(&fd));
    if (id == 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return NULL;
    }
    return Py_BuildValue("(Ki)", id, fd);
}

/* close_endpoint(id) */
static PyObject *
l_close_endpoint(PyObject *self, PyObject *arg)
{
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred()) {
        return NULL;
    }
    GO_CALL(go_ts_layer_close_endpoint(id));
    Py_RETURN_NONE;
}

static uint32_t
get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* take(id) -> [(channel: str, data: bytes), ...]: the endpoint's
 * deliveries, packed by Go as (u32 len, name, u32 len, data)... */
static PyObject *
l_take(PyObject *self, PyObject *arg)
{
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    char *buf = NULL;
    long long n = 0, off = 0;
    PyObject *list;
    if (PyErr_Occurred()) {
        return NULL;
    }
    GO_CALL(go_ts_layer_take(id, &buf, &n));
    list = PyList_New(0);
    while (list != NULL && off + 8 <= n) {
        const unsigned char *p = (const unsigned char *)buf + off;
        uint32_t nl = get_u32(p), dl;
        PyObject *item;
        dl = get_u32(p + 4 + nl);
        item = Py_BuildValue("(s#y#)", (const char *)p + 4, (Py_ssize_t)nl,
                             (const char *)p + 8 + nl, (Py_ssize_t)dl);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(item);
        off += 8 + (long long)nl + dl;
    }
    free(buf);
    return list;
}

static PyMethodDef layer_methods[] = {
    {"open", l_open, METH_O, "open(config_json) -> handle"},
    {"send", l_send, METH_VARARGS, "send(handle, channel, data) -> code"},
    {"group_send", l_group_send, METH_VARARGS, "group_send(handle, group, data) -> (code, members, full)"},
    {"group_send_frames", l_group_send_frames, METH_VARARGS,
     "group_send_frames(handle, group, text, data) -> (code, sockets)"},
    {"bind_socket", l_bind_socket, METH_VARARGS, "bind_socket(channel, tag)"},
    {"receive", l_receive, METH_VARARGS, "receive(handle, endpoint, channel) -> bytes or code"},
    {"unwait", l_unwait, METH_VARARGS, "unwait(handle, endpoint, channel)"},
    {"group", l_group, METH_VARARGS, "group(handle, op, group, channel) -> code"},
    {"flush", l_flush, METH_O, "flush(handle) -> code"},
    {"endpoint", l_endpoint, METH_NOARGS, "endpoint() -> (id, eventfd)"},
    {"close_endpoint", l_close_endpoint, METH_O, "close_endpoint(id)"},
    {"take", l_take, METH_O, "take(id) -> [(channel, data)]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef layer_def = {
    PyModuleDef_HEAD_INIT, "_turnstile_layer", "the Channels layer held by Go", -1,
    layer_methods,
};

PyObject *
ts_init_layer_module(void)
{
    PyObject *m = PyModule_Create(&layer_def);
    if (m != NULL && PyModule_AddStringConstant(m, "source", layer_source) < 0) {
        Py_CLEAR(m);
    }
    return m;
}
