// Package wsgi serves WSGI apps (PEP 3333) on the pool of Python threads.
//
// Life of a WSGI request:
//
//  1. Handler.ServeHTTP1 (a handler goroutine, no GIL) takes a slot: a
//     C-allocated ts_wsgi_job, its completion channel and a cgo.Handle,
//     reused across requests.
//  2. buildEnviron writes the request block (wsgi.h): CGI and HTTP_* keys
//     (known keys by id), PATH_INFO percent-decoded, repeated fields joined
//     with ", " (cookies "; "), names with "_" dropped. With BufferBytes
//     set (buffer.go), the whole body is then read: up to BufferBytes
//     follow the block, the rest goes to a spool file that wsgi.input
//     reads back with pread, so the app never waits for the client and
//     reads the body without a callback. Without, the body follows the
//     block if it is all here (or arrives) within MaxPrefetchBytes, and
//     the rest is read from the socket at the app's reads
//     (go_ts_wsgi_read).
//  3. ts_wsgi_submit copies the block into the C job and queues it on
//     Handler.Pool (one cgo call); the goroutine waits on its channel. While the job is
//     queued, the sweep (watch.go, gone.go) withdraws it if it waits past
//     QueueTimeout (503) or if its client leaves (no response, 499 in the
//     access log): one poll(2) per tick over the queued requests' sockets,
//     one ts_pool_cancel per withdrawn job.
//  4. On a Python thread, wsgi_run (job.c) enters a fresh
//     contextvars.Context, turns the block into the environ dict in one
//     pass (environ.c), calls the app with wsgi.input (input.c) and
//     start_response (response.c), and collects the body: blocks from a list or
//     tuple iterator are gathered and sent with the head in one write; any
//     other iterable has each block flushed (go_ts_wsgi_flush, GIL
//     released) before the next is asked for. close() always runs.
//     wsgi.file_wrapper over a regular file is handed to Go as a dup'd fd
//     and sent with sendfile (filewrapper.c).
//  5. The pool lists the finished job (ts_pool_done) and its dispatcher
//     (python.Pool.Dispatch) calls wakeSlot (done.go), which wakes the
//     goroutine; finish writes what is left (head, gathered body, file) or
//     answers 500 (nothing sent yet) or cuts the connection (app failed
//     after the head went out).
package wsgi
