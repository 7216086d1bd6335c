/* wakelist.h: a list handed from producers to one consumer, with an
 * eventfd that wakes the consumer once per burst (wakelist.c).
 *
 * DESIGN.md, "asyncio wake-ups": "the drain callback reads the eventfd
 * first, drains, sets a 'need wake' flag and re-checks the queue before
 * returning; a producer writes the eventfd only when it flips that flag;
 * the fd is non-blocking." This is that protocol, written once:
 *
 *   who locks   mu guards head and tail, nothing else; it is held only to
 *               link or unlink nodes (never across a write(2), a read(2)
 *               or a call into Python or Go). Producers (any thread) lock
 *               in ts_wakelist_push; the one consumer in
 *               ts_wakelist_take and ts_wakelist_arm.
 *   need_wake   1: the consumer is armed (it found the list empty and may
 *               block on the eventfd); 0: it is awake, or a producer has
 *               already written the eventfd since it armed. Starts at 1.
 *   producer    lock, append, unlock; then exchange need_wake 1 -> 0, and
 *               only the producer that flipped it writes the eventfd (one
 *               write(2) per burst, not per node). A full counter (EAGAIN)
 *               is ignored: the consumer is awake anyway.
 *   consumer    reads the eventfd (when it blocked on it: Go's netpoller
 *               does the read, a C consumer calls ts_wakelist_clear), then
 *               takes nodes until ts_wakelist_take leaves the list empty,
 *               then ts_wakelist_arm: set need_wake = 1 and re-check the
 *               list. Empty: it may block. A node arrived meanwhile: if the
 *               flag is still 1 it takes it back (1 -> 0, so no producer
 *               writes) and goes on taking; if a producer already took it
 *               (0), that producer wrote the eventfd, so blocking returns
 *               at once. No wake-up is lost either way.
 *
 * Nodes are intrusive (ts_wakenode inside the item) and owned by the list
 * from push to take; a node is on at most one list at a time (a caller
 * that may signal an item twice keeps its own "listed" flag, as the ASGI
 * ready list does). A closed list refuses ts_wakelist_push (a stopping
 * queue), except for the closing push itself.
 *
 * Users, all three lists of the worker: the pool's done list (pool.c;
 * consumer: Go's python.Dispatcher), an ASGI loop's queue (internal/asgi
 * queue.c pushes, loop.c's drain callback consumes) and its ready list
 * (internal/asgi queue.c; consumer: a python.Dispatcher). A list whose
 * consumer is Go names each node by an id (ts_wakelist.id_of), so that
 * one Go loop (dispatch.go, ts_wakelist_take_ids) serves them all.
 */
#ifndef TS_WAKELIST_H
#define TS_WAKELIST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

typedef struct ts_wakenode {
    struct ts_wakenode *next;   /* guarded by the list's mu while listed */
} ts_wakenode;

typedef struct ts_wakelist {
    pthread_mutex_t mu;
    ts_wakenode *head, *tail;   /* guarded by mu */
    int closed;                 /* guarded by mu: pushes are refused */
    int fd;                     /* the eventfd (EFD_NONBLOCK | EFD_CLOEXEC), -1 before init */
    _Atomic int need_wake;      /* the consumer is armed (see above) */
    /* For a list Go consumes (ts_wakelist_take_ids): Go's name for the
     * item that holds n, called on the consumer's thread after n was
     * unlinked and its next read. NULL for a list C consumes. Set once,
     * after ts_wakelist_init. */
    uintptr_t (*id_of)(ts_wakenode *n);
} ts_wakelist;

/* ts_wakelist_init makes l an empty, armed list with its own eventfd.
 * Returns 0, or -1 with errno set (eventfd). Before any other use, once. */
int ts_wakelist_init(ts_wakelist *l);

/* ts_wakelist_wake is the producer's half after it linked a node: it
 * writes the eventfd only if it flipped need_wake from 1 to 0. Any
 * thread, with or without the GIL; never blocks. */
static inline void
ts_wakelist_wake(ts_wakelist *l)
{
    uint64_t one = 1;

    if (atomic_exchange(&l->need_wake, 0) == 1) {
        if (write(l->fd, &one, sizeof(one)) < 0) {
            /* EAGAIN: the counter is full, the consumer is awake anyway */
        }
    }
}

/* ts_wakelist_link_locked links n at the tail. Called with l->mu held;
 * n->next is already NULL. */
static inline void
ts_wakelist_link_locked(ts_wakelist *l, ts_wakenode *n)
{
    if (l->tail != NULL) {
        l->tail->next = n;
    }
    else {
        l->head = n;
    }
    l->tail = n;
}

/* ts_wakelist_push appends n and wakes the consumer if it is armed.
 * Returns 0, or -1 (n not listed) when the list is closed. close != 0
 * lists n even on a closed list and closes it: the last node a stopping
 * producer sends (the ASGI loop's stop event). Any thread; never blocks
 * for long. Inline: it is on every request's completion path. */
static inline int
ts_wakelist_push(ts_wakelist *l, ts_wakenode *n, int close)
{
    n->next = NULL;
    pthread_mutex_lock(&l->mu);
    if (l->closed && !close) {
        pthread_mutex_unlock(&l->mu);
        return -1;
    }
    if (close) {
        l->closed = 1;
    }
    ts_wakelist_link_locked(l, n);
    pthread_mutex_unlock(&l->mu);
    ts_wakelist_wake(l);
    return 0;
}

/* ts_wakelist_push_open appends n even on a closed list, without closing
 * it: for a producer whose items the consumer still takes after the list
 * closed (an ASGI loop's sync-call completions while it stops). Returns
 * 0. Any thread. */
static inline int
ts_wakelist_push_open(ts_wakelist *l, ts_wakenode *n)
{
    n->next = NULL;
    pthread_mutex_lock(&l->mu);
    ts_wakelist_link_locked(l, n);
    pthread_mutex_unlock(&l->mu);
    ts_wakelist_wake(l);
    return 0;
}

/* ts_wakelist_take unlinks up to max nodes (max <= 0: all of them) and
 * returns them as a NULL-terminated chain in push order, or NULL. *empty
 * is set to whether the list is empty afterwards: when it is, the consumer
 * calls ts_wakelist_arm before it blocks; when not, it took max and calls
 * again. The consumer only. */
ts_wakenode *ts_wakelist_take(ts_wakelist *l, int max, int *empty);

/* ts_wakelist_arm sets need_wake and re-checks the list. Returns 1 when
 * the consumer may block on the eventfd (the list is empty, or a producer
 * wrote the eventfd after listing its node), 0 when nodes arrived and the
 * flag was taken back: take them before arming again. The consumer only. */
int ts_wakelist_arm(ts_wakelist *l);

/* ts_wakelist_clear reads (resets) the eventfd, for a C consumer woken
 * by it (a loop's add_reader callback); Go's consumer reads the fd
 * through the netpoller instead. Never blocks. */
void ts_wakelist_clear(ts_wakelist *l);

/* ts_wakelist_take_ids is Go's consumer (python.Dispatcher): it takes up
 * to max nodes and stores each one's l->id_of in ids, in push order,
 * returning how many; *armed is set when it found the list empty and
 * armed it (ts_wakelist_arm returned 1): the consumer may then block on
 * the eventfd; otherwise it calls again. max >= 1. The consumer only. */
int ts_wakelist_take_ids(ts_wakelist *l, uintptr_t *ids, int max, int *armed);

#endif /* TS_WAKELIST_H */
