package asgi

/*
#include <stdlib.h>
#include "asgi.h"

void ts_asgi_set_source(const char *src);
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	pysrc "turnstile/python"
)

// AfterLoad is the C hook to pass in python.Config.AfterLoad: it creates
// what every loop of the process shares, once: the bridge's module, types
// and interned strings (loop.c, ts_asgi_setup).
var AfterLoad = unsafe.Pointer(C.ts_asgi_setup)

func init() {
	C.ts_asgi_set_source(C.CString(pysrc.ASGI)) // kept for the process's life
}

// LoopConfig configures an event loop thread.
type LoopConfig struct {
	Lifespan        string // auto, on or off (ASGI Lifespan)
	Loop            string // auto, asyncio or uvloop
	ExecutorThreads int    // threads of the loop's default executor
	// WriteBufferBytes is how many response bytes may wait for the socket
	// before the app's send() awaits. Default 256 KiB.
	WriteBufferBytes int
	// Batch runs the loop thread under SCHED_BATCH (config.Switches:
	// on but for an A/B run with TURNSTILE_LOOP_BATCH=0).
	Batch bool
}

type startResult struct {
	ok      bool
	crashed bool // the loop itself failed before lifespan startup ended
	msg     string
}

// Loop is one asyncio event loop on its own Python thread (ts-loop-N) and
// what is its own: the queue Go pushes requests on, the ready list it
// answers on (ready.go), its watchdog heartbeat (watch.go), the requests
// in flight on it, its lifespan state. A worker makes one with NewLoop
// and hands it to the Handler that serves on it; the request slots and
// the WebSocket registry are shared by every loop of the process
// (handler.go, websocket.go).
type Loop struct {
	c       *C.ts_loop // C memory: a loop lives as long as the process
	index   int
	handle  cgo.Handle // held by c for the exports (exports.go)
	started chan startResult
	stopped chan string
	// load is the HTTP requests and WebSocket sessions in flight on the
	// loop, counted by a Handler with several loops for its choice of
	// loop (Handler.pick); 0 with one loop (nothing is counted).
	load atomic.Int32
}

// NewLoop makes loop number index (its thread is ts-loop-<index>, its
// metrics label loop="<index>") with its queue and ready list, and starts
// its ready list's dispatcher goroutine. Start runs it. It fails only when
// the process is out of file descriptors or memory.
func NewLoop(index int, cfg LoopConfig) (*Loop, error) {
	l := &Loop{index: index, started: make(chan startResult, 1), stopped: make(chan string, 1)}
	l.handle = cgo.NewHandle(l)
	c := C.ts_loop_config{
		lifespan:         C.CString(cfg.Lifespan), // kept for the loop's life
		loop:             C.CString(cfg.Loop),
		executor_threads: C.int(cfg.ExecutorThreads),
		write_buffer:     C.size_t(cfg.WriteBufferBytes),
		batch:            boolInt(cfg.Batch),
	}
	cl, err := C.ts_loop_new(C.int(index), &c, C.uintptr_t(l.handle))
	if cl == nil {
		l.handle.Delete()
		return nil, fmt.Errorf("asgi: event loop %d: %w", index, err)
	}
	l.c = cl
	if err := l.startDispatch(); err != nil { // ready.go
		l.handle.Delete()
		return nil, fmt.Errorf("asgi: event loop %d: %w", index, err)
	}
	return l, nil
}

// Index is the loop's number, as NewLoop got it.
func (l *Loop) Index() int { return l.index }

// StopMargin is the part of Stop's timeout kept for cancelling the
// WebSocket apps that outlive the rest and for lifespan shutdown.
const StopMargin = time.Second

// ErrStartupFailed is returned by Start when lifespan startup failed
// (lifespan.startup.failed, or an exception with --lifespan on).
var ErrStartupFailed = errors.New("asgi: lifespan startup failed")

// Start starts the event loop thread (ts-loop-<index>) and runs lifespan
// startup; it returns when the loop serves, with the loop's name
// ("asyncio" or "uvloop"), or with an error wrapping ErrStartupFailed and
// the app's message. Call once, after python.Start loaded an ASGI app.
//
// Under LoopConfig.Batch the loop thread runs under SCHED_BATCH (no
// wake-up preemption of the Go thread that pushes it a request;
// docs/design.md). The executor's threads and any thread the app starts
// from the loop inherit SCHED_BATCH.
func (l *Loop) Start() (string, error) {
	if rc, err := C.ts_loop_start(l.c); rc != 0 {
		return "", err
	}
	r := <-l.started
	if r.crashed {
		// One clear line (the exception's last line, e.g. "--loop uvloop:
		// uvloop is not installed"); the traceback is in the error too.
		lines := strings.Split(strings.TrimSpace(r.msg), "\n")
		return "", &LoopError{Line: lines[len(lines)-1], Traceback: r.msg}
	}
	if !r.ok {
		return "", &StartupError{Message: r.msg}
	}
	return r.msg, nil
}

// LoopError is returned by Start when the event loop could not start
// (bad --loop, an import error in the loop's setup).
type LoopError struct{ Line, Traceback string }

func (e *LoopError) Error() string { return "asgi: the event loop did not start: " + e.Line }

// StartupError carries the app's lifespan startup failure message.
type StartupError struct{ Message string }

func (e *StartupError) Error() string { return "asgi: lifespan startup failed: " + e.Message }
func (e *StartupError) Unwrap() error { return ErrStartupFailed }

// Stop runs lifespan shutdown and stops the loop, waiting at most
// timeout. It reports whether the loop stopped.
//
// WebSockets go first (ASGI: websocket.disconnect is always delivered;
// case B29): each gets a close frame with 1012 and its app what the client
// sent before its close frame, then a websocket.disconnect (websocket.go,
// "Server stop"); the connections get until timeout - StopMargin to
// finish their closing handshake, and the apps still running then get the
// rest of that time to return before they are cancelled. The WebSockets
// closed and waited for are all the process's (websocket.go's registry is
// shared by the loops): a worker stops its loops together.
func (l *Loop) Stop(timeout time.Duration) bool {
	return len(StopLoops([]*Loop{l}, timeout)) == 0
}

// StopLoops stops the loops together, as Stop stops one: the process's
// WebSockets are closed and waited for once, then every loop gets its
// stop event at the same time, so their lifespan shutdowns run side by
// side, each on its own loop. It returns the indexes of the loops that
// had not stopped by timeout (none: all stopped).
func StopLoops(loops []*Loop, timeout time.Duration) []int {
	start := time.Now()
	CloseWebSockets()
	waitWebSockets(start.Add(timeout - StopMargin))
	appWait := max(timeout-StopMargin-time.Since(start), 0)
	for _, l := range loops {
		C.ts_asgi_push(l.c, C.TS_EV_STOP, nil, 0, nil, 0, C.int(appWait.Milliseconds()))
	}
	deadline := time.After(timeout) // as Stop always waited: timeout after the stop event
	expired := false
	var left []int
	for _, l := range loops {
		if !expired {
			select {
			case <-l.stopped:
				continue
			case <-deadline:
				expired = true
			}
		}
		select {
		case <-l.stopped:
		default:
			left = append(left, l.index)
		}
	}
	return left
}
