/* gilwait.c: time every wait for the GIL, including those inside CPython.
 *
 * Versions: CPython 3.11, 3.12 and 3.13 with the GIL, the layouts below
 * switched on PY_VERSION_HEX; tspy.h refuses any other build at compile
 * time (a free-threaded one included).
 *
 * Notes about the implementation
 * ------------------------------
 * ts_thread_attach can time the waits it causes (PyEval_RestoreThread),
 * but a thread that holds the GIL through a whole job also waits inside
 * CPython: when another thread asks for the GIL, the holder drops it at
 * the next eval-breaker check (the switch interval) and then waits in
 * take_gil to get it back, in the middle of the app's code. Those waits
 * are the convoy the turnstile exists to bound (issue 4), and a metric that
 * only times attaches cannot see them: measured, the TURNSTILE_POOL_TURN=0
 * arm of bench/probe-pool-fairness showed a p99 GIL wait of 0.01 ms while
 * its request p99 showed the convoy.
 *
 * CPython waits for the GIL in exactly one place, take_gil, on the GIL's
 * condition variable with pthread_cond_timedwait (a wait of `interval`,
 * then a drop request, then again; Python/ceval_gil.c, 3.11 to 3.13).
 * libpython calls pthread_cond_timedwait through its PLT, and the dynamic
 * linker binds that to the executable's definition first: so this file
 * defines pthread_cond_timedwait, forwards every call to glibc's, and for
 * waits on the GIL's own condition variable adds the time to the calling
 * turnstile thread's gil_wait_ns. Other condition variables pass through
 * with one pointer comparison. Python's own locks (threading.Lock) use
 * semaphores, not this call.
 *
 * The same wait is where the turnstile orders fresh work before a view
 * that CPython made drop the GIL (docs/design.md, "Fresh work before a
 * CPU-bound view's next turn"): a pool thread in ts_thread_attach caps each
 * wait at one slice, so take_gil asks for the GIL after a slice; a pool
 * thread waiting mid-job lets a thread waiting to attach go first
 * (pass_to_fresh) and asks back after one switch interval of its whole
 * wait, or after the first slice of a holder that took the GIL as fresh
 * work. TURNSTILE_POOL_TURN=0 leaves every wait as CPython asked.
 *
 * ts_gilwait_init checks that the binding took (the executable's symbol
 * is the one the process resolves); if it did not, ts_gilwait_active stays
 * 0 and ts_thread_attach times attaches as before.
 */
#define _GNU_SOURCE
#define Py_BUILD_CORE 1
#include "tspy.h"
#if PY_VERSION_HEX >= 0x030C0000
#include "internal/pycore_interp.h"
#else
#include "internal/pycore_runtime.h"
#endif

#include <dlfcn.h>
#include <pthread.h>

_Atomic unsigned long ts_gil_passes;

typedef int (*timedwait_fn)(pthread_cond_t *, pthread_mutex_t *,
                            const struct timespec *);

static timedwait_fn real_timedwait;
static void *gil_cond;          /* &gil->cond, set once by ts_gilwait_init */
static struct _gil_runtime_state *gil_state;  /* set once by ts_gilwait_init */
int ts_gilwait_active;          /* waits are timed here, not at attach */

static timedwait_fn
resolve(void)
{
    timedwait_fn f = __atomic_load_n(&real_timedwait, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        f = (timedwait_fn)dlvsym(RTLD_NEXT, "pthread_cond_timedwait", "GLIBC_2.3.2");
        if (f == NULL) {
            f = (timedwait_fn)dlsym(RTLD_NEXT, "pthread_cond_timedwait");
        }
        __atomic_store_n(&real_timedwait, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* gil_locked reads gil->locked (an int in 3.13, a one-member atomic
 * wrapper before). */
static inline int
gil_locked(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return __atomic_load_n(&gil_state->locked, __ATOMIC_RELAXED);
#else
    return __atomic_load_n(&gil_state->locked._value, __ATOMIC_RELAXED);
#endif
}

/* The latest attach of a pool thread (fresh work): its thread state, the
 * GIL's switch_number just after it, and when. */
static _Atomic(PyThreadState *) fresh_tstate;
static _Atomic unsigned long fresh_switch;
static _Atomic int64_t fresh_attach_ns;

/* ts_gilwait_attached records a pool thread's attach (thread.c, with the
 * GIL just taken). */
void
ts_gilwait_attached(ts_thread *t, int64_t now)
{
    if (gil_state == NULL) {
        return;
    }
    atomic_store_explicit(&fresh_switch,
                          __atomic_load_n(&gil_state->switch_number, __ATOMIC_RELAXED),
                          memory_order_relaxed);
    atomic_store_explicit(&fresh_attach_ns, now, memory_order_relaxed);
    atomic_store_explicit(&fresh_tstate, t->tstate, memory_order_relaxed);
}

/* holder_is_fresh says whether the GIL's holder took it in
 * ts_thread_attach (fresh work) and has held it since (no switch). */
static inline int
holder_is_fresh(void)
{
    PyThreadState *h = ts_gil_holder();
    return h != NULL && h == atomic_load_explicit(&fresh_tstate, memory_order_relaxed)
           && __atomic_load_n(&gil_state->switch_number, __ATOMIC_RELAXED)
              == atomic_load_explicit(&fresh_switch, memory_order_relaxed);
}
/* ns_timespec turns CLOCK_MONOTONIC nanoseconds into the GIL condition
 * variable's absolute deadline. */
static inline struct timespec
ns_timespec(int64_t ns)
{
    struct timespec ts = {ns / 1000000000LL, ns % 1000000000LL};
    return ts;
}

/* interval_ns is CPython's switch interval (sys.setswitchinterval). */
static inline int64_t
interval_ns(void)
{
    return (int64_t)__atomic_load_n(&gil_state->interval, __ATOMIC_RELAXED) * 1000;
}

/* pass_to_fresh is the second half of the turnstile (thread.c has the
 * first): a pool thread woken in the middle of its job (it was made to
 * drop the GIL at a switch interval, or it is back from a blocking call)
 * while a thread waits to attach with fresh work lets that thread take the
 * GIL first. It broadcasts the GIL's condition variable and waits again,
 * TS_PASS_WAIT_NS at a time, until the GIL is taken, nobody waits to
 * attach, or its own wait for the GIL has lasted TS_PASS_MAX_INTERVALS
 * switch intervals (so a stream of fresh jobs cannot starve it). Called
 * with gil->mutex held, as returned by the wait; returns with it held.
 * Returns 0 ("signalled") when it passed, so take_gil does not ask the
 * new holder to drop the GIL at once; else the wait's own result. */
static int
pass_to_fresh(ts_thread *t, pthread_cond_t *cond, pthread_mutex_t *mutex,
              int ret, timedwait_fn f)
{
    int64_t now = ts_now_ns();
    int64_t budget = interval_ns() * TS_PASS_MAX_INTERVALS;
    int passed = 0;

    while (!gil_locked()
           && atomic_load_explicit(&ts_waiting, memory_order_relaxed) > 0
           && now - t->mid_wait_start_ns < budget) {
        struct timespec ts = ns_timespec(now + TS_PASS_WAIT_NS);
        pthread_cond_broadcast(cond);
        f(cond, mutex, &ts);
        passed = 1;
        now = ts_now_ns();
    }
    if (passed) {
        atomic_fetch_add_explicit(&ts_gil_passes, 1, memory_order_relaxed);
        ret = 0;
    }
    return ret;
}

int
pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex,
                       const struct timespec *abstime)
{
    timedwait_fn f = resolve();
    ts_thread *t;
    int64_t start;
    int ret, mid_job;
    struct timespec capped;

    if ((void *)cond != __atomic_load_n(&gil_cond, __ATOMIC_RELAXED)
        || (t = ts_thread_current()) == NULL) {
        return f(cond, mutex, abstime);
    }
    start = ts_now_ns();
    mid_job = 0;
    if (t->kind == TS_KIND_POOL && ts_turn_enabled
        && atomic_load_explicit(&ts_turn_threads, memory_order_relaxed) > 1) {
        int64_t cap, dl;
        if (!t->attached) {
            /* In ts_thread_attach: fresh work. It asks for the GIL after
             * one slice instead of one switch interval: take_gil sets the
             * drop request when a wait times out with no switch in
             * between. */
            cap = start + TS_SLICE_NS;
        }
        else {
            /* Attached, so inside take_gil in the middle of its job. Its
             * whole wait, not each wait since the last switch, is what
             * counts: once it reaches one switch interval the thread asks
             * for the GIL back, and after that every slice without a
             * switch, so fresh work that keeps arriving (and takes the
             * GIL after a slice) cannot starve it. */
            int64_t due;
            mid_job = 1;
            if (t->mid_wait_start_ns == 0) {
                t->mid_wait_start_ns = start; /* this take_gil's first wait */
            }
            due = t->mid_wait_start_ns + interval_ns();
            /* The holder took the GIL with fresh work and has kept it
             * since: it gets one slice, then we ask back. Without this a
             * CPU-bound request that keeps being displaced by new ones
             * (each taking the GIL after a slice and keeping it for its
             * whole view when that is shorter than the interval) runs
             * only in the gaps between them. */
            if (holder_is_fresh()) {
                int64_t fresh_due = atomic_load_explicit(&fresh_attach_ns, memory_order_relaxed)
                                    + TS_SLICE_NS;
                if (fresh_due < due) {
                    due = fresh_due;
                }
            }
            cap = due > start ? due : start + TS_SLICE_NS;
        }
        dl = (int64_t)abstime->tv_sec * 1000000000LL + abstime->tv_nsec;
        if (cap < dl) {
            capped = ns_timespec(cap);
            abstime = &capped;
        }
    }
    ret = f(cond, mutex, abstime);
    if (mid_job) {
        ret = pass_to_fresh(t, cond, mutex, ret, f);
        if (!gil_locked()) {
            t->mid_wait_start_ns = 0; /* take_gil takes it now */
        }
    }
    t->gil_wait_ns += ts_now_ns() - start;
    return ret;
}

/* ts_gilwait_init finds the GIL's condition variable and checks that
 * libpython's calls reach pthread_cond_timedwait above. With the GIL held,
 * once, after Py_Initialize. */
void
ts_gilwait_init(void)
{
    void *cond;

#if PY_VERSION_HEX >= 0x030C0000
    gil_state = PyInterpreterState_Get()->ceval.gil;
#else
    gil_state = &_PyRuntime.ceval.gil;
#endif
    cond = &gil_state->cond;
    resolve();
    if (dlsym(RTLD_DEFAULT, "pthread_cond_timedwait") != (void *)pthread_cond_timedwait) {
        return; /* not interposed: attaches stay timed in thread.c */
    }
    __atomic_store_n(&gil_cond, cond, __ATOMIC_RELAXED);
    ts_gilwait_active = 1;
}

/* ts_gil_holder returns the thread state holding the GIL, or NULL when it
 * is free. Read racily without the GIL (the watchdog's sampler, like
 * faulthandler's): locked and last_holder are an int and a pointer in
 * 3.13, one-member atomic wrappers (_value) before. Any thread. */
PyThreadState *
ts_gil_holder(void)
{
    if (gil_state == NULL) {
        return NULL;
    }
    if (!gil_locked()) {
        return NULL;
    }
#if PY_VERSION_HEX >= 0x030D0000
    return __atomic_load_n(&gil_state->last_holder, __ATOMIC_RELAXED);
#else
    return (PyThreadState *)__atomic_load_n(&gil_state->last_holder._value, __ATOMIC_RELAXED);
#endif
}

/* ts_tstate_native_id returns the OS thread id of tstate (gettid). */
unsigned long
ts_tstate_native_id(PyThreadState *tstate)
{
    return tstate->native_thread_id;
}

unsigned long
ts_gil_pass_count(void)
{
    return atomic_load_explicit(&ts_gil_passes, memory_order_relaxed);
}
