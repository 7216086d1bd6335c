// Package inflight records the request a bridge's slot is serving, for the
// watchdog and the stop log (which request is slow, stuck or still
// running), at no shared cost per request: each slot holds one Record
// under its own mutex, which only a reader contends for; method and path
// are copied into buffers the record reuses.
package inflight

import (
	"sync"
	"time"
)

// Record is what a reader sees of one slot's request. The zero value is
// idle.
type Record struct {
	mu           sync.Mutex
	active       bool
	start        time.Time
	method, path []byte
}

// Begin marks the record active: a request with method and path (copied)
// started at start.
func (r *Record) Begin(start time.Time, method, path []byte) {
	r.mu.Lock()
	r.active, r.start = true, start
	r.method = append(r.method[:0], method...)
	r.path = append(r.path[:0], path...)
	r.mu.Unlock()
}

// End marks the record idle.
func (r *Record) End() {
	r.mu.Lock()
	r.active = false
	r.mu.Unlock()
}

// Read calls f with the request if the record is active, and reports
// whether it was. f runs under the record's lock: the slices are valid
// only until it returns, and no other request can begin on the slot
// meanwhile (f may act on the request it was shown).
func (r *Record) Read(f func(method, path []byte, start time.Time)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active {
		f(r.method, r.path, r.start)
	}
	return r.active
}
