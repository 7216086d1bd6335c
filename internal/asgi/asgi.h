/* asgi.h: the ASGI bridge's declarations, shared by its C files and the
 * Go handler (handler goroutines):
 *
 *   queue.c      request slots, the loop queue's Go side, the ready list
 *   channel.c    Channel: the loop's handle on a request (head, body, end)
 *   send.c       send(): the Channel as the app's HTTP send callable
 *   scope.c      the HTTP and WebSocket connection scopes
 *   loop.c       the loop value (ts_loop), its thread and its drain
 *   websocket.c  the loop's side of a WebSocket
 *
 * What is per loop and what is process-wide: a ts_loop holds its queue,
 * its ready list, its thread, its watchdog heartbeat and its lifespan
 * state; Go's asgi.Loop wraps one. The request slots (their free list
 * here, their Go halves in handler.go's table) are a registry shared by
 * every loop: a slot serves one request at a time, on the loop
 * ts_asgi_begin names (s->loop). The _turnstile_asgi module, the Channel
 * type, the interned strings and the _asgi.py module are created once
 * per process (ts_asgi_setup, loop.c) and shared by the loops.
 */
#ifndef TS_ASGI_H
#define TS_ASGI_H

#include "../python/tspy.h"
#include <pthread.h>

/* Events from Go to the loop (the loop queue). */
enum {
    TS_EV_NEW = 1,        /* a new HTTP request: scope from the slot's block */
    TS_EV_BODY = 2,       /* request body bytes (data, more) */
    TS_EV_DISCONNECT = 3, /* the client went away */
    TS_EV_DRAINED = 4,    /* Go wrote the pending output: a waiting send() may go on */
    TS_EV_STOP = 5,       /* shut the loop down (more: ms WebSocket apps get to
                             return; then lifespan shutdown) */
    TS_EV_WS_NEW = 6,     /* a WebSocket handshake: scope from the slot's block */
    TS_EV_WS_MSG = 7,     /* a WebSocket message (data; more: 1 text, 2 binary) */
    TS_EV_WS_CLOSE = 8,   /* the WebSocket ended (data: reason; more: code) */
    TS_EV_PROBE = 9,      /* the watchdog's probe (data: push time, ns); never reaches Python */
    TS_EV_CALL_DONE = 10  /* a pool thread ran a sync call (data: the ts_call pointer; call.c) */
};

/* Records in a WebSocket slot's output buffer once the handshake is
 * accepted (websocket.c): kind (1 byte), length (4 bytes, native order),
 * then length bytes. A close record holds the code (2 bytes, network
 * order) and the UTF-8 reason, or nothing for a close without a code. */
enum {
    TS_WS_TEXT = 1,
    TS_WS_BINARY = 2,
    TS_WS_CLOSE = 8
};
#define TS_WS_RECORD_HDR 5

/* Scope entry ids in the request block (tspy.h, ts_entry_next); id 0 is
 * a header (name, value). */
enum {
    TS_SC_METHOD = 1, TS_SC_PATH, TS_SC_RAW_PATH, TS_SC_QUERY, TS_SC_ROOT_PATH,
    TS_SC_HTTP_VERSION, TS_SC_CLIENT_HOST, TS_SC_CLIENT_PORT, TS_SC_SERVER_HOST,
    TS_SC_SERVER_PORT, TS_SC_SCHEME,
    TS_SC_SUBPROTOCOL,    /* one per Sec-WebSocket-Protocol token (websocket scope) */
    /* The tls extension (ASGI TLS extension), on TLS connections only:
     * TLS_VERSION first (it creates the dict), then the others. */
    TS_SC_TLS_VERSION,    /* decimal, e.g. 772 (0x0304) */
    TS_SC_TLS_CIPHER,     /* decimal IANA cipher suite id */
    TS_SC_TLS_SERVER_CERT, /* PEM; absent: None */
    TS_SC_TLS_CLIENT_CERT, /* PEM, one per certificate, leaf first */
    TS_SC_TLS_CLIENT_NAME  /* RFC 4514 subject of the leaf; absent: None */
};

/* What Go learns from ts_asgi_take, copied under the slot lock. */
typedef struct ts_asgi_take_result {
    int head_ready;       /* a head is waiting (status, head bytes) */
    int status;
    char *head;           /* "NNN Reason" then header lines */
    size_t status_len, header_len;
    int64_t content_length;
    int close;            /* the app's head said "Connection: close" (RFC 9112 §9.6) */
    char *out;            /* body bytes taken (Go writes them, then releases) */
    size_t out_len;
    int finished;         /* the final body message has been taken */
    int app_done;         /* the app's task ended */
    int want_body;        /* the loop asks for the next body chunk */
    char *error;          /* app failure text (malloc'd; Go frees) */
    char *pathsend;       /* http.response.pathsend path (malloc'd; Go frees) */
    int ws_resume;        /* WebSocket: the app consumed enough, read on */
    char *hints;          /* http.response.early_hint: "Link: v\r\n" lines (malloc'd; Go frees) */
    size_t hints_len;
    int trailers_wanted;  /* with the head: http.response.start said "trailers": True */
    char *trailers;       /* with finished: the trailer section's lines (malloc'd; Go frees) */
    size_t trailers_len;
} ts_asgi_take_result;

struct ts_loop;

typedef struct ts_asgi_slot {
    int index;
    int ready;                /* on its loop's ready list (loop -> Go); __atomic */
    ts_wakenode ready_link;   /* owned by the ready list while ready is set */
    struct ts_loop *loop;     /* the loop serving the request; set by ts_asgi_begin */
    pthread_mutex_t mu;       /* guards everything below except req */
    uint32_t gen;             /* bumped by Go for each request */
    int refs;                 /* holders: Go (handler) and the loop (app task) */

    /* request block, written by Go before TS_EV_NEW, read by the loop */
    char *req;
    size_t req_cap, req_len;
    int nentries;
    size_t body_off, body_len;
    int body_done;
    char head_request;        /* the request is HEAD: set by the loop's scope builder */

    /* response */
    int status;
    char *head;
    size_t head_cap, status_len, header_len;
    int64_t content_length;
    int close;                /* the app's head had "Connection: close" */
    int head_ready;
    char *out, *spare;
    size_t out_len, out_cap, spare_cap;
    int finished, finished_taken;
    int app_done;
    int want_body;
    int drain_wait;           /* the loop awaits TS_EV_DRAINED */
    char *error;
    char *pathsend;

    /* WebSocket inbound flow control (websocket.c): Go stops reading the
     * socket while ws_max_queue messages wait for the app's receive(). */
    uint64_t ws_pushed;       /* messages Go pushed */
    uint64_t ws_consumed;     /* messages receive() returned */
    int ws_max_queue;         /* set by Go before TS_EV_WS_NEW */
    int ws_read_wait;         /* Go's reader waits for the app */
    int ws_resume;            /* the loop tells Go's reader to go on */

    PyObject *cycle;          /* the loop's per-request object (loop thread only) */

    /* http.response.early_hint (send.c): Link lines for a 103 not yet
     * taken by Go; ts_asgi_take hands the buffer over */
    char *hints;
    size_t hints_len, hints_cap;

    /* http.response.trailers (send.c): the head announced trailers; the
     * trailer lines gathered until more_trailers is False */
    int trailers_wanted;
    char *trailers;
    size_t trailers_len, trailers_cap;
} ts_asgi_slot;

ts_asgi_slot *ts_asgi_slot_new(int index);
/* The ready list's id_of (queue.c): unlists the slot, returns its index. */
uintptr_t ts_asgi_ready_id(ts_wakenode *n);
int ts_asgi_reserve(ts_asgi_slot *s, size_t need);
/* Go: start a request on loop on a slot it holds (refs = 2). Returns the new gen. */
uint32_t ts_asgi_begin(struct ts_loop *loop, ts_asgi_slot *s);
/* Go: push an event to loop for slot s at generation gen. Returns 0 or -1
 * (stopping, or out of memory). */
int ts_asgi_push(struct ts_loop *loop, int type, ts_asgi_slot *s, uint32_t gen, const char *data, size_t len,
                 int more);
/* Go: describe the request block Go copied into s->req (req_len bytes:
 * nentries entries, then body_len prefetched body bytes at body_off;
 * body_done: they are the whole body; ws_max_queue: TS_EV_WS_NEW only)
 * and push type (TS_EV_NEW or TS_EV_WS_NEW): one cgo call. Returns as
 * ts_asgi_push. */
int ts_asgi_push_new(struct ts_loop *loop, int type, ts_asgi_slot *s, uint32_t gen, size_t req_len, int nentries,
                     size_t body_off, size_t body_len, int body_done, int ws_max_queue);
/* Go: take the pending output and flags under the lock. */
void ts_asgi_take(ts_asgi_slot *s, ts_asgi_take_result *r);
/* Go: the taken output is written; push DRAINED if the loop waits. */
void ts_asgi_written(ts_asgi_slot *s, uint32_t gen);
/* Go or loop: drop a holder. Returns the remaining count. */
int ts_asgi_release(ts_asgi_slot *s);
/* Go: push a WebSocket message (opcode 1 text, 2 binary). Returns 0, 1
 * when ws_max_queue messages are now unconsumed (Go stops reading until
 * a take reports ws_resume), or -1 when the loop is stopping. */
int ts_asgi_ws_push(ts_asgi_slot *s, uint32_t gen, const char *data, size_t len, int opcode);
/* Go: after the accept, swap the slot's request-sized buffers (scope block,
 * head, output) for small ones: an idle WebSocket holds its slot for its
 * whole life. They grow again on demand. */
void ts_asgi_ws_trim(ts_asgi_slot *s);

/* Shared by the loop thread's files (loop thread unless noted). */
typedef struct ts_channel {
    PyObject_HEAD
    ts_asgi_slot *slot;
    uint32_t gen;
    int released;
    /* HTTP send() state (the Channel is the app's send callable): set by
     * send itself, and disconnected by the cycle's _on_disconnect. */
    char started, complete, disconnected;
    char bodied;  /* an http.response.body was sent: no pathsend after it */
    char trailers;   /* http.response.start said "trailers": True */
    char body_done;  /* with trailers: the last body was sent, trailers are due */
    /* body bytes the response's Content-Length still allows; -1 when it is
     * not checked (no Content-Length, a HEAD request, a 204 or 304) */
    int64_t body_left;
} ts_channel;
int ts_channel_live(ts_channel *ch);
void ts_asgi_signal(ts_asgi_slot *s);          /* wake the slot's Go side; any thread */
size_t ts_asgi_write_buffer(ts_asgi_slot *s);  /* its loop's write_buffer */
extern PyTypeObject *ts_channel_type;          /* channel.c */
int ts_channel_setup(void);
ts_channel *ts_channel_new(ts_asgi_slot *s, uint32_t gen);
/* channel.c, for send.c: start_head, body_append and Channel.pathsend */
int ts_start_head(ts_channel *ch, PyObject *status, PyObject *headers, int upgrade);
int ts_body_append(ts_channel *ch, PyObject *data, int more);
PyObject *ts_channel_pathsend(ts_channel *ch, PyObject *path);
PyObject *ts_channel_call(ts_channel *ch, PyObject *args, PyObject *kwargs);  /* send.c */
extern PyGetSetDef ts_channel_getset[];       /* send.c */
int ts_send_setup(void);
PyObject *ts_mod_http_setup(PyObject *mod, PyObject *exc);
int ts_scope_setup(void);                      /* scope.c */
PyObject *ts_build_scope(struct ts_loop *loop, ts_asgi_slot *s, int websocket);
int ts_ws_setup(void);
PyObject *ts_ws_message(const char *data, size_t len, int opcode);
PyObject *ts_ws_disconnect(int code, const char *reason, size_t len);
PyObject *ts_ws_send(ts_channel *ch, PyObject *args);
PyObject *ts_ws_close(ts_channel *ch, PyObject *args);
PyObject *ts_ws_consumed(ts_channel *ch, PyObject *unused);

/* The loop: a value (Go's asgi.Loop holds one). */
typedef struct ts_loop_config {
    const char *source;       /* python/turnstile/_asgi.py */
    const char *lifespan;     /* auto|on|off */
    const char *loop;         /* auto|asyncio|uvloop */
    int executor_threads;
    size_t write_buffer;      /* bytes of pending output before send() waits */
    int batch;                /* run the loop thread under SCHED_BATCH */
} ts_loop_config;

typedef struct ts_loop {
    int index;                /* ts-loop-<index>; the watchdog's label */
    uintptr_t handle;         /* Go's cgo.Handle of its *asgi.Loop (exports.go) */
    ts_loop_config cfg;
    size_t write_buffer;      /* cfg's, or 256 KiB */
    /* Go -> loop: ts_event items (queue.c pushes, loop.c drains); closed
     * once TS_EV_STOP was pushed. A wake list (internal/python's
     * wakelist.h), consumed by the loop's add_reader callback. */
    ts_wakelist queue;
    /* loop -> Go: slots, through ready_link (queue.c); a wake list whose
     * id_of is the slot's index, consumed by a python.Dispatcher. */
    ts_wakelist ready;
    /* The watchdog's view (read by Go without the GIL): the last time the
     * loop turned (a drain), the longest a probe waited for it since the
     * last read, and the probes drained. Monotonic nanoseconds. */
    _Atomic int64_t heartbeat_ns;
    _Atomic int64_t lag_ns;
    _Atomic uint64_t probe_seq;
    ts_thread thread;         /* the loop thread's (tstate read by the watchdog) */
    PyObject *state;          /* lifespan state dict, or NULL; loop thread */
    /* Set by the loop thread once its run() returned: from then on a pool
     * thread's TS_EV_CALL_DONE is refused too (queue.c, ts_asgi_push). */
    _Atomic int gone;
} ts_loop;

/* An event on a loop's queue (queue.c pushes, loop.c drains). */
typedef struct ts_event {
    ts_wakenode node;         /* first: a node is its event */
    int type;
    ts_asgi_slot *slot;
    uint32_t gen;
    int more;
    size_t len;
    char data[];
} ts_event;

int ts_asgi_setup(void);
/* ts_loop_new returns a loop (index, cfg copied, strings kept) with its
 * two eventfds, or NULL with errno. Any thread; no GIL. */
ts_loop *ts_loop_new(int index, const ts_loop_config *cfg, uintptr_t handle);
void ts_loop_read(ts_loop *loop, int64_t *beat, int64_t *lag, uint64_t *seq, PyThreadState **tstate);
int ts_loop_start(ts_loop *loop);

/* call.c: sync calls on the ASGI pools (docs/design.md, "Sync work of
 * async apps"). ts_asgi_set_pools: Go, before the loop starts (NULL: off;
 * http_bound: how many HTTP requests may be bound at once). */
void ts_asgi_set_pools(void *http, void *sess, long http_bound);
PyObject *ts_call_done_tuple(const ts_event *ev);
PyObject *ts_mod_call_submit(PyObject *mod, PyObject *args);
PyObject *ts_mod_pool_bind(PyObject *mod, PyObject *arg);
PyObject *ts_mod_pool_release(PyObject *mod, PyObject *args);
PyObject *ts_mod_pool_threads(PyObject *mod, PyObject *arg);
/* loop.c: the ts_loop of a LoopBridge object, or NULL for anything else. */
ts_loop *ts_bridge_loop(PyObject *bridge);

#endif /* TS_ASGI_H */
