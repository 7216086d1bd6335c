/* pool.c: the pool of Python threads and its C-side job queue.
 *
 * Notes about the implementation
 * ------------------------------
 * DESIGN.md, the crossing rule: Python threads live inside C, waiting on a
 * C-side queue; a handler goroutine makes one short call (ts_pool_submit)
 * and learns of completion by reading the job's eventfd through Go's
 * netpoller, so no OS thread blocks for it. Measured with a prototype here,
 * handing jobs to locked goroutines over Go channels gave 76 k req/s with two
 * threads where this design gave 666 k.
 *
 * The queue is a FIFO list bounded by queue_size (the bound rule); a full
 * queue makes ts_pool_submit fail and the caller answers 503. A thread that
 * finds the queue empty detaches and waits on the condition variable with
 * the GIL released; a thread that finds a job after finishing one keeps the
 * GIL and runs it, unless the turnstile says to hand over (thread.c).
 *
 * Threads are created here with pthread_create, with an explicit stack
 * size (Go-created threads get default attributes), and named ts-py-<i>
 * (at most 15 characters, so `top -H` shows them).
 */
#include "tspy.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int ts_pool_threads;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static ts_job *head, *tail;      /* guarded by lock */
static long queued, busy, idle;  /* guarded by lock */
static long queue_bound;
static int stopping;             /* guarded by lock */
static pthread_t *tids;

/* The waker (see ts_pool_submit): a plain pthread, never attached. */
static pthread_cond_t wcond = PTHREAD_COND_INITIALIZER;
static int waker_sleeping;       /* guarded by lock: in an untimed wait */
static pthread_t waker_tid;
static int waker_started;
static void *waker_main(void *arg);
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

    /* Created on this thread: its thread id and PyGILState binding are
     * fixed at creation. */
    t->tstate = PyThreadState_New(interp);
    t->attached = 0;
    ts_thread_attach(t);

    for (;;) {
        pthread_mutex_lock(&lock);
        job = pop_locked();
        if (job == NULL) {
            pthread_mutex_unlock(&lock);
            ts_thread_detach(t, 0);
            pthread_mutex_lock(&lock);
            while ((job = pop_locked()) == NULL && !stopping) {
                idle++;
                pthread_cond_wait(&cond, &lock);
                idle--;
            }
            if (job != NULL) {
                busy++;
            }
            pthread_mutex_unlock(&lock);
            if (job == NULL) {
                break;
            }
            t->gil_wait_ns = 0;
            ts_thread_attach(t);
        }
        else {
            busy++;
            pthread_mutex_unlock(&lock);
            t->gil_wait_ns = 0;
            ts_thread_yield_if_due(t);
        }
        job->thread_index = t->index;
        job->started_ns = ts_now_ns();
        job->run(job, t);
        pthread_mutex_lock(&lock);
        busy--;
        pthread_mutex_unlock(&lock);
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
    if (tids == NULL || threads == NULL) {
        errno = ENOMEM;
        return -1;
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
    if (n > 1 && ts_turn_enabled) {
        rc = pthread_create(&waker_tid, NULL, waker_main, NULL);
        if (rc != 0) {
            errno = rc;
            return -1;
        }
        waker_started = 1;
    }
    return 0;
}

/* waker_main wakes an idle pool thread for a job that has waited a slice
 * without one: the submitter did not wake a thread because the GIL was
 * held (ts_pool_submit), and the holder may be running a long job. */
static void *
waker_main(void *arg)
{
    (void)pthread_setname_np(pthread_self(), "ts-py-wake");  /* cosmetic */
    pthread_mutex_lock(&lock);
    while (!stopping) {
        struct timespec until;
        int64_t due;

        if (head == NULL || idle == 0) {
            waker_sleeping = 1;
            pthread_cond_wait(&wcond, &lock);
            waker_sleeping = 0;
            continue;
        }
        due = head->enqueued_ns + TS_SLICE_NS;
        if (ts_now_ns() >= due) {
            pthread_cond_signal(&cond);
            due = ts_now_ns() + TS_SLICE_NS;  /* give it a slice to take the job */
        }
        until.tv_sec = due / 1000000000LL;
        until.tv_nsec = due % 1000000000LL;
        (void)pthread_cond_timedwait(&wcond, &lock, &until);  /* ETIMEDOUT is the point */
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* ts_pool_submit queues job and decides whom to wake (the turnstile's
 * dispatch half). An idle thread is woken when it could run at once: no
 * pool thread is busy (nobody else will take the job), or the GIL is free
 * (a busy thread is blocked in I/O or sleeping). While the GIL is held by
 * a busy thread, that thread takes the job at its next boundary, keeping
 * the GIL: no wake-up, no context switch. If it has not within a slice,
 * the waker thread wakes an idle one, so a long job cannot starve the
 * queue. With TURNSTILE_POOL_TURN=0 every submit wakes an idle thread, as
 * a plain pool does. */
int
ts_pool_submit(ts_job *job)
{
    int wake, kick = 0;

    job->enqueued_ns = ts_now_ns();
    job->next = NULL;
    pthread_mutex_lock(&lock);
    if (stopping || queued >= queue_bound) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    job->state = TS_JOB_QUEUED;
    if (tail != NULL) {
        tail->next = job;
    }
    else {
        head = job;
    }
    tail = job;
    queued++;
    wake = idle > 0 && (!ts_turn_enabled || busy == 0 || !ts_gil_locked());
    if (idle > 0 && !wake && waker_sleeping) {
        kick = 1;
    }
    pthread_mutex_unlock(&lock);
    if (wake) {
        pthread_cond_signal(&cond);
    }
    else if (kick) {
        pthread_cond_signal(&wcond);
    }
    return 0;
}

int
ts_pool_cancel(ts_job *job)
{
    ts_job *prev = NULL, *cur;
    int removed = 0;

    pthread_mutex_lock(&lock);
    if (job->state == TS_JOB_QUEUED) {
        for (cur = head; cur != NULL && cur != job; cur = cur->next) {
            prev = cur;
        }
        if (cur != NULL) {
            if (prev != NULL) {
                prev->next = cur->next;
            }
            else {
                head = cur->next;
            }
            if (tail == cur) {
                tail = prev;
            }
            cur->next = NULL;
            cur->state = TS_JOB_IDLE;
            queued--;
            removed = 1;
        }
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
    pthread_cond_broadcast(&cond);
    pthread_cond_broadcast(&wcond);
    pthread_mutex_unlock(&lock);
    if (waker_started) {
        (void)pthread_join(waker_tid, NULL);  /* it exits at once */
    }
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
