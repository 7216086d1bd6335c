package server

import (
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"turnstile/internal/python"
)

// The accept gate. Every worker accepts on the one listening socket it
// inherited from the master, so the kernel's accept queue is shared: a
// worker that calls accept(2) takes the next connection. A worker that
// cannot take more work stops calling accept until it can, and the
// connections wait in the shared queue (--backlog) for a worker that can
// (per-worker SO_REUSEPORT sockets would instead keep feeding a stuck
// worker its fixed share).
//
// When is a worker full? bench/workers.py measured it (bench/results/
// workers-stuck-*.md): with one of two workers holding the GIL for 5 s
// and a new connection per request at 500 req/s, gating only on a full
// request queue let the stuck worker take about half the connections
// (1027 requests over 1 s), as Granian does (945); gating as soon as no
// pool thread is idle and a request waits left 5. So:
//
//	busy   no pool thread is idle and a request already waits (Busy ==
//	       Threads and Queued > 0), or the ASGI event loop is stalled
//	       (the watchdog's threshold): the default with several workers
//	off    never: the default with one worker, where no other worker
//	       could take the connection and the bound rule answers 503
//	       from a full queue instead
//	queue  the request queue is full (Queued >= QueueSize), or the
//	       loop is stalled: for A/B runs
//
// The environment switch TURNSTILE_GATE=busy|queue|off overrides the
// default, for A/B runs.
func gateModeFor(workers int) string {
	switch m := os.Getenv("TURNSTILE_GATE"); m {
	case "busy", "queue", "off":
		return m
	}
	if workers > 1 {
		return "busy"
	}
	return "off"
}

// gatePoll bounds how long a closed gate waits before it looks at the
// pool again when no request finished in between.
const gatePoll = 5 * time.Millisecond

// workerFull reports whether this worker should stop accepting (see
// gateModeFor).
func workerFull(mode string) bool {
	if mode == "off" {
		return false
	}
	if wd := activeWatchdog.Load(); wd != nil && wd.Stalled() > 0 {
		return true
	}
	s := python.Stats()
	if s.Threads == 0 || s.QueueSize == 0 {
		return false // no pool (ASGI)
	}
	if mode == "busy" {
		return s.Busy >= s.Threads && s.Queued > 0
	}
	return s.Queued >= s.QueueSize
}

// gate is a net.Listener whose Accept waits while full reports true. A
// finished request wakes it (wake); otherwise it looks again every
// gatePoll.
type gate struct {
	net.Listener
	full    func() bool
	wakeC   chan struct{}
	waiting atomic.Bool
	closed  chan struct{}
	once    sync.Once
	gated   atomic.Int64 // times Accept found the gate closed
}

// theGate is the worker's gate, woken by the request tracker.
var theGate atomic.Pointer[gate]

// newGate wraps ln; mode is gateModeFor's.
func newGate(ln net.Listener, mode string) *gate {
	full := func() bool { return workerFull(mode) }
	g := &gate{Listener: ln, full: full, wakeC: make(chan struct{}, 1), closed: make(chan struct{})}
	theGate.Store(g)
	return g
}

// Accept waits until the worker has room, then accepts.
func (g *gate) Accept() (net.Conn, error) {
	if g.full() {
		g.gated.Add(1)
		g.waiting.Store(true)
		t := time.NewTimer(gatePoll)
		for g.full() {
			select {
			case <-g.wakeC:
			case <-t.C:
				t.Reset(gatePoll)
			case <-g.closed:
				t.Stop()
				g.waiting.Store(false)
				return nil, net.ErrClosed
			}
		}
		t.Stop()
		g.waiting.Store(false)
	}
	return g.Listener.Accept()
}

// wake makes a waiting Accept look at the pool again.
func (g *gate) wake() {
	if g.waiting.Load() {
		select {
		case g.wakeC <- struct{}{}:
		default:
		}
	}
}

// Close closes the listener and releases a waiting Accept.
func (g *gate) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Listener.Close()
}

// wakeGate wakes the worker's gate, if it has one.
func wakeGate() {
	if g := theGate.Load(); g != nil {
		g.wake()
	}
}
