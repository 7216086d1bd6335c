package asgi

/*
#include "asgi.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"turnstile/internal/inflight"
	"turnstile/internal/python"
)

// SetPools hands the loops the worker's pools for sync work (call.c;
// docs/design.md, "Sync work of async apps"): http runs the
// thread-sensitive calls of HTTP requests, each request bound to one of
// its threads, at most httpBound requests bound at once (more get 503);
// sess runs those of WebSocket sessions, each pinned to one thread for
// its life. nil turns a binding off (asgiref's own threads). Call once,
// before the first loop starts.
func SetPools(http, sess *python.Pool, httpBound int) {
	var h, s unsafe.Pointer
	if http != nil {
		h = http.C()
	}
	if sess != nil {
		s = sess.C()
	}
	C.ts_asgi_set_pools(h, s, C.long(httpBound))
}

// ByTag returns the request or WebSocket a sync call's tag names (the
// Channel's tag: slot index << 32 | generation), if it is still in
// flight: for the pools' slow-call records and /debug/threads.
func ByTag(tag uint64) (inflight.Request, bool) {
	idx := int(tag >> 32)
	slots.mu.Lock()
	var s *slot
	if idx < len(slots.all) {
		s = slots.all[idx]
	}
	slots.mu.Unlock()
	if s == nil || uint32(s.c.gen) != uint32(tag) { // a racy read of gen: diagnostics only
		return inflight.Request{}, false
	}
	var f inflight.Request
	read := func(method, path []byte, start time.Time) {
		f = inflight.Request{Method: string(method), Path: string(path), Start: start}
	}
	// an HTTP request (rec), else a WebSocket session (conn)
	ok := s.rec.Read(read) || s.conn.Read(read)
	return f, ok
}
