package http1

import (
	"bytes"
	"crypto/tls"
	"net"
)

// Field is one header (or trailer) field line as received.
type Field struct {
	Name  []byte // as received: case kept, a non-empty token (RFC 9110 §5.1)
	Value []byte // surrounding OWS trimmed; never contains CR, LF, NUL or other CTLs except HTAB (RFC 9110 §5.5)
}

// Request is one parsed request. The server reuses one Request per
// connection: every slice (and Header) is valid only until the handler
// returns, and points into the connection's head buffer. Copy what must
// outlive the handler.
type Request struct {
	Method   []byte // a token (RFC 9110 §9.1), case kept
	Target   []byte // raw request-target as received (RFC 9112 §3.2)
	Path     []byte // raw, still percent-encoded path of Target, before '?'; "*" for OPTIONS *; taken from the URI for absolute-form
	RawQuery []byte // after '?', without it; nil if Target has no '?'

	// ProtoMajor and ProtoMinor are 1.0 or 1.1; other versions are
	// refused with 505 before the handler runs. HTTP/2 and HTTP/3
	// streams (stream.go) are 2.0 and 3.0.
	ProtoMajor, ProtoMinor int
	// Protocol is the ":protocol" of an HTTP/2 extended CONNECT (RFC 8441
	// §4: "websocket", the one accepted), nil otherwise. Such a request
	// is a WebSocket opening handshake over the stream (RFC 8441 §5);
	// Hijack hands the stream over as a net.Conn.
	Protocol []byte

	// TLS is the connection's TLS state after its handshake (client
	// certificates, version, cipher suite), nil on a plain connection.
	// It comes from the connection only, never from a proxy's headers;
	// shared by the connection's requests: read-only.
	TLS *tls.ConnectionState
	// Certs is the PEM and DN text of the connection's certificates
	// (the server's, the client's chain), encoded on first use; shared
	// by the connection's requests. Nil when TLS is nil.
	Certs *ConnCerts

	Header []Field // in the order received
	// Host is the Host field value, or the authority of an absolute-form
	// target, which takes precedence (RFC 9112 §3.2.2). Empty for an
	// HTTP/1.0 request without Host.
	Host []byte

	// ContentLength is the body length in bytes: -1 when Chunked, 0 when
	// the request has no body (RFC 9112 §6.3).
	ContentLength int64
	Chunked       bool // Transfer-Encoding: chunked (RFC 9112 §7.1)

	// ExpectContinue is set for "Expect: 100-continue" on an HTTP/1.1
	// request; it is ignored for HTTP/1.0 (RFC 9110 §10.1.1). Body.Read
	// sends the 100 response.
	ExpectContinue bool

	// Close is set when the client asked to close after this exchange:
	// "Connection: close", or HTTP/1.0 without "Connection: keep-alive"
	// (RFC 9112 §9.3). The response then carries "Connection: close".
	Close bool

	Body *Body // never nil; at EOF at once when ContentLength is 0

	RemoteAddr, LocalAddr net.Addr

	// Scheme is the request's URI scheme as the app sees it (WSGI
	// wsgi.url_scheme, ASGI scope "scheme"): "http" on a plain
	// connection, "https" on TLS, or what a trusted proxy's
	// X-Forwarded-Proto/Forwarded says. "" means "http".
	Scheme string

	// Conn is state the handler keeps for the life of the connection the
	// request came on, shared by its requests (ConnData); never nil for
	// a request the Server serves.
	Conn *ConnData

	absHost []byte    // authority of an absolute-form target, while parsing
	addrs   *AddrText // the connection's (Addrs)
}

// HeaderValue returns the value of the first field named name (ASCII
// case-insensitive), or nil. It does not allocate.
func (r *Request) HeaderValue(name string) []byte {
	for i := range r.Header {
		if equalFoldString(r.Header[i].Name, name) {
			return r.Header[i].Value
		}
	}
	return nil
}

func (r *Request) isHead() bool { return string(r.Method) == "HEAD" }

// tchar per RFC 9110 §5.6.2:
//
//	tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
//	        "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
var isTchar = [256]bool{}

// hostChar: the characters of uri-host [ ":" port ] (RFC 3986 §3.2.2:
// unreserved / pct-encoded / sub-delims, plus ":" and the IP-literal brackets).
var isHostChar = [256]bool{}

func init() {
	for c := '0'; c <= '9'; c++ {
		isTchar[c], isHostChar[c] = true, true
	}
	for c := 'a'; c <= 'z'; c++ {
		isTchar[c], isHostChar[c] = true, true
		isTchar[c-32], isHostChar[c-32] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		isTchar[c] = true
	}
	for _, c := range "-._~%!$&'()*+,;=:[]" {
		isHostChar[c] = true
	}
}

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !isTchar[c] {
			return false
		}
	}
	return true
}

// validFieldValue reports whether v may appear in a field value: VCHAR,
// SP, HTAB and obs-text (RFC 9110 §5.5). Every other CTL, DEL included,
// is refused: "a recipient of CR, LF, or NUL within a field value MUST
// either reject the message or replace each of those characters with SP".
func validFieldValue(v []byte) bool {
	for _, c := range v {
		if c < 0x20 && c != '\t' || c == 0x7f {
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

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 32
	}
	return c
}

// equalFoldString compares b to s ignoring ASCII case; s must be lower case
// or any case (both sides are folded).
func equalFoldString(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

// nextLine splits the first CRLF-terminated line off head. A line feed
// not preceded by CR is refused: RFC 9112 §2.2 allows a recipient to accept
// a bare LF, but front proxies disagree on it, so an origin server must not.
// A CR not followed by LF is refused as §2.2 requires ("a recipient of such
// a bare CR MUST consider that element to be invalid").
func nextLine(head []byte) (line, rest []byte, err *protoError) {
	i := bytes.IndexByte(head, '\n')
	if i < 0 {
		return nil, nil, errRequestLine
	}
	if i == 0 || head[i-1] != '\r' {
		return nil, nil, errBareLF
	}
	line = head[:i-1]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, nil, errBareCR
	}
	return line, head[i+1:], nil
}

// parseHead parses a complete request head (request-line, field lines and
// the empty line, every line ending in CRLF) into r, which it resets. The
// slices stored in r point into head. Size limits are enforced while the
// head is read (readHead), not here. On failure the returned error gives
// the status to answer with; the connection is then closed.
func parseHead(head []byte, r *Request) *protoError {
	hdr := r.Header[:0]
	body := r.Body
	*r = Request{Header: hdr, Body: body, RemoteAddr: r.RemoteAddr, LocalAddr: r.LocalAddr, addrs: r.addrs, Conn: r.Conn}

	line, rest, perr := nextLine(head)
	if perr != nil {
		return perr
	}
	if perr := parseRequestLine(line, r); perr != nil {
		return perr
	}

	var (
		hosts    int
		hostAt   = -1 // index in r.Header of the Host field
		clSeen   bool
		cl       int64
		teSeen   bool
		chunked  bool // final coding is chunked
		unknown  bool // a coding other than chunked precedes it
		keepOpen bool // HTTP/1.0 "Connection: keep-alive"
	)
	for {
		line, rest, perr = nextLine(rest)
		if perr != nil {
			return perr
		}
		if len(line) == 0 {
			break
		}
		// RFC 9112 §5.2: "A server that receives an obs-fold in a request
		// message ... MUST either reject the message by sending a 400".
		if line[0] == ' ' || line[0] == '\t' {
			return errObsFold
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			return errFieldName
		}
		name := line[:colon]
		// RFC 9112 §5.1: "No whitespace is allowed between the field name
		// and colon ... A server MUST reject, with a response status code
		// of 400 (Bad Request), any received request message that contains
		// whitespace between a header field name and colon." isToken
		// refuses the whitespace and the empty name alike.
		if !isToken(name) {
			return errFieldName
		}
		value := trimOWS(line[colon+1:])
		if !validFieldValue(value) {
			return errFieldValue
		}
		r.Header = append(r.Header, Field{Name: name, Value: value})

		switch len(name) {
		case 4:
			if equalFoldString(name, "host") {
				hosts++
				hostAt = len(r.Header) - 1
				r.Host = value
			}
		case 6:
			if equalFoldString(name, "expect") && equalFoldString(value, "100-continue") && r.ProtoMinor == 1 {
				r.ExpectContinue = true
			}
		case 10:
			if equalFoldString(name, "connection") {
				c, k, ok := parseConnection(value)
				if !ok {
					return errConnection
				}
				r.Close = r.Close || c
				keepOpen = keepOpen || k
			}
		case 14:
			if equalFoldString(name, "content-length") {
				n, ok := parseContentLength(value)
				// RFC 9110 §8.6: a list of identical values may be
				// accepted; differing values are unrecoverable.
				if !ok || clSeen && n != cl {
					return errContentLength
				}
				clSeen, cl = true, n
			} else if framingAlias(name, "content-length") {
				return errFramingAlias
			}
		case 17:
			if equalFoldString(name, "transfer-encoding") {
				teSeen = true
				if perr := parseTransferEncoding(value, &chunked, &unknown); perr != nil {
					return perr
				}
			} else if framingAlias(name, "transfer-encoding") {
				return errFramingAlias
			}
		}
	}
	if len(rest) != 0 {
		return errRequestLine // bytes after the empty line: not a head
	}

	// RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request)
	// status code to any HTTP/1.1 request message that lacks a Host header
	// field and to any request message that contains more than one Host
	// header field line or a Host header field with an invalid field value."
	if hosts > 1 {
		return errMultiHost
	}
	if hosts == 0 && r.ProtoMinor == 1 {
		return errNoHost
	}
	if !validHost(r.Host) {
		return errBadHost
	}
	if r.absHost != nil {
		// RFC 9112 §3.2.2: the authority of an absolute-form target wins
		// over Host. The Host field is rewritten too, so that every reader
		// (WSGI's HTTP_HOST, the ASGI scope's headers, proxy rules) sees
		// one host; an HTTP/1.0 request without Host gets the field.
		r.Host = r.absHost
		if hostAt >= 0 {
			r.Header[hostAt].Value = r.absHost
		} else {
			r.Header = append(r.Header, Field{Name: hostName, Value: r.absHost})
		}
	}

	if teSeen {
		// RFC 9112 §6.1: TE in HTTP/1.0 is likely faulty framing; we
		// refuse it rather than serve it and close.
		if r.ProtoMinor == 0 {
			return errTEHTTP10
		}
		// RFC 9112 §6.3 item 3: TE together with CL "ought to be handled
		// as an error" — smuggling (case B16).
		if clSeen {
			return errTEAndCL
		}
		// RFC 9112 §6.3 item 4: "If a Transfer-Encoding header field is
		// present in a request and the chunked transfer coding is not the
		// final encoding, the message body length cannot be determined
		// reliably; the server MUST respond with the 400".
		if !chunked {
			return errTransferEnc
		}
		// RFC 9112 §6.1: "A server that receives a request message with a
		// transfer coding it does not understand SHOULD respond with 501".
		if unknown {
			return errTEUnsupported
		}
		r.Chunked = true
		r.ContentLength = -1
	} else if clSeen {
		r.ContentLength = cl
	}

	// RFC 9112 §9.3: HTTP/1.0 persists only with "keep-alive".
	if r.ProtoMinor == 0 && !keepOpen {
		r.Close = true
	}
	return nil
}

// framingAlias reports whether name is the framing field s (lower case)
// spelt with '_' for one or more of its '-': Content_Length,
// TRANSFER_ENCODING. Such a name is a valid token and no field of ours,
// but a front end that maps '_' and '-' alike (CGI-style HTTP_* keys,
// some proxies and WAFs) frames the message by it while we would not: a
// desync (PortSwigger http-request-smuggler's "underjoin1", smuggler's
// exhaustive.py). Framing in doubt: the request is refused.
func framingAlias(name []byte, s string) bool {
	if len(name) != len(s) {
		return false
	}
	for i, c := range name {
		if c == '_' && s[i] == '-' {
			continue
		}
		if lower(c) != s[i] {
			return false
		}
	}
	return true
}

// parseRequestLine parses
//
//	request-line = method SP request-target SP HTTP-version
//
// with exactly one SP between the parts (RFC 9112 §3).
func parseRequestLine(line []byte, r *Request) *protoError {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 0 {
		return errRequestLine
	}
	method := line[:sp1]
	if !isToken(method) {
		return errMethod
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 0 {
		return errRequestLine
	}
	target, version := rest[:sp2], rest[sp2+1:]
	if len(target) == 0 {
		return errRequestLine // two SPs in a row
	}

	// Version first, so that the HTTP/2 preface "PRI * HTTP/2.0" gets 505.
	// HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 §2.3).
	if len(version) != 8 || string(version[:5]) != "HTTP/" || version[6] != '.' ||
		!isDigit(version[5]) || !isDigit(version[7]) {
		return errVersion
	}
	if version[5] != '1' || (version[7] != '0' && version[7] != '1') {
		return errVersionNotSupp
	}
	r.ProtoMajor, r.ProtoMinor = 1, int(version[7]-'0')

	// request-target: printable ASCII only, no SP, CTL, NUL (RFC 9112 §3.2,
	// RFC 3986 — case B18 item 4).
	for _, c := range target {
		if c < 0x21 || c > 0x7e {
			return errTarget
		}
	}
	r.Method, r.Target = method, target

	var pathq []byte
	switch {
	case target[0] == '/': // origin-form (RFC 9112 §3.2.1)
		pathq = target
	case len(target) == 1 && target[0] == '*': // asterisk-form (§3.2.4)
		if string(method) != "OPTIONS" {
			return errTarget
		}
		r.Path = target
		return nil
	default: // absolute-form (§3.2.2); authority-form (§3.2.3) is refused
		host, p, ok := splitAbsolute(target)
		if !ok {
			return errTarget
		}
		r.absHost = host
		if len(p) == 0 || p[0] == '?' {
			pathq = append(rootPath[:1:1], p...) // rare: one allocation
		} else {
			pathq = p
		}
	}
	if q := bytes.IndexByte(pathq, '?'); q >= 0 {
		r.Path, r.RawQuery = pathq[:q], pathq[q+1:]
	} else {
		r.Path = pathq
	}
	// A fragment is not part of a request-target (RFC 9112 §3.2).
	if bytes.IndexByte(pathq, '#') >= 0 {
		return errTarget
	}
	return nil
}

var (
	rootPath = []byte("/")
	hostName = []byte("Host")
)

// splitAbsolute splits an absolute-form target "http://host[:port]/path?q"
// (scheme http or https, case-insensitive) into authority and path+query.
// Userinfo ('@') is refused (RFC 9110 §4.2.4: deprecated for http(s)).
func splitAbsolute(t []byte) (host, rest []byte, ok bool) {
	var n int
	switch {
	case len(t) > 7 && equalFoldString(t[:7], "http://"):
		n = 7
	case len(t) > 8 && equalFoldString(t[:8], "https://"):
		n = 8
	default:
		return nil, nil, false
	}
	a := t[n:]
	end := len(a)
	for i, c := range a {
		if c == '/' || c == '?' {
			end = i
			break
		}
	}
	host = a[:end]
	if len(host) == 0 || !validHost(host) {
		return nil, nil, false
	}
	return host, a[end:], true
}

// validHost reports whether h is uri-host [ ":" port ] (RFC 3986 §3.2.2,
// §3.2.3; port = *DIGIT): host characters only, an IP literal in
// brackets, and at most one ":" outside them, followed by digits. An empty
// h is valid (HTTP/1.0 without Host).
func validHost(h []byte) bool {
	for _, c := range h {
		if !isHostChar[c] {
			return false
		}
	}
	rest := h
	if len(h) > 0 && h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 0 || bytes.IndexByte(h[1:end], '[') >= 0 {
			return false
		}
		rest = h[end+1:]
		if len(rest) > 0 && rest[0] != ':' {
			return false
		}
	} else if bytes.IndexAny(h, "[]") >= 0 {
		return false
	}
	if i := bytes.IndexByte(rest, ':'); i >= 0 {
		for _, c := range rest[i+1:] { // the port: digits only (a second ":" too is refused)
			if !isDigit(c) {
				return false
			}
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseContentLength parses Content-Length = 1*DIGIT (RFC 9110 §8.6),
// accepting a comma list of identical values ("4, 4"). Signs, hex, empty
// elements and values above 2^63-1 are refused.
func parseContentLength(v []byte) (int64, bool) {
	var n int64 = -1
	for len(v) > 0 || n < 0 {
		var elem []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			elem, v = trimOWS(v[:i]), v[i+1:]
			if len(v) == 0 {
				return 0, false // trailing comma
			}
		} else {
			elem, v = trimOWS(v), nil
		}
		if len(elem) == 0 {
			return 0, false
		}
		var x int64
		for _, c := range elem {
			if !isDigit(c) {
				return 0, false
			}
			if x > (1<<63-1-9)/10 {
				return 0, false // overflow
			}
			x = x*10 + int64(c-'0')
		}
		if n >= 0 && x != n {
			return 0, false
		}
		n = x
	}
	return n, true
}

// parseTransferEncoding folds one Transfer-Encoding field value into the
// running state: chunked reports that chunked has been seen (it must be
// the last coding, and appear once: RFC 9112 §6.1, §7), unknown that some
// other coding precedes it. Codings are case-insensitive tokens; empty
// elements and parameters are refused (chunked has none, and we implement
// no other coding).
func parseTransferEncoding(v []byte, chunked, unknown *bool) *protoError {
	for {
		var elem []byte
		i := bytes.IndexByte(v, ',')
		if i >= 0 {
			elem = trimOWS(v[:i])
		} else {
			elem = trimOWS(v)
		}
		if !isToken(elem) {
			return errTransferEnc
		}
		if *chunked {
			return errTransferEnc // something after chunked, or chunked twice
		}
		if equalFoldString(elem, "chunked") {
			*chunked = true
		} else {
			*unknown = true
		}
		if i < 0 {
			return nil
		}
		v = v[i+1:]
	}
}

// parseConnection reads the Connection options (RFC 9110 §7.6.1):
// a comma list of tokens; empty elements are skipped.
func parseConnection(v []byte) (close, keepAlive, ok bool) {
	for len(v) > 0 {
		var elem []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			elem, v = trimOWS(v[:i]), v[i+1:]
		} else {
			elem, v = trimOWS(v), nil
		}
		if len(elem) == 0 {
			continue
		}
		if !isToken(elem) {
			return false, false, false
		}
		switch {
		case equalFoldString(elem, "close"):
			close = true
		case equalFoldString(elem, "keep-alive"):
			keepAlive = true
		}
	}
	return close, keepAlive, true
}
