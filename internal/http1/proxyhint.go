package http1

import (
	"bytes"
	"net"
	"time"
)

// A PROXY protocol header (HAProxy's "The PROXY protocol" spec, versions
// 1 and 2) at the start of a connection to a server that does not read
// one: a load balancer's send-proxy in front of a server started without
// --proxy-protocol. Its checks may pass (they go to another port, or
// without the header), so the server stays in the pool while every
// request the balancer sends it fails; Server.ProxyHeaderHint makes that
// failure say its cause, to the client and in the log.

// errProxyHeader answers a connection that began with a PROXY protocol
// header (ProxyHeaderHint set).
var errProxyHeader = perr(400, "PROXY protocol header, which this server does not read")

// proxyHintEvery is the least time between two records of PROXY protocol
// headers refused (logProxyHeader).
const proxyHintEvery = 10 * time.Second

// Spec §2.1: a v1 header is one line starting "PROXY " and the protocol
// (TCP4, TCP6 or UNKNOWN). Spec §2.2: a v2 header starts with the
// 12-byte signature \r\n\r\n\x00\r\nQUIT\n; readHead skips its two
// leading CRLFs as empty lines (RFC 9112 §2.2), so the head it leaves
// starts with the rest.
var (
	proxyV1     = [][]byte{[]byte("PROXY TCP4 "), []byte("PROXY TCP6 "), []byte("PROXY UNKNOWN")}
	proxyV2Rest = []byte("\x00\r\nQUIT\n")
)

// isProxyHeader reports whether head, a connection's first request head
// as readHead left it (leading empty lines skipped), starts with a PROXY
// protocol header.
func isProxyHeader(head []byte) bool {
	if bytes.HasPrefix(head, proxyV2Rest) {
		return true
	}
	for _, p := range proxyV1 {
		if bytes.HasPrefix(head, p) {
			return true
		}
	}
	return false
}

// isProxyRecord reports whether the first 5 bytes a TLS handshake read
// (tls.RecordHeaderError.RecordHeader) are a PROXY protocol header's.
func isProxyRecord(hdr [5]byte) bool {
	s := string(hdr[:])
	return s == "PROXY" || s == "\r\n\r\n\x00"
}

// logProxyHeader logs a connection refused for its PROXY protocol header
// at warning level, with ProxyHeaderHint: the first at once, then at most
// one record per proxyHintEvery, which counts those refused since the
// last record (count; 1 when alone).
func (s *Server) logProxyHeader(remote net.Addr) {
	n := s.proxyHint.Add(1)
	now := time.Now().UnixNano()
	last := s.proxyHintLogged.Load()
	if last != 0 && now-last < int64(proxyHintEvery) || !s.proxyHintLogged.CompareAndSwap(last, now) {
		return
	}
	s.proxyHint.Add(-n)
	s.logger().Warn("http1: a PROXY protocol header opened the connection: answered 400; "+s.ProxyHeaderHint, "remote", remote, "count", n)
}
