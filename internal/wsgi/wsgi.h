/* wsgi.h: the WSGI job shared by wsgi.c (on a Python thread) and
 * handler.go (on a handler goroutine). See doc.go for the flow.
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

/* One environ entry in the request block:
 *   uint16 key_id (0 = custom key follows), uint16 key_len, uint32 val_len,
 *   key bytes, value bytes. Keys and values are latin-1 (PEP 3333). */
#define TS_ENTRY_HDR 8

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
    int head_sent;           /* set by Go when the head is on the wire */
    char *body;              /* body bytes not yet handed to Go */
    size_t body_cap, out_len;
    int result;
    int file_fd;             /* TS_WSGI_FILE: a dup'd fd Go sends and closes */
    int64_t file_offset, file_count;
    char *error;             /* TS_WSGI_ERROR: malloc'd traceback, Go frees */
} ts_wsgi_job;

/* ts_wsgi_register_keys stores the environ key names known by id (index+1);
 * the strings must stay valid. Called by Go before start-up. */
void ts_wsgi_register_keys(const char **names, int n);

/* ts_wsgi_setup creates the types and caches (after_load hook). */
int ts_wsgi_setup(void);

ts_wsgi_job *ts_wsgi_job_new(void);
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
                   size_t body_off, size_t body_len, int body_done, int is_head);

#endif /* TS_WSGI_H */
