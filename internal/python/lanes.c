/* lanes.c: a pool's lanes, one FIFO per thread, and least-loaded binding.
 *
 * Notes about the implementation
 * ------------------------------
 * The ASGI worker's pools for sync work (docs/design.md, "Sync work of
 * async apps") run calls on a chosen thread: every thread-sensitive call
 * of one WebSocket session goes to the thread the session was bound to at
 * connect, in the order made (asgiref's guarantee). A lane is that
 * thread's own job list; ts_pool_submit_to appends to it and wakes that
 * thread (not any parked one), taking it off the idle stack in O(1)
 * through parked_at. A thread serves its lane first, then the shared
 * queue (pool.c, pool_main); the WSGI pool uses only the shared queue, the
 * ASGI pools only lanes. The bound rule: the lanes of a pool hold at most
 * queue_bound jobs together; past it a submission is refused.
 *
 * Binding is bookkeeping: ts_pool_bind picks the least-loaded thread and
 * counts the connection on it (bound), ts_pool_unbind uncounts it. For
 * sessions the fewest bound wins (they live long), then the fewest queued
 * + running. For HTTP requests the fewest bound + running (a request
 * cancelled mid-call released its binding but still holds the thread),
 * then the fewest queued. Not the queue length first: a burst of requests
 * binds before any of them submitted a call, and a thread that was
 * between two calls for a moment (queue 0, not running) then took every
 * request of the burst (measured: 52 requests bound to one thread of 50,
 * the last answered after 30 s).
 */
#include "pool_impl.h"

#include <stdlib.h>
#include <string.h>

ts_job *
lane_pop_locked(ts_pool *p, int i)
{
    ts_lane *l = &p->lanes[i];
    ts_job *job = l->head;

    if (job != NULL) {
        l->head = job->next;
        if (l->head == NULL) {
            l->tail = NULL;
        }
        else {
            l->head->prev = NULL;
        }
        job->next = NULL;
        job->state = TS_JOB_RUNNING;
        l->queued--;
        p->lane_queued--;
    }
    return job;
}

void
lane_start_locked(ts_pool *p, int i, ts_job *job)
{
    ts_lane *l = &p->lanes[i];
    int64_t now = ts_now_ns(), wait = now - job->enqueued_ns;

    l->running = 1;
    l->running_since_ns = now;
    l->running_tag = job->tag;
    if (wait > l->wait_max_ns) {
        l->wait_max_ns = wait;
    }
    l->calls++;
}

void
lane_end_locked(ts_pool *p, int i)
{
    ts_lane *l = &p->lanes[i];

    l->busy_ns += ts_now_ns() - l->running_since_ns;
    l->running = 0;
    l->running_since_ns = 0;
    l->running_tag = 0;
}

int
lane_unpark_locked(ts_pool *p, int i)
{
    int at = p->parked_at[i], last;

    if (at < 0) {
        return 0;
    }
    last = p->parked[--p->idle];
    p->parked[at] = last;
    p->parked_at[last] = at;
    p->parked_at[i] = -1;
    return 1;
}

int
ts_pool_submit_to(ts_pool *p, int i, ts_job *job)
{
    ts_lane *l;
    int wake;

    if (i < 0 || i >= p->nthreads) {
        return -1;
    }
    l = &p->lanes[i];
    job->enqueued_ns = ts_now_ns();
    job->next = NULL;
    job->lane = i;
    pthread_mutex_lock(&p->lock);
    if (p->stopping || p->lane_queued >= p->queue_bound) {
        pthread_mutex_unlock(&p->lock);
        return -1;
    }
    job->state = TS_JOB_QUEUED;
    job->prev = l->tail;
    if (l->tail != NULL) {
        l->tail->next = job;
    }
    else {
        l->head = job;
    }
    l->tail = job;
    l->queued++;
    p->lane_queued++;
    wake = lane_unpark_locked(p, i);
    pthread_mutex_unlock(&p->lock);
    if (wake) {
        sem_post(&p->parks[i]);  /* never blocks */
    }
    return 0;
}

/* lane_tag_add records tag on l (p->lock held); a failed allocation only
 * leaves it out of the list /debug/threads prints. */
static void
lane_tag_add(ts_lane *l, uint64_t tag)
{
    if (l->ntags == l->tags_cap) {
        long cap = l->tags_cap ? 2 * l->tags_cap : 8;
        uint64_t *t = realloc(l->tags, cap * sizeof(*t));
        if (t == NULL) {
            return;
        }
        l->tags = t;
        l->tags_cap = cap;
    }
    l->tags[l->ntags++] = tag;
}

int
ts_pool_bind(ts_pool *p, int policy, long limit, uint64_t tag)
{
    long total = 0;
    int i, best = -1;
    long k1 = 0, k2 = 0;

    pthread_mutex_lock(&p->lock);
    for (i = 0; i < p->nthreads; i++) {
        total += p->lanes[i].bound;
    }
    if (limit >= 0 && total >= limit) {
        pthread_mutex_unlock(&p->lock);
        return -1;
    }
    for (i = 0; i < p->nthreads; i++) {
        ts_lane *l = &p->lanes[i];
        long load = l->queued + l->running, a, b;
        if (policy == TS_BIND_SESSION) {
            a = l->bound;
            b = load;
        }
        else {
            a = l->bound + l->running;
            b = l->queued;
        }
        if (best < 0 || a < k1 || (a == k1 && b < k2)) {
            best = i;
            k1 = a;
            k2 = b;
        }
    }
    p->lanes[best].bound++;
    lane_tag_add(&p->lanes[best], tag);
    pthread_mutex_unlock(&p->lock);
    return best;
}

void
ts_pool_unbind(ts_pool *p, int i, uint64_t tag)
{
    ts_lane *l;
    long k, n;

    if (i < 0 || i >= p->nthreads) {
        return;
    }
    l = &p->lanes[i];
    pthread_mutex_lock(&p->lock);
    if (l->bound > 0) {
        n = l->ntags;
        for (k = 0; k < n && l->tags[k] != tag; k++) {
        }
        if (k < n) {
            l->tags[k] = l->tags[n - 1];  /* order is not kept */
            l->ntags--;
        }
        l->bound--;
    }
    pthread_mutex_unlock(&p->lock);
}

int
ts_pool_thread_tags(ts_pool *p, int i, uint64_t *out, int max)
{
    ts_lane *l;
    long k, n;

    if (i < 0 || i >= p->nthreads) {
        return 0;
    }
    l = &p->lanes[i];
    pthread_mutex_lock(&p->lock);
    n = l->ntags;
    for (k = 0; k < n && k < max; k++) {
        out[k] = l->tags[k];
    }
    pthread_mutex_unlock(&p->lock);
    return (int)k;
}

int
ts_pool_threads(ts_pool *p)
{
    return p->nthreads;
}

void
ts_pool_thread_stats(ts_pool *p, int i, ts_lane_stats *out, int reset)
{
    ts_lane *l;
    ts_job *j;
    uint64_t tags[64];
    int ntags = 0, walked = 0, k;

    memset(out, 0, sizeof(*out));
    if (i < 0 || i >= p->nthreads) {
        return;
    }
    l = &p->lanes[i];
    pthread_mutex_lock(&p->lock);
    out->bound = l->bound;
    out->queued = l->queued;
    out->running_since_ns = l->running_since_ns;
    out->running_tag = l->running_tag;
    out->busy_ns = l->busy_ns + (l->running ? ts_now_ns() - l->running_since_ns : 0);
    out->wait_max_ns = l->wait_max_ns;
    out->calls = l->calls;
    if (reset) {
        l->wait_max_ns = 0;
    }
    if (l->head != NULL) {
        out->oldest_enqueued_ns = l->head->enqueued_ns;
    }
    /* distinct connections waiting: the first 64 tags of the queue */
    for (j = l->head; j != NULL && walked < 1024; j = j->next, walked++) {
        for (k = 0; k < ntags && tags[k] != j->tag; k++) {
        }
        if (k == ntags && ntags < 64) {
            tags[ntags++] = j->tag;
        }
    }
    out->waiting_conns = ntags;
    pthread_mutex_unlock(&p->lock);
}
