// Package python embeds CPython: it initialises the interpreter on a
// dedicated main thread, runs pools of Python threads that wait for jobs
// on a C-side queue (Pool, a value: a worker may hold several, each with
// its own threads, queue and done list), and owns the one attach/detach
// pair (thread.c) where the turnstile barrier lives (one per process, as
// the GIL is). wakelist.h is the list + eventfd + need-wake protocol by
// which a C producer wakes one consumer per burst (a pool's done list).
// A pool's threads also each have a lane (lanes.c), a job list of their
// own: the ASGI sync-work pools bind a request or a WebSocket session to
// one thread and submit its calls there (ts_pool_submit_to); the WSGI
// pool uses only the shared queue.
//
// Life of a job (DESIGN.md, the crossing rule):
//
//  1. A handler goroutine fills a C-allocated job (ts_job, embedded in the
//     interface's own job type) and calls ts_pool_submit with the pool's
//     C handle (Pool.C): one short cgo call that locks that pool's queue,
//     appends, wakes a parked thread (its own
//     semaphore; pool.c says why not a condition variable) and returns. A
//     full queue returns -1 (the caller answers 503).
//  2. A pool thread (pthread "ts-py-N" in the WSGI pool, created in pool.c, attached to its
//     own PyThreadState for life) pops the job. If it had gone idle it
//     attaches through ts_thread_attach, which times the GIL wait; if it
//     just finished a job it keeps the GIL unless the turnstile says to
//     hand it over (ts_thread_yield_if_due).
//  3. job->run executes attached. It may detach around C→Go calls for
//     blocking I/O (body reads, socket writes), never holding the GIL
//     across them.
//  4. run lists the job on its pool's done list (ts_pool_done); the
//     pool's dispatcher goroutine (Pool.Dispatch, a Dispatcher), reading
//     the list's eventfd through Go's netpoller (no OS thread blocked),
//     calls the interface's wake function, which wakes the handler
//     goroutine; it finishes the response in Go.
//
// The cgo foundation the interfaces share (tspy.h): the attach pair, the
// pool, the wake list (wakelist.h: a list with an eventfd written once per
// burst; the pool's done list and each ASGI loop's queue and ready list)
// and its Go consumer (Dispatcher, dispatch.go), the request-block reader
// (ts_entry_next, for the block internal/reqblock writes) and the byte
// checks (bytes.c). internal/wsgi and internal/asgi import this package
// in Go because their C calls this C.
//
// Threads: only threads this package creates attach through the pair.
// Threads the app starts attach on their own (PyGILState), and CPython
// still drops and retakes the GIL inside blocking calls and every switch
// interval (sys.setswitchinterval): the barrier governs job boundaries, and
// gilwait.c, where CPython waits for the GIL, orders a pool thread with a
// fresh request before a pool thread woken mid-job.
//
// Start-up and shutdown: Start runs PyConfig, Py_InitializeFromConfig, the
// bootstrap (python/turnstile/_bootstrap.py) and the app import on the main
// Python thread, which then detaches and waits; Shutdown runs atexit
// handlers and logging.shutdown() there. Py_FinalizeEx is never called.
package python
