package server

import (
	"log/slog"
	"time"

	"turnstile/internal/config"
	"turnstile/internal/h2"
	"turnstile/internal/http1"
)

// newHTTP2 returns the HTTP/2 server for the --http2-* settings. Idle
// connections close after --timeout-keep-alive, as HTTP/1 ones do, and a
// connection that accepts no bytes for --timeout-write closes.
//
// extConnect offers RFC 8441's extended CONNECT (WebSockets over HTTP/2):
// for an ASGI app, which serves WebSockets.
func newHTTP2(cfg *config.Config, log *slog.Logger, extConnect bool) *h2.Server {
	return h2.New(h2.Config{
		MaxConcurrentStreams:        cfg.HTTP2MaxConcurrentStreams,
		InitialConnectionWindowSize: cfg.HTTP2InitialConnectionWindowSize,
		InitialStreamWindowSize:     cfg.HTTP2InitialStreamWindowSize,
		MaxFrameSize:                cfg.HTTP2MaxFrameSize,
		MaxHeadersSize:              cfg.HTTP2MaxHeadersSize,
		KeepAliveInterval:           cfg.HTTP2KeepAliveInterval,
		KeepAliveTimeout:            cfg.HTTP2KeepAliveTimeout,
		IdleTimeout:                 h2Idle(cfg.TimeoutKeepAlive),
		WriteTimeout:                cfg.TimeoutWrite,
		ExtendedConnect:             extConnect,
	}, log)
}

// h2Idle is the idle timeout of an HTTP/2 connection: --timeout-keep-alive,
// and under --timeout-keep-alive 0 (HTTP/1.1 keeps no connection alive)
// http1.DefaultKeepAliveTimeout, since a multiplexed connection cannot
// close after each response and 0 would mean no idle timeout to x/net.
func h2Idle(d time.Duration) time.Duration {
	if d == 0 {
		return http1.DefaultKeepAliveTimeout
	}
	return d
}
