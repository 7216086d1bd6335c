package tests

// Start, readiness, graceful stop and app output. App:
// testapps/life_app.py.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM with a request in flight: the request completes with 200 and
// `Connection: close` (RFC 9112 §9.6), new connections are refused from
// the signal on, /readyz turns 503, and the process exits 0 once the
// request is done.
func TestLifecycle_SIGTERMFinishesInFlight(t *testing.T) {
	s := Start(t, "life_app:app")
	if code, body := s.Get(t, "/"); code != 200 {
		t.Fatalf("GET / = %d %q", code, body)
	}

	c := dialT(t, s.Addr)
	defer c.Close()
	io.WriteString(c, "GET /slow?2 HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(300 * time.Millisecond) // the app is sleeping now
	signalled := time.Now()
	s.Signal(syscall.SIGTERM)

	// New connections are refused (the listener is closed) within moments
	// of the signal, long before the in-flight request ends. A SYN sent
	// while the workers drain the socket is dropped (supervise/refuse.go)
	// and its retransmission, 1 s later, is refused: so the dial may take
	// a little over 1 s.
	refused := false
	for time.Since(signalled) < time.Second {
		nc, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
		if err != nil {
			// A SYN that races the close of the listener may get a reset
			// instead: also a refusal.
			if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("dial after SIGTERM: %v; want connection refused", err)
			}
			refused = true
			break
		}
		nc.Close()
		time.Sleep(10 * time.Millisecond)
	}
	if !refused {
		t.Fatalf("new connections still accepted 1 s after SIGTERM; want them refused")
	}
	t.Logf("new connections refused %v after SIGTERM", time.Since(signalled))
	if s.Admin != "" {
		if resp, err := http.Get(s.Admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode != 503 {
				t.Errorf("admin /readyz while stopping = %d; want 503", resp.StatusCode)
			}
		} else {
			t.Logf("admin /readyz while stopping: %v", err)
		}
	}

	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
	if err != nil {
		t.Fatalf("in-flight GET /slow after SIGTERM: %v; want it to complete", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || string(b) != "done" {
		t.Fatalf("in-flight GET /slow after SIGTERM = %d %q %v; want 200 \"done\"", resp.StatusCode, b, err)
	}
	// net/http reports `Connection: close` as resp.Close (and drops the
	// header from resp.Header).
	if !resp.Close {
		t.Errorf("in-flight response after SIGTERM has no `Connection: close`")
	}
	if code := s.Wait(10 * time.Second); code != 0 {
		t.Fatalf("exit status after SIGTERM = %d; want 0", code)
	}
	t.Logf("exited %v after SIGTERM", time.Since(signalled))
}

// A second SIGTERM/SIGINT during the graceful stop exits at once, without
// waiting for the in-flight request (10 s here).
func TestLifecycle_SecondSignalExits(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			s := Start(t, "life_app:app")
			c := dialT(t, s.Addr)
			defer c.Close()
			io.WriteString(c, "GET /slow?10 HTTP/1.1\r\nHost: a\r\n\r\n")
			time.Sleep(300 * time.Millisecond)
			s.Signal(sig)
			time.Sleep(300 * time.Millisecond)
			if code := s.Wait(0); code != -1 {
				t.Fatalf("exited (%d) on the first signal with a request in flight; want a graceful wait", code)
			}
			second := time.Now()
			s.Signal(sig)
			code := s.Wait(2 * time.Second)
			if code == -1 {
				t.Fatalf("still running 2 s after a second %v; want an exit at once", sig)
			}
			t.Logf("exit status %d, %v after the second %v", code, time.Since(second), sig)
		})
	}
}

// /readyz and /livez answer 200 while the server serves.
func TestLifecycle_Readyz(t *testing.T) {
	s := Start(t, "life_app:app")
	if s.Admin == "" {
		t.Fatal("no \"admin listening\" record in the log")
	}
	for _, path := range []string{"/livez", "/readyz"} {
		resp, err := http.Get(s.Admin + path)
		if err != nil {
			t.Fatalf("admin %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("admin %s = %d; want 200 while serving", path, resp.StatusCode)
		}
	}
	if code, _ := s.Get(t, "/"); code != 200 {
		t.Fatalf("GET / = %d; want 200", code)
	}
}

// print(), logging.warning() and wsgi.errors.write() from a view each
// become one record in the server log (DESIGN.md: app output goes to the
// server's log, line-buffered, as records when the format is JSON); the
// warning keeps its level.
func TestLifecycle_AppOutputInLog(t *testing.T) {
	s := Start(t, "life_app:app")
	// level, when set, is the record's level: a logging call states its
	// own, which the record keeps (a warning is not an error).
	for _, tc := range []struct{ id, path, level string }{
		{"print", "/print", ""},
		{"logging.warning", "/logging", "WARN"},
		{"wsgi.errors", "/errors", ""},
	} {
		t.Run(tc.id, func(t *testing.T) {
			mark := fmt.Sprintf("life-%s-%d", strings.TrimPrefix(tc.path, "/"), time.Now().UnixNano())
			if code, body := s.Get(t, tc.path+"?"+mark); code != 200 {
				t.Fatalf("GET %s = %d %q", tc.path, code, body)
			}
			recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
				return strings.Contains(recordText(rec), mark)
			})
			if len(recs) != 1 {
				t.Fatalf("log records with %q = %d; want exactly one:\n%v", mark, len(recs), recs)
			}
			if msg, _ := recs[0]["msg"].(string); !strings.Contains(msg, mark) || recs[0]["unparsed"] != nil {
				t.Fatalf("record %v; want a JSON record whose msg carries %q", recs[0], mark)
			}
			if tc.level != "" && recs[0]["level"] != tc.level {
				t.Errorf("record level = %v; want %s", recs[0]["level"], tc.level)
			}
		})
	}
}
