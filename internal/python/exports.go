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
//
//export go_ts_log
func go_ts_log(level C.int, msg *C.char, n C.int) {
	text := C.GoStringN(msg, n)
	Logger().Log(context.Background(), slogLevel(int(level)), text, "source", "python")
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

var _ = unsafe.Pointer(nil)
