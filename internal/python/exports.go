package python

// Every //export of the Python bridge lives here: a file with //export may
// only declare things in its preamble (cmd/cgo). Each is called from a
// Python thread with the GIL released.

/*
#include <stddef.h>
*/
import "C"

import (
	"context"
	"log/slog"
	"unsafe"
)

// go_ts_log writes one record from Python (print, logging, wsgi.errors,
// tracebacks) to the server log. level is Python's logging level (10..50).
// kv holds nkv/2 fields (key, value, key, value..., UTF-8 of kvlen bytes
// each, borrowed for the call): none for the app's output, which is marked
// source=python; the fields of a record of the server's own Python half
// (_asgi.py's "asgi: app raised" with method, target, traceback) otherwise.
//
//export go_ts_log
func go_ts_log(level C.int, msg *C.char, n C.int, kv **C.char, kvlen *C.int, nkv C.int) {
	text := C.GoStringN(msg, n)
	if nkv == 0 {
		Logger().Log(context.Background(), slogLevel(int(level)), text, "source", "python")
		return
	}
	ptrs, lens := unsafe.Slice(kv, int(nkv)), unsafe.Slice(kvlen, int(nkv))
	args := make([]any, nkv)
	for i := range args {
		args[i] = C.GoStringN(ptrs[i], lens[i])
	}
	Logger().Log(context.Background(), slogLevel(int(level)), text, args...)
}

func slogLevel(pyLevel int) slog.Level {
	switch {
	case pyLevel >= 40:
		return slog.LevelError
	case pyLevel >= 30:
		return slog.LevelWarn
	case pyLevel >= 20:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}
