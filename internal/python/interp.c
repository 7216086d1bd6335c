/* interp.c: CPython initialisation on a dedicated main thread, the
 * bootstrap, app loading and shutdown.
 *
 * Notes about the implementation
 * ------------------------------
 * CPython's "main thread" is the thread that initialised it; in 3.11 and
 * 3.12 the first thread to import threading becomes threading.main_thread(),
 * and in 3.13 the first pre-initialising call fixes it. So every PyConfig_*
 * call, Py_InitializeFromConfig, the bootstrap (which imports threading) and
 * the app import run on one pthread made here, ts-py-main. After start-up it
 * detaches and waits for the shutdown command, when it runs atexit handlers
 * and logging.shutdown() and flushes stdio. It never calls Py_FinalizeEx:
 * after it, a thread that tries to attach exits through pthread_exit.
 *
 * PyConfig (DESIGN.md, embedding pitfalls): program_name is set explicitly
 * (else sys.executable and the standard library come from whatever python3
 * is first on PATH); Python installs no signal handlers (Go owns signals);
 * faulthandler is off (it would replace Go's SIGSEGV handler).
 */
#include "tspy.h"
#include "_cgo_export.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

PyObject *ts_app;
int ts_workers = 1;
PyObject *ts_bootstrap;

static const ts_interp_config *start_cfg;
static pthread_mutex_t mlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mcond = PTHREAD_COND_INITIALIZER;
static int start_done, start_rc;          /* guarded by mlock */
static char *start_kind, *start_err;      /* guarded by mlock */
static int shutdown_asked, shutdown_done; /* guarded by mlock */
static ts_thread main_thread;

/* ---- the _turnstile builtin module ----------------------------------- */

/* TS_LOG_FIELDS bounds the fields of one _turnstile.log record (the bound
 * rule); the server's own records have three (method, target, traceback). */
#define TS_LOG_FIELDS 8

/* _turnstile.log(level, text, **fields): one record to the server log.
 * Without fields it is the app's output (print, logging, stderr) and Go
 * marks it source=python; with fields (str values, in the order given) it
 * is a record of the server's own Python half, shaped as the Go side's are
 * (_asgi.py: "asgi: app raised" with method, target and traceback, as
 * internal/wsgi logs "wsgi: app raised"). TypeError for a value that is
 * not a str or more than TS_LOG_FIELDS fields. */
static PyObject *
mod_log(PyObject *self, PyObject *args, PyObject *kwargs)
{
    long level;
    int overflow, nkv = 0, i;
    PyObject *lvl, *obj, *hold = NULL, *holds[2 * TS_LOG_FIELDS];
    PyObject *res = NULL;
    const char *text;
    char *kv[2 * TS_LOG_FIELDS];
    int kvlen[2 * TS_LOG_FIELDS];
    Py_ssize_t len;

    if (!PyArg_ParseTuple(args, "O!U:log", &PyLong_Type, &lvl, &obj)) {
        return NULL;
    }
    /* logging takes any int as a level: held to NOTSET..CRITICAL (0..50) */
    level = PyLong_AsLongAndOverflow(lvl, &overflow);
    if (overflow != 0 || level < 0 || level > 50) {
        level = overflow < 0 || level < 0 ? 0 : 50;
    }
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > TS_LOG_FIELDS) {
        PyErr_Format(PyExc_TypeError, "log() takes at most %d fields", TS_LOG_FIELDS);
        return NULL;
    }
    if (kwargs != NULL) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;

        while (PyDict_Next(kwargs, &pos, &k, &v)) {
            if (!PyUnicode_Check(v)) {
                PyErr_Format(PyExc_TypeError, "log() field %U must be str, not %.100s",
                             k, Py_TYPE(v)->tp_name);
                goto done;
            }
            for (i = 0; i < 2; i++) {
                PyObject *s = i == 0 ? k : v;
                Py_ssize_t n;
                const char *u = ts_text_utf8(s, &n, &holds[nkv]);

                if (u == NULL || n > INT_MAX) {
                    if (u != NULL) {
                        Py_XDECREF(holds[nkv]);
                        PyErr_SetString(PyExc_OverflowError, "log() field too long");
                    }
                    goto done;
                }
                kv[nkv] = (char *)u;
                kvlen[nkv] = (int)n;
                nkv++;
            }
        }
    }
    text = ts_text_utf8(obj, &len, &hold);
    if (text == NULL) {
        goto done;
    }
    ts_log_fields((int)level, text, len, kv, kvlen, nkv);
    res = Py_None;
    Py_INCREF(res);
done:
    Py_XDECREF(hold);
    for (i = 0; i < nkv; i++) {
        Py_XDECREF(holds[i]);
    }
    return res;
}

static PyMethodDef mod_methods[] = {
    {"log", (PyCFunction)(void (*)(void))mod_log, METH_VARARGS | METH_KEYWORDS,
     "log(level, text, **fields): write to the server log"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT, "_turnstile", "turnstile's server hooks", -1,
    mod_methods,
};

static PyObject *
init_turnstile_module(void)
{
    return PyModule_Create(&mod_def);
}

void
ts_log(int level, const char *msg, Py_ssize_t len)
{
    ts_log_fields(level, msg, len, NULL, NULL, 0);
}

void
ts_log_fields(int level, const char *msg, Py_ssize_t len, char **kv, int *kvlen, int nkv)
{
    ts_thread *t = ts_thread_current();

    /* Release the GIL around the Go call (the crossing rule). A thread we
     * do not own (one the app started) goes through PyEval_SaveThread. */
    if (t != NULL && t->attached) {
        ts_thread_detach(t, 0);
        go_ts_log(level, (char *)msg, (int)len, kv, kvlen, nkv);
        ts_thread_attach(t);
    }
    else {
        PyThreadState *saved = PyEval_SaveThread();
        go_ts_log(level, (char *)msg, (int)len, kv, kvlen, nkv);
        PyEval_RestoreThread(saved);
    }
}

/* ---- errors ---------------------------------------------------------- */


char *
ts_format_exception(void)
{
    PyObject *exc, *text = NULL;
    char *out;

#if PY_VERSION_HEX >= 0x030C0000
    exc = PyErr_GetRaisedException();
#else
    PyObject *type, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (exc != NULL && tb != NULL) {
        (void)PyException_SetTraceback(exc, tb);  /* 0 or -1 with nothing to do */
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
#endif
    if (exc == NULL) {
        return NULL;
    }
    if (ts_bootstrap != NULL) {
        text = PyObject_CallMethod(ts_bootstrap, "format_exception", "O", exc);
    }
    if (text == NULL) {
        PyErr_Clear();
        text = PyObject_Repr(exc);
        if (text == NULL) {
            PyErr_Clear();
        }
    }
    out = text != NULL ? ts_text_dup(text) : strdup("(unprintable error)");
    Py_XDECREF(text);
    Py_DECREF(exc);
    return out;
}

/* ---- start-up -------------------------------------------------------- */

static char *
status_message(PyStatus st)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "turnstile: cannot initialise Python: %s%s%s",
             st.func ? st.func : "", st.func ? ": " : "",
             st.err_msg ? st.err_msg : "unknown error");
    return strdup(buf);
}

static int
init_python(const ts_interp_config *cfg, char **err)
{
    PyConfig config;
    PyStatus st;

    if (PyImport_AppendInittab("_turnstile", init_turnstile_module) < 0 ||
        PyImport_AppendInittab("_turnstile_layer", ts_init_layer_module) < 0) {
        *err = strdup("turnstile: cannot register the _turnstile modules");
        return -1;
    }
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.faulthandler = 0;
    config.parse_argv = 0;
    config.buffered_stdio = 0;
    config.pathconfig_warnings = 1;
    st = PyConfig_SetBytesString(&config, &config.program_name,
                                 cfg->program_name);
    if (!PyStatus_Exception(st) && cfg->home != NULL && cfg->home[0]) {
        st = PyConfig_SetBytesString(&config, &config.home, cfg->home);
    }
    if (!PyStatus_Exception(st)) {
        /* sys.argv = ["turnstile"]: apps that read argv see the server. */
        char *argv[] = {"turnstile"};
        st = PyConfig_SetBytesArgv(&config, 1, argv);
    }
    if (!PyStatus_Exception(st)) {
        st = Py_InitializeFromConfig(&config);
    }
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
        *err = status_message(st);
        return -1;
    }
    ts_gilwait_init();
    return 0;
}

static int
run_bootstrap(const ts_interp_config *cfg, char **kind, char **err)
{
    PyObject *code, *mod, *res;

    code = Py_CompileString(cfg->bootstrap_src, "turnstile/_bootstrap.py",
                            Py_file_input);
    if (code == NULL) {
        goto error;
    }
    mod = PyImport_ExecCodeModule("_turnstile_bootstrap", code);
    Py_DECREF(code);
    if (mod == NULL) {
        goto error;
    }
    ts_bootstrap = mod;  /* strong reference kept for the process's life */

    res = PyObject_CallMethod(mod, "setup", "sdiss", cfg->app_dir,
                              cfg->switch_interval, cfg->workers,
                              cfg->log_config, cfg->log_config_kind);
    if (res == NULL) {
        goto error;
    }
    Py_DECREF(res);

    res = PyObject_CallMethod(mod, "load_app", "sis", cfg->app_spec,
                              cfg->factory, cfg->interface);
    if (res == NULL) {
        goto error;
    }
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
        Py_DECREF(res);
        *err = strdup("turnstile: load_app returned a bad value");
        return -1;
    }
    ts_app = Py_NewRef(PyTuple_GET_ITEM(res, 0));
    *kind = ts_text_dup(PyTuple_GET_ITEM(res, 1));
    Py_DECREF(res);
    for (int i = 0; i < 4; i++) {
        if (cfg->after_load[i] != NULL && cfg->after_load[i]() < 0) {
            goto error;
        }
    }
    return 0;

error:
    *err = ts_format_exception();
    if (*err == NULL) {
        *err = strdup("turnstile: start-up failed");
    }
    return -1;
}

static void *
main_thread_run(void *arg)
{
    const ts_interp_config *cfg = arg;
    char *kind = NULL, *err = NULL;
    int rc;

    (void)pthread_setname_np(pthread_self(), "ts-py-main");  /* cosmetic */
    rc = init_python(cfg, &err);
    if (rc == 0) {
        main_thread.kind = TS_KIND_MAIN;
        main_thread.attached = 1;
        main_thread.tstate = PyThreadState_Get();
        rc = run_bootstrap(cfg, &kind, &err);
        ts_thread_detach(&main_thread, 0);
    }

    pthread_mutex_lock(&mlock);
    start_rc = rc;
    start_kind = kind;
    start_err = err;
    start_done = 1;
    pthread_cond_broadcast(&mcond);
    if (rc != 0) {
        pthread_mutex_unlock(&mlock);
        return NULL;
    }
    while (!shutdown_asked) {
        pthread_cond_wait(&mcond, &mlock);
    }
    pthread_mutex_unlock(&mlock);

    ts_thread_attach(&main_thread);
    {
        PyObject *res = PyObject_CallMethod(ts_bootstrap, "shutdown", NULL);
        if (res == NULL) {
            char *text = ts_format_exception();
            if (text != NULL) {
                ts_log(40, text, (Py_ssize_t)strlen(text));
                free(text);
            }
        }
        Py_XDECREF(res);
    }
    ts_thread_detach(&main_thread, 0);

    pthread_mutex_lock(&mlock);
    shutdown_done = 1;
    pthread_cond_broadcast(&mcond);
    pthread_mutex_unlock(&mlock);
    return NULL;
}

int
ts_interp_start(const ts_interp_config *cfg, char **kind, char **err)
{
    pthread_t tid;
    pthread_attr_t attr;
    int rc;

    start_cfg = cfg;
    ts_workers = cfg->workers;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16 << 20);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&tid, &attr, main_thread_run, (void *)cfg);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        *err = strdup("turnstile: cannot start the main Python thread");
        return -1;
    }
    pthread_mutex_lock(&mlock);
    while (!start_done) {
        pthread_cond_wait(&mcond, &mlock);
    }
    *kind = start_kind;
    *err = start_err;
    rc = start_rc;
    pthread_mutex_unlock(&mlock);
    return rc;
}

void
ts_interp_shutdown(void)
{
    pthread_mutex_lock(&mlock);
    shutdown_asked = 1;
    pthread_cond_broadcast(&mcond);
    while (!shutdown_done) {
        pthread_cond_wait(&mcond, &mlock);
    }
    pthread_mutex_unlock(&mlock);
}
