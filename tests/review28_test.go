package tests

// A gunicorn or uvicorn user's first hour (issue 28), the review's
// findings: an app's logging record keeps its traceback and logger name
// in fields, an app that fails to import logs its traceback in a field,
// --reload keeps watching an app broken at start, the access log does not
// depend on --log-level, plain HTTP on the TLS port is answered 400, and
// a client named by a proxy has no ":0" port.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An app's logging.getLogger("myapp.views").exception(...) and Flask's
// 500 handler (app.logger.exception): msg is the message alone, logger
// the logger's name, traceback the exception (issue 28: the traceback
// was inside msg and the logger name dropped).
func TestLogs_AppLoggerTracebackField(t *testing.T) {
	s := Start(t, "log_exc_app:app")
	if code, body := s.Get(t, "/logexc"); code != 200 || body != "logged" {
		t.Fatalf("GET /logexc = %d %q", code, body)
	}
	if code, _ := s.Get(t, "/boom"); code != 500 {
		t.Fatalf("GET /boom = %d; want 500", code)
	}
	for _, want := range []struct{ msg, logger, exc string }{
		{"frobbing failed for user-7", "myapp.views", "KeyError: 'missing-key'"},
		{"Exception on /boom [GET]", "log_exc_app", "RuntimeError: flask-view-boom"},
	} {
		recs := waitLogRecords(s.Logs, 5*time.Second, func(rec map[string]any) bool {
			m, _ := rec["msg"].(string)
			return strings.Contains(m, want.msg)
		})
		if len(recs) != 1 {
			t.Fatalf("records with %q: %v; want 1", want.msg, recs)
		}
		rec := recs[0]
		msg, _ := rec["msg"].(string)
		tb, _ := rec["traceback"].(string)
		if strings.Contains(msg, "Traceback") || strings.Contains(msg, "\n") {
			t.Errorf("msg %q holds the traceback; want it in the traceback field", msg)
		}
		if rec["logger"] != want.logger || rec["level"] != "ERROR" || rec["source"] != "python" {
			t.Errorf("%v: want logger %q, level ERROR, source python", rec, want.logger)
		}
		if !strings.HasPrefix(tb, "Traceback (most recent call last):\n") || !strings.HasSuffix(tb, want.exc) {
			t.Errorf("traceback %q; want Python's traceback ending in %q", tb, want.exc)
		}
	}
}

// An app that fails to import at start (WSGI and ASGI): its record has
// the traceback in a traceback field (JSON), printed as Python prints it
// after the record's line on a terminal.
func TestLogs_ImportErrorTracebackField(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"broken_wsgi.py": "def app(environ, start_response):\n    pass\n\nimport no_such_module_wsgi\n",
		"broken_asgi.py": "async def app(scope, receive, send):\n    pass\n\nimport no_such_module_asgi\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, iface := range []string{"wsgi", "asgi"} {
		app := "broken_" + iface + ":app"
		exc := "ModuleNotFoundError: No module named 'no_such_module_" + iface + "'"
		t.Run(iface+"/json", func(t *testing.T) {
			out, code, _ := runToExit(t, Command(t, "--app-dir", dir, app), 30*time.Second)
			if code != 1 {
				t.Errorf("exit status %d; want 1", code)
			}
			var rec map[string]any
			for _, r := range supRecords(out) {
				if r["msg"] == "turnstile: cannot load the app "+app {
					rec = r
				}
			}
			if rec == nil {
				t.Fatalf("no \"cannot load the app\" record")
			}
			if tb, _ := rec["traceback"].(string); !strings.HasPrefix(tb, "Traceback (most recent call last):\n") || !strings.HasSuffix(tb, exc) {
				t.Errorf("traceback %q; want Python's, ending in %q", tb, exc)
			}
		})
		t.Run(iface+"/tty", func(t *testing.T) {
			cmd := Command(t, "--log-format", "text", "--app-dir", dir, app)
			cmd = exec.Command(filepath.Join(os.Getenv("TURNSTILE_VENV"), "bin", "python"), append([]string{"-c", ptyWrapper}, cmd.Args...)...)
			if os.Getenv("TURNSTILE_VENV") == "" {
				cmd.Path, _ = exec.LookPath("python3")
				cmd.Args[0] = cmd.Path
			}
			cmd.Dir = AppDir()
			out, _, _ := runToExit(t, cmd, 30*time.Second)
			out = strings.ReplaceAll(out, "\r\n", "\n") // a terminal's line ends
			lines := strings.Split(out, "\n")
			for i, l := range lines {
				if strings.Contains(l, `msg="turnstile: cannot load the app `+app+`"`) {
					if strings.Contains(l, "traceback=") || i+1 >= len(lines) || lines[i+1] != "Traceback (most recent call last):" {
						t.Errorf("record %q then %q; want the traceback's lines after the record's", l, lines[min(i+1, len(lines)-1)])
					}
					if !strings.Contains(out, "\n"+exc+"\n") {
						t.Errorf("no line %q", exc)
					}
					return
				}
			}
			t.Errorf("no \"cannot load the app\" record")
		})
	}
}

// --reload with an app that fails to import at start: the master logs the
// failure once and keeps watching; once the file is fixed the server
// serves (uvicorn's behaviour; issue 28: it exited).
func TestReload_BrokenAtStart(t *testing.T) {
	dir := t.TempDir()
	appFile := filepath.Join(dir, "reload_broken.py")
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(appFile+".tmp", []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(appFile+".tmp", appFile); err != nil {
			t.Fatal(err)
		}
	}
	write("def app(environ, start_response:\n    pass\n") // a syntax error
	s, listening := StartAsync(t, "--app-dir", dir, "--reload", "reload_broken:app")
	const waiting = "worker failed to start (its error is logged above); --reload: waiting for a change to start it again"
	supWaitLog(t, s, 30*time.Second, 1, waiting)
	time.Sleep(500 * time.Millisecond)
	if s.Wait(0) >= 0 {
		t.Fatalf("the master exited after the failed start under --reload")
	}
	if n := supCount(s.Logs(), "worker started"); n != 1 {
		t.Errorf("\"worker started\" records = %d before the fix; want 1 (no respawn loop)", n)
	}
	write("def app(environ, start_response):\n    start_response(\"200 OK\", [(\"Content-Type\", \"text/plain\")])\n    return [b\"fixed\"]\n")
	WaitListening(t, s, listening, 30*time.Second)
	if code, body := s.Get(t, "/"); code != 200 || body != "fixed" {
		t.Errorf("GET / after the fix = %d %q; want 200 fixed", code, body)
	}
	if n := supCount(s.Logs(), waiting); n != 1 {
		t.Errorf("%q records = %d; want 1", waiting, n)
	}
}

// --access-logfile - (and --access-log) under --log-level warning: the
// access records are written, the other INFO records are not (gunicorn's
// access log does not depend on the log level; issue 28: nothing).
func TestAccess_LogLevelWarning(t *testing.T) {
	for _, flag := range []string{"--access-logfile=-", "--access-log"} {
		t.Run(flag, func(t *testing.T) {
			port := strconv.Itoa(freePort(t))
			// No "listening" record at WARNING: wait for the port.
			s, _ := StartAsync(t, "--port", port, "--log-level", "warning", flag, "hello:app")
			s.Addr, s.URL = "127.0.0.1:"+port, "http://127.0.0.1:"+port
			deadline := time.Now().Add(30 * time.Second)
			for {
				if c, err := net.Dial("tcp", s.Addr); err == nil {
					c.Close()
					break
				}
				if time.Now().After(deadline) || s.Wait(0) >= 0 {
					t.Fatalf("not listening on %s:\n%s", s.Addr, s.Logs())
				}
				time.Sleep(50 * time.Millisecond)
			}
			if code, _ := s.Get(t, "/?q=1"); code != 200 {
				t.Fatalf("GET = %d", code)
			}
			recs := waitLogRecords(s.Logs, 5*time.Second, func(rec map[string]any) bool { return rec["msg"] == "access" })
			if len(recs) != 1 || recs[0]["target"] != "/?q=1" || recs[0]["level"] != "INFO" {
				t.Fatalf("access records %v; want one, INFO, target /?q=1", recs)
			}
			for _, rec := range supRecords(s.Logs()) {
				if rec["level"] == "INFO" && rec["msg"] != "access" {
					t.Errorf("%v: an INFO record under --log-level warning", rec)
				}
			}
		})
	}
}

// A client named by X-Forwarded-For has no port: remote=1.2.3.4, not
// 1.2.3.4:0; a direct client keeps its port.
func TestAccess_ProxyRemoteWithoutPort(t *testing.T) {
	s := Start(t, "--access-log", "hello:app")
	Raw(t, s.Addr, "GET /fwd HTTP/1.0\r\nX-Forwarded-For: 203.0.113.7\r\n\r\n", 5*time.Second)
	Raw(t, s.Addr, "GET /direct HTTP/1.0\r\n\r\n", 5*time.Second)
	recs := waitLogRecords(s.Logs, 5*time.Second, func(rec map[string]any) bool { return rec["msg"] == "access" })
	for len(recs) < 2 {
		recs = waitLogRecords(s.Logs, 5*time.Second, func(rec map[string]any) bool { return rec["msg"] == "access" })
		if len(recs) < 2 {
			t.Fatalf("access records %v; want 2", recs)
		}
	}
	if recs[0]["remote"] != "203.0.113.7" {
		t.Errorf("remote %v behind the proxy; want 203.0.113.7", recs[0]["remote"])
	}
	if r := fmt.Sprint(recs[1]["remote"]); !strings.HasPrefix(r, "127.0.0.1:") || strings.HasSuffix(r, ":0") {
		t.Errorf("remote %v of a direct client; want 127.0.0.1:PORT", r)
	}
}

// Plain HTTP on the TLS port gets net/http's answer, and a record at INFO
// (issue 28: an empty reply, logged at DEBUG only).
func TestTLS_PlainHTTPOnTLSPort(t *testing.T) {
	pki := newPKI(t)
	s := Start(t, append(pki.TLSArgs(), "hello:app")...)
	got, _ := Raw(t, s.Addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 5*time.Second)
	if want := "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"; got != want {
		t.Errorf("answer %q; want %q", got, want)
	}
	recs := waitLogRecords(s.Logs, 5*time.Second, func(rec map[string]any) bool {
		return rec["msg"] == "http1: plain HTTP request on the TLS port: answered 400"
	})
	if len(recs) != 1 || recs[0]["level"] != "INFO" {
		t.Errorf("records %v; want one at INFO", recs)
	}
	// A scanner's burst: every one answered, none logged within the next
	// 10 s (one record per 10 s, with the count since the last).
	for i := 0; i < 20; i++ {
		if got, _ := Raw(t, s.Addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 5*time.Second); !strings.HasPrefix(got, "HTTP/1.0 400 ") {
			t.Fatalf("request %d of the burst: %q", i, got)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := strings.Count(s.Logs(), "plain HTTP request on the TLS port"); n != 1 {
		t.Errorf("%d records after a burst of 20 more; want the first one only", n)
	}
	// HTTPS still works.
	resp, err := pki.httpsClient().Get(httpsURL(s) + "/")
	if err != nil {
		t.Fatalf("HTTPS GET /: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HTTPS GET / = %d; want 200", resp.StatusCode)
	}
}
