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
