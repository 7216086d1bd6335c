package asgi

/*
#include "asgi.h"
*/
import "C"

import (
	"unsafe"

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
