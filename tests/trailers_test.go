package tests

// Response trailers (RFC 9110 §6.5): the ASGI http.response.trailers
// extension after a chunked HTTP/1.1 body (RFC 9112 §7.1.2) and as the
// HEADERS frame ending an HTTP/2 stream (RFC 9113 §8.1) or an HTTP/3 one
// (RFC 9114 §4.1).

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTrailers_ASGI_HTTP1(t *testing.T) {
	s := Start(t, "trailers_asgi:app")
	for _, path := range []string{"/trailers", "/whole"} {
		out, _ := Raw(t, s.Addr, "GET "+path+" HTTP/1.1\r\nHost: x\r\nTE: trailers\r\nConnection: close\r\n\r\n", 5*time.Second)
		body, trailer, ok := dechunk(out)
		if !strings.Contains(out, "Transfer-Encoding: chunked\r\n") || !ok || body != "ab1" || trailer != "x-checksum: abc\r\nx-more: 1\r\n" {
			t.Errorf("%s: %q\nwant chunked \"ab1\" then the trailers x-checksum and x-more", path, out)
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

// dechunk returns the chunked body of the response raw and its trailer
// section (RFC 9112 §7.1), ok false when raw is not a whole chunked body.
func dechunk(raw string) (body, trailer string, ok bool) {
	_, rest, found := strings.Cut(raw, "\r\n\r\n")
	if !found {
		return "", "", false
	}
	var b strings.Builder
	for {
		line, after, found := strings.Cut(rest, "\r\n")
		if !found {
			return "", "", false
		}
		n, err := strconv.ParseInt(line, 16, 64)
		if err != nil || int64(len(after)) < n+2 {
			return "", "", false
		}
		if n == 0 {
			if !strings.HasSuffix(after, "\r\n") {
				return "", "", false
			}
			return b.String(), strings.TrimSuffix(after, "\r\n"), true
		}
		b.WriteString(after[:n])
		rest = after[n+2:]
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

// Connection-specific fields in an app's trailers are dropped over HTTP/2
// (RFC 9113 §8.2.2: a message with one is malformed): curl failed the
// stream with PROTOCOL_ERROR (exit 92) when they went out.
func TestTrailers_ASGI_HTTP2_ConnectionSpecific(t *testing.T) {
	s := Start(t, "trailers_asgi:app")
	blocks, body := h2Exchange(t, s.Addr, "/hop")
	if len(blocks) != 2 || body != "ab1" {
		t.Fatalf("header blocks %v, body %q; want the head and the trailers, ab1", blocks, body)
	}
	for _, name := range []string{"te", "upgrade", "proxy-connection"} {
		if v := fieldValues(blocks[1], name); len(v) != 0 {
			t.Errorf("trailers carry %s: %v", name, v)
		}
	}
	if v := fieldValues(blocks[1], "x-checksum"); len(v) != 1 || v[0] != "abc" {
		t.Errorf("trailers %v; want x-checksum: abc", blocks[1])
	}
	if out, err := runCurl(t, "--http2-prior-knowledge", s.URL+"/hop"); err != nil || out != "ab1" {
		t.Errorf("curl: %q %v", out, err)
	}
}

// Over HTTP/3 the trailers are the HEADERS frame after the DATA frames
// (RFC 9114 §4.1), as quic-go's client reads them into resp.Trailer
// (they were dropped while the scope advertised the extension).
func TestTrailers_ASGI_HTTP3(t *testing.T) {
	p := newPKI(t)
	s := startH3(t, p, "trailers_asgi:app")
	c := h3Client(t, p)
	for _, path := range []string{"/trailers", "/whole", "/cl", "/unasked"} {
		resp, err := c.Get(httpsURL(s) + path)
		if err != nil {
			t.Fatalf("%s over HTTP/3: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.ProtoMajor != 3 || resp.StatusCode != 200 {
			t.Fatalf("%s: %s %d, %v", path, resp.Proto, resp.StatusCode, err)
		}
		got := resp.Trailer.Get("X-Checksum") + "," + resp.Trailer.Get("X-More")
		want := "abc,1"
		if path == "/cl" || path == "/unasked" {
			want = ","
		}
		if got != want {
			t.Errorf("%s: trailers %v; want x-checksum, x-more %q", path, resp.Trailer, want)
		}
		if path != "/cl" && string(body) != "ab1" {
			t.Errorf("%s body %q", path, body)
		}
	}
}
