package server

import (
	"log/slog"
	"net"

	"turnstile/internal/config"
	"turnstile/internal/http1"
	"turnstile/internal/proxy"
)

// proxyListener wraps ln in the PROXY protocol reader when
// --proxy-protocol is on (internal/proxy.Listener: the header is read on
// each connection's goroutine, so the accept gate under it never waits on
// a peer). It goes under TLS: the load balancer's header comes first on
// the wire.
func proxyListener(ln net.Listener, cfg *config.Config, log *slog.Logger) net.Listener {
	if !cfg.ProxyProtocol {
		return ln
	}
	log.Info("PROXY protocol required from trusted peers", "forwarded_allow_ips", cfg.TrustedProxies.String())
	return &proxy.Listener{Listener: ln, Trusted: cfg.TrustedProxies, HeaderTimeout: cfg.TimeoutRequestHeader, Logger: log}
}

// proxyHeaders wraps h in the forwarding-header handler when
// --proxy-headers is on: outermost, so that the tracker, the access log,
// static files and the app all see the client the trusted proxy named.
func proxyHeaders(h http1.Handler, cfg *config.Config) http1.Handler {
	if !cfg.ProxyHeaders {
		return h
	}
	return &proxy.Headers{Next: h, Trusted: cfg.TrustedProxies}
}
