package asgi

// Every //export of the ASGI bridge. Each runs on the loop thread with the
// GIL released.

/*
#include <stddef.h>
*/
import "C"

// go_ts_asgi_started reports the end of lifespan startup: ok, and a
// message (the loop's name, or why startup failed).
//
//export go_ts_asgi_started
func go_ts_asgi_started(ok C.int, msg *C.char, n C.int) {
	loop.started <- startResult{ok: ok != 0, msg: C.GoStringN(msg, n)}
}

// go_ts_asgi_stopped reports that the loop thread has finished (msg is nil
// on a clean stop, else the failure).
//
//export go_ts_asgi_stopped
func go_ts_asgi_stopped(msg *C.char, n C.int) {
	text := ""
	if msg != nil {
		text = C.GoStringN(msg, n)
	}
	select {
	case loop.started <- startResult{ok: false, crashed: true, msg: text}:
	default:
	}
	loop.stopped <- text
}
