package wsgi

import (
	"encoding/binary"
	"net"
	"strconv"

	"turnstile/internal/http1"
)

// environ keys known by id: C interns each once (ts_wsgi_setup) and the
// request block carries the id instead of the name. Order is the id - 1.
var knownKeys = []string{
	"REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING",
	"CONTENT_TYPE", "CONTENT_LENGTH", "SERVER_NAME", "SERVER_PORT",
	"SERVER_PROTOCOL", "REMOTE_ADDR", "REMOTE_PORT", "RAW_URI",
	"HTTP_HOST", "HTTP_USER_AGENT", "HTTP_ACCEPT", "HTTP_ACCEPT_ENCODING",
	"HTTP_ACCEPT_LANGUAGE", "HTTP_CONNECTION", "HTTP_COOKIE", "HTTP_REFERER",
	"HTTP_CACHE_CONTROL", "HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO",
	"HTTP_AUTHORIZATION", "HTTP_ORIGIN", "HTTP_UPGRADE_INSECURE_REQUESTS",
	"HTTP_X_REQUESTED_WITH", "HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE",
	"HTTP_EXPECT", "HTTP_PRAGMA", "HTTP_SEC_FETCH_MODE",
}

const (
	keyRequestMethod = iota + 1
	keyScriptName
	keyPathInfo
	keyQueryString
	keyContentType
	keyContentLength
	keyServerName
	keyServerPort
	keyServerProtocol
	keyRemoteAddr
	keyRemotePort
	keyRawURI
)

var keyID = func() map[string]uint16 {
	m := make(map[string]uint16, len(knownKeys))
	for i, k := range knownKeys {
		m[k] = uint16(i + 1)
	}
	return m
}()

// entryHeaderBytes matches TS_ENTRY_HDR in wsgi.h.
const entryHeaderBytes = 8

// appendEntry appends one environ entry to the request block (layout in
// wsgi.h). key is used when id is 0.
func appendEntry(b []byte, id uint16, key, val []byte) []byte {
	var hdr [entryHeaderBytes]byte
	klen := 0
	if id == 0 {
		klen = len(key)
	}
	binary.NativeEndian.PutUint16(hdr[0:], id)
	binary.NativeEndian.PutUint16(hdr[2:], uint16(klen))
	binary.NativeEndian.PutUint32(hdr[4:], uint32(len(val)))
	b = append(b, hdr[:]...)
	if id == 0 {
		b = append(b, key...)
	}
	return append(b, val...)
}

// addrCache keeps the text of the last remote and local addresses: a slot
// is usually reused by the same connection.
type addrCache struct {
	remote, local           net.Addr
	remoteHost, remotePort  []byte
	localHost, localPort    []byte
}

func splitAddr(a net.Addr) (host, port []byte) {
	if ta, ok := a.(*net.TCPAddr); ok {
		return []byte(ta.IP.String()), strconv.AppendInt(nil, int64(ta.Port), 10)
	}
	if a == nil {
		return nil, nil
	}
	h, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return []byte(a.String()), nil
	}
	return []byte(h), []byte(p)
}

func (c *addrCache) update(r *http1.Request) {
	if c.remote != r.RemoteAddr {
		c.remote = r.RemoteAddr
		c.remoteHost, c.remotePort = splitAddr(r.RemoteAddr)
	}
	if c.local != r.LocalAddr {
		c.local = r.LocalAddr
		c.localHost, c.localPort = splitAddr(r.LocalAddr)
	}
}

// buildEnviron appends the request's environ entries (PEP 3333, "environ
// Variables") to b and returns it with the entry count. Everything that
// can be done without the GIL is done here: percent-decoding, the HTTP_*
// names, joining repeated fields.
func buildEnviron(b []byte, r *http1.Request, scriptName []byte, ac *addrCache, scratch *[]byte) ([]byte, int) {
	n := 0
	add := func(id uint16, key, val []byte) {
		b = appendEntry(b, id, key, val)
		n++
	}
	add(keyRequestMethod, nil, r.Method)

	// PATH_INFO: percent-decoded bytes, as latin-1 (PEP 3333, "Unicode
	// Issues"); SCRIPT_NAME is the root path, stripped from the front.
	path := percentDecode((*scratch)[:0], r.Path)
	*scratch = path
	if len(scriptName) > 0 && hasPathPrefix(path, scriptName) {
		path = path[len(scriptName):]
	}
	add(keyScriptName, nil, scriptName)
	add(keyPathInfo, nil, path)
	add(keyQueryString, nil, r.RawQuery)
	add(keyRawURI, nil, r.Target)
	if r.ProtoMinor == 0 {
		add(keyServerProtocol, nil, []byte("HTTP/1.0"))
	} else {
		add(keyServerProtocol, nil, []byte("HTTP/1.1"))
	}
	ac.update(r)
	add(keyRemoteAddr, nil, ac.remoteHost)
	add(keyRemotePort, nil, ac.remotePort)

	// SERVER_NAME and SERVER_PORT from Host, else the local address.
	if host := r.Host; len(host) > 0 {
		h, p := splitHostPort(host)
		add(keyServerName, nil, h)
		if len(p) == 0 {
			p = []byte("80")
		}
		add(keyServerPort, nil, p)
	} else {
		add(keyServerName, nil, ac.localHost)
		add(keyServerPort, nil, ac.localPort)
	}

	var keybuf [128]byte
	for i := range r.Header {
		name := r.Header[i].Name
		if indexByte(name, '_') >= 0 {
			// A name with '_' would collide with its '-' twin in the
			// environ (the header-spoofing class of bug): dropped.
			continue
		}
		if seenBefore(r.Header[:i], name) {
			continue // joined into the first occurrence below
		}
		key := envKey(keybuf[:0], name)
		val := r.Header[i].Value
		sep := ", "
		if string(key) == "HTTP_COOKIE" {
			sep = "; " // RFC 6265 §5.4
		}
		joined := false
		for j := i + 1; j < len(r.Header); j++ {
			if equalFold(r.Header[j].Name, name) {
				if !joined {
					val = append([]byte(nil), val...)
					joined = true
				}
				val = append(append(val, sep...), r.Header[j].Value...)
			}
		}
		id := keyID[string(key)]
		switch string(key) {
		case "HTTP_CONTENT_TYPE":
			id, key = keyContentType, nil
		case "HTTP_CONTENT_LENGTH":
			id, key = keyContentLength, nil
		}
		add(id, key, val)
	}
	return b, n
}

func envKey(dst, name []byte) []byte {
	dst = append(dst, "HTTP_"...)
	for _, c := range name {
		switch {
		case c == '-':
			c = '_'
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func seenBefore(prev []http1.Field, name []byte) bool {
	for i := range prev {
		if equalFold(prev[i].Name, name) {
			return true
		}
	}
	return false
}

func equalFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// hasPathPrefix reports whether path starts with the root path prefix at a
// segment boundary ("/app" matches "/app" and "/app/x", not "/apple").
func hasPathPrefix(path, prefix []byte) bool {
	if len(path) < len(prefix) || string(path[:len(prefix)]) != string(prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/'
}

// splitHostPort splits a Host value; an IPv6 literal keeps its brackets
// off. The port is nil when absent.
func splitHostPort(h []byte) (host, port []byte) {
	if len(h) > 0 && h[0] == '[' {
		end := indexByte(h, ']')
		if end < 0 {
			return h, nil
		}
		host = h[1:end]
		if end+1 < len(h) && h[end+1] == ':' {
			port = h[end+2:]
		}
		return host, port
	}
	for i := len(h) - 1; i >= 0; i-- {
		if h[i] == ':' {
			return h[:i], h[i+1:]
		}
	}
	return h, nil
}

// percentDecode appends the percent-decoded form of p to dst. A '%' not
// followed by two hex digits is kept as is, as gunicorn and wsgiref do.
func percentDecode(dst, p []byte) []byte {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' && i+2 < len(p) {
			h, ok1 := unhex(p[i+1])
			l, ok2 := unhex(p[i+2])
			if ok1 && ok2 {
				dst = append(dst, h<<4|l)
				i += 2
				continue
			}
		}
		dst = append(dst, c)
	}
	return dst
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
