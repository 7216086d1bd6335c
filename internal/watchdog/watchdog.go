// Package watchdog catches a blocked event loop and a slow WSGI request and
// shows the Python stack that blocked it.
//
// It watches lists: the worker's event loops (Loop, implemented by
// *asgi.Loop) and its sources of requests running on threads of their own
// (Pool, implemented by *wsgi.Handler over its python.Pool). It knows
// them only through these two interfaces and the in-flight type
// (inflight.Request): a worker with more loops or pools adds entries, the
// watchdog does not change.
//
// How a stall is caught (DESIGN.md, "The watchdog"), per loop:
//
//  1. The loop writes a heartbeat (monotonic ns, C memory) from its drain
//     callback; this goroutine pushes a probe event every ProbeEvery (a
//     quarter of the threshold, 50 ms at most) so an idle loop turns too,
//     and the time a probe waited is the loop lag.
//  2. A goroutine reads the heartbeat when it pushes a probe and when the
//     oldest probe still queued reaches StallThreshold (it sleeps between,
//     so a healthy loop costs one wake-up per probe). Past StallThreshold
//     with no new beat, a stall has begun: the goroutine samples the loop
//     thread's Python stack every SampleEvery, without the GIL and without
//     waiting for the loop (python.SampleStack).
//  3. At 500 ms and at each doubling it logs the stall in progress: its age,
//     the requests in flight on the loop and the stack seen most. When the
//     loop turns again it logs one WARNING with the whole stall and records
//     it for /debug/stalls and the metrics.
//
// The same goroutine watches the pools' requests: one running past
// SlowRequest (counted from when a pool thread took it, not from its
// arrival) has its pool thread's stack logged, and again at each doubling.
package watchdog

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"turnstile/internal/inflight"
	"turnstile/internal/python"
)

// Defaults.
const (
	DefaultStallThreshold = 100 * time.Millisecond
	DefaultSlowRequest    = 10 * time.Second
	// Tick is how often the watchdog looks during a stall, or while a
	// probe past the threshold has not yet been matched by a quiet beat.
	Tick        = 10 * time.Millisecond
	SampleEvery = 20 * time.Millisecond
	// SlowEvery is how often in-flight WSGI requests are checked against
	// SlowRequest.
	SlowEvery = 100 * time.Millisecond
	// ProbeEvery is how often a probe event is pushed to the loop, at
	// most: a quarter of the stall threshold when that is shorter (not
	// less than Tick). A stall is seen by a probe it holds up, and a probe
	// pushed after the stall began measures only part of it: with probes
	// 50 ms apart, a 120 ms block under the 100 ms default could go
	// unseen. A quarter bounds that part at 25 %: every stall of 1.25
	// thresholds is caught (the duration logged is measured from the
	// heartbeat, whole). A tenth caught 1.1 thresholds but cost 2.4 % CPU
	// per request on ASGI hello (watchdog-cost-20261130T032220Z).
	ProbeEvery = 50 * time.Millisecond
	// MinStallThreshold is the shortest stall threshold: an idle loop
	// turns only for a probe, pushed every ProbeEvery.
	MinStallThreshold = 50 * time.Millisecond
	// ProgressAfter is when a stall still going is first logged.
	ProgressAfter = 500 * time.Millisecond
	// KeepStalls is how many stalls /debug/stalls keeps.
	KeepStalls = 50
)

// Heartbeat is what the watchdog reads of a loop, without the GIL.
type Heartbeat struct {
	Beat   int64          // monotonic ns (python.Now's clock) the loop last turned; 0 before it started
	Lag    int64          // ns: the longest a probe waited for the loop since the previous read
	Probes uint64         // probes drained so far
	TState unsafe.Pointer // the loop thread's PyThreadState, for python.SampleStack; nil before it started
}

// Loop is an event loop the watchdog watches (*asgi.Loop).
type Loop interface {
	// Index is the loop's number: its metrics label loop="<index>" and
	// Stall.Loop.
	Index() int
	// PushProbe queues a probe event; draining it moves the heartbeat,
	// and the time it waited becomes the loop lag. It reports whether the
	// probe was queued (false when the loop is stopping).
	PushProbe() bool
	// ReadHeartbeat returns the loop's heartbeat. It consumes Lag: the
	// watchdog is its one reader.
	ReadHeartbeat() Heartbeat
	// Requests returns the requests in flight on the loop, oldest first.
	Requests() []inflight.Request
	// Connections returns how many connections the loop holds now: its
	// HTTP requests in flight and its WebSocket sessions (a kept-alive
	// connection between two requests is not counted). For Stall.
	Connections() int
}

// Pool is a source of requests that run on threads of their own (a WSGI
// handler over its python.Pool): the slow-request sampler looks at those
// whose Running is set, and samples Request.TState.
type Pool interface {
	Requests() []inflight.Request
}

// Request is a request in flight during a stall.
type Request struct {
	Method string  `json:"method"`
	Path   string  `json:"path"`
	AgeMS  float64 `json:"age_ms"`
}

// Stall is one blocked stretch of the event loop.
type Stall struct {
	Loop       int       `json:"loop"`
	Start      time.Time `json:"start"`
	DurationMS float64   `json:"duration_ms"`
	Samples    int       `json:"samples"`
	Ongoing    bool      `json:"ongoing,omitempty"`
	// Connections is how many connections the loop held (Loop.Connections):
	// while the stall goes on, now; once it ended, the most it held while
	// it lasted (those the stall held up).
	Connections int       `json:"connections"`
	Requests    []Request `json:"requests"`
	// Stack is the stack seen most, innermost first: "file:line in func",
	// then the source line.
	Stack []string `json:"stack"`
	// When another thread held the GIL in at least half of the samples,
	// the loop was (mostly) waiting for it: that thread's OS id (as in
	// top -H, py-spy) and its stack seen most.
	GILHolderThread int      `json:"gil_holder_thread,omitempty"`
	GILHolderStack  []string `json:"gil_holder_stack,omitempty"`
	// LoopCPU is the loop thread's use of the CPU from the first probe
	// the stall held up (pushed within ProbeEvery of its start) to its
	// end or this report; GILHolderCPU the same for GILHolderThread from the sample
	// that found it holding the GIL after another thread. A CPU wait near the window says the
	// machine held the thread off the CPU (other processes on its cores);
	// on-CPU time near it, the thread ran (the app's code, the GIL's
	// holder computing); neither, it slept (a blocking call, a lock, the
	// GIL). The kernel credits a CPU wait when the thread gets the CPU,
	// so a wait under way when the window opened counts whole: the wait
	// may exceed the window by up to that much. Missing where the kernel
	// has no schedstat.
	LoopCPU      *cpuShare `json:"loop_cpu,omitempty"`
	GILHolderCPU *cpuShare `json:"gil_holder_cpu,omitempty"`
}

// Watchdog watches the event loops (an ASGI app's) and the pools (a WSGI
// app's). Set the fields, then Start; the lists do not change after.
type Watchdog struct {
	// StallThreshold: a loop with no heartbeat for this long is stalled.
	// Zero disables the loop watchdog.
	StallThreshold time.Duration
	// SlowRequest: a pool's request running this long has its stack
	// logged. Zero disables.
	SlowRequest time.Duration
	// Loops are the event loops watched; none for a WSGI app.
	Loops []Loop
	// Pools are the sources of requests on threads of their own watched
	// for SlowRequest; none for an ASGI app.
	Pools []Pool
	Log   *slog.Logger

	loops []*loopWatch // one per Loops entry, made by init

	mu     sync.Mutex
	stalls []Stall // guarded by mu, newest last
	slows  []Slow  // guarded by mu, newest last, at most KeepStalls
	stop   chan struct{}
	done   chan struct{}

	startNs    int64                    // python.Now() at Start: earlier silence is not counted
	probeEvery time.Duration            // ProbeEvery, or a quarter of a threshold below 200 ms
	slow       map[string]time.Duration // next report age per pool request key
	sources    sourceCache
}

// loopWatch is the watchdog's state for one loop.
type loopWatch struct {
	loop       Loop
	lag        prometheus.Histogram
	stallSecs  prometheus.Counter
	stallCount prometheus.Counter
	conns      prometheus.GaugeFunc // Loop.Connections, read at each scrape
	current    *stallState          // the stall in progress; guarded by Watchdog.mu
	// stalled is current != nil, readable without Watchdog.mu: LoopStalled
	// runs for every new connection of a worker with several loops.
	stalled atomic.Bool

	// The run goroutine's only.
	tid        int // the loop thread's OS id, once its heartbeat has a TState
	lastProbes uint64
	// seenEnd is the heartbeat (python.Now ns) that ended the last stall
	// the watchdog saw: a probe pushed before it waited in that stall, and
	// its lag is not another one (unseen).
	seenEnd   int64
	lastProbe time.Time
	// Probes pushed, and when (python.Now), by push number: the loop
	// drains them in order, so Heartbeat.Probes is the number of the
	// oldest one still queued.
	pushed   uint64
	pushedAt [256]int64
	// The loop thread's CPU figures at each push (by push number, as
	// pushedAt): a stall's figures start from the oldest probe it holds up,
	// within ProbeEvery of its start, not from when the watchdog saw it
	// (which may be late: the watchdog shares the process's CPU).
	pushedCPU [256]cpuTimes
	sched     schedFile // the loop thread's schedstat
}

// oldestQueued returns the pushedAt (and pushedCPU) index of the oldest
// probe the loop has not drained (drained: Heartbeat.Probes), and false
// when it drained them all. Past the ring's size the oldest kept counts
// (a loop blocked that long is stalled either way). Before that, the
// first len(pushedAt) probes: pushed - len would wrap around (unsigned)
// and name the slot of the next push, never written, as if a probe had
// waited since the clock's zero; so every quiet heartbeat in a worker's
// first seconds passed for a stall, whether or not Go had pushed a probe.
func (lw *loopWatch) oldestQueued(drained uint64) (int, bool) {
	if lw.pushed <= drained {
		return 0, false
	}
	oldest, n := drained, uint64(len(lw.pushedAt))
	if lw.pushed > n {
		oldest = max(oldest, lw.pushed-n)
	}
	return int(oldest % n), true
}

type stallState struct {
	loop       Loop
	tstate     unsafe.Pointer // the loop thread's, from the heartbeat that saw the stall begin
	lastBeat   int64
	start      time.Time
	samples    int
	stacks     map[string]int
	frames     map[string][]python.Frame
	nextReport time.Duration
	lastSample time.Time
	requests   []Request   // every request seen in flight while it lasted (seeRequests), oldest first
	started    []time.Time // requests[i]'s start: its identity with method and path
	conns      int         // the most Loop.Connections seen while it lasted (samples, reports)

	// Samples that found another thread holding the GIL, and its stacks.
	holderSamples int
	holderStacks  map[string]int
	holderFrames  map[string][]python.Frame
	holderThread  int // native thread id, the latest seen

	loopCPU    cpuTimes // the loop thread's, when the stall was seen
	holderCPU  cpuTimes // holderThread's, when a sample found it holding the GIL after another thread (or first)
	holderLast cpuTimes // holderThread's at the latest sample (a holder may exit before the stall's end)
}

// Collectors returns the loops' metrics for registration, four per loop
// labelled loop="<index>" (none without loops).
func (w *Watchdog) Collectors() []prometheus.Collector {
	w.init()
	var out []prometheus.Collector
	for _, lw := range w.loops {
		out = append(out, lw.lag, lw.stallSecs, lw.stallCount, lw.conns)
	}
	return out
}

func (w *Watchdog) init() {
	if w.loops != nil || len(w.Loops) == 0 {
		return
	}
	for _, l := range w.Loops {
		labels := prometheus.Labels{"loop": strconv.Itoa(l.Index())}
		w.loops = append(w.loops, &loopWatch{
			loop: l,
			lag: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name: "turnstile_loop_lag_seconds", Help: "How late the event loop's 50 ms probe ran.",
				ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
			}),
			stallSecs: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "turnstile_loop_stall_seconds_total", Help: "Seconds the event loop spent stalled past the threshold.", ConstLabels: labels,
			}),
			stallCount: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "turnstile_loop_stalls_total", Help: "Stalls of the event loop past the threshold.", ConstLabels: labels,
			}),
			conns: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "turnstile_loop_connections",
				Help:        "HTTP requests and WebSocket sessions in flight on the event loop (a kept-alive connection between requests not counted).",
				ConstLabels: labels,
			}, func() float64 { return float64(l.Connections()) }),
		})
	}
}

// Start runs the watchdog goroutine.
func (w *Watchdog) Start() {
	w.init()
	if w.Log == nil {
		w.Log = slog.Default()
	}
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	w.startNs = python.Now()
	w.probeEvery = min(ProbeEvery, max(Tick, w.StallThreshold/4))
	w.slow = map[string]time.Duration{}
	go w.run()
}

// Stop ends the goroutine and waits for it.
func (w *Watchdog) Stop() {
	if w.stop == nil {
		return
	}
	close(w.stop)
	<-w.done
}

// Stalls returns the recorded stalls of every loop, newest last, then
// those in progress (one per stalled loop, in Loops order).
func (w *Watchdog) Stalls() []Stall {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]Stall(nil), w.stalls...)
	for _, lw := range w.loops {
		if cur := lw.current; cur != nil {
			out = append(out, w.summary(cur, time.Since(cur.start), true))
		}
	}
	return out
}

// Stalled reports, when every loop has a stall in progress past the
// threshold, the age of the youngest (how long the worker has served
// no loop), or 0: with several loops (--loops) the worker still serves
// on the others, so /readyz and the accept gate count it busy only when
// all are stalled. With one loop it is that loop's stall.
func (w *Watchdog) Stalled() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var age time.Duration
	for i, lw := range w.loops {
		if lw.current == nil {
			return 0
		}
		if a := time.Since(lw.current.start); i == 0 || a < age {
			age = a
		}
	}
	return age
}

// LoopStalled reports whether Loops[i] has a stall in progress past the
// threshold now. It takes no lock (one atomic load): the ASGI handler
// asks it for each new connection it assigns to a loop.
func (w *Watchdog) LoopStalled(i int) bool {
	if i < 0 || i >= len(w.loops) {
		return false
	}
	return w.loops[i].stalled.Load()
}

// Stalling is a stall in progress on one loop, past the threshold.
type Stalling struct {
	Loop   Loop
	Age    time.Duration
	TState unsafe.Pointer // the loop thread's PyThreadState, for python.SampleStack
}

// Stalling returns the stalls in progress, in Loops order (for --timeout:
// internal/server/track.go).
func (w *Watchdog) Stalling() []Stalling {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Stalling
	for _, lw := range w.loops {
		if cur := lw.current; cur != nil {
			out = append(out, Stalling{Loop: lw.loop, Age: time.Since(cur.start), TState: cur.tstate})
		}
	}
	return out
}

// stalledLoop reports the age of lw's stall in progress, or 0.
func (w *Watchdog) stalledLoop(lw *loopWatch) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if lw.current == nil {
		return 0
	}
	return time.Since(lw.current.start)
}

func (w *Watchdog) run() {
	defer close(w.done)
	// The goroutine sleeps until the next thing it has to do (push a
	// probe, see whether the oldest probe reached the threshold, sample a
	// stall, look at slow WSGI requests), not on a fixed tick: a healthy
	// loop costs one wake-up per probe.
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastSlow time.Time
	for {
		select {
		case <-w.stop:
			return
		case <-timer.C:
		}
		now := time.Now()
		wait := time.Hour
		for _, lw := range w.loops {
			wait = min(wait, w.watchLoop(lw, now))
		}
		if w.SlowRequest > 0 {
			if now.Sub(lastSlow) >= SlowEvery {
				lastSlow = now
				w.checkSlow()
			}
			wait = min(wait, SlowEvery-now.Sub(lastSlow))
		}
		timer.Reset(max(wait, time.Millisecond))
	}
}

// watchLoop pushes lw's probe when due, reads its heartbeat and checks it
// for a stall; it returns how soon it wants to look again.
func (w *Watchdog) watchLoop(lw *loopWatch, now time.Time) time.Duration {
	wait := time.Hour
	if now.Sub(lw.lastProbe) >= w.probeEvery {
		lw.lastProbe = now
		at := python.Now()
		var cpu cpuTimes
		if w.StallThreshold > 0 && lw.tid > 0 {
			cpu = lw.sched.read(lw.tid)
		}
		if lw.loop.PushProbe() {
			lw.pushedAt[lw.pushed%uint64(len(lw.pushedAt))] = at
			lw.pushedCPU[lw.pushed%uint64(len(lw.pushedCPU))] = cpu
			lw.pushed++
		}
	}
	wait = min(wait, w.probeEvery-now.Sub(lw.lastProbe))
	h := lw.loop.ReadHeartbeat()
	if lw.tid == 0 && h.TState != nil {
		lw.tid = python.NativeThreadID(h.TState)
	}
	wasStalled := w.stalledLoop(lw) > 0
	if h.Probes != lw.lastProbes || h.Lag > 0 {
		// One observation per read: the longest lag of the probes
		// drained since (after a stall, the stall).
		lw.lastProbes = h.Probes
		lw.lag.Observe(float64(h.Lag) / 1e9)
	}
	if w.StallThreshold > 0 && h.Beat != 0 {
		// How long the oldest probe not yet drained has waited: a stall
		// is the loop not draining what Go gave it, not merely a quiet
		// heartbeat (Go itself may have been held off the CPU and pushed
		// nothing meanwhile).
		var pending time.Duration
		var from cpuTimes // the loop thread's figures when the oldest pending probe was pushed
		if i, ok := lw.oldestQueued(h.Probes); ok {
			pending = time.Duration(python.Now() - lw.pushedAt[i])
			from = lw.pushedCPU[i]
		}
		w.checkLoop(lw, h, pending, from)
		if !wasStalled && w.stalledLoop(lw) == 0 && time.Duration(h.Lag) >= w.StallThreshold && h.Beat-h.Lag >= lw.seenEnd {
			w.unseen(lw, time.Duration(h.Lag))
		}
		switch {
		case w.stalledLoop(lw) > 0:
			wait = min(wait, Tick) // sample and report the stall
		case lw.pushed > h.Probes:
			// Look again when the oldest probe reaches the threshold.
			wait = min(wait, max(w.StallThreshold-pending, Tick))
		}
	}
	return wait
}

// unseen records a stall that ended before the watchdog looked (its
// goroutine was held off the CPU, or the stall ended between two looks): a
// probe drained after waiting lag past the threshold. The stall lasted at
// least lag; no stack was sampled.
func (w *Watchdog) unseen(lw *loopWatch, lag time.Duration) {
	st := Stall{Loop: lw.loop.Index(), Start: time.Now().Add(-lag), DurationMS: float64(lag.Microseconds()) / 1000,
		Connections: lw.loop.Connections()}
	w.mu.Lock()
	w.keepLocked(lw, st, lag)
	w.mu.Unlock()
	w.Log.Warn("event loop stalled (seen after it ended: no stack sampled)", "loop", st.Loop,
		"connections", st.Connections, "duration_ms", st.DurationMS, "samples", 0)
}

// keepLocked records a finished stall of dur on lw for /debug/stalls (the
// last KeepStalls of all loops) and the loop's metrics. w.mu held.
func (w *Watchdog) keepLocked(lw *loopWatch, st Stall, dur time.Duration) {
	w.stalls = append(w.stalls, st)
	if len(w.stalls) > KeepStalls {
		w.stalls = w.stalls[len(w.stalls)-KeepStalls:]
	}
	lw.stallSecs.Add(dur.Seconds())
	lw.stallCount.Inc()
}

// checkLoop begins, samples, reports and ends lw's stall from heartbeat h
// and the wait of its oldest probe still queued (pending; from: the loop
// thread's CPU figures when that probe was pushed).
func (w *Watchdog) checkLoop(lw *loopWatch, h Heartbeat, pending time.Duration, from cpuTimes) {
	now := python.Now()
	// Time before the watchdog started (lifespan startup, which may block
	// the loop while it runs) is not a stall it saw: count from its start.
	age := time.Duration(now - max(h.Beat, w.startNs))
	w.mu.Lock()
	cur := lw.current
	w.mu.Unlock()
	if cur == nil {
		if age < w.StallThreshold || pending < w.StallThreshold {
			return
		}
		cur = &stallState{
			loop: lw.loop, tstate: h.TState, lastBeat: h.Beat, start: time.Now().Add(-age),
			stacks: map[string]int{}, frames: map[string][]python.Frame{}, nextReport: ProgressAfter,
			holderStacks: map[string]int{}, holderFrames: map[string][]python.Frame{},
		}
		cur.loopCPU = from
		if !from.ok && h.TState != nil {
			cur.loopCPU = readSchedstat(python.NativeThreadID(h.TState))
		}
		w.mu.Lock()
		lw.current = cur
		lw.stalled.Store(true)
		w.mu.Unlock()
	}
	if h.Beat != cur.lastBeat {
		// The loop turned: the stall is over.
		dur := time.Duration(h.Beat - cur.lastBeat)
		lw.seenEnd = h.Beat
		w.mu.Lock()
		st := w.summary(cur, dur, false)
		lw.current = nil
		lw.stalled.Store(false)
		w.keepLocked(lw, st, dur)
		w.mu.Unlock()
		w.logStall("event loop stalled", st)
		return
	}
	if time.Since(cur.lastSample) >= SampleEvery {
		cur.lastSample = time.Now()
		frames := python.SampleStack(h.TState)
		// A loop can also stall waiting for the GIL while another thread
		// (a sync view in a thread pool, a background thread) holds it in
		// a long C call: the loop's own stack then looks idle. Sample the
		// holder too.
		if hold := gilHolder(h.TState); hold != nil && hold != h.TState {
			if hf := python.SampleStack(hold); len(hf) > 0 {
				key := stackKey(hf)
				tid := python.NativeThreadID(hold)
				seen := readSchedstat(tid)
				w.mu.Lock()
				cur.holderSamples++
				cur.holderStacks[key]++
				if _, ok := cur.holderFrames[key]; !ok {
					cur.holderFrames[key] = hf
				}
				if tid != cur.holderThread {
					cur.holderThread = tid
					cur.holderCPU = seen
				}
				cur.holderLast = seen
				w.mu.Unlock()
			}
		}
		if len(frames) > 0 {
			key := stackKey(frames)
			reqs := lw.loop.Requests()
			conns := lw.loop.Connections()
			w.mu.Lock()
			cur.conns = max(cur.conns, conns)
			cur.seeRequests(reqs, time.Now())
			cur.samples++
			cur.stacks[key]++
			if _, ok := cur.frames[key]; !ok {
				cur.frames[key] = frames
			}
			w.mu.Unlock()
		}
	}
	if elapsed := time.Since(cur.start); elapsed >= cur.nextReport {
		for cur.nextReport <= elapsed { // a threshold past 500 ms: one report, then doublings
			cur.nextReport *= 2
		}
		w.mu.Lock()
		st := w.summary(cur, elapsed, true)
		w.mu.Unlock()
		w.logStall("event loop stalled, still blocked", st)
	}
}

// maxStallRequests bounds the requests a stall record keeps (the oldest).
const maxStallRequests = 64

// seeRequests merges reqs, the loop's requests in flight now, into
// cur.requests: one seen before gets its age as of now, one not seen
// before is added, oldest first. A request that has finished stays: the
// one that blocked the loop has usually finished by the time the stall is
// seen to end, and a sample or report made just as it finished saw it
// gone (CI, 3.12: TestB35_BlockedLoop's record lost its GET /sleep).
func (cur *stallState) seeRequests(reqs []inflight.Request, now time.Time) {
	for _, r := range reqs {
		age := Request{Method: r.Method, Path: r.Path, AgeMS: float64(now.Sub(r.Start).Microseconds()) / 1000}
		i, seen := 0, false
		for ; i < len(cur.started) && !cur.started[i].After(r.Start); i++ {
			if cur.started[i].Equal(r.Start) && cur.requests[i].Method == r.Method && cur.requests[i].Path == r.Path {
				cur.requests[i], seen = age, true
				break
			}
		}
		if seen || i >= maxStallRequests {
			continue
		}
		cur.requests = slices.Insert(cur.requests, i, age)
		cur.started = slices.Insert(cur.started, i, r.Start)
		if len(cur.requests) > maxStallRequests {
			cur.requests, cur.started = cur.requests[:maxStallRequests], cur.started[:maxStallRequests]
		}
	}
}

// summary builds the Stall record. Called with w.mu held.
func (w *Watchdog) summary(cur *stallState, dur time.Duration, ongoing bool) Stall {
	st := Stall{Loop: cur.loop.Index(), Start: cur.start, DurationMS: float64(dur.Microseconds()) / 1000, Samples: cur.samples, Ongoing: ongoing}
	if !ongoing && len(cur.requests) > 0 {
		// The stall is over: the request that blocked the loop has
		// usually finished with it, and what is in flight now are the
		// requests that queued behind it. Report those seen while it
		// lasted (sampled, oldest first: the blocker leads).
		st.Requests = slices.Clone(cur.requests)
		st.Connections = cur.conns
	} else {
		// Ongoing: what the loop holds now. Ended: the most it held, as
		// above (a report made just as the blocking request finished saw
		// its connection gone).
		now := cur.loop.Connections()
		cur.conns = max(cur.conns, now)
		st.Connections = now
		if !ongoing {
			st.Connections = cur.conns
		}
		reqs, at := cur.loop.Requests(), time.Now()
		for _, r := range reqs {
			st.Requests = append(st.Requests, Request{Method: r.Method, Path: r.Path, AgeMS: float64(at.Sub(r.Start).Microseconds()) / 1000})
		}
		cur.seeRequests(reqs, at)
	}
	best, n := "", 0
	for k, c := range cur.stacks {
		if c > n || (c == n && k < best) {
			best, n = k, c
		}
	}
	if best != "" {
		st.Stack = w.describe(cur.frames[best])
	}
	if cur.holderSamples > 0 && 2*cur.holderSamples >= cur.samples {
		best, n = "", 0
		for k, c := range cur.holderStacks {
			if c > n || (c == n && k < best) {
				best, n = k, c
			}
		}
		st.GILHolderThread = cur.holderThread
		st.GILHolderStack = w.describe(cur.holderFrames[best])
		end := readSchedstat(cur.holderThread)
		if !end.ok {
			end = cur.holderLast
		}
		if sh, ok := end.since(cur.holderCPU); ok {
			st.GILHolderCPU = &sh
		}
	}
	if cur.tstate != nil {
		if sh, ok := readSchedstat(python.NativeThreadID(cur.tstate)).since(cur.loopCPU); ok {
			st.LoopCPU = &sh
		}
	}
	return st
}

// logRequests bounds the requests a stall's log record names (oldest
// first: the blocker leads); /debug/stalls has them all.
const logRequests = 8

func (w *Watchdog) logStall(msg string, st Stall) {
	var reqs []string
	for i, r := range st.Requests {
		if i == logRequests {
			reqs = append(reqs, fmt.Sprintf("and %d more", len(st.Requests)-i))
			break
		}
		reqs = append(reqs, fmt.Sprintf("%s %s (%.0f ms)", r.Method, r.Path, r.AgeMS))
	}
	args := []any{"loop", st.Loop, "connections", st.Connections, "duration_ms", st.DurationMS, "samples", st.Samples,
		"requests", strings.Join(reqs, "; "), "stack", strings.Join(st.Stack, "\n")}
	if c := st.LoopCPU; c != nil {
		args = append(args, "cpu_window_ms", c.WindowMS, "loop_on_cpu_ms", c.OnCPUMS, "loop_cpu_wait_ms", c.CPUWaitMS)
	}
	if st.GILHolderThread != 0 {
		args = append(args, "waiting_for_gil", true, "gil_holder_thread", st.GILHolderThread,
			"gil_holder_stack", strings.Join(st.GILHolderStack, "\n"))
		if c := st.GILHolderCPU; c != nil {
			args = append(args, "gil_holder_window_ms", c.WindowMS, "gil_holder_on_cpu_ms", c.OnCPUMS,
				"gil_holder_cpu_wait_ms", c.CPUWaitMS)
		}
	}
	w.Log.Warn(msg, args...)
}

// checkSlow logs the stack of the pools' requests running past
// SlowRequest, and again at each doubling of their age. The age counts
// from when a pool thread took the request: time spent queued behind a
// busy pool is not slowness of the request (issue 29).
func (w *Watchdog) checkSlow() {
	live := map[string]bool{}
	var reqs []inflight.Request
	for _, p := range w.Pools {
		reqs = append(reqs, p.Requests()...)
	}
	for _, r := range reqs {
		key := fmt.Sprintf("%s %s %d", r.Method, r.Path, r.Start.UnixNano())
		live[key] = true
		next, ok := w.slow[key]
		if !ok {
			next = w.SlowRequest
		}
		if r.Running.IsZero() {
			w.slow[key] = next
			continue
		}
		age := time.Since(r.Running)
		if age < next {
			w.slow[key] = next
			continue
		}
		w.slow[key] = next * 2
		frames := python.SampleStack(r.TState)
		w.keepSlow(Slow{Method: r.Method, Target: r.Path, Thread: r.Thread, Start: r.Start,
			AgeMS: float64(age.Microseconds()) / 1000, Stack: w.describe(frames)})
		w.Log.Warn("slow request", "method", r.Method, "target", r.Path, "age_ms", age.Milliseconds(),
			"queued_ms", r.Running.Sub(r.Start).Milliseconds(),
			"thread", r.Thread, "stack", strings.Join(w.describe(frames), "\n"))
	}
	for k := range w.slow {
		if !live[k] {
			delete(w.slow, k)
		}
	}
}

// Slow is one slow-request record (a WSGI request running past
// SlowRequest, logged as "slow request"), kept for /debug/status.
type Slow struct {
	Method string    `json:"method"`
	Target string    `json:"target"`
	Thread string    `json:"thread"`
	Start  time.Time `json:"start"`
	AgeMS  float64   `json:"age_ms"` // since a pool thread took it, when seen
	// Stack is the sampled stack, innermost first, as Stall.Stack.
	Stack []string `json:"stack"`
}

func (w *Watchdog) keepSlow(s Slow) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.slows = append(w.slows, s)
	if len(w.slows) > KeepStalls {
		w.slows = w.slows[len(w.slows)-KeepStalls:]
	}
}

// KeepSlow keeps s among the slow-request records, as a WSGI request's
// are kept: for the slow sync calls of an ASGI app's pools.
func (w *Watchdog) KeepSlow(s Slow) { w.keepSlow(s) }

// Slows returns the last slow-request records (at most KeepStalls),
// oldest first.
func (w *Watchdog) Slows() []Slow {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Slow(nil), w.slows...)
}

// Describe renders frames as Stall.Stack does: innermost first, "file:line
// in func" followed by the source line, indented.
func (w *Watchdog) Describe(frames []python.Frame) []string { return w.describe(frames) }

// describe renders frames innermost first as "file:line in func" followed
// by the source line, indented.
func (w *Watchdog) describe(frames []python.Frame) []string {
	out := make([]string, 0, 2*len(frames))
	for _, f := range frames {
		out = append(out, f.String())
		if src := w.sources.line(f.File, f.Line); src != "" {
			out = append(out, "    "+src)
		}
	}
	return out
}

// gilHolder is python.GILHolder while the loop runs Python (tstate set):
// without a loop thread there is no interpreter state to read it from.
func gilHolder(tstate unsafe.Pointer) unsafe.Pointer {
	if tstate == nil {
		return nil
	}
	return python.GILHolder()
}

func stackKey(frames []python.Frame) string {
	var b strings.Builder
	for _, f := range frames {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// sourceCache reads source lines like Python's linecache, bounded.
type sourceCache struct {
	mu    sync.Mutex
	files map[string][]string
}

func (c *sourceCache) line(file string, n int) string {
	if n <= 0 || file == "" || strings.HasPrefix(file, "<") {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lines, ok := c.files[file]
	if !ok {
		if c.files == nil || len(c.files) > 256 {
			c.files = map[string][]string{}
		}
		if f, err := os.Open(file); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			f.Close()
		}
		c.files[file] = lines
	}
	if n > len(lines) {
		return ""
	}
	return strings.TrimSpace(lines[n-1])
}
