/* wsgi.h: the WSGI job shared by the C files (on a Python thread) and
 * handler.go (on a handler goroutine), and the declarations the C files
 * share. See doc.go for the flow; the files, one job each:
 *
 *   job.c          the job's life: new, submit, run (wsgi_run), setup
 *   environ.c      the environ dict from the request block
 *   input.c        wsgi.input
 *   response.c     start_response, write() and the body of the iterable
 *   filewrapper.c  wsgi.file_wrapper, sent by Go with sendfile
 *
 * Ownership: Go allocates the job (C memory) once per slot and reuses it.
 * While the job is queued or running, only the Python thread touches the
 * response fields; Go reads them in callbacks (same OS thread, GIL
 * released) and after the done eventfd fired.
 */
#ifndef TS_WSGI_H
#define TS_WSGI_H

#include "../python/tspy.h"

/* Results of a WSGI job. */
enum {
    TS_WSGI_OK = 0,      /* response complete: head (if not sent) + body in buffers */
    TS_WSGI_ERROR = 1,   /* the app failed: 500 if nothing sent, else abort */
    TS_WSGI_GONE = 2,    /* the client went away while writing */
    TS_WSGI_FILE = 3     /* send file_fd[file_offset, +file_count] after the head */
};

/* The request block (tspy.h, ts_entry_next): an entry's id is an environ
 * key's (ts_wsgi_register_keys) or 0 with the key; keys and values are
 * latin-1 (PEP 3333). */

typedef struct ts_wsgi_job {
    ts_job base;
    uintptr_t handle;        /* cgo.Handle of the Go slot, for callbacks */

    /* request, written by Go before submit */
    char *req;               /* entries, then prefetched body bytes */
    size_t req_cap;
    int nentries;
    size_t body_off, body_len; /* prefetched body bytes within req */
    int body_done;           /* 1: the prefetched bytes (and body_fd's) are the whole body */
    int body_fd;             /* -1, or a spool file holding the body after the
                              * prefetched bytes (Go owns and closes it) */
    int64_t body_fd_len;     /* bytes of body_fd, read with pread from 0 */
    int is_head;

    /* response, written by the Python thread */
    int status;
    char *head;              /* status line, then "Name: value\r\n" lines */
    size_t head_cap, status_len, header_len;
    int64_t content_length;  /* -1: the app did not say */
    int close;               /* the app sent Connection: close */
    int head_sent;           /* the head is on the wire: set through
                                ts_wsgi_job_head_sent by a flush */
    char *body;              /* body bytes not yet handed to Go */
    size_t body_cap, out_len;
    int result;
    int file_fd;             /* TS_WSGI_FILE: a dup'd fd Go sends and closes */
    int64_t file_offset, file_count;
    char *error;             /* TS_WSGI_ERROR: malloc'd traceback, Go frees */
} ts_wsgi_job;

/* ts_wsgi_register_keys stores the environ key names known by id (index+1);
 * the strings must stay valid. Called by Go before start-up (environ.c). */
void ts_wsgi_register_keys(const char **names, int n);

/* ts_wsgi_setup creates the types and caches (after_load hook): each
 * file's setup below, in order. 0, or -1 with an exception set. */
int ts_wsgi_setup(void);

/* ts_wsgi_job_new allocates an idle job with its buffers (job.c); NULL on
 * out-of-memory. ts_wsgi_job_init names it for Go (run, go_id, handle);
 * ts_wsgi_job_free releases an idle one. Go's calls, no GIL. */
ts_wsgi_job *ts_wsgi_job_new(void);
void ts_wsgi_job_init(ts_wsgi_job *job, uintptr_t handle);
void ts_wsgi_job_free(ts_wsgi_job *job);
/* An idle job keeps buffers up to this size (bytes) for the next request;
 * ts_wsgi_job_trim frees larger ones. */
#define TS_WSGI_KEEP_BYTES (128 * 1024)
void ts_wsgi_job_trim(ts_wsgi_job *job);
/* ts_wsgi_submit copies the request block (len bytes: nentries entries,
 * then body_len prefetched body bytes at body_off) into the job, resets
 * its response side and queues it on pool: the one cgo call of a
 * request's submission. Returns 0, TS_WSGI_SUBMIT_NOMEM when the block
 * cannot be stored, or TS_WSGI_SUBMIT_FULL when the queue is full or the
 * pool is stopping (ts_pool_submit). */
enum { TS_WSGI_SUBMIT_NOMEM = -1, TS_WSGI_SUBMIT_FULL = -2 };
int ts_wsgi_submit(ts_pool *pool, ts_wsgi_job *job, const char *block, size_t len, int nentries,
                   size_t body_off, size_t body_len, int body_done, int body_fd, int64_t body_fd_len,
                   int is_head);

/* Go's writes to a job, as calls (Go reads a job's fields, never writes
 * them): ts_wsgi_job_head_sent records that Go put the head on the wire
 * mid-job (a flush); ts_wsgi_job_free_error frees the failure text Go
 * copied. */
static inline void
ts_wsgi_job_head_sent(ts_wsgi_job *job)
{
    job->head_sent = 1;
}

static inline void
ts_wsgi_job_free_error(ts_wsgi_job *job)
{
    free(job->error);
    job->error = NULL;
}

/* ---- shared by the C files (a Python thread, attached) --------------- */

/* ts_wsgi_fail marks the job failed (TS_WSGI_ERROR) with the current
 * exception's traceback, the first failure only; clears the exception
 * (job.c). */
void ts_wsgi_fail(ts_wsgi_job *job);

/* environ.c: ts_wsgi_environ returns a new environ dict for job's request
 * block (new reference, or NULL with an exception set). */
PyObject *ts_wsgi_environ(ts_wsgi_job *job);
int ts_wsgi_environ_setup(void);

/* input.c: wsgi.input. job is NULL once the request is over (wsgi_run
 * clears it: a stream the app kept reads nothing after). */
typedef struct {
    PyObject_HEAD
    ts_wsgi_job *job;        /* NULL once the request is over */
    char *buf;               /* bytes from Go not yet consumed */
    size_t pos, len, cap;
    int eof;
    const char *pre;         /* prefetched body bytes (in job->req) */
    size_t pre_len;
    int fd;                  /* job->body_fd: the spooled rest of the body */
    int64_t fd_off, fd_len;
} ts_wsgi_input;
extern PyTypeObject *ts_wsgi_input_type;
ts_wsgi_input *ts_wsgi_input_new(ts_wsgi_job *job);
int ts_wsgi_input_setup(void);

/* response.c: start_response and its write(); ts_wsgi_iterate collects
 * the body of the app's result into job (sets job->result). */
typedef struct {
    PyObject_HEAD
    ts_wsgi_job *job;  /* NULL once the request is over */
    int called;
} ts_wsgi_start_response;
extern PyTypeObject *ts_wsgi_start_response_type;
ts_wsgi_start_response *ts_wsgi_start_response_new(ts_wsgi_job *job);
PyObject *ts_wsgi_early_hints_callable(PyObject *sr);
void ts_wsgi_iterate(ts_wsgi_job *job, ts_wsgi_start_response *sr, PyObject *result);
int ts_wsgi_response_setup(void);

/* filewrapper.c: wsgi.file_wrapper; ts_wsgi_try_sendfile hands one over a
 * regular file to Go (1) or declines (0). */
typedef struct {
    PyObject_HEAD
    PyObject *filelike;
    Py_ssize_t blksize;
} ts_wsgi_file_wrapper;
extern PyTypeObject *ts_wsgi_file_wrapper_type;
int ts_wsgi_try_sendfile(ts_wsgi_job *job, ts_wsgi_file_wrapper *fw);
int ts_wsgi_file_wrapper_setup(void);

#endif /* TS_WSGI_H */
