package tests

// ASGI 3.0 (HTTP 2.4, Lifespan 2.0) against the real binary: the scope, the
// request body events, disconnects, lifespan, invalid messages, the loop's
// default executor, /readyz during startup and --loop. Cases B07, B08, B09
// (one worker) and B26 of docs/cases.md. Apps:
// testapps/asgi_*.py. Frameworks from PyPI are in asgi_frameworks_test.go.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ---- helpers ----------------------------------------------------------------

// asgiChildren lists the child processes of pid (/proc/PID/task/*/children).
func asgiChildren(pid int) []int {
	var kids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if k, err := strconv.Atoi(field); err == nil {
				kids = append(kids, k)
			}
		}
	}
	return kids
}

// asgiServingPID is the process that runs the app: the process the test
// started, or its only child when a master runs one worker.
func asgiServingPID(t testing.TB, s *Server) int {
	t.Helper()
	switch kids := asgiChildren(s.PID); len(kids) {
	case 0:
		return s.PID
	case 1:
		return kids[0]
	default:
		t.Fatalf("server %d has %d child processes %v; want at most one worker", s.PID, len(kids), kids)
		return 0
	}
}

// asgiClient is the client of these tests. Its time limit only catches a
// hang: the test then fails with the server's log instead of the whole run
// timing out.
var asgiClient = &http.Client{Timeout: 20 * time.Second}

// asgiGetT fetches path from s with asgiClient; any error fails t.
func asgiGetT(t testing.TB, s *Server, path string) (int, string) {
	t.Helper()
	code, body, _, err := asgiGet(asgiClient, s.URL+path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return code, body
}

// asgiGet fetches u and returns status, body and headers.
func asgiGet(c *http.Client, u string) (int, string, http.Header, error) {
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, string(b), resp.Header, fmt.Errorf("GET %s: reading body: %v", u, err)
	}
	return resp.StatusCode, string(b), resp.Header, nil
}

// asgiGetJSON fetches u, wants a 200, and decodes the JSON body into v.
func asgiGetJSON(u string, v any) error {
	code, body, _, err := asgiGet(asgiClient, u)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("GET %s = %d %q; want 200", u, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("GET %s: body %q: %v", u, body, err)
	}
	return nil
}

// asgiTracebacks counts the log records that name marker and carry a
// Python traceback.
func asgiTracebacks(logs, marker string) int {
	n := 0
	for _, rec := range logRecords(logs) {
		text := recordText(rec)
		if strings.Contains(text, marker) && strings.Contains(text, "Traceback (most recent call last)") {
			n++
		}
	}
	return n
}

// asgiNoErrors fails t if the log holds a traceback, a panic or an ERROR
// record.
func asgiNoErrors(t *testing.T, logs string) {
	t.Helper()
	for _, rec := range logRecords(logs) {
		text := recordText(rec)
		if rec["level"] == "ERROR" || strings.Contains(text, "Traceback") || strings.Contains(text, "panic") {
			t.Errorf("server log has an error record: %s", text)
		}
	}
}

// asgiReadUntil reads from c until the bytes read contain want, or
// timeout passes.
func asgiReadUntil(c net.Conn, want string, timeout time.Duration) (string, error) {
	var buf bytes.Buffer
	p := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(timeout))
	for !strings.Contains(buf.String(), want) {
		n, err := c.Read(p)
		buf.Write(p[:n])
		if err != nil {
			return buf.String(), fmt.Errorf("after %q: %v; want %q", buf.String(), err, want)
		}
	}
	return buf.String(), nil
}

// ---- the HTTP connection scope -----------------------------------------------

// asgiScopeField is one key of the scope as testapps/asgi_scope.py reports it.
type asgiScopeField struct {
	Type string          `json:"type"`
	Repr string          `json:"repr"`
	JSON json.RawMessage `json:"json"`
}

type asgiScopeEcho map[string]json.RawMessage

func (e asgiScopeEcho) field(key string) (asgiScopeField, bool) {
	raw, ok := e[key]
	if !ok {
		return asgiScopeField{}, false
	}
	var f asgiScopeField
	json.Unmarshal(raw, &f)
	return f, true
}

// asgiScope sends raw on a new connection and decodes the scope echo; it
// also returns the client's local port.
func asgiScope(addr, raw string) (asgiScopeEcho, int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		return nil, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%q: %v", raw, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		return nil, 0, fmt.Errorf("%q = %d %q %v; want 200 and the scope", raw, resp.StatusCode, b, err)
	}
	var e asgiScopeEcho
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, 0, fmt.Errorf("%q: body %q: %v", raw, b, err)
	}
	return e, c.LocalAddr().(*net.TCPAddr).Port, nil
}

// asgiScopeWant is what one scope key must be: its Python type and repr().
type asgiScopeWant struct{ key, typ, repr string }

func asgiCheckScope(e asgiScopeEcho, wants []asgiScopeWant) error {
	var errs []string
	for _, w := range wants {
		f, ok := e.field(w.key)
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("scope[%q] missing; want %s %s", w.key, w.typ, w.repr))
		case f.Type != w.typ || (w.repr != "" && f.Repr != w.repr):
			errs = append(errs, fmt.Sprintf("scope[%q] = %s %s; want %s %s", w.key, f.Type, f.Repr, w.typ, w.repr))
		}
	}
	if errs != nil {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// ASGI HTTP, "Connection Scope": every key with its type, path decoded as
// UTF-8 (B05's ASGI half), raw_path keeping %2F, query_string as bytes,
// headers as lower-cased byte pairs in request order with repeats kept,
// client and server as (str, int).
func TestASGI_Scope(t *testing.T) {
	s := Start(t, "asgi_scope:app")
	_, serverPort, _ := net.SplitHostPort(s.Addr)

	one := func(raw string, wants []asgiScopeWant) (asgiScopeEcho, error) {
		e, clientPort, err := asgiScope(s.Addr, raw)
		if err != nil {
			return nil, err
		}
		wants = append([]asgiScopeWant{
			{"type", "str", "'http'"},
			{"scheme", "str", "'http'"},
			{"client", "tuple", fmt.Sprintf("('127.0.0.1', %d)", clientPort)},
			{"server", "tuple", fmt.Sprintf("('127.0.0.1', %s)", serverPort)},
			{"root_path", "str", "''"},
			{"headers", "list", ""},
			{"asgi", "dict", ""},
		}, wants...)
		if err := asgiCheckScope(e, wants); err != nil {
			return e, fmt.Errorf("%q:\n%v", raw, err)
		}
		// asgi: {"version": "3.0", "spec_version": "2.x"}
		var asgi struct{ Version, SpecVersion string }
		f, _ := e.field("asgi")
		var m map[string]string
		json.Unmarshal(f.JSON, &m)
		asgi.Version, asgi.SpecVersion = m["version"], m["spec_version"]
		if asgi.Version != "3.0" || !regexp.MustCompile(`^2\.\d+$`).MatchString(asgi.SpecVersion) {
			return e, fmt.Errorf("%q: scope[\"asgi\"] = %s; want version \"3.0\" and a 2.x spec_version", raw, f.Repr)
		}
		var ht []string
		json.Unmarshal(e["_header_types"], &ht)
		for _, h := range ht {
			if !strings.HasSuffix(h, "(bytes,bytes)") {
				return e, fmt.Errorf("%q: header pair types %v; want byte strings", raw, ht)
			}
		}
		return e, nil
	}

	for _, tc := range []struct {
		id    string
		raw   string
		wants []asgiScopeWant
	}{
		{"percent-encoded-utf8-path",
			"GET /tags/%E5%A5%94%E9%A9%B0/x HTTP/1.1\r\nHost: a\r\n\r\n",
			[]asgiScopeWant{
				{"path", "str", "'/tags/奔驰/x'"},
				{"raw_path", "bytes", "b'/tags/%E5%A5%94%E9%A9%B0/x'"},
				{"query_string", "bytes", "b''"},
				{"method", "str", "'GET'"},
				{"http_version", "str", "'1.1'"},
			}},
		{"encoded-slash-kept-in-raw_path",
			"GET /a%2Fb/c HTTP/1.1\r\nHost: a\r\n\r\n",
			[]asgiScopeWant{
				{"path", "str", "'/a/b/c'"},
				{"raw_path", "bytes", "b'/a%2Fb/c'"},
			}},
		{"query_string-raw-bytes",
			"GET /q?a=1&b=%20x&c=%E5%A5&a=2 HTTP/1.1\r\nHost: a\r\n\r\n",
			[]asgiScopeWant{
				{"path", "str", "'/q'"},
				{"raw_path", "bytes", "b'/q'"},
				{"query_string", "bytes", "b'a=1&b=%20x&c=%E5%A5&a=2'"},
			}},
		{"headers-lowercase-ordered-repeated",
			"GET /h HTTP/1.1\r\nHost: a\r\nX-Multi: 1\r\nX-CASE: Up Per\r\nx-multi: 2\r\nAccept: */*\r\n\r\n",
			[]asgiScopeWant{
				{"headers", "list", "[(b'host', b'a'), (b'x-multi', b'1'), (b'x-case', b'Up Per'), (b'x-multi', b'2'), (b'accept', b'*/*')]"},
			}},
		{"http-1.0",
			"GET /old HTTP/1.0\r\n\r\n",
			[]asgiScopeWant{
				{"http_version", "str", "'1.0'"},
				{"headers", "list", "[]"},
			}},
		{"post-method",
			"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
			[]asgiScopeWant{
				{"method", "str", "'POST'"},
				{"headers", "list", "[(b'host', b'a'), (b'content-length', b'3')]"},
			}},
		{"extension-method",
			"PROPFIND /p HTTP/1.1\r\nHost: a\r\n\r\n",
			[]asgiScopeWant{{"method", "str", "'PROPFIND'"}}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			if _, err := one(tc.raw, tc.wants); err != nil {
				t.Fatal(err)
			}
			concurrently(t, caseN, func(int) error { _, err := one(tc.raw, tc.wants); return err })
		})
	}

	// ASGI HTTP, "Connection Scope", state: "A copy of the namespace passed
	// into the lifespan corresponding to this request"; a shallow copy, so
	// a key added by one request is not seen by the next while a mutable
	// value from startup is shared.
	t.Run("state-from-lifespan", func(t *testing.T) {
		e, err := one("GET /s HTTP/1.1\r\nHost: a\r\n\r\n", []asgiScopeWant{{"state", "dict", ""}})
		if err != nil {
			t.Fatal(err)
		}
		f, _ := e.field("state")
		var st map[string]any
		json.Unmarshal(f.JSON, &st)
		if st["answer"] != float64(42) {
			t.Fatalf("scope[\"state\"] = %s; want the lifespan's {'answer': 42, ...}", f.Repr)
		}
		_, body := asgiGetT(t, s, "/shared")
		before, _ := strconv.Atoi(body)
		const n = 5
		for i := 0; i < n; i++ {
			code, body := asgiGetT(t, s, "/state/set")
			if code != 200 || body != `["added", "answer", "shared"]` {
				t.Fatalf("GET /state/set = %d %s; want the request's own state with \"added\"", code, body)
			}
			code, body = asgiGetT(t, s, "/state")
			if code != 200 || body != `["answer", "shared"]` {
				t.Fatalf("GET /state after /state/set = %d %s; want [\"answer\", \"shared\"]: each request gets its own (shallow) copy", code, body)
			}
		}
		if code, body := asgiGetT(t, s, "/shared"); code != 200 || body != strconv.Itoa(before+n) {
			t.Fatalf("GET /shared = %d %q; want %d: the copy is shallow, the list from startup is shared", code, body, before+n)
		}
	})
}

// ASGI HTTP, root_path: with --root-path /api a request for /api/items has
// root_path "/api" and a path (and raw_path) that still carries the prefix.
func TestASGI_ScopeRootPath(t *testing.T) {
	s := Start(t, "--root-path", "/api", "asgi_scope:app")
	e, _, err := asgiScope(s.Addr, "GET /api/items/%E5%A5%94?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := asgiCheckScope(e, []asgiScopeWant{
		{"root_path", "str", "'/api'"},
		{"path", "str", "'/api/items/奔'"},
		{"raw_path", "bytes", "b'/api/items/%E5%A5%94'"},
		{"query_string", "bytes", "b'x=1'"},
	}); err != nil {
		t.Fatal(err)
	}
}

// ASGI HTTP, "Connection Scope" on a Unix socket (--uds): server is
// [path, None]; client, which must be a [host, port] pair if present, is
// absent or None (a Unix peer has neither).
func TestASGI_ScopeUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ts.sock")
	Start(t, "--uds", sock, "asgi_scope:app")
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /u HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET /u over %s: %v", sock, err)
	}
	b, _ := io.ReadAll(resp.Body)
	var e asgiScopeEcho
	if resp.StatusCode != 200 || json.Unmarshal(b, &e) != nil {
		t.Fatalf("GET /u over %s = %d %q", sock, resp.StatusCode, b)
	}
	if err := asgiCheckScope(e, []asgiScopeWant{{"server", "tuple", "('" + sock + "', None)"}}); err != nil {
		t.Error(err)
	}
	if f, ok := e.field("client"); ok && f.Repr != "None" && !regexp.MustCompile(`^\('[^']+', \d+\)$`).MatchString(f.Repr) {
		t.Errorf("scope[\"client\"] = %s over a Unix socket; want it absent or None (ASGI: a [host, port] pair with an int port, or None)", f.Repr)
	}
}

// A burst of concurrent requests against a freshly started server: every
// request is answered. The first burst is when the server creates most of
// its per-request slots while the first requests already finish and hand
// theirs back; each round starts a new server to hit that window again.
func TestASGI_ConcurrentBurst(t *testing.T) {
	const rounds, burst = 5, 64
	for r := 0; r < rounds; r++ {
		t.Run(fmt.Sprintf("fresh-server-%d", r), func(t *testing.T) {
			s := Start(t, "asgi_hello:app")
			c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: burst}}
			defer c.CloseIdleConnections()
			concurrently(t, burst, func(int) error {
				code, body, _, err := asgiGet(c, s.URL+"/")
				if err != nil || code != 200 || body != "Hello, World!\n" {
					return fmt.Errorf("GET / = %d %q %v; want 200 \"Hello, World!\\n\"", code, body, err)
				}
				return nil
			})
		})
	}
}

// ---- request body events -----------------------------------------------------

type asgiBodyEcho struct {
	Len      int      `json:"len"`
	SHA256   string   `json:"sha256"`
	Receives int      `json:"receives"`
	Types    []string `json:"types"`
	Timeouts int      `json:"timeouts"`
	Body     string   `json:"body"`
}

// asgiOnlyReader hides every method but Read, so net/http cannot learn the
// length and sends the body chunked.
type asgiOnlyReader struct{ r io.Reader }

func (o asgiOnlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// ASGI HTTP, "Request - receive event": a large body arrives in several
// http.request messages (more_body true until the last), whole and in
// order, with a Content-Length and chunked.
func TestASGI_BodyStreaming(t *testing.T) {
	s := Start(t, "asgi_body:app")
	body := fwRandom(1<<20, 7)
	want := fwSHA256(body)

	post := func(r io.Reader, n int64) (asgiBodyEcho, error) {
		req, _ := http.NewRequest("POST", s.URL+"/sha", r)
		req.ContentLength = n
		resp, got, err := fwDo(asgiClient, req)
		if err != nil {
			return asgiBodyEcho{}, err
		}
		var e asgiBodyEcho
		if resp.StatusCode != 200 || json.Unmarshal([]byte(got), &e) != nil {
			return e, fmt.Errorf("POST /sha = %d %q; want 200 and the body's digest", resp.StatusCode, got)
		}
		return e, nil
	}
	check := func(what string, e asgiBodyEcho, size int, sha string, minReceives int) error {
		if e.Len != size || e.SHA256 != sha {
			return fmt.Errorf("%s: app read %d bytes sha256 %s; want %d bytes %s", what, e.Len, e.SHA256, size, sha)
		}
		if e.Receives < minReceives || len(e.Types) != 1 || e.Types[0] != "http.request" {
			return fmt.Errorf("%s: %d receive() calls, message types %v; want at least %d, only http.request", what, e.Receives, e.Types, minReceives)
		}
		return nil
	}

	t.Run("1MiB-content-length", func(t *testing.T) {
		one := func() error {
			e, err := post(bytes.NewReader(body), int64(len(body)))
			if err != nil {
				return err
			}
			return check("1 MiB with Content-Length", e, len(body), want, 2)
		}
		onceThenConcurrently(t, 4, one)
	})
	t.Run("1MiB-chunked", func(t *testing.T) {
		one := func() error {
			e, err := post(asgiOnlyReader{bytes.NewReader(body)}, -1)
			if err != nil {
				return err
			}
			return check("1 MiB chunked", e, len(body), want, 2)
		}
		onceThenConcurrently(t, 4, one)
	})
	t.Run("chunked-trickled", func(t *testing.T) {
		parts := []string{"POST /sha HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"}
		var all []byte
		for i := 0; i < 5; i++ {
			chunk := fmt.Sprintf("part %d;", i)
			all = append(all, chunk...)
			parts = append(parts, fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk))
		}
		parts = append(parts, "0\r\n\r\n")
		resp, got, err := roundTripRaw(s.Addr, parts, 100*time.Millisecond, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var e asgiBodyEcho
		if resp.StatusCode != 200 || json.Unmarshal([]byte(got), &e) != nil {
			t.Fatalf("trickled chunked POST = %d %q", resp.StatusCode, got)
		}
		if err := check("trickled chunked", e, len(all), fwSHA256(all), 2); err != nil {
			t.Fatal(err)
		}
	})
	// A body that comes after the head, in one piece, is one message: no
	// empty more_body chunk before it (the prefetch found nothing) and no
	// empty final one after it (its last byte ends a Content-Length body).
	t.Run("late-body-one-message", func(t *testing.T) {
		parts := []string{"POST /sha HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", "hello world"}
		resp, got, err := roundTripRaw(s.Addr, parts, 100*time.Millisecond, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var e asgiBodyEcho
		if resp.StatusCode != 200 || json.Unmarshal([]byte(got), &e) != nil {
			t.Fatalf("POST = %d %q", resp.StatusCode, got)
		}
		if err := check("late body", e, 11, fwSHA256([]byte("hello world")), 1); err != nil {
			t.Fatal(err)
		}
		if e.Receives != 1 {
			t.Errorf("late 11-byte body: %d receive() calls; want 1 http.request with the whole body", e.Receives)
		}
	})
	// The same over HTTP/2 (h2c): the DATA frame's bytes reach the declared
	// length; END_STREAM may come later in its own frame.
	t.Run("late-body-one-message-h2", func(t *testing.T) {
		cc := h2cConn(t, s.Addr)
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", s.URL+"/sha", pr)
		req.ContentLength = 11
		go func() {
			time.Sleep(100 * time.Millisecond)
			io.WriteString(pw, "hello world")
			time.Sleep(100 * time.Millisecond)
			pw.Close()
		}()
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e asgiBodyEcho
		if resp.StatusCode != 200 || json.Unmarshal(got, &e) != nil {
			t.Fatalf("POST = %d %q", resp.StatusCode, got)
		}
		if err := check("late body h2", e, 11, fwSHA256([]byte("hello world")), 1); err != nil {
			t.Fatal(err)
		}
		if e.Receives != 1 {
			t.Errorf("late 11-byte body over h2: %d receive() calls; want 1 http.request with the whole body", e.Receives)
		}
	})
	t.Run("no-body", func(t *testing.T) {
		var e asgiBodyEcho
		if err := asgiGetJSON(s.URL+"/sha", &e); err != nil {
			t.Fatal(err)
		}
		if err := check("GET", e, 0, fwSHA256(nil), 1); err != nil {
			t.Fatal(err)
		}
	})
}

// DESIGN.md, ASGI: "a receive() that is cancelled (e.g. by wait_for)
// consumes nothing". The body arrives slowly; the app's receive() calls
// time out (asyncio.wait_for, 0.3 s) in the gaps, and the body must still
// arrive whole and in order.
func TestASGI_CancelledReceiveConsumesNothing(t *testing.T) {
	s := Start(t, "asgi_body:app")
	for _, tc := range []struct {
		id    string
		parts []string
		want  string
	}{
		{"content-length", []string{
			"POST /cancel HTTP/1.1\r\nHost: a\r\nContent-Length: 15\r\n\r\n",
			"hello", "brave", "world",
		}, "hellobraveworld"},
		{"chunked", []string{
			"POST /cancel HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
			"5\r\nhello\r\n", "5\r\nbrave\r\n", "5\r\nworld\r\n0\r\n\r\n",
		}, "hellobraveworld"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			one := func() error {
				resp, got, err := roundTripRaw(s.Addr, tc.parts, 800*time.Millisecond, 10*time.Second)
				if err != nil {
					return err
				}
				var e asgiBodyEcho
				if resp.StatusCode != 200 || json.Unmarshal([]byte(got), &e) != nil {
					return fmt.Errorf("POST /cancel = %d %q; want 200 and the echo", resp.StatusCode, got)
				}
				if e.Body != tc.want {
					return fmt.Errorf("app received body %q after %d cancelled receive() calls; want %q (a cancelled receive() lost or duplicated a message)", e.Body, e.Timeouts, tc.want)
				}
				if e.Timeouts < 2 {
					return fmt.Errorf("only %d receive() calls timed out; the test wants the body to arrive while receive() calls are cancelled", e.Timeouts)
				}
				return nil
			}
			onceThenConcurrently(t, 4, one)
		})
	}
}

// ---- B07 -----------------------------------------------------------------------

// B07 — receive() after the complete body must wait, not return another
// http.request (nginx/unit#1561). ASGI HTTP, "Disconnect - receive event":
// while the client is connected and no response has been sent, a further
// receive() blocks; the app's wait_for(receive(), 0.5) times out → 200.
func TestB07_ReceiveAfterBodyWaits(t *testing.T) {
	s := Start(t, "asgi_b07:app")
	big := fwRandom(1<<20, 11)
	for _, tc := range []struct {
		id     string
		method string
		body   []byte
	}{
		{"GET", "GET", nil},
		{"PUT-small", "PUT", []byte("test")},
		{"PUT-1MiB", "PUT", big},
		{"POST-chunked", "POST", []byte("chunked body")},
	} {
		one := func() error {
			var r io.Reader
			if tc.body != nil {
				r = bytes.NewReader(tc.body)
				if tc.id == "POST-chunked" {
					r = asgiOnlyReader{r}
				}
			}
			req, _ := http.NewRequest(tc.method, s.URL+"/", r)
			start := time.Now()
			resp, got, err := fwDo(asgiClient, req)
			if err != nil {
				return err
			}
			if resp.StatusCode != 200 || got != string(tc.body) {
				return fmt.Errorf("%s / (%d bytes) = %d, %d bytes back; want 200 and the body echoed (500: a receive() after the body returned at once)",
					tc.method, len(tc.body), resp.StatusCode, len(got))
			}
			if d := time.Since(start); d < 450*time.Millisecond {
				return fmt.Errorf("%s / answered in %v; want the app's 0.5 s wait_for to time out first", tc.method, d)
			}
			return nil
		}
		t.Run(tc.id, func(t *testing.T) {
			onceThenConcurrently(t, caseN, one)
		})
	}

	// The case's own check, with curl.
	t.Run("curl", func(t *testing.T) {
		curl, err := exec.LookPath("curl")
		if err != nil {
			t.Skip("curl is not installed; the Go client above covers the case")
		}
		f := filepath.Join(t.TempDir(), "1mib")
		if err := os.WriteFile(f, big, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"-X", "PUT", "--data", "test"},
			{},
			{"-X", "PUT", "--data-binary", "@" + f},
		} {
			cmd := exec.Command(curl, append([]string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20"}, append(args, s.URL+"/")...)...)
			out, err := cmd.Output()
			if err != nil || string(out) != "200" {
				t.Errorf("curl %v = %q %v; want 200", args, out, err)
			}
		}
	})
}

// ---- B08 -----------------------------------------------------------------------

// B08 — an extra http.response.body after completion must not kill the
// worker (granian#707). ASGI HTTP, "Response Body - send event": after
// more_body false, "any further messages on the channel are ignored".
func TestB08_ExtraBodyIgnored(t *testing.T) {
	s := Start(t, "asgi_b08:app")
	pid := asgiServingPID(t, s)

	t.Run("100-sequential", func(t *testing.T) {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
		for i := 0; i < 100; i++ {
			code, body, h, err := asgiGet(c, s.URL+"/")
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			if code != 200 || body != "done" || h.Get("Content-Length") != "4" {
				t.Fatalf("request %d = %d %q (Content-Length %q); want 200 \"done\" (never \"late\")", i, code, body, h.Get("Content-Length"))
			}
		}
	})
	t.Run("100-sequential-curl", func(t *testing.T) {
		curl, err := exec.LookPath("curl")
		if err != nil {
			t.Skip("curl is not installed")
		}
		for i := 0; i < 100; i++ {
			out, err := exec.Command(curl, "-s", "--max-time", "10", s.URL+"/").Output()
			if err != nil || string(out) != "done" {
				t.Fatalf("curl %d = %q %v; want \"done\"", i, out, err)
			}
		}
	})
	t.Run("keep-alive-second-request", func(t *testing.T) {
		c := dialT(t, s.Addr)
		defer c.Close()
		br := bufio.NewReader(c)
		for i := 0; i < 3; i++ {
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d on one connection: %v", i+1, err)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || string(b) != "done" || resp.Close {
				t.Fatalf("request %d on one connection = %d %q close=%v %v; want 200 \"done\", kept open", i+1, resp.StatusCode, b, resp.Close, err)
			}
		}
		// Nothing may follow the last response: "late" must never reach
		// the wire, not even between responses.
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, _ := br.Peek(1); len(n) > 0 {
			rest, _ := ReadAll(c, 100*time.Millisecond)
			t.Fatalf("stray bytes after the responses: %q", string(n)+rest)
		}
	})
	t.Run("pipelined", func(t *testing.T) {
		got, _ := Raw(t, s.Addr, strings.Repeat("GET / HTTP/1.1\r\nHost: a\r\n\r\n", 5), time.Second)
		if n := strings.Count(got, "\r\n\r\ndone"); n != 5 || strings.Contains(got, "late") {
			t.Fatalf("5 pipelined requests: %d \"done\" bodies in %q; want 5 and no \"late\"", n, got)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		concurrently(t, caseN, func(int) error {
			code, body, _, err := asgiGet(asgiClient, s.URL+"/")
			if err != nil || code != 200 || body != "done" {
				return fmt.Errorf("GET / = %d %q %v; want 200 \"done\"", code, body, err)
			}
			return nil
		})
	})

	if now := asgiServingPID(t, s); now != pid {
		t.Errorf("the serving process changed from %d to %d; want the same worker throughout", pid, now)
	}
	starts := 0
	for _, rec := range logRecords(s.Logs()) {
		if rec["msg"] == "worker started" {
			starts++
		}
	}
	if starts > 1 {
		t.Errorf("%d \"worker started\" records; want no restart", starts)
	}
	asgiNoErrors(t, s.Logs())
}

// ---- B09 and lifespan ---------------------------------------------------------

// B09 with one worker — lifespan.startup.failed (uvicorn#1066). ASGI
// Lifespan, "Startup Failed - send event": the server logs the message and
// exits non-zero (not killed by the time limit, which is the 124 of
// `timeout` in the case), and starts no second worker.
func TestB09_StartupFailedExits(t *testing.T) {
	code, d, log := startFailure(t, "asgi_b09:app")
	if code == 0 || code == -1 {
		t.Errorf("exit status = %d; want non-zero (an exit, not a signal)", code)
	}
	n := 0
	for _, rec := range logRecords(log) {
		if strings.Contains(recordText(rec), "backing store unreachable") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d log records carry \"backing store unreachable\"; want the app's message once (one worker)", n)
	}
	starts := 0
	for _, rec := range logRecords(log) {
		if rec["msg"] == "worker started" {
			starts++
		}
	}
	if starts > 1 {
		t.Errorf("%d worker start-ups logged; want 1 (no respawn loop)", starts)
	}
	t.Logf("exited %d after %v", code, d)
}

// --lifespan on: an app that raises on the lifespan scope cannot start.
func TestB09_LifespanOnRaiseExits(t *testing.T) {
	code, _, log := startFailure(t, "--lifespan", "on", "asgi_life_raise:app")
	if code == 0 || code == -1 {
		t.Errorf("exit status = %d; want non-zero", code)
	}
	if !strings.Contains(log, "asgi_life_raise only speaks http") {
		t.Errorf("the log does not name the app's exception (\"asgi_life_raise only speaks http\")")
	}
}

// An app that says lifespan.startup.failed and then raises (Starlette
// does): startup fails with the app's message, said once, escaped where
// it holds a lone surrogate; the raise is not a second report, and never
// "after startup completed". The surrogate made the server's own report
// fail with a UnicodeEncodeError, and the message was lost.
func TestB09_LifespanFailedThenRaise(t *testing.T) {
	code, _, log := startFailure(t, "--lifespan", "on", "asgi_life_failraise:app")
	if code == 0 || code == -1 {
		t.Errorf("exit status = %d; want non-zero", code)
	}
	if !strings.Contains(log, `turnstile-lf-7c1 caf\\udce9`) && !strings.Contains(log, `turnstile-lf-7c1 caf\udce9`) {
		t.Errorf("the log does not give the app's message, escaped:\n%s", log)
	}
	if strings.Contains(log, "after startup completed") || strings.Contains(log, "UnicodeEncodeError") {
		t.Errorf("the log reports the failure wrongly:\n%s", log)
	}
}

// --lifespan auto: an app that raises on the lifespan scope does not
// support lifespan (ASGI Lifespan: "the server should continue"); the
// server serves and says so once.
func TestB09_LifespanAutoRaiseContinues(t *testing.T) {
	s := Start(t, "--lifespan", "auto", "asgi_life_raise:app")
	for i := 0; i < 10; i++ {
		if code, body := asgiGetT(t, s, "/"); code != 200 || body != "ok state=False lifespan_calls=1" {
			t.Fatalf("GET / = %d %q; want 200 \"ok state=False lifespan_calls=1\"", code, body)
		}
	}
	said := 0
	unsupported := regexp.MustCompile(`(?i)lifespan.*(unsupported|not supported|without lifespan)`)
	for _, rec := range logRecords(s.Logs()) {
		if unsupported.MatchString(recordText(rec)) {
			said++
		}
		if rec["level"] == "ERROR" {
			t.Errorf("ERROR record for an app without lifespan support in auto mode: %s", recordText(rec))
		}
	}
	if said != 1 {
		t.Errorf("%d log records say lifespan is unsupported; want exactly 1", said)
	}
}

// A lifespan task that raises after startup.complete, before any shutdown:
// logged once as such, and the server serves on. It was logged as raised
// "during shutdown".
func TestB09_LifespanRaiseAfterStartup(t *testing.T) {
	s := Start(t, "asgi_life_after:app")
	if code, body := asgiGetT(t, s, "/"); code != 200 || body != "ok" {
		t.Fatalf("GET / = %d %q; want 200 \"ok\"", code, body)
	}
	recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
		return strings.Contains(recordText(rec), "asgi_life_after: raised after startup")
	})
	if len(recs) != 1 || !strings.Contains(recordText(recs[0]), "the app raised after startup completed") {
		t.Fatalf("%d records name the exception (%v); want 1 saying it was raised after startup completed", len(recs), recs)
	}
}

// An ASGI 2 application class (a class whose instances, made with the
// scope, take receive and send) is served, as uvicorn serves it; it was
// taken for ASGI 3 and every request failed with a TypeError.
func TestASGI_ASGI2Class(t *testing.T) {
	s := Start(t, "asgi2_app:App")
	for i := 0; i < 3; i++ {
		if code, body := asgiGetT(t, s, "/x"); code != 200 || body != "asgi2 /x" {
			t.Fatalf("GET /x = %d %q; want 200 \"asgi2 /x\"", code, body)
		}
	}
	for _, rec := range logRecords(s.Logs()) {
		if rec["level"] == "ERROR" {
			t.Errorf("ERROR record: %s", recordText(rec))
		}
	}
}

// --lifespan off: the app never sees the lifespan scope.
func TestB09_LifespanOff(t *testing.T) {
	s := Start(t, "--lifespan", "off", "asgi_life_raise:app")
	if code, body := asgiGetT(t, s, "/"); code != 200 || body != "ok state=False lifespan_calls=0" {
		t.Fatalf("GET / = %d %q; want 200 \"ok state=False lifespan_calls=0\"", code, body)
	}
}

// ASGI Lifespan, "Shutdown - receive event": SIGTERM runs the app's
// shutdown (which awaits, then writes a marker file) before the exit.
func TestB09_LifespanShutdownOnSIGTERM(t *testing.T) {
	s := Start(t, "asgi_life_shutdown:app")
	marker := filepath.Join(t.TempDir(), "shutdown-marker")
	if code, body := asgiGetT(t, s, "/arm?"+marker); code != 200 || body != "armed" {
		t.Fatalf("GET /arm = %d %q", code, body)
	}
	s.Signal(syscall.SIGTERM)
	code := s.Wait(15 * time.Second)
	if code != 0 {
		t.Errorf("exit status after SIGTERM = %d; want 0", code)
	}
	b, err := os.ReadFile(marker)
	if err != nil || string(b) != "shutdown complete after startup=True" {
		t.Fatalf("marker after exit: %q %v; want \"shutdown complete after startup=True\" (lifespan shutdown did not run)", b, err)
	}
}

// /readyz on the admin listener answers 503 until lifespan startup (2 s
// here) has completed, then 200.
func TestASGI_ReadyzAfterStartup(t *testing.T) {
	cmd := Command(t, "asgi_life_slow:app")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs strings.Builder
	admin := make(chan string, 1)
	listening := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				continue
			}
			addr, _ := rec["addr"].(string)
			switch rec["msg"] {
			case "admin listening":
				select {
				case admin <- addr:
				default:
				}
			case "listening":
				select {
				case listening <- addr:
				default:
				}
			}
		}
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		mu.Lock()
		t.Logf("server log:\n%s", logs.String())
		mu.Unlock()
	})

	var adminAddr string
	select {
	case adminAddr = <-admin:
	case <-exited:
		t.Fatal("exited before the admin listener was up")
	case <-time.After(20 * time.Second):
		t.Fatal("no \"admin listening\" record within 20 s")
	}

	type poll struct {
		at     time.Time // when the answer arrived
		status int
	}
	var polls []poll
	c := &http.Client{Timeout: 2 * time.Second}
	var appAddr string
	deadline := time.Now().Add(30 * time.Second)
	for appAddr == "" {
		if time.Now().After(deadline) {
			t.Fatal("the server did not listen within 30 s")
		}
		select {
		case appAddr = <-listening:
		case <-exited:
			t.Fatal("exited during startup")
		default:
		}
		resp, err := c.Get("http://" + adminAddr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			polls = append(polls, poll{time.Now(), resp.StatusCode})
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The app says when its startup completed (time.time()).
	code, body, _, err := asgiGet(asgiClient, "http://"+appAddr+"/")
	if err != nil || code != 200 || !strings.HasPrefix(body, "ready startup_done_at=") {
		t.Fatalf("GET / = %d %q %v; want 200 \"ready ...\"", code, body, err)
	}
	sec, _ := strconv.ParseFloat(strings.TrimPrefix(body, "ready startup_done_at="), 64)
	doneAt := time.Unix(0, int64(sec*1e9))

	resp, err := c.Get("http://" + adminAddr + "/readyz")
	if err != nil {
		t.Fatalf("/readyz after listening: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/readyz after startup = %d; want 200", resp.StatusCode)
	}
	n503 := 0
	for _, p := range polls {
		switch {
		case p.status == 503:
			n503++
		case p.status == 200 && p.at.Before(doneAt):
			t.Errorf("/readyz = 200 at %v, before lifespan startup completed at %v", p.at.Format(time.StampMicro), doneAt.Format(time.StampMicro))
		case p.status != 200:
			t.Errorf("/readyz during startup = %d; want 503", p.status)
		}
	}
	if n503 == 0 {
		t.Errorf("/readyz never answered 503 during a 2 s lifespan startup (%d polls); want 503 until startup completes", len(polls))
	}
	t.Logf("%d polls during startup, %d answered 503", len(polls), n503)
}

// --loop: uvloop is not in the test virtualenv, so --loop uvloop fails at
// start with a clear message and a non-zero exit; --loop asyncio serves.
func TestASGI_LoopFlag(t *testing.T) {
	venv := os.Getenv("TURNSTILE_VENV")
	hasUvloop := venv != "" && exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import uvloop").Run() == nil
	t.Run("uvloop", func(t *testing.T) {
		if hasUvloop {
			s := Start(t, "--loop", "uvloop", "asgi_hello:app")
			if code, body := asgiGetT(t, s, "/"); code != 200 || body != "Hello, World!\n" {
				t.Fatalf("GET / with uvloop = %d %q", code, body)
			}
			return
		}
		code, _, log := startFailure(t, "--loop", "uvloop", "asgi_hello:app")
		if code == 0 || code == -1 {
			t.Errorf("exit status = %d; want non-zero", code)
		}
		var errs []string
		said := false
		for _, rec := range logRecords(log) {
			if rec["level"] != "ERROR" {
				continue
			}
			text := recordText(rec)
			errs = append(errs, text)
			if strings.Contains(text, "uvloop") && strings.Contains(text, "not installed") {
				said = true
				// The cause is the --loop flag, not the app's lifespan.
				if msg, _ := rec["msg"].(string); strings.Contains(strings.ToLower(msg), "lifespan") {
					t.Errorf("the uvloop error is reported as a lifespan failure: %q; want a message about --loop uvloop alone", msg)
				}
			}
		}
		if !said {
			t.Errorf("no ERROR record saying uvloop is not installed; ERROR records: %q", errs)
		}
	})
	t.Run("asyncio", func(t *testing.T) {
		s := Start(t, "--loop", "asyncio", "asgi_hello:app")
		if code, body := asgiGetT(t, s, "/"); code != 200 || body != "Hello, World!\n" {
			t.Fatalf("GET / = %d %q", code, body)
		}
		found := false
		for _, rec := range logRecords(s.Logs()) {
			if rec["msg"] == "event loop running" && rec["loop"] == "asyncio" {
				found = true
			}
		}
		if !found {
			t.Errorf("no \"event loop running\" record with loop=asyncio")
		}
	})
}

// ---- B26 and send() after a disconnect -----------------------------------------

type b26Stats struct {
	Cleanups    int `json:"cleanups"`
	Disconnects int `json:"disconnects"`
	SendAfter   []struct {
		Mode    string `json:"mode"`
		Class   string `json:"class"`
		OSError bool   `json:"oserror"`
	} `json:"send_after"`
	Longpoll      []string `json:"longpoll"`
	Upload        []string `json:"upload"`
	AfterResponse []struct {
		Type string `json:"type"`
		MS   int    `json:"ms"`
	} `json:"after_response"`
	Tasks int `json:"tasks"`
}

func b26GetStats(t testing.TB, s *Server) b26Stats {
	t.Helper()
	var st b26Stats
	if err := asgiGetJSON(s.URL+"/stats", &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// b26Cancel opens a streaming response, reads its first event and closes
// the connection (reset: with SO_LINGER 0, an RST instead of a FIN).
func b26Cancel(t testing.TB, s *Server, target string, reset bool) {
	t.Helper()
	c := dialT(t, s.Addr)
	io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: a\r\n\r\n")
	got, err := asgiReadUntil(c, "data: hi\n\n", 5*time.Second)
	if err != nil {
		c.Close()
		t.Fatalf("GET %s: %v", target, err)
	}
	if !strings.HasPrefix(got, "HTTP/1.1 200 ") || !strings.Contains(strings.ToLower(got), "content-type: text/event-stream") {
		c.Close()
		t.Fatalf("GET %s: %q; want a 200 event stream", target, got)
	}
	if reset {
		c.(*net.TCPConn).SetLinger(0)
	}
	c.Close()
}

// B26 — a client that cancels a streaming response must let the app clean
// up (granian#412). ASGI HTTP, "Disconnect - receive event": the app,
// waiting in receive() beside an idle producer, gets http.disconnect within
// 2 s of each close, and its finally block runs. The case repeats 100
// times; 20 keep the suite fast and still show a leak: the app's task
// count must come back to the baseline and RSS stay within 5 MB of it.
func TestB26_ClientCancelCleanup(t *testing.T) {
	const rounds = 20 // the case says 100; 20 keep CI fast
	s := Start(t, "asgi_b26:app")
	pid := asgiServingPID(t, s)
	if code, body := asgiGetT(t, s, "/pid"); code != 200 || body != strconv.Itoa(pid) {
		t.Logf("the app's pid is %q, the serving process %d", body, pid)
		if p, err := strconv.Atoi(body); err == nil {
			pid = p
		}
	}

	cancelOnce := func(t *testing.T, i int) time.Duration {
		before := b26GetStats(t, s).Cleanups
		b26Cancel(t, s, "/sse", i%2 == 1)
		closed := time.Now()
		for {
			st := b26GetStats(t, s)
			if st.Cleanups == before+1 {
				if st.Disconnects != st.Cleanups {
					t.Fatalf("round %d: cleanups %d but disconnects %d; want the cleanup to follow an http.disconnect", i, st.Cleanups, st.Disconnects)
				}
				return time.Since(closed)
			}
			if st.Cleanups > before+1 {
				t.Fatalf("round %d: cleanups went from %d to %d; want +1", i, before, st.Cleanups)
			}
			if time.Since(closed) > 2*time.Second {
				t.Fatalf("round %d (close by %s): cleanups still %d 2 s after the client left; want %d (http.disconnect never reached the app)",
					i, map[bool]string{false: "FIN", true: "RST"}[i%2 == 1], st.Cleanups, before+1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Warm up: the first streams allocate the server's buffers.
	for i := 0; i < 5; i++ {
		cancelOnce(t, i)
	}
	base := b26GetStats(t, s)
	baseRSS := vmRSSKB(t, pid)
	var worst time.Duration
	for i := 0; i < rounds; i++ {
		if d := cancelOnce(t, i); d > worst {
			worst = d
		}
	}
	end := b26GetStats(t, s)
	rss := vmRSSKB(t, pid)
	t.Logf("%d cancels: slowest cleanup %v after the close; RSS %d kB → %d kB; tasks %d → %d", rounds, worst, baseRSS, rss, base.Tasks, end.Tasks)
	if end.Cleanups-base.Cleanups != rounds {
		t.Errorf("cleanups grew by %d over %d cancels; want %d", end.Cleanups-base.Cleanups, rounds, rounds)
	}
	if end.Tasks != base.Tasks {
		t.Errorf("live asyncio tasks %d after %d cancels, %d before; want the baseline", end.Tasks, rounds, base.Tasks)
	}
	if rss-baseRSS > 5<<10 {
		t.Errorf("RSS grew by %d kB over %d cancels; want at most 5 MB", rss-baseRSS, rounds)
	}
	asgiNoErrors(t, s.Logs())
}

// DESIGN.md, ASGI: "send() after a disconnect raises an OSError subclass
// and is not logged as an app error, even when an older framework lets it
// escape the app" (ASGI HTTP 2.4).
func TestASGI_SendAfterDisconnect(t *testing.T) {
	s := Start(t, "asgi_b26:app")
	for _, mode := range []string{"catch", "escape"} {
		t.Run(mode, func(t *testing.T) {
			before := len(b26GetStats(t, s).SendAfter)
			b26Cancel(t, s, "/send-after?"+mode, false)
			deadline := time.Now().Add(2 * time.Second)
			var st b26Stats
			for {
				st = b26GetStats(t, s)
				if len(st.SendAfter) > before {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the app did not report its send() after the disconnect within 2 s (no http.disconnect?)")
				}
				time.Sleep(20 * time.Millisecond)
			}
			got := st.SendAfter[before]
			if got.Mode != mode || got.Class == "" || !got.OSError {
				t.Fatalf("send() after the disconnect: %+v; want an OSError subclass raised", got)
			}
			t.Logf("send() after the disconnect raised %s", got.Class)
		})
	}
	time.Sleep(300 * time.Millisecond) // let a late log record arrive
	asgiNoErrors(t, s.Logs())
}

// b26Wait polls /stats until ready(st) or d passes.
func b26Wait(t *testing.T, s *Server, d time.Duration, ready func(b26Stats) bool) (b26Stats, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st := b26GetStats(t, s)
		if ready(st) {
			return st, true
		}
		if time.Now().After(deadline) {
			return st, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ASGI HTTP, "Disconnect - receive event": after the body, receive()
// returns http.disconnect promptly once the client leaves (no response
// started; FIN and RST), once the client leaves in the middle of the body,
// and once the response is complete (the client still connected).
func TestASGI_Disconnect(t *testing.T) {
	s := Start(t, "asgi_b26:app")
	for _, reset := range []bool{false, true} {
		how := map[bool]string{false: "FIN", true: "RST"}[reset]
		t.Run("after-body-no-response/"+how, func(t *testing.T) {
			before := len(b26GetStats(t, s).Longpoll)
			c := dialT(t, s.Addr)
			io.WriteString(c, "GET /longpoll HTTP/1.1\r\nHost: a\r\n\r\n")
			time.Sleep(300 * time.Millisecond)
			if st := b26GetStats(t, s); len(st.Longpoll) != before {
				c.Close()
				t.Fatalf("receive() after the body returned %v while the client was connected; want it to wait", st.Longpoll[before:])
			}
			if reset {
				c.(*net.TCPConn).SetLinger(0)
			}
			c.Close()
			st, ok := b26Wait(t, s, 2*time.Second, func(st b26Stats) bool { return len(st.Longpoll) > before })
			if !ok {
				t.Fatalf("no message for the waiting receive() 2 s after the client left (%s); want http.disconnect", how)
			}
			if got := st.Longpoll[before]; got != "http.disconnect" {
				t.Fatalf("receive() after the client left = %q; want http.disconnect", got)
			}
		})
	}
	t.Run("mid-body", func(t *testing.T) {
		before := len(b26GetStats(t, s).Upload)
		c := dialT(t, s.Addr)
		io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n")
		io.WriteString(c, strings.Repeat("x", 1000))
		time.Sleep(300 * time.Millisecond)
		c.Close()
		st, ok := b26Wait(t, s, 2*time.Second, func(st b26Stats) bool { return len(st.Upload) > before })
		if !ok {
			t.Fatalf("the app's receive() got nothing 2 s after the client left mid-body; want http.disconnect")
		}
		if got := st.Upload[before]; !strings.HasPrefix(got, "http.disconnect after ") {
			t.Fatalf("the app saw %q when the client left mid-body; want http.disconnect", got)
		}
	})
	t.Run("after-response-complete", func(t *testing.T) {
		before := len(b26GetStats(t, s).AfterResponse)
		c := dialT(t, s.Addr)
		defer c.Close() // kept open until the app has its answer
		io.WriteString(c, "GET /after-response HTTP/1.1\r\nHost: a\r\n\r\n")
		if _, err := asgiReadUntil(c, "complete", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		st, ok := b26Wait(t, s, 3*time.Second, func(st b26Stats) bool { return len(st.AfterResponse) > before })
		if !ok {
			t.Fatalf("receive() after a complete response still waiting 3 s later; want http.disconnect at once")
		}
		if got := st.AfterResponse[before]; got.Type != "http.disconnect" || got.MS > 1000 {
			t.Fatalf("receive() after a complete response = %s after %d ms; want http.disconnect promptly", got.Type, got.MS)
		}
	})
	// /longpoll and /upload return without a response once they get
	// http.disconnect: the client is gone, so that is no app error (and no
	// 500 was answered to anyone).
	time.Sleep(200 * time.Millisecond)
	asgiNoErrors(t, s.Logs())
}

// ---- invalid messages and failing apps -----------------------------------------

// Issue "Bad input": an invalid ASGI message raises in the app's own
// send(); uncaught, it is a 500 if nothing was sent, with one logged
// TestASGI_SendForms: the app's send is a C callable that returns a
// finished awaitable (bridge.c, "send()"), not a coroutine function; every
// way apps call it works: awaited, wrapped in a task, gathered, with a
// Mapping that is not a dict, by keyword (message=); and asyncio takes its
// result for a coroutine.
func TestASGI_SendForms(t *testing.T) {
	s := Start(t, "asgi_send:app")
	for _, route := range []string{"await", "task", "gather", "mapping", "kwargs"} {
		if code, body := asgiGetT(t, s, "/"+route); code != 200 || body != route {
			t.Errorf("GET /%s = %d %q; want 200 %q", route, code, body, route)
		}
	}
	if code, body := asgiGetT(t, s, "/check"); code != 200 || body != "True True" {
		t.Errorf("GET /check = %d %q; want 200 \"True True\" (asyncio.iscoroutine, inspect.isawaitable)", code, body)
	}
	if logs := s.Logs(); strings.Contains(logs, "Traceback") {
		t.Errorf("an app error was logged:\n%s", logs)
	}
}

// traceback, and the loop keeps serving. DESIGN.md, the bytes rule.
func TestASGI_BadInput(t *testing.T) {
	s := Start(t, "asgi_bad:app")
	okAfter := func(t *testing.T) {
		t.Helper()
		if code, body := asgiGetT(t, s, "/ok"); code != 200 || body != "ok" {
			t.Fatalf("GET /ok after the bad request = %d %q; want 200 \"ok\"", code, body)
		}
	}
	// kinds: the invalid message, and whether a valid start went before it.
	kinds := []struct {
		id      string
		started bool
	}{
		{"wrong-type", false},
		{"missing-type", false},
		{"missing-status", false},
		{"str-status", false},
		{"str-header-name", false},
		{"str-header-value", false},
		{"body-before-start", false},
		{"str-body", true},
		{"str-body-more", true},
		{"start-twice", true},
		{"status-600", false},
		{"status-999", false},
		{"status-42", false},
		{"status-100", false},
	}

	// The app catches the exception from its send() and answers normally:
	// the invalid message had no effect.
	for _, k := range kinds {
		t.Run("caught/"+k.id, func(t *testing.T) {
			path := "/catch/" + k.id
			one := func() error {
				code, body, _, err := asgiGet(asgiClient, s.URL+path)
				if err != nil {
					return fmt.Errorf("GET %s: %v; want 200 \"caught <exception>\"", path, err)
				}
				if code != 200 || !strings.HasPrefix(body, "caught ") || body == "caught nothing" {
					return fmt.Errorf("GET %s = %d %q; want 200 \"caught <exception>\" (send() must raise, and the message must have no effect)", path, code, body)
				}
				return nil
			}
			onceThenConcurrently(t, 5, one)
			if n := asgiTracebacks(s.Logs(), path); n != 0 {
				t.Errorf("%d tracebacks logged for %s; want none (the app handled its exception)", n, path)
			}
			okAfter(t)
		})
	}

	// Uncaught: 500 when nothing was sent, else the connection is cut; one
	// traceback per request, no traceback in the body.
	for _, k := range kinds {
		t.Run("uncaught/"+k.id, func(t *testing.T) {
			path := "/raise/" + k.id
			one := func() error {
				raw, closed := rawExchange(s.Addr, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
				codes := StatusCodes(raw)
				if bodyLeaks(raw) || strings.Contains(raw, "Error:") {
					return fmt.Errorf("GET %s: %q carries the exception", path, raw)
				}
				if len(codes) == 1 && codes[0] == "500" {
					return nil
				}
				if k.started && len(codes) == 1 && closed && !strings.HasSuffix(raw, "0\r\n\r\n") {
					return nil // the app's start was accepted: its head, then a cut
				}
				return fmt.Errorf("GET %s: %q (closed %v); want a 500%s", path, raw, closed,
					map[bool]string{true: ", or the app's head and a cut connection", false: ""}[k.started])
			}
			if err := one(); err != nil {
				t.Fatal(err)
			}
			recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
				return strings.Contains(recordText(rec), path) && strings.Contains(recordText(rec), "Traceback")
			})
			if len(recs) != 1 {
				t.Fatalf("%d log records with a traceback for %s; want exactly 1", len(recs), path)
			}
			concurrently(t, 5, func(int) error { return one() })
			okAfter(t)
			time.Sleep(200 * time.Millisecond)
			if n := asgiTracebacks(s.Logs(), path); n != 6 {
				t.Errorf("%d tracebacks logged for 6 requests to %s; want one each", n, path)
			}
		})
	}

	// An app that returns without sending anything: 500, and (STYLE §5,
	// "every 500 logs its cause") a log record that says why.
	t.Run("returns-without-response", func(t *testing.T) {
		code, body := asgiGetT(t, s, "/nothing")
		if code != 500 || bodyLeaks(body) {
			t.Fatalf("GET /nothing = %d %q; want a generic 500", code, body)
		}
		okAfter(t)
		recs := waitLogRecords(s.Logs, 2*time.Second, func(rec map[string]any) bool {
			return strings.Contains(recordText(rec), "/nothing")
		})
		if len(recs) == 0 {
			t.Errorf("no log record names GET /nothing; STYLE §5: every 500 logs its cause (the app returned without a response)")
		}
	})

	// An exception after the start and a first block: the connection is cut
	// (no terminating chunk), one traceback, and the next request is fine.
	t.Run("raise-after-first-block", func(t *testing.T) {
		one := func() error {
			raw, closed := rawExchange(s.Addr, "GET /partial HTTP/1.1\r\nHost: a\r\n\r\n", 5*time.Second)
			if !closed {
				return fmt.Errorf("GET /partial: connection still open 5 s after the app raised: %q; want it cut", raw)
			}
			if !strings.HasPrefix(raw, "HTTP/1.1 200 ") || !strings.Contains(raw, "first block;") || strings.HasSuffix(raw, "0\r\n\r\n") || bodyLeaks(raw) {
				return fmt.Errorf("GET /partial: %q; want the 200 head, \"first block;\", then a cut without the 0-chunk", raw)
			}
			return nil
		}
		if err := one(); err != nil {
			t.Fatal(err)
		}
		// Go's client sees the truncation as an error.
		if resp, err := asgiClient.Get(s.URL + "/partial"); err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil {
				t.Fatalf("GET /partial with net/http: body %q ended cleanly; want an unexpected EOF", b)
			}
		}
		concurrently(t, 5, func(int) error { return one() })
		okAfter(t)
		time.Sleep(200 * time.Millisecond)
		if n := asgiTracebacks(s.Logs(), "asgi_bad: raised after the first block"); n != 7 {
			t.Errorf("%d tracebacks for 7 requests to /partial; want one each", n)
		}
	})
}

// ---- the loop's default executor -------------------------------------------------

type asgiExecWhere struct {
	Name  string `json:"name"`
	Ident int64  `json:"ident"`
}

// Issue "Sync work inside async apps": asyncio.to_thread and
// loop.run_in_executor(None, ...) run on the server's bounded pool
// (ts-exec-N, --executor-threads) whose threads park between jobs: no
// thread is started per submit, and an idle pool keeps its threads.
func TestASGI_Executor(t *testing.T) {
	const threads = 4
	s := Start(t, "--executor-threads", strconv.Itoa(threads), "asgi_executor:app")
	name := regexp.MustCompile(`^ts-exec-(\d+)$`)
	type threadsInfo struct {
		Count int      `json:"count"`
		Names []string `json:"names"`
	}
	var before threadsInfo
	if err := asgiGetJSON(s.URL+"/threads", &before); err != nil {
		t.Fatal(err)
	}
	pool := 0
	for _, n := range before.Names {
		if name.MatchString(n) {
			pool++
		}
	}
	if pool != threads {
		t.Errorf("%d ts-exec-N threads before any submit (%v); want the %d of --executor-threads, started with the loop", pool, before.Names, threads)
	}
	// The OS knows them by that name too (top -H, ps -L), not by the
	// ts-loop-0 they would inherit.
	osNames := 0
	comms, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/comm", workerPID(t, s)))
	for _, f := range comms {
		if b, err := os.ReadFile(f); err == nil && name.MatchString(strings.TrimSpace(string(b))) {
			osNames++
		}
	}
	if osNames != threads {
		t.Errorf("%d threads of the worker carry a ts-exec-N OS name; want %d", osNames, threads)
	}

	idents := map[int64]bool{}
	var mu sync.Mutex
	for _, route := range []string{"to_thread", "run_in_executor"} {
		t.Run(route, func(t *testing.T) {
			concurrently(t, 4*threads, func(int) error {
				var w asgiExecWhere
				if err := asgiGetJSON(s.URL+"/"+route+"?100", &w); err != nil {
					return err
				}
				m := name.FindStringSubmatch(w.Name)
				if m == nil {
					return fmt.Errorf("%s ran on thread %q; want ts-exec-N", route, w.Name)
				}
				if n, _ := strconv.Atoi(m[1]); n >= threads {
					return fmt.Errorf("%s ran on %q; want one of ts-exec-0..%d", route, w.Name, threads-1)
				}
				mu.Lock()
				idents[w.Ident] = true
				mu.Unlock()
				return nil
			})
		})
	}
	if len(idents) > threads {
		t.Errorf("%d distinct thread idents served the executor; want at most %d", len(idents), threads)
	}
	// Idle, then busy again: the same parked threads serve.
	time.Sleep(1500 * time.Millisecond)
	concurrently(t, 2*threads, func(int) error {
		var w asgiExecWhere
		if err := asgiGetJSON(s.URL+"/to_thread?50", &w); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if !idents[w.Ident] {
			return fmt.Errorf("after an idle pause to_thread ran on a new thread %q (%d); want a parked one", w.Name, w.Ident)
		}
		return nil
	})
	var after threadsInfo
	if err := asgiGetJSON(s.URL+"/threads", &after); err != nil {
		t.Fatal(err)
	}
	if after.Count != before.Count {
		t.Errorf("threading.active_count() = %d after the executor work, %d before; want no thread started or lost (%v → %v)", after.Count, before.Count, before.Names, after.Names)
	}
}

// "each task runs in the context it carries and nothing else": to_thread
// carries the request's context; run_in_executor carries none, so a
// variable one call sets is not seen by the next call on the same (only)
// thread.
func TestASGI_ExecutorContextVars(t *testing.T) {
	s := Start(t, "--executor-threads", "1", "asgi_executor:app")
	get := func(path string) string {
		var v string
		if err := asgiGetJSON(s.URL+path, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i := 0; i < 10; i++ {
		v := fmt.Sprintf("req%d", i)
		if got := get("/ctx/to_thread?" + v); got != v {
			t.Fatalf("to_thread saw the request's ContextVar as %q; want %q", got, v)
		}
		if got := get("/ctx/executor-set?" + v); got != "unset" {
			t.Fatalf("run_in_executor call %d saw the ContextVar as %q before setting it; want \"unset\" (a value leaked from an earlier call or request)", i, got)
		}
		if got := get("/ctx/executor-get"); got != "unset" {
			t.Fatalf("run_in_executor after a call that set %q saw %q; want \"unset\" (the value leaked into the next call)", v, got)
		}
	}
}

// ---- response framing the app gets wrong ------------------------------------------

// A response the app leaves unfinished, or whose body disagrees with its
// Content-Length, is an app error said in the log (uvicorn: "ASGI callable
// returned without completing response", "Response content longer/shorter
// than Content-Length"), and the client never sees a clean end: a 500 when
// none of the response had left (the head waits in the server for the
// first body bytes), else the connection cut; conflicting Content-Length
// headers are refused in send() (RFC 9110 §8.6). The app's "Connection: close" is honoured (RFC 9112
// §9.6). Before, all of these went unlogged, counted as clean 200s, a
// longer body was cut silently and the Connection header was dropped.
func TestASGI_ResponseFraming(t *testing.T) {
	s := Start(t, "asgi_framing:app")
	get := func(path string) (string, bool) {
		return rawExchange(s.Addr, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n", 3*time.Second)
	}
	logged := func(t *testing.T, path, text string, traceback bool) {
		t.Helper()
		recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
			rt := recordText(rec)
			return strings.Contains(rt, text) && (!traceback || strings.Contains(rt, "Traceback")) && (traceback || strings.Contains(rt, path))
		})
		if len(recs) != 1 {
			t.Errorf("%s: %d log records with %q; want 1", path, len(recs), text)
		}
	}
	for _, tc := range []struct {
		path, wire, text string
		traceback        bool
	}{
		// Nothing of the response had left: a 500 (the app's head, sent
		// alone, used to go out on a cut connection).
		{"/start-only", "", "without completing the response", false},
		{"/cl-short", "", "shorter than its Content-Length (7 bytes missing)", true},
		{"/cl-long", "", "longer than its Content-Length (4 bytes too many)", true},
		// Part of it had: the connection is cut.
		{"/more-then-return", "3\r\nabc\r\n", "without completing the response", false},
		{"/more-then-short", "Content-Length: 11\r\n", "shorter than its Content-Length (8 bytes missing)", true},
		// A pathsend after body bytes: the file must be the whole body.
		// It was dropped: an empty-ended 200, nothing logged.
		{"/pathsend-after-body", "1\r\nx\r\n", "'http.response.pathsend' after 'http.response.body'", true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			if tc.wire == "" {
				// a whole 500: the connection stays usable; close it to read to the end
				raw, _ := rawExchange(s.Addr, "GET "+tc.path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3*time.Second)
				if _, body, _ := strings.Cut(raw, "\r\n\r\n"); !strings.HasPrefix(raw, "HTTP/1.1 500 ") || bodyLeaks(body) {
					t.Errorf("GET %s: %q; want a generic 500", tc.path, raw)
				}
				logged(t, tc.path, tc.text, tc.traceback)
				return
			}
			raw, closed := get(tc.path)
			if !strings.HasPrefix(raw, "HTTP/1.1 200 ") || !strings.Contains(raw, tc.wire) || !closed || strings.HasSuffix(raw, "\r\n0\r\n\r\n") {
				t.Errorf("GET %s: %q (closed %v); want the head with %q, then a cut connection", tc.path, raw, closed, tc.wire)
			}
			if strings.Contains(raw, "abcdef") || strings.HasSuffix(raw, "\r\n\r\nab") {
				t.Errorf("GET %s: %q: bytes past the Content-Length went out", tc.path, raw)
			}
			logged(t, tc.path, tc.text, tc.traceback)
		})
	}
	// http.response.pathsend is held to the app's Content-Length too: a
	// file of another size is a 500 and a log record (it was sent cut at
	// the declared length, or short with the connection closed, unlogged).
	t.Run("pathsend", func(t *testing.T) {
		src, err := os.ReadFile(filepath.Join(AppDir(), "asgi_framing.py"))
		if err != nil {
			t.Fatal(err)
		}
		size := len(src)
		for _, cl := range []int{-1, size} {
			if code, body := asgiGetT(t, s, fmt.Sprintf("/pathsend?cl=%d", cl)); code != 200 || body != string(src) {
				t.Errorf("GET /pathsend?cl=%d = %d, %d bytes; want 200 with the file's %d", cl, code, len(body), size)
			}
		}
		for _, cl := range []int{size - 5, size + 5} {
			if code, body := asgiGetT(t, s, fmt.Sprintf("/pathsend?cl=%d", cl)); code != 500 || bodyLeaks(body) {
				t.Errorf("GET /pathsend?cl=%d = %d %q; want a generic 500 (the file has %d bytes)", cl, code, body, size)
			}
			want := fmt.Sprintf(`"content_length":%d`, cl)
			if recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
				return strings.Contains(recordText(rec), "disagrees with the response's Content-Length") && strings.Contains(recordText(rec), want)
			}); len(recs) != 1 {
				t.Errorf("GET /pathsend?cl=%d: %d log records; want 1", cl, len(recs))
			}
		}
		raw, _ := rawExchange(s.Addr, fmt.Sprintf("HEAD /pathsend?cl=%d HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", size+5), 3*time.Second)
		if !strings.HasPrefix(raw, "HTTP/1.1 200 ") || !strings.Contains(raw, fmt.Sprintf("Content-Length: %d\r\n", size+5)) {
			t.Errorf("HEAD /pathsend with a Content-Length the file does not have: %q; want 200 with it (no body goes out)", raw)
		}
	})
	// The head goes out alone when the app sends an empty body with
	// more_body after it (an event stream's headers before its first
	// event): the client here sends its body only once it has the head.
	// The head waited for the first body bytes, and this never finished.
	t.Run("head-first", func(t *testing.T) {
		c := dialT(t, s.Addr)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "POST /head-first HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("the head before the request body: %v", err)
		}
		io.WriteString(c, "ping")
		got, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(got) != "ping" || err != nil {
			t.Errorf("POST /head-first = %d %q (%v); want 200 \"ping\"", resp.StatusCode, got, err)
		}
		// No receive() at all: the app waits for another request.
		c2 := dialT(t, s.Addr)
		defer c2.Close()
		c2.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c2, "GET /head-wait HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err = http.ReadResponse(bufio.NewReader(c2), nil)
		if err != nil {
			t.Fatalf("GET /head-wait: the head before the app's first body bytes: %v", err)
		}
		if code, _ := asgiGetT(t, s, "/head-release"); code != 200 {
			t.Fatalf("GET /head-release = %d", code)
		}
		got, err = io.ReadAll(io.LimitReader(resp.Body, 8))
		if string(got) != "released" {
			t.Errorf("GET /head-wait: body %q (%v); want \"released\"", got, err)
		}
	})
	t.Run("conflicting-lengths", func(t *testing.T) {
		if code, body := asgiGetT(t, s, "/cl-dup"); code != 500 || bodyLeaks(body) {
			t.Errorf("GET /cl-dup = %d %q; want a generic 500", code, body)
		}
		logged(t, "/cl-dup", "conflicting content-length headers 2 and 3", true)
	})
	for path, want := range map[string]string{"/cl-dup-same": "ok", "/cl-parts": "abcdef", "/cl-long-caught": "ab"} {
		if code, body := asgiGetT(t, s, path); code != 200 || body != want {
			t.Errorf("GET %s = %d %q; want 200 %q", path, code, body, want)
		}
	}
	// A declared length with no body is right for HEAD, 204 and 304: kept alive.
	raw, _ := rawExchange(s.Addr, "HEAD /cl-empty HTTP/1.1\r\nHost: a\r\n\r\nGET /cl-empty?status=304 HTTP/1.1\r\nHost: a\r\n\r\n"+
		"GET /cl-empty?status=204 HTTP/1.1\r\nHost: a\r\n\r\nGET /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3*time.Second)
	if codes := StatusCodes(raw); strings.Join(codes, " ") != "200 304 204 200" || !strings.Contains(raw, "Content-Length: 10\r\n") {
		t.Errorf("HEAD, 304 and 204 with a Content-Length and no body, pipelined: %v\n%q; want 200 304 204 200 on one connection", codes, raw)
	}

	// The app's Connection: close: said on the wire, and the pipelined
	// request after it is not served; keep-alive changes nothing.
	raw, closed := rawExchange(s.Addr, "GET /conn-close HTTP/1.1\r\nHost: a\r\n\r\nGET /ok HTTP/1.1\r\nHost: a\r\n\r\n", 3*time.Second)
	if codes := StatusCodes(raw); len(codes) != 1 || !strings.Contains(raw, "Connection: close\r\n") || !closed || !strings.HasSuffix(raw, "bye") {
		t.Errorf("GET /conn-close then /ok pipelined: %q (closed %v); want one response with Connection: close, then the close", raw, closed)
	}
	raw, _ = rawExchange(s.Addr, "GET /conn-other HTTP/1.1\r\nHost: a\r\n\r\nGET /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3*time.Second)
	if codes := StatusCodes(raw); len(codes) != 2 || strings.Count(raw, "Connection:") != 1 {
		t.Errorf("GET /conn-other then /ok pipelined: %q; want two responses, only the last with a Connection header", raw)
	}

	// A body the app leaves unread beyond what the server drains: the
	// response says Connection: close, so a client knows not to send on it.
	c := dialT(t, s.Addr)
	defer c.Close()
	io.WriteString(c, "POST /ok HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\n0123456789")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("POST /ok with 1 MiB of body unread: %d, Connection %q; want 200 with Connection: close", resp.StatusCode, resp.Header.Get("Connection"))
	}
	if code, body := asgiGetT(t, s, "/ok"); code != 200 || body != "ok" {
		t.Errorf("GET /ok after: %d %q", code, body)
	}

	// A streamed response that reads the body as it goes (full duplex)
	// keeps the connection: the body is read by the end (a review found
	// the rule above cost it keep-alive).
	c2 := dialT(t, s.Addr)
	defer c2.Close()
	big := strings.Repeat("x", 1<<20)
	go io.WriteString(c2, "POST /duplex HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\n"+big+"GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c2)
	for i, want := range []string{big, "ok"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("duplex, response %d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != want || resp.Close {
			t.Fatalf("duplex, response %d: %d bytes, %v, Connection %q; want %d bytes on a kept connection", i, len(got), err, resp.Header.Get("Connection"), len(want))
		}
	}

	// Raised after the client left, but the app's own error (its cause an
	// OSError of the app's, not send()'s ClientDisconnected): logged.
	c3 := dialT(t, s.Addr)
	io.WriteString(c3, "GET /after-disconnect HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(200 * time.Millisecond)
	c3.Close()
	if recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
		return strings.Contains(recordText(rec), "asgi_framing: config missing")
	}); len(recs) != 1 {
		t.Errorf("%d log records name the app's error raised after the disconnect; want 1", len(recs))
	}
}

// An ASGI request in flight that only awaits (a long poll) holds little
// memory: 1 000 of them grew the worker by ~35 KiB each (a connection's
// read and write buffers, 13 KiB of C buffers the slot had not used),
// against ~19 KiB now and ~21 KiB under uvicorn (issue 29).
func TestASGI_InFlightMemory(t *testing.T) {
	s := Start(t, "--backlog", "2048", "asgi_hold:app")
	pid := appPID(t, s)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	hold := func(k int) {
		for i := 0; i < k; i++ {
			c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte("GET /hold HTTP/1.1\r\nHost: a\r\nUser-Agent: test\r\nAccept: */*\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
	}
	const n = 1000
	hold(100)
	time.Sleep(500 * time.Millisecond)
	before := vmRSSKB(t, pid)
	hold(n)
	time.Sleep(time.Second)
	after := vmRSSKB(t, pid)
	per := float64(after-before) * 1024 / n
	t.Logf("worker RSS %d KiB -> %d KiB with %d more held requests: %.1f KiB per request", before, after, n, per/1024)
	if per > 27<<10 {
		t.Errorf("%.1f KiB per held request; want under 27 KiB (it was ~35)", per/1024)
	}
}
