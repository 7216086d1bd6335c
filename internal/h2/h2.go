// Package h2 serves HTTP/2 (RFC 9113) connections for internal/http1 with
// golang.org/x/net/http2: http1.Server hands it a connection that
// negotiated "h2" by ALPN or started with the client preface (h2c with
// prior knowledge), and each stream comes back to the http1.Handler as a
// Request (internal/http1/stream.go).
//
// Not supported: WebSocket over HTTP/2 (RFC 8441 extended CONNECT; such
// requests are refused by x/net), server push, h2c by Upgrade from
// HTTP/1.1 (RFC 9113 §3.1 deprecates it).
package h2

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

// Config holds the HTTP/2 settings, named like Granian's --http2-* flags.
// Zero fields take x/net/http2's defaults (given in each comment).
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
	// values and 32 bytes per field, RFC 9113 §6.5.2). Default 1 MiB +
	// 320. The HTTP/1 field limits (--limit-request-fields and
	// --limit-request-field-size) apply to HTTP/2 requests too.
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
	// long (a client that stopped reading). Zero: never.
	WriteTimeout time.Duration
}

// Server serves HTTP/2 connections. It implements http1.HTTP2Server.
type Server struct {
	h2   *http2.Server
	base *http.Server // carries MaxHeaderBytes and the graceful shutdown hook
}

// New returns a Server with cfg. log receives x/net/http2's own messages
// (at debug level: they are about misbehaving clients).
func New(cfg Config, log *slog.Logger) *Server {
	h2s := &http2.Server{
		MaxConcurrentStreams:         cfg.MaxConcurrentStreams,
		MaxUploadBufferPerConnection: cfg.InitialConnectionWindowSize,
		MaxUploadBufferPerStream:     cfg.InitialStreamWindowSize,
		MaxReadFrameSize:             cfg.MaxFrameSize,
		ReadIdleTimeout:              cfg.KeepAliveInterval,
		PingTimeout:                  cfg.KeepAliveTimeout,
		IdleTimeout:                  cfg.IdleTimeout,
		WriteByteTimeout:             cfg.WriteTimeout,
	}
	base := &http.Server{MaxHeaderBytes: cfg.MaxHeadersSize}
	if log != nil {
		base.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	}
	// ConfigureServer registers the connections so that base.Shutdown
	// sends each a GOAWAY; it cannot fail without a TLSConfig.
	if err := http2.ConfigureServer(base, h2s); err != nil {
		panic("h2: " + err.Error())
	}
	return &Server{h2: h2s, base: base}
}

// ServeConn serves c until it closes, calling h for each stream.
func (s *Server) ServeConn(c net.Conn, h http.Handler) {
	s.h2.ServeConn(c, &http2.ServeConnOpts{BaseConfig: s.base, Handler: h})
}

// Shutdown sends GOAWAY on every connection; each closes once its open
// streams are done. It does not wait.
func (s *Server) Shutdown() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // base tracks no connection itself: nothing to wait for
	s.base.Shutdown(ctx)
}
