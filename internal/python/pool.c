/* pool.c: the pool of Python threads and its C-side job queue.
 *
 * Notes about the implementation
 * ------------------------------
 * DESIGN.md, the crossing rule: Python threads live inside C, waiting on a
 * C-side queue; a handler goroutine makes one short call (ts_pool_submit)
 * and learns of completion without an OS thread blocking for it: the
 * finished job goes on the done list (ts_job_done), whose one eventfd Go's
 * dispatcher goroutine reads through the netpoller; it takes the whole
 * list and wakes each job's goroutine on a channel. The eventfd is written
 * only when the dispatcher armed it (the protocol of the ASGI bridge's
 * queues), so a burst of completions costs the pool one write(2) under the
 * GIL instead of one per job (each job had its own eventfd before).
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
 * and 16 µs of CPU instead of 12 on WSGI hello, in one run out of three). A thread takes a job only once attached: after a job
 * it hands the GIL over if the turnstile says so (thread.c), re-attaches,
 * and only then takes the oldest job. A job therefore never waits for the
 * GIL bound to a thread that lost the race for it (the convoy's victim);
 * it waits in the FIFO queue (queue_wait) and is served in order by
 * whichever thread holds the GIL, and its GIL wait is what CPython makes it
 * wait mid-request (switch-interval drops, blocking calls).
 *
 * Threads are created here with pthread_create, with an explicit stack
 * size (Go-created threads get default attributes), and named ts-py-<i>
 * (at most 15 characters, so `top -H` shows them).
 */
#include "tspy.h"

#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int ts_pool_threads;
int ts_pool_batch = 1;  /* TURNSTILE_POOL_BATCH=0 clears it */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ts_job *head, *tail;      /* guarded by lock */
static long queued, busy, idle;  /* guarded by lock; idle = parked, not yet woken */
static int *parked;              /* idle stack of thread indexes, guarded by lock */
static sem_t *parks;             /* one per thread: a parked thread waits on its own */
static long queue_bound;
static int stopping;             /* guarded by lock */
static pthread_t *tids;

static ts_thread *threads;
static PyInterpreterState *interp;

static ts_job *
pop_locked(void)
{
    ts_job *job = head;
    if (job != NULL) {
        head = job->next;
        if (head == NULL) {
            tail = NULL;
        }
        else {
            head->prev = NULL;
        }
        job->next = NULL;
        job->state = TS_JOB_RUNNING;
        queued--;
    }
    return job;
}

static void *
pool_main(void *arg)
{
    ts_thread *t = arg;
    char name[16];
    ts_job *job;

    snprintf(name, sizeof(name), "ts-py-%d", t->index);
    (void)pthread_setname_np(pthread_self(), name);  /* cosmetic */
    if (ts_pool_batch) {
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
    t->tstate = PyThreadState_New(interp);
    t->attached = 0;
    ts_thread_attach(t);

    for (;;) {
        /* Attached here: take the oldest job. A thread never holds a job
         * while it waits for the GIL, so a job is not bound to a thread
         * that lost the race for it; it waits in the FIFO queue and the
         * thread holding the GIL takes it. */
        pthread_mutex_lock(&lock);
        job = pop_locked();
        if (job != NULL) {
            busy++;
        }
        pthread_mutex_unlock(&lock);
        if (job == NULL) {
            int stop;
            ts_thread_detach(t, 0);
            pthread_mutex_lock(&lock);
            while (head == NULL && !stopping) {
                /* Park: whoever queues a job (or stops the pool) pops
                 * this thread off the idle stack and posts its own
                 * semaphore. */
                parked[idle++] = t->index;
                pthread_mutex_unlock(&lock);
                while (sem_wait(&parks[t->index]) != 0) {
                    /* EINTR: wait again */
                }
                pthread_mutex_lock(&lock);
            }
            stop = head == NULL;  /* stopping, and nothing left to serve */
            pthread_mutex_unlock(&lock);
            if (stop) {
                break;
            }
            ts_thread_attach(t);
            continue;
        }
        t->gil_wait_ns = 0;  /* from here on, waits inside CPython count */
        job->thread_index = t->index;
        job->started_ns = ts_now_ns();
        job->run(job, t);
        pthread_mutex_lock(&lock);
        busy--;
        pthread_mutex_unlock(&lock);
        /* A job boundary: hand the GIL over if the turnstile says so
         * (thread.c), before taking the next job. */
        ts_thread_yield_if_due(t);
    }

    /* Keep the thread state: clearing it needs the GIL, and the process
     * exits without finalising (DESIGN.md). */
    return NULL;
}

int
ts_pool_start(int n, int queue_size, size_t stack_bytes)
{
    pthread_attr_t attr;
    int i, rc;

    interp = PyInterpreterState_Main();
    queue_bound = queue_size;
    ts_pool_threads = n;
    tids = calloc(n, sizeof(*tids));
    threads = calloc(n, sizeof(*threads));
    parked = calloc(n, sizeof(*parked));
    parks = calloc(n, sizeof(*parks));
    if (tids == NULL || threads == NULL || parked == NULL || parks == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (i = 0; i < n; i++) {
        sem_init(&parks[i], 0, 0);
    }
    pthread_attr_init(&attr);
    if (stack_bytes > 0) {
        pthread_attr_setstacksize(&attr, stack_bytes);
    }
    for (i = 0; i < n; i++) {
        threads[i].kind = TS_KIND_POOL;
        threads[i].index = i;
        rc = pthread_create(&tids[i], &attr, pool_main, &threads[i]);
        if (rc != 0) {
            pthread_attr_destroy(&attr);
            errno = rc;
            return -1;
        }
    }
    pthread_attr_destroy(&attr);
    return 0;
}

int
ts_pool_submit(ts_job *job)
{
    int wake = -1;

    job->enqueued_ns = ts_now_ns();
    job->next = NULL;
    job->prev = NULL;
    pthread_mutex_lock(&lock);
    if (stopping || queued >= queue_bound) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    job->state = TS_JOB_QUEUED;
    job->prev = tail;
    if (tail != NULL) {
        tail->next = job;
    }
    else {
        head = job;
    }
    tail = job;
    queued++;
    if (idle > 0) {
        wake = parked[--idle];
    }
    pthread_mutex_unlock(&lock);
    if (wake >= 0) {
        sem_post(&parks[wake]);  /* never blocks (pthread_cond_signal can) */
    }
    return 0;
}

int
ts_pool_cancel(ts_job *job)
{
    int removed = 0;

    /* The state is read and changed under the lock pop_locked takes a job
     * under: a job is either taken (RUNNING) or withdrawn (IDLE), never
     * both. Unlinked through prev/next, in O(1): a burst of 2 000
     * abandoned requests is withdrawn without walking the queue. */
    pthread_mutex_lock(&lock);
    if (job->state == TS_JOB_QUEUED) {
        if (job->prev != NULL) {
            job->prev->next = job->next;
        }
        else {
            head = job->next;
        }
        if (job->next != NULL) {
            job->next->prev = job->prev;
        }
        else {
            tail = job->prev;
        }
        job->next = job->prev = NULL;
        job->state = TS_JOB_IDLE;
        queued--;
        removed = 1;
    }
    pthread_mutex_unlock(&lock);
    return removed;
}

void
ts_pool_stop(void)
{
    int i;

    pthread_mutex_lock(&lock);
    stopping = 1;
    while (idle > 0) {
        sem_post(&parks[parked[--idle]]);
    }
    pthread_mutex_unlock(&lock);
    for (i = 0; i < ts_pool_threads; i++) {
        (void)pthread_join(tids[i], NULL);  /* a thread that never ends is a hung app: the caller bounds the wait */
    }
}

void
ts_pool_get_stats(ts_pool_stats *s)
{
    pthread_mutex_lock(&lock);
    s->threads = ts_pool_threads;
    s->busy = busy;
    s->idle = idle;
    s->queued = queued;
    s->queue_size = queue_bound;
    pthread_mutex_unlock(&lock);
}

PyThreadState *
ts_pool_tstate(int i)
{
    if (i < 0 || i >= ts_pool_threads || threads == NULL) {
        return NULL;
    }
    return threads[i].tstate;
}

int64_t
ts_pool_oldest_wait(int64_t now)
{
    int64_t oldest = 0;
    int i;

    /* Racy reads of each thread's wait start: a scan of a few entries
     * with no lock and no syscall, on the barrier's path only. */
    for (i = 0; i < ts_pool_threads; i++) {
        int64_t since = atomic_load_explicit(&threads[i].wait_start_ns, memory_order_relaxed);
        if (since > 0 && now - since > oldest) {
            oldest = now - since;
        }
    }
    return oldest;
}

/* ---- the done list ---------------------------------------------------- */

static pthread_mutex_t dlock = PTHREAD_MUTEX_INITIALIZER;
static ts_job *dhead, *dtail;            /* guarded by dlock */
static int done_fd = -1;
static _Atomic int done_need_wake = 1;

/* ts_pool_done_open creates the done list's eventfd, once. Returns it, or
 * -1 with errno. */
int
ts_pool_done_open(void)
{
    if (done_fd < 0) {
        done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    }
    return done_fd;
}

/* ts_job_done lists a finished job for Go. Once per run, any thread. */
void
ts_job_done(ts_job *job)
{
    uint64_t one = 1;

    pthread_mutex_lock(&dlock);
    job->done_next = NULL;
    if (dtail) {
        dtail->done_next = job;
    } else {
        dhead = job;
    }
    dtail = job;
    pthread_mutex_unlock(&dlock);
    if (atomic_exchange(&done_need_wake, 0) == 1) {
        if (write(done_fd, &one, sizeof(one)) < 0) {
            /* EAGAIN: the counter is full, the dispatcher is awake anyway */
        }
    }
}

/* ts_pool_done_take moves up to max listed jobs' go_ids to ids and returns
 * how many. *armed is set when it found the list empty and armed the
 * eventfd (or a producer took the flag back and wrote it): the dispatcher
 * may then block on the eventfd; otherwise it calls again. Go's
 * dispatcher goroutine only. */
int
ts_pool_done_take(uintptr_t *ids, int max, int *armed)
{
    int n = 0, empty;

    *armed = 0;
    for (;;) {
        pthread_mutex_lock(&dlock);
        while (dhead && n < max) {
            ts_job *job = dhead;
            dhead = job->done_next;
            if (dhead == NULL) {
                dtail = NULL;
            }
            job->done_next = NULL;
            ids[n++] = job->go_id;
        }
        empty = dhead == NULL;
        pthread_mutex_unlock(&dlock);
        if (!empty) {
            return n; /* n == max: more to take */
        }
        atomic_store(&done_need_wake, 1);
        pthread_mutex_lock(&dlock);
        empty = dhead == NULL;
        pthread_mutex_unlock(&dlock);
        if (empty || atomic_exchange(&done_need_wake, 0) == 0) {
            *armed = 1;
            return n;
        }
        if (n == max) {
            return n;
        }
    }
}
