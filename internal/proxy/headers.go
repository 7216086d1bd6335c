package proxy

import (
	"net"
	"net/netip"
	"unsafe"

	"turnstile/internal/http1"
)

// Headers applies forwarding headers from a trusted peer to each request
// before Next runs: an http1.Handler.
//
// From a peer in Trusted (see AllowList.Peer), the request's RemoteAddr
// becomes the client the headers name (WSGI REMOTE_ADDR/REMOTE_PORT, ASGI
// client), its Scheme the forwarded protocol (wsgi.url_scheme, ASGI
// scheme), and its Host — r.Host and the Host field itself, so HTTP_HOST
// and the ASGI host header — the forwarded host and port. From any other
// peer nothing changes. Values that do not parse are ignored, never an
// error. What was changed is put back when Next returns: the http1
// connection reuses its Request, and the next request on it must be judged
// from the real peer again.
//
// Which headers (Resolve has the details): X-Forwarded-For, -Proto, -Host
// and -Port when any of them is present, else RFC 7239 Forwarded.
type Headers struct {
	Next    http1.Handler
	Trusted *AllowList
}

// ServeHTTP1 implements http1.Handler.
func (h *Headers) ServeHTTP1(w *http1.ResponseWriter, r *http1.Request) {
	if !h.Trusted.Peer(r.RemoteAddr) {
		h.Next.ServeHTTP1(w, r)
		return
	}
	res := Resolve(r.Header, r.Host, h.Trusted)
	if !res.Changed() {
		h.Next.ServeHTTP1(w, r)
		return
	}
	remote, scheme, host := r.RemoteAddr, r.Scheme, r.Host
	hostField, hostValue := -1, []byte(nil)
	if res.Client.IsValid() {
		r.RemoteAddr = tcpAddr(res.Client, res.ClientPort)
	}
	if res.Scheme != "" {
		r.Scheme = res.Scheme
	}
	if res.Host != nil {
		r.Host = res.Host
		for i := range r.Header {
			if eqFold(r.Header[i].Name, "host") {
				hostField, hostValue = i, r.Header[i].Value
				r.Header[i].Value = res.Host
				break
			}
		}
		if hostField < 0 {
			// HTTP/1.0 without Host: the app gets one, as it would have
			// through the proxy.
			r.Header = append(r.Header, http1.Field{Name: []byte("Host"), Value: res.Host})
		}
	}
	defer func() {
		r.RemoteAddr, r.Scheme, r.Host = remote, scheme, host
		if hostField >= 0 && hostField < len(r.Header) {
			r.Header[hostField].Value = hostValue
		}
	}()
	h.Next.ServeHTTP1(w, r)
}

// tcpAddr returns ip:port as a *net.TCPAddr in one allocation (the
// address and its IP bytes together).
func tcpAddr(ip netip.Addr, port int) *net.TCPAddr {
	a := &struct {
		addr net.TCPAddr
		ip   [16]byte
	}{}
	if ip.Is4() {
		b := ip.As4()
		copy(a.ip[:], b[:])
		a.addr.IP = a.ip[:4:4]
	} else {
		a.ip = ip.As16()
		a.addr.IP = a.ip[:16:16]
	}
	a.addr.Port = port
	return &a.addr
}

// Result is what a trusted peer's forwarding headers say about a request.
type Result struct {
	// Client is the client's address; invalid when the headers name none
	// (or the hop they name is "unknown" or obfuscated).
	Client netip.Addr
	// ClientPort is the client's port when the hop carries one, else 0
	// (as uvicorn reports it).
	ClientPort int
	// Scheme is "http" or "https" ("ws"/"wss" map to them; the ASGI
	// bridge names WebSocket schemes), or "" when not said.
	Scheme string
	// Host is the new Host value (host[:port]), or nil when unchanged.
	Host []byte
}

// Changed reports whether res changes anything.
func (res *Result) Changed() bool {
	return res.Client.IsValid() || res.Scheme != "" || res.Host != nil
}

// Resolve reads the forwarding headers among fields, sent by a peer
// already known to be trusted; host is the request's Host value (for
// X-Forwarded-Port alone).
//
// The client is found by walking the hops right to left — each proxy
// appends the address it received the request from — past every hop in
// trusted: the first one that is not is the client (if all are, the
// leftmost is). A hop that is not an IP ("unknown", an obfuscated
// identifier, garbage) ends the walk without a client: the address stays
// the peer's. The protocol, host and port are taken from the same hop: in
// Forwarded, the client's element (or, if it lacks one, the nearest
// element to its right that has it); for the X-Forwarded-* lists, the
// entry as many places from the right as the client is in
// X-Forwarded-For, or the leftmost entry when the list is shorter (a
// proxy that overwrites rather than appends leaves one value).
//
// X-Forwarded-* wins over Forwarded: when any of X-Forwarded-For, -Proto,
// -Host or -Port is present, Forwarded is ignored. The common proxies
// (nginx, HAProxy's option forwardfor, AWS and Google load balancers,
// Traefik, Caddy, Envoy) write X-Forwarded-* and pass a Forwarded field a
// client sent through untouched, so preferring Forwarded would let any
// client choose its own address behind them. A proxy that writes only
// Forwarded is used when no X-Forwarded-* field is present; behind such a
// proxy, make it drop X-Forwarded-* from clients.
func Resolve(fields []http1.Field, host []byte, trusted *AllowList) Result {
	var res Result
	present := xfPresent(fields)
	if present == 0 {
		resolveForwarded(&res, fields, trusted)
		return res
	}
	skipped := 0
	if present&xfFor != 0 {
		client, port, n, ok := walkXFF(fields, trusted)
		if ok {
			res.Client, res.ClientPort = client, port
		}
		skipped = n
	}
	if present&xfProto != 0 {
		if v, ok := nthFromRight(fields, "x-forwarded-proto", skipped); ok {
			res.Scheme = schemeOf(v)
		}
	}
	newHost := []byte(nil)
	if present&xfHost != 0 {
		if v, ok := nthFromRight(fields, "x-forwarded-host", skipped); ok && validHost(v) {
			newHost = v
		}
	}
	if present&xfPort == 0 {
		res.Host = newHost
		return res
	}
	if v, ok := nthFromRight(fields, "x-forwarded-port", skipped); ok {
		if p, ok := parsePort(v); ok {
			base := newHost
			if base == nil {
				base = host
			}
			if len(base) > 0 {
				newHost = withPort(base, p, res.Scheme)
			}
		}
	}
	res.Host = newHost
	return res
}

// walkXFF walks the X-Forwarded-For hops right to left (fields in
// reverse order). skipped is the number of hops right of the one that
// ended the walk; ok is false when no client was found.
func walkXFF(fields []http1.Field, trusted *AllowList) (client netip.Addr, port, skipped int, ok bool) {
	var last netip.Addr
	lastPort, seen := 0, 0
	for fi := len(fields) - 1; fi >= 0; fi-- {
		if !eqFold(fields[fi].Name, "x-forwarded-for") {
			continue
		}
		v := fields[fi].Value
		for end := len(v); end >= 0; {
			start := lastIndexByte(v[:end], ',') + 1
			entry := trimOWS(v[start:end])
			end = start - 1
			ip, p, good := parseNode(entry)
			if !good {
				return netip.Addr{}, 0, seen, false
			}
			if !trusted.Contains(ip) {
				return ip, p, seen, true
			}
			last, lastPort = ip, p
			seen++
		}
	}
	if seen == 0 {
		return netip.Addr{}, 0, 0, false
	}
	return last, lastPort, seen - 1, true // every hop trusted: the leftmost
}

// nthFromRight returns the list entry k places from the right across the
// fields named name, or the leftmost entry when there are fewer; ok is
// false when there is no such field.
func nthFromRight(fields []http1.Field, name string, k int) (v []byte, ok bool) {
	n := 0
	for fi := len(fields) - 1; fi >= 0; fi-- {
		if !eqFold(fields[fi].Name, name) {
			continue
		}
		val := fields[fi].Value
		for end := len(val); end >= 0; {
			start := lastIndexByte(val[:end], ',') + 1
			v, ok = trimOWS(val[start:end]), true
			end = start - 1
			if n == k {
				return v, true
			}
			n++
		}
	}
	return v, ok
}

// parseNode parses a hop: an IPv4 or IPv6 address, optionally with a
// port ("192.0.2.1", "192.0.2.1:4711", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:4711"). An obfuscated port ("_x", RFC 7239 §6.3) counts
// as none. A zone is dropped.
func parseNode(b []byte) (ip netip.Addr, port int, ok bool) {
	if len(b) == 0 {
		return ip, 0, false
	}
	host, portb := b, []byte(nil)
	if b[0] == '[' {
		end := lastIndexByte(b, ']')
		if end < 0 {
			return ip, 0, false
		}
		host = b[1:end]
		switch rest := b[end+1:]; {
		case len(rest) == 0:
		case rest[0] == ':':
			portb = rest[1:]
		default:
			return ip, 0, false
		}
	} else if i := lastIndexByte(b, ':'); i >= 0 && indexByte(b[:i], ':') < 0 {
		host, portb = b[:i], b[i+1:] // IPv4:port (a bare IPv6 has several ':')
	}
	ip, err := parseAddr(host)
	if err != nil {
		return netip.Addr{}, 0, false
	}
	if b[0] == '[' && !ip.Is6() {
		return netip.Addr{}, 0, false
	}
	ip = ip.WithZone("").Unmap()
	if portb != nil {
		if len(portb) > 0 && portb[0] == '_' {
			if !isObfuscated(portb) {
				return netip.Addr{}, 0, false
			}
		} else if port, ok = parsePort(portb); !ok {
			return netip.Addr{}, 0, false
		}
	}
	return ip, port, true
}

// parseAddr is netip.ParseAddr without copying b to a string (which
// allocates): ParseAddr keeps nothing of its argument (a zone is copied
// by unique.Make).
func parseAddr(b []byte) (netip.Addr, error) {
	if len(b) == 0 {
		return netip.ParseAddr("")
	}
	return netip.ParseAddr(unsafe.String(&b[0], len(b)))
}

// schemeOf maps a forwarded protocol to Request.Scheme: http and ws are
// "http", https and wss "https" (ASCII case-insensitive, RFC 3986 §3.1);
// anything else is "" (ignored).
func schemeOf(v []byte) string {
	switch {
	case eqFold(v, "http"), eqFold(v, "ws"):
		return "http"
	case eqFold(v, "https"), eqFold(v, "wss"):
		return "https"
	}
	return ""
}

// withPort returns host with its port replaced by port, or removed when
// port is scheme's default (80 for http, 443 for https), so that
// SERVER_PORT and URLs built from Host come out as the client used them.
func withPort(host []byte, port int, scheme string) []byte {
	h := host
	if len(h) > 0 && h[0] == '[' {
		if end := indexByte(h, ']'); end >= 0 {
			h = h[:end+1]
		}
	} else if i := lastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	out := make([]byte, 0, len(h)+6)
	out = append(out, h...)
	if (scheme == "https" && port == 443) || (scheme != "https" && port == 80) {
		return out
	}
	out = append(out, ':')
	return appendInt(out, port)
}

func appendInt(b []byte, n int) []byte {
	var d [8]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// parsePort parses 1..65535 written in 1 to 5 digits.
func parsePort(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1 && n <= 65535
}

// validHost reports whether b is a plausible Host value: uri-host
// [ ":" port ] (RFC 9110 §7.2, RFC 3986 §3.2.2) within 1..255+6 bytes.
func validHost(b []byte) bool {
	if len(b) == 0 || len(b) > 261 {
		return false
	}
	for _, c := range b {
		if !isHostChar[c] {
			return false
		}
	}
	host, port := b, []byte(nil)
	if b[0] == '[' {
		end := indexByte(b, ']')
		if end < 0 {
			return false
		}
		if _, err := parseAddr(b[1:end]); err != nil {
			return false
		}
		switch rest := b[end+1:]; {
		case len(rest) == 0:
		case rest[0] == ':':
			port = rest[1:]
		default:
			return false
		}
		host = nil
	} else if i := lastIndexByte(b, ':'); i >= 0 {
		host, port = b[:i], b[i+1:]
	}
	if host != nil && (len(host) == 0 || indexByte(host, '[') >= 0 || indexByte(host, ']') >= 0 || indexByte(host, ':') >= 0) {
		return false
	}
	if port != nil {
		if _, ok := parsePort(port); !ok {
			return false
		}
	}
	return true
}

// isHostChar: unreserved / pct-encoded / sub-delims of RFC 3986 §3.2.2,
// plus ":" and the IP-literal brackets.
var isHostChar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-32] = true, true
	}
	for _, c := range "-._~%!$&'()*+,;=:[]" {
		t[c] = true
	}
	return t
}()

// isObfuscated reports whether b is an obfuscated identifier, RFC 7239
// §6.3: "_" 1*( ALPHA / DIGIT / "." / "_" / "-" ).
func isObfuscated(b []byte) bool {
	if len(b) < 2 || b[0] != '_' {
		return false
	}
	for _, c := range b[1:] {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// The X-Forwarded-* fields, as bits.
const (
	xfFor = 1 << iota
	xfProto
	xfHost
	xfPort
)

// xfPresent returns the X-Forwarded-* fields present among fields, in
// one pass that looks at most names only for their length.
func xfPresent(fields []http1.Field) int {
	mask := 0
	for i := range fields {
		n := fields[i].Name
		if len(n) < 15 || len(n) > 17 || !eqFold(n[:12], "x-forwarded-") {
			continue
		}
		switch rest := n[12:]; {
		case eqFold(rest, "for"):
			mask |= xfFor
		case eqFold(rest, "proto"):
			mask |= xfProto
		case eqFold(rest, "host"):
			mask |= xfHost
		case eqFold(rest, "port"):
			mask |= xfPort
		}
	}
	return mask
}

// eqFold reports whether b equals the lower-case ASCII s, ignoring case.
func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}
