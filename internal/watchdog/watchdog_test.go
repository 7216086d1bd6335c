package watchdog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"turnstile/internal/inflight"
	"turnstile/internal/python"
)

// fakeLoop is a Loop in Go: a probe is drained at once unless the loop is
// blocked; unblocking drains what waited, and the wait is the lag (as
// asgi/loop.c does on its thread). No Python runs: TState stays nil, so
// stalls have no stack.
type fakeLoop struct {
	index int

	mu      sync.Mutex
	blocked bool
	beat    int64   // python.Now of the last drain; 0 before the first
	lag     int64   // the longest wait since the last read
	drained uint64  // probes drained
	queued  []int64 // push times of the probes waiting
	reqs    []inflight.Request
}

func (l *fakeLoop) Index() int { return l.index }

func (l *fakeLoop) PushProbe() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queued = append(l.queued, python.Now())
	if !l.blocked {
		l.drainLocked()
	}
	return true
}

func (l *fakeLoop) drainLocked() {
	now := python.Now()
	for _, at := range l.queued {
		l.lag = max(l.lag, now-at)
		l.drained++
	}
	l.queued = l.queued[:0]
	l.beat = now
}

func (l *fakeLoop) ReadHeartbeat() Heartbeat {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := Heartbeat{Beat: l.beat, Lag: l.lag, Probes: l.drained}
	l.lag = 0
	return h
}

func (l *fakeLoop) Connections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *fakeLoop) Requests() []inflight.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]inflight.Request(nil), l.reqs...)
}

// block stops the loop from draining; unblock drains what waited, as a
// loop that turns again.
func (l *fakeLoop) block() {
	l.mu.Lock()
	l.blocked = true
	l.mu.Unlock()
}

func (l *fakeLoop) unblock() {
	l.mu.Lock()
	l.blocked = false
	l.drainLocked()
	l.mu.Unlock()
}

// fakePool is a Pool with a fixed list of requests.
type fakePool struct{ reqs []inflight.Request }

func (p *fakePool) Requests() []inflight.Request { return p.reqs }

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newWatchdog(t *testing.T, loops []Loop, pools []Pool) (*Watchdog, *logBuffer) {
	t.Helper()
	buf := &logBuffer{}
	w := &Watchdog{StallThreshold: MinStallThreshold, Loops: loops, Pools: pools,
		Log: slog.New(slog.NewTextHandler(buf, nil))}
	return w, buf
}

// value reads a counter's or a gauge's value, or a histogram's sample count.
func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return float64(m.Histogram.GetSampleCount())
}

// waitFor polls cond every Tick for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(Tick) {
		if cond() {
			return true
		}
	}
	return cond()
}

// A blocked loop is a stall: seen while it lasts (Stalled, Stalling, an
// ongoing Stall with the requests in flight), recorded when the loop
// turns again (Stalls, the metrics of that loop only), and the loop
// beside it is not stalled.
func TestStall_OneLoopOfTwo(t *testing.T) {
	quiet, stuck := &fakeLoop{index: 1}, &fakeLoop{index: 3}
	stuck.reqs = []inflight.Request{{Method: "GET", Path: "/block", Start: time.Now()}}
	w, logs := newWatchdog(t, []Loop{quiet, stuck}, nil)
	w.Start()
	defer w.Stop()
	if !waitFor(time.Second, func() bool { return stuck.ReadHeartbeat().Beat != 0 }) {
		t.Fatal("no probe was pushed to the loop")
	}
	stuck.block()
	if !waitFor(2*time.Second, func() bool { return w.LoopStalled(1) }) {
		t.Fatal("LoopStalled(1) = false with the loop blocked; want true")
	}
	if w.LoopStalled(0) {
		t.Error("LoopStalled(0) = true for the loop that turns; want false")
	}
	// One loop of two stalled: the worker still serves (/readyz, the gate).
	if age := w.Stalled(); age != 0 {
		t.Errorf("Stalled() = %v with one loop of two stalled; want 0", age)
	}
	sg := w.Stalling()
	if len(sg) != 1 || sg[0].Loop.Index() != 3 || sg[0].Age <= 0 {
		t.Fatalf("Stalling() = %+v; want one stall, of loop 3", sg)
	}
	st := w.Stalls()
	if len(st) != 1 || !st[0].Ongoing || st[0].Loop != 3 || len(st[0].Requests) != 1 || st[0].Requests[0].Path != "/block" {
		t.Fatalf("Stalls() while blocked = %+v; want one ongoing stall of loop 3 with GET /block", st)
	}
	time.Sleep(150 * time.Millisecond)
	stuck.unblock()
	if !waitFor(time.Second, func() bool { return !w.LoopStalled(1) }) {
		t.Fatal("LoopStalled(1) = true after the loop turned again")
	}
	st = w.Stalls()
	if len(st) != 1 || st[0].Ongoing || st[0].Loop != 3 || st[0].DurationMS < 150 || st[0].Connections != 1 {
		t.Fatalf("Stalls() after = %+v; want one finished stall of loop 3, at least 150 ms, 1 connection", st)
	}
	if len(st[0].Requests) != 1 || st[0].Requests[0].Method != "GET" {
		t.Errorf("the stall's requests = %+v; want GET /block, seen while it lasted", st[0].Requests)
	}
	if !strings.Contains(logs.String(), `msg="event loop stalled" loop=3`) {
		t.Errorf("log = %q; want an \"event loop stalled\" record for loop 3", logs.String())
	}

	cs := w.Collectors()
	if len(cs) != 8 {
		t.Fatalf("Collectors() = %d collectors; want 4 per loop, 8", len(cs))
	}
	// In Loops order: lag, stall seconds, stall count, connections.
	if n := value(t, cs[2]); n != 0 {
		t.Errorf("loop 1's turnstile_loop_stalls_total = %v; want 0", n)
	}
	if n := value(t, cs[6]); n != 1 {
		t.Errorf("loop 3's turnstile_loop_stalls_total = %v; want 1", n)
	}
	if s := value(t, cs[5]); s < 0.15 {
		t.Errorf("loop 3's turnstile_loop_stall_seconds_total = %v; want at least 0.15", s)
	}
	if n := value(t, cs[0]); n == 0 {
		t.Error("loop 1's turnstile_loop_lag_seconds has no observation; want one per heartbeat read that saw a probe drained")
	}
	if d := cs[7].(prometheus.Metric).Desc().String(); !strings.Contains(d, `"turnstile_loop_connections"`) {
		t.Errorf("loop 3's fourth collector = %s; want turnstile_loop_connections", d)
	}
	if n := value(t, cs[3]); n != 0 {
		t.Errorf("loop 1's turnstile_loop_connections = %v; want 0 (it holds no request)", n)
	}
	var m dto.Metric
	cs[4].(prometheus.Metric).Write(&m)
	if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "loop" || l[0].GetValue() != "3" {
		t.Errorf("loop 3's series labels = %v; want loop=\"3\"", l)
	}
}

// Stalled is the worker's: non-zero only while every loop is stalled
// (--loops: /readyz turns 503 then, not before).
func TestStall_EveryLoop(t *testing.T) {
	a, b := &fakeLoop{index: 0}, &fakeLoop{index: 1}
	w, _ := newWatchdog(t, []Loop{a, b}, nil)
	w.Start()
	defer w.Stop()
	if !waitFor(time.Second, func() bool { return a.ReadHeartbeat().Beat != 0 && b.ReadHeartbeat().Beat != 0 }) {
		t.Fatal("no probe was pushed to the loops")
	}
	a.block()
	if !waitFor(2*time.Second, func() bool { return w.LoopStalled(0) }) {
		t.Fatal("LoopStalled(0) = false with loop 0 blocked")
	}
	if w.Stalled() != 0 {
		t.Error("Stalled() > 0 with loop 1 turning; want 0")
	}
	b.block()
	if !waitFor(2*time.Second, func() bool { return w.Stalled() > 0 }) {
		t.Fatal("Stalled() = 0 with both loops blocked; want > 0")
	}
	a.unblock()
	b.unblock()
	if !waitFor(time.Second, func() bool { return w.Stalled() == 0 }) {
		t.Fatal("Stalled() > 0 after the loops turned again")
	}
}

// A loop that drains every probe is never stalled, however quiet.
func TestStall_NoneOnAHealthyLoop(t *testing.T) {
	l := &fakeLoop{}
	w, _ := newWatchdog(t, []Loop{l}, nil)
	w.Start()
	time.Sleep(4 * MinStallThreshold)
	w.Stop()
	if st := w.Stalls(); len(st) != 0 {
		t.Errorf("Stalls() = %+v; want none", st)
	}
	if w.Stalled() != 0 || len(w.Stalling()) != 0 {
		t.Error("a healthy loop is reported stalled")
	}
}

// Without loops the watchdog has no series and no stalls.
func TestStall_NoLoops(t *testing.T) {
	w, _ := newWatchdog(t, nil, nil)
	if cs := w.Collectors(); len(cs) != 0 {
		t.Errorf("Collectors() without loops = %d; want none", len(cs))
	}
	if w.Stalled() != 0 || len(w.Stalls()) != 0 {
		t.Error("stalls without loops")
	}
	w.Stop() // never started: a no-op
}

// A pool's request running past SlowRequest is logged with its thread,
// counted from when a thread took it; one still queued is not, however
// long it waited (issue 29).
func TestSlowRequest_RunningNotQueued(t *testing.T) {
	now := time.Now()
	p := &fakePool{reqs: []inflight.Request{
		{Method: "GET", Path: "/slow", Start: now.Add(-time.Second), Running: now.Add(-900 * time.Millisecond), Thread: "ts-pool-2"},
		{Method: "GET", Path: "/queued", Start: now.Add(-time.Hour)},
		{Method: "GET", Path: "/young", Start: now.Add(-time.Hour), Running: now},
	}}
	w, logs := newWatchdog(t, nil, []Pool{p})
	w.StallThreshold = 0
	w.SlowRequest = 500 * time.Millisecond
	w.Start()
	ok := waitFor(time.Second, func() bool { return strings.Contains(logs.String(), "target=/slow") })
	w.Stop()
	if !ok {
		t.Fatalf("log = %q; want a slow request record for GET /slow", logs.String())
	}
	out := logs.String()
	if !strings.Contains(out, `msg="slow request" method=GET target=/slow`) || !strings.Contains(out, "thread=ts-pool-2") {
		t.Errorf("log = %q; want the slow request with its thread", out)
	}
	if strings.Contains(out, "/queued") || strings.Contains(out, "/young") {
		t.Errorf("log = %q; want no record for a queued or young request", out)
	}
	if n := strings.Count(out, "target=/slow"); n != 1 {
		t.Errorf("GET /slow logged %d times within a second of 900 ms; want once (again at each doubling)", n)
	}
}

// oldestQueued names the oldest probe not drained: within the first
// ring's worth of probes too (pushed - len(ring) must not wrap around),
// and the oldest kept once the ring has turned.
func TestOldestQueued(t *testing.T) {
	var lw loopWatch
	n := uint64(len(lw.pushedAt))
	rows := []struct {
		pushed, drained uint64
		want            int
		ok              bool
	}{
		{0, 0, 0, false},
		{3, 3, 0, false},
		{3, 1, 1, true},
		{5, 0, 0, true},
		{n + 10, n + 2, 2, true},
		{n + 10, 3, 10, true}, // more than a ring behind: the oldest kept
	}
	for _, r := range rows {
		lw.pushed = r.pushed
		got, ok := lw.oldestQueued(r.drained)
		if got != r.want || ok != r.ok {
			t.Errorf("pushed %d, drained %d: %d, %v; want %d, %v", r.pushed, r.drained, got, ok, r.want, r.ok)
		}
	}
}
