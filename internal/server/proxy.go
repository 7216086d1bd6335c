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

// proxyHeaderHint is http1.Server.ProxyHeaderHint without --proxy-protocol:
// a load balancer sends PROXY headers (HAProxy send-proxy, send-proxy-v2)
// to a host started without the flag, and its checks, which go to the
// admin listener, pass.
const proxyHeaderHint = "--proxy-protocol is off: start with --proxy-protocol (and the balancer's address in --forwarded-allow-ips), or have the balancer send no PROXY header"

// proxyHeaders wraps h in the forwarding-header handler when
// --proxy-headers is on: outermost, so that the tracker, the access log,
// static files and the app all see the client the trusted proxy named.
func proxyHeaders(h http1.Handler, cfg *config.Config) http1.Handler {
	if !cfg.ProxyHeaders {
		return h
	}
	return &proxy.Headers{Next: h, Trusted: cfg.TrustedProxies}
}
