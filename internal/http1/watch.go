package http1

import (
	"errors"
	"os"
	"sync"
	"time"
)

// Watching for a client that goes away while the handler runs.
//
// Once the request body has been read to the end, nothing reads the socket
// until the handler returns, so a client that closes or resets the
// connection is noticed only at the next write. A streaming response whose
// producer is idle (ASGI: an app awaiting receive(), case B26) would never
// learn of it. NotifyClose starts one background read of a single byte: EOF
// or an error means the client is gone and the callback runs; a byte means
// the client sent more (a pipelined request), which is kept for the next
// request and the watch ends. net/http's backgroundRead does the same.

// bgRead is the background read state of a connection, guarded by mu.
type bgRead struct {
	mu     sync.Mutex
	active bool
	done   chan struct{}
	has    bool // one byte read ahead, returned by the next Read
	b      [1]byte
	err    error // sticky: the connection is gone
}

// aLongTimeAgo is a deadline in the past: it makes a pending Read return.
var aLongTimeAgo = time.Unix(1, 0)

// NotifyClose calls onClose (on another goroutine) if the client closes or
// resets the connection before the handler returns. It must be called only
// after the request body has been read to io.EOF, and at most once per
// request. It reports false, and watches nothing, when the body is not
// finished or bytes of a pipelined request are already buffered (the
// client is evidently still there).
func (w *ResponseWriter) NotifyClose(onClose func()) bool {
	if w.st != nil {
		return w.st.notifyClose(onClose)
	}
	c := w.c
	if c == nil || !c.body.eof || c.br != nil && c.br.Buffered() > 0 {
		return false
	}
	bg := &c.bg
	bg.mu.Lock()
	if bg.active || bg.has || bg.err != nil {
		bg.mu.Unlock()
		return false
	}
	bg.active = true
	bg.done = make(chan struct{})
	bg.mu.Unlock()
	c.rwc.SetReadDeadline(time.Time{})
	go func() {
		n, err := c.rwc.Read(bg.b[:])
		bg.mu.Lock()
		gone := false
		if n == 1 {
			bg.has = true
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			bg.err = err
			gone = true
		}
		bg.active = false
		bg.mu.Unlock()
		if gone {
			onClose() // before done: stopBackgroundRead waits for it
		}
		close(bg.done)
	}()
	return true
}

// stopBackgroundRead ends a background read started by NotifyClose and
// waits for it. Called when the handler has returned.
func (c *conn) stopBackgroundRead() {
	bg := &c.bg
	bg.mu.Lock()
	active, done := bg.active, bg.done
	bg.mu.Unlock()
	if !active {
		return
	}
	c.rwc.SetReadDeadline(aLongTimeAgo)
	<-done
	c.rwc.SetReadDeadline(time.Time{})
}

// readAhead returns the byte or error the background read left, if any.
func (c *conn) readAhead(p []byte) (int, error, bool) {
	bg := &c.bg
	bg.mu.Lock()
	defer bg.mu.Unlock()
	if bg.has && len(p) > 0 {
		p[0] = bg.b[0]
		bg.has = false
		return 1, nil, true
	}
	if bg.err != nil {
		return 0, bg.err, true
	}
	return 0, nil, false
}
