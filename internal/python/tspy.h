/* tspy.h: the private C interface of turnstile's Python bridge.
 *
 * Shared by internal/python (interpreter, Python threads, attach pair, job
 * queue) and the interface packages (internal/wsgi) that run jobs on those
 * threads. Everything here is called from C or through cgo; see doc.go for
 * the flow and DESIGN.md for the rules (GIL, crossing, object, bound).
 */
#ifndef TSPY_H
#define TSPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdatomic.h>
#include <string.h>

#include "wakelist.h"

/* The versions this bridge is written and tested for. gilwait.c and
 * sample.c read CPython's private structures (the GIL's state, the frame
 * chain) with a layout per minor version: 3.11, 3.12 and 3.13 with the
 * GIL. Anything else is refused here, at compile time, rather than
 * miscompiled. */
#if defined(Py_GIL_DISABLED)
#error "turnstile: free-threaded CPython (Py_GIL_DISABLED) is not supported yet; build with a GIL build of CPython 3.11-3.13"
#endif
#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "turnstile: CPython 3.11, 3.12 or 3.13 is needed (make build PYTHON=...)"
#endif

/* ---- the attach pair (thread.c) -------------------------------------- */

/* Kinds of thread that attach through the pair; counted in metrics. */
enum ts_thread_kind {
    TS_KIND_POOL = 0,
    TS_KIND_LOOP = 1,
    TS_KIND_SAMPLER = 2,
    TS_KIND_MAIN = 3,
    TS_KIND_COUNT = 4
};

typedef struct ts_pool ts_pool;

/* One per Python thread that the server owns, created on that thread and
 * kept for the thread's whole life (a fresh PyGILState_Ensure per request
 * measured 8-10 us). */
typedef struct ts_thread {
    PyThreadState *tstate;
    int kind;
    int index;              /* within its pool */
    ts_pool *pool;          /* TS_KIND_POOL: the pool it serves; else NULL */
    struct ts_thread *turn_next; /* the turnstile's list of pool threads (thread.c) */
    int attached;           /* the pair is not re-entrant: it checks this */
    int64_t run_start_ns;   /* start of this thread's current run */
    int64_t gil_wait_ns;    /* summed over attaches since last reset */
    _Atomic int64_t wait_start_ns; /* inside ts_thread_attach since; 0 = not waiting */
    int64_t mid_wait_start_ns; /* waiting for the GIL mid-job since (gilwait.c); 0 = not */
} ts_thread;

/* ts_thread_attach takes the GIL for t (PyEval_RestoreThread), counting it
 * as waiting meanwhile. Returns the nanoseconds spent waiting. Detached on
 * entry, attached on return. */
int64_t ts_thread_attach(ts_thread *t);

/* ts_thread_detach releases the GIL (PyEval_SaveThread). At a job
 * boundary (boundary != 0) it applies the turnstile barrier: a thread whose
 * run has reached TS_SLICE_NS while another waits yields until another
 * attach completes, at most one slice. Attached on entry, detached on
 * return. */
void ts_thread_detach(ts_thread *t, int boundary);

/* ts_thread_yield_if_due gives the GIL away at a job boundary when the
 * barrier says so (detach + barrier + attach) and returns 1; returns 0 when
 * nothing was due. Attached on entry and return. */
int ts_thread_yield_if_due(ts_thread *t);

/* The thread running the caller, or NULL for a thread the server does not
 * own. */
/* ts_init_layer_module makes _turnstile_layer (layer.c), the Channels
 * layer's entry into Go. */
PyObject *ts_init_layer_module(void);

ts_thread *ts_thread_current(void);

int64_t ts_now_ns(void);

/* gilwait.c: GIL waits inside CPython (take_gil), timed per thread. */
void ts_gilwait_init(void);
extern int ts_gilwait_active;
PyThreadState *ts_gil_holder(void);
unsigned long ts_tstate_native_id(PyThreadState *tstate);

/* The final statuses an app may send: RFC 9110 §15 defines status codes
 * as 100-599; the 1xx are the server's (100 Continue, 101 through an
 * accepted upgrade). Anything else from an app is a logged 500. */
#define TS_STATUS_FINAL_MIN 200
#define TS_STATUS_FINAL_MAX 599

/* Turnstile parameters and counters (read by Go for metrics). */
#define TS_SLICE_NS 1000000LL   /* 1 ms: the barrier's slice */
/* A pool thread woken mid-job lets threads waiting to attach go first
 * (gilwait.c), re-checking every TS_PASS_WAIT_NS, for at most
 * TS_PASS_MAX_INTERVALS switch intervals of its own wait. */
#define TS_PASS_WAIT_NS 200000LL /* 0.2 ms */
#define TS_PASS_MAX_INTERVALS 2
extern _Atomic unsigned long ts_gil_passes;
extern int ts_turn_enabled;     /* TURNSTILE_POOL_TURN=0 clears it */
extern _Atomic int ts_turn_threads; /* pool threads of every pool (thread.c) */
extern _Atomic long ts_waiting;
extern _Atomic unsigned long ts_attaches;
extern _Atomic unsigned long ts_attaches_by_kind[TS_KIND_COUNT];
extern _Atomic unsigned long ts_barrier_yields;
unsigned long ts_attach_count(int kind);   /* for Go: cgo cannot read _Atomic */
unsigned long ts_barrier_yield_count(void);
unsigned long ts_gil_pass_count(void);
void ts_gilwait_attached(ts_thread *t, int64_t now);
/* ts_turn_register puts a pool thread on the turnstile's list, before the
 * thread starts (pool.c). Any thread. */
void ts_turn_register(ts_thread *t);
/* The longest any pool thread has been waiting to attach, in ns (0: none).
 * Racy reads, no lock; any thread. */
int64_t ts_turn_oldest_wait(int64_t now);

/* ---- jobs and the pool (pool.c) -------------------------------------- */

typedef struct ts_job ts_job;

/* ts_job is the head of every unit of work handed to a pool. run is
 * called on a pool thread, attached, and must leave no exception set; it
 * ends by listing the job on its pool's done list (ts_pool_done with
 * t->pool). */
struct ts_job {
    ts_job *next, *prev;     /* the queue (pool.c): doubly linked, so that a
                                withdrawal (ts_pool_cancel) is O(1) */
    void (*run)(ts_job *job, ts_thread *t);
    int64_t enqueued_ns;
    int64_t started_ns;
    int64_t gil_wait_ns;     /* GIL wait for this job, all attaches summed */
    uintptr_t go_id;         /* Go's name for the job, handed to Go's
                                dispatcher (the done list's id_of) */
    ts_wakenode done;        /* on the pool's done list (pool.c) */
    int thread_index;        /* the pool thread running it (for sampling) */
    int state;               /* TS_JOB_*, guarded by the pool lock */
    int lane;                /* set by the submit: the lane it was queued on, -1 the shared queue */
    uint64_t tag;            /* the submitter's name for its connection (lanes.c stats) */
};

enum { TS_JOB_IDLE = 0, TS_JOB_QUEUED = 1, TS_JOB_RUNNING = 2 };

/* A pool's name prefixes its threads' names: <name>-<i>, 15 characters at
 * most with the index. */
#define TS_POOL_NAME_MAX 9

/* ts_pool_start makes a pool: n Python threads named <name>-<i> (under
 * SCHED_BATCH when batch != 0), each with a stack of stack_bytes (0:
 * the default), a job queue bounded at queue_size jobs and a done list
 * with its eventfd. Returns the pool, or NULL with errno set (EINVAL for
 * n < 1 or a name longer than TS_POOL_NAME_MAX). Called detached, after
 * the interpreter started. */
ts_pool *ts_pool_start(const char *name, int n, int queue_size, size_t stack_bytes, int batch);

/* ts_pool_submit queues job on p. Returns 0, or -1 when the queue is full
 * or the pool is stopping. Never blocks, never attaches. */
int ts_pool_submit(ts_pool *p, ts_job *job);

/* ts_pool_cancel removes job from p's queue if it is still queued: returns
 * 1 if removed, 0 if a thread already took it (or it was not queued).
 * Under the pool's lock, where a thread takes a job: take and withdraw
 * cannot both win. O(1). Never blocks for long, never attaches. */
int ts_pool_cancel(ts_pool *p, ts_job *job);

/* ts_pool_stop wakes every thread of p, lets running jobs finish and joins
 * the threads. Queued jobs are left for the caller (it cancels them
 * first). Blocks until every thread ended. */
void ts_pool_stop(ts_pool *p);

typedef struct ts_pool_stats {
    long threads, busy, idle, queued, queue_size;  /* busy: running a job; idle: waiting for work */
} ts_pool_stats;
void ts_pool_get_stats(ts_pool *p, ts_pool_stats *s);

/* ts_pool_tstate returns thread i's thread state, for sampling (NULL out
 * of range, or before the thread made it). */
PyThreadState *ts_pool_tstate(ts_pool *p, int i);

/* The done list: a finished job is listed with ts_pool_done (once per
 * run, from the pool thread); Go's dispatcher (python.Dispatcher) is its
 * one consumer, woken by the list's eventfd once per burst, and takes
 * the jobs' go_ids with ts_wakelist_take_ids (the list's id_of). */
ts_wakelist *ts_pool_done_list(ts_pool *p);
void ts_pool_done(ts_pool *p, ts_job *job);

/* ---- the request block (internal/reqblock) --------------------------- */

/* The request head Go validated and wrote for a Python thread (Go's
 * internal/reqblock.AppendEntry): a flat run of entries, each
 *   uint16 id (0 = the key follows), uint16 key length, uint32 value
 *   length, the key bytes (only when id is 0), the value bytes,
 * in native byte order, without padding. Each interface gives the ids
 * its meaning (WSGI: environ keys, wsgi.h; ASGI: TS_SC_*, asgi.h) and
 * decodes the bytes (latin-1 environ values, ASGI's bytes and str).
 * This is the one reader: WSGI's environ.c and ASGI's scope.c. */
#define TS_ENTRY_HDR 8

typedef struct ts_entry {
    uint16_t id;
    uint16_t klen;          /* 0 unless id is 0 */
    uint32_t vlen;
    const char *key, *val;  /* into the block */
} ts_entry;

/* ts_entry_next reads the entry at p into e and returns where the next
 * one starts. The caller counts the entries (Go sends their number). */
static inline const char *
ts_entry_next(const char *p, ts_entry *e)
{
    memcpy(&e->id, p, 2);
    memcpy(&e->klen, p + 2, 2);
    memcpy(&e->vlen, p + 4, 4);
    e->key = p + TS_ENTRY_HDR;
    e->val = e->key + e->klen;
    return e->val + e->vlen;
}

/* ---- lanes: a queue per thread (lanes.c) ------------------------------ */

/* ts_pool_submit_to queues job on thread i's own lane of p. Returns 0, or
 * -1 when i is out of range, the pool is stopping, or the lanes together
 * hold queue_size jobs (the bound rule). Never blocks, never attaches.
 * Lane jobs are not withdrawn (ts_pool_cancel leaves them). */
int ts_pool_submit_to(ts_pool *p, int i, ts_job *job);

enum { TS_BIND_SESSION = 0, TS_BIND_HTTP = 1 };
/* ts_pool_bind counts a connection on the least-loaded thread of p and
 * returns its index, or -1 when limit connections are bound already
 * (limit < 0: no limit). TS_BIND_SESSION orders by (bound, queued +
 * running, index), TS_BIND_HTTP by (bound + running, queued, index).
 * tag names the connection (its tag is listed on the thread until
 * ts_pool_unbind with the same tag uncounts it). Any thread; never blocks
 * for long. */
int ts_pool_bind(ts_pool *p, int policy, long limit, uint64_t tag);
void ts_pool_unbind(ts_pool *p, int i, uint64_t tag);
/* ts_pool_thread_tags copies up to max tags of the connections bound to
 * thread i (the bind's tag) into out and returns how many. */
int ts_pool_thread_tags(ts_pool *p, int i, uint64_t *out, int max);
int ts_pool_threads(ts_pool *p);

/* Thread i of a pool, read under the pool's lock. Monotonic ns; 0 for
 * "none". reset != 0 resets wait_max_ns (the longest wait since the last
 * reset: the metrics scrape). waiting_conns: distinct tags among the queued jobs (at most 64). */
typedef struct ts_lane_stats {
    long bound, queued, waiting_conns;
    int64_t running_since_ns, oldest_enqueued_ns, busy_ns, wait_max_ns;
    uint64_t running_tag, calls;
} ts_lane_stats;
void ts_pool_thread_stats(ts_pool *p, int i, ts_lane_stats *out, int reset);

/* ---- stack sampling without the GIL (sample.c) ------------------------ */

size_t ts_sample_stack(PyThreadState *tstate, char *out, size_t cap);

/* ---- buffers and header checks (bytes.c) ----------------------------- */

/* ts_buf_reserve makes *buf hold need bytes (doubling). 0, or -1 on
 * out-of-memory with no exception set: usable without the GIL. */
int ts_buf_reserve(char **buf, size_t *cap, size_t need);
/* ts_buf_grow makes room for n more bytes after len, refusing to pass bound
 * (0 = none). 0, or -1 with ValueError or MemoryError set. Attached. */
int ts_buf_grow(char **buf, size_t *cap, size_t len, size_t n, size_t bound);
int ts_is_tchar(unsigned char c);
/* ts_text_utf8 returns the UTF-8 of str s for the log, never failing on
 * its content: a lone surrogate (os.fsdecode of a non-UTF-8 name, a
 * surrogateescape'd byte) is written as \udcff, as Python's stderr does
 * (backslashreplace). *hold keeps the bytes alive (Py_XDECREF it after
 * use). NULL only on out-of-memory, exception set. Attached. */
const char *ts_text_utf8(PyObject *s, Py_ssize_t *n, PyObject **hold);
/* ts_text_dup is ts_text_utf8 into malloc'd, NUL-terminated memory (the
 * caller frees it); "(unprintable error)" when s is not a str. Never sets
 * an exception. Attached. */
char *ts_text_dup(PyObject *s);
int ts_ascii_ieq(const char *a, Py_ssize_t n, const char *lit);
/* ts_list_has_token reports whether a comma-separated field value (RFC
 * 9110 §5.6.1, e.g. Connection) lists the token lit, lower case, compared
 * case-insensitively. */
int ts_list_has_token(const char *v, Py_ssize_t n, const char *lit);
/* ts_check_field validates one response header field (RFC 9110 sections
 * 5.1, 5.5): a token name, a value without CR, LF, NUL or other controls
 * but HTAB. 0, or -1 with ValueError set naming the header. Attached. */
int ts_check_field(const char *name, Py_ssize_t nlen, const char *val, Py_ssize_t vlen,
                   PyObject *name_obj, PyObject *val_obj);
/* ts_parse_content_length parses 1*DIGIT (at most 18). 0, or -1 with
 * ValueError set. */
int ts_parse_content_length(const char *val, Py_ssize_t vlen, int64_t *out);

/* ---- interpreter (interp.c) ------------------------------------------ */

typedef struct ts_interp_config {
    const char *program_name;   /* sys.executable: the venv's or the build's python */
    const char *home;           /* optional PYTHONHOME override, NULL = derived */
    const char *bootstrap_src;  /* python/turnstile/_bootstrap.py */
    const char *app_dir;        /* put first on sys.path */
    const char *app_spec;       /* MODULE:ATTR */
    int factory;
    const char *interface;      /* auto|wsgi|asgi */
    double switch_interval;     /* seconds; <= 0 leaves CPython's default */
    int workers;                /* for wsgi.multiprocess */
    const char *log_config;     /* logging configuration file, "" = none */
    const char *log_config_kind; /* json|yaml|ini */
    /* Called in order on the main thread, attached, after the app loaded:
     * each interface sets up its types and caches. Each returns 0, or -1
     * with an exception set. Unused entries are NULL. */
    int (*after_load[4])(void);
} ts_interp_config;

/* ts_interp_start initialises CPython on a dedicated main thread, runs the
 * bootstrap and loads the app. Blocks until done. Returns 0 and sets *kind
 * ("wsgi"/"asgi"), or -1 with *err a malloc'd message (traceback included)
 * that the caller frees. */
int ts_interp_start(const ts_interp_config *cfg, char **kind, char **err);

/* ts_interp_shutdown runs atexit handlers and logging.shutdown() on the
 * main Python thread and flushes stdio. It does not finalise (DESIGN.md). */
void ts_interp_shutdown(void);

/* The loaded app (a strong reference owned by interp.c) and the bootstrap
 * module; valid after ts_interp_start returned 0. */
extern int ts_workers;         /* worker processes, for wsgi.multiprocess */
extern PyObject *ts_app;
extern PyObject *ts_bootstrap;

/* ts_format_exception fetches and clears the current exception and returns
 * a malloc'd "Traceback ...\nType: message" text, or NULL. Attached. */
char *ts_format_exception(void);

/* ts_log sends one record to the server log (level: 10 debug .. 50
 * critical). Attached on entry and return; detaches around the Go call. */
void ts_log(int level, const char *msg, Py_ssize_t len);
/* ts_log_fields is ts_log with nkv/2 fields: kv holds key, value, key,
 * value... (UTF-8, lengths in kvlen), borrowed for the call. */
void ts_log_fields(int level, const char *msg, Py_ssize_t len, char **kv, int *kvlen, int nkv);

#endif /* TSPY_H */
