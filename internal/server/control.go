package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"turnstile/internal/workerctl"
)

// control is a worker's end of its control pipe to the master: the worker
// writes one workerctl.Msg per line, the master reads them
// (internal/supervise). It sends ready and recycle once each. Writes never
// block the caller for long: the master reads the pipe continuously.
type control struct {
	mu        sync.Mutex
	f         *os.File
	isReady   atomic.Bool
	recycling atomic.Bool
	drain     atomic.Pointer[func()] // onRecycle: begins the worker's drain
}

// onRecycle sets f to run when the worker asks to be replaced (or at
// once, if it already has): the worker's drain begins there, not when
// the master stops it once the replacement is ready.
func (c *control) onRecycle(f func()) {
	c.drain.Store(&f)
	if c.recycling.Load() {
		f()
	}
}

// draining begins the worker's drain (onRecycle) without asking for a
// replacement yet: --max-requests calls it when its last request begins,
// so that this request's response already announces the close.
func (c *control) draining() {
	if f := c.drain.Load(); f != nil {
		(*f)()
	}
}

func openControl(fd uintptr) (*control, error) {
	f := os.NewFile(fd, "control")
	if f == nil {
		return nil, fmt.Errorf("server: no control pipe on fd %d", fd)
	}
	return &control{f: f}, nil
}

// send writes m on the control pipe. The messages sent here are fixed
// in form (a Kind and a workerctl Cause), so an Encode error is a bug.
func (c *control) send(m workerctl.Msg) {
	line, err := m.Encode()
	if err != nil {
		panic(fmt.Sprintf("server: control message %+v: %v", m, err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.f.Write(line) // the master is gone: nothing to tell
}

func (c *control) ready() {
	if c.isReady.CompareAndSwap(false, true) {
		c.send(workerctl.Msg{Kind: workerctl.Ready})
	}
}

func (c *control) wasReady() bool { return c.isReady.Load() }

func (c *control) failed(reason string) {
	if reason == "" {
		reason = "exited before it was ready"
	}
	c.send(workerctl.Msg{Kind: workerctl.Failed, Reason: reason})
}

// recycle asks the master, once, for a graceful replacement; cause is
// workerctl.CauseMaxRequests or CauseTimeout.
func (c *control) recycle(cause, why string) {
	if c.recycling.CompareAndSwap(false, true) {
		c.draining()
		c.send(workerctl.Msg{Kind: workerctl.Recycle, Cause: cause, Reason: why})
	}
}

// lastError is a slog.Handler that remembers the last error record it
// passes on: a worker that fails to start reports it to the master as the
// reason, summarised to one line.
type lastError struct {
	slog.Handler
	last *atomic.Pointer[string]
}

func (h *lastError) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "traceback" {
				msg += "\n" + a.Value.String() // text keeps its exception, the last line
				return false
			}
			return true
		})
		h.last.Store(&msg)
	}
	return h.Handler.Handle(ctx, r)
}

func (h *lastError) WithAttrs(as []slog.Attr) slog.Handler {
	return &lastError{Handler: h.Handler.WithAttrs(as), last: h.last}
}

func (h *lastError) WithGroup(name string) slog.Handler {
	return &lastError{Handler: h.Handler.WithGroup(name), last: h.last}
}

func newLastError(h slog.Handler) *lastError {
	return &lastError{Handler: h, last: new(atomic.Pointer[string])}
}

// text returns the last error in one line: a multi-line message (an
// import error and its traceback) becomes its first line and its last
// non-empty line, the exception.
func (h *lastError) text() string {
	p := h.last.Load()
	if p == nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(*p), "\n")
	first, last := strings.TrimSpace(lines[0]), ""
	for i := len(lines) - 1; i > 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			last = s
			break
		}
	}
	if last == "" {
		return first
	}
	return strings.TrimSuffix(first, ":") + ": " + last
}
