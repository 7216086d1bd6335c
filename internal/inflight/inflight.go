// Package inflight records the request a bridge's slot is serving, for the
// watchdog and the stop log (which request is slow, stuck or still
// running), at no shared cost per request: each slot holds one Record
// under its own mutex, which only a reader contends for; method and path
// are copied into buffers the record reuses. A reader gets Requests, the
// one in-flight type of WSGI and ASGI.
package inflight

import (
	"sync"
	"time"
	"unsafe"
)

// Record is what a reader sees of one slot's request. The zero value is
// idle.
type Record struct {
	mu           sync.Mutex
	active       bool
	start        time.Time
	method, path []byte
}

// Begin marks the record active: a request with method and path (copied)
// started at start.
func (r *Record) Begin(start time.Time, method, path []byte) {
	r.mu.Lock()
	r.active, r.start = true, start
	r.method = append(r.method[:0], method...)
	r.path = append(r.path[:0], path...)
	r.mu.Unlock()
}

// End marks the record idle.
func (r *Record) End() {
	r.mu.Lock()
	r.active = false
	r.mu.Unlock()
}

// Read calls f with the request if the record is active, and reports
// whether it was. f runs under the record's lock: the slices are valid
// only until it returns, and no other request can begin on the slot
// meanwhile (f may act on the request it was shown).
func (r *Record) Read(f func(method, path []byte, start time.Time)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active {
		f(r.method, r.path, r.start)
	}
	return r.active
}

// Request is one request in flight as a reader sees it: the one in-flight
// type of every app interface (WSGI's pool, ASGI's loops), for the
// watchdog, --timeout and the stop log.
type Request struct {
	Method, Path string
	Target       string // the request-target as sent (path and query); "" when not kept
	Remote       string // the client's address; "" when not kept
	Start        time.Time
	// Running is when a thread of its own took it (a pool thread), zero
	// while it waits in a queue. --timeout and the slow-request log
	// measure from here, not from Start, so a request that merely waits
	// for a busy pool is not slow. A request on an event loop runs from
	// Start.
	Running time.Time
	// Thread names the thread running it: a pool thread's name, as
	// python.Pool.ThreadName gives it, or an event loop's (ts-loop-N);
	// "" while it waits for one. TState is a pool thread's PyThreadState
	// for python.SampleStack, nil otherwise (a loop's stack is sampled by
	// the watchdog when it stalls).
	Thread string
	TState unsafe.Pointer
}

// Result describes one finished request, for the access log and metrics:
// the one result type of every app interface (WSGI's and ASGI's Handler
// pass it to their Done).
type Result struct {
	Status   int           // status sent (500/503 when the server answered; 101 for an accepted WebSocket)
	Duration time.Duration // arrival → response handed to the socket (a WebSocket: handshake answered)
	Bytes    int64         // body bytes sent (http1.ResponseWriter.Written)
	// Loop is the index of the event loop that served it (ASGI, --loops);
	// 0 where there is none (WSGI).
	Loop int
	// Pool: the request went through a pool's queue (WSGI), and QueueWait
	// and GILWait measure it; false on an event loop, where both are zero.
	Pool      bool
	QueueWait time.Duration // submit → a Python thread took the job
	GILWait   time.Duration // time its thread waited for the GIL during the job (python.GILWaitTiming)
	Rejected  bool          // answered 503 by the server (queue full or timed out)
	// Withdrawn: the client left while the request was queued; it was
	// dropped from the queue, never started, and got no response (Status
	// 499, nginx's "client closed request"; wsgi/gone.go).
	Withdrawn bool
	// Ran: a pool thread ran it (WSGI), and Thread is that thread's
	// index in its pool (python.Pool.ThreadName).
	Ran    bool
	Thread int
	// Header is the app's response header lines ("Name: value\r\n"), a
	// copy kept only when the handler was asked to (its KeepHeader: an
	// --access-log-format with a %({name}o)s atom); nil otherwise.
	Header []byte
}
