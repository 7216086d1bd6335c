/* thread.c: the attach pair and the turnstile barrier.
 *
 * Notes about the implementation
 * ------------------------------
 * ts_thread_attach and ts_thread_detach are the only callers of
 * PyEval_RestoreThread and PyEval_SaveThread in the server. Every Python
 * thread the server owns (pool threads, loop threads, the sampler, the main
 * thread) holds one ts_thread with one PyThreadState for its whole life.
 *
 * The turnstile (DESIGN.md, "The turnstile"): on a GIL build a thread that
 * finishes a job, takes the next job and re-attaches usually wins the GIL
 * back before the threads it signalled are scheduled, so a job another
 * thread took waits out a convoy. Two counters are shared:
 *
 *   ts_waiting   threads inside ts_thread_attach, not yet attached
 *   ts_attaches  attaches completed
 *
 * A thread's *run* is the wall time since another thread last completed an
 * attach. At a job boundary, a thread whose run has reached TS_SLICE_NS and
 * that detaches while someone waits yields (sched_yield, bounded at one
 * slice) until ts_attaches moves. It also yields when the longest-waiting
 * pool thread has waited a slice (each thread stamps wait_start_ns while
 * inside ts_thread_attach): with four threads on 0.3 ms jobs, runs of four
 * jobs alone still made the last of three waiters wait about 3.6 ms. Nothing is held across a job, the
 * uncontended path makes no syscall, and a pool of one has no barrier.
 * TURNSTILE_POOL_TURN=0 turns the barrier off for A/B runs.
 *
 * The GIL is one per process, so the turnstile's state is too, however
 * many pools a worker holds (pool.c): the counters above, and the list of
 * every pool's threads (ts_turn_register) whose wait starts the barrier
 * scans and whose number says whether there is a barrier at all (fewer
 * than two pool threads in the process: none). With one pool this is
 * that pool's threads, as before pools were values.
 *
 * What the barrier cannot govern: CPython itself drops and retakes the GIL
 * inside blocking calls and every switch interval, and threads the app
 * starts attach on their own. The barrier governs job boundaries only;
 * inside CPython's own wait, gilwait.c lets fresh work go first.
 */
#include "tspy.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

int ts_turn_enabled = 1;
_Atomic long ts_waiting;
_Atomic unsigned long ts_attaches;
_Atomic unsigned long ts_attaches_by_kind[TS_KIND_COUNT];
_Atomic unsigned long ts_barrier_yields;

/* The thread that completed the latest attach, and when. */
static _Atomic(ts_thread *) last_attacher;
static _Atomic int64_t last_attach_ns;

/* Every pool's threads, linked by turn_next, newest first: pushed by
 * ts_turn_register before each thread starts, never removed (a pool is
 * never freed). Written under turn_mu, read without a lock. */
static pthread_mutex_t turn_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(ts_thread *) turn_threads;
_Atomic int ts_turn_threads;   /* how many: the barrier is off below two */

static __thread ts_thread *current_thread;

int64_t
ts_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

ts_thread *
ts_thread_current(void)
{
    return current_thread;
}

int64_t
ts_thread_attach(ts_thread *t)
{
    int64_t start, now;

    if (t->attached) {
        return 0;
    }
    current_thread = t;
    start = ts_now_ns();
    atomic_store_explicit(&t->wait_start_ns, start, memory_order_relaxed);
    atomic_fetch_add_explicit(&ts_waiting, 1, memory_order_relaxed);
    PyEval_RestoreThread(t->tstate);
    atomic_fetch_sub_explicit(&ts_waiting, 1, memory_order_relaxed);
    atomic_store_explicit(&t->wait_start_ns, 0, memory_order_relaxed);
    now = ts_now_ns();
    t->attached = 1;

    /* A new run starts when someone else attached since our last attach. */
    if (atomic_load_explicit(&last_attacher, memory_order_relaxed) != t) {
        t->run_start_ns = now;
        atomic_store_explicit(&last_attacher, t, memory_order_relaxed);
    }
    atomic_store_explicit(&last_attach_ns, now, memory_order_relaxed);
    if (t->kind == TS_KIND_POOL) {
        ts_gilwait_attached(t, now);
    }
    atomic_fetch_add_explicit(&ts_attaches, 1, memory_order_release);
    atomic_fetch_add_explicit(&ts_attaches_by_kind[t->kind], 1,
                              memory_order_relaxed);
    if (!ts_gilwait_active) {
        t->gil_wait_ns += now - start; /* else gilwait.c timed it */
    }
    return now - start;
}

void
ts_turn_register(ts_thread *t)
{
    pthread_mutex_lock(&turn_mu);
    t->turn_next = atomic_load_explicit(&turn_threads, memory_order_relaxed);
    atomic_store_explicit(&turn_threads, t, memory_order_release);
    atomic_fetch_add_explicit(&ts_turn_threads, 1, memory_order_relaxed);
    pthread_mutex_unlock(&turn_mu);
}

int64_t
ts_turn_oldest_wait(int64_t now)
{
    int64_t oldest = 0;
    ts_thread *t;

    /* Racy reads of each thread's wait start: a scan of a few entries
     * with no lock and no syscall, on the barrier's path only. */
    for (t = atomic_load_explicit(&turn_threads, memory_order_acquire); t != NULL; t = t->turn_next) {
        int64_t since = atomic_load_explicit(&t->wait_start_ns, memory_order_relaxed);
        if (since > 0 && now - since > oldest) {
            oldest = now - since;
        }
    }
    return oldest;
}

/* barrier_due says whether t must hand the GIL over at this boundary. */
static inline int
barrier_due(ts_thread *t, int64_t now)
{
    if (!ts_turn_enabled || t->kind != TS_KIND_POOL
        || atomic_load_explicit(&ts_turn_threads, memory_order_relaxed) < 2) {
        return 0;
    }
    if (atomic_load_explicit(&ts_waiting, memory_order_relaxed) == 0) {
        return 0;
    }
    /* The run began at our own attach, or later if another thread has
     * attached since (we then got the GIL back inside CPython). */
    int64_t start = t->run_start_ns;
    if (atomic_load_explicit(&last_attacher, memory_order_relaxed) != t) {
        int64_t other = atomic_load_explicit(&last_attach_ns,
                                             memory_order_relaxed);
        if (other > start) {
            start = other;
        }
    }
    if (now - start >= TS_SLICE_NS) {
        return 1;
    }
    /* A waiter that has already waited a slice is owed the GIL even if
     * this run is short: this bounds the wait of each thread, not just
     * the length of each run. */
    return ts_turn_oldest_wait(now) >= TS_SLICE_NS;
}

/* barrier_wait spins with sched_yield until another attach completes or
 * one slice has passed. Detached. */
static void
barrier_wait(unsigned long seen, int64_t since)
{
    atomic_fetch_add_explicit(&ts_barrier_yields, 1, memory_order_relaxed);
    while (atomic_load_explicit(&ts_attaches, memory_order_acquire) == seen) {
        if (ts_now_ns() - since >= TS_SLICE_NS) {
            break;
        }
        sched_yield();
    }
}

void
ts_thread_detach(ts_thread *t, int boundary)
{
    int64_t now = 0;
    int due = 0;
    unsigned long seen = 0;

    if (!t->attached) {
        return;
    }
    if (boundary) {
        now = ts_now_ns();
        due = barrier_due(t, now);
        seen = atomic_load_explicit(&ts_attaches, memory_order_acquire);
    }
    t->attached = 0;
    t->tstate = PyEval_SaveThread();
    if (due) {
        barrier_wait(seen, now);
    }
}

int
ts_thread_yield_if_due(ts_thread *t)
{
    int64_t now = ts_now_ns();
    unsigned long seen;

    if (!barrier_due(t, now)) {
        return 0;
    }
    seen = atomic_load_explicit(&ts_attaches, memory_order_acquire);
    t->attached = 0;
    t->tstate = PyEval_SaveThread();
    barrier_wait(seen, now);
    ts_thread_attach(t);
    return 1;
}

unsigned long
ts_attach_count(int kind)
{
    return atomic_load_explicit(&ts_attaches_by_kind[kind], memory_order_relaxed);
}

unsigned long
ts_barrier_yield_count(void)
{
    return atomic_load_explicit(&ts_barrier_yields, memory_order_relaxed);
}
