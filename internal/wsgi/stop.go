package wsgi

import (
	"sort"
	"strings"
	"time"

	"turnstile/internal/watchdog"
)

// Stop lets the pool's running jobs finish and joins its threads, waiting
// at most timeout (python.Pool.Stop). It reports whether every thread
// ended; when not, it has logged the requests still in flight (WARNING
// "pool threads still running at exit: exiting without them").
func (h *Handler) Stop(timeout time.Duration) bool {
	if h.Pool.Stop(timeout) {
		return true
	}
	h.logger().Warn("pool threads still running at exit: exiting without them", "requests", h.running())
	return false
}

// running describes the requests still in flight, oldest first:
// "GET /sleep running 3.002s", comma-separated ("queued" for one no pool
// thread took).
func (h *Handler) running() string {
	reqs := h.Requests()
	sort.Slice(reqs, func(i, j int) bool { return reqs[i].Start.Before(reqs[j].Start) })
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		state, since := " running ", r.Running
		if r.Running.IsZero() {
			state, since = " queued ", r.Start
		}
		parts[i] = r.Method + " " + r.Path + state + time.Since(since).Round(time.Millisecond).String()
	}
	return strings.Join(parts, ", ")
}

// Loops is none: a WSGI app runs on a pool.
func (h *Handler) Loops() []watchdog.Loop { return nil }

// Pools is the handler itself: the source of its pool's requests for the
// slow-request sampler and --timeout.
func (h *Handler) Pools() []watchdog.Pool { return []watchdog.Pool{h} }
