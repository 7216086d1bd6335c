package http1

import "testing"

func TestIsProxyHeader(t *testing.T) {
	for head, want := range map[string]bool{
		"\x00\r\nQUIT\n":                     true, // v2, after its two CRLFs were skipped
		"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n": true,
		"PROXY TCP6 ::1 ::1 1 2\r\n":         true,
		"PROXY UNKNOWN\r\n":                  true,
		"PROXYFIND / HTTP/1.1\r\n":           false,
		"PROXY / HTTP/1.1\r\n":               false, // a method named PROXY is the app's
		"GET / HTTP/1.1\r\n":                 false,
		"\r\n\x00\r\nQUIT\n":                 false,
	} {
		if got := isProxyHeader([]byte(head)); got != want {
			t.Errorf("isProxyHeader(%q) = %v, want %v", head, got, want)
		}
	}
	if !isProxyRecord([5]byte{'P', 'R', 'O', 'X', 'Y'}) || !isProxyRecord([5]byte{'\r', '\n', '\r', '\n', 0}) || isProxyRecord([5]byte{0x16, 3, 1, 0, 5}) {
		t.Error("isProxyRecord")
	}
}
