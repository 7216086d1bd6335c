package tests

// Issue 26: --access-log-format in gunicorn's atoms (internal/accesslog)
// and --log-config for the app's logging.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// logfmtRequests are sent as raw bytes, so that turnstile and gunicorn
// see the same request lines and fields: a path with an escaped space and
// UTF-8, a query with quotes, a repeated field, Basic auth, HTTP/1.0, HEAD,
// a chunked answer, a POST.
var logfmtRequests = []string{
	"GET /a%20b/caf%C3%A9?x=1&y=\"q\" HTTP/1.1\r\nHost: t\r\nUser-Agent: ua \"quoted\"\r\nReferer: http://r.test/\r\nX-Req: one\r\nX-Req: two\r\nAuthorization: Basic dXNlcjpwYXNz\r\nConnection: close\r\n\r\n",
	"GET /missing HTTP/1.0\r\n\r\n",
	"HEAD / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
	"GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
	"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nabc",
}

// logfmtStable are the atoms that do not depend on time or process: the
// same for the same requests under any server.
const logfmtStable = `%(h)s|%(l)s|%(u)s|%(r)s|%(m)s|%(U)s|%(q)s|%(H)s|%(s)s|%(B)s|%(b)s|%(f)s|%(a)s|%({x-req}i)s|%({X-Resp}o)s|%({content-type}o)s|%({remote_addr}e)s|%({raw_uri}e)s|%({query_string}e)s`

// logfmtStableWant is logfmtStable's line for each of logfmtRequests
// (checked against gunicorn 27.0.1 with TestLogFormat_Gunicorn).
var logfmtStableWant = []string{
	`127.0.0.1|-|user|GET /a%20b/caf%C3%A9?x=1&y=\"q\" HTTP/1.1|GET|/a b/cafÃ©|x=1&y=\"q\"|HTTP/1.1|200|12|12|http://r.test/|ua \"quoted\"|two|v2|text/plain|127.0.0.1|/a%20b/caf%C3%A9?x=1&y=\"q\"|x=1&y=\"q\"`,
	`127.0.0.1|-|-|GET /missing HTTP/1.0|GET|/missing||HTTP/1.0|404|9|9|-|-|-|-|text/plain|127.0.0.1|/missing|`,
	`127.0.0.1|-|-|HEAD / HTTP/1.1|HEAD|/||HTTP/1.1|200|0|0|-|-|-|v2|text/plain|127.0.0.1|/|`,
	`127.0.0.1|-|-|GET /stream HTTP/1.1|GET|/stream||HTTP/1.1|200|8|8|-|-|-|streamed|text/plain|127.0.0.1|/stream|`,
	`127.0.0.1|-|-|POST /p HTTP/1.1|POST|/p||HTTP/1.1|200|12|12|-|-|-|v2|text/plain|127.0.0.1|/p|`,
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// logfmtStartText starts the server as Start does but under --log-format
// text, where a format's lines are gunicorn's (Start reads the JSON
// "listening" record): on a port chosen here, ready once it accepts.
func logfmtStartText(t *testing.T, args ...string) *Server {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	s, _ := startCmd(t, Command(t, append([]string{"--log-format", "text", "--port", port}, args...)...))
	s.Addr, s.URL = addr, "http://"+addr
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.Logs(), "msg=listening") {
		if s.Wait(50*time.Millisecond) != -1 || time.Now().After(deadline) {
			t.Fatalf("server did not listen:\n%s", s.Logs())
		}
	}
	return s
}

// logfmtSend sends logfmtRequests to addr, one connection each, in order.
func logfmtSend(t *testing.T, addr string) {
	t.Helper()
	for _, req := range logfmtRequests {
		Raw(t, addr, req, 5*time.Second)
	}
}

// logfmtLines waits for n lines of logs that start with prefix.
func logfmtLines(t *testing.T, logs func() string, prefix string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var lines []string
		for _, l := range strings.Split(logs(), "\n") {
			if strings.HasPrefix(l, prefix) {
				lines = append(lines, l)
			}
		}
		if len(lines) >= n || time.Now().After(deadline) {
			if len(lines) != n {
				t.Fatalf("%d lines starting with %q; want %d:\n%s", len(lines), prefix, n, logs())
			}
			return lines
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The atoms' values for the same requests, exactly; the time and process
// atoms by their shape; turnstile's own atoms for WSGI and ASGI.
func TestLogFormat_Atoms(t *testing.T) {
	format := logfmtStable + `|%(t)s|%(p)s|%(T)s|%(D)s|%(M)s|%(L)s|%(queue_wait_us)s|%(queue_wait_ms)s|%(gil_wait_us)s|%(gil_wait_ms)s|%(worker)s|%(loop)s|%(thread)s`
	s := logfmtStartText(t, "--access-log-format", format, "logfmt_app:app")
	logfmtSend(t, s.Addr)
	lines := logfmtLines(t, s.Logs, "127.0.0.1|", len(logfmtRequests))
	// [01/Dec/2026:21:43:12 +0000]|<pid>|T|D|M|L|queue us|ms|GIL us|ms|worker|loop|thread
	rest := regexp.MustCompile(`^\|\[\d\d/[A-Z][a-z][a-z]/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]\|<(\d+)>\|(\d+)\|(\d+)\|(\d+)\|(\d+)\.(\d{6})\|\d+\|\d+\.\d{3}\|\d+\|\d+\.\d{3}\|1\|-\|\d+$`)
	for i, l := range lines {
		stable, tail, ok := strings.Cut(l, "|[")
		if !ok || stable != logfmtStableWant[i] {
			t.Errorf("request %d:\n got %s\nwant %s", i, stable, logfmtStableWant[i])
			continue
		}
		m := rest.FindStringSubmatch("|[" + tail)
		if m == nil {
			t.Errorf("request %d: time and turnstile atoms %q do not match %s", i, "|["+tail, rest)
			continue
		}
		sec, _ := strconv.Atoi(m[2])
		us, _ := strconv.Atoi(m[3])
		ms, _ := strconv.Atoi(m[4])
		if us/1000 != ms || us/1000000 != sec || m[5] != m[2] || strconv.Itoa(sec*1000000+atoiT(t, m[6])) != m[3] {
			t.Errorf("request %d: T %s, D %s, M %s, L %s.%s disagree", i, m[2], m[3], m[4], m[5], m[6])
		}
	}
	if strings.Contains(s.Logs(), `msg=access`) {
		t.Errorf("a format's line and the access record both written:\n%s", s.Logs())
	}

	// ASGI: the loop's index, no pool thread, no queue or GIL wait.
	a := logfmtStartText(t, "--access-log-format", "asgi %(s)s %(loop)s %(thread)s %(queue_wait_us)s %(gil_wait_ms)s %(worker)s", "asgi_hello:app")
	Raw(t, a.Addr, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 5*time.Second)
	if l := logfmtLines(t, a.Logs, "asgi ", 1); l[0] != "asgi 200 0 - - - 1" {
		t.Errorf("ASGI line %q; want %q", l[0], "asgi 200 0 - - - 1")
	}
}

func atoiT(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Under --log-format json the format's atoms are the access record's
// fields, numbers as numbers; --access-logformat (gunicorn's name) turns
// the access log on.
func TestLogFormat_JSON(t *testing.T) {
	s := Start(t, "--access-logformat", `%(h)s "%(r)s" %(s)s %(b)s "%(a)s" %(D)s %(queue_wait_us)s %(thread)s %({x-req}i)s %({x-resp}o)s`, "logfmt_app:app")
	Raw(t, s.Addr, logfmtRequests[0], 5*time.Second)
	recs := waitLogRecords(s.Logs, 10*time.Second, func(rec map[string]any) bool { return rec["msg"] == "access" })
	if len(recs) != 1 {
		t.Fatalf("access records %v; want 1", recs)
	}
	rec := recs[0]
	want := map[string]any{
		"remote_addr": "127.0.0.1", "request_line": `GET /a%20b/caf%C3%A9?x=1&y="q" HTTP/1.1`, "status": 200.0, "bytes": 12.0,
		"user_agent": `ua "quoted"`, "worker": 1.0,
		"request_headers": map[string]any{"x-req": "two"}, "response_headers": map[string]any{"x-resp": "v2"},
	}
	for k, v := range want {
		if fmt.Sprint(rec[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v; want %v (record %v)", k, rec[k], v, rec)
		}
	}
	for _, k := range []string{"duration_us", "queue_wait_us", "thread"} {
		if _, ok := rec[k].(float64); !ok {
			t.Errorf("%s = %#v; want a number (record %v)", k, rec[k], rec)
		}
	}
	for _, k := range []string{"remote", "target", "duration_ms"} { // the fixed record's fields
		if _, ok := rec[k]; ok {
			t.Errorf("record has %s: %v", k, rec)
		}
	}
}

// A bad format is one line and exit 2, before anything starts.
func TestLogFormat_Bad(t *testing.T) {
	for _, c := range []struct{ format, want string }{
		{"%(h)s %(x)s", `turnstile: --access-log-format "%(h)s %(x)s": unknown atom %(x)s: want one of h l u t r m U q H s B b f a T D M L p, {header}i, {header}o, {variable}e, queue_wait_us, queue_wait_ms, gil_wait_us, gil_wait_ms, worker, loop, thread`},
		{`%(h)s "%(r`, `turnstile: --access-log-format "%(h)s \"%(r": unbalanced %( at byte 7`},
		{"%(D)d", `turnstile: --access-log-format "%(D)d": %(D) is followed by 'd': want %(D)s`},
		{"%s", `turnstile: --access-log-format "%s": "%s" at byte 0: want %(NAME)s or %%`},
	} {
		compatExit(t, c.want, "--access-log-format", c.format)
	}
}

// gunicorn, when the test virtualenv has it (requirements/test.txt),
// writes the same line for the same requests and format.
func TestLogFormat_Gunicorn(t *testing.T) {
	venv := os.Getenv("TURNSTILE_VENV")
	gunicorn := filepath.Join(venv, "bin", "gunicorn")
	if _, err := os.Stat(gunicorn); venv == "" || err != nil {
		t.Skipf("gunicorn is not in the test virtualenv (%s): `make venv` installs it from requirements/test.txt; the atoms are still checked against fixed lines by TestLogFormat_Atoms", gunicorn)
	}
	binPath(t)
	addr := freeAddr(t)
	cmd := exec.Command(gunicorn, "-b", addr, "-w", "1", "--access-logfile", "-", "--access-logformat", logfmtStable,
		"--control-socket", filepath.Join(t.TempDir(), "g.ctl"), "logfmt_app:app")
	cmd.Dir = AppDir()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var glog []string
	wait := func(pred func(string) bool) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("gunicorn exited:\n%s", strings.Join(glog, "\n"))
				}
				glog = append(glog, l)
				if pred(l) {
					return
				}
			case <-timeout:
				t.Fatalf("gunicorn: no line expected:\n%s", strings.Join(glog, "\n"))
			}
		}
	}
	wait(func(l string) bool { return strings.Contains(l, "Booting worker") })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gunicorn does not listen on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	logfmtSend(t, addr)
	var got []string
	for range logfmtRequests {
		wait(func(l string) bool { return strings.HasPrefix(l, "127.0.0.1|") })
		got = append(got, glog[len(glog)-1])
	}

	s := logfmtStartText(t, "--access-log-format", logfmtStable, "logfmt_app:app")
	logfmtSend(t, s.Addr)
	ours := logfmtLines(t, s.Logs, "127.0.0.1|", len(logfmtRequests))
	for i := range got {
		if ours[i] != got[i] {
			t.Errorf("request %d:\n turnstile %s\n  gunicorn %s", i, ours[i], got[i])
		}
	}
}

const logConfigJSON = `{"version": 1, "disable_existing_loggers": false,
 "formatters": {"app": {"format": "JSONCONF %(levelname)s %(name)s: %(message)s"}},
 "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "app", "stream": "ext://sys.stderr"}},
 "loggers": {"logfmt": {"handlers": ["console"], "level": "INFO", "propagate": false}}}
`

const logConfigINI = `[loggers]
keys=root,logfmt

[handlers]
keys=console

[formatters]
keys=app

[logger_root]
level=WARNING
handlers=

[logger_logfmt]
level=INFO
handlers=console
qualname=logfmt
propagate=0

[handler_console]
class=StreamHandler
formatter=app
args=(sys.stderr,)

[formatter_app]
format=INICONF %(levelname)s %(name)s: %(message)s
`

// --log-config applies to the app's logging before the app is imported:
// the app's logger writes through the file's formatter, and each line is
// still one of turnstile's records (its msg), with its level and logger.
func TestLogConfig_Applied(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, text, want string }{
		{"log.json", logConfigJSON, "JSONCONF WARNING logfmt.app: handled /x"},
		{"log.ini", logConfigINI, "INICONF WARNING logfmt.app: handled /x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name)
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			s := Start(t, "--workers", "2", "--log-config", p, "logfmt_app:app")
			s.Get(t, "/x")
			recs := waitLogRecords(s.Logs, 10*time.Second, func(rec map[string]any) bool { return rec["logger"] == "logfmt.app" })
			if len(recs) != 1 || recs[0]["msg"] != c.want || recs[0]["level"] != "WARN" || recs[0]["source"] != "python" {
				t.Errorf("app's records %v; want one WARN record with msg %q", recs, c.want)
			}
		})
	}
}

// A --log-config the master can read is checked before anything starts
// (one line, exit 2); one that only Python can refuse fails the workers'
// start with a record that names the file.
func TestLogConfig_Bad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	broken := write("broken.json", `{"version": 1,`)
	compatExit(t, "turnstile: --log-config "+broken+": not a JSON object: unexpected end of JSON input", "--log-config", broken)
	v2 := write("v2.json", `{"version": 2}`)
	compatExit(t, "turnstile: --log-config "+v2+`: want "version": 1 (logging.config.dictConfig's schema)`, "--log-config", v2)
	ini := write("log.conf", "[loggers]\nkeys=root\n")
	compatExit(t, "turnstile: --log-config "+ini+": no [handlers] section (logging.config.fileConfig reads an .ini file with [loggers], [handlers] and [formatters]; a dictConfig file ends in .json, .yaml or .yml)", "--log-config", ini)
	missing := filepath.Join(dir, "none.yaml")
	compatExit(t, "turnstile: --log-config "+missing+": open "+missing+": no such file or directory", "--log-config", missing)

	bad := write("bad.json", `{"version": 1, "handlers": {"x": {"class": "nope.Handler"}}, "root": {"handlers": ["x"]}}`)
	cmd := Command(t, "--log-config", bad, "logfmt_app:app")
	outb, _ := cmd.CombinedOutput()
	want := "turnstile: --log-config " + bad + ": ValueError: Unable to configure handler 'x' (ValueError: Cannot resolve 'nope.Handler': No module named 'nope')"
	found := false
	for _, l := range strings.Split(string(outb), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == want {
			found = true
		}
	}
	if code := cmd.ProcessState.ExitCode(); code == 0 || !found {
		t.Errorf("bad handler: exit %d; want non-zero and a record %q:\n%s", code, want, outb)
	}
}

const logConfigYAML = `version: 1
disable_existing_loggers: false
formatters:
  app: {format: "YAMLCONF %(levelname)s %(name)s: %(message)s"}
handlers:
  console: {class: logging.StreamHandler, formatter: app, stream: "ext://sys.stderr"}
loggers:
  logfmt: {handlers: [console], level: INFO, propagate: false}
`

// A .yaml --log-config is applied when the app's Python has PyYAML, and
// fails the workers' start with a line that says so when it has not.
func TestLogConfig_YAML(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.yaml")
	if err := os.WriteFile(p, []byte(logConfigYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml, _ := filepath.Glob(filepath.Join(os.Getenv("TURNSTILE_VENV"), "lib", "python*", "site-packages", "yaml"))
	if len(yaml) == 0 {
		cmd := Command(t, "--log-config", p, "logfmt_app:app")
		outb, _ := cmd.CombinedOutput()
		want := "turnstile: --log-config " + p + ": a YAML file needs PyYAML, which the app's Python cannot import (pip install PyYAML, or write the dictionary as .json)"
		if code := cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(string(outb), strconv.Quote(want)) {
			t.Errorf("no PyYAML: exit %d; want non-zero and %q:\n%s", code, want, outb)
		}
		return
	}
	s := Start(t, "--log-config", p, "logfmt_app:app")
	s.Get(t, "/x")
	recs := waitLogRecords(s.Logs, 10*time.Second, func(rec map[string]any) bool { return rec["logger"] == "logfmt.app" })
	if len(recs) != 1 || recs[0]["msg"] != "YAMLCONF WARNING logfmt.app: handled /x" {
		t.Errorf("app's records %v; want one with msg %q", recs, "YAMLCONF WARNING logfmt.app: handled /x")
	}
}
