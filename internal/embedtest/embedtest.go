// Package embedtest is the in-process harness the wsgi and asgi package
// tests share: real CPython started by python.Start on the package's
// testdata/pkgapp.py, a Handler behind an http1.Server on a loopback port,
// the log it writes and the inflight.Result of every request its Done
// saw. The package builds the part between (a python.Pool, or asgi Loops)
// and the Handler itself; the end-to-end suite (tests/) runs the same
// through the binary.
//
// CPython is found through TURNSTILE_PYTHON (make test sets it: the
// interpreter whose libpython the test binary links); without it Start
// returns an error that the tests turn into a skip (Need).
//
// Only tests import this package.
package embedtest

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"turnstile/internal/http1"
	"turnstile/internal/inflight"
	"turnstile/internal/logs"
	"turnstile/internal/python"
	pysrc "turnstile/python"
)

// Env is one started harness. The zero value is ready for Start.
type Env struct {
	// BaseURL is "http://127.0.0.1:port" once Serve has returned nil.
	BaseURL string
	// SkipWhy, when set, is why the tests skip (Need): Start or the
	// package's own start-up failed.
	SkipWhy string
	// Log writes JSON records at debug level into the buffer Logs reads;
	// set by Start.
	Log *slog.Logger

	logBuf bytes.Buffer
	logs   logs.LockedWriter // logBuf, for the log's concurrent writers

	mu      sync.Mutex // guards results
	results []inflight.Result
}

// Start sets Log (and python.SetLogger) and starts CPython on
// testdata/pkgapp.py with one worker, Interface "auto" and afterLoad
// (the packages' AfterLoad hooks). It returns an error when
// TURNSTILE_PYTHON is unset, python.Start fails, or the app is not of
// kind want ("wsgi" or "asgi").
func (e *Env) Start(want string, afterLoad ...unsafe.Pointer) error {
	program := os.Getenv("TURNSTILE_PYTHON")
	if program == "" {
		return fmt.Errorf("TURNSTILE_PYTHON is not set (make test sets it): no CPython to start")
	}
	e.logs.W = &e.logBuf
	e.Log = slog.New(slog.NewJSONHandler(&e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	python.SetLogger(e.Log)
	dir, _ := filepath.Abs("testdata")
	kind, err := python.Start(python.Config{
		ProgramName: program, Bootstrap: pysrc.Bootstrap, AppDir: dir, AppSpec: "pkgapp:app",
		Interface: "auto", Workers: 1, AfterLoad: afterLoad,
	})
	if err != nil {
		return fmt.Errorf("python.Start: %v", err)
	}
	if kind != want {
		return fmt.Errorf("python.Start: kind %q, want %s", kind, want)
	}
	return nil
}

// Serve serves h on a new loopback listener in its own goroutine and sets
// BaseURL; it returns net.Listen's error.
func (e *Env) Serve(h http1.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http1.Server{Handler: h}
	go srv.Serve(ln)
	e.BaseURL = "http://" + ln.Addr().String()
	return nil
}

// Done records res; it is the Handler's Done.
func (e *Env) Done(_ *http1.Request, res inflight.Result) {
	e.mu.Lock()
	e.results = append(e.results, res)
	e.mu.Unlock()
}

// Results returns a copy of what Done recorded, oldest first.
func (e *Env) Results() []inflight.Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]inflight.Result(nil), e.results...)
}

// Logs returns everything written to Log so far.
func (e *Env) Logs() string {
	e.logs.Lock()
	defer e.logs.Unlock()
	return e.logBuf.String()
}

// Need skips t when the harness did not start (SkipWhy).
func (e *Env) Need(t *testing.T) {
	t.Helper()
	if e.SkipWhy != "" {
		t.Skip(e.SkipWhy)
	}
}

// Get sends GET BaseURL+path with c and returns the response and its whole
// body; a transport error fails t.
func (e *Env) Get(t *testing.T, c *http.Client, path string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(e.BaseURL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
