package server

import (
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"turnstile/internal/asgi"
	"turnstile/internal/config"
	"turnstile/internal/http1"
	"turnstile/internal/python"
	"turnstile/internal/wsgi"
)

// tracker wraps the app's handler in a worker. It counts finished
// requests (--max-requests), knows when each request in flight started
// (--timeout), and wakes the accept gate when a request ends. Outside a
// worker it is not installed.
//
// Policy for a stuck request (--timeout): a Python thread cannot be
// killed, so the request is logged (method, target, age) and the worker
// asks the master for a graceful replacement; the stuck request keeps
// running in the old worker until it ends or --graceful-timeout passes,
// and then the old worker exits (or is killed). For a WSGI request the
// log carries the Python stack of its pool thread, sampled without the GIL
// (python.SampleStack, as the watchdog's slow-request report does).
type tracker struct {
	next    http1.Handler
	log     *slog.Logger
	ctl     *control
	timeout time.Duration
	limit   int64 // recycle after this many requests; 0 = never
	served  atomic.Int64
	begun   atomic.Int64

	mu       sync.Mutex
	inflight map[*http1.Request]*entry // guarded by mu; only when timeout > 0
}

type entry struct {
	start    time.Time
	reported bool
}

// track returns h wrapped in a tracker in a worker, else h.
func track(h http1.Handler, cfg *config.Config, log *slog.Logger) http1.Handler {
	if worker == nil {
		return h
	}
	t := &tracker{next: h, log: log, ctl: worker.ctl, timeout: cfg.Timeout}
	if cfg.MaxRequests > 0 {
		t.limit = int64(cfg.MaxRequests)
		if cfg.MaxRequestsJitter > 0 {
			t.limit += rand.Int64N(int64(cfg.MaxRequestsJitter) + 1)
		}
	}
	if t.timeout > 0 {
		t.inflight = make(map[*http1.Request]*entry)
		go t.watch()
	}
	return t
}

func (t *tracker) ServeHTTP1(w *http1.ResponseWriter, r *http1.Request) {
	if t.inflight != nil {
		e := &entry{start: time.Now()}
		t.mu.Lock()
		t.inflight[r] = e
		t.mu.Unlock()
		defer func() {
			t.mu.Lock()
			delete(t.inflight, r)
			t.mu.Unlock()
		}()
	}
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
		t.ctl.recycle("max-requests", strconv.FormatInt(n, 10)+" requests served")
	}
}

// watch logs each request running past the timeout, once, and asks for a
// replacement.
func (t *tracker) watch() {
	every := min(max(t.timeout/4, 50*time.Millisecond), time.Second)
	for range time.Tick(every) {
		now := time.Now()
		t.mu.Lock()
		for r, e := range t.inflight {
			if e.reported || now.Sub(e.start) < t.timeout {
				continue
			}
			e.reported = true
			age := now.Sub(e.start)
			// r is valid while it is in the map, and we hold mu.
			method, target := string(r.Method), string(r.Target)
			t.log.Warn("request running past --timeout; replacing this worker gracefully",
				"method", method, "target", target, "remote", addrString(r.RemoteAddr),
				"age_s", age.Round(time.Millisecond).Seconds(), "timeout_s", t.timeout.Seconds(),
				"stack", stackOf(string(r.Method), string(r.Path), e.start))
			t.ctl.recycle("timeout", method+" "+target+" running "+age.Round(time.Millisecond).String())
		}
		t.mu.Unlock()
	}
}

// stackOf samples the Python stack of the pool thread running the WSGI
// request method path that started at start (the wsgi package registers
// it a moment after the tracker does), innermost frame first, one frame
// per line. For ASGI, the event loop thread's stack: the request's own
// frames when it blocks the loop, the loop's idle frames (a selector's
// poll) when it is awaiting something. "" when there is none (a WSGI
// request still queued).
func stackOf(method, path string, start time.Time) string {
	if h := asgi.ReadHeartbeat(); h.TState != nil {
		return joinFrames(python.SampleStack(h.TState))
	}
	best, thread := time.Second, -1
	for _, r := range wsgi.Requests() {
		if r.Method != method || r.Path != path || r.Thread < 0 {
			continue
		}
		if d := r.Start.Sub(start).Abs(); d < best {
			best, thread = d, r.Thread
		}
	}
	if thread < 0 {
		return ""
	}
	return joinFrames(python.SampleStack(python.PoolThreadState(thread)))
}

func joinFrames(frames []python.Frame) string {
	lines := make([]string, len(frames))
	for i, f := range frames {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}
