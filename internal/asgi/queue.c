/* queue.c: request slots, the loop queue's Go side, and the ready list.
 *
 * Notes about the implementation
 * ------------------------------
 * Go -> loop (DESIGN.md, ASGI): handler goroutines push events on their
 * loop's queue (ts_asgi_push); the loop watches the queue's eventfd with
 * loop.add_reader and drains the whole queue in one callback (loop.c,
 * drain). The hand-off is internal/python's wake list (wakelist.h).
 *
 * Loop -> Go: send() never blocks. For HTTP the Channel is the app's send
 * callable (send.c: no coroutine per message); it, or a Channel method a
 * WebSocket cycle calls, appends the head or body bytes to the slot's
 * output buffer under the slot's mutex and puts the slot on its loop's
 * ready list (signal_go); Go's dispatcher goroutine for that loop
 * (ready.go), reading the list's eventfd through the netpoller, takes the
 * whole list and wakes each slot's handler goroutine on a Go channel; that
 * goroutine takes the buffer (ts_asgi_take, swapping it with a spare) and
 * writes it to the socket. A slot is listed at most once, and the eventfd
 * is written only when the dispatcher has armed need_wake (wakelist.h), so a
 * burst of responses costs the loop thread one write(2), not one per
 * response. send() awaits only when more than write_buffer bytes are
 * pending (the bound rule): Go's ts_asgi_written then pushes DRAINED.
 *
 * Slots are reused, by any loop (asgi.h: a registry shared by the loops);
 * refs counts the holders (the Go handler and the app's task) and gen
 * tells a late event from a new request's.
 *
 * WebSockets use the same slot, queue and Channel (websocket.c and
 * websocket.go): TS_EV_WS_NEW carries the websocket scope, the handshake
 * answer goes through Channel.start (status 101 accepts, any other status
 * is a denial response) and after it messages travel as records.
 */
#include "asgi.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t flock = PTHREAD_MUTEX_INITIALIZER;
static ts_asgi_slot **free_slots;        /* guarded by flock */
static int nfree, free_cap;

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
ts_asgi_begin(ts_loop *loop, ts_asgi_slot *s)
{
    uint32_t gen;

    pthread_mutex_lock(&s->mu);
    gen = ++s->gen;
    s->loop = loop;
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
    free(s->hints);  /* hints the last request left untaken */
    s->hints = NULL;
    s->hints_len = s->hints_cap = 0;
    free(s->trailers);
    s->trailers = NULL;
    s->trailers_len = s->trailers_cap = 0;
    s->trailers_wanted = 0;
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

int
ts_asgi_push(ts_loop *loop, int type, ts_asgi_slot *s, uint32_t gen, const char *data, size_t len, int more)
{
    ts_event *ev = malloc(sizeof(ts_event) + len);

    if (ev == NULL) {
        return -1;
    }
    ev->type = type;
    ev->slot = s;
    ev->gen = gen;
    ev->more = more;
    ev->len = len;
    if (len > 0) {
        memcpy(ev->data, data, len);
    }
    /* TS_EV_STOP closes the queue: later pushes (but another stop) fail,
     * except a pool thread's TS_EV_CALL_DONE. After STOP the loop still
     * runs its WebSocket apps' endings (their disconnect handlers, up to
     * the graceful timeout) and those may await sync calls (a Channels
     * consumer's handlers and its close_old_connections go through
     * sync_to_async): a refused completion left them waiting until the
     * graceful timeout. Refused only once the loop's run() has returned;
     * one that races past that check stays in the dead queue, its
     * references never dropped, as the process exits. */
    if (type == TS_EV_CALL_DONE) {
        if (atomic_load_explicit(&loop->gone, memory_order_acquire) ||
            ts_wakelist_push_open(&loop->queue, &ev->node) != 0) {
            free(ev);
            return -1;
        }
        return 0;
    }
    if (ts_wakelist_push(&loop->queue, &ev->node, type == TS_EV_STOP) != 0) {
        free(ev);
        return -1;
    }
    return 0;
}

int
ts_asgi_push_new(ts_loop *loop, int type, ts_asgi_slot *s, uint32_t gen, size_t req_len, int nentries,
                 size_t body_off, size_t body_len, int body_done, int ws_max_queue)
{
    /* Unlocked: the loop reads these only after it took the event, and
     * the queue's mutex orders the two. */
    s->req_len = req_len;
    s->nentries = nentries;
    s->body_off = body_off;
    s->body_len = body_len;
    s->body_done = body_done;
    if (type == TS_EV_WS_NEW) {
        s->ws_max_queue = ws_max_queue;
    }
    return ts_asgi_push(loop, type, s, gen, NULL, 0, 0);
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
        r->trailers_wanted = s->trailers_wanted;
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
    r->trailers = NULL;
    r->trailers_len = 0;
    if (r->finished) {
        s->finished_taken = 1;
        r->trailers = s->trailers;  /* complete by now: more_trailers False */
        r->trailers_len = s->trailers_len;
        s->trailers = NULL;
        s->trailers_len = s->trailers_cap = 0;
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
    r->hints = s->hints;
    r->hints_len = s->hints_len;
    s->hints = NULL;
    s->hints_len = s->hints_cap = 0;
    pthread_mutex_unlock(&s->mu);
}

void
ts_asgi_written(ts_asgi_slot *s, uint32_t gen)
{
    int waiting;

    pthread_mutex_lock(&s->mu);
    waiting = s->drain_wait && s->out_len <= s->loop->write_buffer;
    if (waiting) {
        s->drain_wait = 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (waiting) {
        ts_asgi_push(s->loop, TS_EV_DRAINED, s, gen, NULL, 0, 0);
    }
}

/* ---- the ready list (loop -> Go) --------------------------------------- */

/* signal_go wakes the handler goroutine of s: it lists s once on its
 * loop's ready list, which writes the eventfd only if the dispatcher armed
 * need_wake. Any thread. */
static void
signal_go(ts_asgi_slot *s)
{
    if (__atomic_exchange_n(&s->ready, 1, __ATOMIC_ACQ_REL)) {
        return; /* listed and not yet taken: that wake-up covers this */
    }
    (void)ts_wakelist_push(&s->loop->ready, &s->ready_link, 0);  /* never closed */
}

void
ts_asgi_signal(ts_asgi_slot *s)
{
    signal_go(s);
}

size_t
ts_asgi_write_buffer(ts_asgi_slot *s)
{
    return s->loop->write_buffer;
}

/* ts_asgi_ready_id is the ready list's id_of (wakelist.h): it unlists
 * the slot that holds n (a later signal_go lists it again) and names it
 * for Go by its index. The dispatcher's thread, inside
 * ts_wakelist_take_ids, after n's next was read. */
uintptr_t
ts_asgi_ready_id(ts_wakenode *n)
{
    ts_asgi_slot *s = (ts_asgi_slot *)((char *)n - offsetof(ts_asgi_slot, ready_link));

    __atomic_store_n(&s->ready, 0, __ATOMIC_RELEASE);
    return (uintptr_t)s->index;
}
