package http1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Handler answers one request. The Request and ResponseWriter are reused
// by the connection and are valid only until ServeHTTP1 returns.
type Handler interface {
	ServeHTTP1(w *ResponseWriter, r *Request)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(w *ResponseWriter, r *Request)

// ServeHTTP1 calls f(w, r).
func (f HandlerFunc) ServeHTTP1(w *ResponseWriter, r *Request) { f(w, r) }

// Defaults for the zero fields of Server.
const (
	DefaultMaxRequestLineBytes = 8190
	DefaultMaxHeaderFields     = 100
	DefaultMaxHeaderFieldBytes = 8190
	DefaultMaxHeaderBytes      = 64 << 10
	DefaultHeaderTimeout       = 10 * time.Second
	DefaultKeepAliveTimeout    = 5 * time.Second
	DefaultBodyTimeout         = 30 * time.Second
	DefaultMinBodyRate         = 240 // bytes per second
	// BodyRateGrace is how long a body may arrive slower than MinBodyRate
	// before the rate counts.
	BodyRateGrace       = 5 * time.Second
	DefaultWriteTimeout = 30 * time.Second
)

const (
	// maxDrainBytes bounds how much of a body the handler left unread is
	// read and discarded to keep the connection; beyond it we close.
	maxDrainBytes = 256 << 10
	// maxLeadingCRLF bounds the empty lines skipped before a request-line
	// (RFC 9112 §2.2: "SHOULD ignore at least one empty line").
	maxLeadingCRLF = 8
	// lingerTimeout bounds the wait for the client's FIN after we half-close,
	// so that unread pipelined bytes do not turn our close into a RST that
	// destroys the response in flight (cf. net/http closeWriteAndWait).
	lingerTimeout = 500 * time.Millisecond
	// newConnGrace is how long Shutdown leaves a connection that has not
	// begun its first request: one accepted just before the listener
	// closed usually has its request on the wire already (a rolling
	// restart of workers sharing one socket would otherwise reset it).
	newConnGrace = 500 * time.Millisecond
	bufSize      = 4 << 10
)

// Server serves HTTP/1.0 and HTTP/1.1 (RFC 9112) strictly: framing in
// doubt is answered with exactly one 4xx/5xx response and the connection
// is closed. The zero value is a valid configuration apart from Handler.
// Fields must not be changed after Serve is called.
type Server struct {
	Handler Handler // Required.

	// MaxRequestLineBytes limits the request-line, CRLF excluded; longer
	// lines get 414 (RFC 9110 §15.5.15). Default: DefaultMaxRequestLineBytes
	// (8190) when zero or negative.
	MaxRequestLineBytes int
	// MaxHeaderFields limits the number of header field lines; more get 431
	// (RFC 6585 §5). Default: DefaultMaxHeaderFields (100).
	MaxHeaderFields int
	// MaxHeaderFieldBytes limits one field line (name, colon, value), CRLF
	// excluded; longer gets 431. Default: DefaultMaxHeaderFieldBytes (8190).
	MaxHeaderFieldBytes int
	// MaxHeaderBytes limits the whole header section (field lines with
	// their CRLFs, request-line excluded); more gets 431. Default:
	// DefaultMaxHeaderBytes (64 KiB). It is raised to MaxHeaderFieldBytes+2
	// if smaller, so that a configured field limit is honoured exactly
	// (case B23).
	MaxHeaderBytes int
	// MaxBodyBytes limits the request body in bytes: a larger
	// Content-Length gets 413 before any body byte is read; a chunked body
	// growing past it makes Body.Read return ErrBodyTooLarge (413 if no
	// response has started) and the connection closes. Zero or negative:
	// unlimited.
	MaxBodyBytes int64
	// MaxConcurrency limits the requests being handled at once across all
	// connections (the InFlight count: from a parsed head until the
	// response is finished). A request arriving above it gets 503 with
	// "Retry-After: 1" (RFC 9110 §15.6.4) without reaching the handler.
	// Idle connections are not counted. Zero or negative: unlimited.
	MaxConcurrency int
	// HeaderTimeout bounds the time from accept (for the first request) or
	// from the first byte of a later request until the end of its header
	// section. On expiry a 408 is sent if some bytes of the request arrived
	// (RFC 9110 §15.5.9) and the connection is closed; a connection that
	// sent nothing is closed silently. Default: DefaultHeaderTimeout (10s).
	HeaderTimeout time.Duration
	// KeepAliveTimeout bounds the idle time between requests (never a
	// request in progress); on expiry the connection is closed silently.
	// Default: DefaultKeepAliveTimeout (5s).
	KeepAliveTimeout time.Duration
	// DisableKeepAlive closes the connection after each response, which
	// says "Connection: close" (RFC 9112 §9.6), as gunicorn does under
	// --keep-alive 0.
	DisableKeepAlive bool
	// BodyTimeout bounds the gap between successive socket reads of the
	// request body (inactivity, not total time); on expiry Body.Read
	// returns ErrBodyTimeout. Default: DefaultBodyTimeout (30s).
	BodyTimeout time.Duration
	// MinBodyRate is the slowest a request body may arrive, in bytes per
	// second averaged from the start of the body, after BodyRateGrace;
	// slower, Body.Read returns ErrBodyTimeout (408). Kestrel's
	// MinRequestBodyDataRate, for clients that trickle a byte just often
	// enough to defeat BodyTimeout. Default: DefaultMinBodyRate (240);
	// negative disables.
	MinBodyRate int
	// WriteTimeout bounds the time one socket write of at most 64 KiB
	// (writeStep; 4 MiB for SendFile) may block: a client that stops
	// reading. On expiry writes return ErrClientGone and the connection
	// closes. Default: DefaultWriteTimeout (30s).
	WriteTimeout time.Duration
	// ServerHeader is the value of the Server response header; "" omits it.
	// A response whose own header section has a Server field keeps that one.
	ServerHeader string
	// NoDateHeader omits the Date response header (RFC 9110 §6.6.1 allows
	// it; uvicorn's --no-date-header).
	NoDateHeader bool
	// ExtraHeader is added to every response: "Name: value\r\n" lines,
	// validated by the caller (uvicorn's --header).
	ExtraHeader []byte
	// HTTP2 serves the connections that speak HTTP/2 (RFC 9113): a TLS
	// connection that negotiated "h2" by ALPN (RFC 7301), or any
	// connection that starts with the client preface (prior knowledge,
	// RFC 9113 §3.3). Its streams reach Handler like HTTP/1 requests
	// (stream.go). Nil: HTTP/1 only, and the preface gets 505.
	HTTP2 HTTP2Server
	// HTTP2Only serves every connection as HTTP/2 (--http 2): one that
	// does not start with the client preface gets 505 and a line saying
	// so, then the close (a connection error, RFC 9113 §3.4), as does a
	// TLS connection that did not negotiate "h2" by ALPN (RFC 9113 §3.2).
	// It needs HTTP2.
	HTTP2Only bool
	// TLSServerCert returns the PEM of the server's certificate (leaf
	// only) for a connection's SNI server name ("" for none), given to
	// the requests of TLS connections as Request.Certs.ServerCert (the
	// ASGI tls extension's server_cert); tlsconf.Certs.ServerCert. It is
	// called once per connection, at its first request or stream that
	// asks (ConnCerts). Nil: unknown (--acme-domain).
	TLSServerCert func(serverName string) []byte
	// Logger receives handler failures (500s, panics) at error level and
	// protocol rejections and client disconnects at debug level. Nil
	// discards.
	Logger *slog.Logger
	// KeepAliveDrain is how long Shutdown leaves idle kept-alive
	// connections open (a lame-duck window): a request that arrives on
	// one meanwhile is served, and its response carries "Connection:
	// close" (RFC 9112 §9.6). HTTP/1.1 has no way to tell an idle
	// connection that it is going away: closing it at once loses the
	// request a client sends on it at that instant (a POST is not
	// retried). After the window, idle connections are closed. It is
	// bounded by Shutdown's context deadline. Zero or negative: idle
	// connections are closed at once (new ones still get newConnGrace).
	KeepAliveDrain time.Duration
	// ProxyHeaderHint is what to do when a connection starts with a PROXY
	// protocol header, which this server does not read (proxyhint.go):
	// such a connection is answered 400 "PROXY protocol header, ..."
	// instead of the parse error the header causes (over TLS: instead of
	// a failed handshake) and logged at warning level with the hint and
	// the peer, at most once per 10 s with the count since. Empty: it is
	// refused as any malformed head, at debug level.
	ProxyHeaderHint string

	mu        sync.Mutex
	listeners map[net.Listener]struct{} // guarded by mu
	conns     map[*conn]struct{}        // guarded by mu
	closing   atomic.Bool               // set by Shutdown and Close
	draining  atomic.Bool               // set by Drain, Shutdown and Close: every response says Connection: close
	forced    atomic.Bool               // set by Close: refuse connections accepted from now on
	serving   atomic.Int64              // Serve loops running; Shutdown waits for them (newConn)
	nconns    atomic.Int64
	nfresh    atomic.Int64 // connections that have not begun a request (conn.fresh)
	inflight  atomic.Int64
	overLimit atomic.Int64 // requests answered 503 above MaxConcurrency
	// plainTLS: plain-HTTP requests on the TLS port, and when the last
	// was logged (unix ns): one record per plainTLSEvery, so that a
	// scanner cannot flood the log (serve).
	plainTLS, plainTLSLogged atomic.Int64
	// proxyHint, proxyHintLogged: the same for PROXY protocol headers
	// refused (logProxyHeader).
	proxyHint, proxyHintLogged atomic.Int64

	onShutdown   []func() // guarded by mu; RegisterOnShutdown (hijack.go)
	h2registered bool     // guarded by mu: HTTP2.Shutdown is in onShutdown
}

func (s *Server) shuttingDown() bool { return s.closing.Load() }

// isDraining reports whether responses must announce the close: the
// server drains, or keeps no connection alive.
func (s *Server) isDraining() bool { return s.DisableKeepAlive || s.draining.Load() }

// Drain begins a drain without stopping: from now on every response
// whose head has not been written yet carries "Connection: close" (RFC
// 9112 §9.6), so that a client does not send another request on a
// connection that is about to close, and every HTTP/2 connection is sent
// GOAWAY with the last stream id it has seen (RFC 9113 §6.8): streams up
// to it are still served, the client opens later ones elsewhere. The
// listeners keep accepting (a connection accepted now is served one
// request and closed) until Shutdown, which a draining server is
// expected to be given soon: a worker calls it when it asks to be
// replaced, before the replacement is ready. Idempotent.
func (s *Server) Drain() {
	if s.draining.Swap(true) {
		return
	}
	if s.HTTP2 != nil {
		// Each HTTP/2 connection goes away once (internal/h2 goAway);
		// Shutdown sends GOAWAY to the ones accepted since.
		s.HTTP2.Shutdown()
	}
}

// ActiveConns returns the number of open connections.
func (s *Server) ActiveConns() int { return int(s.nconns.Load()) }

// FreshConns returns the number of open connections that have not begun
// a request yet (accepted, no byte read): with InFlight, the requests a
// server has taken on (the worker's accept gate spreads bursts with it).
func (s *Server) FreshConns() int { return int(s.nfresh.Load()) }

// InFlight returns the number of requests being handled (see MaxConcurrency).
func (s *Server) InFlight() int { return int(s.inflight.Load()) }

// OverLimit returns the number of requests answered 503 because
// MaxConcurrency requests were being handled (HTTP/1.1 and HTTP/2). They
// never reach the Handler.
func (s *Server) OverLimit() int64 { return s.overLimit.Load() }

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return discardLogger
}

var discardLogger = slog.New(slog.DiscardHandler)

func orInt(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

func orDur(v, d time.Duration) time.Duration {
	if v <= 0 {
		return d
	}
	return v
}

// limits are the effective values of the Server fields, fixed per conn.
type limits struct {
	reqLine, fields, fieldBytes, headerBytes int
	header, keepAlive, body, write           time.Duration
	bodyRate                                 int // bytes/s; 0 = off
}

func (s *Server) limits() limits {
	rate := s.MinBodyRate
	if rate == 0 {
		rate = DefaultMinBodyRate
	}
	l := limits{
		reqLine:     orInt(s.MaxRequestLineBytes, DefaultMaxRequestLineBytes),
		fields:      orInt(s.MaxHeaderFields, DefaultMaxHeaderFields),
		fieldBytes:  orInt(s.MaxHeaderFieldBytes, DefaultMaxHeaderFieldBytes),
		headerBytes: orInt(s.MaxHeaderBytes, DefaultMaxHeaderBytes),
		header:      orDur(s.HeaderTimeout, DefaultHeaderTimeout),
		keepAlive:   orDur(s.KeepAliveTimeout, DefaultKeepAliveTimeout),
		body:        orDur(s.BodyTimeout, DefaultBodyTimeout),
		write:       orDur(s.WriteTimeout, DefaultWriteTimeout),
		bodyRate:    max(rate, 0),
	}
	l.headerBytes = max(l.headerBytes, l.fieldBytes+2)
	return l
}

// Serve accepts connections on ln and serves each in its own goroutine.
// It always returns a non-nil error: ErrServerClosed after Shutdown or
// Close, otherwise the listener's error. Transient accept errors (such as
// EMFILE) are retried with a back-off of up to 1s.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shuttingDown() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
		s.conns = make(map[*conn]struct{})
	}
	s.listeners[ln] = struct{}{}
	s.serving.Add(1)
	if s.HTTP2 != nil && !s.h2registered {
		s.h2registered = true
		s.onShutdown = append(s.onShutdown, s.HTTP2.Shutdown)
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
		s.serving.Add(-1)
	}()

	var backoff time.Duration
	lim := s.limits()
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.shuttingDown() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logger().Warn("http1: accept error; retrying", "err", err, "delay", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		c := s.newConn(rwc, lim)
		if c == nil {
			continue
		}
		go c.serve()
	}
}

// Shutdown stops accepting and drains (see Drain): a request in
// progress finishes, and its response carries "Connection: close" if its
// head has not been written yet (RFC 9112 §9.6); HTTP/2 connections get
// GOAWAY (RFC 9113 §6.8) and close once their streams are done. Idle
// connections stay open for KeepAliveDrain, bounded by ctx's deadline (a
// request arriving on one meanwhile is served, with "Connection: close"),
// then they are closed (new ones that have sent nothing get at least
// newConnGrace from their accept). It returns nil when all connections
// are gone, or ctx.Err() after force-closing them when ctx is done first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.closing.Store(true)
	s.closeListeners()
	s.runOnShutdown()
	lameDuck := time.Now().Add(max(s.KeepAliveDrain, 0))
	if d, ok := ctx.Deadline(); ok && d.Before(lameDuck) {
		lameDuck = d
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if !time.Now().Before(lameDuck) {
			s.closeIdle()
		}
		if s.nconns.Load() == 0 && s.serving.Load() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			s.Close()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Close closes the listeners and every connection at once. Handlers still
// running see write errors (ErrClientGone). Serve returns ErrServerClosed.
func (s *Server) Close() error {
	s.forced.Store(true)
	s.draining.Store(true)
	s.closing.Store(true)
	s.closeListeners()
	s.runOnShutdown()
	s.mu.Lock()
	for c := range s.conns {
		c.rwc.Close()
	}
	s.mu.Unlock()
	return nil
}

func (s *Server) closeListeners() {
	s.mu.Lock()
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	for c := range s.conns {
		if c.fresh.Load() && time.Since(c.since) < newConnGrace {
			continue // its first request may be on the wire: newConnGrace
		}
		if c.state.CompareAndSwap(stateIdle, stateClosed) {
			c.rwc.Close()
		}
	}
	s.mu.Unlock()
}

// Connection states (conn.state).
const (
	stateIdle   int32 = iota // waiting for the first byte of a request
	stateActive              // reading, handling or answering a request
	stateClosed              // closed by Shutdown while idle
)

// conn is one client connection. Everything but state is owned by the
// connection's goroutine.
type conn struct {
	srv   *Server
	lim   limits
	rwc   net.Conn
	cr    connReader
	cw    connWriter
	br    *bufio.Reader
	bw    *bufio.Writer
	state atomic.Int32 // also written by Shutdown (CAS idle → closed)
	fresh atomic.Bool  // no request begun yet (see newConnGrace)
	since time.Time    // accept time; set before the conn is published

	head    []byte // the current request head; Request slices point here
	req     Request
	addrs   AddrText // req.Addrs
	data    ConnData // req.Conn
	body    Body
	w       ResponseWriter
	scratch []byte    // for draining chunked bodies; allocated on first use
	bg      bgRead    // NotifyClose's background read (watch.go)
	poll    pollState // Presence's socket, found once (watch.go)

	hijacked bool                 // the handler took the connection over (hijack.go)
	scheme   string               // "https" on TLS, else ""; copied to each Request
	tlsState *tls.ConnectionState // after the handshake; nil on a plain connection; copied to each Request
	certs    *ConnCerts           // of tlsState, encoded on first use; copied to each Request
}

var (
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)

func (s *Server) newConn(rwc net.Conn, lim limits) *conn {
	c := &conn{srv: s, lim: lim, rwc: rwc, since: time.Now()}
	c.fresh.Store(true)
	c.cr.c, c.cw.c = c, c
	switch t := rwc.(type) { // concrete sockets only: a wrapper may add to Write
	case *net.TCPConn:
		c.cw.raw, _ = t.SyscallConn()
	case *net.UnixConn:
		c.cw.raw, _ = t.SyscallConn()
	}
	if c.cw.raw != nil {
		c.cw.fn = c.cw.writeFD
	}
	c.br = readerPool.Get().(*bufio.Reader)
	c.br.Reset(&c.cr)
	c.body.c = c
	c.req.Body = &c.body
	c.req.addrs = &c.addrs
	c.req.Conn = &c.data
	// The addresses are taken in serve, on the connection's goroutine: a
	// PROXY protocol connection (internal/proxy) reads its header to
	// answer RemoteAddr, which must not hold up the accept loop.
	// A connection accepted while Shutdown runs (Accept returned just
	// before the listener closed) is served like any other: its request
	// may be on the wire (newConnGrace); Shutdown waits for the Serve
	// loops, so it is counted before Shutdown can return. Only Close
	// refuses it.
	s.mu.Lock()
	if s.forced.Load() {
		s.mu.Unlock()
		rwc.Close()
		c.br.Reset(nil)
		readerPool.Put(c.br)
		return nil
	}
	s.conns[c] = struct{}{}
	s.nconns.Add(1)
	s.nfresh.Add(1)
	s.mu.Unlock()
	return c
}

// unfresh marks the connection as having begun a request (or closed),
// once.
func (c *conn) unfresh() {
	if c.fresh.Swap(false) {
		c.srv.nfresh.Add(-1)
	}
}

func (c *conn) release() {
	if c.hijacked {
		return // Hijack already untracked it; the connection is not ours
	}
	c.rwc.Close()
	s := c.srv
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.nconns.Add(-1)
	c.unfresh()
	c.putReader()
	c.putWriter()
}

// reader returns the connection's bufio.Reader, from the pool if the
// connection gave it back while its handler ran (serveRequest).
func (c *conn) reader() *bufio.Reader {
	if c.br == nil {
		c.br = readerPool.Get().(*bufio.Reader)
		c.br.Reset(&c.cr)
	}
	return c.br
}

// buffered returns the bytes read ahead of the request being served: 0
// when the reader was given back (it is only when it held none).
func (c *conn) buffered() int {
	if c.br == nil {
		return 0
	}
	return c.br.Buffered()
}

// putReader returns the reader to the pool; the caller knows it holds no
// bytes that are still needed.
func (c *conn) putReader() {
	if c.br != nil {
		c.br.Reset(nil)
		readerPool.Put(c.br)
		c.br = nil
	}
}

// writer returns the connection's bufio.Writer, taken from the pool when
// a response starts: a connection holds one only while it writes, not
// while it is idle or its handler waits (an ASGI long poll held 4 KiB
// per request for nothing; issue 29).
func (c *conn) writer() *bufio.Writer {
	if c.bw == nil {
		c.bw = writerPool.Get().(*bufio.Writer)
		c.bw.Reset(&c.cw)
	}
	return c.bw
}

// putWriter returns the writer to the pool once a response is flushed.
func (c *conn) putWriter() {
	if c.bw != nil {
		c.bw.Reset(nil)
		writerPool.Put(c.bw)
		c.bw = nil
	}
}

// connReader is the bufio.Reader's source. While a body is read it arms
// the inactivity deadline (BodyTimeout) before each socket read; otherwise
// the absolute deadline set by serve applies.
type connReader struct {
	c        *conn
	bodyMode bool
	// For the minimum data rate (Server.MinBodyRate): the bytes of this
	// request's body read so far and the time spent waiting for them.
	// Only waiting counts, so an app that reads its body late is not
	// taken for a slow client.
	bodyBytes int64
	bodyWait  time.Duration

	// headArm: the next socket read (the head did not come whole with
	// its first bytes) must first arm the head's deadline, headTimeout
	// from then (the first bytes came microseconds before). Lazily: most
	// heads arrive in one segment and need no timer.
	headArm     bool
	headTimeout time.Duration
}

// armHead makes the head's timeout apply to the next socket read, if one
// is needed before the head is complete.
func (r *connReader) armHead(d time.Duration) {
	r.headArm, r.headTimeout = true, d
}

// startBody arms the body read limits for a new request.
func (r *connReader) startBody() {
	r.bodyMode = true
	r.bodyBytes = 0
	r.bodyWait = 0
}

func (r *connReader) Read(p []byte) (int, error) {
	if n, err, ok := r.c.readAhead(p); ok {
		return n, err
	}
	if r.bodyMode {
		now := time.Now()
		deadline := now.Add(r.c.lim.body)
		if rate := r.c.lim.bodyRate; rate > 0 {
			// The next byte must arrive before the time spent waiting
			// for this body passes what rate bytes/s allows (after a
			// grace): a client that trickles a byte every few seconds
			// never trips the inactivity timeout (case B40); this does.
			allowed := max(BodyRateGrace, time.Duration(float64(r.bodyBytes+1)/float64(rate)*float64(time.Second)))
			if due := now.Add(allowed - r.bodyWait); due.Before(deadline) {
				deadline = due
			}
		}
		r.c.rwc.SetReadDeadline(deadline)
		n, err := r.c.rwc.Read(p)
		r.bodyBytes += int64(n)
		r.bodyWait += time.Since(now)
		return n, err
	}
	if r.headArm {
		r.headArm = false
		r.c.rwc.SetReadDeadline(time.Now().Add(r.headTimeout))
	}
	return r.c.rwc.Read(p)
}

// connWriter is the bufio.Writer's sink: it bounds each socket write of
// at most writeStep bytes by WriteTimeout and wraps errors in
// ErrClientGone.
//
// On a TCP or Unix socket (raw set) it writes with write(2) through the
// runtime poller and arms the write deadline only when the socket buffer
// is full, before waiting: most responses fit the buffer and cost no timer
// at all (a deadline set per write cost about 1 % of an ASGI hello
// request's CPU). A deadline it armed is cleared when the write returns,
// so none is left to expire under a later write. Other connections (TLS)
// arm the deadline before each step.
type connWriter struct {
	c   *conn
	raw syscall.RawConn

	// writeRaw's state, for writeFD: set per write; kept here so that a
	// write allocates nothing (fn is bound once per connection).
	fn      func(fd uintptr) bool
	p       []byte
	n       int
	armedAt int
	armed   bool
	err     error
}

// writeStep bounds the bytes one write deadline covers. A large write (an
// ASGI body sent in one message; bufio.Writer passes writes larger than
// its buffer straight through) goes out in steps, each given
// WriteTimeout, so the timeout bounds a stalled reader, not the time a
// slow but steady one takes for the whole body. It matches the WSGI
// bridge's flush size (64 KiB); SendFile has its own, larger step.
const writeStep = 64 << 10

func (w *connWriter) Write(p []byte) (int, error) {
	if w.raw != nil {
		return w.writeRaw(p)
	}
	var n int
	for {
		step := p[n:]
		if len(step) > writeStep {
			step = step[:writeStep]
		}
		w.c.rwc.SetWriteDeadline(time.Now().Add(w.c.lim.write))
		m, err := w.c.rwc.Write(step)
		n += m
		if err != nil {
			return n, &clientGoneError{err}
		}
		if n == len(p) {
			return n, nil
		}
	}
}

// writeRaw is Write on a socket: see connWriter. Each writeStep bytes
// written since the deadline was armed earn a fresh WriteTimeout at the
// next wait, so the timeout bounds a stalled reader, as in Write's steps.
func (w *connWriter) writeRaw(p []byte) (int, error) {
	w.p, w.n, w.armed, w.err = p, 0, false, nil
	err := w.raw.Write(w.fn)
	if w.armed {
		w.c.rwc.SetWriteDeadline(time.Time{})
	}
	n := w.n
	if err == nil {
		err = w.err
	}
	w.p, w.err = nil, nil
	if err != nil {
		return n, &clientGoneError{err}
	}
	return n, nil
}

// writeFD is writeRaw's step under the poller: it writes until done, an
// error, or a full socket buffer (false: the poller waits, then calls
// again).
func (w *connWriter) writeFD(fd uintptr) bool {
	for w.n < len(w.p) {
		m, e := syscall.Write(int(fd), w.p[w.n:])
		if m > 0 {
			w.n += m
		}
		switch {
		case e == nil && m <= 0:
			w.err = io.ErrShortWrite
			return true
		case e == nil:
		case e == syscall.EINTR:
		case e == syscall.EAGAIN:
			if !w.armed || w.n-w.armedAt >= writeStep {
				w.c.rwc.SetWriteDeadline(time.Now().Add(w.c.lim.write))
				w.armed, w.armedAt = true, w.n
			}
			return false
		default:
			w.err = os.NewSyscallError("write", e)
			return true
		}
	}
	return true
}

func (w *connWriter) readFrom(r io.Reader) (int64, error) {
	w.c.rwc.SetWriteDeadline(time.Now().Add(w.c.lim.write))
	var n int64
	var err error
	if rf, ok := w.c.rwc.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r) // sendfile(2) for *net.TCPConn
	} else {
		n, err = io.Copy(w.c.rwc, r)
	}
	w.c.rwc.SetWriteDeadline(time.Time{}) // none left to expire under writeRaw
	if err != nil {
		err = &clientGoneError{err}
	}
	return n, err
}

// plainTLSEvery is the least time between two records of plain-HTTP
// requests on the TLS port.
const plainTLSEvery = 10 * time.Second

// logPlainTLS logs a plain-HTTP request on the TLS port (answered 400):
// the first at once, then at most one record per plainTLSEvery, which
// counts those answered since the last record (count; 1 when alone).
func (s *Server) logPlainTLS(remote net.Addr) {
	n := s.plainTLS.Add(1)
	now := time.Now().UnixNano()
	last := s.plainTLSLogged.Load()
	if last != 0 && now-last < int64(plainTLSEvery) || !s.plainTLSLogged.CompareAndSwap(last, now) {
		return
	}
	s.plainTLS.Add(-n)
	s.logger().Info("http1: plain HTTP request on the TLS port: answered 400", "remote", remote, "count", n)
}

// serve runs the connection: see doc.go, "Life of a request".
func (c *conn) serve() {
	defer c.release()
	c.req.RemoteAddr, c.req.LocalAddr = c.rwc.RemoteAddr(), c.rwc.LocalAddr()
	lim := c.lim
	deadline := time.Now().Add(lim.header) // from accept
	if tc, ok := c.rwc.(*tls.Conn); ok {
		// The handshake shares the header timeout (from accept).
		tc.SetDeadline(deadline)
		if err := tc.HandshakeContext(context.Background()); err != nil {
			var re tls.RecordHeaderError
			if errors.As(err, &re) && re.Conn != nil && c.srv.ProxyHeaderHint != "" && isProxyRecord(re.RecordHeader) {
				c.srv.logProxyHeader(c.req.RemoteAddr)
				io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\n"+errProxyHeader.msg+"\n")
				return
			}
			if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
				// Plain HTTP on the TLS port: say so, as net/http does;
				// logged once per plainTLSEvery with how many came since.
				c.srv.logPlainTLS(c.req.RemoteAddr)
				io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
				return
			}
			c.srv.logger().Debug("http1: TLS handshake failed", "remote", c.req.RemoteAddr, "err", err)
			return
		}
		tc.SetWriteDeadline(time.Time{})
		c.scheme = "https"
		cs := tc.ConnectionState()
		c.tlsState = &cs
		c.certs = newConnCerts(c.tlsState, c.srv.TLSServerCert)
		proto := cs.NegotiatedProtocol
		if proto == "h2" && c.srv.HTTP2 != nil {
			c.serveHTTP2()
			return
		}
		if c.srv.HTTP2Only {
			// crypto/tls lets through a client that offered no ALPN
			// (RFC 7301 §3.2 allows it) or "http/1.1" without "h2" (as
			// if it offered none; another list fails the handshake,
			// no_application_protocol). Over TLS, HTTP/2 is only spoken
			// after "h2" was negotiated (RFC 9113 §3.2), so such a
			// client gets no HTTP/2 frames: as on a plain connection,
			// one HTTP/1.1 505 naming --http 2, then the close.
			c.srv.logger().Debug("http1: TLS client did not negotiate h2 under --http 2", "remote", c.req.RemoteAddr, "alpn", proto)
			c.reject(errHTTP2Only)
			return
		}
	}
	for first := true; ; first = false {
		// (1) Wait for the first byte of the next request.
		if c.br.Buffered() == 0 {
			if !first {
				// Shutting down, this connection's last response did
				// not announce the close (its head left before the
				// drain began): it waits like any idle connection, and
				// Shutdown closes it after KeepAliveDrain.
				c.state.Store(stateIdle)
				// Yield before reading: under load, by the time this
				// goroutine runs again the client has usually sent its
				// next request, and the read takes it at once instead
				// of failing with EAGAIN and parking in the poller
				// (reads per ASGI hello request at 256 connections
				// 1.91 -> 0.99, CPU per request -7 %). With nothing
				// else runnable it returns at once.
				runtime.Gosched()
				c.rwc.SetReadDeadline(time.Now().Add(lim.keepAlive))
			} else {
				c.rwc.SetReadDeadline(deadline)
			}
			if _, err := c.br.Peek(1); err != nil {
				return // idle timeout, EOF or closed by Shutdown: silently
			}
			if !c.state.CompareAndSwap(stateIdle, stateActive) {
				return // Shutdown closed us
			}
			c.unfresh()
			if !first {
				c.cr.armHead(lim.header)
			}
		} else {
			c.state.Store(stateActive)
			if !first {
				c.cr.armHead(lim.header)
			}
		}

		if first && c.srv.HTTP2 != nil {
			if c.startsWithPreface() {
				c.serveHTTP2()
				return
			}
			if c.srv.HTTP2Only {
				// Not the preface: the peer does not speak HTTP/2, a
				// connection error for which "a GOAWAY frame MAY be
				// omitted" (RFC 9113 §3.4). An HTTP/1 client gets one
				// HTTP/1.1 answer saying why instead of frames it cannot
				// read, then the close.
				c.reject(errHTTP2Only)
				return
			}
		}

		// (2) Read and parse the head. Until parsed, an error answer
		// must not take the previous request's method or version.
		c.req.Method, c.req.ProtoMinor = nil, 1
		perr := c.readHead()
		c.cr.headArm = false
		if perr != nil {
			if perr == errConnGone {
				return
			}
			c.rejectHead(perr, first)
			return
		}
		if perr := parseHead(c.head, &c.req); perr != nil {
			c.rejectHead(perr, first)
			return
		}
		c.req.Scheme, c.req.TLS, c.req.Certs = c.scheme, c.tlsState, c.certs
		if !c.serveRequest() {
			if !c.hijacked {
				c.lingerClose()
			}
			return
		}
		if cap(c.head) > 16<<10 {
			c.head = nil // do not pin a large head buffer on an idle conn
		}
	}
}

// serveRequest runs steps (3)–(6) for a parsed request and reports
// whether the connection may read another one.
func (c *conn) serveRequest() bool {
	req, s := &c.req, c.srv
	max := s.MaxBodyBytes
	// (3) Body framing and limits.
	if max > 0 && req.ContentLength > max {
		c.reject(errBodyTooLarge413) // before reading the body
		return false
	}
	c.body.reset(c.br, req.ContentLength, req.Chunked, max, req.ExpectContinue)
	c.w.reset(c, req)

	n := s.inflight.Add(1)
	defer func() {
		if !c.hijacked { // Hijack took it off the count
			s.inflight.Add(-1)
		}
	}()
	c.cr.startBody()

	// (4) The handler. A request without body bytes left to read and
	// nothing pipelined behind it gives its read buffer back while the
	// handler runs: an ASGI request that awaits (a long poll) held 4 KiB
	// for nothing (issue 29). The body, at EOF, never reads it.
	if c.body.eof && c.br.Buffered() == 0 {
		c.body.br = nil
		c.putReader()
	}
	var panicked bool
	if s.MaxConcurrency > 0 && n > int64(s.MaxConcurrency) {
		s.overLimit.Add(1)
		c.w.WriteSimple(503, "text/plain; charset=utf-8", []byte("503 Service Unavailable\n"), retryAfter)
	} else {
		panicked = c.callHandler()
	}
	if c.hijacked {
		return false // the connection is the handler's now
	}
	c.stopBackgroundRead()
	c.reader()

	// (5) Finish the response.
	w := &c.w
	if !w.started {
		if perr := bodyErrStatus(c.body.err); perr != nil {
			s.logger().Debug("http1: request body failed", "remote", req.RemoteAddr, "err", c.body.err)
			if errors.Is(c.body.err, ErrClientGone) {
				return false
			}
			c.writeError(w, perr)
		} else {
			if !panicked {
				s.logger().Error("http1: handler returned without a response", "method", string(req.Method), "path", string(req.Path))
			}
			w.WriteSimple(500, "text/plain; charset=utf-8", []byte("500 Internal Server Error\n"), nil)
		}
		w.close = true
	}
	keep := w.finish() && !panicked
	c.cr.bodyMode = false
	// A response that did not say "Connection: close" keeps the
	// connection even when a drain began since its head left: closing
	// it now, unannounced, would lose the next request the client sends
	// on it (RFC 9112 §9.6). Shutdown closes it once idle, after
	// KeepAliveDrain.
	if !keep || c.body.err != nil {
		return false
	}
	// (6) Drain what the handler left of the body, within a bound.
	if !c.body.eof {
		if c.scratch == nil {
			c.scratch = make([]byte, bufSize)
		}
		c.cr.bodyMode = true
		ok := c.body.discard(maxDrainBytes, c.scratch)
		c.cr.bodyMode = false
		if !ok {
			return false
		}
	}
	return true
}

var retryAfter = []byte("Retry-After: 1\r\n")

func bodyErrStatus(err error) *protoError {
	switch {
	case err == nil:
		return nil
	case err == ErrBodyTooLarge:
		return errBodyTooLarge413
	case err == ErrBodyTimeout:
		return errBodyTimeout408
	}
	return errBodyFraming400
}

// callHandler runs the handler, recovering a panic (logged, 500 if no
// response started; the connection then closes).
func (c *conn) callHandler() (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			c.srv.logger().Error("http1: handler panic", "method", string(c.req.Method), "path", string(c.req.Path), "panic", v, "stack", string(debug.Stack()))
		}
	}()
	c.srv.Handler.ServeHTTP1(&c.w, &c.req)
	return false
}

// errConnGone reports that the client closed or reset the connection, or
// went silent, before a request head arrived: nothing to answer.
var errConnGone = &protoError{0, "connection gone"}

// readHead reads one request head into c.head, enforcing the size limits
// as it goes (the line being read is never buffered beyond its limit).
// Leading empty lines are skipped (RFC 9112 §2.2). A line that does not
// end in CRLF is refused at once, so a bare-LF client cannot make us wait.
func (c *conn) readHead() *protoError {
	lim := c.lim
	c.head = c.head[:0]
	for skipped := 0; ; skipped++ {
		perr := c.readLine(lim.reqLine, errLineTooLong)
		if perr != nil {
			return perr
		}
		if len(c.head) == 2 && skipped < maxLeadingCRLF {
			c.head = c.head[:0]
			continue
		}
		break
	}
	fieldStart := len(c.head)
	for n := 0; ; n++ {
		start := len(c.head)
		if perr := c.readLine(lim.fieldBytes, errFieldTooLong); perr != nil {
			return perr
		}
		if len(c.head)-start == 2 {
			return nil // the empty line
		}
		if n == lim.fields {
			return errTooManyFields
		}
		if len(c.head)-fieldStart > lim.headerBytes {
			return errHeaderTooLarge
		}
	}
}

// readLine appends one line (with its CRLF) to c.head. max bounds the
// line without its CRLF; tooLong is returned beyond it.
func (c *conn) readLine(max int, tooLong *protoError) *protoError {
	start := len(c.head)
	for {
		frag, err := c.br.ReadSlice('\n')
		if len(c.head)-start+len(frag) > max+2 {
			return tooLong
		}
		c.head = append(c.head, frag...)
		if err == nil {
			break
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if isTimeout(err) && len(c.head) > 0 || c.br.Buffered() > 0 {
			return errHeadTimeout // RFC 9110 §15.5.9: 408 for a partial request
		}
		if isTimeout(err) {
			return errConnGone
		}
		if len(c.head) > 0 {
			c.srv.logger().Debug("http1: client closed mid-head", "remote", c.req.RemoteAddr, "err", err)
		}
		return errConnGone
	}
	line := c.head[start:]
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return errBareLF
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// rejectHead rejects a request head that did not read or parse; on a
// connection's first, a PROXY protocol header gets errProxyHeader and a
// warning when ProxyHeaderHint is set (proxyhint.go).
func (c *conn) rejectHead(perr *protoError, first bool) {
	if first && c.srv.ProxyHeaderHint != "" && isProxyHeader(c.head) {
		c.srv.logProxyHeader(c.req.RemoteAddr)
		perr = errProxyHeader
	}
	c.reject(perr)
}

// reject answers a refused request with exactly one response and closes.
func (c *conn) reject(perr *protoError) {
	c.srv.logger().Debug("http1: request rejected", "remote", c.req.RemoteAddr, "status", perr.status, "reason", perr.msg)
	c.req.Close = true
	if c.req.Body == nil {
		c.req.Body = &c.body
	}
	c.body.expect = false
	c.w.reset(c, &c.req)
	c.writeError(&c.w, perr)
	c.w.finish()
	c.lingerClose()
}

func (c *conn) writeError(w *ResponseWriter, perr *protoError) {
	var extra []byte
	if perr.status == 503 {
		extra = retryAfter
	}
	// Method-independent: an error answer to HEAD still has no body.
	w.begin(perr.status)
	w.bw.WriteString(itoa3(perr.status))
	w.bw.WriteByte(' ')
	w.bw.WriteString(statusText(perr.status))
	w.finishHead("text/plain; charset=utf-8", extra, int64(len(perr.msg)+1), true)
	if !w.noBody {
		w.bw.WriteString(perr.msg) // fixed text, never an echo of the input
		w.bw.WriteByte('\n')
	}
	w.written = w.declared
}

func itoa3(n int) string {
	b := [3]byte{byte('0' + n/100), byte('0' + n/10%10), byte('0' + n%10)}
	return string(b[:])
}

// lingerClose half-closes and waits briefly for the client's FIN, reading
// and discarding, so that unread bytes in our receive queue do not make the
// kernel reset the connection and destroy the response we just sent.
func (c *conn) lingerClose() {
	if c.bw != nil {
		c.bw.Flush()
	}
	type closeWriter interface{ CloseWrite() error }
	cw, ok := c.rwc.(closeWriter)
	if !ok {
		return
	}
	if cw.CloseWrite() != nil {
		return
	}
	c.rwc.SetReadDeadline(time.Now().Add(lingerTimeout))
	var buf [512]byte
	for total := 0; total < maxDrainBytes; {
		n, err := c.rwc.Read(buf[:])
		total += n
		if err != nil {
			return
		}
	}
}

// clientPreface starts every HTTP/2 connection (RFC 9113 §3.4).
var clientPreface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// startsWithPreface reports whether the connection starts with the HTTP/2
// client preface (prior knowledge, RFC 9113 §3.3). It waits for more bytes
// (within the read deadline) only while those received are a prefix of
// the preface, so an HTTP/1 request shorter than the preface never waits.
func (c *conn) startsWithPreface() bool {
	for {
		p, _ := c.br.Peek(c.br.Buffered())
		m := min(len(p), len(clientPreface))
		if !bytes.Equal(p[:m], clientPreface[:m]) {
			return false
		}
		if m == len(clientPreface) {
			return true
		}
		if _, err := c.br.Peek(len(p) + 1); err != nil {
			return false // the HTTP/1 parser answers what is there
		}
	}
}

// serveHTTP2 hands the connection, with the bytes already read, to the
// HTTP/2 server until it closes. The connection stays counted (and
// active, so closeIdle leaves it alone): Shutdown tells it to go away
// through RegisterOnShutdown (Serve registers HTTP2.Shutdown) and waits.
func (c *conn) serveHTTP2() {
	if c.srv.shuttingDown() {
		return
	}
	c.unfresh()
	c.state.Store(stateActive)
	c.rwc.SetDeadline(time.Time{})
	var nc net.Conn = c.rwc
	if n := c.br.Buffered(); n > 0 {
		p, _ := c.br.Peek(n)
		nc = &prefixConn{Conn: c.rwc, pre: append([]byte(nil), p...)}
	}
	h := &StreamHandler{s: c.srv, lim: c.lim, remote: c.req.RemoteAddr, local: c.req.LocalAddr, scheme: c.scheme, tls: c.tlsState, certs: c.certs, proto: 2, conn: &c.data}
	c.srv.HTTP2.ServeConn(nc, h)
}

// looksLikeHTTP reports whether the first five bytes a client sent on the
// TLS port (crypto/tls's RecordHeaderError.RecordHeader) start an HTTP/1
// request line, as net/http's tlsRecordHeaderLooksLikeHTTP.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}
