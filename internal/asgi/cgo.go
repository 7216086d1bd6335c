package asgi

// The C of this package (queue.c, channel.c, send.c, scope.c, loop.c,
// websocket.c) calls internal/python's C (tspy.h: the wake lists of the
// loop queue and the ready list, the attach pair, ts_buf_*,
// ts_check_field, ts_entry_next, ts_log ...), which cgo compiles into
// that package, not this one. The Go import of turnstile/internal/python
// is what links it in, and it is a real one: each loop's ready list is
// consumed by a python.Dispatcher (ready.go). So `go list -deps` tells the
// truth about this package, as for internal/wsgi (its cgo.go).

/*
#cgo pkg-config: python3-embed
#cgo CFLAGS: -O2 -Wall -Werror -Wno-unused-function -I${SRCDIR}/../python
*/
import "C"
