package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"turnstile/internal/config"
	"turnstile/internal/h3"
	"turnstile/internal/http1"
	"turnstile/internal/listen"
	"turnstile/internal/workerctl"
)

// HTTP/3 (--http3): the UDP socket is the worker slot's, inherited at
// workerctl.QUICFD (the master binds one per slot, internal/supervise
// quic.go), or bound here on the TCP listener's port by a server that
// binds its own sockets. The TCP responses advertise it with Alt-Svc.

// theH3 is the worker's HTTP/3 server, for /metrics; nil without --http3.
var theH3 atomic.Pointer[h3.Server]

// quicConn returns the UDP socket HTTP/3 serves on, on the port of tcp
// (the TCP listener's address).
func quicConn(cfg *config.Config, tcp net.Addr) (*net.UDPConn, error) {
	if worker != nil {
		return listen.PacketConn(os.NewFile(workerctl.QUICFD, "quic"))
	}
	ta, ok := tcp.(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("--http3 needs a TCP listener, not %s", tcp)
	}
	f, err := listen.BindUDP(cfg.Host, ta.Port)
	if err != nil {
		return nil, err
	}
	return listen.PacketConn(f)
}

// newHTTP3 returns the HTTP/3 server for the --http3-* settings, serving
// srv's Handler under srv's limits with the TCP listener's TLS
// configuration tc. Idle connections close after --timeout-keep-alive,
// as HTTP/1 and HTTP/2 ones do.
func newHTTP3(cfg *config.Config, tc *tls.Config, srv *http1.Server, log *slog.Logger) *h3.Server {
	s := h3.New(h3.Config{
		MaxConcurrentStreams: int64(cfg.HTTP3MaxConcurrentStreams),
		MaxHeaderBytes:       cfg.HTTP2MaxHeadersSize,
		IdleTimeout:          h2Idle(cfg.TimeoutKeepAlive),
		RetryAbove:           retryAbove(cfg.HTTP3RetryAbove),
		DrainGrace:           cfg.TimeoutKeepAliveDrain,
	}, tc, srv, log)
	theH3.Store(s)
	return s
}

// retryAbove maps the flag (0 = always) to h3's field (negative = always).
func retryAbove(v int) int64 {
	if v <= 0 {
		return -1
	}
	return int64(v)
}

// altSvcHeader is the Alt-Svc line (RFC 7838) the TCP responses carry.
func altSvcHeader(cfg *config.Config, pc *net.UDPConn) []byte {
	port := pc.LocalAddr().(*net.UDPAddr).Port
	return []byte("Alt-Svc: " + h3.AltSvc(port, cfg.HTTP3AltSvcMaxAge) + "\r\n")
}

// h3Counter is a counter of the HTTP/3 server (0 without --http3).
func h3Counter(name, help string, f func(*h3.Stats) int64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
		if s := theH3.Load(); s != nil {
			return float64(f(&s.Stats))
		}
		return 0
	})
}

// h3Collectors are the HTTP/3 series of /metrics.
func h3Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		h3Counter("turnstile_quic_connections_total", "QUIC (HTTP/3) connections whose handshake completed.",
			func(s *h3.Stats) int64 { return s.Conns.Load() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "turnstile_quic_connections", Help: "Open QUIC (HTTP/3) connections."}, func() float64 {
			if s := theH3.Load(); s != nil {
				return float64(s.Stats.Open.Load())
			}
			return 0
		}),
		h3Counter("turnstile_quic_handshake_failures_total", "QUIC handshakes started that never completed (failed, timed out, or refused when stopping).",
			func(s *h3.Stats) int64 { return s.HandshakeFailures.Load() }),
		h3Counter("turnstile_quic_0rtt_refused_total", "0-RTT packets dropped: 0-RTT is refused (early data can be replayed, RFC 9001 §9.2).",
			func(s *h3.Stats) int64 { return s.ZeroRTTRefused.Load() }),
		h3Counter("turnstile_quic_retries_total", "QUIC handshakes sent a Retry first (--http3-retry-above handshakes were in progress).",
			func(s *h3.Stats) int64 { return s.Retries.Load() }),
	}
}

func init() {
	if IsWorker() {
		syscall.CloseOnExec(workerctl.QUICFD) // EBADF without --http3: harmless
	}
}
