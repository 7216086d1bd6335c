package asgi

import (
	"testing"

	"turnstile/internal/http1"
)

// newTestLoops makes n Loops with no C side: pick and loopFor read only
// their load.
func newTestLoops(n int) []*Loop {
	out := make([]*Loop, n)
	for i := range out {
		out[i] = &Loop{index: i}
	}
	return out
}

// pick takes the loop with the fewest in flight, skips a stalled one,
// spreads ties, and falls back to every loop when all are stalled.
func TestPick(t *testing.T) {
	loops := newTestLoops(3)
	stalled := map[int]bool{}
	h := &Handler{EventLoops: loops, LoopStalled: func(i int) bool { return stalled[i] }}

	seen := map[int]int{}
	for range 6 {
		seen[h.pick()]++
	}
	if seen[0] != 2 || seen[1] != 2 || seen[2] != 2 {
		t.Errorf("6 picks over 3 idle loops = %v; want 2 each", seen)
	}

	loops[0].load.Store(3)
	loops[1].load.Store(1)
	loops[2].load.Store(2)
	for range 3 {
		if i := h.pick(); i != 1 {
			t.Fatalf("pick() = %d with loads 3, 1, 2; want 1", i)
		}
	}
	stalled[1] = true
	for range 3 {
		if i := h.pick(); i != 2 {
			t.Fatalf("pick() = %d with loop 1 stalled, loads 3, 1, 2; want 2", i)
		}
	}
	stalled[0], stalled[2] = true, true
	if i := h.pick(); i != 1 {
		t.Errorf("pick() = %d with every loop stalled; want the least loaded, 1", i)
	}
}

// A connection keeps the loop it was first given; a request without one
// is placed on its own; one loop is always that loop, and nothing is
// counted.
func TestLoopFor(t *testing.T) {
	loops := newTestLoops(2)
	h := &Handler{EventLoops: loops}
	var cd http1.ConnData
	r := &http1.Request{Conn: &cd}
	first := h.loopFor(r)
	loops[first.index].load.Store(10) // busy now: a new connection would go elsewhere
	for range 4 {
		if l := h.loopFor(r); l != first {
			t.Fatalf("the connection moved from loop %d to loop %d", first.index, l.index)
		}
	}
	if l := h.loopFor(&http1.Request{Conn: new(http1.ConnData)}); l == first {
		t.Errorf("a new connection went to the busy loop %d", l.index)
	}

	one := &Handler{EventLoops: newTestLoops(1)}
	if one.loopFor(&http1.Request{}) != one.EventLoops[0] || one.counted(one.EventLoops[0]) != nil {
		t.Error("with one loop: want that loop, and no count")
	}
}
