package asgi

// Every //export of the ASGI bridge. Each runs on the loop thread with the
// GIL released.

/*
#include <stdint.h>
*/
import "C"

import "runtime/cgo"

// loopOf is the Loop whose handle the loop thread passed (loop.c).
func loopOf(h C.uintptr_t) *Loop { return cgo.Handle(h).Value().(*Loop) }

// go_ts_asgi_started reports the end of loop h's lifespan startup: ok, and a
// message (the loop's name, or why startup failed).
//
//export go_ts_asgi_started
func go_ts_asgi_started(h C.uintptr_t, ok C.int, msg *C.char, n C.int) {
	loopOf(h).started <- startResult{ok: ok != 0, msg: C.GoStringN(msg, n)}
}

// go_ts_asgi_stopped reports that loop h's thread has finished (msg is nil
// on a clean stop, else the failure).
//
//export go_ts_asgi_stopped
func go_ts_asgi_stopped(h C.uintptr_t, msg *C.char, n C.int) {
	l := loopOf(h)
	text := ""
	if msg != nil {
		text = C.GoStringN(msg, n)
	}
	select {
	case l.started <- startResult{ok: false, crashed: true, msg: text}:
	default:
	}
	l.stopped <- text
}
