package wsgi

import (
	"slices"
	"sync"
	"time"

	"turnstile/internal/inflight"
	"turnstile/internal/python"
	"turnstile/internal/watchdog"
)

// registry lists every slot that exists (getSlot to freeSlot, which is
// rare), for Requests and sweepSlots. A request marks its own slot's
// inflight.Record. Lock order: registry.mu, then a record's.
var registry struct {
	mu    sync.Mutex
	slots map[*slot]struct{} // guarded by mu
}

func register(s *slot) {
	registry.mu.Lock()
	if registry.slots == nil {
		registry.slots = make(map[*slot]struct{})
	}
	registry.slots[s] = struct{}{}
	registry.mu.Unlock()
}

func unregister(s *slot) {
	registry.mu.Lock()
	delete(registry.slots, s)
	registry.mu.Unlock()
}

// The handler is a source of requests on threads of their own for the
// watchdog's slow-request sampler (watchdog.Pool).
var _ watchdog.Pool = (*Handler)(nil)

// Requests returns the handler's requests in flight, in no order: Running,
// Thread and TState are set once a pool thread took one (zero while it is
// queued). The thread is read from the C job as it runs (a racy read of an
// int the pool thread wrote before it started the job).
func (h *Handler) Requests() []inflight.Request {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	var out []inflight.Request
	now, nowNs := time.Now(), python.Now()
	for s := range registry.slots {
		if s.h != h {
			continue
		}
		s.rec.Read(func(method, path []byte, start time.Time) {
			r := inflight.Request{Method: string(method), Path: string(path), Start: start}
			if s.r != nil { // set before the record began, cleared after it ended
				r.Target = string(s.r.Target)
				if s.r.RemoteAddr != nil {
					r.Remote = s.r.RemoteAddr.String()
				}
			}
			if b := &s.job.base; !s.queued() {
				r.Thread = h.Pool.ThreadName(int(b.thread_index))
				r.TState = h.Pool.ThreadState(int(b.thread_index))
				r.Running = now.Add(-time.Duration(nowNs - int64(b.started_ns)))
			}
			out = append(out, r)
		})
	}
	return out
}

// sweepEvery is how often sweepSlots runs while no request is in flight,
// for a handler whose QueueTimeout is d: a tenth of it, between 5 ms and
// 1 s (1 s without a timeout). While requests are in flight it runs every
// GoneEvery, or that tenth when shorter. A request past QueueTimeout is
// answered within that much after it.
func sweepEvery(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return min(max(d/10, 5*time.Millisecond), time.Second)
}

// trimEvery is how often idle slots are trimmed: those that stayed idle
// for a whole period, above MinIdleSlots, are freed.
const trimEvery = time.Second

// sweepSlots runs for ever, one goroutine per handler (instead of a timer
// armed and stopped per request, or a goroutine per request watching its
// connection). Each tick it sweeps the queued requests (gone.go): those
// that waited for a pool thread longer than h.QueueTimeout are withdrawn
// (ts_pool_cancel) and their goroutines woken to answer 503; those whose
// client left are withdrawn and dropped. Every trimEvery it frees the idle
// slots no request needed since the last trim.
func (h *Handler) sweepSlots() {
	idle := sweepEvery(h.QueueTimeout)
	busy := min(GoneEvery, idle)
	lastTrim := time.Now()
	t := time.NewTimer(idle)
	h.sweepIdle.Store(true)
	for {
		var now time.Time
		select {
		case now = <-t.C:
		case <-h.sweepKick: // a request came while the sweep was idle
			t.Stop()
			now = time.Now()
		}
		h.sweepIdle.Store(false)
		next := idle
		if h.sweep(now) > 0 {
			next = busy
		}
		if now.Sub(lastTrim) >= trimEvery {
			lastTrim = now
			h.trim()
		}
		if next == idle {
			// A request queued from here on kicks the sweep (kickSweep):
			// an idle sweep's tick (up to 1 s) would let a client that
			// left early be served anyway.
			h.sweepIdle.Store(true)
		}
		t.Reset(next)
	}
}

// ExpireQueued answers every request still waiting for a pool thread, and
// every one queued after it, with 503 and Retry-After: the worker is
// stopping and no thread will take them before its graceful timeout (a
// thread stuck in a view). Called shortly before the timeout, so that
// they get an answer a client may safely retry, not a connection closed
// under them (a POST's client cannot tell whether it ran).
func (h *Handler) ExpireQueued() {
	h.stopping.Store(true)
	h.sweeper.Do(h.startSweep)
	select {
	case h.sweepKick <- struct{}{}:
	default:
	}
}

// startSweep starts sweepSlots, once (h.sweeper).
func (h *Handler) startSweep() {
	h.sweepKick = make(chan struct{}, 1)
	go h.sweepSlots()
}

// kickSweep wakes an idle sweep for a request just queued, so that it
// looks at queued requests every GoneEvery from now on. Under load the
// sweep is busy and this is one atomic load.
func (h *Handler) kickSweep() {
	if h.sweepIdle.Load() {
		select {
		case h.sweepKick <- struct{}{}:
		default:
		}
	}
}

// trim frees the idle slots, above MinIdleSlots, that stayed idle since
// the last trim: the oldest of the free list, which is used from its end.
func (h *Handler) trim() {
	h.mu.Lock()
	n := h.lowFree - MinIdleSlots
	var cold []*slot
	if n > 0 {
		cold = slices.Clone(h.free[:n])
		h.free = slices.Delete(h.free, 0, n)
		h.count -= n
	}
	h.lowFree = len(h.free)
	h.mu.Unlock()
	for _, s := range cold {
		freeSlot(s)
	}
}
