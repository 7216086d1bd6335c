package tests

// The HTTP/1.1 conformance cases of docs/cases.md run against
// the real binary and a real WSGI app (testapps/echo.py). internal/http1
// has the full tables; these prove the whole server frames the same way
// and that nothing smuggled reaches Python.

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// oneResponseThenClose asserts exactly one response with status want,
// carrying Connection: close, then EOF.
func oneResponseThenClose(t *testing.T, got string, closed bool, want string) {
	t.Helper()
	codes := StatusCodes(got)
	if len(codes) != 1 || codes[0] != want {
		t.Errorf("status codes = %v; want [%s]\n%q", codes, want, got)
	}
	if !closed {
		t.Errorf("connection not closed after the response")
	}
	if !strings.Contains(strings.ToLower(got), "connection: close") {
		t.Errorf("response lacks Connection: close:\n%q", got)
	}
}

func TestB16_Smuggling(t *testing.T) {
	s := Start(t, "echo:app")
	const tail = "GET /admin HTTP/1.1\r\nHost: a\r\n\r\n"
	rows := []struct{ id, raw string }{
		{"cl-te", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + tail},
		{"te-vtab", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \x0bchunked\r\n\r\n0\r\n\r\n" + tail},
		{"te-chunked-identity", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + tail},
		{"te-xchunked", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + tail},
		{"te-space-before-colon", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + tail},
		{"te-obs-fold", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" + tail},
		{"cl-plus", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: +4\r\n\r\nabcd" + tail},
		{"cl-conflict", "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcd" + tail},
		{"te-then-te", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n0\r\n\r\n" + tail},
		{"chunk-size-0x", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x4\r\nabcd\r\n0\r\n\r\n" + tail},
		{"chunk-lf-only", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\nabcd\n0\n\n" + tail},
		{"chunk-overflow", "POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\nabcd\r\n0\r\n\r\n" + tail},
	}
	for _, row := range rows {
		t.Run(row.id, func(t *testing.T) {
			got, closed := Raw(t, s.Addr, row.raw, 3*time.Second)
			oneResponseThenClose(t, got, closed, "400")
		})
	}
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(s.Logs(), "APP-SEEN /admin") {
		t.Fatalf("a smuggled /admin reached the app:\n%s", s.Logs())
	}
}

// smugglingEntry is one request of internal/http1/testdata/smuggling-corpus.txt:
// public smuggling corpora (defparam/smuggler, PortSwigger
// http-request-smuggler) rewritten as data; its header names the source
// files and what each EXPECT means.
type smugglingEntry struct {
	name, expect, status, raw string
}

func loadSmugglingCorpus(t *testing.T) []smugglingEntry {
	t.Helper()
	path := filepath.Join(repoRoot(), "internal", "http1", "testdata", "smuggling-corpus.txt")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []smugglingEntry
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 {
			t.Fatalf("%s:%d: want NAME EXPECT STATUS \"RAW\"", path, i+1)
		}
		raw, err := strconv.Unquote(f[3])
		if err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, smugglingEntry{f[0], f[1], f[2], raw})
	}
	if len(out) == 0 {
		t.Fatalf("%s: no entries", path)
	}
	return out
}

// TestB16_SmugglingCorpus sends every request of the public smuggling
// corpus to the real binary: "reject" and "reject-body" entries get
// exactly one response with their status, Connection: close and a closed
// connection; "accept" entries get exactly one response and leave the
// connection usable (a follow-up request gets its own answer); no hidden
// request (below /smuggled/) ever reaches the app, and rejected heads
// never do.
func TestB16_SmugglingCorpus(t *testing.T) {
	s := Start(t, "echo:app")
	entries := loadSmugglingCorpus(t)
	for _, e := range entries {
		t.Run(e.name, func(t *testing.T) {
			if e.expect != "accept" {
				got, closed := Raw(t, s.Addr, e.raw, 5*time.Second)
				oneResponseThenClose(t, got, closed, e.status)
				return
			}
			c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			var seen bytes.Buffer
			br := bufio.NewReader(io.TeeReader(c, &seen))
			io.WriteString(c, e.raw)
			resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
			if err != nil {
				t.Fatalf("reading the response: %v\n%q", err, seen.String())
			}
			io.Copy(io.Discard, resp.Body)
			if strconv.Itoa(resp.StatusCode) != e.status || resp.Close {
				t.Fatalf("status %d close=%v; want %s on a kept connection\n%q", resp.StatusCode, resp.Close, e.status, seen.String())
			}
			probe := "/probe/" + e.name
			io.WriteString(c, "GET "+probe+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
			resp, err = http.ReadResponse(br, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatalf("reading the follow-up response: %v\n%q", err, seen.String())
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.Contains(string(body), `"path": "`+probe+`"`) {
				t.Fatalf("follow-up got %d %q; want 200 for %s\n%q", resp.StatusCode, body, probe, seen.String())
			}
			if n, _ := br.Read(make([]byte, 1)); n != 0 {
				t.Fatalf("bytes after the follow-up response:\n%q", seen.String())
			}
		})
	}
	// A last request through the same log pipeline: once the app has
	// logged it, it has logged everything the corpus made it see.
	if code, _ := s.Get(t, "/corpus-done"); code != 200 {
		t.Fatalf("GET /corpus-done = %d", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.Logs(), `APP-SEEN /corpus-done"`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	logs := s.Logs()
	for _, e := range entries {
		if strings.Contains(logs, "APP-SEEN /smuggled/"+e.name+`"`) {
			t.Errorf("%s: its hidden request reached the app", e.name)
		}
		n := strings.Count(logs, "APP-SEEN /c/"+e.name+`"`)
		switch {
		case e.expect == "reject" && n != 0:
			t.Errorf("%s: a rejected head reached the app", e.name)
		case e.expect == "accept" && n != 1:
			t.Errorf("%s: the app saw the request %d times; want 1", e.name, n)
		}
	}
}

func TestB18_InvalidBytes(t *testing.T) {
	s := Start(t, "echo:app")
	rows := []struct{ id, raw string }{
		{"bare-lf-hidden", "GET / HTTP/1.1\r\nHost: a\r\nX-Note:\n\nGET /hidden HTTP/1.1\nHost: a\r\n\r\n"},
		{"nul-in-value", "GET / HTTP/1.1\r\nHost: a\r\nX-Note: a\x00b\r\n\r\n"},
		{"bare-cr-in-value", "GET / HTTP/1.1\r\nHost: a\r\nX-Note: a\rb\r\n\r\n"},
		{"nul-in-target", "GET /\x00 HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"empty-name", "GET / HTTP/1.1\r\nHost: a\r\n: empty\r\n\r\n"},
	}
	for _, row := range rows {
		t.Run(row.id, func(t *testing.T) {
			got, closed := Raw(t, s.Addr, row.raw, 3*time.Second)
			oneResponseThenClose(t, got, closed, "400")
		})
	}
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(s.Logs(), "APP-SEEN /hidden") {
		t.Fatalf("/hidden reached the app:\n%s", s.Logs())
	}
}

func TestB21_PipeliningAfterClose(t *testing.T) {
	s := Start(t, "echo:app")
	for _, row := range []struct{ id, raw string }{
		{"second-valid", "GET /first HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"second-invalid", "GET /first HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nInvalid\r\n\r\n"},
	} {
		t.Run(row.id, func(t *testing.T) {
			got, closed := Raw(t, s.Addr, row.raw, 3*time.Second)
			oneResponseThenClose(t, got, closed, "200")
			if !strings.Contains(got, `"path": "/first"`) {
				t.Errorf("the response is not /first's:\n%q", got)
			}
		})
	}
	t.Run("in-order", func(t *testing.T) {
		got, _ := Raw(t, s.Addr, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3*time.Second)
		i1, i2, i3 := strings.Index(got, `"/1"`), strings.Index(got, `"/2"`), strings.Index(got, `"/3"`)
		if codes := StatusCodes(got); len(codes) != 3 || i1 < 0 || !(i1 < i2 && i2 < i3) {
			t.Errorf("pipelined responses out of order or missing: %v\n%q", codes, got)
		}
	})
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(s.Logs(), "APP-SEEN /second") {
		t.Fatalf("/second reached the app after Connection: close")
	}
}

func TestB22_ExpectContinue(t *testing.T) {
	s := Start(t, "echo:app")
	t.Run("http10-no-100", func(t *testing.T) {
		got, _ := Raw(t, s.Addr, "POST / HTTP/1.0\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello", 3*time.Second)
		if n := strings.Count(got, "HTTP/1.1 100"); n != 0 {
			t.Errorf("%d interim 100 responses to HTTP/1.0; want 0:\n%q", n, got)
		}
		if codes := StatusCodes(got); len(codes) != 1 || codes[0] != "200" {
			t.Errorf("codes = %v; want [200]", codes)
		}
	})
	t.Run("http11-one-100", func(t *testing.T) {
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"))
		first, _ := ReadAll(c, 2*time.Second)
		if !strings.HasPrefix(first, "HTTP/1.1 100 Continue\r\n\r\n") {
			t.Fatalf("before the body: %q; want a 100 Continue", first)
		}
		c.Write([]byte("hello"))
		rest, _ := ReadAll(c, 3*time.Second)
		all := first + rest
		if n := strings.Count(all, "HTTP/1.1 100"); n != 1 {
			t.Errorf("%d interim responses; want 1:\n%q", n, all)
		}
		if !strings.Contains(rest, `"body_len": 5`) {
			t.Errorf("the app did not get the 5-byte body:\n%q", rest)
		}
	})
}

func TestB23_Oversized(t *testing.T) {
	s := Start(t, "echo:app")
	big := strings.Repeat("a", 20000)
	t.Run("cookie-431", func(t *testing.T) {
		got, _ := Raw(t, s.Addr, "GET / HTTP/1.1\r\nHost: a\r\nCookie: "+big+"\r\n\r\n", 3*time.Second)
		if codes := StatusCodes(got); len(codes) != 1 || codes[0] != "431" {
			t.Errorf("codes = %v; want [431]", codes)
		}
	})
	t.Run("120-headers-431", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("GET / HTTP/1.1\r\nHost: a\r\n")
		for i := 0; i < 120; i++ {
			b.WriteString("X-H" + strings.Repeat("x", 3) + ": " + strings.Repeat("v", 90) + "\r\n")
		}
		b.WriteString("\r\n")
		got, _ := Raw(t, s.Addr, b.String(), 3*time.Second)
		if codes := StatusCodes(got); len(codes) != 1 || codes[0] != "431" {
			t.Errorf("codes = %v; want [431]", codes)
		}
	})
	t.Run("long-url-414", func(t *testing.T) {
		got, _ := Raw(t, s.Addr, "GET /"+strings.Repeat("u", 9000)+" HTTP/1.1\r\nHost: a\r\n\r\n", 3*time.Second)
		if codes := StatusCodes(got); len(codes) != 1 || codes[0] != "414" {
			t.Errorf("codes = %v; want [414]", codes)
		}
	})
	t.Run("raised-limit-200", func(t *testing.T) {
		s2 := Start(t, "--limit-request-field-size", "32768", "echo:app")
		got, _ := Raw(t, s2.Addr, "GET / HTTP/1.1\r\nHost: a\r\nCookie: "+big+"\r\nConnection: close\r\n\r\n", 3*time.Second)
		if codes := StatusCodes(got); len(codes) != 1 || codes[0] != "200" {
			t.Errorf("codes = %v; want [200]", codes)
		}
	})
}

// TestB40_WriteTimeout: a client that asks for a 32 MiB response and
// never reads is dropped within --timeout-write (+ a margin) of the
// server's write stalling, while the server keeps serving others, during
// and after.
func TestB40_WriteTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	s := Start(t, "--timeout-write", "2s", "h2_wsgi:app")
	// A 16 KiB receive window: the server's writes stall once its send
	// buffer is full, whatever the loopback autotuning.
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		})
	}}
	c, err := d.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 32 << 20
	io.WriteString(c, "GET /big?n="+strconv.Itoa(size)+" HTTP/1.1\r\nHost: a\r\n\r\n") // and never read
	start := time.Now()
	waitConns(t, s, func(n int) bool { return n >= 1 }, "the stalled connection to be counted")

	if code := getClose(t, s, "/during"); code != 200 {
		t.Errorf("GET /during the stalled write = %d; want 200", code)
	}
	waitConns(t, s, func(n int) bool { return n == 0 }, "the stalled connection to close")
	took := time.Since(start)
	if took > timeout+3*time.Second {
		t.Errorf("the stalled connection closed %v after the request; want within --timeout-write %v + 3s", took, timeout)
	}
	if took < timeout*3/4 {
		t.Errorf("the stalled connection closed after %v, before --timeout-write %v could pass", took, timeout)
	}
	if code := getClose(t, s, "/after"); code != 200 {
		t.Errorf("GET /after the write timeout = %d; want 200", code)
	}
	// What the kernel had queued, then the close: not the whole body.
	got, closed := ReadAll(c, 5*time.Second)
	if !closed || len(got) >= size {
		t.Errorf("after the timeout the client read %d bytes (closed=%v); want a truncated response and a close", len(got), closed)
	}
}

// TestHTTP1_AppConnectionClose: a WSGI app's Connection header that lists
// "close" (RFC 9110 §7.6.1, a comma-separated list of any case) ends the
// connection after its response; the pipelined request behind it is not
// served. Only a whole "close" value was honoured before ("keep-alive,
// close" kept the connection open).
func TestHTTP1_AppConnectionClose(t *testing.T) {
	s := Start(t, "echo:app")
	for _, v := range []string{"close", "CLOSE", "keep-alive,%20close", "close,%20upgrade"} {
		raw, closed := Raw(t, s.Addr, "GET /c?connection="+v+" HTTP/1.1\r\nHost: a\r\n\r\nGET /after HTTP/1.1\r\nHost: a\r\n\r\n", 5*time.Second)
		if codes := StatusCodes(raw); len(codes) != 1 || !strings.Contains(raw, "Connection: close\r\n") || !closed {
			t.Errorf("app Connection: %s, then a pipelined request: %q (closed %v); want one response with Connection: close, then the close", v, raw, closed)
		}
	}
	for _, v := range []string{"keep-alive", "closed", "x-close"} {
		raw, _ := Raw(t, s.Addr, "GET /c?connection="+v+" HTTP/1.1\r\nHost: a\r\n\r\nGET /after HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
		if codes := StatusCodes(raw); len(codes) != 2 {
			t.Errorf("app Connection: %s, then a pipelined request: %q; want both answered", v, raw)
		}
	}
}
