/* loop.c: the loop value (ts_loop), its thread and its drain.
 *
 * Notes about the implementation
 * ------------------------------
 * A ts_loop is one asyncio event loop on one Python thread (ts-loop-N)
 * and everything that is its own: the queue Go pushes events on, the
 * ready list it lists slots on for Go, its watchdog heartbeat and probe
 * lag, its lifespan state. Go's asgi.Loop holds one (ts_loop_new) and
 * passes it to every entry point; nothing here reads a loop from a
 * global. The loop thread runs _asgi.py's run() with a LoopBridge, the
 * Python object through which that loop's code reaches its ts_loop:
 * bridge.drain() is the add_reader callback on the queue's eventfd,
 * bridge.started() ends lifespan startup, bridge.set_state() sets the
 * lifespan state copied into the loop's scopes.
 *
 * Process-wide, shared by the loops: the _turnstile_asgi module
 * (set_thread_name, http_setup), the Channel and LoopBridge types, the
 * interned strings (ts_asgi_setup, at interpreter start), and the _asgi.py
 * module, imported by the first loop thread and reused by the others.
 */
#include "asgi.h"
#include "_cgo_export.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *loop_source;
static PyTypeObject *bridge_type;

/* LoopBridge: a loop's handle for its own Python code (loop thread). */
typedef struct {
    PyObject_HEAD
    ts_loop *loop;
} LoopBridge;

/* ---- drain (loop thread) ---------------------------------------------- */

/* event_tuple turns one event into what the Python side dispatches on:
 *   (1, channel, scope, body, more)   new request
 *   (2, cycle, body, more)            body chunk
 *   (3, cycle)                        disconnect
 *   (4, cycle)                        drained
 *   (5, seconds)                      stop (WebSocket apps get seconds)
 *   (6, channel, scope)               new WebSocket
 *   (7, cycle, message)               websocket.receive message
 *   (8, cycle, message)               websocket.disconnect message
 *   (10, fut, ok, value)              a sync call ran (call.c)
 * Returns a new reference, Py_None for a stale event, NULL on error. */
static PyObject *
event_tuple(ts_loop *loop, ts_event *ev)
{
    ts_asgi_slot *s = ev->slot;
    PyObject *cycle, *msg;

    if (ev->type == TS_EV_STOP) {
        return Py_BuildValue("(id)", TS_EV_STOP, ev->more / 1000.0);
    }
    if (ev->type == TS_EV_PROBE) {
        /* The loop lag: how long the probe waited for the loop to drain. */
        int64_t pushed = 0, lag;
        if (ev->len == sizeof(pushed)) {
            memcpy(&pushed, ev->data, sizeof(pushed));
        }
        lag = ts_now_ns() - pushed;
        /* Keep the largest lag since the watchdog last read it: after a
         * stall the loop drains a backlog of probes, and the oldest one,
         * which waited the whole stall, is the one that matters. */
        int64_t prev = atomic_load_explicit(&loop->lag_ns, memory_order_relaxed);
        while (lag > prev && !atomic_compare_exchange_weak_explicit(
                   &loop->lag_ns, &prev, lag, memory_order_relaxed, memory_order_relaxed)) {
        }
        atomic_fetch_add_explicit(&loop->probe_seq, 1, memory_order_release);
        Py_RETURN_NONE;
    }
    if (ev->type == TS_EV_CALL_DONE) {
        return ts_call_done_tuple(ev);  /* (10, fut, ok, value) */
    }
    if (ev->type == TS_EV_WS_NEW) {
        ts_channel *ch = ts_channel_new(s, ev->gen);
        PyObject *scope;
        if (ch == NULL) {
            return NULL;
        }
        scope = ts_build_scope(loop, s, 1);
        if (scope == NULL) {
            Py_DECREF(ch);
            return NULL;
        }
        return Py_BuildValue("(iNN)", TS_EV_WS_NEW, (PyObject *)ch, scope);
    }
    if (ev->type == TS_EV_NEW) {
        ts_channel *ch = ts_channel_new(s, ev->gen);
        PyObject *scope, *body, *t;
        if (ch == NULL) {
            return NULL;
        }
        scope = ts_build_scope(loop, s, 0);
        body = PyBytes_FromStringAndSize(s->req + s->body_off, s->body_len);
        if (scope == NULL || body == NULL) {
            Py_XDECREF(scope);
            Py_XDECREF(body);
            Py_DECREF(ch);
            return NULL;
        }
        t = PyTuple_New(5);
        if (t == NULL) {
            Py_DECREF(scope);
            Py_DECREF(body);
            Py_DECREF(ch);
            return NULL;
        }
        PyTuple_SET_ITEM(t, 0, PyLong_FromLong(TS_EV_NEW));  /* a small int: cached */
        PyTuple_SET_ITEM(t, 1, (PyObject *)ch);
        PyTuple_SET_ITEM(t, 2, scope);
        PyTuple_SET_ITEM(t, 3, body);
        PyTuple_SET_ITEM(t, 4, Py_NewRef(s->body_done ? Py_False : Py_True));
        return t;
    }
    /* gen is fixed while the loop holds the slot, so no lock is needed */
    if (s->gen != ev->gen || s->cycle == NULL) {
        Py_RETURN_NONE;  /* the request is over: a late event */
    }
    cycle = s->cycle;
    switch (ev->type) {
    case TS_EV_BODY:
        return Py_BuildValue("(iOy#O)", TS_EV_BODY, cycle, ev->data, (Py_ssize_t)ev->len,
                             ev->more ? Py_True : Py_False);
    case TS_EV_DISCONNECT:
    case TS_EV_DRAINED:
        return Py_BuildValue("(iO)", ev->type, cycle);
    case TS_EV_WS_MSG:
    case TS_EV_WS_CLOSE:
        msg = ev->type == TS_EV_WS_MSG ? ts_ws_message(ev->data, ev->len, ev->more)
                                       : ts_ws_disconnect(ev->more, ev->data, ev->len);
        return msg ? Py_BuildValue("(iON)", ev->type, cycle, msg) : NULL;
    }
    Py_RETURN_NONE;
}

/* LoopBridge.drain() -> list of event tuples: the add_reader callback on
 * the loop queue's eventfd (the consumer's side of internal/python's
 * wake list, wakelist.h). */
static PyObject *
bridge_drain(LoopBridge *self, PyObject *unused)
{
    ts_loop *loop = self->loop;
    PyObject *list = PyList_New(0);
    ts_wakenode *batch, *node, *next;
    int empty;

    if (list == NULL) {
        return NULL;
    }
    atomic_store_explicit(&loop->heartbeat_ns, ts_now_ns(), memory_order_relaxed);
    ts_wakelist_clear(&loop->queue);  /* EAGAIN: the queue may still hold items */
    for (;;) {
        batch = ts_wakelist_take(&loop->queue, 0, &empty);  /* all of it */
        if (batch == NULL) {
            if (ts_wakelist_arm(&loop->queue)) {
                break;
            }
            continue;
        }
        for (node = batch; node != NULL; node = next) {
            ts_event *ev = (ts_event *)node;  /* node is its first member */
            PyObject *t;
            next = node->next;
            t = event_tuple(loop, ev);
            free(ev);
            if (t == NULL) {
                /* keep going: one bad request must not stall the rest */
                char *text = ts_format_exception();
                if (text != NULL) {
                    ts_log(40, text, (Py_ssize_t)strlen(text));
                    free(text);
                }
                continue;
            }
            if (t != Py_None && PyList_Append(list, t) < 0) {
                Py_DECREF(t);
                PyErr_Clear();
                continue;
            }
            Py_DECREF(t);
        }
    }
    return list;
}

ts_loop *
ts_bridge_loop(PyObject *bridge)
{
    if (bridge_type == NULL || Py_TYPE(bridge) != bridge_type) {
        return NULL;
    }
    return ((LoopBridge *)bridge)->loop;
}

/* LoopBridge.set_state(dict): the lifespan state copied into the loop's scopes. */
static PyObject *
bridge_set_state(LoopBridge *self, PyObject *d)
{
    if (d != Py_None && !PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "state must be a dict");
        return NULL;
    }
    Py_XSETREF(self->loop->state, d == Py_None ? NULL : Py_NewRef(d));
    Py_RETURN_NONE;
}

/* LoopBridge.started(ok, message): lifespan startup is over. */
static PyObject *
bridge_started(LoopBridge *self, PyObject *args)
{
    int ok;
    PyObject *obj, *hold;
    const char *msg;
    Py_ssize_t n;
    PyThreadState *ts;

    if (!PyArg_ParseTuple(args, "pU:started", &ok, &obj)) {
        return NULL;
    }
    msg = ts_text_utf8(obj, &n, &hold);  /* the app's message may hold a lone surrogate */
    if (msg == NULL) {
        return NULL;
    }
    ts = PyEval_SaveThread();
    go_ts_asgi_started(self->loop->handle, ok, (char *)msg, (int)n);
    PyEval_RestoreThread(ts);
    Py_XDECREF(hold);
    Py_RETURN_NONE;
}

/* LoopBridge.fd(): the loop queue's eventfd, for add_reader. */
static PyObject *
bridge_fd(LoopBridge *self, PyObject *unused)
{
    return PyLong_FromLong(self->loop->queue.fd);
}

/* _turnstile_asgi.set_thread_name(str): the calling thread's OS name, as
 * top -H and ps -L show it (15 bytes at most; longer is cut). Threads the
 * loop starts inherit "ts-loop-N" otherwise. */
static PyObject *
mod_set_thread_name(PyObject *mod, PyObject *arg)
{
    char name[16];
    const char *s = PyUnicode_AsUTF8(arg);

    if (s == NULL) {
        return NULL;
    }
    snprintf(name, sizeof name, "%s", s);
    (void)pthread_setname_np(pthread_self(), name);  /* cosmetic */
    Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
    {"set_thread_name", mod_set_thread_name, METH_O, "name the calling thread for the OS"},
    {"http_setup", ts_mod_http_setup, METH_O, "set the exception of a send() after a disconnect"},
    {"call_submit", ts_mod_call_submit, METH_VARARGS, "run a sync call on a pool thread"},
    {"pool_bind", ts_mod_pool_bind, METH_VARARGS, "bind a connection to a pool's least-loaded thread"},
    {"pool_release", ts_mod_pool_release, METH_VARARGS, "undo pool_bind"},
    {"pool_threads", ts_mod_pool_threads, METH_O, "a pool's thread count (0: off)"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef bridge_methods[] = {
    {"drain", (PyCFunction)bridge_drain, METH_NOARGS, "take every queued event"},
    {"set_state", (PyCFunction)bridge_set_state, METH_O, "set the lifespan state"},
    {"started", (PyCFunction)bridge_started, METH_VARARGS, "report lifespan startup"},
    {"fd", (PyCFunction)bridge_fd, METH_NOARGS, "the loop queue's eventfd"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot bridge_slots[] = {
    {Py_tp_methods, bridge_methods},
    {Py_tp_doc, "one event loop's bridge to Go"},
    {0, NULL},
};

static PyType_Spec bridge_spec = {
    "turnstile.LoopBridge", sizeof(LoopBridge), 0, Py_TPFLAGS_DEFAULT, bridge_slots,
};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT, "_turnstile_asgi", "turnstile's ASGI bridge", -1, mod_methods,
};

/* ---- setup and the loop thread --------------------------------------- */

void
ts_asgi_set_source(const char *src)
{
    loop_source = src;
}

/* ts_asgi_setup creates what the loops share, once per process: the
 * _turnstile_asgi module, the Channel and LoopBridge types and the
 * interned strings (python.Config.AfterLoad, main Python thread). 0, or -1
 * with an exception. */
int
ts_asgi_setup(void)
{
    PyObject *modules, *module;

    bridge_type = (PyTypeObject *)PyType_FromSpec(&bridge_spec);
    module = PyModule_Create(&mod_def);
    if (bridge_type == NULL || module == NULL || ts_channel_setup() < 0) {
        Py_XDECREF(module);
        return -1;
    }
    modules = PyImport_GetModuleDict();  /* borrowed */
    if (PyDict_SetItemString(modules, "_turnstile_asgi", module) < 0) {
        Py_DECREF(module);
        return -1;
    }
    Py_DECREF(module);  /* sys.modules holds it */
    if (ts_scope_setup() < 0 || ts_send_setup() < 0 || ts_ws_setup() < 0) {
        return -1;
    }
    return 0;
}

ts_loop *
ts_loop_new(int index, const ts_loop_config *cfg, uintptr_t handle)
{
    ts_loop *loop = calloc(1, sizeof(*loop));
    int err;

    if (loop == NULL) {
        return NULL;
    }
    loop->index = index;
    loop->handle = handle;
    loop->cfg = *cfg;
    loop->write_buffer = cfg->write_buffer > 0 ? cfg->write_buffer : 256 * 1024;
    if (ts_wakelist_init(&loop->queue) < 0) {
        err = errno;
        free(loop);
        errno = err;
        return NULL;
    }
    if (ts_wakelist_init(&loop->ready) < 0) {
        err = errno;
        close(loop->queue.fd);
        free(loop);
        errno = err;
        return NULL;
    }
    loop->ready.id_of = ts_asgi_ready_id;
    return loop;
}

/* ts_loop_read gives the watchdog the loop's heartbeat, the largest probe
 * lag since its previous call (and resets it), the probe count and the
 * thread state. The watchdog goroutine only (the lag is consumed); no GIL. */
void
ts_loop_read(ts_loop *loop, int64_t *beat, int64_t *lag, uint64_t *seq, PyThreadState **tstate)
{
    *seq = atomic_load_explicit(&loop->probe_seq, memory_order_acquire);
    *beat = atomic_load_explicit(&loop->heartbeat_ns, memory_order_relaxed);
    *lag = atomic_exchange_explicit(&loop->lag_ns, 0, memory_order_relaxed);
    *tstate = loop->thread.tstate;
}

/* asgi_py returns the _asgi.py module (a new reference), compiled and run
 * by the first loop thread to ask and shared by the others, or NULL with
 * an exception. Attached. */
static PyObject *
asgi_py(void)
{
    PyObject *name, *mod, *code;

    name = PyUnicode_FromString("_turnstile_asgi_py");
    if (name == NULL) {
        return NULL;
    }
    mod = PyImport_GetModule(name);
    Py_DECREF(name);
    if (mod != NULL || PyErr_Occurred()) {
        return mod;
    }
    code = Py_CompileString(loop_source, "turnstile/_asgi.py", Py_file_input);
    mod = code ? PyImport_ExecCodeModule("_turnstile_asgi_py", code) : NULL;
    Py_XDECREF(code);
    return mod;
}

static void *
loop_main(void *arg)
{
    ts_loop *loop = arg;
    PyObject *mod, *res, *bridge;
    char name[16];

    snprintf(name, sizeof name, "ts-loop-%d", loop->index);
    (void)pthread_setname_np(pthread_self(), name);  /* cosmetic */
    if (loop->cfg.batch) {
        /* SCHED_BATCH, as the pool threads (internal/python/pool.c): the
         * same CPU share, no wake-up preemption. A request Go pushes then
         * does not preempt the Go thread that pushed it: the loop runs
         * when Go blocks or its slice ends and drains what was queued
         * meanwhile. Go's threads keep SCHED_OTHER and still preempt the
         * loop on a wake-up. Measured with sysmon under SCHED_BATCH too
         * (docs/design.md, "sysmon and the loop thread run under
         * SCHED_BATCH"). */
        struct sched_param sp = {0};
        (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    }
    loop->thread.kind = TS_KIND_LOOP;
    loop->thread.index = loop->index;
    loop->thread.tstate = PyThreadState_New(PyInterpreterState_Main());
    ts_thread_attach(&loop->thread);
    atomic_store_explicit(&loop->heartbeat_ns, ts_now_ns(), memory_order_relaxed);

    mod = asgi_py();
    bridge = mod ? (PyObject *)PyObject_New(LoopBridge, bridge_type) : NULL;
    if (bridge != NULL) {
        ((LoopBridge *)bridge)->loop = loop;
    }
    res = bridge ? PyObject_CallMethod(mod, "run", "OOssini", bridge, ts_app, loop->cfg.lifespan, loop->cfg.loop,
                                       loop->cfg.executor_threads, (Py_ssize_t)loop->write_buffer, loop->index)
                 : NULL;
    Py_XDECREF(bridge);
    atomic_store_explicit(&loop->gone, 1, memory_order_release);  /* no more CALL_DONE (queue.c) */
    if (res == NULL) {
        char *text = ts_format_exception();
        const char *msg = text ? text : "the event loop failed";
        Py_XDECREF(mod);
        ts_thread_detach(&loop->thread, 0);
        go_ts_asgi_stopped(loop->handle, (char *)msg, (int)strlen(msg));
        free(text);
    }
    else {
        Py_DECREF(res);
        Py_XDECREF(mod);
        ts_thread_detach(&loop->thread, 0);
        go_ts_asgi_stopped(loop->handle, NULL, 0);
    }
    return NULL;
}

int
ts_loop_start(ts_loop *loop)
{
    pthread_t tid;
    pthread_attr_t attr;
    int rc;

    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16 << 20);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&tid, &attr, loop_main, loop);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}