/* send.c: send(), the Channel as the app's HTTP send callable.
 *
 * Notes about the implementation
 * ------------------------------
 * ASGI HTTP "Response Start", "Response Body" and pathsend. The app gets
 * the Channel itself as send: send(message) does the work at once (it
 * never blocks) and returns a finished awaitable, one shared object, so
 * a send costs no coroutine, frame or future. Only a body send that finds
 * more than write_buffer bytes pending returns a real wait (the cycle's
 * _drain_wait() coroutine). The finished awaitable has the coroutine
 * methods (send, throw, close), so asyncio.create_task(send(m)) and
 * asyncio.iscoroutine() accept it as they accept a coroutine.
 */
#include "asgi.h"

#include <stddef.h>

typedef ts_channel Channel;

/* Created once per process (ts_send_setup) and shared by the loops. */
static PyObject *sent;                   /* the finished awaitable */
static PyObject *client_disconnected;    /* _asgi.ClientDisconnected */
static PyObject *s_type, *s_headers, *s_path;  /* interned: the same objects as scope.c's */
static PyObject *s_body, *s_more_body, *s_status, *s_k_start, *s_k_body, *s_k_pathsend,
    *s_waiter, *s_drain_wait, *s_final, *s_get, *empty_bytes, *empty_tuple,
    *s_k_early_hint, *s_links, *s_link, *s_k_trailers, *s_trailers, *s_more_trailers;

static PyObject *
sent_await(PyObject *self)
{
    return Py_NewRef(self);
}

static PyObject *
sent_next(PyObject *self)
{
    return NULL;  /* exhausted: StopIteration, the value None */
}

static PyObject *
sent_send(PyObject *self, PyObject *arg)
{
    PyErr_SetNone(PyExc_StopIteration);
    return NULL;
}

static PyObject *
sent_throw(PyObject *self, PyObject *args)
{
    PyObject *typ, *val = NULL, *tb = NULL;

    if (!PyArg_UnpackTuple(args, "throw", 1, 3, &typ, &val, &tb)) {
        return NULL;
    }
    if (PyExceptionInstance_Check(typ)) {
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
    }
    else if (PyExceptionClass_Check(typ)) {
        PyErr_SetObject(typ, val);
    }
    else {
        PyErr_SetString(PyExc_TypeError, "exceptions must be classes or instances deriving from BaseException");
    }
    return NULL;
}

static PyObject *
sent_close(PyObject *self, PyObject *unused)
{
    Py_RETURN_NONE;
}

static PyMethodDef sent_methods[] = {
    {"send", sent_send, METH_O, NULL},
    {"throw", sent_throw, METH_VARARGS, NULL},
    {"close", sent_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot sent_slots[] = {
    {Py_am_await, sent_await},
    {Py_tp_iter, sent_await},
    {Py_tp_iternext, sent_next},
    {Py_tp_methods, sent_methods},
    {Py_tp_doc, "a finished send(): awaiting it returns None at once"},
    {0, NULL},
};

static PyType_Spec sent_spec = {
    "turnstile.Sent", sizeof(PyObject), 0, Py_TPFLAGS_DEFAULT, sent_slots,
};

/* message_get returns message[key] (a new reference): dflt when the key is
 * missing, or with dflt NULL a KeyError, as message["key"] would. A dict
 * is read directly; any other mapping through [] and .get(). */
static PyObject *
message_get(PyObject *message, PyObject *key, PyObject *dflt)
{
    PyObject *v;

    if (PyDict_CheckExact(message)) {
        v = PyDict_GetItemWithError(message, key);
        if (v != NULL) {
            return Py_NewRef(v);
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
        if (dflt == NULL) {
            PyErr_SetObject(PyExc_KeyError, key);
            return NULL;
        }
        return Py_NewRef(dflt);
    }
    if (dflt == NULL) {
        return PyObject_GetItem(message, key);
    }
    return PyObject_CallMethodObjArgs(message, s_get, key, dflt, NULL);
}

static int
kind_is(PyObject *kind, PyObject *name)
{
    return kind == name || (PyUnicode_Check(kind) && PyUnicode_Compare(kind, name) == 0);
}

/* cycle_call calls the bound cycle's method name (no arguments). */
static PyObject *
cycle_call(Channel *self, PyObject *name)
{
    PyObject *cycle = self->slot->cycle;

    if (cycle == NULL || self->released) {
        return Py_NewRef(sent);  /* the app's task has ended */
    }
    return PyObject_CallMethodNoArgs(cycle, name);
}

#define HINTS_MAX (64 * 1024)  /* Link bytes waiting for one 103, as a head's bound */

/* early_hint queues http.response.early_hint's links (an iterable of
 * bytes, each a Link field value, RFC 8288) as "Link: v\r\n" lines for
 * the 103 Early Hints Go writes before the final head (RFC 8297); 0, or
 * -1 with an exception. After http.response.start it does nothing (a 1xx
 * cannot follow the final head, RFC 9110 §15.2). */
static int
early_hint(Channel *self, PyObject *links)
{
    ts_asgi_slot *s = self->slot;
    PyObject *it, *item;
    int queued = 0;

    if (!ts_channel_live(self)) {
        return -1;
    }
    if (self->started) {
        return 0;
    }
    if ((it = PyObject_GetIter(links)) == NULL) {
        return -1;
    }
    while ((item = PyIter_Next(it)) != NULL) {
        const char *v;
        Py_ssize_t n;

        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "http.response.early_hint 'links' items must be bytes, not %.100s",
                         Py_TYPE(item)->tp_name);
            goto error;
        }
        v = PyBytes_AS_STRING(item);
        n = PyBytes_GET_SIZE(item);
        if (ts_check_field("link", 4, v, n, s_link, item) < 0) {
            goto error;
        }
        pthread_mutex_lock(&s->mu);
        if (ts_buf_grow(&s->hints, &s->hints_cap, s->hints_len, (size_t)n + 8, HINTS_MAX) < 0) {
            pthread_mutex_unlock(&s->mu);
            goto error;
        }
        memcpy(s->hints + s->hints_len, "Link: ", 6);
        memcpy(s->hints + s->hints_len + 6, v, (size_t)n);
        memcpy(s->hints + s->hints_len + 6 + n, "\r\n", 2);
        s->hints_len += (size_t)n + 8;
        pthread_mutex_unlock(&s->mu);
        queued = 1;
        Py_DECREF(item);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (queued) {
        ts_asgi_signal(s);  /* the 103 leaves now, not with the head */
    }
    return 0;

error:
    Py_DECREF(item);
    Py_DECREF(it);
    return -1;
}

/* trailers_add appends http.response.trailers' headers (an iterable of
 * [name, value] bytes pairs) to the slot's trailer section as "Name:
 * value\r\n" lines; framing fields (content-length, transfer-encoding,
 * connection, keep-alive) are dropped, RFC 9110 §6.5.1. 0, or -1 with an
 * exception. */
static int
trailers_add(Channel *self, PyObject *headers)
{
    ts_asgi_slot *s = self->slot;
    PyObject *it, *item, *seq = NULL;

    if ((it = PyObject_GetIter(headers)) == NULL) {
        return -1;
    }
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *no, *vo;
        Py_ssize_t nlen, vlen;
        const char *name, *val;

        seq = PySequence_Fast(item, "each trailer must be a [name, value] pair");
        Py_DECREF(item);
        if (seq == NULL) {
            goto error;
        }
        if (PySequence_Fast_GET_SIZE(seq) != 2) {
            PyErr_SetString(PyExc_ValueError, "each trailer must be a [name, value] pair");
            goto error;
        }
        no = PySequence_Fast_GET_ITEM(seq, 0);
        vo = PySequence_Fast_GET_ITEM(seq, 1);
        if (!PyBytes_Check(no) || !PyBytes_Check(vo)) {
            PyErr_SetString(PyExc_TypeError, "http.response.trailers names and values must be bytes");
            goto error;
        }
        name = PyBytes_AS_STRING(no);
        nlen = PyBytes_GET_SIZE(no);
        val = PyBytes_AS_STRING(vo);
        vlen = PyBytes_GET_SIZE(vo);
        if (ts_check_field(name, nlen, val, vlen, no, vo) < 0) {
            goto error;
        }
        if (!ts_ascii_ieq(name, nlen, "content-length") && !ts_ascii_ieq(name, nlen, "transfer-encoding")
            && !ts_ascii_ieq(name, nlen, "connection") && !ts_ascii_ieq(name, nlen, "keep-alive")) {
            pthread_mutex_lock(&s->mu);
            if (ts_buf_grow(&s->trailers, &s->trailers_cap, s->trailers_len, (size_t)(nlen + vlen) + 4, HINTS_MAX) < 0) {
                pthread_mutex_unlock(&s->mu);
                goto error;
            }
            memcpy(s->trailers + s->trailers_len, name, nlen);
            s->trailers_len += nlen;
            memcpy(s->trailers + s->trailers_len, ": ", 2);
            s->trailers_len += 2;
            memcpy(s->trailers + s->trailers_len, val, vlen);
            s->trailers_len += vlen;
            memcpy(s->trailers + s->trailers_len, "\r\n", 2);
            s->trailers_len += 2;
            pthread_mutex_unlock(&s->mu);
        }
        Py_CLEAR(seq);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;

error:
    Py_XDECREF(seq);
    Py_DECREF(it);
    return -1;
}

/* body_complete marks the response complete: a receive() waiting for the
 * end now gets http.disconnect. 0, or -1 with an exception. */
static int
body_complete(Channel *self)
{
    PyObject *v;
    int rc;

    self->complete = 1;
    if (self->slot->cycle != NULL) {
        if ((v = PyObject_GetAttr(self->slot->cycle, s_waiter)) == NULL) {
            return -1;
        }
        rc = v != Py_None;
        Py_DECREF(v);
        if (rc) {
            if ((v = cycle_call(self, s_final)) == NULL) {
                return -1;
            }
            Py_DECREF(v);
        }
    }
    return 0;
}

static PyObject *
channel_send(Channel *self, PyObject *message)
{
    PyObject *kind, *v, *v2, *v3;
    int more, wait, rc;

    if (self->disconnected) {
        PyErr_SetString(client_disconnected, "the client disconnected");
        return NULL;
    }
    kind = message_get(message, s_type, NULL);
    if (kind == NULL) {
        return NULL;
    }
    if (kind_is(kind, s_k_body)) {
        Py_DECREF(kind);
        if (!self->started) {
            PyErr_SetString(PyExc_RuntimeError, "ASGI: 'http.response.body' sent before 'http.response.start'");
            return NULL;
        }
        if (self->complete) {
            return Py_NewRef(sent);  /* "any further messages on the channel are ignored" */
        }
        if ((v = message_get(message, s_more_body, Py_False)) == NULL) {
            return NULL;
        }
        more = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (more < 0 || self->body_done) {
            /* with trailers, no body after the last one: ignored as after
             * a complete response */
            return more < 0 ? NULL : Py_NewRef(sent);
        }
        if ((v = message_get(message, s_body, empty_bytes)) == NULL) {
            return NULL;
        }
        /* with trailers due the response ends with them, not here */
        wait = ts_body_append(self, v, more || self->trailers);  /* raises on a bad message */
        Py_DECREF(v);
        if (wait < 0) {
            return NULL;
        }
        self->bodied = 1;
        if (!more && self->trailers) {
            self->body_done = 1;
            more = 1;
        }
        if (wait) {
            return cycle_call(self, s_drain_wait);
        }
        if (!more && body_complete(self) < 0) {
            return NULL;
        }
        return Py_NewRef(sent);
    }
    if (kind_is(kind, s_k_start)) {
        Py_DECREF(kind);
        if (self->started) {
            PyErr_SetString(PyExc_RuntimeError, "ASGI: 'http.response.start' sent twice");
            return NULL;
        }
        if ((v = message_get(message, s_status, NULL)) == NULL) {
            return NULL;
        }
        if ((v2 = message_get(message, s_headers, empty_tuple)) == NULL) {
            Py_DECREF(v);
            return NULL;
        }
        if ((v3 = message_get(message, s_trailers, Py_False)) == NULL || (rc = PyObject_IsTrue(v3)) < 0) {
            Py_XDECREF(v3);
            Py_DECREF(v);
            Py_DECREF(v2);
            return NULL;
        }
        Py_DECREF(v3);
        self->trailers = (char)rc;
        pthread_mutex_lock(&self->slot->mu);
        self->slot->trailers_wanted = rc;  /* Go keeps the framing that carries them */
        pthread_mutex_unlock(&self->slot->mu);
        rc = ts_start_head(self, v, v2, 0);
        Py_DECREF(v);
        Py_DECREF(v2);
        if (rc < 0) {
            return NULL;
        }
        self->started = 1;
        return Py_NewRef(sent);
    }
    if (kind_is(kind, s_k_pathsend)) {
        Py_DECREF(kind);
        if (!self->started) {
            PyErr_SetString(PyExc_RuntimeError, "ASGI: 'http.response.pathsend' sent before 'http.response.start'");
            return NULL;
        }
        if (self->complete) {
            return Py_NewRef(sent);
        }
        if (self->bodied) {
            /* the extension's message is the whole body, in place of
             * http.response.body: after body bytes there is no framing
             * that could carry it */
            PyErr_SetString(PyExc_RuntimeError, "ASGI: 'http.response.pathsend' after 'http.response.body': the file must be the whole body");
            return NULL;
        }
        self->complete = 1;
        if ((v = message_get(message, s_path, NULL)) == NULL) {
            return NULL;
        }
        v2 = ts_channel_pathsend(self, v);
        Py_DECREF(v);
        if (v2 == NULL) {
            return NULL;
        }
        Py_DECREF(v2);
        return Py_NewRef(sent);
    }
    if (kind_is(kind, s_k_trailers)) {
        Py_DECREF(kind);
        if (!self->started) {
            PyErr_SetString(PyExc_RuntimeError, "ASGI: 'http.response.trailers' sent before 'http.response.start'");
            return NULL;
        }
        if (!self->trailers || self->complete) {
            return Py_NewRef(sent);  /* not announced by "trailers": True, or after the end */
        }
        if ((v = message_get(message, s_headers, empty_tuple)) == NULL) {
            return NULL;
        }
        rc = trailers_add(self, v);
        Py_DECREF(v);
        if (rc < 0 || (v = message_get(message, s_more_trailers, Py_False)) == NULL) {
            return NULL;
        }
        more = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (more < 0) {
            return NULL;
        }
        if (!more) {
            /* the end of the response: Go writes the trailer section */
            self->body_done = 1;
            if (ts_body_append(self, empty_bytes, 0) < 0 || body_complete(self) < 0) {
                return NULL;
            }
        }
        return Py_NewRef(sent);
    }
    if (kind_is(kind, s_k_early_hint)) {
        Py_DECREF(kind);
        if ((v = message_get(message, s_links, empty_tuple)) == NULL) {
            return NULL;
        }
        rc = early_hint(self, v);
        Py_DECREF(v);
        return rc < 0 ? NULL : Py_NewRef(sent);
    }
    PyErr_Format(PyExc_ValueError, "ASGI: unexpected message type %R on an HTTP connection", kind);
    Py_DECREF(kind);
    return NULL;
}

/* tp_call: send(message), the one argument by position or keyword, as
 * for an "async def send(message)". */
PyObject *
ts_channel_call(Channel *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"message", NULL};
    PyObject *message;

    if (kwargs == NULL && PyTuple_GET_SIZE(args) == 1) {
        return channel_send(self, PyTuple_GET_ITEM(args, 0));
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:send", names, &message)) {
        return NULL;
    }
    return channel_send(self, message);
}

static PyObject *
flag_get(Channel *self, void *offset)
{
    return PyBool_FromLong(*((char *)self + (size_t)offset));
}

static int
flag_set(Channel *self, PyObject *v, void *offset)
{
    int on = v == NULL ? 0 : PyObject_IsTrue(v);
    if (on < 0) {
        return -1;
    }
    *((char *)self + (size_t)offset) = (char)on;
    return 0;
}

/* Channel.tag: the connection's name for the sync-work pools (call.c):
 * slot index << 32 | generation; metrics and logs show it as slot/gen. */
static PyObject *
tag_get(Channel *self, void *unused)
{
    return PyLong_FromUnsignedLongLong(((unsigned long long)self->slot->index << 32) | self->gen);
}

PyGetSetDef ts_channel_getset[] = {
    {"tag", (getter)tag_get, NULL, "slot << 32 | generation (sync-work pools)", NULL},
    {"started", (getter)flag_get, NULL, "http.response.start was sent", (void *)offsetof(Channel, started)},
    {"complete", (getter)flag_get, NULL, "the final body (or pathsend) was sent", (void *)offsetof(Channel, complete)},
    {"disconnected", (getter)flag_get, (setter)flag_set, "the client has left: send() raises",
     (void *)offsetof(Channel, disconnected)},
    {NULL, NULL, NULL, NULL, NULL},
};

/* _turnstile_asgi.http_setup(ClientDisconnected): the OSError subclass a
 * send() after the client left raises (ASGI HTTP 2.4). */
PyObject *
ts_mod_http_setup(PyObject *mod, PyObject *exc)
{
    if (!PyExceptionClass_Check(exc)) {
        PyErr_SetString(PyExc_TypeError, "http_setup wants an exception class");
        return NULL;
    }
    Py_XSETREF(client_disconnected, Py_NewRef(exc));
    Py_RETURN_NONE;
}

/* ts_send_setup creates send()'s objects, once per process (under
 * ts_asgi_setup). 0, or -1 with an exception. */
int
ts_send_setup(void)
{
    PyTypeObject *sent_type;

#define INTERN(var, text) do { var = PyUnicode_InternFromString(text); if (var == NULL) return -1; } while (0)
    INTERN(s_type, "type");
    INTERN(s_headers, "headers");
    INTERN(s_path, "path");
    INTERN(s_body, "body");
    INTERN(s_more_body, "more_body");
    INTERN(s_status, "status");
    INTERN(s_k_start, "http.response.start");
    INTERN(s_k_body, "http.response.body");
    INTERN(s_k_pathsend, "http.response.pathsend");
    INTERN(s_k_early_hint, "http.response.early_hint");
    INTERN(s_k_trailers, "http.response.trailers");
    INTERN(s_trailers, "trailers");
    INTERN(s_more_trailers, "more_trailers");
    INTERN(s_links, "links");
    INTERN(s_link, "link");
    INTERN(s_waiter, "waiter");
    INTERN(s_drain_wait, "_drain_wait");
    INTERN(s_final, "_final");
    INTERN(s_get, "get");
#undef INTERN
    empty_bytes = PyBytes_FromStringAndSize(NULL, 0);
    empty_tuple = PyTuple_New(0);
    client_disconnected = Py_NewRef(PyExc_ConnectionError);  /* until http_setup */
    sent_type = (PyTypeObject *)PyType_FromSpec(&sent_spec);
    if (sent_type == NULL || empty_bytes == NULL || empty_tuple == NULL) {
        return -1;
    }
    sent = PyType_GenericAlloc(sent_type, 0);
    Py_DECREF(sent_type);
    return sent == NULL ? -1 : 0;
}
