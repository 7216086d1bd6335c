package tests

// Request body buffering (issue 29): a WSGI request's body is read whole by
// Go (memory up to --request-buffer, the rest spooled to an unlinked temp
// file) before the request waits for a Python thread, so slow uploads hold
// no pool thread. testapps/upload_buffer.py answers each body's length and
// sha256.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const bufferApp = "upload_buffer:app"

// slowUpload is one POST sent in parts on its own connection: the head and
// the first `first` body bytes at once, then the rest in `pieces` writes
// `gap` apart (a chunked body sends each write as one chunk).
type slowUpload struct {
	path    string
	body    []byte
	chunked bool
	first   int
	pieces  int
	gap     time.Duration
	// hold, when set, is called after the first part is sent and before
	// the rest (to look at the server meanwhile).
	hold func()
}

func (u slowUpload) head() string {
	framing := fmt.Sprintf("Content-Length: %d", len(u.body))
	if u.chunked {
		framing = "Transfer-Encoding: chunked"
	}
	return "POST " + u.path + " HTTP/1.1\r\nHost: a\r\n" + framing + "\r\nConnection: close\r\n\r\n"
}

func (u slowUpload) part(p []byte) []byte {
	if !u.chunked || len(p) == 0 {
		return p
	}
	return []byte(fmt.Sprintf("%x\r\n%s\r\n", len(p), p))
}

// do sends u to addr and returns the response's status and body.
func (u slowUpload) do(addr string) (int, string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	if _, err := c.Write(append([]byte(u.head()), u.part(u.body[:u.first])...)); err != nil {
		return 0, "", err
	}
	if u.hold != nil {
		u.hold()
	}
	// A write error (the server refused the body and closed) still
	// leaves its answer to read.
	rest := u.body[u.first:]
	var werr error
	for i := 0; i < u.pieces && len(rest) > 0 && werr == nil; i++ {
		time.Sleep(u.gap)
		n := (len(rest) + (u.pieces - i) - 1) / (u.pieces - i)
		_, werr = c.Write(u.part(rest[:n]))
		rest = rest[n:]
	}
	if u.chunked && werr == nil {
		_, werr = c.Write([]byte("0\r\n\r\n"))
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		if werr != nil {
			return 0, "", fmt.Errorf("%v (after writing: %v)", err, werr)
		}
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// randomBody returns n pseudo-random bytes (seeded: reproducible).
func randomBody(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// wantUpload is upload_buffer's answer to body: length, sha256,
// CONTENT_LENGTH ("-" for a chunked body: PEP 3333 leaves it absent) and
// wsgi.input_terminated.
func wantUpload(body []byte, chunked bool) string {
	cl := fmt.Sprint(len(body))
	if chunked {
		cl = "-"
	}
	return fmt.Sprintf("%d %s %s True", len(body), sha256Hex(body), cl)
}

// TestBuffer_SlowUploadsHoldNoThread is the slow-upload attack, scaled
// down: with 4 pool threads and --queue-timeout 1s, 8 clients upload
// 100 KiB each (half Content-Length, half chunked), 70 KiB at once (past
// the old 64 KiB read-ahead) and the rest over ~3 s, while normal GETs run.
// Every GET is served (none gets 503 because the uploads hold the
// threads), and the app then gets each body intact. Before buffering, the
// uploads took all 4 threads for ~3 s and the GETs queued past 1 s got
// 503.
func TestBuffer_SlowUploadsHoldNoThread(t *testing.T) {
	s := Start(t, "--threads", "4", "--queue-timeout", "1", bufferApp)
	const clients, size = 8, 100 << 10
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		u := slowUpload{path: "/upload", body: randomBody(size, int64(i)), chunked: i%2 == 1, first: 70 << 10, pieces: 10, gap: 300 * time.Millisecond}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, got, err := u.do(s.Addr)
			if want := wantUpload(u.body, u.chunked); err != nil || code != 200 || got != want {
				errs <- fmt.Errorf("upload (chunked %v) = %d %q, %v; want 200 %q", u.chunked, code, got, err, want)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // the heads and first 70 KiB are in
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// Open loop: one GET every 100 ms, each on its own connection.
	var mu sync.Mutex
	served, refused, other := 0, 0, 0
	var gets sync.WaitGroup
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		gets.Add(1)
		go func() {
			defer gets.Done()
			resp, err := client.Get(s.URL + "/")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				other++
				t.Logf("GET /: %v", err)
			case resp.StatusCode == 200:
				served++
			case resp.StatusCode == 503:
				refused++
			default:
				other++
				t.Logf("GET / = %d", resp.StatusCode)
			}
		}()
	}
	gets.Wait()
	wg.Wait()
	close(errs)
	t.Logf("normal GETs during %d slow uploads: %d served, %d answered 503, %d other", clients, served, refused, other)
	if refused > 0 || other > 0 || served == 0 {
		t.Errorf("normal GETs: %d served, %d 503, %d other; want every one served", served, refused, other)
	}
	for err := range errs {
		t.Error(err)
	}
}

// spoolFDs counts the worker's open files in dir (spool files have no
// name, but /proc shows the directory they were made in).
func spoolFDs(t *testing.T, pid int, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("reading the worker's fds: %v", err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); err == nil && strings.HasPrefix(l, dir+"/") {
			n++
		}
	}
	return n
}

// waitFor polls cond every 20 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// TestBuffer_SpooledBodyIntact: a 1 MiB body, past a 16 KiB memory bound,
// is spooled to a file in --request-buffer-dir while it arrives (the
// worker holds a file there, with no name: the directory stays empty),
// and the app reads it back intact with read(n), read() and line
// iteration, Content-Length and chunked; CONTENT_LENGTH is the declared
// one, absent for chunked, and wsgi.input_terminated is True. The file is
// closed after the request.
func TestBuffer_SpooledBodyIntact(t *testing.T) {
	dir := t.TempDir()
	s := Start(t, "--request-buffer", "16384", "--request-buffer-dir", dir, bufferApp)
	pid := appPID(t, s)
	body := randomBody(1<<20, 7)
	for _, tc := range []struct {
		name    string
		query   string
		chunked bool
	}{{"cl-read8k", "", false}, {"cl-read-all", "?mode=all", false}, {"cl-lines", "?mode=lines", false},
		{"chunked-read8k", "", true}, {"chunked-lines", "?mode=lines", true}} {
		t.Run(tc.name, func(t *testing.T) {
			spooling := false
			u := slowUpload{path: "/upload" + tc.query, body: body, chunked: tc.chunked, first: 600 << 10, pieces: 4, gap: 50 * time.Millisecond,
				hold: func() { spooling = waitFor(5*time.Second, func() bool { return spoolFDs(t, pid, dir) > 0 }) }}
			code, got, err := u.do(s.Addr)
			if want := wantUpload(body, tc.chunked); err != nil || code != 200 || got != want {
				t.Fatalf("upload = %d %q, %v; want 200 %q", code, got, err, want)
			}
			if !spooling {
				t.Errorf("no spool file in %s while the body arrived", dir)
			}
			if !waitFor(2*time.Second, func() bool { return spoolFDs(t, pid, dir) == 0 }) {
				t.Errorf("%d spool files still open after the request", spoolFDs(t, pid, dir))
			}
			if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) > 0 {
				t.Errorf("files left in %s: %v", dir, names)
			}
		})
	}
}

// TestBuffer_Limits: with --request-buffer 16384 --request-buffer-disk
// 65536, a body that can never fit gets 413 (a declared one before any
// body byte and without a 100 Continue; a chunked one once it grows past)
// and the connection closes; a body that fits but finds the disk budget
// held by another upload gets 503 with Retry-After, and is served once
// that upload is done.
func TestBuffer_Limits(t *testing.T) {
	dir := t.TempDir()
	s := Start(t, "--request-buffer", "16384", "--request-buffer-disk", "65536", "--request-buffer-dir", dir, bufferApp)
	pid := appPID(t, s)
	t.Run("content-length-413", func(t *testing.T) {
		got, closed := Raw(t, s.Addr, "POST /upload HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 200000\r\n\r\n", 5*time.Second)
		if codes := StatusCodes(got); len(codes) != 1 || codes[0] != "413" || !closed {
			t.Errorf("codes %v, closed %v; want [413] and a close\n%q", codes, closed, got)
		}
	})
	t.Run("chunked-413", func(t *testing.T) {
		u := slowUpload{path: "/upload", body: randomBody(200<<10, 1), chunked: true, first: 8 << 10, pieces: 12}
		code, got, err := u.do(s.Addr)
		if code != 413 {
			t.Errorf("chunked 200 KiB = %d %q, %v; want 413", code, got, err)
		}
	})
	t.Run("budget-full-503", func(t *testing.T) {
		a := randomBody(60000, 2)
		release := make(chan struct{})
		done := make(chan string, 1)
		go func() {
			u := slowUpload{path: "/upload", body: a, first: 20000, pieces: 1, hold: func() { <-release }}
			code, got, err := u.do(s.Addr)
			done <- fmt.Sprintf("%d %s %v", code, got, err)
		}()
		// A's spool file is open once its first 16 KiB are in memory,
		// after its 43616 bytes beyond them were reserved.
		if !waitFor(10*time.Second, func() bool { return spoolFDs(t, pid, dir) > 0 }) {
			t.Fatal("A never opened its spool file")
		}
		got, closed := Raw(t, s.Addr, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 60000\r\n\r\n", 5*time.Second)
		if codes := StatusCodes(got); len(codes) != 1 || codes[0] != "503" || !strings.Contains(got, "Retry-After: 1\r\n") || !closed {
			t.Errorf("B while A holds the budget: codes %v, closed %v; want [503] with Retry-After and a close\n%q", codes, closed, got)
		}
		close(release)
		if got, want := <-done, "200 "+wantUpload(a, false)+" <nil>"; got != want {
			t.Errorf("A = %q; want %q", got, want)
		}
		b := randomBody(60000, 3)
		code, body, err := slowUpload{path: "/upload", body: b, first: len(b)}.do(s.Addr)
		if want := wantUpload(b, false); err != nil || code != 200 || body != want {
			t.Errorf("B after A = %d %q, %v; want 200 %q", code, body, err, want)
		}
	})
}

// TestBuffer_OffStreams: by default the app runs once the whole body is
// in (its streamed answer starts only after the last byte is sent);
// --request-buffer 0 restores streaming: the app reads and answers the
// first bytes while the client still holds the last ones.
func TestBuffer_OffStreams(t *testing.T) {
	body := randomBody(200<<10, 5)
	for _, tc := range []struct {
		name   string
		args   []string
		stream bool
	}{{"default-buffers", nil, false}, {"off-streams", []string{"--request-buffer", "0"}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := Start(t, append(tc.args, bufferApp)...)
			c := dialT(t, s.Addr)
			defer c.Close()
			head := fmt.Sprintf("POST /stream HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(body))
			if _, err := c.Write(append([]byte(head), body[:100<<10]...)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			if tc.stream {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
			} else {
				c.SetReadDeadline(time.Now().Add(time.Second))
			}
			_, err := br.Peek(1)
			early := err == nil
			if early != tc.stream {
				t.Fatalf("answer before the last body bytes were sent: %v (%v); want %v", early, err, tc.stream)
			}
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Write(body[100<<10:]); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := fmt.Sprintf("first\n%d %s\n", len(body), sha256Hex(body))
			if err != nil || resp.StatusCode != 200 || string(got) != want {
				t.Errorf("POST /stream = %d %q, %v; want 200 %q", resp.StatusCode, got, err, want)
			}
		})
	}
}
