/* websocket.c: the loop's side of an ASGI WebSocket (websocket.go is Go's).
 *
 * Notes about the implementation
 * ------------------------------
 * Go owns the framing, ping/pong, limits and the close handshake; only
 * messages cross. A WebSocket uses the request slot of queue.c:
 *
 *   handshake   TS_EV_WS_NEW carries the websocket scope. The app's answer
 *               goes through Channel.start: status 101 with upgrade set
 *               (websocket.accept) or any final status (the denial
 *               response extension; websocket.close before accept is a
 *               403), then Channel.body for a denial body.
 *   out         after the accept, Channel.ws_send and Channel.ws_close
 *               append records (asgi.h, TS_WS_*) to the slot's output
 *               buffer under its mutex. The slot is listed for Go only
 *               when the buffer was empty: Go has not taken it since, so a
 *               burst of sends costs one wake-up. send() awaits DRAINED only
 *               when more than write_buffer bytes are pending, as for HTTP.
 *   in          Go pushes TS_EV_WS_MSG events (ts_asgi_ws_push), counting
 *               them in ws_pushed; receive() counts what it returns with
 *               Channel.ws_consumed (no syscall). When ws_max_queue messages
 *               are unconsumed, ts_asgi_ws_push tells Go to stop reading
 *               the socket and sets ws_read_wait; ws_consumed, once the
 *               backlog is down to half, clears it, sets ws_resume and
 *               lists the slot: Go's writer goroutine takes the flag
 *               and lets its reader go on. One wake-up per half queue.
 *   end         TS_EV_WS_CLOSE (code, reason) is pushed exactly once per
 *               connection, whatever ended it; the loop turns it into
 *               websocket.disconnect.
 */
#include "asgi.h"

#include <stdlib.h>
#include <string.h>

static PyObject *s_type, *s_receive, *s_disconnect, *s_text, *s_bytes, *s_code, *s_reason;

int
ts_ws_setup(void)
{
#define INTERN(var, text) do { var = PyUnicode_InternFromString(text); if (var == NULL) return -1; } while (0)
    INTERN(s_type, "type");
    INTERN(s_receive, "websocket.receive");
    INTERN(s_disconnect, "websocket.disconnect");
    INTERN(s_text, "text");
    INTERN(s_bytes, "bytes");
    INTERN(s_code, "code");
    INTERN(s_reason, "reason");
#undef INTERN
    return 0;
}

/* ts_ws_message returns a new websocket.receive message dict. Go has
 * checked that a text message is UTF-8. */
PyObject *
ts_ws_message(const char *data, size_t len, int opcode)
{
    PyObject *msg = PyDict_New(), *v;

    if (msg == NULL) {
        return NULL;
    }
    if (opcode == TS_WS_TEXT) {
        v = PyUnicode_DecodeUTF8(data, (Py_ssize_t)len, "strict");
    }
    else {
        v = PyBytes_FromStringAndSize(data, (Py_ssize_t)len);
    }
    if (v == NULL || PyDict_SetItem(msg, s_type, s_receive) < 0
        || PyDict_SetItem(msg, opcode == TS_WS_TEXT ? s_text : s_bytes, v) < 0) {
        Py_XDECREF(v);
        Py_DECREF(msg);
        return NULL;
    }
    Py_DECREF(v);
    return msg;
}

/* ts_ws_disconnect returns a new websocket.disconnect message dict (ASGI
 * WebSocket 2.5: code and reason). */
PyObject *
ts_ws_disconnect(int code, const char *reason, size_t len)
{
    PyObject *msg = PyDict_New(), *c = PyLong_FromLong(code);
    PyObject *r = PyUnicode_DecodeUTF8(reason, (Py_ssize_t)len, "replace");

    if (msg == NULL || c == NULL || r == NULL || PyDict_SetItem(msg, s_type, s_disconnect) < 0
        || PyDict_SetItem(msg, s_code, c) < 0 || PyDict_SetItem(msg, s_reason, r) < 0) {
        Py_XDECREF(msg);
        msg = NULL;
    }
    Py_XDECREF(c);
    Py_XDECREF(r);
    return msg;
}

/* append_record appends one record (a header, then a and b) to the output
 * buffer of s and wakes Go if the buffer was empty. Returns 1 when send()
 * must await DRAINED, 0, or -1 with an exception set. Loop thread. */
static int
append_record(ts_asgi_slot *s, int kind, const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen + blen;
    uint32_t len32 = (uint32_t)n;
    int was_empty, wait;
    char *p;

    if (n > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "WebSocket message too large (4 GiB or more)");
        return -1;
    }
    pthread_mutex_lock(&s->mu);
    if (ts_buf_grow(&s->out, &s->out_cap, s->out_len, TS_WS_RECORD_HDR + n, 0) < 0) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    was_empty = s->out_len == 0;
    p = s->out + s->out_len;
    p[0] = (char)kind;
    memcpy(p + 1, &len32, 4);
    if (alen > 0) {
        memcpy(p + TS_WS_RECORD_HDR, a, alen);
    }
    if (blen > 0) {
        memcpy(p + TS_WS_RECORD_HDR + alen, b, blen);
    }
    s->out_len += TS_WS_RECORD_HDR + n;
    wait = s->out_len > ts_asgi_write_buffer(s);
    if (wait) {
        s->drain_wait = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (was_empty) {
        ts_asgi_signal(s);
    }
    return wait;
}

/* Channel.ws_send(kind, data) -> bool: websocket.send, kind 1 with a str,
 * 2 with bytes. True when send() must await DRAINED. */
PyObject *
ts_ws_send(ts_channel *ch, PyObject *args)
{
    int kind, rc;
    PyObject *data;
    const char *p;
    Py_ssize_t n;

    if (!PyArg_ParseTuple(args, "iO:ws_send", &kind, &data) || !ts_channel_live(ch)) {
        return NULL;
    }
    if (kind == TS_WS_TEXT) {
        if (!PyUnicode_Check(data)) {
            PyErr_Format(PyExc_TypeError, "websocket.send 'text' must be str, not %.100s", Py_TYPE(data)->tp_name);
            return NULL;
        }
        p = PyUnicode_AsUTF8AndSize(data, &n);  /* refuses lone surrogates */
        if (p == NULL) {
            return NULL;
        }
    }
    else if (PyBytes_Check(data)) {
        p = PyBytes_AS_STRING(data);
        n = PyBytes_GET_SIZE(data);
    }
    else if (PyByteArray_Check(data)) {
        p = PyByteArray_AS_STRING(data);
        n = PyByteArray_GET_SIZE(data);
    }
    else {
        PyErr_Format(PyExc_TypeError, "websocket.send 'bytes' must be bytes, not %.100s", Py_TYPE(data)->tp_name);
        return NULL;
    }
    rc = append_record(ch->slot, kind == TS_WS_TEXT ? TS_WS_TEXT : TS_WS_BINARY, p, (size_t)n, NULL, 0);
    if (rc < 0) {
        return NULL;
    }
    return PyBool_FromLong(rc);
}

/* Channel.ws_close(code, reason): websocket.close after the accept.
 *
 * RFC 6455 section 7.4.1: 1004, 1005, 1006 and 1015 are reserved and "MUST
 * NOT be set as a status code in a Close control frame by an endpoint";
 * 1016-2999 are unassigned (clients refuse them). For those the frame goes
 * without a body, which the client reads as 1005, "no status". The reason
 * must fit a control frame: 125 bytes with the code (section 5.5); ASGI
 * allows any str, so a longer one is cut to the most whole UTF-8
 * characters that fit in 123 bytes (section 5.5.1: the reason is UTF-8)
 * and the app's code is kept. */
PyObject *
ts_ws_close(ts_channel *ch, PyObject *args)
{
    int code;
    PyObject *reason;
    const char *r = NULL;
    Py_ssize_t rlen = 0;
    char be[2];

    if (!PyArg_ParseTuple(args, "iU:ws_close", &code, &reason) || !ts_channel_live(ch)) {
        return NULL;
    }
    if (code < 1000 || code > 4999) {
        PyErr_Format(PyExc_ValueError, "websocket.close 'code' %d is not a WebSocket close code (1000-4999)", code);
        return NULL;
    }
    r = PyUnicode_AsUTF8AndSize(reason, &rlen);
    if (r == NULL) {
        return NULL;
    }
    if (rlen > 123) {
        /* r[rlen] is the first byte left out: back off while it continues
         * a character begun before it */
        rlen = 123;
        while (rlen > 0 && ((unsigned char)r[rlen] & 0xc0) == 0x80) {
            rlen--;
        }
    }
    if (code == 1004 || code == 1005 || code == 1006 || (code >= 1015 && code < 3000)) {
        /* said once per call site (the warnings filter), in the log as a
         * WARNING record: the app's code and reason do not reach the
         * client */
        if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                             "websocket.close code %d may not be sent (RFC 6455 section 7.4): "
                             "the close frame goes without a code or reason (the client sees 1005)",
                             code) < 0) {
            return NULL;
        }
        if (append_record(ch->slot, TS_WS_CLOSE, NULL, 0, NULL, 0) < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    be[0] = (char)(code >> 8);
    be[1] = (char)(code & 0xff);
    if (append_record(ch->slot, TS_WS_CLOSE, be, 2, r, (size_t)rlen) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Channel.ws_consumed(): receive() returned one websocket.receive message. */
PyObject *
ts_ws_consumed(ts_channel *ch, PyObject *unused)
{
    ts_asgi_slot *s = ch->slot;
    int resume;

    if (ch->released) {
        Py_RETURN_NONE;
    }
    pthread_mutex_lock(&s->mu);
    s->ws_consumed++;
    resume = s->ws_read_wait && s->ws_pushed - s->ws_consumed <= (uint64_t)(s->ws_max_queue / 2);
    if (resume) {
        s->ws_read_wait = 0;
        s->ws_resume = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (resume) {
        ts_asgi_signal(s);
    }
    Py_RETURN_NONE;
}

int
ts_asgi_ws_push(ts_asgi_slot *s, uint32_t gen, const char *data, size_t len, int opcode)
{
    int full;

    /* counted before the push, so that ws_consumed never passes ws_pushed */
    pthread_mutex_lock(&s->mu);
    s->ws_pushed++;
    full = s->ws_pushed - s->ws_consumed >= (uint64_t)s->ws_max_queue;
    if (full) {
        s->ws_read_wait = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (ts_asgi_push(s->loop, TS_EV_WS_MSG, s, gen, data, len, opcode) < 0) {
        return -1;
    }
    return full;
}

/* shrink replaces *buf by a fresh allocation of small bytes holding its
 * first len bytes, if that makes it smaller. A fresh chunk rather than an
 * in-place realloc: the large one goes back to malloc's bins, where the
 * next handshake's slot finds it. */
static void
shrink(char **buf, size_t *cap, size_t len, size_t small)
{
    char *p;

    if (*cap <= small || len > small) {
        return;
    }
    p = malloc(small);
    if (p == NULL) {
        return;  /* keep the large one */
    }
    if (len > 0) {
        memcpy(p, *buf, len);
    }
    free(*buf);
    *buf = p;
    *cap = small;
}

void
ts_asgi_ws_trim(ts_asgi_slot *s)
{
    pthread_mutex_lock(&s->mu);
    shrink(&s->req, &s->req_cap, 0, 256);
    shrink(&s->head, &s->head_cap, 0, 256);
    shrink(&s->spare, &s->spare_cap, 0, 512);
    shrink(&s->out, &s->out_cap, s->out_len, 512);
    pthread_mutex_unlock(&s->mu);
}
