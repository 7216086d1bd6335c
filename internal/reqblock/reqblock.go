// Package reqblock writes the request block that the interface bridges
// (internal/wsgi, internal/asgi) hand to C: a flat run of entries that a
// Python thread turns into an environ or a scope in one pass.
//
// An entry is: uint16 id (0 = the key follows), uint16 key length, uint32
// value length, the key bytes (when id is 0), the value bytes; native byte
// order, no padding. Each bridge gives the ids its own meaning.
package reqblock

import (
	"encoding/binary"
)

// EntryHeaderBytes is the fixed part of an entry (TS_ENTRY_HDR in C; the
// one C reader is ts_entry_next in internal/python/tspy.h).
const EntryHeaderBytes = 8

// AppendEntry appends one entry to b. key is written only when id is 0.
func AppendEntry(b []byte, id uint16, key, val []byte) []byte {
	var hdr [EntryHeaderBytes]byte
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

// HasPathPrefix reports whether path starts with the root path prefix at a
// segment boundary ("/app" matches "/app" and "/app/x", not "/apple").
func HasPathPrefix(path, prefix []byte) bool {
	if len(path) < len(prefix) || string(path[:len(prefix)]) != string(prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/'
}

// SplitHostPort splits a Host field value; an IPv6 literal loses its
// brackets. The port is nil when absent.
func SplitHostPort(h []byte) (host, port []byte) {
	if len(h) > 0 && h[0] == '[' {
		end := IndexByte(h, ']')
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

// PercentDecode appends the percent-decoded form of p to dst. A '%' not
// followed by two hex digits is kept as is, as gunicorn and uvicorn do.
func PercentDecode(dst, p []byte) []byte {
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

// IndexByte is bytes.IndexByte without the import in callers' hot loops.
func IndexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// EqualFold reports whether a and b are equal under ASCII case folding.
func EqualFold(a, b []byte) bool {
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
