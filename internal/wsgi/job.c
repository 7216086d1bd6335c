/* job.c: a WSGI request on a Python thread (PEP 3333): the job's life.
 *
 * Notes about the implementation
 * ------------------------------
 * wsgi_run is the job's run function. In one go, attached, it builds the
 * environ from the request block Go prepared (environ.c), calls the app
 * inside a fresh contextvars.Context, collects the response (response.c,
 * filewrapper.c) and returns. C->Go calls happen only for blocking I/O and
 * always with the GIL released: go_ts_wsgi_read (body bytes that have not
 * arrived; input.c) and go_ts_wsgi_flush (hand the head and buffered body
 * to the socket; response.c).
 *
 * Go allocates a job once per slot (ts_wsgi_job_new) and reuses it;
 * ts_wsgi_submit copies one request's block into it and queues it on the
 * pool Go passes (python.Pool): the one cgo call of a submission.
 */
#include "wsgi.h"

#include <stdlib.h>
#include <string.h>

static PyObject *str_wsgi_input, *str_close, *str_wsgi_early_hints;

/* ---- the request block ----------------------------------------------- */

ts_wsgi_job *
ts_wsgi_job_new(void)
{
    ts_wsgi_job *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return NULL;
    }
    job->req_cap = 4096;
    job->req = malloc(job->req_cap);
    job->head_cap = 1024;
    job->head = malloc(job->head_cap);
    job->body_cap = 4096;
    job->body = malloc(job->body_cap);
    job->file_fd = -1;
    job->body_fd = -1;
    if (job->req == NULL || job->head == NULL || job->body == NULL) {
        free(job->req);
        free(job->head);
        free(job->body);
        free(job);
        return NULL;
    }
    return job;
}

void
ts_wsgi_job_free(ts_wsgi_job *job)
{
    free(job->req);
    free(job->head);
    free(job->body);
    free(job);
}

/* ts_wsgi_job_trim frees the buffers of an idle job that grew past
 * TS_WSGI_KEEP_BYTES (a large request block or response), so that the
 * slots kept for reuse hold little memory; every write grows its buffer
 * first (ts_buf_reserve, ts_buf_grow), so a freed one comes back on use. */
void
ts_wsgi_job_trim(ts_wsgi_job *job)
{
    if (job->req_cap > TS_WSGI_KEEP_BYTES) {
        free(job->req);
        job->req = NULL;
        job->req_cap = 0;
    }
    if (job->head_cap > TS_WSGI_KEEP_BYTES) {
        free(job->head);
        job->head = NULL;
        job->head_cap = 0;
    }
    if (job->body_cap > TS_WSGI_KEEP_BYTES) {
        free(job->body);
        job->body = NULL;
        job->body_cap = 0;
    }
}

int
ts_wsgi_submit(ts_pool *pool, ts_wsgi_job *job, const char *block, size_t len, int nentries,
               size_t body_off, size_t body_len, int body_done, int body_fd, int64_t body_fd_len,
               int is_head)
{
    if (ts_buf_reserve(&job->req, &job->req_cap, len) != 0) {
        return TS_WSGI_SUBMIT_NOMEM;
    }
    if (len > 0) {
        memcpy(job->req, block, len);
    }
    job->nentries = nentries;
    job->body_off = body_off;
    job->body_len = body_len;
    job->body_done = body_done;
    job->body_fd = body_fd;
    job->body_fd_len = body_fd_len;
    job->is_head = is_head;
    job->status = 0;
    job->status_len = 0;
    job->header_len = 0;
    job->content_length = -1;
    job->close = 0;
    job->head_sent = 0;
    job->out_len = 0;
    job->result = TS_WSGI_OK;
    job->file_fd = -1;
    job->file_offset = 0;
    job->file_count = 0;
    job->error = NULL;
    job->base.started_ns = 0;
    if (ts_pool_submit(pool, &job->base) != 0) {
        return TS_WSGI_SUBMIT_FULL;
    }
    return 0;
}

/* ---- the job --------------------------------------------------------- */

/* ts_wsgi_fail records the app's failure: TS_WSGI_ERROR and the current
 * exception's traceback, the first one only (later ones are cleared).
 * Attached; no exception set on return. */
void
ts_wsgi_fail(ts_wsgi_job *job)
{
    job->result = TS_WSGI_ERROR;
    if (job->error == NULL) {
        job->error = ts_format_exception();
    }
    else {
        PyErr_Clear();
    }
}

static void
call_close(ts_wsgi_job *job, PyObject *result)
{
    PyObject *meth, *r;

    /* PEP 3333: close() is called whatever happened, including after an
     * error or a client that went away. */
    if (!PyObject_HasAttr(result, str_close)) {
        return;
    }
    meth = PyObject_GetAttr(result, str_close);
    if (meth == NULL) {
        ts_wsgi_fail(job);
        return;
    }
    r = PyObject_CallNoArgs(meth);
    Py_DECREF(meth);
    if (r == NULL) {
        ts_wsgi_fail(job);
        return;
    }
    Py_DECREF(r);
}

static void
wsgi_run(ts_job *base, ts_thread *t)
{
    ts_wsgi_job *job = (ts_wsgi_job *)base;
    PyObject *ctx, *environ = NULL, *result = NULL, *args[2], *hints;
    ts_wsgi_input *input = NULL;
    ts_wsgi_start_response *sr = NULL;

    /* PEP 567: a fresh Context per request; the app call and every next()
     * and close() run in it, so a ContextVar set by one request never
     * leaks into the next one on this thread. */
    ctx = PyContext_New();
    if (ctx == NULL || PyContext_Enter(ctx) < 0) {
        ts_wsgi_fail(job);
        Py_XDECREF(ctx);
        goto signal;
    }
    environ = ts_wsgi_environ(job);
    input = ts_wsgi_input_new(job);
    sr = ts_wsgi_start_response_new(job);
    if (environ == NULL || input == NULL || sr == NULL) {
        ts_wsgi_fail(job);
        goto out;
    }
    if (PyDict_SetItem(environ, str_wsgi_input, (PyObject *)input) < 0) {
        ts_wsgi_fail(job);
        goto out;
    }
    if ((hints = ts_wsgi_early_hints_callable((PyObject *)sr)) == NULL
        || PyDict_SetItem(environ, str_wsgi_early_hints, hints) < 0) {
        Py_XDECREF(hints);
        ts_wsgi_fail(job);
        goto out;
    }
    Py_DECREF(hints);
    args[0] = environ;
    args[1] = (PyObject *)sr;
    result = PyObject_Vectorcall(ts_app, args, 2, NULL);
    if (result == NULL) {
        ts_wsgi_fail(job);
        goto out;
    }
    ts_wsgi_iterate(job, sr, result);
    call_close(job, result);

out:
    if (input != NULL) {
        input->job = NULL;
    }
    if (sr != NULL) {
        sr->job = NULL;
    }
    Py_XDECREF(result);
    Py_XDECREF(environ);
    Py_XDECREF((PyObject *)input);
    Py_XDECREF((PyObject *)sr);
    if (PyContext_Exit(ctx) < 0) {
        PyErr_Clear();
    }
    Py_DECREF(ctx);
signal:
    if (PyErr_Occurred()) {
        PyErr_Clear();  /* no exception may be set when the thread detaches */
    }
    job->base.gil_wait_ns = t->gil_wait_ns;
    /* Completion: listed for Go's dispatcher (pool.c, the done list of
     * the pool running it). */
    ts_pool_done(t->pool, &job->base);
}

void
ts_wsgi_job_init(ts_wsgi_job *job, uintptr_t handle)
{
    job->base.run = wsgi_run;
    job->base.go_id = handle;
    job->handle = handle;
}

/* ---- setup ----------------------------------------------------------- */

int
ts_wsgi_setup(void)
{
    str_wsgi_input = PyUnicode_InternFromString("wsgi.input");
    str_close = PyUnicode_InternFromString("close");
    str_wsgi_early_hints = PyUnicode_InternFromString("wsgi.early_hints");
    if (str_wsgi_input == NULL || str_close == NULL || str_wsgi_early_hints == NULL) {
        return -1;
    }
    if (ts_wsgi_input_setup() < 0 || ts_wsgi_response_setup() < 0
        || ts_wsgi_file_wrapper_setup() < 0) {
        return -1;
    }
    return ts_wsgi_environ_setup();  /* after the types: the template holds file_wrapper */
}
