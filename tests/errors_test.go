package tests

// App errors and start-up failures. Apps: testapps/err_app.py (one route
// per way of breaking PEP 3333) and testapps/err_import.py. STYLE.md §5:
// tracebacks go to logs, never into HTTP bodies, and every 500 logs its
// cause. DESIGN.md, the bytes rule: the app's status and headers are
// validated before they become bytes on the wire.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// errSecret is in every exception message err_app.py raises; it must
// never reach a client.
const errSecret = "err-secret-7f3a"

func bodyLeaks(body string) bool {
	return strings.Contains(body, errSecret) || strings.Contains(body, "Traceback") ||
		strings.Contains(body, "RuntimeError") || strings.Contains(body, ".py")
}

// An exception from the app call (or from the iterable before any block)
// is a 500 with a generic body, one traceback in the log, and the next
// request is served.
func TestErrors_AppRaises(t *testing.T) {
	s := Start(t, "err_app:app")
	for _, tc := range []struct{ id, path, marker string }{
		{"in-app-call", "/raise", "boom " + errSecret},
		{"in-first-next", "/raise-in-iter", "boom in iter " + errSecret},
	} {
		t.Run(tc.id, func(t *testing.T) {
			code, body := s.Get(t, tc.path)
			if code != 500 {
				t.Fatalf("GET %s = %d %q; want 500", tc.path, code, body)
			}
			if bodyLeaks(body) {
				t.Fatalf("GET %s: body %q carries the exception; want a generic 500 body", tc.path, body)
			}
			recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
				return strings.Contains(recordText(rec), tc.marker)
			})
			tracebacks := 0
			for _, rec := range recs {
				tracebacks += strings.Count(recordText(rec), "Traceback (most recent call last)")
			}
			if len(recs) != 1 || tracebacks < 1 {
				t.Fatalf("log records naming %q = %d (tracebacks in them: %d); want exactly one record with the traceback:\n%v",
					tc.marker, len(recs), tracebacks, recs)
			}
			if code, body := s.Get(t, "/ok"); code != 200 || body != "ok" {
				t.Fatalf("GET /ok after the error = %d %q; want 200 \"ok\"", code, body)
			}
		})
	}
	t.Run("concurrent", func(t *testing.T) {
		concurrently(t, caseN, func(i int) error {
			path := "/raise"
			if i%2 == 1 {
				path = "/ok"
			}
			resp, err := http.Get(s.URL + path)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := map[string]int{"/raise": 500, "/ok": 200}[path]
			if resp.StatusCode != want || bodyLeaks(string(b)) {
				return fmt.Errorf("GET %s = %d %q; want %d without the traceback", path, resp.StatusCode, b, want)
			}
			return nil
		})
	})
}

// Responses that break PEP 3333 or would put invalid bytes on the wire are
// a 500: the raw response (read over TCP) is a well-formed 500 with none of
// the app's status or headers, no CR/LF/NUL smuggled into the head, and no
// non-latin-1 text; the cause is logged; the server keeps serving.
func TestErrors_InvalidResponse(t *testing.T) {
	s := Start(t, "err_app:app")
	// cause is what the exception's last line in the log must mention.
	for _, tc := range []struct{ id, path, cause string }{
		{"start_response-never-called", "/no-start", "start_response"},
		{"start_response-never-called-generator", "/no-start-gen", "start_response"},

		{"status-without-reason", "/status-200", "status"},
		{"status-not-numeric", "/status-abc", "status"},
		{"status-with-crlf", "/status-crlf", "status"},
		{"status-with-lf", "/status-lf", "status"},
		{"status-bytes-not-str", "/status-bytes", "status"},
		{"status-600", "/status-600", "status"},
		{"status-999", "/status-999", "status"},
		{"status-two-digits", "/status-42", "status"},
		{"status-below-100", "/status-099", "status"},

		{"header-value-cr", "/header-cr", "X-Bad"},
		{"header-value-lf", "/header-lf", "X-Bad"},
		{"header-value-crlf", "/header-crlf", "X-Bad"},
		{"header-value-nul", "/header-nul", "X-Bad"},
		{"header-value-not-latin1", "/header-not-latin1", "latin-1"},
		{"header-name-not-latin1", "/header-name-not-latin1", "latin-1"},
		{"header-name-crlf", "/header-name-crlf", "header name"},
		{"header-name-space", "/header-name-space", "header name"},

		{"yield-str-list", "/str-list", "str"},
		{"yield-str-generator", "/str-gen", "str"},
	} {
		one := func() error {
			raw, _ := rawExchange(s.Addr, "GET "+tc.path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second)
			head, body, ok := strings.Cut(raw, "\r\n\r\n")
			if !ok {
				return fmt.Errorf("GET %s: no complete head in %q", tc.path, raw)
			}
			if !strings.HasPrefix(head, "HTTP/1.1 500 ") {
				return fmt.Errorf("GET %s: status line %q; want HTTP/1.1 500", tc.path, strings.SplitN(head, "\r\n", 2)[0])
			}
			if bad := invalidHeadBytes(head); bad != "" {
				return fmt.Errorf("GET %s: invalid bytes on the wire: %s in %q", tc.path, bad, head)
			}
			for _, h := range []string{"X-Injected", "X-Bad", "X Bad", "X-B"} {
				if strings.Contains(strings.ToLower(head), strings.ToLower(h)) {
					return fmt.Errorf("GET %s: the app's header %q reached the wire: %q", tc.path, h, head)
				}
			}
			if strings.Contains(body, "should not be sent") || strings.Contains(body, "a str, not bytes") ||
				strings.Contains(body, "no start_response") || bodyLeaks(body) {
				return fmt.Errorf("GET %s: body %q; want the server's generic 500 body", tc.path, body)
			}
			return nil
		}
		t.Run(tc.id, func(t *testing.T) {
			if err := one(); err != nil {
				t.Fatal(err)
			}
			recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
				return rec["level"] == "ERROR" && rec["target"] == tc.path
			})
			if len(recs) == 0 {
				t.Errorf("GET %s: no ERROR record for the request; every 500 logs its cause", tc.path)
			} else if last := exceptionLine(recs[0]); !strings.Contains(last, tc.cause) {
				t.Errorf("GET %s: logged cause %q; want the exception to name %q", tc.path, last, tc.cause)
			}
			concurrently(t, 5, func(int) error { return one() })
			if code, body := s.Get(t, "/ok"); code != 200 || body != "ok" {
				t.Fatalf("GET /ok after %s = %d %q; want 200 \"ok\"", tc.path, code, body)
			}
		})
	}
}

// exceptionLine is the last line of a record's traceback (or message):
// the exception type and text.
func exceptionLine(rec map[string]any) string {
	text, _ := rec["traceback"].(string)
	if text == "" {
		text, _ = rec["msg"].(string)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return lines[len(lines)-1]
}

// invalidHeadBytes describes the first byte in a response head that RFC
// 9112 does not allow: a CR not followed by LF, a bare LF, NUL or another
// control byte, or a byte past latin-1's printable range in a field name.
func invalidHeadBytes(head string) string {
	for i := 0; i < len(head); i++ {
		c := head[i]
		switch {
		case c == '\r':
			if i+1 >= len(head) || head[i+1] != '\n' {
				return fmt.Sprintf("bare CR at %d", i)
			}
			i++
		case c == '\n':
			return fmt.Sprintf("bare LF at %d", i)
		case c == 0:
			return fmt.Sprintf("NUL at %d", i)
		case c < 0x20 && c != '\t', c == 0x7f:
			return fmt.Sprintf("control byte %#x at %d", c, i)
		}
	}
	for _, line := range strings.Split(head, "\r\n")[1:] {
		name, _, ok := strings.Cut(line, ":")
		if !ok || !tokenRE.MatchString(name) {
			return fmt.Sprintf("field line %q is not token \":\" value", line)
		}
	}
	return ""
}

// tokenRE matches a field name (RFC 9110 §5.6.2, token).
var tokenRE = regexp.MustCompile(`^[!#$%&'*+\-.^_` + "`" + `|~0-9A-Za-z]+$`)

// PEP 3333: "if the application does not provide enough data to meet its
// stated Content-Length, the server should close the connection and log
// or otherwise report the error". It closed without a word.
func TestErrors_ShortBody(t *testing.T) {
	s := Start(t, "err_app:app")
	raw, closed := rawExchange(s.Addr, "GET /short-body HTTP/1.1\r\nHost: a\r\n\r\n", 5*time.Second)
	if !strings.HasSuffix(raw, "\r\n\r\nabc") || !closed {
		t.Fatalf("GET /short-body: %q (closed %v); want the head, \"abc\", then a close", raw, closed)
	}
	recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
		return strings.Contains(recordText(rec), "shorter than its Content-Length") && rec["target"] == "/short-body"
	})
	if len(recs) != 1 || recs[0]["level"] != "ERROR" {
		t.Fatalf("%d ERROR records name the short body of /short-body; want 1", len(recs))
	}
	if raw, _ := rawExchange(s.Addr, "HEAD /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 5*time.Second); !strings.HasPrefix(raw, "HTTP/1.1 200") {
		t.Fatalf("HEAD /ok: %q", raw)
	}
	time.Sleep(200 * time.Millisecond)
	if n := strings.Count(s.Logs(), "shorter than its Content-Length"); n != 1 {
		t.Errorf("%d short-body records after a HEAD too; want 1 (a HEAD answer has no body)", n)
	}
}

// An exception after the head and a first block went out cuts the
// connection: the client sees a truncated body (an unexpected EOF), never
// a clean end, and the server keeps serving.
func TestErrors_ExceptionAfterHead(t *testing.T) {
	s := Start(t, "err_app:app")
	for _, tc := range []struct{ id, path string }{
		{"chunked", "/after-head"},
		{"content-length", "/after-head-length"},
	} {
		one := func() error {
			resp, err := http.Get(s.URL + tc.path)
			if err != nil {
				return fmt.Errorf("GET %s: %v; want the head, then a cut", tc.path, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("GET %s = %d; want the app's 200 (the head was sent)", tc.path, resp.StatusCode)
			}
			if err == nil {
				return fmt.Errorf("GET %s: body %q ended cleanly; want a truncated body (connection cut)", tc.path, b)
			}
			if !strings.HasPrefix(string(b), "first block;") || bodyLeaks(string(b)) {
				return fmt.Errorf("GET %s: body %q; want \"first block;\" then the cut", tc.path, b)
			}
			return nil
		}
		t.Run(tc.id, func(t *testing.T) {
			if err := one(); err != nil {
				t.Fatal(err)
			}
			// Raw: the connection ends without the chunked terminator.
			raw, closed := rawExchange(s.Addr, "GET "+tc.path+" HTTP/1.1\r\nHost: a\r\n\r\n", 5*time.Second)
			if !closed {
				t.Fatalf("GET %s: connection still open 5 s after the app raised; want it cut", tc.path)
			}
			if strings.HasSuffix(raw, "0\r\n\r\n") {
				t.Fatalf("GET %s: the chunked body was terminated cleanly: %q", tc.path, raw)
			}
			concurrently(t, caseN, func(int) error { return one() })
			if code, body := s.Get(t, "/ok"); code != 200 || body != "ok" {
				t.Fatalf("GET /ok after %s = %d %q; want 200 \"ok\"", tc.path, code, body)
			}
			recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
				return strings.Contains(recordText(rec), "after head "+errSecret)
			})
			if len(recs) == 0 {
				t.Errorf("no log record with the traceback of the exception after the head")
			}
		})
	}
}

// startFailure runs the binary with args to its exit (limit 20 s) and
// returns the exit status, the time it took and the log.
func startFailure(t *testing.T, args ...string) (int, time.Duration, string) {
	t.Helper()
	cmd := Command(t, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v: still running after 20 s; want a start-up failure\n%s", args, out.String())
	}
	d := time.Since(start)
	t.Logf("exit %d after %v; log:\n%s", cmd.ProcessState.ExitCode(), d, out.String())
	return cmd.ProcessState.ExitCode(), d, out.String()
}

// errorLines are the log records at ERROR level.
func errorLines(log string) []string {
	var lines []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"level":"ERROR"`) || (strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "{")) {
			lines = append(lines, line)
		}
	}
	return lines
}

// A module that raises at import: exit status 1 within ~2 s, with the
// traceback in the log.
func TestErrors_ImportFailure(t *testing.T) {
	code, d, log := startFailure(t, "err_import:app")
	if code != 1 {
		t.Errorf("exit status = %d; want 1", code)
	}
	if d > 3*time.Second {
		t.Errorf("exited after %v; want within ~2 s", d)
	}
	for _, want := range []string{"Traceback (most recent call last)", "err_import.py", "err_import exploded at import time"} {
		if !strings.Contains(log, want) {
			t.Errorf("log has no %q; want the import traceback", want)
		}
	}
}

// A missing module or attribute: exit status 1 and one clear line naming
// what is missing (no traceback).
func TestErrors_MissingApp(t *testing.T) {
	for _, tc := range []struct{ id, spec, name string }{
		{"missing-module", "err_no_such_module:app", "err_no_such_module"},
		{"missing-attribute", "err_app:no_such_attr", "no_such_attr"},
		{"missing-dotted-module", "err_no_such_pkg.sub:app", "err_no_such_pkg"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			code, d, log := startFailure(t, tc.spec)
			if code != 1 {
				t.Errorf("exit status = %d; want 1", code)
			}
			if d > 3*time.Second {
				t.Errorf("exited after %v; want within ~2 s", d)
			}
			errs := errorLines(log)
			if len(errs) != 1 || !strings.Contains(errs[0], tc.name) {
				t.Errorf("error lines = %q; want exactly one, naming %q", errs, tc.name)
			}
			if strings.Contains(log, "Traceback") {
				t.Errorf("log has a traceback; want one clear line")
			}
		})
	}
}

// A virtualenv of another CPython minor version is refused at start-up
// with one clear line (DESIGN.md: the binary is tied to its minor version).
func TestErrors_VenvOtherMinorVersion(t *testing.T) {
	out, err := exec.Command(binPath(t), "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	m := regexp.MustCompile(`CPython (3\.\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("--version = %q; want it to name the CPython it was built for", out)
	}
	built := m[1]
	home, _ := os.UserHomeDir()
	other := ""
	for _, v := range []string{"3.12.1", "3.11.7", "3.13.0"} {
		if !strings.HasPrefix(v, built+".") {
			if _, err := os.Stat(filepath.Join(home, ".pyenv/versions", v, "bin/python3")); err == nil {
				other = v
				break
			}
		}
	}
	if other == "" {
		t.Skipf("no pyenv CPython of a minor version other than %s", built)
	}
	venv := filepath.Join(t.TempDir(), "venv-"+other)
	if out, err := exec.Command(filepath.Join(home, ".pyenv/versions", other, "bin/python3"), "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("creating a %s virtualenv: %v\n%s", other, err, out)
	}
	otherMinor := other[:strings.LastIndex(other, ".")]

	code, d, log := startFailure(t, "--venv", venv, "hello:app")
	if code == 0 {
		t.Errorf("exit status = 0; want non-zero")
	}
	if d > 3*time.Second {
		t.Errorf("exited after %v; want at once", d)
	}
	errs := errorLines(log)
	if len(errs) != 1 || !strings.Contains(errs[0], otherMinor) || !strings.Contains(errs[0], built) {
		t.Errorf("error lines = %q; want exactly one naming both %s (the virtualenv) and %s (the build)", errs, otherMinor, built)
	}
	if strings.Contains(log, "Traceback") || strings.Contains(log, `"msg":"listening"`) {
		t.Errorf("log has a traceback or a listening record; want a refusal before Python starts")
	}
}

// A Python warning (warnings.warn) is logged at WARNING, as one record
// naming its category and where it was raised; it was written to stderr
// and logged at ERROR, a record per line. stderr itself stays ERROR.
func TestErrors_WarningLevel(t *testing.T) {
	s := Start(t, "warn_app:app")
	for path, want := range map[string]string{"/warn": "turnstile-warn-7c1", "/stderr": "turnstile-stderr-7c1"} {
		if code, _ := asgiGetT(t, s, path); code != 200 {
			t.Fatalf("GET %s = %d", path, code)
		}
		recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
			return strings.Contains(recordText(rec), want)
		})
		wantLevel := "ERROR"
		if path == "/warn" {
			wantLevel = "WARN"
		}
		if len(recs) != 1 || recs[0]["level"] != wantLevel {
			t.Errorf("GET %s: records %v; want one at %s", path, recs, wantLevel)
			continue
		}
		if text := recordText(recs[0]); path == "/warn" && (!strings.Contains(text, "UserWarning") || !strings.Contains(text, "warn_app.py")) {
			t.Errorf("GET /warn: record %q; want the category and the file", text)
		}
	}
	// A warning under the app's own redirect_stderr goes where the app sent
	// it, as in plain Python, not to the log.
	if code, body := asgiGetT(t, s, "/warn-redirect"); code != 200 || !strings.Contains(body, "UserWarning: turnstile-redirect-7c1") {
		t.Errorf("GET /warn-redirect = %d %q; want the warning in the app's buffer", code, body)
	}
	if strings.Contains(s.Logs(), "turnstile-redirect-7c1") {
		t.Errorf("a warning under redirect_stderr reached the server log")
	}
}

// Text with a lone surrogate (os.fsdecode of a non-UTF-8 name, a
// surrogateescape'd byte) reaches the log escaped (\udcff), as Python's own
// stderr writes it, from a warning, stderr, logging and a traceback alike;
// it raised UnicodeEncodeError into the app (a 500), and a traceback
// became "(unprintable error)".
func TestErrors_Surrogates(t *testing.T) {
	s := Start(t, "warn_app:app")
	for path, want := range map[string]string{
		"/surrogate/warn":   `turnstile-sur-warn \\udcff`,
		"/surrogate/stderr": `turnstile-sur-stderr \\udcff`,
		"/surrogate/log":    `turnstile-sur-log caf\\udce9.txt`,
		"/surrogate/raise":  `ValueError: turnstile-sur-raise \\udcff`,
		// bytes on sys.stdout.buffer: UTF-8 kept whole across writes,
		// an undecodable byte escaped; a logging level past the int range
		"/stdout-bytes": `turnstile-bytes-7c1 café \\xff`,
		"/log-bigint":   `turnstile-bigint-7c1`,
	} {
		wantCode := 200
		if path == "/surrogate/raise" {
			wantCode = 500
		}
		if code, _ := asgiGetT(t, s, path); code != wantCode {
			t.Errorf("GET %s = %d; want %d", path, code, wantCode)
		}
		if recs := waitLogRecords(s.Logs, 3*time.Second, func(rec map[string]any) bool {
			b, _ := json.Marshal(rec)
			return strings.Contains(string(b), want)
		}); len(recs) != 1 {
			t.Errorf("GET %s: %d log records with %s; want 1\n%s", path, len(recs), want, s.Logs())
		}
	}
}
