package asgi

import (
	"time"

	"turnstile/internal/inflight"
	"turnstile/internal/watchdog"
)

// Stop runs lifespan shutdown and stops the handler's loop, waiting at
// most timeout (Loop.Stop). It reports whether the loop stopped; when not,
// it has logged so (WARNING "event loop still running at exit").
func (h *Handler) Stop(timeout time.Duration) bool {
	if h.Loop.Stop(timeout) {
		return true
	}
	h.logger().Warn("event loop still running at exit")
	return false
}

// ExpireQueued does nothing: nothing waits in a queue for a thread, the
// loop takes each request as it comes (WSGI's answers those with 503).
func (h *Handler) ExpireQueued() {}

// Requests returns the requests in flight on the handler's loop, oldest
// first.
func (h *Handler) Requests() []inflight.Request { return h.Loop.Requests() }

// Loops is the handler's loop, for the watchdog.
func (h *Handler) Loops() []watchdog.Loop { return []watchdog.Loop{h.Loop} }

// Pools is none: an ASGI app's requests run on its loop.
func (h *Handler) Pools() []watchdog.Pool { return nil }
