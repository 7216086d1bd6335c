package asgi_test

// The asgi package in one process: real CPython started by python.Start,
// two Loops (NewLoop, Start: lifespan on each), the Handler behind an
// http1.Server on a loopback port, Go's HTTP client and gorilla's
// WebSocket client (the harness shared with wsgi: internal/embedtest).
// The app is testdata/pkgapp.py. The end-to-end suite
// (tests/) runs the same through the binary; these tests pin the
// package's own contract (the ASGI spec's messages and scope) without the
// worker around it.
//
// CPython is found through TURNSTILE_PYTHON (make test sets it: the
// interpreter whose libpython this test binary links); without it the
// tests are skipped.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"turnstile/internal/asgi"
	"turnstile/internal/embedtest"
	"turnstile/internal/wsgi"
)

var (
	env   embedtest.Env
	loops []*asgi.Loop
)

func TestMain(m *testing.M) {
	if err := start(); err != nil {
		env.SkipWhy = err.Error()
	}
	code := m.Run()
	if len(loops) > 0 {
		if stuck := asgi.StopLoops(loops, 5*time.Second); len(stuck) > 0 {
			fmt.Fprintf(os.Stderr, "asgi: loops %v did not stop in 5 s\n", stuck)
			code = 1
		}
	}
	os.Exit(code)
}

// start brings up CPython, two loops and a server; an error is a reason to
// skip (no interpreter), or a failure the tests report.
func start() error {
	if err := env.Start("asgi", wsgi.AfterLoad, asgi.AfterLoad); err != nil {
		return err
	}
	for i := range 2 {
		l, err := asgi.NewLoop(i, asgi.LoopConfig{Lifespan: "on", Loop: "asyncio", ExecutorThreads: 2})
		if err != nil {
			return fmt.Errorf("NewLoop(%d): %v", i, err)
		}
		if _, err := l.Start(); err != nil {
			return fmt.Errorf("loop %d: Start: %v", i, err)
		}
		loops = append(loops, l)
	}
	return env.Serve(&asgi.Handler{EventLoops: loops, Logger: env.Log, Done: env.Done})
}

func TestASGI_Hello(t *testing.T) {
	env.Need(t)
	resp, body := env.Get(t, http.DefaultClient, "/hello")
	if resp.StatusCode != 200 || body != "Hello, World!" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("GET /hello = %d %q %v", resp.StatusCode, body, resp.Header)
	}
}

// http.request messages carry the body, more_body until the last (ASGI
// HTTP, "Request - receive event"), here larger than one chunk.
func TestASGI_BodyEcho(t *testing.T) {
	env.Need(t)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16*3)
	resp, err := http.Post(env.BaseURL+"/echo", "application/octet-stream", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(got, payload) {
		t.Fatalf("POST /echo = %d, %d bytes back of %d", resp.StatusCode, len(got), len(payload))
	}
}

// The scope (ASGI HTTP, "HTTP Connection Scope"), the lifespan state of the
// loop that serves it, and the loop thread's name.
func TestASGI_Scope(t *testing.T) {
	env.Need(t)
	resp, body := env.Get(t, http.DefaultClient, "/scope?a=1")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /scope = %d %q", resp.StatusCode, body)
	}
	var sc map[string]any
	if err := json.Unmarshal([]byte(body), &sc); err != nil {
		t.Fatalf("scope: %v: %q", err, body)
	}
	want := map[string]any{"type": "http", "http_version": "1.1", "method": "GET", "scheme": "http",
		"path": "/scope", "query_string": "a=1", "root_path": "", "greeting": "hello from startup"}
	for k, v := range want {
		if sc[k] != v {
			t.Errorf("scope[%q] = %#v, want %#v", k, sc[k], v)
		}
	}
	if a, _ := sc["asgi"].(map[string]any); a == nil || a["version"] != "3.0" {
		t.Errorf("scope[asgi] = %#v, want version 3.0", sc["asgi"])
	}
	if th, _ := sc["thread"].(string); !strings.HasPrefix(th, "ts-loop-") {
		t.Errorf("the app ran on thread %q, want ts-loop-N", sc["thread"])
	}
}

// Several connections spread over the two loops, and each keeps its loop
// for its requests.
func TestASGI_LoopsAssigned(t *testing.T) {
	env.Need(t)
	seen := map[string]bool{}
	for i := 0; i < 4; i++ {
		c := &http.Client{Transport: &http.Transport{}}
		var first string
		for j := 0; j < 3; j++ {
			_, body := env.Get(t, c, "/scope")
			var sc map[string]any
			_ = json.Unmarshal([]byte(body), &sc)
			th, _ := sc["thread"].(string)
			if j == 0 {
				first = th
			} else if th != first {
				t.Errorf("connection %d moved from %s to %s", i, first, th)
			}
		}
		seen[first] = true
		c.CloseIdleConnections()
	}
	if len(seen) != 2 {
		t.Errorf("4 connections one after another ran on %v; want both loops", seen)
	}
}

// A streamed response arrives whole.
func TestASGI_Stream(t *testing.T) {
	env.Need(t)
	resp, body := env.Get(t, http.DefaultClient, "/stream")
	if resp.StatusCode != 200 || body != "part0 part1 part2 end" {
		t.Fatalf("GET /stream = %d %q", resp.StatusCode, body)
	}
}

// An app that raises, returns without a response or sends a bad message
// gets a 500 and one logged record, and the loops keep serving.
func TestASGI_AppFailures(t *testing.T) {
	env.Need(t)
	for _, tc := range []struct{ path, logged string }{
		{"/raise", "the app's own failure"},
		{"/no-response", "without sending a response"},
		{"/bad-message", "status"},
	} {
		resp, _ := env.Get(t, http.DefaultClient, tc.path)
		if resp.StatusCode != 500 {
			t.Errorf("GET %s = %d, want 500", tc.path, resp.StatusCode)
		}
		if !strings.Contains(env.Logs(), tc.logged) {
			t.Errorf("GET %s: no log record mentioning %q", tc.path, tc.logged)
		}
		if resp, body := env.Get(t, http.DefaultClient, "/hello"); resp.StatusCode != 200 || body != "Hello, World!" {
			t.Fatalf("after GET %s: /hello = %d %q", tc.path, resp.StatusCode, body)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", env.Logs())
	}
}

// Done sees a request once, with the loop that served it.
func TestASGI_DoneResult(t *testing.T) {
	env.Need(t)
	before := len(env.Results())
	env.Get(t, http.DefaultClient, "/hello")
	results := env.Results()
	if len(results) != before+1 {
		t.Fatalf("Done called %d times for one request", len(results)-before)
	}
	if r := results[len(results)-1]; r.Status != 200 || r.Pool || r.Bytes != 13 || r.Loop < 0 || r.Loop > 1 {
		t.Fatalf("Done result = %+v, want status 200 on an event loop, 13 bytes, loop 0 or 1", r)
	}
}

// A WebSocket session (ASGI WebSocket, RFC 6455): accept, echo, close.
func TestASGI_WebSocketEcho(t *testing.T) {
	env.Need(t)
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(env.BaseURL, "http")+"/ws", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	for _, m := range []string{"one", "two"} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, got, err := c.ReadMessage()
		if err != nil || string(got) != "echo: "+m {
			t.Fatalf("read = %q, %v; want %q", got, err, "echo: "+m)
		}
	}
	_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
}
