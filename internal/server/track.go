package server

import (
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"turnstile/internal/config"
	"turnstile/internal/http1"
	"turnstile/internal/python"
	"turnstile/internal/watchdog"
	"turnstile/internal/workerctl"
)

// tracker wraps the app's handler in a worker. It counts finished
// requests (--max-requests), watches for --timeout, and wakes the accept
// gate when a request ends. Outside a worker it is not installed.
//
// --timeout measures running, not waiting (issue 29). gunicorn's --timeout
// kills and restarts a worker that has been silent for more than N
// seconds; a turnstile worker is never silent (Go answers), so the
// question is what in it can be stuck:
//
//   - A pool (WSGI, Interface.Pools): a request a pool thread has been
//     running for longer than the timeout, counted from when the thread
//     took it (inflight.Request's Running), not from its arrival: a
//     request still waiting in the queue for a busy pool is not stuck, and
//     its healthy worker is not replaced.
//   - A loop (ASGI, Interface.Loops): the event loop not turning for
//     longer than the timeout (the watchdog's stall, watchdog.Stalling). A
//     request that only awaits (asyncio.sleep, a long poll, an event
//     stream, a WebSocket) leaves the loop free and is not stuck however
//     long it lasts.
//
// Policy for a stuck worker: a Python thread cannot be killed, so the
// request or the stall is logged (with the Python stack of the thread,
// sampled without the GIL: python.SampleStack) and the worker asks the
// master for a graceful replacement; what is stuck keeps running in the
// old worker until it ends or --graceful-timeout passes, and then the old
// worker exits (or is killed).
type tracker struct {
	next    http1.Handler
	log     *slog.Logger
	ctl     *control
	timeout time.Duration
	pools   []watchdog.Pool // whose running requests are held to timeout
	limit   int64           // recycle after this many requests; 0 = never
	served  atomic.Int64
	begun   atomic.Int64
}

// track returns h wrapped in a tracker in a worker, else h. ifc is what
// serves the app: its pools are watched for --timeout, and its loops
// through the watchdog.
func track(h http1.Handler, cfg *config.Config, log *slog.Logger, ifc Interface) http1.Handler {
	if worker == nil {
		return h
	}
	t := &tracker{next: h, log: log, ctl: worker.ctl, timeout: cfg.Timeout, pools: ifc.Pools()}
	if cfg.MaxRequests > 0 {
		t.limit = int64(cfg.MaxRequests)
		if cfg.MaxRequestsJitter > 0 {
			t.limit += rand.Int64N(int64(cfg.MaxRequestsJitter) + 1)
		}
	}
	if t.timeout > 0 {
		go t.watch()
	}
	return t
}

func (t *tracker) ServeHTTP1(w *http1.ResponseWriter, r *http1.Request) {
	// The limit-th request begins the drain (its response, whose head is
	// not written yet, announces the close: RFC 9112 §9.6); the
	// replacement is asked for once that many have ended (done).
	if t.limit > 0 && t.begun.Add(1) == t.limit {
		t.ctl.draining()
	}
	defer t.done()
	t.next.ServeHTTP1(w, r)
}

func (t *tracker) done() {
	wakeGate()
	if n := t.served.Add(1); t.limit > 0 && n >= t.limit {
		t.ctl.recycle(workerctl.CauseMaxRequests, strconv.FormatInt(n, 10)+" requests served")
	}
}

// watch logs what runs past the timeout, once, and asks for a replacement.
func (t *tracker) watch() {
	every := min(max(t.timeout/4, 50*time.Millisecond), time.Second)
	reported := map[string]bool{}
	stalls := map[int]bool{} // loop index → its current stall was reported
	for range time.Tick(every) {
		t.watchLoops(stalls)
		t.watchPools(reported)
	}
}

// watchPools checks the pools' running requests against the timeout: one
// past it is logged once, with its thread's stack, and the worker is
// replaced. reported holds the keys of those logged, still in flight.
func (t *tracker) watchPools(reported map[string]bool) {
	if len(t.pools) == 0 {
		return
	}
	now := time.Now()
	live := map[string]bool{}
	for _, p := range t.pools {
		for _, r := range p.Requests() {
			if r.Running.IsZero() {
				continue // queued: waiting is not running
			}
			key := r.Method + " " + r.Target + " " + strconv.FormatInt(r.Start.UnixNano(), 10)
			live[key] = true
			age := now.Sub(r.Running)
			if reported[key] || age < t.timeout {
				continue
			}
			reported[key] = true
			t.log.Warn("request running past --timeout; replacing this worker gracefully",
				"method", r.Method, "target", r.Target, "remote", r.Remote,
				"age_s", msSeconds(age), "queued_s", msSeconds(r.Running.Sub(r.Start)),
				"timeout_s", t.timeout.Seconds(), "thread", r.Thread,
				"stack", joinFrames(python.SampleStack(r.TState)))
			t.ctl.recycle(workerctl.CauseTimeout, r.Method+" "+r.Target+" running "+age.Round(time.Millisecond).String())
		}
	}
	for k := range reported {
		if !live[k] {
			delete(reported, k)
		}
	}
}

// watchLoops checks the loops against the timeout: a stall (the
// watchdog's: the loop has not turned) longer than it is logged once per
// stall, with the loop's stack and the requests in flight on it, and the
// worker is replaced. reported holds the loops whose current stall was
// logged.
func (t *tracker) watchLoops(reported map[int]bool) {
	wd := activeWatchdog.Load()
	if wd == nil {
		return
	}
	stalled := map[int]bool{}
	for _, s := range wd.Stalling() {
		i := s.Loop.Index()
		stalled[i] = true
		if reported[i] || s.Age < t.timeout {
			continue
		}
		reported[i] = true
		var reqs []string
		for _, r := range s.Loop.Requests() {
			reqs = append(reqs, r.Method+" "+r.Path+" ("+time.Since(r.Start).Round(time.Millisecond).String()+")")
		}
		t.log.Warn("event loop blocked past --timeout; replacing this worker gracefully",
			"stalled_s", msSeconds(s.Age), "timeout_s", t.timeout.Seconds(),
			"requests", strings.Join(reqs, "; "), "stack", joinFrames(python.SampleStack(s.TState)))
		t.ctl.recycle(workerctl.CauseTimeout, "event loop blocked "+s.Age.Round(time.Millisecond).String())
	}
	for i := range reported {
		if !stalled[i] {
			delete(reported, i)
		}
	}
}

func joinFrames(frames []python.Frame) string {
	lines := make([]string, len(frames))
	for i, f := range frames {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}

// msSeconds is d in seconds to the millisecond, as a log field: 3.264, not
// the 3.2640000000000002 that Round(time.Millisecond).Seconds() prints.
func msSeconds(d time.Duration) float64 {
	return float64(d.Milliseconds()) / 1000
}
