package server

import (
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The accept gate. Every worker accepts on the one listening socket it
// inherited from the master, so the kernel's accept queue is shared: a
// worker that calls accept(2) takes the next connection. A worker that
// cannot take more work stops calling accept until it can, and the
// connections wait in the shared queue (--backlog) for a worker that can
// (per-worker SO_REUSEPORT sockets would instead keep feeding a stuck
// worker its fixed share).
//
// When is a worker full? bench/workers.py measured it: the recorded run
// is bench/results/workers-stuck-20261129T203621Z.md (one of two workers
// holding the GIL for 5 s, a new connection per request at 500 req/s;
// compare the "fast requests > 1 s" column of its keep-alive false rows).
// Gating only on a full request queue (turnstile-gate-queue) let the
// stuck worker keep taking its share of the new connections, about as
// many as Granian's stuck worker took; gating as soon as no pool thread
// is idle and a request waits (turnstile) left a handful. So:
//
//	busy   no pool thread is idle and a request already waits (Idle ==
//	       0 and Queued > 0), or the ASGI event loop is stalled
//	       (the watchdog's threshold): the default with several workers
//	off    never: the default with one worker, where no other worker
//	       could take the connection and the bound rule answers 503
//	       from a full queue instead
//	queue  the request queue is full (Queued >= QueueSize), or the
//	       loop is stalled: for A/B runs
//
// The environment switch TURNSTILE_GATE=busy|queue|off overrides the
// default, for A/B runs.
//
// A closed gate is not a queue without bound (issue 29). With kept-alive
// clients keeping every thread of every worker busy, requests wait in
// each pool's queue, every gate stays closed, and a new connection used
// to sit in the kernel's queue until a kept-alive client went away: a
// fresh request waited 28 s under wrk -c32 on 1 s views, and a load
// balancer's health check (a new connection) failed on a busy, healthy
// instance. Now a closed gate watches the kernel's queue (poll(2) on the
// listening socket, every gatePoll and at every finished request), and
// takes a connection that has waited there staleAfterFor(--queue-timeout)
// (a twentieth of it, 20-250 ms): only then has no worker taken it. Its
// request then waits in this worker's queue like any other, bounded by
// --queue-size and --queue-timeout: served when a thread frees, else the
// 503 with Retry-After a queued request gets. So a new connection is
// answered within about --queue-timeout plus a twentieth and the sweep's
// tenth (bench/results/gate-wait-20261201.md, --queue-timeout 2: 17-21 s
// before, 28 s in the run; 2.2 s after). The measured benefit above stays: while another
// worker accepts, the queue never holds a connection that long, so a
// stuck worker takes none; and a worker that finished no request for
// stuckAfter waits four times as long, so that a busy worker that still
// makes progress takes the connection first.
//
// The gate also spreads bursts (see deferral): with kept-alive clients a
// connection stays on the worker that accepted it, and the first worker
// to wake took a whole burst (32 of 32 connections opened as wrk opens
// them).
func gateModeFor(mode string, workers int) string {
	if mode != "" {
		return mode // TURNSTILE_GATE (config.Switches)
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
	s := wsgiPoolStats()
	if s.Threads == 0 || s.QueueSize == 0 {
		return false // no pool (ASGI)
	}
	if mode == "busy" {
		// Not "every thread busy": a thread takes a job only once it
		// holds the GIL (pool.c), so behind a thread stuck with the GIL
		// the others wait to attach, neither idle nor busy.
		return s.Idle == 0 && s.Queued > 0
	}
	return s.Queued >= s.QueueSize
}

// gate is a net.Listener whose Accept waits while full reports true. A
// finished request wakes it (wake); otherwise it looks again every
// gatePoll. While it waits it watches the kernel's queue: a connection
// that has waited there staleAfter (every worker's gate is closed) is
// accepted anyway (staleAccept). While open, a worker with more requests
// than its share defers each accept briefly (deferral).
type gate struct {
	net.Listener
	rc      syscall.RawConn // the listening socket, for poll(2); nil if none
	full    func() bool
	wakeC   chan struct{}
	waiting atomic.Bool
	closed  chan struct{}
	once    sync.Once
	gated   atomic.Int64 // times Accept found the gate closed

	// Accept's goroutine only (one Serve loop per gate):
	staleAfter   time.Duration // see staleAfterFor
	pendingSince time.Time     // first seen a connection waiting while closed; zero: none seen
	seenDone     int64         // done as staleAccept last saw it
	seenDoneAt   time.Time     // when staleAccept saw done change (or the gate was made)

	// done counts finished requests: a counter, not a clock read per
	// request (time.Now in wake cost 0.4 % CPU on hello); staleAccept
	// turns it into "no request finished for stuckAfter".
	done     atomic.Int64
	share    atomic.Int64 // see deferral; 0: none (ASGI, one worker)
	load     atomic.Pointer[func() int]
	stale    atomic.Int64 // connections accepted while closed (staleAccept)
	deferred atomic.Int64 // accepts deferred (deferral)

	mu      sync.Mutex
	pending []net.Conn // drained at Close, handed out by Accept; guarded by mu
}

// maxDrain bounds the connections Close takes from the kernel's queue.
const maxDrain = 4096

// theGate is the worker's gate, woken by the request tracker.
var theGate atomic.Pointer[gate]

// newGate wraps ln; mode is gateModeFor's, queueTimeout --queue-timeout.
func newGate(ln net.Listener, mode string, queueTimeout time.Duration) *gate {
	full := func() bool { return workerFull(mode) }
	g := &gate{Listener: ln, full: full, wakeC: make(chan struct{}, 1), closed: make(chan struct{}),
		staleAfter: staleAfterFor(queueTimeout)}
	if sc, ok := ln.(syscall.Conn); ok {
		g.rc, _ = sc.SyscallConn()
	}
	g.seenDoneAt = time.Now()
	theGate.Store(g)
	return g
}

// setShare turns on the deferral (see deferral): threads is the pool's
// size, load counts this worker's requests (http1's InFlight plus
// FreshConns).
func (g *gate) setShare(threads int, load func() int) {
	g.load.Store(&load)
	g.share.Store(2 * int64(threads))
}

// Accept waits until the worker has room, then accepts. After Close it
// returns the connections Close drained, then net.ErrClosed.
func (g *gate) Accept() (net.Conn, error) {
	for {
		if c := g.pop(); c != nil {
			return c, nil
		}
		if g.full() {
			if c, err := g.waitGated(); c != nil || err != nil {
				return c, err
			}
		}
		if d := g.deferral(); d > 0 {
			c, err, done := g.deferredAccept(d)
			if done {
				return c, err
			}
			continue
		}
		c, err := g.Listener.Accept()
		if err != nil {
			if p := g.pop(); p != nil {
				return p, nil
			}
			return c, err
		}
		return c, nil
	}
}

// waitGated waits while the gate is closed. It returns (nil, nil) when
// the gate opens, a connection that waited staleAfter in the kernel's
// queue, or the drained connections and then net.ErrClosed after Close.
func (g *gate) waitGated() (net.Conn, error) {
	g.gated.Add(1)
	g.waiting.Store(true)
	defer g.waiting.Store(false)
	g.pendingSince = time.Time{}
	t := time.NewTimer(gatePoll)
	defer t.Stop()
	for g.full() {
		select {
		case <-g.wakeC:
		case <-t.C:
			t.Reset(gatePoll)
		case <-g.closed:
			if c := g.pop(); c != nil {
				return c, nil
			}
			return nil, net.ErrClosed
		}
		if c, err := g.staleAccept(time.Now()); c != nil || err != nil {
			return c, err
		}
	}
	return nil, nil
}

// staleAfterFor is how long a connection waits in the kernel's queue,
// while this worker's gate is closed, before the worker accepts it
// anyway: a twentieth of --queue-timeout, between 20 and 250 ms (250 ms
// without a timeout). A worker that finished no request for
// stuckAfter waits four times as long, so that a busy worker that still
// makes progress takes the connection first.
func staleAfterFor(queueTimeout time.Duration) time.Duration {
	if queueTimeout <= 0 {
		return 250 * time.Millisecond
	}
	return min(max(queueTimeout/20, 20*time.Millisecond), 250*time.Millisecond)
}

// stuckAfter: a worker that finished no request for this long (and is
// gated) counts as stuck for staleAccept.
const stuckAfter = time.Second

// staleAccept accepts one connection if the kernel's queue has held one
// for the gate's staleAfter (4× when this worker is stuck) while this
// gate was closed: every worker is busy, and a connection must not wait
// in the kernel without bound. The request then waits in this worker's
// queue under --queue-size and --queue-timeout like any other: served
// when a thread frees, or 503 with Retry-After. At most one per call
// (one per gatePoll or finished request). (nil, nil): nothing to take.
func (g *gate) staleAccept(now time.Time) (net.Conn, error) {
	if !g.pendingNow() {
		g.pendingSince = time.Time{}
		return nil, nil
	}
	if g.pendingSince.IsZero() {
		g.pendingSince = now
		return nil, nil
	}
	limit := g.staleAfter
	if d := g.done.Load(); d != g.seenDone {
		g.seenDone, g.seenDoneAt = d, now
	} else if now.Sub(g.seenDoneAt) >= stuckAfter {
		limit *= 4 // none finished since at least then
	}
	if now.Sub(g.pendingSince) < limit {
		return nil, nil
	}
	// pendingSince stays: the ones behind it have waited too, and the
	// next call (a gatePoll later) takes the next.
	c, err := g.tryAccept()
	if c != nil {
		g.stale.Add(1)
	}
	return c, err
}

// The deferral spreads a burst of connections over the workers. Every
// worker's poller wakes for a new connection, and the first to run takes
// it and, in a tight loop, the rest of the burst before the others have
// woken (measured: 32 connections opened at once from one thread, as wrk
// opens them, went 32-0 or 31-1 to two workers in 4 of 5 bursts). With
// kept-alive clients they stay there: one worker served the load while
// the other idled. A worker whose load (requests in flight, queued ones
// included, plus connections accepted that have not begun a request)
// exceeds its share (twice its pool threads: all busy and as many
// queued) waits deferUnit per request over the share, at most maxDefer,
// before it takes a waiting connection, and takes it only if no other
// worker did meanwhile. The worker with the lighter load thus wins the
// race; a request that would queue here anyway waits at most maxDefer
// more; and a worker below its share never waits. Measured with these
// values: 32-connection bursts split 16-16 to 22-10 (bench/gate_wait.py);
// wrk -c64 with a new connection per request on a 13-byte view, where
// both workers are over their share and defer about one accept in five,
// 15.7 k req/s against 16.3 k with TURNSTILE_GATE_DEFER=0 (within the
// noise of the shared machine). TURNSTILE_GATE_DEFER=0 turns it off, for
// A/B runs. ASGI workers (no pool) do not defer.
const (
	deferUnit = 25 * time.Microsecond
	maxDefer  = 500 * time.Microsecond
)

// deferral is how long to defer the next accept (0: none).
func (g *gate) deferral() time.Duration {
	share := g.share.Load()
	f := g.load.Load()
	if share <= 0 || f == nil {
		return 0
	}
	excess := int64((*f)()) - share
	if excess <= 0 {
		return 0
	}
	return min(time.Duration(excess)*deferUnit, maxDefer)
}

// deferredAccept waits until a connection waits in the kernel's queue,
// then d more, then takes it if it is still there. done false: nothing
// taken (another worker took it, or the gate closed meanwhile); Accept
// looks again.
func (g *gate) deferredAccept(d time.Duration) (c net.Conn, err error, done bool) {
	for !g.pendingWait(10) {
		select {
		case <-g.closed:
			return nil, nil, false
		default:
		}
		if g.full() || g.deferral() == 0 {
			return nil, nil, false
		}
	}
	time.Sleep(d)
	g.deferred.Add(1)
	if !g.pendingNow() {
		return nil, nil, false
	}
	c, err = g.tryAccept()
	return c, err, c != nil || err != nil
}

// pendingNow reports whether a connection waits in the kernel's queue
// (the listening socket is readable).
func (g *gate) pendingNow() bool { return g.pendingWait(0) }

// pendingWait is pendingNow waiting up to ms milliseconds in poll(2).
func (g *gate) pendingWait(ms int) bool {
	if g.rc == nil {
		return false
	}
	ready := false
	g.rc.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(p, ms)
			if err == unix.EINTR {
				continue
			}
			ready = err == nil && n > 0 && p[0].Revents&unix.POLLIN != 0
			return
		}
	})
	return ready
}

// tryAccept accepts a connection waiting in the kernel's queue without
// blocking on an empty one (another worker may have taken it): it gives
// Accept a deadline of a millisecond. (nil, nil): none.
func (g *gate) tryAccept() (net.Conn, error) {
	dl, ok := g.Listener.(interface{ SetDeadline(time.Time) error })
	if !ok {
		return nil, nil
	}
	dl.SetDeadline(time.Now().Add(time.Millisecond))
	c, err := g.Listener.Accept()
	dl.SetDeadline(time.Time{})
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil, nil
		}
		if p := g.pop(); p != nil {
			return p, nil
		}
		return nil, err
	}
	return c, nil
}

func (g *gate) pop() net.Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		return nil
	}
	c := g.pending[0]
	g.pending = g.pending[1:]
	return c
}

// Close closes this worker's descriptor of the listening socket. It first
// takes the connections the kernel has already queued on the socket
// (accept4 until EAGAIN), and Accept hands them to the server, which
// serves them while it shuts down: when the last process closes a
// listening socket, the kernel resets every connection still in its
// queue, requests already sent included. At a full stop the master has
// closed its descriptor first, so the last worker to close drains the
// queue — which the gate may have filled while every worker was busy.
//
// While the master still holds the socket (a rolling restart, a worker
// recycled or scaled down) the queue outlives this descriptor, so Close
// leaves it to the workers that stay: a connection this stopping worker
// took would be served by it, and a WebSocket handshake on it would open a
// session only to be closed with 1012 (issue 29: 7-9 of ~12 000
// handshakes in 3 SIGHUPs got a 503 that way).
func (g *gate) Close() error {
	g.once.Do(func() {
		if !masterHolds(g.Listener) {
			g.drain()
		}
		close(g.closed)
	})
	return g.Listener.Close()
}

// masterHolds reports whether the parent process — the master — still has
// ln's socket open, from /proc/PPID/fd. The master closes its descriptor
// before it stops the workers (a full stop); a master that died has none.
// False when it cannot tell (a worker whose --user cannot read the
// master's /proc entry): then Close drains as at a full stop.
func masterHolds(ln net.Listener) bool {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var st unix.Stat_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil || serr != nil {
		return false
	}
	want := "socket:[" + strconv.FormatUint(st.Ino, 10) + "]"
	dir := "/proc/" + strconv.Itoa(os.Getppid()) + "/fd/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if l, err := os.Readlink(dir + e.Name()); err == nil && l == want {
			return true
		}
	}
	return false
}

func (g *gate) drain() {
	sc, ok := g.Listener.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	var fds []int
	rc.Control(func(fd uintptr) {
		for len(fds) < maxDrain {
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			if err != nil {
				return // EAGAIN: the queue is empty
			}
			fds = append(fds, nfd)
		}
	})
	var conns []net.Conn
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "drained")
		c, err := net.FileConn(f) // a dup; f is closed below
		f.Close()
		if err == nil {
			conns = append(conns, c)
		}
	}
	g.mu.Lock()
	g.pending = append(g.pending, conns...)
	g.mu.Unlock()
}

// wake makes a waiting Accept look at the pool again; a request ended.
func (g *gate) wake() {
	g.done.Add(1)
	if g.waiting.Load() {
		select {
		case g.wakeC <- struct{}{}:
		default:
		}
	}
}

// wakeGate wakes the worker's gate, if it has one.
func wakeGate() {
	if g := theGate.Load(); g != nil {
		g.wake()
	}
}
