package wsgi

import (
	"sync"
	"time"
)

// InFlight is one WSGI request being served, for the slow-request sampler.
type InFlight struct {
	Method, Path string
	Start        time.Time
	// Thread is the pool thread running it, or -1 while it is queued.
	Thread int
}

var inflight struct {
	mu sync.Mutex
	m  map[*slot]InFlight
}

func track(s *slot) {
	inflight.mu.Lock()
	if inflight.m == nil {
		inflight.m = make(map[*slot]InFlight)
	}
	inflight.m[s] = InFlight{Method: string(s.r.Method), Path: string(s.r.Path), Start: time.Now(), Thread: -1}
	inflight.mu.Unlock()
}

func untrack(s *slot) {
	inflight.mu.Lock()
	delete(inflight.m, s)
	inflight.mu.Unlock()
}

// Requests returns the WSGI requests in flight. Thread is read from the C
// job as it runs (a racy read of an int the pool thread wrote before it
// started the job).
func Requests() []InFlight {
	inflight.mu.Lock()
	defer inflight.mu.Unlock()
	out := make([]InFlight, 0, len(inflight.m))
	for s, r := range inflight.m {
		if s.job.base.started_ns >= s.job.base.enqueued_ns && s.job.base.started_ns != 0 {
			r.Thread = int(s.job.base.thread_index)
		}
		out = append(out, r)
	}
	return out
}
