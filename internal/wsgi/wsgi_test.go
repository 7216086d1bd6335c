package wsgi_test

// The wsgi package in one process: real CPython started by python.Start,
// a python.Pool, the Handler behind an http1.Server on a loopback port,
// Go's HTTP client (the harness shared with asgi: internal/embedtest).
// The app is testdata/pkgapp.py. The end-to-end suite
// (tests/) runs the same through the binary; these tests pin the
// package's own contract (PEP 3333) without the worker around it.
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
	"sync"
	"testing"

	"turnstile/internal/asgi"
	"turnstile/internal/embedtest"
	"turnstile/internal/python"
	"turnstile/internal/wsgi"
)

var env embedtest.Env

func TestMain(m *testing.M) {
	if err := start(); err != nil {
		env.SkipWhy = err.Error()
	}
	os.Exit(m.Run())
}

// start brings up CPython, the pool and a server; an error is a reason to
// skip (no interpreter), or a failure the tests report.
func start() error {
	if err := env.Start("wsgi", wsgi.AfterLoad, asgi.AfterLoad); err != nil {
		return err
	}
	pool, err := python.StartPool(python.PoolConfig{Threads: 2, QueueSize: 16})
	if err != nil {
		return fmt.Errorf("python.StartPool: %v", err)
	}
	return env.Serve(&wsgi.Handler{Pool: pool, Logger: env.Log, Done: env.Done})
}

func TestWSGI_Hello(t *testing.T) {
	env.Need(t)
	resp, body := env.Get(t, http.DefaultClient, "/hello")
	if resp.StatusCode != 200 || body != "Hello, World!" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("GET /hello = %d %q %v", resp.StatusCode, body, resp.Header)
	}
}

// wsgi.input gives the body (PEP 3333, "wsgi.input"), here larger than one
// read.
func TestWSGI_InputEcho(t *testing.T) {
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

// The environ has CGI's keys and the wsgi.* ones (PEP 3333, "environ
// Variables"), the app runs on a pool thread, and wsgi.early_hints is a
// callable.
func TestWSGI_Environ(t *testing.T) {
	env.Need(t)
	resp, body := env.Get(t, http.DefaultClient, "/environ?a=1&b=%20")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /environ = %d %q", resp.StatusCode, body)
	}
	var env map[string]any
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("environ: %v: %q", err, body)
	}
	want := map[string]any{
		"REQUEST_METHOD": "GET", "PATH_INFO": "/environ", "QUERY_STRING": "a=1&b=%20", "SCRIPT_NAME": "",
		"SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http", "wsgi.multithread": true,
		"wsgi.multiprocess": false, "wsgi.run_once": false, "has_early_hints": true,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("environ[%q] = %#v, want %#v", k, env[k], v)
		}
	}
	if v, ok := env["wsgi.version"].([]any); !ok || len(v) != 2 || v[0] != float64(1) || v[1] != float64(0) {
		t.Errorf("wsgi.version = %#v, want (1, 0)", env["wsgi.version"])
	}
	if th, _ := env["thread"].(string); !strings.HasPrefix(th, "ts-py-") {
		t.Errorf("the app ran on thread %q, want a pool thread ts-py-N", env["thread"])
	}
	for _, k := range []string{"SERVER_NAME", "SERVER_PORT", "REMOTE_ADDR", "HTTP_HOST"} {
		if s, _ := env[k].(string); s == "" {
			t.Errorf("environ[%q] missing or empty", k)
		}
	}
}

// write() (PEP 3333, "The write() Callable") then the iterable, in order.
func TestWSGI_WriteThenIterable(t *testing.T) {
	env.Need(t)
	resp, body := env.Get(t, http.DefaultClient, "/write")
	if resp.StatusCode != 200 || body != "imperative, then iterable" {
		t.Fatalf("GET /write = %d %q", resp.StatusCode, body)
	}
}

// An app that raises, sends a header the spec forbids or never calls
// start_response gets a 500, one logged record, and the pool keeps
// serving.
func TestWSGI_AppFailures(t *testing.T) {
	env.Need(t)
	for _, tc := range []struct{ path, logged string }{
		{"/raise", "the app's own failure"},
		{"/bad-header", "Bad Name"},
		{"/no-start", "start_response"},
	} {
		resp, _ := env.Get(t, http.DefaultClient, tc.path)
		if resp.StatusCode != 500 {
			t.Errorf("GET %s = %d, want 500", tc.path, resp.StatusCode)
		}
		if !strings.Contains(env.Logs(), tc.logged) {
			t.Errorf("GET %s: no log record mentioning %q in:\n%s", tc.path, tc.logged, env.Logs())
		}
		if resp, body := env.Get(t, http.DefaultClient, "/hello"); resp.StatusCode != 200 || body != "Hello, World!" {
			t.Fatalf("after GET %s: /hello = %d %q", tc.path, resp.StatusCode, body)
		}
	}
}

// Done sees each request once, marked as a pool's (Pool, the queue wait
// measured).
func TestWSGI_DoneResult(t *testing.T) {
	env.Need(t)
	before := len(env.Results())
	env.Get(t, http.DefaultClient, "/hello")
	doneSeen := env.Results()
	if len(doneSeen) != before+1 {
		t.Fatalf("Done called %d times for one request", len(doneSeen)-before)
	}
	if r := doneSeen[len(doneSeen)-1]; r.Status != 200 || !r.Pool || r.Bytes != int64(len("Hello, World!")) {
		t.Fatalf("Done result = %+v, want status 200, Pool, 13 bytes", r)
	}
}

// Many requests at once on two threads: every one answered, none lost.
func TestWSGI_Concurrent(t *testing.T) {
	env.Need(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(env.BaseURL + "/hello")
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 && resp.StatusCode != 503 || resp.StatusCode == 200 && string(b) != "Hello, World!" {
				errs <- fmt.Errorf("%d %q", resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
