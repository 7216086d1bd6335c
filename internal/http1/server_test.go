package http1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testServer is a Server on 127.0.0.1:0 running the echo handler, with
// its logs piped to t.Logf and the paths it served recorded.
type testServer struct {
	*Server
	addr  string
	mu    sync.Mutex
	paths []string
}

func (ts *testServer) served() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.paths...)
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// echo answers "method=M path=P query=Q" plus one "name: value" line per
// header, then "body=" and the body.
func (ts *testServer) echo(w *ResponseWriter, r *Request) {
	ts.mu.Lock()
	ts.paths = append(ts.paths, string(r.Path))
	ts.mu.Unlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "method=%s path=%s query=%s\n", r.Method, r.Path, r.RawQuery)
	for _, f := range r.Header {
		fmt.Fprintf(&sb, "%s: %q\n", f.Name, f.Value)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the server answers the body error
	}
	fmt.Fprintf(&sb, "body=%s\n", body)
	for _, f := range r.Body.Trailer() {
		fmt.Fprintf(&sb, "trailer %s: %q\n", f.Name, f.Value)
	}
	w.WriteSimple(200, "text/plain", []byte(sb.String()), nil)
}

func newTestServer(t testing.TB, cfg func(*Server), h ...HandlerFunc) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{addr: ln.Addr().String()}
	ts.Server = &Server{
		Handler: HandlerFunc(ts.echo),
		Logger:  slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if len(h) > 0 {
		hf := h[0]
		ts.Server.Handler = HandlerFunc(func(w *ResponseWriter, r *Request) {
			ts.mu.Lock()
			ts.paths = append(ts.paths, string(r.Path))
			ts.mu.Unlock()
			hf(w, r)
		})
	}
	if cfg != nil {
		cfg(ts.Server)
	}
	done := make(chan error, 1)
	go func() { done <- ts.Serve(ln) }()
	t.Cleanup(func() {
		ts.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve = %v; want ErrServerClosed", err)
		}
	})
	return ts
}

// exchange sends raw, then reads until EOF or wait elapses. eof reports
// whether the server closed the connection.
func (ts *testServer) exchange(t testing.TB, raw string, wait time.Duration) (out string, eof bool) {
	t.Helper()
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	b, err := io.ReadAll(c)
	return string(b), err == nil
}

var statusRE = regexp.MustCompile(`HTTP/1\.[01] (\d{3}) `)

// statuses lists the status codes of the responses in out, in order.
func statuses(out string) []int {
	var s []int
	for _, m := range statusRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		s = append(s, n)
	}
	return s
}

// rejectCase is one request that must get exactly one response with
// status want, then EOF, and must never reach the handler — unless the
// head is valid and only the body is bad: the handler then runs and meets
// the error in Body.Read (ids starting "chunk").
type rejectCase struct {
	id   string
	raw  string
	want int
}

func (tc rejectCase) bodyOnly() bool { return strings.HasPrefix(tc.id, "chunk") }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func runRejects(t *testing.T, ts *testServer, cases []rejectCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			before := len(ts.served())
			out, eof := ts.exchange(t, tc.raw, 3*time.Second)
			got := statuses(out)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("statuses = %v; want [%d]\n%s", got, tc.want, out)
			}
			if !eof {
				t.Errorf("connection left open after %d; want EOF", tc.want)
			}
			if !strings.Contains(out, "Connection: close\r\n") {
				t.Errorf("response lacks Connection: close:\n%s", out)
			}
			if s := ts.served(); len(s) != before+btoi(tc.bodyOnly()) {
				t.Errorf("handler reached: %v", s[before:])
			}
		})
	}
}

// TestB16_CLTE: hand-written smuggling cases derived from RFC 9112 §6.1,
// §6.3, §7.1 and §11.2 (case B16): every row is refused with one response
// and a close, and the hidden second request ("/admin") never reaches the
// handler. The public corpora (defparam/smuggler, PortSwigger
// http-request-smuggler) run from testdata/smuggling-corpus.txt in
// TestB16_SmugglingCorpus (corpus_test.go).
func TestB16_CLTE(t *testing.T) {
	ts := newTestServer(t, nil)
	const hidden = "GET /admin HTTP/1.1\r\nHost: a\r\n\r\n"
	post := func(hdr, body string) string {
		return "POST /a HTTP/1.1\r\nHost: a\r\n" + hdr + "\r\n" + body + hidden
	}
	runRejects(t, ts, []rejectCase{
		{"cl-te", post("Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400},
		{"te-cl", post("Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", "0\r\n\r\n"), 400},
		{"te-vt-chunked", post("Transfer-Encoding: \x0bchunked\r\n", "0\r\n\r\n"), 400},
		{"te-chunked-identity", post("Transfer-Encoding: chunked, identity\r\n", "0\r\n\r\n"), 400},
		{"te-xchunked", post("Transfer-Encoding: xchunked\r\n", "0\r\n\r\n"), 400},
		{"te-chunkedx", post("Transfer-Encoding: chunkedx\r\n", "0\r\n\r\n"), 400},
		{"te-space-before-colon", post("Transfer-Encoding : chunked\r\n", "0\r\n\r\n"), 400},
		{"te-tab-before-colon", post("Transfer-Encoding\t: chunked\r\n", "0\r\n\r\n"), 400},
		{"te-twice-in-list", post("Transfer-Encoding: chunked, chunked\r\n", "0\r\n\r\n"), 400},
		{"te-duplicated-fields", post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400},
		{"te-chunked-then-x", post("Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n", "0\r\n\r\n"), 400},
		{"te-empty", post("Transfer-Encoding: \r\n", ""), 400},
		{"te-empty-element", post("Transfer-Encoding: ,chunked\r\n", "0\r\n\r\n"), 400},
		{"te-quoted", post("Transfer-Encoding: \"chunked\"\r\n", "0\r\n\r\n"), 400},
		{"te-nul", post("Transfer-Encoding: chunked\x00\r\n", "0\r\n\r\n"), 400},
		{"te-obs-fold", post("Transfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n"), 400},
		{"te-gzip-chunked", post("Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n"), 501},
		{"te-http10", "POST /a HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden, 400},
		// '_' for '-': fronts that map both alike frame by these (corpus
		// entries smuggler.underjoin1, hrs-cl.underjoin1).
		{"te-underscore", post("Transfer_Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n"), 400},
		{"te-underscore-alone", post("transfer_encoding: chunked\r\n", "0\r\n\r\n"), 400},
		{"te-underscore-one", post("Transfer-Encoding: chunked\r\nTRANSFER_ENCODING: chunked\r\n", "0\r\n\r\n"), 400},
		{"cl-underscore", post("Content_Length: 33\r\n", ""), 400},
		{"cl-underscore-with-cl", post("Content-Length: 0\r\ncontent_length: 33\r\n", ""), 400},
		{"cl-plus", post("Content-Length: +4\r\n", "abcd"), 400},
		{"cl-minus", post("Content-Length: -4\r\n", "abcd"), 400},
		{"cl-list-differs", post("Content-Length: 4, 5\r\n", "abcd"), 400},
		{"cl-fields-differ", post("Content-Length: 4\r\nContent-Length: 5\r\n", "abcd"), 400},
		{"cl-hex", post("Content-Length: 0x4\r\n", "abcd"), 400},
		{"cl-empty", post("Content-Length: \r\n", ""), 400},
		{"cl-space-inside", post("Content-Length: 1 0\r\n", "abcd"), 400},
		{"cl-overflow", post("Content-Length: 99999999999999999999\r\n", ""), 400},
		{"cl-trailing-comma", post("Content-Length: 4,\r\n", "abcd"), 400},
		{"chunk-size-0x", post("Transfer-Encoding: chunked\r\n", "0x0\r\n\r\n"), 400},
		{"chunk-size-leading-space", post("Transfer-Encoding: chunked\r\n", " 0\r\n\r\n"), 400},
		{"chunk-size-trailing-space", post("Transfer-Encoding: chunked\r\n", "0 \r\n\r\n"), 400},
		{"chunk-size-plus", post("Transfer-Encoding: chunked\r\n", "+1\r\na\r\n0\r\n\r\n"), 400},
		{"chunk-size-overflow", post("Transfer-Encoding: chunked\r\n", "10000000000000001\r\na\r\n0\r\n\r\n"), 400},
		{"chunk-size-lf-only", post("Transfer-Encoding: chunked\r\n", "1\na\r\n0\r\n\r\n"), 400},
		{"chunk-data-lf-only", post("Transfer-Encoding: chunked\r\n", "1\r\na\n0\r\n\r\n"), 400},
		{"chunk-data-too-long", post("Transfer-Encoding: chunked\r\n", "1\r\nab\r\n0\r\n\r\n"), 400},
		{"chunk-last-lf-only", post("Transfer-Encoding: chunked\r\n", "0\n\n"), 400},
		{"chunk-ext-ctl", post("Transfer-Encoding: chunked\r\n", "0;a\x01b\r\n\r\n"), 400},
		{"chunk-ext-no-semicolon", post("Transfer-Encoding: chunked\r\n", "0 a\r\n\r\n"), 400},
		{"chunk-trailer-bad-name", post("Transfer-Encoding: chunked\r\n", "0\r\nBad Name: x\r\n\r\n"), 400},
		{"chunk-trailer-obs-fold", post("Transfer-Encoding: chunked\r\n", "0\r\nA: x\r\n y\r\n\r\n"), 400},
		{"chunk-bare-cr", post("Transfer-Encoding: chunked\r\n", "1\r\r\na\r\n0\r\n\r\n"), 400},
	})
	for _, p := range ts.served() {
		if p == "/admin" {
			t.Fatalf("hidden /admin request was served")
		}
	}
}

// TestB16_Accepted: the forms that are legal must be served, with the body.
func TestB16_Accepted(t *testing.T) {
	ts := newTestServer(t, nil)
	for _, tc := range []struct{ id, hdr, body, want string }{
		{"te-tab-ows", "Transfer-Encoding:\tchunked\r\n", "3\r\nabc\r\n0\r\n\r\n", "body=abc\n"},
		{"te-upper", "Transfer-Encoding: CHUNKED\r\n", "3\r\nabc\r\n0\r\n\r\n", "body=abc\n"},
		{"cl-list-equal", "Content-Length: 3, 3\r\n", "abc", "body=abc\n"},
		{"cl-fields-equal", "Content-Length: 3\r\nContent-Length: 3\r\n", "abc", "body=abc\n"},
		{"chunk-ext", "Transfer-Encoding: chunked\r\n", "3 ;a=b;c=\"d e\"\r\nabc\r\n0;x\r\n\r\n", "body=abc\n"},
		{"chunk-upper-hex", "Transfer-Encoding: chunked\r\n", "A\r\n0123456789\r\n00\r\n\r\n", "body=0123456789\n"},
		{"trailer", "Transfer-Encoding: chunked\r\n", "1\r\nz\r\n0\r\nX-Sum: 1 \r\n\r\n", "trailer X-Sum: \"1\"\n"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			raw := "POST /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n" + tc.hdr + "\r\n" + tc.body
			out, eof := ts.exchange(t, raw, 3*time.Second)
			if got := statuses(out); len(got) != 1 || got[0] != 200 || !strings.Contains(out, tc.want) || !eof {
				t.Errorf("got %v eof=%v; want [200] containing %q\n%s", got, eof, tc.want, out)
			}
		})
	}
}

// TestB18_InvalidBytes: CR, LF and NUL never reach the handler (case B18,
// RFC 9110 §5.5, RFC 9112 §2.2).
func TestB18_InvalidBytes(t *testing.T) {
	ts := newTestServer(t, nil)
	runRejects(t, ts, []rejectCase{
		{"value-bare-lf-hidden-request", "GET / HTTP/1.1\r\nHost: a\r\nX-Note:\n\nGET /hidden HTTP/1.1\nHost: a\r\n\r\n", 400},
		{"value-nul", "GET / HTTP/1.1\r\nHost: a\r\nX-Note: a\x00b\r\n\r\n", 400},
		{"value-bare-cr", "GET / HTTP/1.1\r\nHost: a\r\nX-Note: a\rb\r\n\r\n", 400},
		{"target-nul", "GET /\x00 HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"empty-name", "GET / HTTP/1.1\r\nHost: a\r\n: empty\r\n\r\n", 400},
		{"value-del", "GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n", 400},
		{"value-vt", "GET / HTTP/1.1\r\nHost: a\r\nX: a\x0bb\r\n\r\n", 400},
		{"lf-only-request", "GET / HTTP/1.1\nHost: a\n\n", 400},
		{"lf-only-end", "GET / HTTP/1.1\r\nHost: a\r\n\n", 400},
		{"request-line-bare-cr", "GET /\r HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"name-non-token", "GET / HTTP/1.1\r\nHost: a\r\nX(y): 1\r\n\r\n", 400},
		{"name-obs-text", "GET / HTTP/1.1\r\nHost: a\r\nX\xe9: 1\r\n\r\n", 400},
		{"no-colon", "GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n", 400},
		{"leading-obs-fold", "GET / HTTP/1.1\r\n X: a\r\nHost: a\r\n\r\n", 400},
	})
	for _, p := range ts.served() {
		if p == "/hidden" {
			t.Fatal("/hidden was served")
		}
	}
	t.Run("obs-text-allowed", func(t *testing.T) {
		out, _ := ts.exchange(t, "GET /o HTTP/1.1\r\nHost: a\r\nConnection: close\r\nX: caf\xe9\r\n\r\n", 3*time.Second)
		if got := statuses(out); len(got) != 1 || got[0] != 200 {
			t.Errorf("statuses = %v; want [200]\n%s", got, out)
		}
	})
}

// TestRFC9112_RequestLine covers RFC 9112 §3 and RFC 9110 §15.5.15.
func TestRFC9112_RequestLine(t *testing.T) {
	ts := newTestServer(t, nil)
	runRejects(t, ts, []rejectCase{
		{"two-spaces", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"two-spaces-before-version", "GET / \x20HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"tab-separator", "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"method-non-token", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"no-version", "GET /\r\nHost: a\r\n\r\n", 400},
		{"lower-version", "GET / http/1.1\r\nHost: a\r\n\r\n", 400},
		{"version-trailing-space", "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400},
		{"http-1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505},
		{"http-2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
		{"h2-preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
		{"http-0.9-style", "GET /\r\n\r\n", 400},
		{"target-relative", "GET x HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"asterisk-not-options", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"authority-form", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 400},
		{"absolute-ftp", "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"absolute-userinfo", "GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"fragment", "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"target-obs-text", "GET /\xe9 HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"no-host-1.1", "GET / HTTP/1.1\r\n\r\n", 400},
		{"two-hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"bad-host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		{"bad-host-slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400},
		{"connection-non-token", "GET / HTTP/1.1\r\nHost: a\r\nConnection: a b\r\n\r\n", 400},
		{"too-many-leading-crlf", strings.Repeat("\r\n", 20) + "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
	})
	for _, tc := range []struct{ id, raw, want string }{
		{"absolute-form", "GET http://example.com/p?q=1 HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n", "method=GET path=/p query=q=1\n"},
		{"absolute-form-no-path", "GET HTTP://example.com?x HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n", "path=/ query=x\n"},
		{"asterisk-options", "OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "method=OPTIONS path=*"},
		{"leading-crlf", "\r\n\r\nGET /l HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "path=/l "},
		{"http10-no-host", "GET /ten HTTP/1.0\r\n\r\n", "path=/ten "},
		{"empty-host", "GET /e HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n", "path=/e "},
		{"ipv6-host", "GET /6 HTTP/1.1\r\nHost: [::1]:80\r\nConnection: close\r\n\r\n", "path=/6 "},
	} {
		t.Run(tc.id, func(t *testing.T) {
			out, eof := ts.exchange(t, tc.raw, 3*time.Second)
			if got := statuses(out); len(got) != 1 || got[0] != 200 || !strings.Contains(out, tc.want) || !eof {
				t.Errorf("got %v eof=%v; want [200] with %q\n%s", got, eof, tc.want, out)
			}
		})
	}
}

// TestB21_PipeliningAfterClose: after a response to a request with
// "Connection: close" nothing else is read (RFC 9112 §9.6).
func TestB21_PipeliningAfterClose(t *testing.T) {
	ts := newTestServer(t, func(s *Server) { s.KeepAliveTimeout = time.Second })
	for _, tc := range []struct{ id, raw string }{
		{"second-request", "GET /first HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"second-invalid", "GET /first HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nInvalid\r\n\r\n"},
		{"http10", "GET /first HTTP/1.0\r\n\r\nGET /second HTTP/1.0\r\n\r\n"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			out, eof := ts.exchange(t, tc.raw, 3*time.Second)
			if got := statuses(out); len(got) != 1 || got[0] != 200 || !eof || !strings.Contains(out, "Connection: close\r\n") {
				t.Errorf("got %v eof=%v; want one 200 with Connection: close, then EOF\n%s", got, eof, out)
			}
		})
	}
	for _, p := range ts.served() {
		if p == "/second" {
			t.Fatal("/second was served")
		}
	}

	t.Run("slow-middle-request", func(t *testing.T) {
		// The keep-alive timer (1s) must not fire while /2 takes 2s.
		ts := newTestServer(t, func(s *Server) { s.KeepAliveTimeout = time.Second }, func(w *ResponseWriter, r *Request) {
			if string(r.Path) == "/2" {
				time.Sleep(2 * time.Second)
			}
			w.WriteSimple(200, "text/plain", r.Path, nil)
		})
		raw := "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
		out, eof := ts.exchange(t, raw, 5*time.Second)
		if got := statuses(out); len(got) != 3 || !eof {
			t.Fatalf("got %v eof=%v; want three 200s\n%s", got, eof, out)
		}
		i1, i2, i3 := strings.Index(out, "\r\n\r\n/1"), strings.Index(out, "\r\n\r\n/2"), strings.Index(out, "\r\n\r\n/3")
		if i1 < 0 || i2 < i1 || i3 < i2 {
			t.Errorf("responses out of order:\n%s", out)
		}
	})
}

// TestRFC9112_KeepAlive: pipelined requests on one connection are answered
// in order, bodies are delimited exactly, and unread bodies are drained.
func TestRFC9112_KeepAlive(t *testing.T) {
	ts := newTestServer(t, nil)
	raw := "POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc" +
		"POST /2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n" +
		"GET /3 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" +
		"GET /4 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
	out, eof := ts.exchange(t, raw, 3*time.Second)
	if got := statuses(out); len(got) != 4 || !eof {
		t.Fatalf("got %v eof=%v; want 4 responses then EOF\n%s", got, eof, out)
	}
	for _, want := range []string{"path=/1 query=\n", "body=abc\n", "body=de\n", "path=/3 ", "Connection: keep-alive\r\n", "path=/4 "} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}

	t.Run("unread-body-drained", func(t *testing.T) {
		ts := newTestServer(t, nil, func(w *ResponseWriter, r *Request) {
			w.WriteSimple(200, "text/plain", r.Path, nil)
		})
		raw := "POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" +
			"POST /2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" +
			"GET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
		out, eof := ts.exchange(t, raw, 3*time.Second)
		if got := statuses(out); len(got) != 3 || !eof || !strings.HasSuffix(out, "/3") {
			t.Errorf("got %v eof=%v; want 3 responses\n%s", got, eof, out)
		}
	})
}

// TestB22_ExpectContinue: at most one 100, never to HTTP/1.0, none when
// the handler answers without reading (RFC 9110 §10.1.1, §15.2; PEP 3333).
func TestB22_ExpectContinue(t *testing.T) {
	ts := newTestServer(t, nil, func(w *ResponseWriter, r *Request) {
		if string(r.Path) == "/reject" {
			w.WriteSimple(401, "text/plain", []byte("no\n"), nil)
			return
		}
		var body []byte
		var b [1]byte
		for {
			n, err := r.Body.Read(b[:]) // one byte at a time
			body = append(body, b[:n]...)
			if err != nil {
				break
			}
		}
		w.WriteSimple(200, "text/plain", body, nil)
	})
	t.Run("http10-never", func(t *testing.T) {
		out, _ := ts.exchange(t, "POST / HTTP/1.0\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello", 3*time.Second)
		if strings.Count(out, "HTTP/1.1 100") != 0 || !strings.HasSuffix(out, "hello") {
			t.Errorf("got\n%s\nwant no 100 and body hello", out)
		}
	})
	t.Run("http11-once", func(t *testing.T) {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("first line = %q, %v; want 100 Continue", line, err)
		}
		io.WriteString(c, "hello")
		rest, _ := io.ReadAll(br)
		if strings.Count(string(rest), "HTTP/1.1 100") != 0 || !strings.HasPrefix(string(rest), "\r\nHTTP/1.1 200 OK\r\n") || !strings.HasSuffix(string(rest), "hello") {
			t.Errorf("rest = %q; want one 200 with hello", rest)
		}
	})
	t.Run("rejected-without-reading", func(t *testing.T) {
		start := time.Now()
		out, eof := ts.exchange(t, "POST /reject HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", 2*time.Second)
		if strings.Contains(out, "HTTP/1.1 100") || len(statuses(out)) != 1 || statuses(out)[0] != 401 || !eof || time.Since(start) > time.Second {
			t.Errorf("got %q eof=%v after %v; want one 401, no 100, close within 1s", out, eof, time.Since(start))
		}
	})
}

// TestB23_Oversized: 431 for large fields/sections, 414 for a long
// request-line (RFC 6585 §5, RFC 9110 §15.5.15); configured limits are
// applied exactly.
func TestB23_Oversized(t *testing.T) {
	ts := newTestServer(t, nil)
	cookie := "Cookie: " + strings.Repeat("a", 20000) + "\r\n"
	var many strings.Builder
	for i := range 120 {
		fmt.Fprintf(&many, "X-H%03d: %s\r\n", i, strings.Repeat("v", 90))
	}
	big := strings.Repeat("B: "+strings.Repeat("b", 8000)+"\r\n", 9) // 72 KiB in 9 fields
	runRejects(t, ts, []rejectCase{
		{"cookie-20k", "GET / HTTP/1.1\r\nHost: a\r\n" + cookie + "\r\n", 431},
		{"120-fields", "GET / HTTP/1.1\r\nHost: a\r\n" + many.String() + "\r\n", 431},
		{"section-72k", "GET / HTTP/1.1\r\nHost: a\r\n" + big + "\r\n", 431},
		{"url-9000", "GET /" + strings.Repeat("u", 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
	})
	t.Run("just-under", func(t *testing.T) {
		field := "X: " + strings.Repeat("a", DefaultMaxHeaderFieldBytes-3) + "\r\n"
		url := "/" + strings.Repeat("u", DefaultMaxRequestLineBytes-len("GET  HTTP/1.1")-1)
		out, _ := ts.exchange(t, "GET "+url+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"+field+"\r\n", 3*time.Second)
		if got := statuses(out); len(got) != 1 || got[0] != 200 {
			t.Errorf("statuses = %v; want [200]", got)
		}
	})
	t.Run("limit-32k", func(t *testing.T) {
		ts := newTestServer(t, func(s *Server) { s.MaxHeaderFieldBytes = 32 << 10 })
		out, _ := ts.exchange(t, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"+cookie+"\r\n", 3*time.Second)
		if got := statuses(out); len(got) != 1 || got[0] != 200 {
			t.Errorf("statuses = %v; want [200]", got)
		}
	})
	t.Run("body-413", func(t *testing.T) {
		ts := newTestServer(t, func(s *Server) { s.MaxBodyBytes = 10 })
		runRejects(t, ts, []rejectCase{
			{"content-length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", 413},
			{"chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\nabcdef\r\n0\r\n\r\n", 413},
		})
	})
}

// TestB40_Timeouts: idle, slow-header and slow-body connections are closed
// (case B40, RFC 9110 §15.5.9).
func TestB40_Timeouts(t *testing.T) {
	ts := newTestServer(t, func(s *Server) {
		s.HeaderTimeout = 300 * time.Millisecond
		s.KeepAliveTimeout = 300 * time.Millisecond
		s.BodyTimeout = 300 * time.Millisecond
	})
	for _, tc := range []struct {
		id, raw string
		want    []int
	}{
		{"silent", "", nil},
		{"partial-head", "GET / HTTP/1.1\r\nHost: a\r\n", []int{408}},
		{"keepalive-idle", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", []int{200}},
		{"slow-body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc", []int{408}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			start := time.Now()
			out, eof := ts.exchange(t, tc.raw, 3*time.Second)
			got := statuses(out)
			if !eof || fmt.Sprint(got) != fmt.Sprint(tc.want) || time.Since(start) > 2*time.Second {
				t.Errorf("got %v eof=%v after %v; want %v then EOF\n%s", got, eof, time.Since(start), tc.want, out)
			}
		})
	}
}

// TestB40_HeadTimeoutKeptAlive: on a kept-alive connection the header
// timeout applies to the next request's head from its first byte, not
// the longer keep-alive timeout that was waiting for it: both when the
// partial head follows a response and when it is pipelined behind a
// request (the deadline is armed only when the head needs another read).
func TestB40_HeadTimeoutKeptAlive(t *testing.T) {
	ts := newTestServer(t, func(s *Server) {
		s.HeaderTimeout = 300 * time.Millisecond
		s.KeepAliveTimeout = 10 * time.Second
	})
	t.Run("after-response", func(t *testing.T) {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		start := time.Now()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n")
		rest, _ := io.ReadAll(br)
		if got := statuses(string(rest)); fmt.Sprint(got) != "[408]" || time.Since(start) > 3*time.Second {
			t.Errorf("partial head after a response: %v after %v; want [408] after about 300ms\n%s", got, time.Since(start), rest)
		}
	})
	t.Run("pipelined", func(t *testing.T) {
		start := time.Now()
		out, eof := ts.exchange(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n", 5*time.Second)
		if got := statuses(out); !eof || fmt.Sprint(got) != "[200 408]" || time.Since(start) > 3*time.Second {
			t.Errorf("pipelined partial head: %v eof=%v after %v; want [200 408]\n%s", got, eof, time.Since(start), out)
		}
	})
}

// TestServer_Concurrency: above MaxConcurrency requests get 503 + Retry-After.
func TestServer_Concurrency(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	ts := newTestServer(t, func(s *Server) { s.MaxConcurrency = 1 }, func(w *ResponseWriter, r *Request) {
		entered <- struct{}{}
		<-release
		w.WriteSimple(200, "text/plain", nil, nil)
	})
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-entered
	out, _ := ts.exchange(t, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3*time.Second)
	close(release)
	if got := statuses(out); len(got) != 1 || got[0] != 503 || !strings.Contains(out, "Retry-After: 1\r\n") {
		t.Errorf("got %v; want 503 with Retry-After\n%s", got, out)
	}
	if n := ts.InFlight(); n > 1 {
		t.Errorf("InFlight = %d", n)
	}
	if n := ts.OverLimit(); n != 1 {
		t.Errorf("OverLimit = %d; want the one 503", n)
	}
}

// TestServer_Responses covers the ResponseWriter framing rules.
func TestServer_Responses(t *testing.T) {
	ts := newTestServer(t, nil, func(w *ResponseWriter, r *Request) {
		switch string(r.Path) {
		case "/chunked":
			w.WriteHead(200, []byte("200 OK"), []byte("X-A: 1\r\n"), -1, false)
			w.Write([]byte("hello "))
			w.Write([]byte("world"))
		case "/excess":
			w.WriteHead(200, []byte("200 OK"), nil, 3, false)
			if _, err := w.Write([]byte("abcdef")); !errors.Is(err, ErrContentLength) {
				panic("want ErrContentLength")
			}
		case "/short":
			w.WriteHead(200, []byte("200 OK"), nil, 10, false)
			w.Write([]byte("abc"))
		case "/nohead":
		case "/panic":
			panic("boom")
		case "/204":
			w.WriteHead(204, []byte("204 No Content"), nil, 5, false)
			w.Write([]byte("xxxxx"))
		default:
			w.WriteHead(200, []byte("200 OK"), nil, 5, false)
			w.Write([]byte("hello"))
		}
	})
	for _, tc := range []struct {
		id, raw, want string
		eof           bool
	}{
		{"chunked", "GET /chunked HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n", true},
		{"chunked-http10-close-delimited", "GET /chunked HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "X-A: 1\r\nConnection: close\r\n\r\nhello world", true},
		{"excess-dropped", "GET /excess HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "Content-Length: 3\r\nConnection: close\r\n\r\nabc", true},
		{"short-closes", "GET /short HTTP/1.1\r\nHost: a\r\n\r\nGET /never HTTP/1.1\r\nHost: a\r\n\r\n", "Content-Length: 10\r\n\r\nabc", true},
		{"no-head-500", "GET /nohead HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 500 Internal Server Error\r\n", true},
		{"panic-500", "GET /panic HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 500 Internal Server Error\r\n", true},
		{"head-keeps-length", "HEAD / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "Content-Length: 5\r\nConnection: close\r\n\r\n", true},
		{"204-no-body", "GET /204 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "HTTP/1.1 204 No Content\r\n", true},
	} {
		t.Run(tc.id, func(t *testing.T) {
			out, eof := ts.exchange(t, tc.raw, 3*time.Second)
			if !strings.Contains(out, tc.want) || eof != tc.eof || len(statuses(out)) != 1 {
				t.Errorf("got eof=%v\n%q\nwant %q", eof, out, tc.want)
			}
			if tc.id == "head-keeps-length" || tc.id == "204-no-body" {
				if i := strings.Index(out, "\r\n\r\n"); i+4 != len(out) {
					t.Errorf("body sent: %q", out[i+4:])
				}
			}
		})
	}
	for _, p := range ts.served() {
		if p == "/never" {
			t.Error("request after a short body was served")
		}
	}
}

// TestServer_Shutdown: idle conns close, an in-flight request finishes
// with Connection: close, Serve returns ErrServerClosed.
func TestServer_Shutdown(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := newTestServer(t, nil, func(w *ResponseWriter, r *Request) {
		if string(r.Path) == "/slow" {
			close(entered)
			<-release
		}
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	idle, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	busy, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-entered
	done := make(chan error)
	go func() { done <- ts.Shutdown(context.Background()) }()
	idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle conn read = %v; want EOF", err)
	}
	close(release)
	busy.SetReadDeadline(time.Now().Add(2 * time.Second))
	out, _ := io.ReadAll(busy)
	if !strings.Contains(string(out), "Connection: close\r\n") || !strings.HasSuffix(string(out), "ok") {
		t.Errorf("in-flight response = %q; want ok with Connection: close", out)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if n := ts.ActiveConns(); n != 0 {
		t.Errorf("ActiveConns = %d after Shutdown", n)
	}
}

// TestServer_ShutdownFreshConn: a connection accepted before Shutdown
// whose request arrives just after it is served (with Connection: close),
// not reset: workers that share one listening socket stop one by one in a
// rolling restart, and such a request is already on the wire
// (newConnGrace).
func TestServer_ShutdownFreshConn(t *testing.T) {
	ts := newTestServer(t, nil, func(w *ResponseWriter, r *Request) {
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for ts.ActiveConns() == 0 { // accepted
		time.Sleep(time.Millisecond)
	}
	done := make(chan error)
	go func() { done <- ts.Shutdown(context.Background()) }()
	time.Sleep(100 * time.Millisecond)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	out, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(out), "HTTP/1.1 200") || !strings.Contains(string(out), "Connection: close\r\n") {
		t.Errorf("response = %q; want 200 with Connection: close", out)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

// lateListener returns one more connection from Accept after Close: the
// race where accept(2) succeeded just before Shutdown closed the listener.
type lateListener struct {
	net.Listener
	closed chan struct{}
	late   net.Conn
	once   sync.Once
}

func (l *lateListener) Accept() (net.Conn, error) {
	<-l.closed
	var c net.Conn
	l.once.Do(func() { c = l.late })
	if c != nil {
		return c, nil
	}
	return nil, net.ErrClosed
}

func (l *lateListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return nil
}

// TestServer_ShutdownServesLateAccept: a connection whose accept returned
// as Shutdown began is served (Connection: close), and Shutdown waits for
// it, instead of closing it unanswered.
func TestServer_ShutdownServesLateAccept(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	ln := &lateListener{closed: make(chan struct{}), late: server}
	s := &Server{Handler: HandlerFunc(func(w *ResponseWriter, r *Request) {
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	time.Sleep(20 * time.Millisecond) // Serve is in Accept
	go io.WriteString(client, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	client.SetReadDeadline(time.Now().Add(2 * time.Second))
	out, _ := io.ReadAll(client)
	if !strings.HasPrefix(string(out), "HTTP/1.1 200") || !strings.Contains(string(out), "Connection: close\r\n") {
		t.Errorf("response = %q; want 200 with Connection: close", out)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve = %v; want ErrServerClosed", err)
	}
}

// TestServer_DrainAnnouncesClose: after Drain every response carries
// "Connection: close" (RFC 9112 §9.6), including the response of a
// request in flight when Drain was called whose head was not written yet;
// the listener still accepts (Shutdown stops it).
func TestServer_DrainAnnouncesClose(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	ts := newTestServer(t, nil, func(w *ResponseWriter, r *Request) {
		if string(r.Path) == "/slow" {
			close(entered)
			<-release
		}
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	busy, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-entered
	ts.Drain()
	close(release)
	busy.SetReadDeadline(time.Now().Add(2 * time.Second))
	out, _ := io.ReadAll(busy) // EOF: the server closes after it
	if !strings.Contains(string(out), "Connection: close\r\n") || !strings.HasSuffix(string(out), "ok") {
		t.Errorf("in-flight response = %q; want ok with Connection: close", out)
	}
	out2, eof := ts.exchange(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 2*time.Second)
	if !eof || !strings.HasPrefix(out2, "HTTP/1.1 200") || !strings.Contains(out2, "Connection: close\r\n") {
		t.Errorf("new connection while draining = %q (eof %v); want 200 with Connection: close, then EOF", out2, eof)
	}
}

// TestServer_ShutdownKeepAliveDrain: a kept-alive connection whose last
// response left before Shutdown (no Connection: close) stays open for
// KeepAliveDrain: a request sent on it meanwhile is served with
// "Connection: close"; one left idle is closed after the window, not
// before; Shutdown returns once both are gone.
func TestServer_ShutdownKeepAliveDrain(t *testing.T) {
	const window = 600 * time.Millisecond
	ts := newTestServer(t, func(s *Server) { s.KeepAliveDrain = window }, func(w *ResponseWriter, r *Request) {
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		br := bufio.NewReader(c)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.Close {
			t.Fatalf("first response: %v (close %v); want a kept-alive 200", err, resp != nil && resp.Close)
		}
		io.ReadAll(resp.Body)
		return c, br
	}
	used, usedR := dial()
	idle, _ := dial()

	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- ts.Shutdown(context.Background()) }()
	time.Sleep(window / 4)
	io.WriteString(used, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi")
	used.SetReadDeadline(time.Now().Add(2 * time.Second))
	resp, err := http.ReadResponse(usedR, nil)
	if err != nil {
		t.Fatalf("POST on an idle connection in the window: %v; want it served", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok" || !resp.Close {
		t.Errorf("POST in the window = %d %q close=%v; want 200 ok with Connection: close", resp.StatusCode, b, resp.Close)
	}

	idle.SetReadDeadline(time.Now().Add(window + 3*time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection read = %v; want EOF after the window", err)
	}
	if d := time.Since(start); d < window {
		t.Errorf("idle connection closed %v after Shutdown; want not before the %v window", d, window)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}
