/* wakelist.c: the consumer's half of a wake list (wakelist.h has the
 * protocol; the producer's push is inline there).
 */
#include "wakelist.h"

#include <errno.h>
#include <sys/eventfd.h>

int
ts_wakelist_init(ts_wakelist *l)
{
    int rc;

    l->head = l->tail = NULL;
    l->closed = 0;
    l->id_of = NULL;
    atomic_init(&l->need_wake, 1);
    rc = pthread_mutex_init(&l->mu, NULL);
    if (rc != 0) {
        l->fd = -1;
        errno = rc;
        return -1;
    }
    l->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return l->fd < 0 ? -1 : 0;
}

ts_wakenode *
ts_wakelist_take(ts_wakelist *l, int max, int *empty)
{
    ts_wakenode *first, *last;
    int n;

    pthread_mutex_lock(&l->mu);
    first = l->head;
    if (first == NULL) {
        pthread_mutex_unlock(&l->mu);
        *empty = 1;
        return NULL;
    }
    if (max <= 0) {
        l->head = l->tail = NULL;
        pthread_mutex_unlock(&l->mu);
        *empty = 1;
        return first;
    }
    for (last = first, n = 1; n < max && last->next != NULL; n++) {
        last = last->next;
    }
    l->head = last->next;
    if (l->head == NULL) {
        l->tail = NULL;
    }
    last->next = NULL;
    *empty = l->head == NULL;
    pthread_mutex_unlock(&l->mu);
    return first;
}

int
ts_wakelist_arm(ts_wakelist *l)
{
    int empty;

    atomic_store(&l->need_wake, 1);
    pthread_mutex_lock(&l->mu);
    empty = l->head == NULL;
    pthread_mutex_unlock(&l->mu);
    /* Not empty and the flag still ours: take it back, so that no
     * producer writes while the consumer goes on taking. Not empty and
     * the flag gone: the producer that took it wrote the eventfd. */
    return empty || atomic_exchange(&l->need_wake, 0) == 0;
}

void
ts_wakelist_clear(ts_wakelist *l)
{
    uint64_t count;

    if (read(l->fd, &count, sizeof(count)) < 0) {
        /* EAGAIN: nothing was signalled; the list may still hold nodes */
    }
}

int
ts_wakelist_take_ids(ts_wakelist *l, uintptr_t *ids, int max, int *armed)
{
    int n = 0, empty;

    *armed = 0;
    for (;;) {
        ts_wakenode *w = ts_wakelist_take(l, max - n, &empty);
        while (w != NULL) {
            /* next first: once id_of ran, the item may be listed again
             * (the ASGI ready list clears its slot's flag there) */
            ts_wakenode *next = w->next;
            ids[n++] = l->id_of(w);
            w = next;
        }
        if (!empty) {
            return n; /* n == max: more to take */
        }
        if (ts_wakelist_arm(l)) {
            *armed = 1;
            return n;
        }
        /* listed meanwhile, and the flag taken back before any producer
         * saw it: go on taking, while there is room (max - n >= 1) */
        if (n == max) {
            return n;
        }
    }
}
