/* call.c: sync calls of an async app, run on turnstile's pool threads.
 *
 * Notes about the implementation
 * ------------------------------
 * docs/design.md, "Sync work of async apps". asgiref runs a
 * thread-sensitive call through loop.run_in_executor(executor, fn); the
 * executor _asgi.py installs for a pool thread calls call_submit here on
 * the loop thread. call_submit wraps fn and the loop's own asyncio future
 * in a ts_call (a ts_job head) and queues it on that thread's lane
 * (ts_pool_submit_to, internal/python/lanes.c): no cgo crossing, no Go.
 * The pool thread runs fn in a fresh context (asgiref's function enters
 * the caller's copy itself) and hands the call back on the loop's own
 * queue as a TS_EV_CALL_DONE event (queue.c, ts_asgi_push): one eventfd
 * write per burst, none while the loop is awake. The loop's drain
 * (loop.c) completes the future there: run_in_executor passes an asyncio
 * future through asyncio.wrap_future unchanged (futures.py), so no
 * call_soon_threadsafe and no self-pipe write per call.
 *
 * A call submitted from outside a turnstile loop (no bridge) carries a
 * concurrent.futures.Future, which the pool thread completes itself. A
 * call whose future was cancelled before a thread took it is skipped, as
 * ThreadPoolExecutor does. A call the loop refuses (it is stopping) is
 * dropped on the pool thread. Every reference is dropped attached, on a
 * Python thread (the object rule).
 *
 * The pools: Go sets them once, before the loop starts
 * (ts_asgi_set_pools); index 0 is the HTTP pool, 1 the session pool; NULL
 * is "off".
 */
#include "asgi.h"

#include <stdlib.h>
#include <string.h>

typedef struct ts_call {
    ts_job job;               /* first: a job is its call */
    PyObject *fn;             /* called with no arguments */
    PyObject *fut;            /* asyncio future (loop != NULL) or concurrent future */
    PyObject *value;          /* result or exception, once run */
    int ok;
    ts_loop *loop;
} ts_call;

static ts_pool *pools[2];
static long http_limit = -1;

void
ts_asgi_set_pools(void *http, void *sess, long http_bound)
{
    pools[0] = http;
    pools[1] = sess;
    http_limit = http_bound;
}

static void
call_free(ts_call *c)
{
    Py_XDECREF(c->fn);
    Py_XDECREF(c->fut);
    Py_XDECREF(c->value);
    free(c);
}

/* call_exception fetches the raised exception, its traceback attached. */
static PyObject *
call_exception(void)
{
    PyObject *type, *value, *tb;

    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value == NULL) {
        value = Py_NewRef(Py_None);
    }
    else if (tb != NULL) {
        PyException_SetTraceback(value, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
}

static void
call_log_error(void)
{
    char *text = ts_format_exception();
    if (text != NULL) {
        ts_log(40, text, (Py_ssize_t)strlen(text));
        free(text);
    }
}

/* call_run: a pool thread, attached. */
static void
call_run(ts_job *job, ts_thread *t)
{
    ts_call *c = (ts_call *)job;
    PyObject *r, *ctx;
    int go;

    (void)t;
    r = PyObject_CallMethod(c->fut, c->loop ? "cancelled" : "set_running_or_notify_cancel", NULL);
    go = r == NULL ? -1 : PyObject_IsTrue(r);
    Py_XDECREF(r);
    if (go < 0) {
        call_log_error();
        call_free(c);
        return;
    }
    if (c->loop ? go : !go) {
        call_free(c);  /* cancelled before it ran */
        return;
    }
    ctx = PyContext_New();
    if (ctx == NULL || PyContext_Enter(ctx) < 0) {
        c->value = call_exception();
        c->ok = 0;
    }
    else {
        r = PyObject_CallNoArgs(c->fn);
        c->ok = r != NULL;
        c->value = r != NULL ? r : call_exception();
        if (PyContext_Exit(ctx) < 0) {
            PyErr_Clear();
        }
    }
    Py_XDECREF(ctx);
    Py_CLEAR(c->fn);  /* the app's objects go with the call, here */
    if (c->loop != NULL) {
        if (ts_asgi_push(c->loop, TS_EV_CALL_DONE, NULL, 0, (const char *)&c, sizeof(c), 0) < 0) {
            call_free(c);  /* the loop is stopping: nobody waits */
        }
        return;
    }
    r = PyObject_CallMethod(c->fut, c->ok ? "set_result" : "set_exception", "O", c->value);
    if (r == NULL) {
        call_log_error();
    }
    Py_XDECREF(r);
    call_free(c);
}

/* ts_call_done_tuple turns a TS_EV_CALL_DONE event into (10, fut, ok,
 * value) and frees the call (loop thread, attached). */
PyObject *
ts_call_done_tuple(const ts_event *ev)
{
    ts_call *c;
    PyObject *t;

    if (ev->len != sizeof(c)) {
        Py_RETURN_NONE;
    }
    memcpy(&c, ev->data, sizeof(c));
    t = Py_BuildValue("(iOOO)", TS_EV_CALL_DONE, c->fut, c->ok ? Py_True : Py_False, c->value);
    call_free(c);
    return t;
}

static ts_pool *
pool_arg(int which)
{
    if (which < 0 || which > 1 || pools[which] == NULL) {
        PyErr_SetString(PyExc_ValueError, "no such turnstile pool");
        return NULL;
    }
    return pools[which];
}

/* _turnstile_asgi.call_submit(which, i, fut, fn, tag, bridge): run fn()
 * on thread i of pool which; complete fut with its result or exception.
 * bridge: the submitting loop's LoopBridge (fut is that loop's asyncio
 * future), or None (fut is a concurrent.futures.Future). RuntimeError
 * when the pool's lanes are full or it is stopping. */
PyObject *
ts_mod_call_submit(PyObject *mod, PyObject *args)
{
    int which, i;
    PyObject *fut, *fn, *bridge;
    unsigned long long tag;
    ts_pool *p;
    ts_call *c;

    if (!PyArg_ParseTuple(args, "iiOOKO:call_submit", &which, &i, &fut, &fn, &tag, &bridge)) {
        return NULL;
    }
    if ((p = pool_arg(which)) == NULL) {
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return PyErr_NoMemory();
    }
    if (bridge != Py_None && (c->loop = ts_bridge_loop(bridge)) == NULL) {
        free(c);
        PyErr_SetString(PyExc_TypeError, "bridge must be a LoopBridge or None");
        return NULL;
    }
    c->job.run = call_run;
    c->job.tag = tag;
    c->fn = Py_NewRef(fn);
    c->fut = Py_NewRef(fut);
    if (ts_pool_submit_to(p, i, &c->job) < 0) {
        Py_DECREF(c->fn);
        Py_DECREF(c->fut);
        free(c);
        PyErr_SetString(PyExc_RuntimeError, "turnstile: the sync-call queue is full (--queue-size)");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _turnstile_asgi.pool_bind(which, tag) -> thread index, or -1 when the
 * pool is off or (HTTP) blocking_threads + queue_size requests are bound.
 * tag: the connection's (Channel.tag), listed on the thread meanwhile. */
PyObject *
ts_mod_pool_bind(PyObject *mod, PyObject *args)
{
    int which;
    unsigned long long tag;

    if (!PyArg_ParseTuple(args, "iK:pool_bind", &which, &tag)) {
        return NULL;
    }
    if (which < 0 || which > 1 || pools[which] == NULL) {
        return PyLong_FromLong(-1);
    }
    return PyLong_FromLong(ts_pool_bind(pools[which], which == 0 ? TS_BIND_HTTP : TS_BIND_SESSION,
                                        which == 0 ? http_limit : -1, tag));
}

/* _turnstile_asgi.pool_release(which, i, tag): undo one pool_bind. */
PyObject *
ts_mod_pool_release(PyObject *mod, PyObject *args)
{
    int which, i;
    unsigned long long tag;

    if (!PyArg_ParseTuple(args, "iiK:pool_release", &which, &i, &tag)) {
        return NULL;
    }
    if (which >= 0 && which <= 1 && pools[which] != NULL) {
        ts_pool_unbind(pools[which], i, tag);
    }
    Py_RETURN_NONE;
}

/* _turnstile_asgi.pool_threads(which) -> the pool's thread count, 0 when off. */
PyObject *
ts_mod_pool_threads(PyObject *mod, PyObject *arg)
{
    long which = PyLong_AsLong(arg);

    if (which == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (which < 0 || which > 1 || pools[which] == NULL) {
        return PyLong_FromLong(0);
    }
    return PyLong_FromLong(ts_pool_threads(pools[which]));
}
