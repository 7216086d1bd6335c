package websocket

import (
	"strings"
	"testing"
)

// TestRFC7692_NegotiateDeflate: offers judged by RFC 7692 §5 and §7 (the
// table of tests/websocket_rfc_test.go's TestWS_DeflateNegotiation, which
// also checks what goes on the wire, plus the parser's corners).
func TestRFC7692_NegotiateDeflate(t *testing.T) {
	const base = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
	for _, tc := range []struct {
		id    string
		offer []string // Sec-WebSocket-Extensions fields
		want  string
	}{
		{"plain", []string{"permessage-deflate"}, base},
		{"browser", []string{"permessage-deflate; client_max_window_bits"}, base},
		{"all-params", []string{"permessage-deflate; server_no_context_takeover; client_no_context_takeover; client_max_window_bits=9; server_max_window_bits=15"}, base + "; server_max_window_bits=15"},
		{"server-max-15-quoted", []string{`permessage-deflate; server_max_window_bits="15"`}, base + "; server_max_window_bits=15"},
		{"server-max-10", []string{"permessage-deflate; server_max_window_bits=10"}, ""},
		{"server-max-10-then-plain", []string{"permessage-deflate; server_max_window_bits=10, permessage-deflate; client_max_window_bits"}, base},
		{"server-max-no-value", []string{"permessage-deflate; server_max_window_bits"}, ""},
		{"server-max-16", []string{"permessage-deflate; server_max_window_bits=16"}, ""},
		{"client-max-7", []string{"permessage-deflate; client_max_window_bits=7"}, ""},
		{"client-max-8", []string{"permessage-deflate; client_max_window_bits=8"}, base},
		{"client-max-leading-zero", []string{"permessage-deflate; client_max_window_bits=09"}, ""},
		{"client-max-not-a-number", []string{"permessage-deflate; client_max_window_bits=abc"}, ""},
		{"unknown-param", []string{"permessage-deflate; foo=1"}, ""},
		{"unknown-param-then-plain", []string{"permessage-deflate; foo, permessage-deflate"}, base},
		{"repeated-param", []string{"permessage-deflate; client_no_context_takeover; client_no_context_takeover"}, ""},
		{"repeated-window", []string{"permessage-deflate; client_max_window_bits=10; client_max_window_bits=10"}, ""},
		{"value-on-no-context-takeover", []string{"permessage-deflate; server_no_context_takeover=1"}, ""},
		{"other-extension-first", []string{"x-webkit-deflate-frame, permessage-deflate"}, base},
		{"two-fields", []string{`permessage-deflate; bogus="a,b"`, "permessage-deflate"}, base},
		{"unterminated-quote", []string{`permessage-deflate; client_max_window_bits="10`}, ""},
		{"quoted-pair", []string{`permessage-deflate; client_max_window_bits="1\0"`}, base},
		{"quoted-not-a-token", []string{`permessage-deflate; client_max_window_bits="1 0"`}, ""},
		{"name-case", []string{"Permessage-Deflate"}, ""},
		{"empty-elements", []string{", ,permessage-deflate"}, base},
		{"none", nil, ""},
		{"other-only", []string{"x-webkit-deflate-frame"}, ""},
	} {
		if got := NegotiateDeflate(tc.offer); got != tc.want {
			t.Errorf("%s: NegotiateDeflate(%q) = %q; want %q", tc.id, strings.Join(tc.offer, " | "), got, tc.want)
		}
	}
}
