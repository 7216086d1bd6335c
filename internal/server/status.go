package server

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"turnstile/internal/asgi"
	"turnstile/internal/inflight"
	"turnstile/internal/python"
	"turnstile/internal/watchdog"
)

// activeIfc is the worker's Interface once startInterface made it, for
// /debug/status and /debug/stacks.
var activeIfc atomic.Pointer[Interface]

// workerStart is when the worker process started, for Status.UptimeS.
var workerStart = time.Now()

// Status is one worker's /debug/status answer (JSON): what `turnstile
// top` shows of it. Times are seconds; counters count since the worker
// started. The master's /debug/status adds the worker's id and restarts.
type Status struct {
	PID      int     `json:"pid"`
	UptimeS  float64 `json:"uptime_s"`
	RSSBytes int64   `json:"rss_bytes"` // resident set, /proc/self/statm
	// Requests answered (turnstile_requests_total), of which 5xx and 503
	// (503 includes the rejected: queue full or wait timed out).
	Requests  uint64 `json:"requests"`
	Errors    uint64 `json:"errors_5xx"`
	Unavail   uint64 `json:"responses_503"`
	Rejected  uint64 `json:"rejected"`
	InFlight  int    `json:"in_flight"`
	Queued    int    `json:"queue_depth"`
	QueueSize int    `json:"queue_size"`
	// Threads: the WSGI pool's threads by state (python.PoolStats): running
	// a job, waiting for the GIL before taking one, idle. Zero for ASGI.
	Threads ThreadStates `json:"threads"`
	// GILWaitP99S is the 99th percentile of the per-request GIL wait
	// (turnstile_gil_wait_seconds, from its buckets: an upper bound); 0
	// before any request.
	GILWaitP99S float64          `json:"gil_wait_p99_s"`
	Loops       []LoopStatus     `json:"loops"`
	Running     []RunningReq     `json:"running"`
	Stalls      []watchdog.Stall `json:"stalls"`
	Slow        []watchdog.Slow  `json:"slow_requests"`
	// WebSockets is the WebSocket sessions open (ASGI: accepted, not yet
	// finished).
	WebSockets int `json:"websocket_sessions"`
}

// ThreadStates counts a pool's threads by state.
type ThreadStates struct {
	Total   int `json:"total"`
	Running int `json:"running"`
	GILWait int `json:"waiting_for_gil"`
	Idle    int `json:"idle"`
}

// LoopStatus is one event loop's (ASGI): lag p99 from
// turnstile_loop_lag_seconds's buckets, stall seconds and count so far,
// and how long it has been stalled now (0 when it turns).
type LoopStatus struct {
	Loop     int     `json:"loop"`
	LagP99S  float64 `json:"lag_p99_s"`
	StallS   float64 `json:"stall_seconds"`
	Stalls   uint64  `json:"stalls"`
	StalledS float64 `json:"stalled_now_s"`
}

// RunningReq is a request in flight: on a pool thread (Thread set: a
// WSGI pool's, or for an ASGI request the ts-http-N/ts-sess-N thread
// running a sync call of it now), on an event loop (Thread ts-loop-N), or
// queued (Queued true).
type RunningReq struct {
	Method string  `json:"method"`
	Target string  `json:"target"`
	Thread string  `json:"thread,omitempty"`
	AgeS   float64 `json:"age_s"` // since it arrived
	Queued bool    `json:"queued"`
}

func ifcRequests() []inflight.Request {
	if p := activeIfc.Load(); p != nil {
		return (*p).Requests()
	}
	return nil
}

// status builds the worker's Status from its metrics, pool, requests and
// watchdog.
func (m *metrics) status() Status {
	st := Status{PID: os.Getpid(), UptimeS: time.Since(workerStart).Seconds(), RSSBytes: rss(),
		Loops: []LoopStatus{}, Running: []RunningReq{}, Stalls: []watchdog.Stall{}, Slow: []watchdog.Slow{}}
	ps := wsgiPoolStats()
	st.Queued, st.QueueSize = ps.Queued, ps.QueueSize
	st.Threads = ThreadStates{Total: ps.Threads, Running: ps.Busy, Idle: ps.Idle, GILWait: max(0, ps.Threads-ps.Busy-ps.Idle)}
	fams, _ := m.reg.Gather()
	loops := map[int]*LoopStatus{}
	loop := func(mt *dto.Metric) *LoopStatus {
		i := -1
		for _, l := range mt.Label {
			if l.GetName() == "loop" {
				i, _ = strconv.Atoi(l.GetValue())
			}
		}
		if loops[i] == nil {
			loops[i] = &LoopStatus{Loop: i}
		}
		return loops[i]
	}
	for _, f := range fams {
		switch f.GetName() {
		case "turnstile_requests_total":
			for _, mt := range f.Metric {
				v := uint64(mt.GetCounter().GetValue())
				st.Requests += v
				for _, l := range mt.Label {
					if l.GetName() == "code" && strings.HasPrefix(l.GetValue(), "5") {
						st.Errors += v
						if l.GetValue() == "503" {
							st.Unavail += v
						}
					}
				}
			}
		case "turnstile_requests_rejected_total":
			for _, mt := range f.Metric {
				st.Rejected += uint64(mt.GetCounter().GetValue())
			}
		case "turnstile_gil_wait_seconds":
			for _, mt := range f.Metric {
				st.GILWaitP99S = p99(mt.GetHistogram())
			}
		case "turnstile_loop_lag_seconds":
			for _, mt := range f.Metric {
				loop(mt).LagP99S = p99(mt.GetHistogram())
			}
		case "turnstile_loop_stall_seconds_total":
			for _, mt := range f.Metric {
				loop(mt).StallS = mt.GetCounter().GetValue()
			}
		case "turnstile_loop_stalls_total":
			for _, mt := range f.Metric {
				loop(mt).Stalls = uint64(mt.GetCounter().GetValue())
			}
		}
	}
	if wd := activeWatchdog.Load(); wd != nil {
		for _, s := range wd.Stalling() {
			l := loops[s.Loop.Index()]
			if l == nil {
				l = &LoopStatus{Loop: s.Loop.Index()}
				loops[s.Loop.Index()] = l
			}
			l.StalledS = s.Age.Seconds()
		}
		st.Stalls = append(st.Stalls, wd.Stalls()...)
		st.Slow = append(st.Slow, wd.Slows()...)
	}
	for _, l := range loops {
		st.Loops = append(st.Loops, *l)
	}
	sort.Slice(st.Loops, func(i, j int) bool { return st.Loops[i].Loop < st.Loops[j].Loop })
	now := time.Now()
	synced := syncThreads()
	for _, r := range ifcRequests() {
		target := r.Target
		if target == "" {
			target = r.Path
		}
		// an ASGI request whose sync call runs on ts-http-N/ts-sess-N
		// now: that thread, not its loop's
		if t := synced[requestKey(r.Method, r.Path, r.Start)]; t != "" {
			r.Thread = t
		}
		st.Running = append(st.Running, RunningReq{Method: r.Method, Target: target, Thread: r.Thread,
			AgeS: now.Sub(r.Start).Seconds(), Queued: r.Running.IsZero() && r.Thread == "" && st.Threads.Total > 0})
	}
	st.InFlight = len(st.Running)
	st.WebSockets = asgi.WebSocketSessions()
	return st
}

// p99 is the upper bound of the bucket holding the 99th percentile of h
// (the +Inf bucket: the largest finite bound); 0 for an empty histogram.
func p99(h *dto.Histogram) float64 {
	n := h.GetSampleCount()
	if n == 0 {
		return 0
	}
	want := uint64(math.Ceil(float64(n) * 0.99))
	last := 0.0
	for _, b := range h.GetBucket() {
		last = b.GetUpperBound()
		if b.GetCumulativeCount() >= want {
			return last
		}
	}
	return last
}

// rss reads the resident set size from /proc/self/statm (pages); 0 when
// it cannot.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// ThreadStack is one thread's sampled stack for /debug/stacks.
type ThreadStack struct {
	Thread string   `json:"thread"` // a pool thread's name (ts-py-N, ts-http-N, ts-sess-N), or "loop <n>"
	Method string   `json:"method,omitempty"`
	Target string   `json:"target,omitempty"`
	Stack  []string `json:"stack"` // innermost first, as watchdog.Stall.Stack
}

// stacks samples the stack of every thread running a request (the
// watchdog's sampler, python.SampleStack: no GIL, no wait), of every
// thread of an ASGI worker's pools for sync work running a call, and of
// every stalled loop.
func stacks() []ThreadStack {
	out := []ThreadStack{}
	wd := activeWatchdog.Load()
	describe := func(f []python.Frame) []string {
		if wd != nil {
			return wd.Describe(f)
		}
		s := make([]string, len(f))
		for i, fr := range f {
			s[i] = fr.String()
		}
		return s
	}
	for _, r := range ifcRequests() {
		if r.TState == nil || r.Thread == "" {
			continue
		}
		out = append(out, ThreadStack{Thread: r.Thread, Method: r.Method, Target: r.Path, Stack: describe(python.SampleStack(r.TState))})
	}
	out = append(out, syncStacks(describe)...)
	if wd != nil {
		for _, s := range wd.Stalling() {
			out = append(out, ThreadStack{Thread: "loop " + strconv.Itoa(s.Loop.Index()), Stack: describe(python.SampleStack(s.TState))})
		}
	}
	return out
}

// statusHandlers adds /debug/status, /debug/stacks and /debug/requests
// to the worker's admin mux (GET, JSON).
func statusHandlers(mux *http.ServeMux, m *metrics) {
	js := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("/debug/status", func(w http.ResponseWriter, r *http.Request) { js(w, m.status()) })
	mux.HandleFunc("/debug/stacks", func(w http.ResponseWriter, r *http.Request) { js(w, stacks()) })
	mux.HandleFunc("/debug/requests", func(w http.ResponseWriter, r *http.Request) { js(w, m.status().Running) })
}
