package asgi

/*
#include <stdlib.h>
#include "asgi.h"

void ts_asgi_set_source(const char *src);
*/
import "C"

import (
	"errors"
	"time"
	"unsafe"

	pysrc "turnstile/python"
)

// AfterLoad is the C hook to pass in python.Config.AfterLoad: it creates
// the bridge's module, types and interned strings.
var AfterLoad = unsafe.Pointer(C.ts_asgi_setup)

func init() {
	C.ts_asgi_set_source(C.CString(pysrc.ASGI)) // kept for the process's life
}

// LoopConfig configures the event loop thread.
type LoopConfig struct {
	Lifespan        string // auto, on or off (ASGI Lifespan)
	Loop            string // auto, asyncio or uvloop
	ExecutorThreads int    // threads of the loop's default executor
	// WriteBufferBytes is how many response bytes may wait for the socket
	// before the app's send() awaits. Default 256 KiB.
	WriteBufferBytes int
}

type startResult struct {
	ok  bool
	msg string
}

var loop = struct {
	started chan startResult
	stopped chan string
}{make(chan startResult, 1), make(chan string, 1)}

// ErrStartupFailed is returned by StartLoop when lifespan startup failed
// (lifespan.startup.failed, or an exception with --lifespan on).
var ErrStartupFailed = errors.New("asgi: lifespan startup failed")

// StartLoop starts the event loop thread (ts-loop-0) and runs lifespan
// startup; it returns when the loop serves, with the loop's name
// ("asyncio" or "uvloop"), or with an error wrapping ErrStartupFailed and
// the app's message. Call after python.Start loaded an ASGI app.
func StartLoop(cfg LoopConfig) (string, error) {
	c := C.ts_loop_config{
		lifespan:         C.CString(cfg.Lifespan),
		loop:             C.CString(cfg.Loop),
		executor_threads: C.int(cfg.ExecutorThreads),
		write_buffer:     C.size_t(cfg.WriteBufferBytes),
	}
	if rc, err := C.ts_loop_start(&c); rc != 0 {
		return "", err
	}
	r := <-loop.started
	if !r.ok {
		return "", &StartupError{Message: r.msg}
	}
	return r.msg, nil
}

// StartupError carries the app's lifespan startup failure message.
type StartupError struct{ Message string }

func (e *StartupError) Error() string { return "asgi: lifespan startup failed: " + e.Message }
func (e *StartupError) Unwrap() error { return ErrStartupFailed }

// StopLoop runs lifespan shutdown and stops the loop, waiting at most
// timeout. It reports whether the loop stopped.
func StopLoop(timeout time.Duration) bool {
	C.ts_asgi_push(C.TS_EV_STOP, nil, 0, nil, 0, 0)
	select {
	case <-loop.stopped:
		return true
	case <-time.After(timeout):
		return false
	}
}
