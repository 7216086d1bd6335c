/* pool.c: the pool of Python threads and its C-side job queue.
 *
 * Notes about the implementation
 * ------------------------------
 * DESIGN.md, the crossing rule: Python threads live inside C, waiting on a
 * C-side queue; a handler goroutine makes one short call (ts_pool_submit)
 * and learns of completion without an OS thread blocking for it: the
 * finished job goes on the pool's done list (ts_pool_done), whose one
 * eventfd Go's dispatcher goroutine (python.Dispatcher, started by
 * python.Pool.Dispatch) reads through
 * the netpoller; it takes the whole list and wakes each job's goroutine
 * on a channel. The list is a ts_wakelist (wakelist.h): the eventfd is
 * written only when the dispatcher armed it, so a burst of completions
 * costs the pool one write(2) under the GIL instead of one per job (each
 * job had its own eventfd before).
 * Measured with a prototype here, handing jobs to locked goroutines over Go
 * channels gave 76 k req/s with two threads where this design gave 666 k.
 *
 * The queue is a FIFO list bounded by queue_size (the bound rule); a full
 * queue makes ts_pool_submit fail and the caller answers 503. A thread that
 * finds the queue empty detaches and parks: it pushes itself on the idle
 * stack and waits on its own semaphore, and ts_pool_submit pops one parked
 * thread per job and posts its semaphore. Not a condition variable: glibc's
 * pthread_cond_signal can block the signaller until threads it woke before
 * have left their wait (the group switch), and a Go thread blocked there,
 * on a core it shares with the pool threads, hands the core to a pool
 * thread once per request (measured: about one context switch per request
 * and 16 µs of CPU instead of 12 on WSGI hello, in one run out of three).
 * A thread takes a job only once attached: after a job it hands the GIL
 * over if the turnstile says so (thread.c), re-attaches, and only then
 * takes the oldest job. A job therefore never waits for the
 * GIL bound to a thread that lost the race for it (the convoy's victim);
 * it waits in the FIFO queue (queue_wait) and is served in order by
 * whichever thread holds the GIL, and its GIL wait is what CPython makes it
 * wait mid-request (switch-interval drops, blocking calls).
 *
 * A pool is a value (ts_pool, python.Pool in Go): a worker may hold
 * several, each with its own threads, queue, lock, idle stack and done
 * list; nothing here is process state. What is shared is the GIL, so the
 * turnstile that orders the attaches (thread.c) sees the threads of every
 * pool. The functions on the request path take the pool as their first
 * argument; a pool thread finds its own through ts_thread.pool.
 *
 * Threads are created here with pthread_create, with an explicit stack
 * size (Go-created threads get default attributes), and named
 * <name>-<i>, ts-py-<i> for the WSGI pool (at most 15 characters, so
 * `top -H` shows them). A pool is never freed: its threads' states cannot
 * be cleared without finalising (DESIGN.md), and the turnstile keeps its
 * threads on its list.
 */
#include "tspy.h"
#include "pool_impl.h"

#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ts_job *
pop_locked(ts_pool *p)
{
    ts_job *job = p->head;
    if (job != NULL) {
        p->head = job->next;
        if (p->head == NULL) {
            p->tail = NULL;
        }
        else {
            p->head->prev = NULL;
        }
        job->next = NULL;
        job->state = TS_JOB_RUNNING;
        p->queued--;
    }
    return job;
}

/* name_for_threading gives the thread its pool name in Python too:
 * threading.current_thread().name (logging's %(threadName)s, an app's own
 * diagnostics) says "ts-py-0", not "Dummy-1". Best effort. Attached. */
static void
name_for_threading(const char *name)
{
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *cur = threading ? PyObject_CallMethod(threading, "current_thread", NULL) : NULL;
    PyObject *s = PyUnicode_FromString(name);

    if (cur == NULL || s == NULL || PyObject_SetAttrString(cur, "name", s) < 0) {
        PyErr_Clear();
    }
    Py_XDECREF(s);
    Py_XDECREF(cur);
    Py_XDECREF(threading);
}

static void *
pool_main(void *arg)
{
    ts_thread *t = arg;
    ts_pool *p = t->pool;
    char name[16];
    ts_job *job;

    snprintf(name, sizeof(name), "%s-%d", p->name, t->index);
    (void)pthread_setname_np(pthread_self(), name);  /* cosmetic */
    if (p->batch) {
        /* SCHED_BATCH: same CPU share, no wake-up preemption. A job
         * submitted by Go then does not preempt the Go thread that
         * submitted it (on a shared core, a context switch per request);
         * the pool thread runs when Go blocks or its slice ends, and
         * takes the jobs queued meanwhile in one go. Go's threads keep
         * SCHED_OTHER, so Go still preempts Python on a wake-up. */
        struct sched_param sp = {0};
        (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    }

    /* Created on this thread: its thread id and PyGILState binding are
     * fixed at creation. */
    t->tstate = PyThreadState_New(p->interp);
    t->attached = 0;
    ts_thread_attach(t);
    name_for_threading(name);

    for (;;) {
        /* Attached here: take the oldest job. A thread never holds a job
         * while it waits for the GIL, so a job is not bound to a thread
         * that lost the race for it; it waits in the FIFO queue and the
         * thread holding the GIL takes it. */
        pthread_mutex_lock(&p->lock);
        job = lane_pop_locked(p, t->index);
        if (job == NULL) {
            job = pop_locked(p);
        }
        if (job != NULL) {
            p->busy++;
            lane_start_locked(p, t->index, job);
        }
        pthread_mutex_unlock(&p->lock);
        if (job == NULL) {
            int stop;
            ts_thread_detach(t, 0);
            pthread_mutex_lock(&p->lock);
            while (p->head == NULL && p->lanes[t->index].head == NULL && !p->stopping) {
                /* Park: whoever queues a job (or stops the pool) pops
                 * this thread off the idle stack and posts its own
                 * semaphore. */
                p->parked_at[t->index] = p->idle;
                p->parked[p->idle++] = t->index;
                pthread_mutex_unlock(&p->lock);
                while (sem_wait(&p->parks[t->index]) != 0) {
                    /* EINTR: wait again */
                }
                pthread_mutex_lock(&p->lock);
            }
            stop = p->head == NULL && p->lanes[t->index].head == NULL;  /* stopping, nothing left */
            pthread_mutex_unlock(&p->lock);
            if (stop) {
                break;
            }
            ts_thread_attach(t);
            continue;
        }
        t->gil_wait_ns = 0;  /* from here on, waits inside CPython count */
        job->thread_index = t->index;
        job->started_ns = ts_now_ns();
        job->run(job, t);  /* may free job */
        pthread_mutex_lock(&p->lock);
        p->busy--;
        lane_end_locked(p, t->index);
        pthread_mutex_unlock(&p->lock);
        /* A job boundary: hand the GIL over if the turnstile says so
         * (thread.c), before taking the next job. */
        ts_thread_yield_if_due(t);
    }

    /* Keep the thread state: clearing it needs the GIL, and the process
     * exits without finalising (DESIGN.md). */
    return NULL;
}

static uintptr_t done_id(ts_wakenode *n);  /* the done list's id_of (below) */

ts_pool *
ts_pool_start(const char *name, int n, int queue_size, size_t stack_bytes, int batch)
{
    pthread_attr_t attr;
    ts_pool *p;
    int i, rc;

    if (n < 1 || strlen(name) > TS_POOL_NAME_MAX) {
        errno = EINVAL;
        return NULL;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    p->interp = PyInterpreterState_Main();
    p->queue_bound = queue_size;
    p->nthreads = n;
    p->batch = batch;
    strcpy(p->name, name);
    p->tids = calloc(n, sizeof(*p->tids));
    p->threads = calloc(n, sizeof(*p->threads));
    p->parked = calloc(n, sizeof(*p->parked));
    p->parks = calloc(n, sizeof(*p->parks));
    p->parked_at = calloc(n, sizeof(*p->parked_at));
    p->lanes = calloc(n, sizeof(*p->lanes));
    if (p->tids == NULL || p->threads == NULL || p->parked == NULL || p->parks == NULL || p->parked_at == NULL ||
        p->lanes == NULL) {
        free(p->parked_at);
        free(p->lanes);
        free(p->tids);
        free(p->threads);
        free(p->parked);
        free(p->parks);
        free(p);
        errno = ENOMEM;
        return NULL;
    }
    if ((rc = pthread_mutex_init(&p->lock, NULL)) != 0) {
        errno = rc;
        return NULL;  /* leaked: start-up fails and the worker exits */
    }
    if (ts_wakelist_init(&p->done) != 0) {
        return NULL;  /* errno from eventfd; leaked as above */
    }
    p->done.id_of = done_id;
    for (i = 0; i < n; i++) {
        sem_init(&p->parks[i], 0, 0);
        p->parked_at[i] = -1;
        p->threads[i].kind = TS_KIND_POOL;
        p->threads[i].index = i;
        p->threads[i].pool = p;
        ts_turn_register(&p->threads[i]);
    }
    pthread_attr_init(&attr);
    if (stack_bytes > 0) {
        pthread_attr_setstacksize(&attr, stack_bytes);
    }
    for (i = 0; i < n; i++) {
        rc = pthread_create(&p->tids[i], &attr, pool_main, &p->threads[i]);
        if (rc != 0) {
            /* The threads already started keep p: leaked, and the
             * worker exits (start-up failed). */
            pthread_attr_destroy(&attr);
            errno = rc;
            return NULL;
        }
    }
    pthread_attr_destroy(&attr);
    return p;
}

int
ts_pool_submit(ts_pool *p, ts_job *job)
{
    int wake = -1;

    job->enqueued_ns = ts_now_ns();
    job->next = NULL;
    job->prev = NULL;
    job->lane = -1;
    pthread_mutex_lock(&p->lock);
    if (p->stopping || p->queued >= p->queue_bound) {
        pthread_mutex_unlock(&p->lock);
        return -1;
    }
    job->state = TS_JOB_QUEUED;
    job->prev = p->tail;
    if (p->tail != NULL) {
        p->tail->next = job;
    }
    else {
        p->head = job;
    }
    p->tail = job;
    p->queued++;
    if (p->idle > 0) {
        wake = p->parked[--p->idle];
        p->parked_at[wake] = -1;
    }
    pthread_mutex_unlock(&p->lock);
    if (wake >= 0) {
        sem_post(&p->parks[wake]);  /* never blocks (pthread_cond_signal can) */
    }
    return 0;
}

int
ts_pool_cancel(ts_pool *p, ts_job *job)
{
    int removed = 0;

    /* The state is read and changed under the lock pop_locked takes a job
     * under: a job is either taken (RUNNING) or withdrawn (IDLE), never
     * both. Unlinked through prev/next, in O(1): a burst of 2 000
     * abandoned requests is withdrawn without walking the queue. */
    pthread_mutex_lock(&p->lock);
    if (job->state == TS_JOB_QUEUED && job->lane < 0) {  /* lane jobs are not withdrawn */
        if (job->prev != NULL) {
            job->prev->next = job->next;
        }
        else {
            p->head = job->next;
        }
        if (job->next != NULL) {
            job->next->prev = job->prev;
        }
        else {
            p->tail = job->prev;
        }
        job->next = job->prev = NULL;
        job->state = TS_JOB_IDLE;
        p->queued--;
        removed = 1;
    }
    pthread_mutex_unlock(&p->lock);
    return removed;
}

void
ts_pool_stop(ts_pool *p)
{
    int i;

    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    while (p->idle > 0) {
        int i = p->parked[--p->idle];
        p->parked_at[i] = -1;
        sem_post(&p->parks[i]);
    }
    pthread_mutex_unlock(&p->lock);
    for (i = 0; i < p->nthreads; i++) {
        (void)pthread_join(p->tids[i], NULL);  /* a thread that never ends is a hung app: the caller bounds the wait */
    }
}

void
ts_pool_get_stats(ts_pool *p, ts_pool_stats *s)
{
    pthread_mutex_lock(&p->lock);
    s->threads = p->nthreads;
    s->busy = p->busy;
    s->idle = p->idle;
    s->queued = p->queued + p->lane_queued;
    s->queue_size = p->queue_bound;
    pthread_mutex_unlock(&p->lock);
}

PyThreadState *
ts_pool_tstate(ts_pool *p, int i)
{
    if (i < 0 || i >= p->nthreads) {
        return NULL;
    }
    return p->threads[i].tstate;
}

/* ---- the done list ---------------------------------------------------- */

/* done_id names a finished job for Go: its go_id (ts_wakelist.id_of). */
static uintptr_t
done_id(ts_wakenode *n)
{
    return ((ts_job *)((char *)n - offsetof(ts_job, done)))->go_id;
}

ts_wakelist *
ts_pool_done_list(ts_pool *p)
{
    return &p->done;
}

void
ts_pool_done(ts_pool *p, ts_job *job)
{
    (void)ts_wakelist_push(&p->done, &job->done, 0);  /* never closed: cannot fail */
}
