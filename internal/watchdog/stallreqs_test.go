package watchdog

import (
	"fmt"
	"testing"
	"time"

	"turnstile/internal/inflight"
)

// TestSeeRequests: a stall's record keeps every request seen in flight
// while it lasted, oldest first, each once with its latest age; the one
// that blocked the loop stays when a later look finds it finished (CI,
// 3.12: TestB35_BlockedLoop's final record lost GET /sleep), and the
// list is bounded.
func TestSeeRequests(t *testing.T) {
	t0 := time.Now()
	blocker := inflight.Request{Method: "GET", Path: "/sleep", Start: t0}
	a := inflight.Request{Method: "GET", Path: "/nap", Start: t0.Add(100 * time.Millisecond)}
	b := inflight.Request{Method: "GET", Path: "/health", Start: t0.Add(100 * time.Millisecond)}
	late := inflight.Request{Method: "POST", Path: "/late", Start: t0.Add(time.Second)}

	var cur stallState
	cur.seeRequests([]inflight.Request{blocker, a, b}, t0.Add(500*time.Millisecond))
	cur.seeRequests([]inflight.Request{a, b, late}, t0.Add(3*time.Second)) // the blocker finished
	got := fmt.Sprint(cur.requests)
	want := "[{GET /sleep 500} {GET /nap 2900} {GET /health 2900} {POST /late 2000}]"
	if got != want {
		t.Errorf("requests = %s; want %s", got, want)
	}

	var many stallState
	for i := range maxStallRequests + 10 {
		many.seeRequests([]inflight.Request{{Method: "GET", Path: fmt.Sprint("/", i), Start: t0.Add(time.Duration(i) * time.Millisecond)}}, t0.Add(time.Second))
	}
	if len(many.requests) != maxStallRequests || many.requests[0].Path != "/0" || len(many.started) != maxStallRequests {
		t.Errorf("%d requests kept, first %q; want the %d oldest", len(many.requests), many.requests[0].Path, maxStallRequests)
	}
}
