package asgi

/*
#include "asgi.h"
*/
import "C"

import (
	"strconv"
	"time"
	"unsafe"

	"turnstile/internal/inflight"
	"turnstile/internal/watchdog"
)

// A Loop is what the watchdog watches (watchdog.Loop): its heartbeat, its
// probe, its requests in flight.
var _ watchdog.Loop = (*Loop)(nil)

// ReadHeartbeat returns the loop's heartbeat. Beat is 0 before the loop
// started. It consumes Lag: one reader only (the watchdog).
func (l *Loop) ReadHeartbeat() watchdog.Heartbeat {
	var h watchdog.Heartbeat
	var beat, lag C.int64_t
	var seq C.uint64_t
	var ts *C.PyThreadState
	C.ts_loop_read(l.c, &beat, &lag, &seq, &ts)
	h.Beat, h.Lag, h.Probes, h.TState = int64(beat), int64(lag), uint64(seq), unsafe.Pointer(ts)
	return h
}

// PushProbe queues the watchdog's probe: when the loop drains it, its
// heartbeat moves and the time it waited becomes the loop lag. The Go
// watchdog calls it every 50 ms; a blocked loop leaves it queued.
// It reports whether the probe was queued (not when the loop is stopping).
func (l *Loop) PushProbe() bool {
	now := int64(C.ts_now_ns())
	return C.ts_asgi_push(l.c, C.TS_EV_PROBE, nil, 0, (*C.char)(unsafe.Pointer(&now)), C.size_t(unsafe.Sizeof(now)), 0) == 0
}

// Connections returns how many connections the loop holds now: the
// slots serving an HTTP request or a WebSocket session on it (a
// kept-alive connection between requests holds no slot). For the
// watchdog's stall records; it reads the slot table, never per request.
func (l *Loop) Connections() int {
	slots.mu.Lock()
	all := slots.all
	slots.mu.Unlock()
	n := 0
	for _, s := range all {
		idle := func([]byte, []byte, time.Time) {}
		// an HTTP request (rec) or a WebSocket session (conn)
		if (s.rec.Read(idle) || s.conn.Read(idle)) && s.c.loop == l.c { // racy read of loop: diagnostics only
			n++
		}
	}
	return n
}

// Requests returns the requests in flight on the loop, oldest first
// (Method, Path and Start; Running is Start: a loop runs what it takes;
// Thread is the loop thread's name, ts-loop-N, with no TState: a loop's
// stack is the watchdog's to sample, when it stalls).
func (l *Loop) Requests() []inflight.Request {
	thread := "ts-loop-" + strconv.Itoa(l.index)
	slots.mu.Lock()
	all := slots.all
	slots.mu.Unlock()
	var out []inflight.Request
	for _, s := range all { // slots are never freed: all stays valid
		s.rec.Read(func(method, path []byte, start time.Time) {
			// The slot's loop was set (ts_asgi_begin) before the record
			// began, and stays while it is active: a slot serves one
			// request at a time, on any loop.
			if s.c.loop == l.c {
				out = append(out, inflight.Request{Method: string(method), Path: string(path), Start: start, Running: start, Thread: thread})
			}
		})
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Start.Before(out[j-1].Start); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
