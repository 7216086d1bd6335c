package server

// The accept gate without Python: each test builds a gate on a real
// loopback listener and replaces its full func (workerFull reads the
// pool's stats, which these tests leave alone), so what is tested is
// gate.go's own logic: when a closed gate takes a connection from the
// kernel's queue anyway (staleAccept, staleAfterFor, stuckAfter), when a
// finished request opens it (wake), how long an open gate defers
// (deferral), and what Close hands back (drain).

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"turnstile/internal/config"
)

// testGate returns a gate on a fresh 127.0.0.1 listener whose full
// reports full's value. The listener is closed at cleanup.
func testGate(t *testing.T, queueTimeout time.Duration, full *atomic.Bool) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(ln, "busy", queueTimeout)
	g.full = full.Load
	t.Cleanup(func() {
		g.Close()
		theGate.CompareAndSwap(g, nil)
	})
	return g
}

// dialPending connects to g's listener and waits (up to 2 s) until the
// kernel's accept queue holds the connection. The caller's side is
// closed at cleanup.
func dialPending(t *testing.T, g *gate) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", g.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !g.pendingWait(2000) {
		t.Fatal("the connection never showed in the accept queue")
	}
	return c
}

// acceptAsync runs g.Accept on its own goroutine and delivers its result.
func acceptAsync(g *gate) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		c, err := g.Accept()
		ch <- acceptResult{c, err}
	}()
	return ch
}

type acceptResult struct {
	c   net.Conn
	err error
}

func TestStaleAfterFor(t *testing.T) {
	for _, tc := range []struct {
		queueTimeout, want time.Duration
	}{
		{0, 250 * time.Millisecond},                     // no --queue-timeout
		{-1, 250 * time.Millisecond},                    // negative: none either
		{100 * time.Millisecond, 20 * time.Millisecond}, // a twentieth is 5 ms: the floor
		{time.Second, 50 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond},
		{5 * time.Second, 250 * time.Millisecond},
		{30 * time.Second, 250 * time.Millisecond}, // the cap
	} {
		if got := staleAfterFor(tc.queueTimeout); got != tc.want {
			t.Errorf("staleAfterFor(%v) = %v; want %v", tc.queueTimeout, got, tc.want)
		}
	}
}

func TestGateModeFor(t *testing.T) {
	for _, tc := range []struct {
		env     string
		workers int
		want    string
	}{
		{"", 1, "off"}, // no other worker could take the connection
		{"", 2, "busy"},
		{"queue", 2, "queue"},
		{"off", 4, "off"},
		{"busy", 1, "busy"},
		{"bogus", 2, "busy"}, // an unknown value is ignored
		{"bogus", 1, "off"},
	} {
		t.Setenv("TURNSTILE_GATE", tc.env)
		if got := gateModeFor(config.ReadSwitches().Gate, tc.workers); got != tc.want {
			t.Errorf("TURNSTILE_GATE=%q, %d workers: gateModeFor = %q; want %q", tc.env, tc.workers, got, tc.want)
		}
	}
}

// TestGateDeferral: no deferral without a share (ASGI, one worker) or at
// or below it; deferUnit per request over the share, at most maxDefer.
func TestGateDeferral(t *testing.T) {
	var full atomic.Bool
	g := testGate(t, 0, &full)
	if d := g.deferral(); d != 0 {
		t.Fatalf("deferral without setShare = %v; want 0", d)
	}
	var load atomic.Int64
	g.setShare(2, func() int { return int(load.Load()) }) // share: 4
	for _, tc := range []struct {
		load int64
		want time.Duration
	}{
		{0, 0},
		{4, 0},
		{5, deferUnit},
		{8, 4 * deferUnit},
		{4 + 20, maxDefer},
		{1000, maxDefer},
	} {
		load.Store(tc.load)
		if got := g.deferral(); got != tc.want {
			t.Errorf("deferral with load %d over share 4 = %v; want %v", tc.load, got, tc.want)
		}
	}
}

// TestGateStaleAccept: a closed gate takes a connection once it has
// waited staleAfter in the kernel's queue, 4× as long when the worker
// finished no request for stuckAfter, and at once the normal limit again
// after a request finished (wake).
func TestGateStaleAccept(t *testing.T) {
	var full atomic.Bool
	full.Store(true)
	g := testGate(t, time.Second, &full) // staleAfter 50 ms
	if g.staleAfter != 50*time.Millisecond {
		t.Fatalf("staleAfter = %v; want 50ms", g.staleAfter)
	}
	if c, err := g.staleAccept(time.Now()); c != nil || err != nil {
		t.Fatalf("staleAccept with an empty queue = %v, %v; want nothing", c, err)
	}

	// A worker that finished no request for stuckAfter: limit 200 ms.
	dialPending(t, g)
	t0 := time.Now()
	g.seenDoneAt = t0.Add(-2 * stuckAfter)
	for _, at := range []time.Duration{0, 60 * time.Millisecond, 190 * time.Millisecond} {
		if c, err := g.staleAccept(t0.Add(at)); c != nil || err != nil {
			t.Fatalf("stuck worker, connection seen %v ago: staleAccept = %v, %v; want nothing before 4×staleAfter", at, c, err)
		}
	}
	c, err := g.staleAccept(t0.Add(200 * time.Millisecond))
	if c == nil || err != nil {
		t.Fatalf("stuck worker, connection seen 200ms ago: staleAccept = %v, %v; want the connection", c, err)
	}
	c.Close()
	if n := g.stale.Load(); n != 1 {
		t.Errorf("stale = %d; want 1", n)
	}

	// A request finished meanwhile: the limit is staleAfter again.
	dialPending(t, g)
	g.pendingSince = time.Time{}
	g.wake()
	t1 := time.Now()
	if c, err := g.staleAccept(t1); c != nil || err != nil {
		t.Fatalf("first sight of the second connection: staleAccept = %v, %v; want nothing", c, err)
	}
	c, err = g.staleAccept(t1.Add(50 * time.Millisecond))
	if c == nil || err != nil {
		t.Fatalf("after a finished request, connection seen 50ms ago: staleAccept = %v, %v; want the connection", c, err)
	}
	c.Close()
	if at := t1.Add(50 * time.Millisecond); g.seenDone != 1 || !g.seenDoneAt.Equal(at) {
		t.Errorf("seenDone, seenDoneAt = %d, %v; want 1, %v (when staleAccept saw the wake's request)", g.seenDone, g.seenDoneAt, at)
	}
}

// TestGateClosedAcceptsStale: Accept on a gate that stays closed returns
// a waiting connection after staleAfter (20 ms at --queue-timeout 100ms),
// not never.
func TestGateClosedAcceptsStale(t *testing.T) {
	var full atomic.Bool
	full.Store(true)
	g := testGate(t, 100*time.Millisecond, &full)
	start := time.Now()
	dialPending(t, g)
	select {
	case r := <-acceptAsync(g):
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.c.Close()
		if d := time.Since(start); d < g.staleAfter {
			t.Errorf("accepted after %v; want at least staleAfter %v", d, g.staleAfter)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a closed gate never took a connection waiting in the kernel's queue")
	}
	if g.gated.Load() != 1 || g.stale.Load() != 1 {
		t.Errorf("gated, stale = %d, %d; want 1, 1", g.gated.Load(), g.stale.Load())
	}
}

// TestGateWakeOpens: a closed gate with a long staleAfter holds a waiting
// connection until the worker has room and a finished request wakes it.
func TestGateWakeOpens(t *testing.T) {
	var full atomic.Bool
	full.Store(true)
	g := testGate(t, 0, &full) // staleAfter 250 ms
	g.staleAfter = time.Hour
	dialPending(t, g)
	res := acceptAsync(g)
	select {
	case r := <-res:
		t.Fatalf("Accept returned %v, %v while the gate was closed", r.c, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	if !g.waiting.Load() {
		t.Fatal("Accept is not waiting at the gate")
	}
	full.Store(false)
	g.wake()
	select {
	case r := <-res:
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("an opened, woken gate did not accept")
	}
	if g.gated.Load() != 1 || g.stale.Load() != 0 || g.done.Load() != 1 {
		t.Errorf("gated, stale, done = %d, %d, %d; want 1, 0, 1", g.gated.Load(), g.stale.Load(), g.done.Load())
	}
}

// TestGateCloseDrains: Close takes the connections the kernel has queued
// (the test process's parent holds no descriptor of the socket, as at a
// full stop), and Accept hands out each, the bytes its client sent
// intact, then net.ErrClosed.
func TestGateCloseDrains(t *testing.T) {
	var full atomic.Bool
	g := testGate(t, 0, &full)
	const n = 3
	for i := 0; i < n; i++ {
		c := dialPending(t, g)
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		c, err := g.Accept()
		if err != nil {
			t.Fatalf("Accept %d after Close: %v; want a drained connection", i, err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 16)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "GET / HTTP/1.1\r\n" {
			t.Errorf("drained connection %d read %q, %v; want the request line its client sent", i, buf, err)
		}
		c.Close()
	}
	if c, err := g.Accept(); c != nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after the drained ones = %v, %v; want net.ErrClosed", c, err)
	}
}
