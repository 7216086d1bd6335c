package server

import (
	"log/slog"

	"turnstile/internal/config"
	"turnstile/internal/h2"
)

// newHTTP2 returns the HTTP/2 server for the --http2-* settings. Idle
// connections close after --timeout-keep-alive, as HTTP/1 ones do, and a
// connection that accepts no bytes for --timeout-write closes.
func newHTTP2(cfg *config.Config, log *slog.Logger) *h2.Server {
	return h2.New(h2.Config{
		MaxConcurrentStreams:        cfg.HTTP2MaxConcurrentStreams,
		InitialConnectionWindowSize: cfg.HTTP2InitialConnectionWindowSize,
		InitialStreamWindowSize:     cfg.HTTP2InitialStreamWindowSize,
		MaxFrameSize:                cfg.HTTP2MaxFrameSize,
		MaxHeadersSize:              cfg.HTTP2MaxHeadersSize,
		KeepAliveInterval:           cfg.HTTP2KeepAliveInterval,
		KeepAliveTimeout:            cfg.HTTP2KeepAliveTimeout,
		IdleTimeout:                 cfg.TimeoutKeepAlive,
		WriteTimeout:                cfg.TimeoutWrite,
	}, log)
}
