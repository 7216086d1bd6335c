package websocket

import (
	"strings"
	"testing"

	"turnstile/internal/http1"
)

const testKey = "dGhlIHNhbXBsZSBub25jZQ==" // RFC 6455 §1.3's sample nonce

// request builds a parsed request from a method, a minor version and
// "Name: value" lines.
func request(method string, minor int, fields ...string) *http1.Request {
	r := &http1.Request{Method: []byte(method), ProtoMajor: 1, ProtoMinor: minor, Path: []byte("/")}
	for _, f := range fields {
		name, value, _ := strings.Cut(f, ":")
		r.Header = append(r.Header, http1.Field{Name: []byte(name), Value: []byte(strings.TrimSpace(value))})
	}
	return r
}

var goodFields = []string{"Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: " + testKey}

func with(extra ...string) []string { return append(append([]string(nil), goodFields...), extra...) }

// TestRFC6455_IsUpgrade: an Upgrade field whose token list holds
// "websocket", in any case.
func TestRFC6455_IsUpgrade(t *testing.T) {
	for _, tc := range []struct {
		id     string
		fields []string
		want   bool
	}{
		{"websocket", []string{"Upgrade: websocket"}, true},
		{"case", []string{"UPGRADE: WebSocket"}, true},
		{"list", []string{"Upgrade: h2c, websocket"}, true},
		{"list-spaces", []string{"Upgrade: h2c ,\twebsocket "}, true},
		{"other", []string{"Upgrade: h2c"}, false},
		{"prefix", []string{"Upgrade: websockets"}, false},
		{"none", []string{"Connection: Upgrade"}, false},
		{"other-field", []string{"X-Upgrade: websocket"}, false},
	} {
		if got := IsUpgrade(request("GET", 1, tc.fields...)); got != tc.want {
			t.Errorf("%s: IsUpgrade = %v; want %v", tc.id, got, tc.want)
		}
	}
}

// TestRFC6455_CheckHandshake: RFC 6455 §4.2.1 before the app is called;
// 426 for another version (§4.2.2); Connection and Upgrade are
// case-insensitive token lists.
func TestRFC6455_CheckHandshake(t *testing.T) {
	for _, tc := range []struct {
		id     string
		req    *http1.Request
		status int
	}{
		{"ok", request("GET", 1, goodFields...), 0},
		{"tokens-case-and-lists", request("GET", 1, "Upgrade: WebSocket", "Connection: keep-alive, UPGRADE", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: "+testKey), 0},
		{"connection-in-two-fields", request("GET", 1, "Upgrade: websocket", "Connection: keep-alive", "Connection: upgrade", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: "+testKey), 0},
		{"no-key", request("GET", 1, "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13"), 400},
		{"short-key", request("GET", 1, "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: c2hvcnQ="), 400},
		{"key-not-base64", request("GET", 1, "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: !!!!!!!!!!!!!!!!!!!!!!!!"), 400},
		{"two-keys", request("GET", 1, with("Sec-WebSocket-Key: "+testKey)...), 400},
		{"no-connection-upgrade", request("GET", 1, "Upgrade: websocket", "Connection: keep-alive", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: "+testKey), 400},
		{"post", request("POST", 1, goodFields...), 400},
		{"get-lower-case", request("get", 1, goodFields...), 400},
		{"http10", request("GET", 0, goodFields...), 400},
		{"bad-protocol-token", request("GET", 1, with("Sec-WebSocket-Protocol: a b")...), 400},
		{"protocol-separator", request("GET", 1, with("Sec-WebSocket-Protocol: a/b")...), 400},
		{"version-8", request("GET", 1, "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 8", "Sec-WebSocket-Key: "+testKey), 426},
		{"no-version", request("GET", 1, "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Key: "+testKey), 426},
		{"two-versions", request("GET", 1, with("Sec-WebSocket-Version: 13")...), 426},
	} {
		t.Run(tc.id, func(t *testing.T) {
			_, status, why := CheckHandshake(tc.req)
			if status != tc.status {
				t.Errorf("CheckHandshake = %d %q; want %d", status, why, tc.status)
			}
			if (status != 0) != (why != "") {
				t.Errorf("status %d with reason %q", status, why)
			}
		})
	}

	// A body refuses the handshake (it is a GET without content).
	r := request("GET", 1, goodFields...)
	r.ContentLength = 5
	if _, status, _ := CheckHandshake(r); status != 400 {
		t.Errorf("with a body: %d; want 400", status)
	}
	r.ContentLength, r.Chunked = -1, true
	if _, status, _ := CheckHandshake(r); status != 400 {
		t.Errorf("chunked: %d; want 400", status)
	}
}

// TestRFC6455_HandshakeFields: the subprotocols in order (empty list
// elements skipped), the extension fields as sent, the key.
func TestRFC6455_HandshakeFields(t *testing.T) {
	hs, status, why := CheckHandshake(request("GET", 1, with(
		"Sec-WebSocket-Protocol: chat.v2, , json",
		"Sec-WebSocket-Protocol: mqtt",
		"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits",
		"Sec-WebSocket-Extensions: x-other",
	)...))
	if status != 0 {
		t.Fatalf("CheckHandshake = %d %q", status, why)
	}
	var protos []string
	for _, p := range hs.Protocols {
		protos = append(protos, string(p))
	}
	if got := strings.Join(protos, "|"); got != "chat.v2|json|mqtt" {
		t.Errorf("Protocols %q; want chat.v2|json|mqtt", got)
	}
	if got := strings.Join(hs.Extensions, "|"); got != "permessage-deflate; client_max_window_bits|x-other" {
		t.Errorf("Extensions %q", got)
	}
	if hs.Key != testKey {
		t.Errorf("Key %q; want %q", hs.Key, testKey)
	}
}
