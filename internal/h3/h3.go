// Package h3 serves HTTP/3 (RFC 9114) over QUIC (RFC 9000) for
// internal/http1 with quic-go and its http3 package: QUIC, TLS 1.3 in
// QUIC (RFC 9001), QPACK and HTTP/3 framing are quic-go's; each request
// stream becomes an http1.Stream (stream.go) served by the
// http1.StreamHandler of its connection, so the same Handler (WSGI, ASGI,
// static files, proxy headers) and the same limits serve HTTP/1.1, HTTP/2
// and HTTP/3.
//
// # Life of a connection
//
//  1. Serve wraps the UDP socket in a quic.Transport. A client's first
//     Initial packet starts a handshake (Transport.ConnContext counts it).
//     While more than Config.RetryAbove handshakes are in progress, a new
//     one must first prove its address with a Retry (RFC 9000 §8.1.2),
//     so a flood of spoofed Initial packets costs one stateless packet
//     each. A handshake that does not finish within HandshakeTimeout, or
//     fails, counts as a handshake failure.
//  2. 0-RTT is refused (quic.Config.Allow0RTT false: early data can be
//     replayed, RFC 9001 §9.2); 0-RTT packets that arrive anyway are
//     dropped and counted (Stats.ZeroRTTRefused).
//  3. The connection is accepted once its handshake is complete, counted
//     (Stats.Conns), and served by http3.Server: every request stream
//     calls serveHTTP, which hands it to http1.StreamHandler.ServeStream.
//     At most MaxConcurrentStreams request streams are open per
//     connection (quic.Config.MaxIncomingStreams).
//  4. Shutdown closes the listener (handshakes in flight are refused),
//     sends GOAWAY (RFC 9114 §5.2) on every connection and waits for
//     their streams to finish, until its context ends; then it closes
//     what is left. A connection without a request in progress is
//     closed DrainGrace after the GOAWAY, once its last response is
//     acknowledged (RFC 9114 §5.2 lets the server close once the
//     requests below the GOAWAY's id are done; streams opened meanwhile
//     are rejected with H3_REQUEST_REJECTED, which a client retries
//     elsewhere).
package h3

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"

	"turnstile/internal/http1"
)

// Config holds the HTTP/3 settings. Zero fields take the defaults given
// in each comment.
type Config struct {
	// MaxConcurrentStreams is the request streams one connection may have
	// open (quic.Config.MaxIncomingStreams, RFC 9000 §4.6). Default 100.
	MaxConcurrentStreams int64
	// MaxHeaderBytes bounds a request's HEADERS frame in bytes; a larger
	// one is answered 431 by quic-go. Default 1 MiB. The HTTP/1 field
	// limits apply too (http1.StreamHandler).
	MaxHeaderBytes int
	// IdleTimeout closes a connection with no open stream for this long
	// (http3.Server.IdleTimeout); QUIC's own idle timeout (no packet at
	// all) is max(IdleTimeout, 30s). Default 5s.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds a handshake's idle time
	// (quic.Config.HandshakeIdleTimeout). Default 5s.
	HandshakeTimeout time.Duration
	// RetryAbove: with more handshakes than this in progress, new ones
	// are sent a Retry first (address validation, RFC 9000 §8.1.2).
	// Default 64; negative: always.
	RetryAbove int64
	// DrainGrace: once Shutdown has sent GOAWAY, a connection with no
	// request in progress is closed (H3_NO_ERROR) after this long, the
	// time for the GOAWAY to reach the client (quic-go's server would
	// wait for the client to close it, or for IdleTimeout). Zero: at
	// once.
	DrainGrace time.Duration
}

// Defaults for the zero fields of Config.
const (
	DefaultMaxConcurrentStreams = 100
	DefaultMaxHeaderBytes       = 1 << 20
	DefaultIdleTimeout          = 5 * time.Second
	DefaultHandshakeTimeout     = 5 * time.Second
	DefaultRetryAbove           = 64
)

func (cfg Config) withDefaults() Config {
	if cfg.MaxConcurrentStreams <= 0 {
		cfg.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.RetryAbove == 0 {
		cfg.RetryAbove = DefaultRetryAbove
	}
	return cfg
}

// Stats are the counters of a Server, for /metrics.
type Stats struct {
	// Conns counts QUIC connections whose handshake completed.
	Conns atomic.Int64
	// HandshakeFailures counts handshakes started (an Initial accepted)
	// that never completed: failed, timed out or refused at shutdown.
	HandshakeFailures atomic.Int64
	// ZeroRTTRefused counts 0-RTT packets dropped because 0-RTT is off.
	ZeroRTTRefused atomic.Int64
	// Retries counts handshakes sent a Retry first (RetryAbove).
	Retries atomic.Int64
	// Open is the number of open QUIC connections (handshake complete).
	Open atomic.Int64
}

// Server serves HTTP/3 on one UDP socket for an http1.Server.
type Server struct {
	cfg  Config
	hs   *http1.Server
	tls  *tls.Config
	log  *slog.Logger
	srv  *http3.Server
	once sync.Once

	mu    sync.Mutex
	tr    *quic.Transport         // guarded by mu
	ln    *quic.Listener          // guarded by mu
	end   bool                    // guarded by mu: Shutdown or Close was called
	conns map[*connState]struct{} // guarded by mu: accepted, not closed

	handshaking atomic.Int64
	Stats       Stats
}

// New returns a Server for hs's Handler and limits with cfg. tlsConf is
// the TCP listener's configuration (certificates, client authentication);
// it is cloned, and its ALPN becomes "h3" (RFC 9114 §3.1). log receives
// quic-go's messages at debug level; nil discards.
func New(cfg Config, tlsConf *tls.Config, hs *http1.Server, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg.withDefaults(), hs: hs, tls: http3.ConfigureTLSConfig(tlsConf.Clone()), log: log}
	s.srv = &http3.Server{
		Handler:        http.HandlerFunc(s.serveHTTP),
		MaxHeaderBytes: s.cfg.MaxHeaderBytes,
		IdleTimeout:    s.cfg.IdleTimeout,
		Logger:         log,
	}
	return s
}

// connKey is the context key of a connection's *connState.
type connKey struct{}

// connState follows one connection from its first Initial packet.
type connState struct {
	state  atomic.Int32 // 0 handshaking, 1 accepted, 2 ended
	active atomic.Int64 // requests being served (serveHTTP)
	h      *http1.StreamHandler
	c      *quic.Conn

	// Read and written by closeIdle only: the connection's packet counts
	// when last looked at, and since when they have not moved.
	sent, recv uint64
	quiet      time.Time
}

// drained reports whether c, with no request in progress, has also gone
// quiet: no packet sent or received for three probe timeouts (RFC 9002
// §6.2.1: PTO = smoothed_rtt + max(4×rttvar, 1 ms) + max_ack_delay, the
// peer's default 25 ms). A response whose handler has returned may still
// sit in quic-go's send buffer or wait for its acknowledgement; while it
// does, quic-go sends (data, then a probe each PTO), so a connection
// quiet that long has had its last response acknowledged, or lost its
// peer. Closing earlier cut such responses short (the client read
// H3_NO_ERROR in place of the body's end).
func (cs *connState) drained(now time.Time) bool {
	st := cs.c.ConnectionStats()
	if st.PacketsSent != cs.sent || st.PacketsReceived != cs.recv || cs.quiet.IsZero() {
		cs.sent, cs.recv, cs.quiet = st.PacketsSent, st.PacketsReceived, now
		return false
	}
	pto := st.SmoothedRTT + max(4*st.MeanDeviation, time.Millisecond) + 25*time.Millisecond
	return now.Sub(cs.quiet) >= max(3*pto, quietFloor)
}

// quietFloor is the least quiet time before drained holds. On loopback
// three PTOs are about 80 ms, less than a client starved of CPU may take
// between opening a request stream and sending its head; until the head
// is read the request is quic-go's, not counted in active, and the close
// failed it (H3_NO_ERROR after 1.08 s: TestHTTP3_WorkersRollingRestart,
// 1 request in 2811, in a CI run on a loaded machine; not reproduced).
const quietFloor = 250 * time.Millisecond

// Serve serves HTTP/3 on pc until Shutdown or Close, and returns nil
// then, else the error that stopped it. pc is owned by the Server from
// now on and closed when it returns.
func (s *Server) Serve(pc net.PacketConn) error {
	tr := &quic.Transport{
		Conn:   pc,
		Tracer: recorder{s},
		VerifySourceAddress: func(net.Addr) bool {
			if s.cfg.RetryAbove < 0 || s.handshaking.Load() > s.cfg.RetryAbove {
				s.Stats.Retries.Add(1)
				return true
			}
			return false
		},
		ConnContext: s.connContext,
	}
	ln, err := tr.Listen(s.tls, &quic.Config{
		HandshakeIdleTimeout: s.cfg.HandshakeTimeout,
		MaxIdleTimeout:       max(s.cfg.IdleTimeout, 30*time.Second),
		MaxIncomingStreams:   s.cfg.MaxConcurrentStreams,
		// No server push, no WebTransport: the client's unidirectional
		// streams are its control and QPACK streams (RFC 9114 §6.2).
		MaxIncomingUniStreams: 8,
		Allow0RTT:             false,
	})
	if err != nil {
		tr.Close()
		return err
	}
	s.mu.Lock()
	if s.end {
		s.mu.Unlock()
		ln.Close()
		tr.Close()
		return nil
	}
	s.tr, s.ln = tr, ln
	s.mu.Unlock()
	err = s.srv.ServeListener(listener{ln, s})
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, quic.ErrServerClosed) {
		return nil
	}
	s.mu.Lock()
	end := s.end
	s.mu.Unlock()
	if end {
		return nil
	}
	return err
}

// connContext is quic.Transport.ConnContext: a handshake starts.
func (s *Server) connContext(ctx context.Context, info *quic.ClientInfo) (context.Context, error) {
	cs := &connState{}
	s.handshaking.Add(1)
	context.AfterFunc(ctx, func() {
		switch cs.state.Swap(2) {
		case 0:
			s.handshaking.Add(-1)
			s.Stats.HandshakeFailures.Add(1)
		case 1:
			s.Stats.Open.Add(-1)
			s.mu.Lock()
			delete(s.conns, cs)
			s.mu.Unlock()
		}
	})
	return context.WithValue(ctx, connKey{}, cs), nil
}

// accepted: c's handshake completed.
func (s *Server) accepted(c *quic.Conn) {
	cs, _ := c.Context().Value(connKey{}).(*connState)
	if cs == nil {
		return
	}
	ts := c.ConnectionState().TLS
	cs.h = s.hs.StreamHandler(c.RemoteAddr(), c.LocalAddr(), &ts, 3)
	cs.c = c
	s.mu.Lock()
	if cs.state.CompareAndSwap(0, 1) {
		s.handshaking.Add(-1)
		s.Stats.Conns.Add(1)
		s.Stats.Open.Add(1)
		if s.conns == nil {
			s.conns = make(map[*connState]struct{})
		}
		s.conns[cs] = struct{}{}
	}
	s.mu.Unlock()
}

// listener counts the connections http3.Server accepts.
type listener struct {
	*quic.Listener
	s *Server
}

func (l listener) Accept(ctx context.Context) (*quic.Conn, error) {
	c, err := l.Listener.Accept(ctx)
	if err == nil {
		l.s.accepted(c)
	}
	return c, err
}

// Shutdown stops accepting connections (handshakes in progress are
// refused), sends GOAWAY on every connection (RFC 9114 §5.2) and waits
// for their requests to finish; when ctx ends first, it closes them and
// returns ctx.Err().
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.end = true
	ln, tr := s.ln, s.tr
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	stop := make(chan struct{})
	go s.closeIdle(ctx, stop)
	err := s.srv.Shutdown(ctx)
	close(stop)
	if tr != nil {
		tr.Close()
	}
	return err
}

// closeIdle closes, from DrainGrace on, the connections that have no
// request in progress and have gone quiet (connState.drained), until
// stop.
func (s *Server) closeIdle(ctx context.Context, stop chan struct{}) {
	t := time.NewTimer(s.cfg.DrainGrace)
	select {
	case <-t.C:
	case <-stop:
		t.Stop()
		return
	case <-ctx.Done():
		t.Stop()
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		for cs := range s.conns {
			if cs.active.Load() == 0 && cs.drained(now) {
				cs.c.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
			}
		}
		s.mu.Unlock()
		select {
		case <-tick.C:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Close closes every connection at once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.end = true
	ln, tr := s.ln, s.tr
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	err := s.srv.Close()
	if tr != nil {
		tr.Close()
	}
	return err
}

// recorder is the Transport's qlog recorder: it counts the 0-RTT
// packets the server drops (the only events it looks at).
type recorder struct{ s *Server }

func (r recorder) RecordEvent(ev qlogwriter.Event) {
	if d, ok := ev.(qlog.PacketDropped); ok && d.Header.PacketType == qlog.PacketType0RTT {
		r.s.Stats.ZeroRTTRefused.Add(1)
	}
}

func (recorder) Close() error { return nil }

// AltSvc returns the Alt-Svc field value (RFC 7838 §3) that advertises
// HTTP/3 on UDP port port for maxAge.
func AltSvc(port int, maxAge time.Duration) string {
	return `h3=":` + itoa(port) + `"; ma=` + itoa(int(maxAge/time.Second))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
