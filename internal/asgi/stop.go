package asgi

import (
	"fmt"
	"sort"
	"time"

	"turnstile/internal/inflight"
	"turnstile/internal/watchdog"
)

// Stop runs lifespan shutdown and stops the handler's loops together,
// waiting at most timeout (StopLoops). It reports whether every loop
// stopped; when not, it has logged which did not (WARNING "event loop
// still running at exit").
func (h *Handler) Stop(timeout time.Duration) bool {
	left := StopLoops(h.EventLoops, timeout)
	if len(left) == 0 {
		return true
	}
	if len(h.EventLoops) == 1 {
		h.logger().Warn("event loop still running at exit")
	} else {
		h.logger().Warn("event loop still running at exit", "loops", fmt.Sprint(left))
	}
	return false
}

// ExpireQueued does nothing: nothing waits in a queue for a thread, a
// loop takes each request as it comes (WSGI's answers those with 503).
func (h *Handler) ExpireQueued() {}

// Requests returns the requests in flight on the handler's loops, oldest
// first.
func (h *Handler) Requests() []inflight.Request {
	if len(h.EventLoops) == 1 {
		return h.EventLoops[0].Requests()
	}
	var out []inflight.Request
	for _, l := range h.EventLoops {
		out = append(out, l.Requests()...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Loops is the handler's loops, for the watchdog, in index order.
func (h *Handler) Loops() []watchdog.Loop {
	out := make([]watchdog.Loop, len(h.EventLoops))
	for i, l := range h.EventLoops {
		out[i] = l
	}
	return out
}

// Pools is none: an ASGI app's requests run on its loops.
func (h *Handler) Pools() []watchdog.Pool { return nil }
