package tests

// Logs a person can read (issue 28): a traceback printed as Python prints
// it on a terminal and under --reload (one record per line otherwise), and
// stderr_tail without a second, escaped copy of the records above it.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ptyWrapper runs argv[1:] with stdout and stderr on a new pseudo-terminal
// and copies what it prints to its own stdout; SIGTERM is passed on.
const ptyWrapper = `
import os, signal, subprocess, sys
m, s = os.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=s, stderr=s)
os.close(s)
signal.signal(signal.SIGTERM, lambda *a: p.terminate())
while True:
    try:
        d = os.read(m, 65536)
    except OSError:
        break
    if not d:
        break
    os.write(1, d)
sys.exit(p.wait())
`

var textAddr = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startText starts a server logging text records, on a pseudo-terminal
// when tty, and waits for its listening record.
func startText(t *testing.T, tty bool, args ...string) *Server {
	t.Helper()
	cmd := Command(t, append([]string{"--log-format", "text"}, args...)...)
	if tty {
		py := "python3"
		if v := os.Getenv("TURNSTILE_VENV"); v != "" {
			py = filepath.Join(v, "bin", "python")
		}
		cmd = exec.Command(py, append([]string{"-c", ptyWrapper}, cmd.Args...)...)
		cmd.Dir = AppDir()
	}
	s, _ := startCmd(t, cmd)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := textAddr.FindStringSubmatch(s.Logs()); m != nil {
			s.Addr, s.URL = m[1], "http://"+m[1]
			return s
		}
		if time.Now().After(deadline) || s.Wait(0) >= 0 {
			t.Fatalf("no listening record:\n%s", s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitText waits until the log holds want, and returns it with "\r\n"
// (a terminal's line ends) made "\n".
func waitText(t *testing.T, s *Server, want string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		logs := strings.ReplaceAll(s.Logs(), "\r\n", "\n")
		if strings.Contains(logs, want) {
			return logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log does not hold %q:\n%s", want, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// On a terminal and under --reload an app's traceback follows its
// record's line as the lines Python prints; without either (a pipe, a
// file, a log collector) it stays on the record's one line, escaped.
func TestLogs_TracebackReadable(t *testing.T) {
	for _, tc := range []struct {
		id        string
		tty       bool
		args      []string
		multiline bool
	}{
		{"tty", true, nil, true},
		{"reload", false, []string{"--reload"}, true},
		{"pipe", false, nil, false},
	} {
		for _, iface := range []struct{ name, app string }{{"wsgi", "err_app:app"}, {"asgi", "asgi_err:app"}} {
			t.Run(iface.name+"/"+tc.id, func(t *testing.T) {
				testTracebackReadable(t, tc.tty, append(tc.args, iface.app), iface.name, tc.multiline)
			})
		}
	}
}

func testTracebackReadable(t *testing.T, tty bool, args []string, iface string, multiline bool) {
	s := startText(t, tty, args...)
	if code, _ := s.Get(t, "/raise"); code != 500 {
		t.Fatalf("GET /raise = %d; want 500", code)
	}
	logs := waitText(t, s, "boom "+errSecret)
	lines := strings.Split(logs, "\n")
	rec := -1
	for i, l := range lines {
		if strings.Contains(l, `msg="`+iface+`: app raised"`) {
			rec = i
		}
	}
	if rec < 0 {
		t.Fatalf("no \"%s: app raised\" record:\n%s", iface, logs)
	}
	if !multiline {
		if !strings.Contains(lines[rec], `traceback="Traceback (most recent call last):\n  File `) {
			t.Errorf("record line %q; want the traceback escaped on it", lines[rec])
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "Traceback") || strings.HasPrefix(l, "  File ") {
				t.Errorf("a raw traceback line %q without a terminal or --reload; want one record per line", l)
			}
		}
		return
	}
	if strings.Contains(lines[rec], "traceback=") || strings.Contains(lines[rec], `\n`) {
		t.Errorf("record line %q; want its fields without the traceback", lines[rec])
	}
	if !strings.Contains(lines[rec], "method=GET target=/raise") || !strings.Contains(lines[rec], "worker=1") {
		t.Errorf("record line %q; want its other fields kept", lines[rec])
	}
	if rec+3 >= len(lines) || lines[rec+1] != "Traceback (most recent call last):" || !strings.HasPrefix(lines[rec+2], `  File "`) {
		t.Fatalf("lines after the record:\n%s\nwant Python's traceback, raw", strings.Join(lines[rec:min(rec+8, len(lines))], "\n"))
	}
	last := ""
	for _, l := range lines[rec+1:] {
		if strings.HasPrefix(l, "time=") || l == "" {
			break
		}
		last = l
	}
	if !strings.HasPrefix(last, "RuntimeError: boom "+errSecret) {
		t.Errorf("the traceback's last line is %q; want the exception", last)
	}
}

// An ASGI app's failure is logged as a WSGI app's is (issue 28: the ASGI
// traceback was inside msg, "ASGI app raised on GET /raise\nTraceback...",
// and the record marked source=python as app output): msg "asgi: app
// raised" with method, target and the traceback in its own field, from
// the app's frames; the same for a WebSocket app; a lifespan failure has
// its traceback in the traceback field too.
func TestLogs_ASGIErrorRecord(t *testing.T) {
	raised := func(t *testing.T, s *Server, msg, marker string) map[string]any {
		t.Helper()
		recs := waitLogRecords(s.Logs, 5*time.Second, func(rec map[string]any) bool {
			return rec["msg"] == msg && strings.Contains(recordText(rec), marker)
		})
		if len(recs) != 1 {
			t.Fatalf("%d %q records naming %q; want 1:\n%s", len(recs), msg, marker, s.Logs())
		}
		rec := recs[0]
		tb, _ := rec["traceback"].(string)
		if !strings.HasPrefix(tb, "Traceback (most recent call last):\n") || !strings.HasSuffix(tb, marker) {
			t.Errorf("%q: traceback field %q; want Python's traceback ending in the exception", msg, tb)
		}
		if strings.Contains(tb, "_asgi.py") {
			t.Errorf("%q: traceback %q names the server's own frames; want the app's only", msg, tb)
		}
		return rec
	}
	keys := func(rec map[string]any) string {
		var k []string
		for key := range rec {
			k = append(k, key)
		}
		sort.Strings(k)
		return strings.Join(k, " ")
	}

	w := Start(t, "err_app:app")
	if code, _ := w.Get(t, "/raise?q=1"); code != 500 {
		t.Fatalf("WSGI GET /raise = %d; want 500", code)
	}
	wrec := raised(t, w, "wsgi: app raised", "RuntimeError: boom "+errSecret)

	a := Start(t, "asgi_err:app")
	if code, _ := a.Get(t, "/raise?q=1"); code != 500 {
		t.Fatalf("ASGI GET /raise = %d; want 500", code)
	}
	arec := raised(t, a, "asgi: app raised", "RuntimeError: boom "+errSecret)
	if keys(arec) != keys(wrec) {
		t.Errorf("ASGI record's keys %q; want the WSGI record's %q\nasgi: %v\nwsgi: %v", keys(arec), keys(wrec), arec, wrec)
	}
	for _, k := range []string{"method", "target", "level"} {
		if arec[k] != wrec[k] {
			t.Errorf("%s: ASGI %v, WSGI %v; want the same", k, arec[k], wrec[k])
		}
	}

	c, _, err := wsDial(a, "/ws")
	if err != nil {
		t.Fatalf("WebSocket /ws: %v", err)
	}
	c.ReadMessage() // the 1011 close
	c.Close()
	wsrec := raised(t, a, "asgi: WebSocket app raised", "RuntimeError: boom on a WebSocket "+errSecret)
	if keys(wsrec) != keys(wrec) || wsrec["target"] != "/ws" {
		t.Errorf("WebSocket record %v; want the keys %q and target /ws", wsrec, keys(wrec))
	}

	a.Stop()
	lrec := raised(t, a, "asgi: lifespan: the app raised during shutdown", "RuntimeError: boom at shutdown "+errSecret)
	if _, ok := lrec["source"]; ok {
		t.Errorf("lifespan record %v; want no source (it is the server's record, not app output)", lrec)
	}
}

// A worker's death after an app traceback: stderr_tail names the last
// records by level and message, without their tracebacks again (nor
// escaped twice).
func TestLogs_StderrTailOnce(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var s *Server
			if format == "json" {
				s = Start(t, "err_app:app")
			} else {
				s = startText(t, false, "err_app:app")
			}
			s.Get(t, "/raise")
			logs := waitText(t, s, "boom "+errSecret)
			pid := 0
			if format == "json" {
				for _, rec := range supRecords(logs) {
					if rec["msg"] == "worker ready" {
						pid = int(rec["pid"].(float64))
					}
				}
			} else if m := regexp.MustCompile(`msg="worker ready" worker=1 pid=(\d+)`).FindStringSubmatch(logs); m != nil {
				pid, _ = strconv.Atoi(m[1])
			}
			if pid == 0 {
				t.Fatalf("no worker pid in the log:\n%s", logs)
			}
			syscall.Kill(pid, syscall.SIGKILL)
			logs = waitText(t, s, "worker exited")
			var line string
			for _, l := range strings.Split(logs, "\n") {
				if strings.Contains(l, "worker exited") {
					line = l
				}
			}
			tail := ""
			if format == "json" {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				tail, _ = rec["stderr_tail"].(string)
			} else {
				i := strings.Index(line, "stderr_tail=")
				if i < 0 {
					t.Fatalf("no stderr_tail in %q", line)
				}
				q, err := strconv.QuotedPrefix(line[i+len("stderr_tail="):])
				if err != nil {
					t.Fatalf("stderr_tail in %q: %v", line, err)
				}
				tail, _ = strconv.Unquote(q)
			}
			t.Logf("stderr_tail:\n%s", tail)
			if !strings.Contains(tail, "ERROR wsgi: app raised") {
				t.Errorf("stderr_tail %q; want the app's error record named", tail)
			}
			if strings.Contains(tail, "Traceback") || strings.Contains(tail, `\n`) || strings.Contains(tail, `\"`) {
				t.Errorf("stderr_tail %q repeats a record (escaped); want each once, readable", tail)
			}
		})
	}
}
