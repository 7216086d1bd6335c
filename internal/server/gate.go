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
		// Not "every thread busy": a thread takes a job only once it
		// holds the GIL (pool.c), so behind a thread stuck with the GIL
		// the others wait to attach, neither idle nor busy.
		return s.Idle == 0 && s.Queued > 0
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

	mu      sync.Mutex
	pending []net.Conn // drained at Close, handed out by Accept; guarded by mu
}

// maxDrain bounds the connections Close takes from the kernel's queue.
const maxDrain = 4096

// theGate is the worker's gate, woken by the request tracker.
var theGate atomic.Pointer[gate]

// newGate wraps ln; mode is gateModeFor's.
func newGate(ln net.Listener, mode string) *gate {
	full := func() bool { return workerFull(mode) }
	g := &gate{Listener: ln, full: full, wakeC: make(chan struct{}, 1), closed: make(chan struct{})}
	theGate.Store(g)
	return g
}

// Accept waits until the worker has room, then accepts. After Close it
// returns the connections Close drained, then net.ErrClosed.
func (g *gate) Accept() (net.Conn, error) {
	if c := g.pop(); c != nil {
		return c, nil
	}
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
				if c := g.pop(); c != nil {
					return c, nil
				}
				return nil, net.ErrClosed
			}
		}
		t.Stop()
		g.waiting.Store(false)
	}
	c, err := g.Listener.Accept()
	if err != nil {
		if p := g.pop(); p != nil {
			return p, nil
		}
	}
	return c, err
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

// wake makes a waiting Accept look at the pool again.
func (g *gate) wake() {
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
