/* channel.c: the Channel, the loop's handle on one request.
 *
 * Notes about the implementation
 * ------------------------------
 * A Channel is made for each TS_EV_NEW and TS_EV_WS_NEW event (loop.c)
 * and holds the slot for the app's task: start puts the validated head in
 * the slot (DESIGN.md, the bytes rule), body appends response bytes to the
 * slot's output buffer, and each wakes Go through the slot's loop's ready
 * list (queue.c). done drops the loop's hold. For HTTP the Channel is the
 * app's send callable itself (send.c); websocket.c adds the WebSocket
 * methods. The type is created once per process (ts_channel_setup) and
 * shared by the loops: a Channel's loop is its slot's.
 */
#include "asgi.h"

#include <stdlib.h>
#include <string.h>

#define HEAD_MAX (64 * 1024)

PyTypeObject *ts_channel_type;

typedef ts_channel Channel;  /* asgi.h: websocket.c adds methods */

static int
channel_live(Channel *self)
{
    if (self->released) {
        PyErr_SetString(PyExc_RuntimeError, "ASGI channel used after the app returned");
        return 0;
    }
    return 1;
}

/* Shared with websocket.c (asgi.h). */
int
ts_channel_live(ts_channel *ch)
{
    return channel_live(ch);
}

static const char *
reason_phrase(int code)
{
    switch (code) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
    }
}

/* bytes_of returns the bytes of a bytes-like (bytes, bytearray); ASGI
 * requires byte strings for header names and values and bodies. */
static const char *
bytes_of(PyObject *o, Py_ssize_t *n, const char *what)
{
    if (PyBytes_Check(o)) {
        *n = PyBytes_GET_SIZE(o);
        return PyBytes_AS_STRING(o);
    }
    if (PyByteArray_Check(o)) {
        *n = PyByteArray_GET_SIZE(o);
        return PyByteArray_AS_STRING(o);
    }
    PyErr_Format(PyExc_TypeError, "%s must be bytes, not %.100s", what, Py_TYPE(o)->tp_name);
    return NULL;
}

/* ts_start_head validates http.response.start's status and headers and puts
 * the head in the slot (DESIGN.md, the bytes rule); 0, or -1 with an
 * exception. With upgrade (websocket.accept) the status is 101 and the
 * headers go with the 101 response. */
int
ts_start_head(Channel *self, PyObject *status_obj, PyObject *headers, int upgrade)
{
    ts_asgi_slot *s = self->slot;
    PyObject *it, *item;
    int status, overflow;
    size_t hlen;
    const char *reason;
    int64_t cl = -1;
    int close = 0;

    if (!channel_live(self)) {
        return -1;
    }
    if (!PyLong_Check(status_obj)) {
        PyErr_Format(PyExc_TypeError, "http.response.start 'status' must be int, not %.100s",
                     Py_TYPE(status_obj)->tp_name);
        return -1;
    }
    status = (int)PyLong_AsLongAndOverflow(status_obj, &overflow);
    if (upgrade && status == 101 && !overflow) {
        /* websocket.accept: the one 1xx an app may cause */
    }
    else if (overflow || status < TS_STATUS_FINAL_MIN || status > TS_STATUS_FINAL_MAX) {
        PyErr_Format(PyExc_ValueError, "http.response.start 'status' %R is not a final status (RFC 9110 section 15: 200-599)", status_obj);
        return -1;
    }
    /* "NNN Reason": status is 101 or 200-599, three digits */
    reason = reason_phrase(status);
    hlen = 4 + strlen(reason);
    pthread_mutex_lock(&s->mu);
    if (ts_buf_grow(&s->head, &s->head_cap, 0, hlen, HEAD_MAX) < 0) {
        goto error;
    }
    s->head[0] = (char)('0' + status / 100);
    s->head[1] = (char)('0' + status / 10 % 10);
    s->head[2] = (char)('0' + status % 10);
    s->head[3] = ' ';
    memcpy(s->head + 4, reason, hlen - 4);
    s->status_len = hlen;
    it = PyObject_GetIter(headers);
    if (it == NULL) {
        goto error;
    }
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *seq = PySequence_Fast(item, "each header must be a [name, value] pair");
        const char *name, *val;
        Py_ssize_t nlen, vlen;
        int skip = 0;

        Py_DECREF(item);
        if (seq == NULL) {
            Py_DECREF(it);
            goto error;
        }
        if (PySequence_Fast_GET_SIZE(seq) != 2) {
            PyErr_SetString(PyExc_ValueError, "each header must be a [name, value] pair");
            goto header_error;
        }
        name = bytes_of(PySequence_Fast_GET_ITEM(seq, 0), &nlen, "header name");
        if (name == NULL) {
            goto header_error;
        }
        val = bytes_of(PySequence_Fast_GET_ITEM(seq, 1), &vlen, "header value");
        if (val == NULL) {
            goto header_error;
        }
        if (ts_check_field(name, nlen, val, vlen, PySequence_Fast_GET_ITEM(seq, 0),
                           PySequence_Fast_GET_ITEM(seq, 1)) < 0) {
            goto header_error;
        }
        if (ts_ascii_ieq(name, nlen, "content-length")) {
            int64_t n;
            if (ts_parse_content_length(val, vlen, &n) < 0) {
                goto header_error;
            }
            if (cl >= 0 && n != cl) {  /* RFC 9110 §8.6: one length or none */
                PyErr_Format(PyExc_ValueError, "http.response.start: conflicting content-length headers %lld and %lld",
                             (long long)cl, (long long)n);
                goto header_error;
            }
            cl = n;
            skip = 1;
        }
        else if (ts_ascii_ieq(name, nlen, "connection")) {
            /* framing is the server's; "close" is honoured (RFC 9112 §9.6) */
            close = close || ts_list_has_token(val, vlen, "close");
            skip = 1;
        }
        else if (ts_ascii_ieq(name, nlen, "transfer-encoding") || ts_ascii_ieq(name, nlen, "keep-alive")
                 || ts_ascii_ieq(name, nlen, "date")) {
            skip = 1;  /* framing and Date are the server's */
        }
        if (!skip) {
            if (ts_buf_grow(&s->head, &s->head_cap, s->status_len + s->header_len, nlen + vlen + 4, HEAD_MAX) < 0) {
                goto header_error;
            }
            hlen = s->status_len + s->header_len;
            memcpy(s->head + hlen, name, nlen);
            hlen += nlen;
            s->head[hlen++] = ':';
            s->head[hlen++] = ' ';
            memcpy(s->head + hlen, val, vlen);
            hlen += vlen;
            s->head[hlen++] = '\r';
            s->head[hlen++] = '\n';
            s->header_len = hlen - s->status_len;
        }
        Py_DECREF(seq);
        continue;
header_error:
        Py_DECREF(seq);
        Py_DECREF(it);
        goto error;
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        goto error;
    }
    s->status = status;
    s->content_length = cl;
    s->close = close;
    s->head_ready = 1;
    pthread_mutex_unlock(&s->mu);
    /* the body is held to a declared length, as uvicorn does; a HEAD
     * response and a 204 or 304 carry none (RFC 9110 §6.4.1) */
    self->body_left = (cl >= 0 && !upgrade && !s->head_request && status != 204 && status != 304) ? cl : -1;
    /* Go is told with the first body bytes: a head alone rarely helps;
     * a websocket.accept is all there is. */
    if (upgrade) {
        ts_asgi_signal(s);
    }
    return 0;

error:
    s->status_len = s->header_len = 0;
    pthread_mutex_unlock(&s->mu);
    return -1;
}

/* Channel.start(status, headers[, upgrade]): http.response.start,
 * validated here (DESIGN.md, the bytes rule). With upgrade (websocket.accept)
 * the status is 101 and the headers go with the 101 response. */
static PyObject *
channel_start(Channel *self, PyObject *args)
{
    PyObject *status_obj, *headers;
    int upgrade = 0;

    if (!PyArg_ParseTuple(args, "OO|p:start", &status_obj, &headers, &upgrade)
        || ts_start_head(self, status_obj, headers, upgrade) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ts_body_append appends body bytes to the slot's output and wakes Go; it
 * returns 1 when send() must await DRAINED (more than write_buffer bytes
 * pending), 0 when not, -1 with an exception. An empty body with
 * more_body still wakes Go while the head waits: it sends the head on
 * its own (an event stream's headers before its first event). */
int
ts_body_append(Channel *self, PyObject *data, int more)
{
    ts_asgi_slot *s = self->slot;
    int wait, head_waits;
    const char *p;
    Py_ssize_t n;

    if (!channel_live(self)) {
        return -1;
    }
    p = bytes_of(data, &n, "http.response.body 'body'");
    if (p == NULL) {
        return -1;
    }
    if (self->body_left >= 0) {
        if (n > self->body_left) {
            PyErr_Format(PyExc_RuntimeError, "ASGI: response body longer than its Content-Length (%lld bytes too many)",
                         (long long)(n - self->body_left));
            return -1;
        }
        if (!more && n < self->body_left) {
            PyErr_Format(PyExc_RuntimeError, "ASGI: response body shorter than its Content-Length (%lld bytes missing)",
                         (long long)(self->body_left - n));
            return -1;
        }
        self->body_left -= n;
    }
    pthread_mutex_lock(&s->mu);
    if (n > 0 && ts_buf_grow(&s->out, &s->out_cap, s->out_len, n, 0) < 0) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    if (n > 0) {
        memcpy(s->out + s->out_len, p, n);
        s->out_len += n;
    }
    if (!more) {
        s->finished = 1;
    }
    wait = more && s->out_len > s->loop->write_buffer;
    if (wait) {
        s->drain_wait = 1;
    }
    head_waits = s->head_ready;
    pthread_mutex_unlock(&s->mu);
    if (n > 0 || !more || head_waits) {
        ts_asgi_signal(s);
    }
    return wait;
}

/* Channel.body(data, more) -> bool: True when send() must await DRAINED. */
static PyObject *
channel_body(Channel *self, PyObject *args)
{
    PyObject *data;
    int more, wait;

    if (!PyArg_ParseTuple(args, "Op:body", &data, &more)) {
        return NULL;
    }
    wait = ts_body_append(self, data, more);
    return wait < 0 ? NULL : PyBool_FromLong(wait);
}

/* Channel.pathsend(path): http.response.pathsend, the file sent by Go. */
PyObject *
ts_channel_pathsend(Channel *self, PyObject *arg)
{
    ts_asgi_slot *s = self->slot;
    PyObject *b;

    if (!channel_live(self)) {
        return NULL;
    }
    if (!PyUnicode_FSConverter(arg, &b)) {
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    free(s->pathsend);
    s->pathsend = strdup(PyBytes_AS_STRING(b));
    s->finished = 1;
    pthread_mutex_unlock(&s->mu);
    Py_DECREF(b);
    ts_asgi_signal(s);
    Py_RETURN_NONE;
}

/* Channel.want_body(): ask Go for the next request body chunk. */
static PyObject *
channel_want_body(Channel *self, PyObject *unused)
{
    ts_asgi_slot *s = self->slot;

    if (!channel_live(self)) {
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    s->want_body = 1;
    pthread_mutex_unlock(&s->mu);
    ts_asgi_signal(s);
    Py_RETURN_NONE;
}

/* Channel.bind(cycle): the object events for this request go to. */
static PyObject *
channel_bind(Channel *self, PyObject *cycle)
{
    if (!channel_live(self)) {
        return NULL;
    }
    Py_XSETREF(self->slot->cycle, Py_NewRef(cycle));
    Py_RETURN_NONE;
}

/* Channel.done(error): the app's task ended; error is None or the text
 * of its failure. Drops the loop's hold on the slot. */
static PyObject *
channel_done(Channel *self, PyObject *error)
{
    ts_asgi_slot *s = self->slot;
    char *text;
    int need;

    if (self->released) {
        Py_RETURN_NONE;
    }
    text = error != Py_None ? ts_text_dup(error) : NULL;
    self->released = 1;
    Py_CLEAR(s->cycle);
    pthread_mutex_lock(&s->mu);
    s->app_done = 1;
    if (text != NULL) {
        free(s->error);
        s->error = text;
    }
    /* Once the final body is out Go no longer waits for the app: a
     * background task running after the response wakes nobody. */
    need = !s->finished;
    pthread_mutex_unlock(&s->mu);
    if (need) {
        ts_asgi_signal(s);
    }
    ts_asgi_release(s);
    Py_RETURN_NONE;
}

static void
channel_dealloc(Channel *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (!self->released) {
        /* The task was dropped without done(): release anyway. */
        PyObject *r = channel_done(self, Py_None);
        Py_XDECREF(r);
    }
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef channel_methods[] = {
    {"start", (PyCFunction)channel_start, METH_VARARGS, NULL},
    {"body", (PyCFunction)channel_body, METH_VARARGS, NULL},
    {"pathsend", (PyCFunction)ts_channel_pathsend, METH_O, NULL},
    {"want_body", (PyCFunction)channel_want_body, METH_NOARGS, NULL},
    {"bind", (PyCFunction)channel_bind, METH_O, NULL},
    {"done", (PyCFunction)channel_done, METH_O, NULL},
    {"ws_send", (PyCFunction)ts_ws_send, METH_VARARGS, NULL},
    {"ws_close", (PyCFunction)ts_ws_close, METH_VARARGS, NULL},
    {"ws_consumed", (PyCFunction)ts_ws_consumed, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot channel_slots[] = {
    {Py_tp_dealloc, channel_dealloc},
    {Py_tp_methods, channel_methods},
    {Py_tp_getset, ts_channel_getset},
    {Py_tp_call, ts_channel_call},
    {Py_tp_doc, "turnstile's handle on one ASGI request"},
    {0, NULL},
};

static PyType_Spec channel_spec = {
    "turnstile.Channel", sizeof(Channel), 0, Py_TPFLAGS_DEFAULT, channel_slots,
};


/* ts_channel_new returns a new Channel on slot s for request gen, or NULL
 * with an exception. Loop thread. */
ts_channel *
ts_channel_new(ts_asgi_slot *s, uint32_t gen)
{
    Channel *ch = PyObject_New(Channel, ts_channel_type);

    if (ch == NULL) {
        return NULL;
    }
    ch->slot = s;
    ch->gen = gen;
    ch->released = 0;
    ch->started = ch->complete = ch->disconnected = ch->bodied = 0;
    ch->body_left = -1;
    ch->trailers = ch->body_done = 0;
    return ch;
}

/* ts_channel_setup creates the Channel type, once per process (under
 * ts_asgi_setup). 0, or -1 with an exception. */
int
ts_channel_setup(void)
{
    ts_channel_type = (PyTypeObject *)PyType_FromSpec(&channel_spec);
    return ts_channel_type == NULL ? -1 : 0;
}
