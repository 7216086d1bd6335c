/* pool_impl.h: the pool's struct, shared by pool.c (threads, the shared
 * queue, the done list) and lanes.c (one queue per thread, binding and
 * per-thread stats). Private to internal/python; tspy.h is the interface.
 */
#ifndef TS_POOL_IMPL_H
#define TS_POOL_IMPL_H

#include "tspy.h"
#include <pthread.h>
#include <semaphore.h>

/* A lane: thread i's own FIFO (ts_pool_submit_to), with what the
 * watchdog, the metrics and least-loaded binding read of that thread.
 * Every field is guarded by the pool's lock. */
typedef struct ts_lane {
    ts_job *head, *tail;
    long queued;              /* jobs on this lane */
    long bound;               /* connections bound to the thread (ts_pool_bind) */
    uint64_t *tags;           /* their tags (ntags of them, fewer only after a
                                 failed allocation; malloc'd, tags_cap) */
    long ntags, tags_cap;
    int running;              /* the thread runs a job (lane or shared) */
    int64_t running_since_ns; /* when it took it; 0 when idle */
    uint64_t running_tag;     /* the job's tag */
    int64_t busy_ns;          /* summed run time of finished jobs */
    int64_t wait_max_ns;      /* longest queue wait since the last stats read */
    uint64_t calls;           /* jobs taken */
} ts_lane;

struct ts_pool {
    pthread_mutex_t lock;
    ts_job *head, *tail;      /* guarded by lock */
    long queued, busy, idle;  /* guarded by lock; idle = parked, not yet woken */
    int *parked;              /* idle stack of thread indexes, guarded by lock */
    int *parked_at;           /* thread i's place on the idle stack, -1 if not on it
                                 (a lane submission wakes thread i in O(1)) */
    ts_lane *lanes;           /* one per thread (lanes.c), guarded by lock */
    long lane_queued;         /* jobs on every lane, bounded by queue_bound */
    sem_t *parks;             /* one per thread: a parked thread waits on its own */
    long queue_bound;
    int stopping;             /* guarded by lock */
    int nthreads;             /* set before the threads start, then read-only */
    int batch;                /* the threads run under SCHED_BATCH */
    pthread_t *tids;
    ts_thread *threads;
    PyInterpreterState *interp;
    char name[TS_POOL_NAME_MAX + 1];
    ts_wakelist done;         /* finished jobs, for Go's dispatcher */
};

/* lanes.c, for pool_main (p->lock held): take thread i's oldest lane job;
 * note that thread i starts job / ended its job. */
ts_job *lane_pop_locked(ts_pool *p, int i);
void lane_start_locked(ts_pool *p, int i, ts_job *job);
void lane_end_locked(ts_pool *p, int i);
/* lanes.c: take thread i off the idle stack if it is parked there;
 * returns 1 if it was (the caller posts its semaphore). p->lock held. */
int lane_unpark_locked(ts_pool *p, int i);

#endif /* TS_POOL_IMPL_H */
