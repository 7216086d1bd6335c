package tests

// Response trailers (RFC 9110 §6.5): the ASGI http.response.trailers
// extension after a chunked HTTP/1.1 body (RFC 9112 §7.1.2) and as the
// HEADERS frame ending an HTTP/2 stream (RFC 9113 §8.1).

import (
	"strings"
	"testing"
	"time"
)

func TestTrailers_ASGI_HTTP1(t *testing.T) {
	s := Start(t, "trailers_asgi:app")
	for _, tc := range []struct{ path, body string }{
		{"/trailers", "1\r\na\r\n2\r\nb1\r\n"},
		{"/whole", "3\r\nab1\r\n"},
	} {
		out, _ := Raw(t, s.Addr, "GET "+tc.path+" HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nConnection: close\r\n\r\n", 5*time.Second)
		want := tc.body + "0\r\nx-checksum: abc\r\nx-more: 1\r\n\r\n"
		if !strings.Contains(out, "Transfer-Encoding: chunked\r\n") || !strings.HasSuffix(out, "\r\n\r\n"+want) {
			t.Errorf("%s: %q\nwant chunked, ending %q", tc.path, out, want)
		}
	}
	for _, path := range []string{"/cl", "/unasked"} {
		out, _ := Raw(t, s.Addr, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || strings.Contains(out, "x-checksum: abc") {
			t.Errorf("%s (no trailers sent): %q", path, out)
		}
	}
	// HTTP/1.0: a close-delimited body has nowhere to carry them.
	out, _ := Raw(t, s.Addr, "GET /trailers HTTP/1.0\r\nHost: x\r\n\r\n", 5*time.Second)
	if !strings.HasSuffix(out, "\r\n\r\nab1") {
		t.Errorf("HTTP/1.0 /trailers: %q", out)
	}
}

func TestTrailers_ASGI_HTTP2(t *testing.T) {
	s := Start(t, "trailers_asgi:app")
	for _, path := range []string{"/trailers", "/whole"} {
		blocks, body := h2Exchange(t, s.Addr, path)
		if len(blocks) != 2 {
			t.Errorf("%s: %d header blocks %v; want the head and the trailers", path, len(blocks), blocks)
			continue
		}
		if st := fieldValues(blocks[0], ":status"); len(st) != 1 || st[0] != "200" {
			t.Errorf("%s head %v", path, blocks[0])
		}
		tr := blocks[1]
		if len(fieldValues(tr, ":status")) != 0 || strings.Join(fieldValues(tr, "x-checksum"), ",") != "abc" || strings.Join(fieldValues(tr, "x-more"), ",") != "1" {
			t.Errorf("%s trailers %v; want x-checksum: abc, x-more: 1", path, tr)
		}
		if body != "ab1" {
			t.Errorf("%s body %q", path, body)
		}
	}
	for _, path := range []string{"/cl", "/unasked"} {
		blocks, _ := h2Exchange(t, s.Addr, path)
		if len(blocks) != 1 {
			t.Errorf("%s: header blocks %v; want the head alone", path, blocks)
		}
	}
}
