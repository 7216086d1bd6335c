package wsgi

/*
#include <stdlib.h>
#include <string.h>
#include "wsgi.h"
*/
import "C"

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime/cgo"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"turnstile/internal/http1"
	"turnstile/internal/inflight"
	"turnstile/internal/python"

	"golang.org/x/sys/unix"
)

// MaxPrefetchBytes bounds the body bytes handed to Python with the request
// when the whole body has already arrived; larger bodies are streamed
// through wsgi.input reads.
const MaxPrefetchBytes = 64 << 10

// Handler serves WSGI apps: an http1.Handler that hands each request to the
// pool of Python threads. Configure it, then call Setup's hook through
// python.Start (AfterLoad) before serving.
type Handler struct {
	// Pool is the pool of Python threads that runs the requests (its
	// queue bound is the 503 point; its done list wakes each request's
	// goroutine). Required.
	Pool *python.Pool
	// ScriptName is the root path the app is mounted at (SCRIPT_NAME,
	// PEP 3333); stripped from the front of PATH_INFO. Default "".
	ScriptName string
	// QueueTimeout is how long a request may wait in the queue for a
	// Python thread before it is answered 503. Zero means no limit.
	QueueTimeout time.Duration
	// Logger gets app tracebacks (ERROR). Default slog.Default().
	Logger *slog.Logger
	// Done, when set, is called after each request (Result.Pool set).
	Done func(r *http1.Request, res inflight.Result)
	// KeepHeader: copy the app's response header lines into the Result
	// (inflight.Result.Header) for Done; off, nothing is copied.
	KeepHeader bool
	// BufferBytes, when positive, makes the handler read each request's
	// whole body before queueing it (buffer.go): up to BufferBytes in
	// memory, the rest spooled to a temporary file in BufferDir (""
	// for os.TempDir()). Zero: the app streams the body, Go reading at
	// most MaxPrefetchBytes ahead of it.
	BufferBytes int64
	// BufferDiskBytes bounds the bytes spooled at once by all requests
	// of the handler: a body that can never fit is answered 413, one
	// that does not fit now 503 with Retry-After.
	BufferDiskBytes int64
	BufferDir       string

	mu      sync.Mutex
	free    []*slot   // idle slots, the most recently used last; guarded by mu
	count   int       // slots made, guarded by mu
	lowFree int       // the fewest idle slots since the last trim, guarded by mu
	sweeper sync.Once // starts sweepSlots (watch.go)
	// sweepIdle: the sweep ticks at its idle rate; sweepKick wakes it
	// (kickSweep). sweepKick is made with the sweep.
	sweepIdle atomic.Bool
	sweepKick chan struct{}
	stopping  atomic.Bool  // ExpireQueued was called
	spooled   atomic.Int64 // bytes of BufferDiskBytes reserved by requests in flight

	// The sweep's own state (gone.go), touched by its goroutine only.
	polls   []unix.PollFd
	cands   []watched
	goneLog struct {
		count   int
		example string
		last    time.Time
	}
}

// AfterLoad is the C hook to pass as python.Config.AfterLoad.
var AfterLoad = unsafe.Pointer(C.ts_wsgi_setup)

func init() {
	names := make([]*C.char, len(knownKeys))
	for i, k := range knownKeys {
		names[i] = C.CString(k) // kept for the process's life
	}
	arr := (**C.char)(C.malloc(C.size_t(len(names)) * C.size_t(unsafe.Sizeof(names[0]))))
	copy(unsafe.Slice(arr, len(names)), names)
	C.ts_wsgi_register_keys(arr, C.int(len(names)))
}

// slot is the reusable state of one request in flight: the C job, its
// completion channel and the handle callbacks (and the dispatcher) use to
// find it.
type slot struct {
	job     *C.ts_wsgi_job
	done    chan struct{}   // the job finished (done.go) or was withdrawn (gone.go)
	outcome atomic.Int32    // outcomeRan, or why sweep withdrew the job (gone.go)
	rec     inflight.Record // what Requests sees (watch.go)
	// seq numbers the slot's requests, pres says how to see its client
	// leave: both written before rec.Begin, read by the sweep under the
	// record's lock. kept is the seq of a request whose client
	// half-closed with work pending (not polled again); the sweep's.
	seq, kept uint64
	pres      http1.Presence
	handle    cgo.Handle
	w         *http1.ResponseWriter
	r         *http1.Request
	h         *Handler
	sync      atomic.Uint32 // written by callbacks, read after completion: orders their writes for the race detector
	block     []byte
	path      []byte
	werr      error // first write error in a callback
	rerr      error // the body read error the app saw, if any
	// headSent: the head is on the wire (writeHead). Go's own record; C
	// gets a copy (ts_wsgi_job_head_sent) only when the head leaves
	// mid-job, in a flush, where start_response's exc_info check reads it.
	headSent bool
}

var errSlot = errors.New("wsgi: cannot allocate a request slot")

func (h *Handler) getSlot() (*slot, error) {
	h.sweeper.Do(h.startSweep)
	h.mu.Lock()
	if n := len(h.free); n > 0 {
		s := h.free[n-1]
		h.free = h.free[:n-1]
		h.lowFree = min(h.lowFree, n-1)
		h.mu.Unlock()
		return s, nil
	}
	h.count++
	h.lowFree = 0
	h.mu.Unlock()
	job := C.ts_wsgi_job_new()
	if job == nil {
		h.mu.Lock()
		h.count--
		h.mu.Unlock()
		return nil, errSlot
	}
	if err := h.Pool.Dispatch(wakeSlot); err != nil {
		C.ts_wsgi_job_free(job)
		h.mu.Lock()
		h.count--
		h.mu.Unlock()
		return nil, err
	}
	s := &slot{job: job, h: h, done: make(chan struct{}, 1)}
	s.handle = cgo.NewHandle(s)
	C.ts_wsgi_job_init(job, C.uintptr_t(s.handle))
	register(s)
	return s, nil
}

// MinIdleSlots is how many idle slots the trim leaves (watch.go). Every
// slot a request frees is kept for the next one: making one costs C
// allocations, a cgo.Handle and a channel, and with more requests in
// flight than slots kept that was paid per request (measured, 32 kept on
// WSGI hello: 13.1 µs of server CPU per request at 64 connections, 11.8
// with all kept). Slots a burst left idle are freed by the trim instead.
const MinIdleSlots = 32

// MaxKeptBlockBytes bounds the request-block buffer an idle slot keeps (a
// prefetched body makes it up to MaxPrefetchBytes plus the head); the C
// buffers are trimmed alike (ts_wsgi_job_trim).
const MaxKeptBlockBytes = MaxPrefetchBytes + 16<<10

func (h *Handler) putSlot(s *slot) {
	s.w, s.r, s.werr, s.rerr = nil, nil, nil, nil
	s.pres = http1.Presence{}
	if cap(s.block) > MaxKeptBlockBytes {
		s.block = nil
	}
	if s.job.req_cap > C.TS_WSGI_KEEP_BYTES || s.job.head_cap > C.TS_WSGI_KEEP_BYTES || s.job.body_cap > C.TS_WSGI_KEEP_BYTES {
		C.ts_wsgi_job_trim(s.job)
	}
	h.mu.Lock()
	h.free = append(h.free, s)
	h.mu.Unlock()
}

// freeSlot releases an idle slot for good.
func freeSlot(s *slot) {
	unregister(s)
	s.handle.Delete()
	C.ts_wsgi_job_free(s.job)
}

func (h *Handler) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

// ServeHTTP1 runs one request: build the request block, submit the job,
// wait for its eventfd, finish the response. See doc.go.
func (h *Handler) ServeHTTP1(w *http1.ResponseWriter, r *http1.Request) {
	start := time.Now()
	res := inflight.Result{Pool: true}
	// One deferred call at the end for both: a further defer in this
	// function made Go give up open-coded defers (+0.25 % CPU on hello).
	var sp spool
	defer func() {
		sp.release(h) // after the job is over: wsgi.input reads the file
		if h.Done != nil {
			res.Duration = time.Since(start)
			res.Bytes = w.Written()
			h.Done(r, res)
		}
	}()

	s, err := h.getSlot()
	if err != nil {
		h.logger().Error("wsgi: no request slot", "err", err)
		res.Status = 503
		w.WriteSimple(503, "text/plain; charset=utf-8", []byte("Service Unavailable\n"), []byte("Retry-After: 1\r\n"))
		return
	}
	defer h.putSlot(s)
	s.w, s.r = w, r
	job := s.job

	// 1. The request block: environ entries, then the body: all of it
	//    when buffering (buffer.go), else the part that is here and small
	//    (no callback is then needed to read it).
	block, n := buildEnviron(s.block[:0], r, []byte(h.ScriptName), &s.path)
	bodyOff := len(block)
	bodyDone := r.Body.Done()
	submitted := start // when the job is queued: after a body that took time
	if h.BufferBytes > 0 {
		var ok bool
		var status int
		block, status, ok = h.buffer(w, r, block, bodyOff, &sp)
		s.block = block
		if !ok {
			res.Status = status
			return
		}
		if !bodyDone {
			submitted = time.Now() // the body was still arriving
		}
		bodyDone = true
	} else if bodyDone {
		if pre := r.Body.Buffered(); len(pre) <= MaxPrefetchBytes {
			block = append(block, pre...)
			r.Body.Consume(len(pre))
		} else {
			bodyDone = false
		}
	} else if !r.ExpectContinue {
		// Read the body ahead, up to MaxPrefetchBytes, before a Python
		// thread is involved: a client that trickles a small body (case
		// B40) then holds a goroutine, not one of the few pool threads.
		// Not for Expect: 100-continue, where reading sends the 100 (PEP
		// 3333: only once the app reads).
		for len(block)-bodyOff < MaxPrefetchBytes {
			if cap(block)-len(block) < 4<<10 {
				block = slices.Grow(block, 16<<10)
			}
			limit := min(cap(block), bodyOff+MaxPrefetchBytes)
			n, err := r.Body.Read(block[len(block):limit])
			block = block[:len(block)+n]
			if err == io.EOF {
				bodyDone = true
				break
			}
			if err != nil {
				// Bad framing, too large, too slow or gone: http1 answers
				// 400/413/408 (or nothing) once the handler returns.
				s.block = block
				res.Status = bodyErrStatus(err)
				return
			}
		}
	}
	preLen := len(block) - bodyOff
	s.block = block

	// The spooled rest of the body, read back by wsgi.input (pread, in C).
	bodyFD, bodyFDLen := C.int(-1), C.int64_t(0)
	if sp.f != nil {
		bodyFD, bodyFDLen = C.int(sp.f.Fd()), C.int64_t(sp.len)
	}

	// 2. Submit: one short cgo call that copies the block and queues the
	//    job; it never blocks and never attaches. The queue wait (and
	//    QueueTimeout) counts from here, not from the start of an upload.
	//    While it waits, the sweep watches its client through pres
	//    (gone.go).
	s.seq++
	var ok bool
	if s.pres, ok = w.Presence(); !ok {
		s.pres = http1.Presence{FD: -1}
	}
	s.rec.Begin(submitted, r.Method, r.Path)
	defer s.rec.End()
	var blockPtr *C.char
	if len(block) > 0 {
		blockPtr = (*C.char)(unsafe.Pointer(&block[0]))
	}
	s.headSent = false // as the submission resets C's head_sent
	switch C.ts_wsgi_submit((*C.ts_pool)(h.Pool.C()), job, blockPtr, C.size_t(len(block)), C.int(n), C.size_t(bodyOff),
		C.size_t(preLen), boolInt(bodyDone), bodyFD, bodyFDLen, boolInt(string(r.Method) == "HEAD")) {
	case C.TS_WSGI_SUBMIT_NOMEM:
		res.Status = 503
		w.WriteSimple(503, "text/plain; charset=utf-8", []byte("Service Unavailable\n"), []byte("Retry-After: 1\r\n"))
		return
	case C.TS_WSGI_SUBMIT_FULL:
		res.Status, res.Rejected = 503, true
		w.WriteSimple(503, "text/plain; charset=utf-8", []byte("Service Unavailable: request queue full\n"), []byte("Retry-After: 1\r\n"))
		return
	}
	h.kickSweep()

	// 3. Wait for the job to finish (done.go); past QueueTimeout a
	//    job still queued is withdrawn and answered 503, and one whose
	//    client left is withdrawn and dropped (gone.go).
	switch s.wait() {
	case outcomeExpired:
		res.Status, res.Rejected = 503, true
		res.QueueWait = time.Since(submitted) // all of it was spent queued
		w.WriteSimple(503, "text/plain; charset=utf-8", []byte("Service Unavailable: timed out waiting for a worker thread\n"), []byte("Retry-After: 1\r\n"))
		return
	case outcomeStopped:
		res.Status, res.Rejected = 503, true
		res.QueueWait = time.Since(submitted)
		w.WriteSimple(503, "text/plain; charset=utf-8", []byte("Service Unavailable: the server is restarting\n"), []byte("Retry-After: 1\r\n"))
		return
	case outcomeGone:
		res.Status, res.Withdrawn = 499, true
		res.QueueWait = time.Since(submitted)
		w.Drop()
		return
	}
	s.sync.Load()
	if job.base.started_ns > job.base.enqueued_ns {
		res.QueueWait = time.Duration(job.base.started_ns - job.base.enqueued_ns)
	}
	res.GILWait = time.Duration(job.base.gil_wait_ns)
	res.Ran, res.Thread = true, int(job.base.thread_index)

	// 4. Finish the response.
	res.Status = s.finish()
	if h.KeepHeader && s.headSent { // the head stays in the job until its next submission
		res.Header = append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(job.head)), int(job.status_len+job.header_len))[job.status_len:]...)
	}
}

// wait blocks the goroutine (not an OS thread) until the job is done. It
// returns outcomeRan, or why the sweep (gone.go) withdrew the job still
// queued.
func (s *slot) wait() int32 {
	<-s.done
	return s.outcome.Swap(outcomeRan)
}

// cancel withdraws the job if no thread has taken it yet, and reports
// whether it did.
func (s *slot) cancel() bool {
	return C.ts_pool_cancel((*C.ts_pool)(s.h.Pool.C()), &s.job.base) == 1
}

// writeHead sends the app's status line and headers; contentLength -1
// leaves the framing to http1 (chunked or close-delimited).
func (s *slot) writeHead(contentLength int64) error {
	job := s.job
	head := unsafe.Slice((*byte)(unsafe.Pointer(job.head)), int(job.status_len+job.header_len))
	err := s.w.WriteHead(int(job.status), head[:job.status_len], head[job.status_len:], contentLength, job.close != 0)
	s.headSent = true
	return err
}

func (s *slot) body() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(s.job.body)), int(s.job.out_len))
}

// finish completes the response after the job is done and returns the
// status sent.
func (s *slot) finish() int {
	job, w := s.job, s.w
	switch job.result {
	case C.TS_WSGI_OK:
		if !s.headSent {
			cl := int64(job.content_length)
			if cl < 0 && (job.is_head == 0 || job.out_len > 0) {
				// Every block was gathered: the length is known. Not for
				// an empty HEAD answer, whose GET length is unknown (RFC
				// 9110 §8.6: no Content-Length rather than a wrong one).
				cl = int64(job.out_len)
			}
			s.writeHead(cl)
		}
		if job.out_len > 0 {
			w.Write(s.body())
		}
		s.reportShort()
		return int(job.status)
	case C.TS_WSGI_FILE:
		f := os.NewFile(uintptr(job.file_fd), "file_wrapper")
		defer f.Close()
		if !s.headSent {
			cl := int64(job.content_length)
			if cl < 0 {
				cl = int64(job.file_count)
			}
			if err := s.writeHead(cl); err != nil {
				return int(job.status)
			}
		}
		if _, err := w.SendFile(f, int64(job.file_offset), int64(job.file_count)); err != nil && !errors.Is(err, http1.ErrClientGone) {
			s.h.logger().Warn("wsgi: sendfile", "err", err)
		} else if err == nil {
			s.reportShort()
		}
		return int(job.status)
	case C.TS_WSGI_GONE:
		w.Abort()
		return int(job.status)
	default: // TS_WSGI_ERROR
		text := "wsgi: app failed"
		if job.error != nil {
			text = C.GoString(job.error)
			C.ts_wsgi_job_free_error(job)
		}
		if s.rerr != nil {
			// The app failed because the request body could not be read
			// (bad framing, too large, timeout, client gone): the client's
			// fault, answered by http1 with 400/413/408 and a close.
			s.h.logger().Debug("wsgi: request body failed under the app", "err", s.rerr, "traceback", text)
			if s.headSent || w.Started() {
				w.Abort()
			}
			return bodyErrStatus(s.rerr)
		}
		s.h.logger().Error("wsgi: app raised", "method", string(s.r.Method), "target", string(s.r.Target), "traceback", text)
		if s.headSent || w.Started() {
			// The head is on the wire: the only honest end is to cut the
			// connection so the client sees a truncated response.
			w.Abort()
			return int(job.status)
		}
		w.WriteSimple(500, "text/plain; charset=utf-8", []byte("Internal Server Error\n"), nil)
		return 500
	}
}

// reportShort logs a response body that ended short of its Content-Length;
// http1 closes the connection (PEP 3333: "if the application does not
// provide enough data to meet its stated Content-Length, the server should
// close the connection and log or otherwise report the error").
func (s *slot) reportShort() {
	if declared, written, short := s.w.Short(); short {
		s.h.logger().Error("wsgi: the app's response body is shorter than its Content-Length: the connection is closed",
			"method", string(s.r.Method), "target", string(s.r.Target), "content_length", declared, "written", written)
	}
}

// bodyErrStatus is the status http1 answers for a body read error.
func bodyErrStatus(err error) int {
	switch {
	case errors.Is(err, http1.ErrBodyTooLarge):
		return 413
	case errors.Is(err, http1.ErrBodyTimeout):
		return 408
	case errors.Is(err, http1.ErrBodyFraming):
		return 400
	}
	return 0
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
