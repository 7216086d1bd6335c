package http1

import (
	"bufio"
	"errors"
	"net"
	"time"
)

// Taking a connection over (WebSocket upgrades).
//
// After Hijack the connection belongs to the caller: the server forgets
// it at once — it is no longer counted by ActiveConns or InFlight (so
// MaxConcurrency and Shutdown do not wait for it), gets no response
// finishing, no keep-alive and no close from the server, and Close does
// not close it. Servers that must tell hijacked connections about a
// shutdown register a function with RegisterOnShutdown, as with net/http.

// ErrHijacked is returned by ResponseWriter methods after Hijack, and by
// Hijack itself when the connection cannot be taken over: a response has
// started, or the request body has not been read to its end.
var ErrHijacked = errors.New("http1: connection hijacked or not hijackable")

// Hijack takes the connection over. The returned ReadWriter's Reader
// yields first any bytes the client sent after the request (read ahead by
// the server), then the connection's; its Writer writes to the
// connection and is empty. The caller must close the connection.
// Deadlines set by the server are cleared.
//
// Hijack must be called before anything is written and after the body was
// read to io.EOF (a request without a body, such as a WebSocket
// handshake, qualifies); otherwise it returns ErrHijacked and the
// ResponseWriter stays usable.
//
// On an HTTP/2 stream only an extended CONNECT (Request.Protocol, RFC
// 8441) can be hijacked: the conn reads and writes the stream's DATA, its
// first write (an HTTP/1.1 101 head) becomes the 200 HEADERS (tunnel.go),
// and the stream ends when the conn is closed.
func (w *ResponseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.st != nil {
		return w.st.hijack(w)
	}
	c := w.c
	if c == nil || c.hijacked || w.started || !c.body.eof {
		return nil, nil, ErrHijacked
	}
	c.stopBackgroundRead()
	// Bytes read ahead of the request: NotifyClose's byte, then what the
	// bufio.Reader holds. They are handed over in front of the socket.
	var pre []byte
	c.bg.mu.Lock()
	if c.bg.has {
		pre = append(pre, c.bg.b[0])
		c.bg.has = false
	}
	c.bg.mu.Unlock()
	if n := c.reader().Buffered(); n > 0 {
		p, _ := c.br.Peek(n)
		pre = append(pre, p...)
	}
	var conn net.Conn = c.rwc
	if len(pre) > 0 {
		conn = &prefixConn{Conn: c.rwc, pre: pre}
	}
	c.rwc.SetDeadline(time.Time{})

	// The bufio pair moves to the caller (reset onto the connection, so
	// that nothing of the server is reachable from it).
	br, bw := c.br, c.writer()
	br.Reset(conn)
	bw.Reset(conn)
	c.br, c.bw = nil, nil
	c.hijacked = true
	w.started, w.err, w.bw = true, ErrHijacked, nil

	s := c.srv
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.nconns.Add(-1)
	s.inflight.Add(-1)
	return conn, bufio.NewReadWriter(br, bw), nil
}

// prefixConn returns pre before reading the connection.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		if len(p.pre) == 0 {
			p.pre = nil
		}
		return n, nil
	}
	return p.Conn.Read(b)
}

// RegisterOnShutdown registers f to be called, in its own goroutine, when
// Shutdown or Close starts: the way to tell hijacked connections (which
// the server no longer tracks) to close.
func (s *Server) RegisterOnShutdown(f func()) {
	s.mu.Lock()
	s.onShutdown = append(s.onShutdown, f)
	s.mu.Unlock()
}

// runOnShutdown starts the registered functions once.
func (s *Server) runOnShutdown() {
	s.mu.Lock()
	fs := s.onShutdown
	s.onShutdown = nil
	s.mu.Unlock()
	for _, f := range fs {
		go f()
	}
}

// Server returns the server this response belongs to (for
// RegisterOnShutdown by handlers that hijack).
func (w *ResponseWriter) Server() *Server {
	if w.st != nil {
		return w.st.s
	}
	return w.c.srv
}
