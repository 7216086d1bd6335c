package tests

// Conformance cases of docs/cases.md, each named after its case id and
// served by testapps/case_<id>.py. The helpers they share with other files
// (concurrently, caseN, roundTripRaw, logRecords, appPID, vmRSSKB) are in
// harness_test.go; the two at the bottom are this file's own.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// B01 — start_response called lazily inside the iterable (granian#845).
// PEP 3333, "The start_response() Callable": the call may happen on the
// iterable's first iteration; headers go out only with the first non-empty
// block or when the iterable is exhausted.
func TestB01_LazyStartResponse(t *testing.T) {
	s := Start(t, "case_b01:app")

	check404 := func() error {
		resp, err := http.Get(s.URL + "/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("GET /: reading body: %v", err)
		}
		if resp.StatusCode != 404 || resp.Header.Get("X-Case") != "b01" || string(b) != "gone" {
			return fmt.Errorf("GET / = %d X-Case=%q %q; want 404 X-Case=\"b01\" \"gone\"", resp.StatusCode, resp.Header.Get("X-Case"), b)
		}
		return nil
	}
	check204 := func() error {
		resp, err := http.Get(s.URL + "/204")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("GET /204: reading body: %v", err)
		}
		if resp.StatusCode != 204 || len(b) != 0 {
			return fmt.Errorf("GET /204 = %d %q; want 204 and no body", resp.StatusCode, b)
		}
		return nil
	}

	t.Run("404-in-first-iteration", func(t *testing.T) {
		if err := check404(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("204-empty-generator", func(t *testing.T) {
		if err := check204(); err != nil {
			t.Fatal(err)
		}
		// On the wire: no body and no Transfer-Encoding (RFC 9112 §6.1), a
		// Content-Length of 0 at most (the case allows it; RFC 9110 §8.6
		// says none), and the connection stays usable: the next pipelined
		// response parses right after the 204's head.
		c := dialT(t, s.Addr)
		defer c.Close()
		io.WriteString(c, "GET /204 HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		r1, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("reading the 204: %v", err)
		}
		b1, _ := io.ReadAll(r1.Body)
		if r1.StatusCode != 204 || len(b1) != 0 || len(r1.TransferEncoding) != 0 {
			t.Fatalf("raw GET /204 = %d TE=%v body %q; want 204, no Transfer-Encoding, no body", r1.StatusCode, r1.TransferEncoding, b1)
		}
		if cl := r1.Header.Get("Content-Length"); cl != "" && cl != "0" {
			t.Fatalf("raw GET /204 Content-Length = %q; want none or 0", cl)
		}
		r2, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("reading the response after the 204: %v (stray bytes after the 204?)", err)
		}
		b2, _ := io.ReadAll(r2.Body)
		if r2.StatusCode != 404 || string(b2) != "gone" {
			t.Fatalf("pipelined GET / after the 204 = %d %q; want 404 \"gone\"", r2.StatusCode, b2)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		concurrently(t, caseN, func(int) error {
			if err := check404(); err != nil {
				return err
			}
			return check204()
		})
	})
}

// B04 — wsgi.input read()/readline() on a chunked body with small chunks
// (gunicorn#605). PEP 3333, "Input and Error Streams"; RFC 9112 §7.1. Each
// response must arrive within 2 s with "2 12".
func TestB04_ChunkedSmallChunks(t *testing.T) {
	s := Start(t, "case_b04:app")

	const head = "POST %s HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
	threeChunks := []string{"6\r\nline1\n\r\n", "3\r\nlin\r\n", "3\r\ne2\n\r\n", "0\r\n\r\n"}
	var oneByte []string
	for _, b := range []byte("line1\nline2\n") {
		oneByte = append(oneByte, fmt.Sprintf("1\r\n%c\r\n", b))
	}
	oneByte = append(oneByte, "0\r\n\r\n")

	for _, tc := range []struct {
		id     string
		path   string
		chunks []string
		gap    time.Duration // between chunk writes; 0: one write
	}{
		{"readline/three-chunks", "/readline", threeChunks, 0},
		{"readline/one-byte-chunks", "/readline", oneByte, 0},
		{"readline/one-byte-chunks-trickled", "/readline", oneByte, 10 * time.Millisecond},
		{"read65536/three-chunks", "/read", threeChunks, 0},
		{"read65536/one-byte-chunks", "/read", oneByte, 0},
		{"read65536/one-byte-chunks-trickled", "/read", oneByte, 10 * time.Millisecond},
	} {
		one := func() error {
			parts := append([]string{fmt.Sprintf(head, tc.path)}, tc.chunks...)
			if tc.gap == 0 {
				parts = []string{strings.Join(parts, "")}
			}
			resp, body, err := roundTripRaw(s.Addr, parts, tc.gap, 2*time.Second)
			if err != nil {
				return fmt.Errorf("POST %s: %v (a timeout means read/readline hung)", tc.path, err)
			}
			if resp.StatusCode != 200 || body != "2 12" {
				return fmt.Errorf("POST %s = %d %q; want 200 \"2 12\"", tc.path, resp.StatusCode, body)
			}
			if it := resp.Header.Get("X-Input-Terminated"); it != "True" {
				return fmt.Errorf("POST %s: wsgi.input_terminated = %s; want True for a chunked body", tc.path, it)
			}
			return nil
		}
		t.Run(tc.id, func(t *testing.T) {
			onceThenConcurrently(t, caseN, one)
		})
	}
}

// B05 — Unicode in the path (gunicorn#930, uvicorn#344). PEP 3333, "Unicode
// Issues": PATH_INFO is the percent-decoded bytes decoded as latin-1.
// RFC 9112 §3.2: a request-target with raw non-ASCII bytes may be served or
// refused with 400, but a status line is always sent.
func TestB05_UnicodePath(t *testing.T) {
	s := Start(t, "case_b05:app")

	type echo struct {
		Path   string `json:"path"`
		RawURI string `json:"raw_uri"`
	}
	get := func(target string) (int, echo, string, error) {
		resp, body, err := roundTripRaw(s.Addr, []string{"GET " + target + " HTTP/1.1\r\nHost: a\r\n\r\n"}, 0, 5*time.Second)
		if err != nil {
			return 0, echo{}, "", fmt.Errorf("GET %q: %v", target, err)
		}
		var e echo
		if resp.StatusCode == 200 {
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				return resp.StatusCode, e, body, fmt.Errorf("GET %q: body %q is not the echo JSON: %v", target, body, err)
			}
		}
		return resp.StatusCode, e, body, nil
	}

	for _, tc := range []struct {
		id, target, path, rawURI string
	}{
		{"percent-encoded-utf8", "/tags/%E5%A5%94%E9%A9%B0/x", "/tags/奔驰/x", "/tags/%E5%A5%94%E9%A9%B0/x"},
		// PATH_INFO cannot tell %2F from /; RAW_URI keeps it.
		{"encoded-slash", "/a%2Fb/c", "/a/b/c", "/a%2Fb/c"},
	} {
		one := func() error {
			code, e, body, err := get(tc.target)
			if err != nil {
				return err
			}
			if code != 200 || e.Path != tc.path || e.RawURI != tc.rawURI {
				return fmt.Errorf("GET %s = %d %s; want 200 path=%q raw_uri=%q", tc.target, code, body, tc.path, tc.rawURI)
			}
			return nil
		}
		t.Run(tc.id, func(t *testing.T) {
			onceThenConcurrently(t, caseN, one)
		})
	}

	t.Run("raw-utf8-bytes", func(t *testing.T) {
		one := func() error {
			code, e, body, err := get("/\xf0\x9f\x91\xbd")
			if err != nil {
				return fmt.Errorf("%v; want a status line (200 or 400), never a bare close", err)
			}
			switch code {
			case 400:
			case 200:
				if e.Path != "/👽" {
					return fmt.Errorf("raw UTF-8 path served as %s; want path \"/👽\" (latin-1 mapping)", body)
				}
			default:
				return fmt.Errorf("raw UTF-8 path = %d %q; want 200 or 400", code, body)
			}
			return nil
		}
		if err := one(); err != nil {
			t.Fatal(err)
		}
		code, _, body, _ := get("/\xf0\x9f\x91\xbd")
		t.Logf("raw UTF-8 bytes in the request line: %d %q", code, body)
		concurrently(t, caseN, func(int) error { return one() })
	})
}

// B27 — Streaming backpressure (granian#885). PEP 3333, "Buffering and
// Streaming": the server pulls the next block only as the socket drains.
//
// The case reads for 30 s; this test reads for 10 s (64 KiB a second), which
// is long enough to see an unbounded buffer grow by hundreds of MB and keeps
// the suite short. The client's receive buffer is pinned to 64 KiB before
// connecting so that the kernel's receive-side autotuning (tcp_rmem up to
// 32 MiB here) does not count as data "read" by the client.
func TestB27_StreamingBackpressure(t *testing.T) {
	const (
		readSeconds = 10 // shortened from the case's 30 s
		block       = 64 << 10
		maxGrowthKB = 32 << 10 // 32 MB
	)

	// slowRead sends the request, reads the head, then reads 64 KiB a
	// second; each second it calls check with the bytes read so far.
	slowRead := func(t *testing.T, addr, target string, check func(read int64)) *http.Response {
		c := dialSmallRcvbuf(t, addr, block)
		defer c.Close()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", target)
		cr := &countingReader{r: c}
		br := bufio.NewReaderSize(cr, 4096)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("GET %s: reading the head: %v", target, err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d; want 200", target, resp.StatusCode)
		}
		buf := make([]byte, block)
		for i := 0; i < readSeconds; i++ {
			time.Sleep(time.Second)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatalf("GET %s: reading block %d: %v", target, i, err)
			}
			check(cr.n.Load())
		}
		return resp
	}

	t.Run("generator", func(t *testing.T) {
		s := Start(t, "case_b27:app")
		pid := appPID(t, s)
		_, _ = s.Get(t, "/count")
		base := vmRSSKB(t, pid)
		maxGrowth := int64(0)
		slowRead(t, s.Addr, "/gen", func(read int64) {
			produced, _ := b27Count(t, s)
			limit := read/block + 64
			rss := vmRSSKB(t, pid)
			if rss-base > maxGrowth {
				maxGrowth = rss - base
			}
			t.Logf("read %d bytes, app produced %d chunks (limit %d), RSS +%d kB", read, produced, limit, rss-base)
			if produced > limit {
				t.Errorf("app produced %d chunks with %d bytes read by the client; want ≤ %d (read/65536 + 64): the server pulls from the iterator faster than the socket drains",
					produced, read, limit)
			}
		})
		if maxGrowth >= maxGrowthKB {
			t.Errorf("worker RSS grew by %d kB while a slow client read a streamed body; want < %d kB", maxGrowth, maxGrowthKB)
		}
		// The client is gone (slowRead closed it): the iteration stops and
		// close() runs (PEP 3333; DESIGN.md, WSGI).
		deadline := time.Now().Add(5 * time.Second)
		for {
			produced, closed := b27Count(t, s)
			if closed {
				if produced >= 16384 {
					t.Errorf("generator ran to its end (%d chunks) although the client went away", produced)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("generator not closed 5 s after the client went away (%d chunks produced)", produced)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("file_wrapper", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sparse-1GiB")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, 1<<30); err != nil {
			t.Fatal(err)
		}
		s := Start(t, "case_b27:app")
		pid := appPID(t, s)
		_, _ = s.Get(t, "/count")
		base := vmRSSKB(t, pid)
		maxGrowth := int64(0)
		resp := slowRead(t, s.Addr, "/file?"+path, func(read int64) {
			rss := vmRSSKB(t, pid)
			if rss-base > maxGrowth {
				maxGrowth = rss - base
			}
			t.Logf("read %d bytes, RSS +%d kB", read, rss-base)
		})
		if resp.ContentLength != 1<<30 {
			t.Errorf("file_wrapper response Content-Length = %d; want %d", resp.ContentLength, 1<<30)
		}
		if maxGrowth >= maxGrowthKB {
			t.Errorf("worker RSS grew by %d kB while a slow client read a 1 GiB file_wrapper body; want < %d kB", maxGrowth, maxGrowthKB)
		}
		if code, body := s.Get(t, "/count"); code != 200 {
			t.Errorf("GET /count after the slow client = %d %q; want 200", code, body)
		}
	})
}

func b27Count(t *testing.T, s *Server) (produced int64, closed bool) {
	t.Helper()
	code, body := s.Get(t, "/count")
	var c int
	if _, err := fmt.Sscanf(body, "%d %d", &produced, &c); code != 200 || err != nil {
		t.Fatalf("GET /count = %d %q", code, body)
	}
	return produced, c == 1
}

// B33 — Thread pool starvation behind long-lived responses (granian#873).
// With 25 threads, /fast is served at once while 1 or 24 streams run; with
// all 25 busy it gets the documented answer: 503 with Retry-After once
// --queue-timeout (2 s here) has passed, never a hang. The bound on /fast
// is 1 s, not the case's 0.2 s: a time limit in a test only catches a hang
// or a starved queue; latency belongs to bench/.
func TestB33_ThreadPoolStarvation(t *testing.T) {
	s := Start(t, "--blocking-threads", "25", "--queue-timeout", "2s", "--graceful-timeout", "2s", "case_b33:app")

	var (
		mu      sync.Mutex
		streams []net.Conn
	)
	t.Cleanup(func() { // before the server stops (cleanups run last-in first-out)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range streams {
			c.Close()
		}
	})
	// openStreams starts n /stream requests and waits until each has sent
	// its first tick, so each holds a pool thread.
	openStreams := func(t *testing.T, n int) {
		t.Helper()
		concurrently(t, n, func(int) error {
			c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
			if err != nil {
				return err
			}
			mu.Lock()
			streams = append(streams, c)
			mu.Unlock()
			io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var got []byte
			p := make([]byte, 1024)
			for !bytes.Contains(got, []byte("tick\n")) {
				k, err := c.Read(p)
				got = append(got, p[:k]...)
				if err != nil {
					return fmt.Errorf("/stream: no first tick: %v (got %q)", err, got)
				}
			}
			return nil
		})
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	fast := func() (int, http.Header, time.Duration, error) {
		start := time.Now()
		resp, err := client.Get(s.URL + "/fast")
		if err != nil {
			return 0, nil, time.Since(start), err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header, time.Since(start), nil
	}

	for _, tc := range []struct {
		id    string
		total int // streams running in the end
	}{
		{"1-stream", 1},
		{"24-streams", 24},
	} {
		t.Run(tc.id, func(t *testing.T) {
			mu.Lock()
			have := len(streams)
			mu.Unlock()
			openStreams(t, tc.total-have)
			time.Sleep(time.Second)
			code, _, d, err := fast()
			if err != nil || code != 200 || d > time.Second {
				t.Fatalf("GET /fast with %d streams running = %d %v in %v; want 200 within 1 s", tc.total, code, err, d)
			}
		})
	}
	t.Run("25-streams", func(t *testing.T) {
		mu.Lock()
		have := len(streams)
		mu.Unlock()
		openStreams(t, 25-have)
		code, h, d, err := fast()
		if err != nil {
			t.Fatalf("GET /fast with all 25 threads busy: %v after %v; want 503 with Retry-After after the 2 s queue timeout", err, d)
		}
		if code != 503 || h.Get("Retry-After") == "" || d > 4*time.Second {
			t.Fatalf("GET /fast with all 25 threads busy = %d Retry-After=%q in %v; want 503 with Retry-After within ~2 s", code, h.Get("Retry-After"), d)
		}
		t.Logf("GET /fast with 25 streams: %d in %v", code, d)
	})
	t.Run("recovers", func(t *testing.T) {
		// One stream's client goes away: its thread is freed at the next
		// tick and /fast is served again.
		mu.Lock()
		streams[0].Close()
		mu.Unlock()
		deadline := time.Now().Add(8 * time.Second)
		for {
			code, _, d, err := fast()
			if err == nil && code == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /fast after a stream's client left = %d %v (%v); want 200 once its thread is free", code, err, d)
			}
		}
	})
}

// ---- helpers of this file ----------------------------------------------------

// dialSmallRcvbuf connects with SO_RCVBUF set before connect(), so the
// kernel does not autotune the receive window past it.
func dialSmallRcvbuf(t testing.TB, addr string, size int) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return c
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
