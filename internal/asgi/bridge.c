/* bridge.c: the ASGI bridge between Go and the asyncio loop thread.
 *
 * Notes about the implementation
 * ------------------------------
 * Go -> loop (DESIGN.md, ASGI): handler goroutines push events on a C-side
 * queue; the loop watches a non-blocking eventfd with loop.add_reader and
 * drains the whole queue in one callback (drain()). No wake-up is lost:
 *
 *   producer:  lock, append, unlock; if it flips need_wake 1 -> 0, it
 *              writes the eventfd.
 *   drain:     reads the eventfd, then repeatedly takes the whole queue
 *              and processes it; sets need_wake = 1 and re-checks the
 *              queue; if something arrived, it takes the flag back (1 -> 0)
 *              and goes on, so no producer writes meanwhile.
 *
 * Measured for DESIGN.md: this moved 2-3 M items/s pipelined where
 * call_soon_threadsafe from a thread that takes the GIL moved 100-180 k/s.
 * Go never takes the GIL for the bridge: only the loop thread attaches.
 *
 * Loop -> Go: send() never blocks. For HTTP the Channel is the app's send
 * callable ("send()" below: no coroutine per message); it, or a Channel
 * method a WebSocket cycle calls, appends the head or body bytes to the
 * slot's output buffer under the slot's mutex and puts
 * the slot on the ready list (signal_go); Go's dispatcher goroutine,
 * reading the list's one eventfd through the netpoller, takes the whole
 * list and wakes each slot's handler goroutine on a Go channel; that
 * goroutine takes the buffer (swapping it with a spare) and writes it to
 * the socket. The ready list follows the loop queue's protocol (a slot is
 * listed at most once; the eventfd is written only when the dispatcher
 * has armed need_wake), so a burst of responses costs the loop thread one
 * write(2), not one per response. send() awaits only when more than
 * write_buffer bytes are pending (the bound rule): Go's ts_asgi_written
 * then pushes DRAINED.
 *
 * Slots are reused; refs counts the holders (the Go handler and the app's
 * task) and gen tells a late event from a new request's.
 *
 * WebSockets use the same slot, queue and Channel (websocket.c and
 * websocket.go): TS_EV_WS_NEW carries the websocket scope, the handshake
 * answer goes through Channel.start (status 101 accepts, any other status
 * is a denial response) and after it messages travel as records.
 */
#include "asgi.h"
#include "_cgo_export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sched.h>
#include <unistd.h>

#define HEAD_MAX (64 * 1024)

typedef struct ts_event {
    struct ts_event *next;
    int type;
    ts_asgi_slot *slot;
    uint32_t gen;
    int more;
    size_t len;
    char data[];
} ts_event;

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static ts_event *qhead, *qtail;          /* guarded by qlock */
static int loop_fd = -1;                 /* the loop's eventfd */
static _Atomic int need_wake = 1;
static int stopping;                     /* guarded by qlock */

static pthread_mutex_t flock = PTHREAD_MUTEX_INITIALIZER;
static ts_asgi_slot **free_slots;        /* guarded by flock */
static int nfree, free_cap;

static size_t write_buffer = 256 * 1024;

/* The watchdog's view of the loop (read by Go without the GIL): the last
 * time the loop turned (a drain), and how long the last probe event waited
 * for it. Monotonic nanoseconds. */
_Atomic int64_t ts_loop_heartbeat_ns;
_Atomic int64_t ts_loop_lag_ns;
_Atomic uint64_t ts_loop_probe_seq;
static const char *loop_source;
static ts_loop_config loop_cfg;

/* Python objects, created in ts_asgi_setup; loop thread / main thread. */
static PyTypeObject *ChannelType;
static PyObject *asgi_module;
static PyObject *state_dict;             /* lifespan state, or NULL */
static PyObject *s_type, *s_http, *s_asgi, *asgi_template, *s_http_version,
    *s_method, *s_scheme, *s_path, *s_raw_path, *s_query_string, *s_root_path,
    *s_headers, *s_client, *s_server, *s_state, *s_extensions, *s_http_scheme,
    *s_v11, *s_v10, *s_v2, *extensions_template;
static PyObject *s_https_scheme, *s_wss_scheme;
static PyObject *s_websocket, *s_ws_scheme, *s_subprotocols, *ws_asgi_template,
    *ws_extensions_template;
static PyObject *methods[8];
static const char *method_names[8] = {"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS", NULL};

/* ---- slots ----------------------------------------------------------- */

ts_asgi_slot *
ts_asgi_slot_new(int index)
{
    ts_asgi_slot *s;

    if (index < 0) {
        /* Reuse a free slot, with its own index, or NULL. */
        pthread_mutex_lock(&flock);
        s = nfree > 0 ? free_slots[--nfree] : NULL;
        pthread_mutex_unlock(&flock);
        return s;
    }
    /* A new slot at Go's index for it. */
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->index = index;
    pthread_mutex_init(&s->mu, NULL);
    /* The buffers (req, head, out, spare) start empty and grow to what
     * the slot's requests use (ts_buf_reserve): a request that awaits (a
     * long poll, an event stream before its first event) holds only its
     * request block, not 13 KiB of buffers it has not used. */
    return s;
}

int
ts_asgi_reserve(ts_asgi_slot *s, size_t need)
{
    return ts_buf_reserve(&s->req, &s->req_cap, need);
}

uint32_t
ts_asgi_begin(ts_asgi_slot *s)
{
    uint32_t gen;

    pthread_mutex_lock(&s->mu);
    gen = ++s->gen;
    s->refs = 2;
    s->status = 0;
    s->status_len = s->header_len = 0;
    s->content_length = -1;
    s->close = 0;
    s->head_ready = 0;
    s->out_len = 0;
    s->finished = s->finished_taken = 0;
    s->app_done = 0;
    s->want_body = 0;
    s->drain_wait = 0;
    s->error = NULL;
    s->pathsend = NULL;
    s->ws_pushed = s->ws_consumed = 0;
    s->ws_read_wait = s->ws_resume = 0;
    pthread_mutex_unlock(&s->mu);
    return gen;
}

int
ts_asgi_release(ts_asgi_slot *s)
{
    int left;

    pthread_mutex_lock(&s->mu);
    left = --s->refs;
    pthread_mutex_unlock(&s->mu);
    if (left == 0) {
        pthread_mutex_lock(&flock);
        if (nfree == free_cap) {
            int cap = free_cap ? free_cap * 2 : 64;
            ts_asgi_slot **p = realloc(free_slots, cap * sizeof(*p));
            if (p == NULL) {
                pthread_mutex_unlock(&flock);
                return 0;  /* leaked, never reused: out of memory */
            }
            free_slots = p;
            free_cap = cap;
        }
        free_slots[nfree++] = s;
        pthread_mutex_unlock(&flock);
    }
    return left;
}

/* ---- the loop queue (Go side) ------------------------------------------ */

static void
wake_loop(void)
{
    uint64_t one = 1;
    if (atomic_exchange(&need_wake, 0) == 1) {
        if (write(loop_fd, &one, sizeof(one)) < 0) {
            /* EAGAIN: the counter is full, the loop is awake anyway */
        }
    }
}

int
ts_asgi_push(int type, ts_asgi_slot *s, uint32_t gen, const char *data, size_t len, int more)
{
    ts_event *ev = malloc(sizeof(ts_event) + len);

    if (ev == NULL) {
        return -1;
    }
    ev->next = NULL;
    ev->type = type;
    ev->slot = s;
    ev->gen = gen;
    ev->more = more;
    ev->len = len;
    if (len > 0) {
        memcpy(ev->data, data, len);
    }
    pthread_mutex_lock(&qlock);
    if (stopping && type != TS_EV_STOP) {
        pthread_mutex_unlock(&qlock);
        free(ev);
        return -1;
    }
    if (type == TS_EV_STOP) {
        stopping = 1;
    }
    if (qtail != NULL) {
        qtail->next = ev;
    }
    else {
        qhead = ev;
    }
    qtail = ev;
    pthread_mutex_unlock(&qlock);
    wake_loop();
    return 0;
}

void
ts_asgi_take(ts_asgi_slot *s, ts_asgi_take_result *r)
{
    char *tmp;
    size_t tcap;

    pthread_mutex_lock(&s->mu);
    r->head_ready = s->head_ready;
    if (s->head_ready) {
        s->head_ready = 0;
        r->status = s->status;
        r->head = s->head;
        r->status_len = s->status_len;
        r->header_len = s->header_len;
        r->content_length = s->content_length;
        r->close = s->close;
    }
    /* swap out and spare: the loop appends to a fresh buffer while Go
     * writes the taken one without the lock */
    r->out = s->out;
    r->out_len = s->out_len;
    tmp = s->spare;
    tcap = s->spare_cap;
    s->spare = s->out;
    s->spare_cap = s->out_cap;
    s->out = tmp;
    s->out_cap = tcap;
    s->out_len = 0;
    r->finished = s->finished && !s->finished_taken;
    if (r->finished) {
        s->finished_taken = 1;
    }
    r->app_done = s->app_done;
    r->want_body = s->want_body;
    s->want_body = 0;
    r->error = s->error;
    s->error = NULL;
    r->pathsend = s->pathsend;
    s->pathsend = NULL;
    r->ws_resume = s->ws_resume;
    s->ws_resume = 0;
    pthread_mutex_unlock(&s->mu);
}

void
ts_asgi_written(ts_asgi_slot *s, uint32_t gen)
{
    int waiting;

    pthread_mutex_lock(&s->mu);
    waiting = s->drain_wait && s->out_len <= write_buffer;
    if (waiting) {
        s->drain_wait = 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (waiting) {
        ts_asgi_push(TS_EV_DRAINED, s, gen, NULL, 0, 0);
    }
}

/* ---- the ready list (loop -> Go) --------------------------------------- */

static pthread_mutex_t rlock = PTHREAD_MUTEX_INITIALIZER;
static ts_asgi_slot *rhead, *rtail;      /* guarded by rlock */
static int ready_fd = -1;                /* Go's dispatcher reads it */
static _Atomic int go_need_wake = 1;

/* ts_asgi_ready_open creates the ready list's eventfd, once; Go's
 * dispatcher goroutine reads it. Returns the fd, or -1 with errno. */
int
ts_asgi_ready_open(void)
{
    if (ready_fd < 0) {
        ready_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    }
    return ready_fd;
}

/* signal_go wakes the handler goroutine of s: it lists s once and writes
 * the eventfd only if the dispatcher armed need_wake. Any thread. */
static void
signal_go(ts_asgi_slot *s)
{
    uint64_t one = 1;

    if (__atomic_exchange_n(&s->ready, 1, __ATOMIC_ACQ_REL)) {
        return; /* listed and not yet taken: that wake-up covers this */
    }
    pthread_mutex_lock(&rlock);
    s->ready_next = NULL;
    if (rtail) {
        rtail->ready_next = s;
    } else {
        rhead = s;
    }
    rtail = s;
    pthread_mutex_unlock(&rlock);
    if (atomic_exchange(&go_need_wake, 0) == 1) {
        if (write(ready_fd, &one, sizeof(one)) < 0) {
            /* EAGAIN: the counter is full, the dispatcher is awake anyway */
        }
    }
}

/* ts_asgi_ready_take moves up to max listed slots' indexes to index and
 * unlists them (a later signal_go lists a slot again); it returns how many.
 * *armed is set when it found the list empty and armed need_wake (or a
 * producer took the flag back and wrote the eventfd): the dispatcher may
 * then block on the eventfd; otherwise it calls again. Go's dispatcher
 * goroutine only. */
int
ts_asgi_ready_take(int *index, int max, int *armed)
{
    int n = 0, empty;

    *armed = 0;
    for (;;) {
        pthread_mutex_lock(&rlock);
        while (rhead && n < max) {
            ts_asgi_slot *s = rhead;
            rhead = s->ready_next;
            if (rhead == NULL) {
                rtail = NULL;
            }
            __atomic_store_n(&s->ready, 0, __ATOMIC_RELEASE);
            index[n++] = s->index;
        }
        empty = rhead == NULL;
        pthread_mutex_unlock(&rlock);
        if (!empty) {
            return n; /* n == max: more to take */
        }
        atomic_store(&go_need_wake, 1);
        pthread_mutex_lock(&rlock);
        empty = rhead == NULL;
        pthread_mutex_unlock(&rlock);
        if (empty || atomic_exchange(&go_need_wake, 0) == 0) {
            *armed = 1;
            return n;
        }
        /* listed meanwhile, and the flag taken back before any producer
         * saw it: go on taking */
        if (n == max) {
            return n;
        }
    }
}

/* ---- Channel: the loop's handle on a request ---------------------------- */

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

void
ts_asgi_signal(ts_asgi_slot *s)
{
    signal_go(s);
}

size_t
ts_asgi_write_buffer(void)
{
    return write_buffer;
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

/* start_head validates http.response.start's status and headers and puts
 * the head in the slot (DESIGN.md, the bytes rule); 0, or -1 with an
 * exception. With upgrade (websocket.accept) the status is 101 and the
 * headers go with the 101 response. */
static int
start_head(Channel *self, PyObject *status_obj, PyObject *headers, int upgrade)
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
        signal_go(s);
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
        || start_head(self, status_obj, headers, upgrade) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* body_append appends body bytes to the slot's output and wakes Go; it
 * returns 1 when send() must await DRAINED (more than write_buffer bytes
 * pending), 0 when not, -1 with an exception. An empty body with
 * more_body still wakes Go while the head waits: it sends the head on
 * its own (an event stream's headers before its first event). */
static int
body_append(Channel *self, PyObject *data, int more)
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
    wait = more && s->out_len > write_buffer;
    if (wait) {
        s->drain_wait = 1;
    }
    head_waits = s->head_ready;
    pthread_mutex_unlock(&s->mu);
    if (n > 0 || !more || head_waits) {
        signal_go(s);
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
    wait = body_append(self, data, more);
    return wait < 0 ? NULL : PyBool_FromLong(wait);
}

/* Channel.pathsend(path): http.response.pathsend, the file sent by Go. */
static PyObject *
channel_pathsend(Channel *self, PyObject *arg)
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
    signal_go(s);
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
    signal_go(s);
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
        signal_go(s);
    }
    ts_asgi_release(s);
    Py_RETURN_NONE;
}

/* ---- send(): the Channel as the app's HTTP send callable ---------------
 *
 * ASGI HTTP "Response Start", "Response Body" and pathsend. The app gets
 * the Channel itself as send: send(message) does the work at once (it
 * never blocks) and returns a finished awaitable, one shared object, so
 * a send costs no coroutine, frame or future. Only a body send that finds
 * more than write_buffer bytes pending returns a real wait (the cycle's
 * _drain_wait() coroutine). The finished awaitable has the coroutine
 * methods (send, throw, close), so asyncio.create_task(send(m)) and
 * asyncio.iscoroutine() accept it as they accept a coroutine. */

static PyObject *sent;                   /* the finished awaitable */
static PyObject *client_disconnected;    /* _asgi.ClientDisconnected */
static PyObject *s_body, *s_more_body, *s_status, *s_k_start, *s_k_body, *s_k_pathsend,
    *s_waiter, *s_drain_wait, *s_final, *s_get, *empty_bytes, *empty_tuple;

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

static PyObject *
channel_send(Channel *self, PyObject *message)
{
    PyObject *kind, *v, *v2;
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
        if (more < 0 || (v = message_get(message, s_body, empty_bytes)) == NULL) {
            return NULL;
        }
        wait = body_append(self, v, more);  /* raises on a bad message */
        Py_DECREF(v);
        if (wait < 0) {
            return NULL;
        }
        self->bodied = 1;
        if (wait) {
            return cycle_call(self, s_drain_wait);
        }
        if (!more) {
            self->complete = 1;
            /* a receive() waiting for the end now gets http.disconnect */
            if (self->slot->cycle != NULL) {
                if ((v = PyObject_GetAttr(self->slot->cycle, s_waiter)) == NULL) {
                    return NULL;
                }
                rc = v != Py_None;
                Py_DECREF(v);
                if (rc) {
                    if ((v = cycle_call(self, s_final)) == NULL) {
                        return NULL;
                    }
                    Py_DECREF(v);
                }
            }
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
        rc = start_head(self, v, v2, 0);
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
        v2 = channel_pathsend(self, v);
        Py_DECREF(v);
        if (v2 == NULL) {
            return NULL;
        }
        Py_DECREF(v2);
        return Py_NewRef(sent);
    }
    PyErr_Format(PyExc_ValueError, "ASGI: unexpected message type %R on an HTTP connection", kind);
    Py_DECREF(kind);
    return NULL;
}

/* tp_call: send(message), the one argument by position or keyword, as
 * for an "async def send(message)". */
static PyObject *
channel_call(Channel *self, PyObject *args, PyObject *kwargs)
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

static PyGetSetDef channel_getset[] = {
    {"started", (getter)flag_get, NULL, "http.response.start was sent", (void *)offsetof(Channel, started)},
    {"complete", (getter)flag_get, NULL, "the final body (or pathsend) was sent", (void *)offsetof(Channel, complete)},
    {"disconnected", (getter)flag_get, (setter)flag_set, "the client has left: send() raises",
     (void *)offsetof(Channel, disconnected)},
    {NULL, NULL, NULL, NULL, NULL},
};

/* _turnstile_asgi.http_setup(ClientDisconnected): the OSError subclass a
 * send() after the client left raises (ASGI HTTP 2.4). */
static PyObject *
mod_http_setup(PyObject *mod, PyObject *exc)
{
    if (!PyExceptionClass_Check(exc)) {
        PyErr_SetString(PyExc_TypeError, "http_setup wants an exception class");
        return NULL;
    }
    Py_XSETREF(client_disconnected, Py_NewRef(exc));
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
    {"pathsend", (PyCFunction)channel_pathsend, METH_O, NULL},
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
    {Py_tp_getset, channel_getset},
    {Py_tp_call, channel_call},
    {Py_tp_doc, "turnstile's handle on one ASGI request"},
    {0, NULL},
};

static PyType_Spec channel_spec = {
    "turnstile.Channel", sizeof(Channel), 0, Py_TPFLAGS_DEFAULT, channel_slots,
};

/* ---- the scope ------------------------------------------------------- */

static PyObject *
method_str(const char *p, size_t n)
{
    int i;
    for (i = 0; method_names[i] != NULL; i++) {
        if (strlen(method_names[i]) == n && memcmp(method_names[i], p, n) == 0) {
            return Py_NewRef(methods[i]);
        }
    }
    return PyUnicode_DecodeLatin1(p, n, NULL);
}

static PyObject *
port_obj(const char *p, size_t n)
{
    long v = 0;
    size_t i;
    if (n == 0) {
        Py_RETURN_NONE;
    }
    for (i = 0; i < n; i++) {
        v = v * 10 + (p[i] - '0');
    }
    return PyLong_FromLong(v);
}

/* untracked takes a new tuple of strings, bytes and ints (or NULL) out of
 * the cycle collector, as the collector itself would at its first pass
 * (such a tuple can be in no cycle): a request's scope holds several, and
 * while many requests are in flight each collection would walk them. */
static PyObject *
untracked(PyObject *t)
{
    if (t != NULL) {
        PyObject_GC_UnTrack(t);
    }
    return t;
}

/* bytes_pair returns the header tuple (name, value), untracked. */
static PyObject *
bytes_pair(const char *k, size_t klen, const char *v, size_t vlen)
{
    PyObject *t = PyTuple_New(2), *b;

    if (t == NULL) {
        return NULL;
    }
    if ((b = PyBytes_FromStringAndSize(k, (Py_ssize_t)klen)) == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, b);
    if ((b = PyBytes_FromStringAndSize(v, (Py_ssize_t)vlen)) == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 1, b);
    return untracked(t);
}

/* build_scope returns a new scope dict for s's request block: the HTTP
 * connection scope, or with websocket the WebSocket one (ASGI WebSocket,
 * "Connection Scope": no method; subprotocols from TS_SC_SUBPROTOCOL
 * entries; the denial response extension). */
static PyObject *
build_scope(ts_asgi_slot *s, int websocket)
{
    PyObject *scope = PyDict_New(), *headers = PyList_New(0), *v;
    PyObject *chost = NULL, *cport = NULL, *shost = NULL, *sport = NULL;
    PyObject *subprotocols = NULL;
    const char *p = s->req;
    int i, rc = 0;

    s->head_request = 0;  /* set below from the method; a slot serves many requests */
    if (scope == NULL || headers == NULL) {
        goto error;
    }
#define SET(k, val) do { v = (val); if (v == NULL || PyDict_SetItem(scope, (k), v) < 0) { Py_XDECREF(v); goto error; } Py_DECREF(v); } while (0)
    if (websocket) {
        subprotocols = PyList_New(0);
        if (subprotocols == NULL) {
            goto error;
        }
        SET(s_type, Py_NewRef(s_websocket));
        SET(s_asgi, PyDict_Copy(ws_asgi_template));
        SET(s_scheme, Py_NewRef(s_ws_scheme));
    }
    else {
        SET(s_type, Py_NewRef(s_http));
        SET(s_asgi, PyDict_Copy(asgi_template));
        SET(s_scheme, Py_NewRef(s_http_scheme));
    }
    for (i = 0; i < s->nentries; i++) {
        uint16_t id, klen;
        uint32_t vlen;
        const char *key, *val;

        memcpy(&id, p, 2);
        memcpy(&klen, p + 2, 2);
        memcpy(&vlen, p + 4, 4);
        key = p + TS_ENTRY_HDR;
        val = key + klen;
        p = val + vlen;
        switch (id) {
        case 0: {
            PyObject *pair = bytes_pair(key, klen, val, vlen);
            if (pair == NULL) {
                goto error;
            }
            rc = PyList_Append(headers, pair);
            Py_DECREF(pair);
            if (rc < 0) {
                goto error;
            }
            break;
        }
        case TS_SC_METHOD:
            if (!websocket) {  /* the websocket scope has no method */
                SET(s_method, method_str(val, vlen));
                s->head_request = vlen == 4 && memcmp(val, "HEAD", 4) == 0;
            }
            break;
        case TS_SC_PATH:
            SET(s_path, PyUnicode_DecodeUTF8(val, vlen, "replace"));
            break;
        case TS_SC_RAW_PATH:
            SET(s_raw_path, PyBytes_FromStringAndSize(val, vlen));
            break;
        case TS_SC_QUERY:
            SET(s_query_string, PyBytes_FromStringAndSize(val, vlen));
            break;
        case TS_SC_ROOT_PATH:
            SET(s_root_path, PyUnicode_DecodeUTF8(val, vlen, "replace"));
            break;
        case TS_SC_HTTP_VERSION:
            SET(s_http_version, Py_NewRef(vlen == 1 ? s_v2 /* HTTP/2 */
                                          : vlen == 3 && val[2] == '0' ? s_v10 : s_v11));
            break;
        case TS_SC_CLIENT_HOST:
            chost = PyUnicode_DecodeLatin1(val, vlen, NULL);
            break;
        case TS_SC_CLIENT_PORT:
            cport = port_obj(val, vlen);
            break;
        case TS_SC_SERVER_HOST:
            shost = PyUnicode_DecodeLatin1(val, vlen, NULL);
            break;
        case TS_SC_SERVER_PORT:
            sport = port_obj(val, vlen);
            break;
        case TS_SC_SCHEME:  /* sent only for https (TLS or a trusted proxy) */
            if (vlen == 5 && memcmp(val, "https", 5) == 0) {
                SET(s_scheme, Py_NewRef(websocket ? s_wss_scheme : s_https_scheme));
            }
            break;
        case TS_SC_SUBPROTOCOL:
            if (subprotocols != NULL) {
                PyObject *proto = PyUnicode_DecodeLatin1(val, vlen, NULL);
                if (proto == NULL) {
                    goto error;
                }
                rc = PyList_Append(subprotocols, proto);
                Py_DECREF(proto);
                if (rc < 0) {
                    goto error;
                }
            }
            break;
        default:
            break;
        }
    }
    SET(s_headers, Py_NewRef(headers));
    if (subprotocols != NULL) {
        SET(s_subprotocols, Py_NewRef(subprotocols));
    }
    if (chost != NULL && cport != NULL && cport != Py_None) {
        SET(s_client, untracked(PyTuple_Pack(2, chost, cport)));
    }
    else {
        SET(s_client, Py_NewRef(Py_None));  /* a Unix socket peer has no address */
    }
    if (shost != NULL && sport != NULL) {
        SET(s_server, untracked(PyTuple_Pack(2, shost, sport)));
    }
    if (state_dict != NULL) {
        SET(s_state, PyDict_Copy(state_dict));
    }
    SET(s_extensions, PyDict_Copy(websocket ? ws_extensions_template : extensions_template));
#undef SET
    Py_XDECREF(chost);
    Py_XDECREF(cport);
    Py_XDECREF(shost);
    Py_XDECREF(sport);
    Py_XDECREF(subprotocols);
    Py_DECREF(headers);
    return scope;

error:
    Py_XDECREF(subprotocols);
    Py_XDECREF(chost);
    Py_XDECREF(cport);
    Py_XDECREF(shost);
    Py_XDECREF(sport);
    Py_XDECREF(headers);
    Py_XDECREF(scope);
    return NULL;
}

/* ---- drain (loop thread) ---------------------------------------------- */

/* event_tuple turns one event into what the Python side dispatches on:
 *   (1, channel, scope, body, more)   new request
 *   (2, cycle, body, more)            body chunk
 *   (3, cycle)                        disconnect
 *   (4, cycle)                        drained
 *   (5, seconds)                      stop (WebSocket apps get seconds)
 *   (6, channel, scope)               new WebSocket
 *   (7, cycle, message)               websocket.receive message
 *   (8, cycle, message)               websocket.disconnect message
 * Returns a new reference, Py_None for a stale event, NULL on error. */
static PyObject *
event_tuple(ts_event *ev)
{
    ts_asgi_slot *s = ev->slot;
    PyObject *cycle, *msg;

    if (ev->type == TS_EV_STOP) {
        return Py_BuildValue("(id)", TS_EV_STOP, ev->more / 1000.0);
    }
    if (ev->type == TS_EV_PROBE) {
        /* The loop lag: how long the probe waited for the loop to drain. */
        int64_t pushed = 0, lag;
        if (ev->len == sizeof(pushed)) {
            memcpy(&pushed, ev->data, sizeof(pushed));
        }
        lag = ts_now_ns() - pushed;
        /* Keep the largest lag since the watchdog last read it: after a
         * stall the loop drains a backlog of probes, and the oldest one,
         * which waited the whole stall, is the one that matters. */
        int64_t prev = atomic_load_explicit(&ts_loop_lag_ns, memory_order_relaxed);
        while (lag > prev && !atomic_compare_exchange_weak_explicit(
                   &ts_loop_lag_ns, &prev, lag, memory_order_relaxed, memory_order_relaxed)) {
        }
        atomic_fetch_add_explicit(&ts_loop_probe_seq, 1, memory_order_release);
        Py_RETURN_NONE;
    }
    if (ev->type == TS_EV_WS_NEW) {
        Channel *ch = PyObject_New(Channel, ChannelType);
        PyObject *scope;
        if (ch == NULL) {
            return NULL;
        }
        ch->slot = s;
        ch->gen = ev->gen;
        ch->released = 0;
        ch->started = ch->complete = ch->disconnected = ch->bodied = 0;
        ch->body_left = -1;
        scope = build_scope(s, 1);
        if (scope == NULL) {
            Py_DECREF(ch);
            return NULL;
        }
        return Py_BuildValue("(iNN)", TS_EV_WS_NEW, (PyObject *)ch, scope);
    }
    if (ev->type == TS_EV_NEW) {
        Channel *ch = PyObject_New(Channel, ChannelType);
        PyObject *scope, *body, *t;
        if (ch == NULL) {
            return NULL;
        }
        ch->slot = s;
        ch->gen = ev->gen;
        ch->released = 0;
        ch->started = ch->complete = ch->disconnected = ch->bodied = 0;
        ch->body_left = -1;
        scope = build_scope(s, 0);
        body = PyBytes_FromStringAndSize(s->req + s->body_off, s->body_len);
        if (scope == NULL || body == NULL) {
            Py_XDECREF(scope);
            Py_XDECREF(body);
            Py_DECREF(ch);
            return NULL;
        }
        t = PyTuple_New(5);
        if (t == NULL) {
            Py_DECREF(scope);
            Py_DECREF(body);
            Py_DECREF(ch);
            return NULL;
        }
        PyTuple_SET_ITEM(t, 0, PyLong_FromLong(TS_EV_NEW));  /* a small int: cached */
        PyTuple_SET_ITEM(t, 1, (PyObject *)ch);
        PyTuple_SET_ITEM(t, 2, scope);
        PyTuple_SET_ITEM(t, 3, body);
        PyTuple_SET_ITEM(t, 4, Py_NewRef(s->body_done ? Py_False : Py_True));
        return t;
    }
    /* gen is fixed while the loop holds the slot, so no lock is needed */
    if (s->gen != ev->gen || s->cycle == NULL) {
        Py_RETURN_NONE;  /* the request is over: a late event */
    }
    cycle = s->cycle;
    switch (ev->type) {
    case TS_EV_BODY:
        return Py_BuildValue("(iOy#O)", TS_EV_BODY, cycle, ev->data, (Py_ssize_t)ev->len,
                             ev->more ? Py_True : Py_False);
    case TS_EV_DISCONNECT:
    case TS_EV_DRAINED:
        return Py_BuildValue("(iO)", ev->type, cycle);
    case TS_EV_WS_MSG:
    case TS_EV_WS_CLOSE:
        msg = ev->type == TS_EV_WS_MSG ? ts_ws_message(ev->data, ev->len, ev->more)
                                       : ts_ws_disconnect(ev->more, ev->data, ev->len);
        return msg ? Py_BuildValue("(iON)", ev->type, cycle, msg) : NULL;
    }
    Py_RETURN_NONE;
}

/* _turnstile_asgi.drain() -> list of event tuples. */
static PyObject *
mod_drain(PyObject *mod, PyObject *unused)
{
    uint64_t count;
    PyObject *list = PyList_New(0);
    ts_event *batch, *ev, *next;

    if (list == NULL) {
        return NULL;
    }
    atomic_store_explicit(&ts_loop_heartbeat_ns, ts_now_ns(), memory_order_relaxed);
    if (read(loop_fd, &count, sizeof(count)) < 0) {
        /* EAGAIN: nothing was signalled; the queue may still hold items */
    }
    for (;;) {
        pthread_mutex_lock(&qlock);
        batch = qhead;
        qhead = qtail = NULL;
        pthread_mutex_unlock(&qlock);
        if (batch == NULL) {
            atomic_store(&need_wake, 1);
            pthread_mutex_lock(&qlock);
            batch = qhead;
            qhead = qtail = NULL;
            pthread_mutex_unlock(&qlock);
            if (batch == NULL) {
                break;
            }
            if (atomic_exchange(&need_wake, 0) == 0) {
                /* a producer took the flag and wrote the eventfd: the next
                 * drain will just find the queue empty */
            }
        }
        for (ev = batch; ev != NULL; ev = next) {
            PyObject *t;
            next = ev->next;
            t = event_tuple(ev);
            free(ev);
            if (t == NULL) {
                /* keep going: one bad request must not stall the rest */
                char *text = ts_format_exception();
                if (text != NULL) {
                    ts_log(40, text, (Py_ssize_t)strlen(text));
                    free(text);
                }
                continue;
            }
            if (t != Py_None && PyList_Append(list, t) < 0) {
                Py_DECREF(t);
                PyErr_Clear();
                continue;
            }
            Py_DECREF(t);
        }
    }
    return list;
}

/* _turnstile_asgi.set_state(dict): the lifespan state copied into scopes. */
static PyObject *
mod_set_state(PyObject *mod, PyObject *d)
{
    if (d != Py_None && !PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "state must be a dict");
        return NULL;
    }
    Py_XSETREF(state_dict, d == Py_None ? NULL : Py_NewRef(d));
    Py_RETURN_NONE;
}

/* _turnstile_asgi.started(ok, message): lifespan startup is over. */
static PyObject *
mod_started(PyObject *mod, PyObject *args)
{
    int ok;
    PyObject *obj, *hold;
    const char *msg;
    Py_ssize_t n;
    PyThreadState *ts;

    if (!PyArg_ParseTuple(args, "pU:started", &ok, &obj)) {
        return NULL;
    }
    msg = ts_text_utf8(obj, &n, &hold);  /* the app's message may hold a lone surrogate */
    if (msg == NULL) {
        return NULL;
    }
    ts = PyEval_SaveThread();
    go_ts_asgi_started(ok, (char *)msg, (int)n);
    PyEval_RestoreThread(ts);
    Py_XDECREF(hold);
    Py_RETURN_NONE;
}

static PyObject *
mod_fd(PyObject *mod, PyObject *unused)
{
    return PyLong_FromLong(loop_fd);
}

/* _turnstile_asgi.set_thread_name(str): the calling thread's OS name, as
 * top -H and ps -L show it (15 bytes at most; longer is cut). Threads the
 * loop starts inherit "ts-loop-0" otherwise. */
static PyObject *
mod_set_thread_name(PyObject *mod, PyObject *arg)
{
    char name[16];
    const char *s = PyUnicode_AsUTF8(arg);

    if (s == NULL) {
        return NULL;
    }
    snprintf(name, sizeof name, "%s", s);
    (void)pthread_setname_np(pthread_self(), name);  /* cosmetic */
    Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
    {"drain", mod_drain, METH_NOARGS, "take every queued event"},
    {"set_thread_name", mod_set_thread_name, METH_O, "name the calling thread for the OS"},
    {"set_state", mod_set_state, METH_O, "set the lifespan state"},
    {"started", mod_started, METH_VARARGS, "report lifespan startup"},
    {"fd", mod_fd, METH_NOARGS, "the loop's eventfd"},
    {"http_setup", mod_http_setup, METH_O, "set the exception of a send() after a disconnect"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT, "_turnstile_asgi", "turnstile's ASGI bridge", -1, mod_methods,
};

/* ---- setup and the loop thread --------------------------------------- */

void
ts_asgi_set_source(const char *src)
{
    loop_source = src;
}

int
ts_asgi_setup(void)
{
    PyObject *modules, *v;
    int i;

    loop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (loop_fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    ChannelType = (PyTypeObject *)PyType_FromSpec(&channel_spec);
    asgi_module = PyModule_Create(&mod_def);
    if (ChannelType == NULL || asgi_module == NULL) {
        return -1;
    }
    modules = PyImport_GetModuleDict();  /* borrowed */
    if (PyDict_SetItemString(modules, "_turnstile_asgi", asgi_module) < 0) {
        return -1;
    }
#define INTERN(var, text) do { var = PyUnicode_InternFromString(text); if (var == NULL) return -1; } while (0)
    INTERN(s_type, "type");
    INTERN(s_http, "http");
    INTERN(s_asgi, "asgi");
    INTERN(s_http_version, "http_version");
    INTERN(s_method, "method");
    INTERN(s_scheme, "scheme");
    INTERN(s_path, "path");
    INTERN(s_raw_path, "raw_path");
    INTERN(s_query_string, "query_string");
    INTERN(s_root_path, "root_path");
    INTERN(s_headers, "headers");
    INTERN(s_client, "client");
    INTERN(s_server, "server");
    INTERN(s_state, "state");
    INTERN(s_extensions, "extensions");
    INTERN(s_http_scheme, "http");
    INTERN(s_v11, "1.1");
    INTERN(s_v10, "1.0");
    INTERN(s_v2, "2");
    INTERN(s_websocket, "websocket");
    INTERN(s_ws_scheme, "ws");
    INTERN(s_https_scheme, "https");
    INTERN(s_wss_scheme, "wss");
    INTERN(s_subprotocols, "subprotocols");
    INTERN(s_body, "body");
    INTERN(s_more_body, "more_body");
    INTERN(s_status, "status");
    INTERN(s_k_start, "http.response.start");
    INTERN(s_k_body, "http.response.body");
    INTERN(s_k_pathsend, "http.response.pathsend");
    INTERN(s_waiter, "waiter");
    INTERN(s_drain_wait, "_drain_wait");
    INTERN(s_final, "_final");
    INTERN(s_get, "get");
#undef INTERN
    empty_bytes = PyBytes_FromStringAndSize(NULL, 0);
    empty_tuple = PyTuple_New(0);
    client_disconnected = Py_NewRef(PyExc_ConnectionError);  /* until http_setup */
    {
        PyTypeObject *sent_type = (PyTypeObject *)PyType_FromSpec(&sent_spec);
        if (sent_type == NULL || empty_bytes == NULL || empty_tuple == NULL) {
            return -1;
        }
        sent = PyType_GenericAlloc(sent_type, 0);
        Py_DECREF(sent_type);
        if (sent == NULL) {
            return -1;
        }
    }
    for (i = 0; method_names[i] != NULL; i++) {
        methods[i] = PyUnicode_InternFromString(method_names[i]);
        if (methods[i] == NULL) {
            return -1;
        }
    }
    asgi_template = Py_BuildValue("{s:s,s:s}", "version", "3.0", "spec_version", "2.4");
    /* 2.5: websocket.disconnect carries reason */
    ws_asgi_template = Py_BuildValue("{s:s,s:s}", "version", "3.0", "spec_version", "2.5");
    ws_extensions_template = Py_BuildValue("{s:{}}", "websocket.http.response");
    extensions_template = PyDict_New();
    if (asgi_template == NULL || extensions_template == NULL || ws_asgi_template == NULL
        || ws_extensions_template == NULL || ts_ws_setup() < 0) {
        return -1;
    }
    v = PyDict_New();
    if (v == NULL || PyDict_SetItemString(extensions_template, "http.response.pathsend", v) < 0) {
        Py_XDECREF(v);
        return -1;
    }
    Py_DECREF(v);
    return 0;
}

static ts_thread loop_thread;

/* ts_loop_read gives the watchdog the loop's heartbeat, the largest probe
 * lag since its previous call (and resets it), the probe count and the
 * thread state. The watchdog goroutine only (the lag is consumed); no GIL. */
void
ts_loop_read(int64_t *beat, int64_t *lag, uint64_t *seq, PyThreadState **tstate)
{
    *seq = atomic_load_explicit(&ts_loop_probe_seq, memory_order_acquire);
    *beat = atomic_load_explicit(&ts_loop_heartbeat_ns, memory_order_relaxed);
    *lag = atomic_exchange_explicit(&ts_loop_lag_ns, 0, memory_order_relaxed);
    *tstate = loop_thread.tstate;
}

static void *
loop_main(void *arg)
{
    PyObject *code, *mod, *res;

    (void)pthread_setname_np(pthread_self(), "ts-loop-0");  /* cosmetic */
    if (loop_cfg.batch) {
        /* SCHED_BATCH, as the pool threads (internal/python/pool.c): the
         * same CPU share, no wake-up preemption. A request Go pushes then
         * does not preempt the Go thread that pushed it: the loop runs
         * when Go blocks or its slice ends and drains what was queued
         * meanwhile. Go's threads keep SCHED_OTHER and still preempt the
         * loop on a wake-up. Measured with sysmon under SCHED_BATCH too
         * (docs/design.md, "sysmon and the loop thread run under
         * SCHED_BATCH"). */
        struct sched_param sp = {0};
        (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    }
    loop_thread.kind = TS_KIND_LOOP;
    loop_thread.index = 0;
    loop_thread.tstate = PyThreadState_New(PyInterpreterState_Main());
    ts_thread_attach(&loop_thread);
    atomic_store_explicit(&ts_loop_heartbeat_ns, ts_now_ns(), memory_order_relaxed);

    code = Py_CompileString(loop_source, "turnstile/_asgi.py", Py_file_input);
    mod = code ? PyImport_ExecCodeModule("_turnstile_asgi_py", code) : NULL;
    Py_XDECREF(code);
    res = mod ? PyObject_CallMethod(mod, "run", "Ossin", ts_app, loop_cfg.lifespan, loop_cfg.loop,
                                    loop_cfg.executor_threads, (Py_ssize_t)write_buffer)
              : NULL;
    if (res == NULL) {
        char *text = ts_format_exception();
        const char *msg = text ? text : "the event loop failed";
        Py_XDECREF(mod);
        ts_thread_detach(&loop_thread, 0);
        go_ts_asgi_stopped((char *)msg, (int)strlen(msg));
        free(text);
    }
    else {
        Py_DECREF(res);
        Py_XDECREF(mod);
        ts_thread_detach(&loop_thread, 0);
        go_ts_asgi_stopped(NULL, 0);
    }
    return NULL;
}

int
ts_loop_start(const ts_loop_config *cfg)
{
    pthread_t tid;
    pthread_attr_t attr;
    int rc;

    loop_cfg = *cfg;
    if (cfg->write_buffer > 0) {
        write_buffer = cfg->write_buffer;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16 << 20);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&tid, &attr, loop_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}
