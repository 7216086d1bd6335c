package websocket

// The opening handshake (RFC 6455 §4.2.1, §4.2.2): the checks made in Go
// before the app sees the request.

import (
	"bytes"
	"encoding/base64"
	"strings"

	"turnstile/internal/http1"
	"turnstile/internal/reqblock"
)

// IsUpgrade reports whether r asks for a WebSocket: an Upgrade field
// whose token list holds "websocket" (case-insensitive). Whether it asks
// correctly is CheckHandshake's job.
//
// Over HTTP/2 the request is an extended CONNECT with :protocol websocket
// (RFC 8441 §4), which http1 gives as Request.Protocol.
func IsUpgrade(r *http1.Request) bool {
	if r.Protocol != nil {
		return reqblock.EqualFold(r.Protocol, []byte("websocket"))
	}
	for i := range r.Header {
		f := &r.Header[i]
		if len(f.Name) == 7 && reqblock.EqualFold(f.Name, []byte("upgrade")) && hasToken(f.Value, "websocket") {
			return true
		}
	}
	return false
}

// hasToken reports whether the comma-separated list v holds token
// (ASCII case-insensitive, surrounding whitespace ignored).
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var elem []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			elem, v = v[:i], v[i+1:]
		} else {
			elem, v = v, nil
		}
		elem = bytes.Trim(elem, " \t")
		if reqblock.EqualFold(elem, []byte(token)) {
			return true
		}
	}
	return false
}

// Handshake is what CheckHandshake extracts from a valid request.
type Handshake struct {
	Key        string   // Sec-WebSocket-Key, as sent
	Protocols  [][]byte // Sec-WebSocket-Protocol tokens, in order; they alias the request's bytes
	Extensions []string // Sec-WebSocket-Extensions field values, in order
}

// CheckHandshake validates an opening handshake (RFC 6455 §4.2.1) and
// returns it, or the status to refuse it with (400; 426 for a version
// other than 13, §4.2.2) and a fixed reason for the body.
//
// An HTTP/2 extended CONNECT (RFC 8441 §5) has no Connection, Upgrade or
// Sec-WebSocket-Key: it needs :protocol websocket and
// Sec-WebSocket-Version 13, and its Key is h2Key (gorilla's Upgrader
// checks one is there; the Accept computed from it is not sent).
func CheckHandshake(r *http1.Request) (hs Handshake, status int, why string) {
	h2 := r.Protocol != nil
	if h2 {
		if string(r.Method) != "CONNECT" {
			return hs, 400, "a WebSocket over HTTP/2 is an extended CONNECT"
		}
		hs.Key = h2Key
	} else if string(r.Method) != "GET" {
		return hs, 400, "a WebSocket handshake must be a GET"
	}
	if r.ProtoMajor == 1 && r.ProtoMinor < 1 {
		return hs, 400, "a WebSocket handshake needs HTTP/1.1"
	}
	if !h2 && (r.ContentLength != 0 || r.Chunked) {
		return hs, 400, "a WebSocket handshake has no body"
	}
	var conn, version bool
	keys, versions := 0, 0
	for i := range r.Header {
		f := &r.Header[i]
		switch {
		case reqblock.EqualFold(f.Name, []byte("connection")):
			conn = conn || hasToken(f.Value, "upgrade")
		case reqblock.EqualFold(f.Name, []byte("sec-websocket-version")):
			versions++
			version = string(bytes.Trim(f.Value, " \t")) == "13"
		case reqblock.EqualFold(f.Name, []byte("sec-websocket-key")):
			keys++
			hs.Key = string(f.Value)
		case reqblock.EqualFold(f.Name, []byte("sec-websocket-protocol")):
			v := f.Value
			for len(v) > 0 {
				var elem []byte
				if i := bytes.IndexByte(v, ','); i >= 0 {
					elem, v = v[:i], v[i+1:]
				} else {
					elem, v = v, nil
				}
				if elem = bytes.Trim(elem, " \t"); len(elem) == 0 {
					continue
				}
				if !isToken(elem) {
					return hs, 400, "invalid Sec-WebSocket-Protocol"
				}
				hs.Protocols = append(hs.Protocols, elem)
			}
		case reqblock.EqualFold(f.Name, []byte("sec-websocket-extensions")):
			hs.Extensions = append(hs.Extensions, string(f.Value))
		}
	}
	if !conn && !h2 {
		return hs, 400, "Connection must list upgrade"
	}
	if versions != 1 || !version {
		return hs, 426, "Sec-WebSocket-Version must be 13"
	}
	if h2 {
		return hs, 0, ""
	}
	// §4.2.1 item 5: "a base64-encoded value that, when decoded, is 16
	// bytes in length".
	if keys != 1 {
		return hs, 400, "exactly one Sec-WebSocket-Key is required"
	}
	if k, err := base64.StdEncoding.DecodeString(hs.Key); err != nil || len(k) != 16 {
		return hs, 400, "invalid Sec-WebSocket-Key"
	}
	return hs, 0, ""
}

// h2Key stands for the Sec-WebSocket-Key an HTTP/2 handshake does not
// have (RFC 8441 §5): RFC 6455 §1.3's sample nonce.
const h2Key = "dGhlIHNhbXBsZSBub25jZQ=="

// isToken reports whether b is a non-empty token (RFC 9110 §5.6.2).
func isToken(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return len(b) > 0
}

var upgradeRequired = []byte("Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nContent-Type: text/plain; charset=utf-8\r\n")

// Refuse answers a handshake CheckHandshake refused: status with why as a
// text/plain body; a 426 names the version the server speaks (RFC 6455
// §4.2.2).
func Refuse(w *http1.ResponseWriter, status int, why string) {
	body := []byte(why + "\n")
	if status == 426 {
		w.WriteHead(426, []byte("426 Upgrade Required"), upgradeRequired, int64(len(body)), false)
		w.Write(body)
		return
	}
	w.WriteSimple(status, "text/plain; charset=utf-8", body, nil)
}
