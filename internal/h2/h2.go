// Package h2 serves HTTP/2 (RFC 9113) connections for internal/http1:
// http1.Server hands it a connection that negotiated "h2" by ALPN or
// started with the client preface (h2c with prior knowledge), and each
// stream goes to the http1.StreamHandler (internal/http1/stream.go), which
// runs the same Handler as HTTP/1 requests without an http.Request.
//
// The connection state machine is ours; framing (http2.Framer, which
// also checks that CONTINUATION frames follow their HEADERS) and HPACK
// (hpack.Decoder, hpack.Encoder) come from golang.org/x/net/http2. A field
// block is decoded by readBlock (block.go) with the Framer's checks
// (pseudo-header order, field-name case, list size) into fields a
// connection reuses, which the Framer's MetaHeadersFrame does not. The
// Framer reads through blockReader, which bounds a field block's bytes
// (blockSlack): no empty CONTINUATION frame counts against the list size.
//
// # Life of a connection
//
//  1. serve writes our SETTINGS (Config) and the connection window's
//     WINDOW_UPDATE, reads the client preface and its first SETTINGS
//     within prefaceTimeout (RFC 9113 §3.4), then one goroutine, the
//     reader, reads frames until the connection ends (conn.go).
//  2. HEADERS opens a stream (§5.1): the head is checked (head.go: §8.2.1
//     field validity, §8.2.2 connection-specific fields, §8.3.1
//     pseudo-header fields; a malformed request is reset with
//     PROTOCOL_ERROR, §8.1.1) and queued. When the reader has consumed
//     every byte it read (a read boundary) it starts the queued streams,
//     each on a handler goroutine of its own calling ServeStream (one
//     parked by an earlier stream of the connection, else a new one),
//     and flushes the frames written meanwhile. A stream reset before
//     that boundary is never started (CVE-2023-44487, rapid reset); at most
//     MaxConcurrentStreams handlers run per connection, later streams
//     wait for one to finish, and a client that keeps more than
//     4×MaxConcurrentStreams waiting is sent GOAWAY ENHANCE_YOUR_CALM.
//  3. DATA is buffered per stream within the stream's receive window
//     (§6.9); WINDOW_UPDATE frames return the window as the handler reads
//     (stream.go). Responses are written by the handler's goroutine under
//     the connection's mutex, straight into its buffered writer: HEADERS
//     with HPACK, DATA cut to the peer's SETTINGS_MAX_FRAME_SIZE and
//     waiting for the peer's stream and connection windows. A stream's
//     end (and a handler's Flush) sends the buffer once the goroutines
//     ready to run have run (flushSoon): responses that finish together
//     share one write.
//  4. RST_STREAM from the client closes Done (the handler sees its client
//     gone); PRIORITY is ignored (§5.3.2); PING is answered; SETTINGS are
//     applied in order and acknowledged (§6.5.3).
//  5. Shutdown sends GOAWAY with the last stream id seen (§6.8); streams
//     up to it are served, later ones ignored; the connection closes once
//     no stream is left. A connection error sends GOAWAY with its code
//     and closes (§5.4.1).
//
// Extended CONNECT (RFC 8441, WebSockets over HTTP/2) with
// Config.ExtendedConnect: the stream's handler hijacks it (http1
// tunnel.go). Not supported: server push, h2c by Upgrade from HTTP/1.1
// (RFC 9113 §3.1 deprecates it).
package h2

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"turnstile/internal/http1"
)

// Config holds the HTTP/2 settings, named like Granian's --http2-* flags.
// Zero fields take the defaults given in each comment.
type Config struct {
	// MaxConcurrentStreams is SETTINGS_MAX_CONCURRENT_STREAMS, the streams
	// one connection may have open (RFC 9113 §6.5.2). Default 250.
	MaxConcurrentStreams uint32
	// InitialConnectionWindowSize is the connection's receive flow-control
	// window in bytes (RFC 9113 §6.9). Default 1 MiB; at least 65535.
	InitialConnectionWindowSize int32
	// InitialStreamWindowSize is SETTINGS_INITIAL_WINDOW_SIZE, each
	// stream's receive window in bytes. Default 1 MiB.
	InitialStreamWindowSize int32
	// MaxFrameSize is SETTINGS_MAX_FRAME_SIZE, the largest frame payload
	// we accept in bytes (16384–16777215). Default 1 MiB.
	MaxFrameSize uint32
	// MaxHeadersSize is SETTINGS_MAX_HEADER_LIST_SIZE in bytes (names,
	// values and 32 bytes per field, RFC 9113 §6.5.2); a request over it
	// is answered 431. Default 1 MiB + 320. The HTTP/1 field limits
	// (--limit-request-fields and --limit-request-field-size) apply to
	// HTTP/2 requests too.
	MaxHeadersSize int
	// KeepAliveInterval: when no frame arrived for this long, a PING is
	// sent (health check). Zero: never.
	KeepAliveInterval time.Duration
	// KeepAliveTimeout: a PING unanswered for this long closes the
	// connection. Default 15s.
	KeepAliveTimeout time.Duration
	// IdleTimeout closes (GOAWAY) a connection with no open stream for
	// this long. Zero: never.
	IdleTimeout time.Duration
	// WriteTimeout closes a connection that accepts no bytes for this
	// long (a client that stopped reading), and bounds each wait of a
	// response for the peer's flow-control window. Zero: never.
	WriteTimeout time.Duration
	// ExtendedConnect sends SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 and
	// accepts CONNECT with :protocol (RFC 8441 §3, §4): WebSockets over
	// HTTP/2 for an app that serves them (ASGI). Without it a :protocol
	// field makes the request malformed (RFC 9113 §8.3).
	ExtendedConnect bool
}

// Defaults for the zero fields of Config.
const (
	DefaultMaxConcurrentStreams = 250
	DefaultWindowSize           = 1 << 20
	DefaultMaxFrameSize         = 1 << 20
	DefaultMaxHeadersSize       = 1<<20 + 320
	DefaultKeepAliveTimeout     = 15 * time.Second
)

func (cfg Config) withDefaults() Config {
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if cfg.InitialConnectionWindowSize <= 0 {
		cfg.InitialConnectionWindowSize = DefaultWindowSize
	}
	cfg.InitialConnectionWindowSize = max(cfg.InitialConnectionWindowSize, initialWindow)
	if cfg.InitialStreamWindowSize <= 0 {
		cfg.InitialStreamWindowSize = DefaultWindowSize
	}
	if cfg.MaxFrameSize == 0 {
		cfg.MaxFrameSize = DefaultMaxFrameSize
	}
	cfg.MaxFrameSize = min(max(cfg.MaxFrameSize, minMaxFrameSize), maxMaxFrameSize)
	if cfg.MaxHeadersSize <= 0 {
		cfg.MaxHeadersSize = DefaultMaxHeadersSize
	}
	if cfg.KeepAliveTimeout <= 0 {
		cfg.KeepAliveTimeout = DefaultKeepAliveTimeout
	}
	return cfg
}

// Server serves HTTP/2 connections. It implements http1.HTTP2Server.
type Server struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	conns map[*conn]struct{} // guarded by mu
}

// New returns a Server with cfg. log receives messages about misbehaving
// clients at debug level; nil discards.
func New(cfg Config, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg.withDefaults(), log: log, conns: make(map[*conn]struct{})}
}

// ServeConn serves nc until it closes, calling h.ServeStream for each
// stream, and returns once every ServeStream call has returned.
func (s *Server) ServeConn(nc net.Conn, h *http1.StreamHandler) {
	c := newConn(s, nc, h)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	c.serve()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown sends GOAWAY on every connection; each closes once its open
// streams are done. It does not wait (not even for a connection whose
// socket write blocks: each GOAWAY is written on a goroutine of its own).
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		go c.goAway()
	}
}
