package http1

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
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
	if c == nil || !c.body.eof || c.buffered() > 0 {
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

// Presence is what a poller needs to tell, without reading the socket and
// without a goroutine per request, that the client of a request has gone
// (the WSGI queue's withdrawal, internal/wsgi/gone.go, polls many at once).
type Presence struct {
	// FD is the connection's socket (HTTP/1), or -1 for an HTTP/2 stream.
	// It stays valid while the handler runs: the server closes the
	// connection after the handler returns, or, before that, only when it
	// cuts the connection itself (a forced stop), when the client is gone
	// for the request anyway. A poller that sees a reused number then sees
	// another connection's state: it may withdraw a request whose own
	// connection was already closed, never one whose client is there.
	FD int
	// Unread: at the time of the call the server held bytes of this
	// connection past the request's head that the app has not consumed (a
	// pipelined request, or body bytes not yet read), or the client
	// pipelined requests on this connection before: a half-close then
	// does not mean the client left (it waits for its answers).
	Unread bool
	// TLS: the socket carries TLS records, so bytes waiting in the
	// kernel cannot be told from a close_notify alert.
	TLS bool
	// Done, for an HTTP/2 stream, is closed when the client resets the
	// stream or the connection goes; nil for HTTP/1.
	Done <-chan struct{}

	ps *pollState // the connection's, for Pipelined
}

// Presence returns how to watch for the client leaving while the handler
// runs, or false when the connection has no socket to poll (a wrapper
// without one). Call it from the handler's goroutine; it reads nothing
// from the socket and costs no syscall.
func (w *ResponseWriter) Presence() (Presence, bool) {
	if w.st != nil {
		return Presence{FD: -1, Done: w.st.bk.Done()}, true
	}
	c := w.c
	if c == nil {
		return Presence{}, false
	}
	pipelined := c.body.eof && c.buffered() > 0
	c.bg.mu.Lock()
	if c.bg.has {
		pipelined = true
	}
	c.bg.mu.Unlock()
	if pipelined {
		// Sticky: the last request of a pipelined batch, sent before a
		// half-close, finds nothing unread, yet its client waits for
		// every answer.
		c.poll.pipelined.Store(true)
	}
	p := Presence{FD: -1, Unread: c.poll.pipelined.Load() || !c.body.eof || c.buffered() > 0, ps: &c.poll}
	if !c.poll.known { // once per connection, not per request
		c.poll.known, c.poll.fd = true, -1
		nc := c.rwc
	unwrap:
		for {
			switch t := nc.(type) {
			case *tls.Conn:
				nc, c.poll.tls = t.NetConn(), true
			case interface{ Raw() net.Conn }: // internal/proxy's PROXY protocol conn
				nc = t.Raw()
			case syscall.Conn:
				if raw, err := t.SyscallConn(); err == nil {
					raw.Control(func(fd uintptr) { c.poll.fd = int(fd) })
				}
				break unwrap
			default:
				break unwrap
			}
		}
	}
	p.FD, p.TLS = c.poll.fd, c.poll.tls
	return p, p.FD >= 0
}

// pollState is what Presence found out about a connection's socket, once.
type pollState struct {
	known     bool
	fd        int
	tls       bool
	pipelined atomic.Bool // the client pipelined (Presence, or a poller's Pipelined)
}

// Pipelined tells the connection that its client pipelined requests (a
// poller saw bytes waiting in the kernel past the request's head): its
// later requests are reported Unread, so the last of the batch is not
// taken for a client that left when the half-close comes. Safe from any
// goroutine while the request is in flight.
func (p Presence) Pipelined() {
	if p.ps != nil {
		p.ps.pipelined.Store(true)
	}
}
