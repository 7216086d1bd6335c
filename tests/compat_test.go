package tests

// What gunicorn and uvicorn users type first (issue 28): their flag names
// as aliases, --bind, --header, --server-header, --date-header,
// --env-file, --chdir, `turnstile version`, one line for each flag
// turnstile refuses, and hints for an unknown flag and an app spec that is
// not MODULE:ATTR. Through the real binary; helpers in config_test.go.

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// compatExit runs the binary and wants exit 2 with exactly one line on
// stderr, both when serving and under check.
func compatExit(t *testing.T, want string, args ...string) {
	t.Helper()
	for _, sub := range [][]string{nil, {"check"}} {
		a := append(append(append([]string{}, sub...), args...), "conf_app:app")
		_, stderr, code := cfRun(t, cfEnv(), a...)
		if code != 2 || strings.TrimRight(stderr, "\n") != want {
			t.Errorf("%v: exit %d (want 2), stderr:\n%s\nwant the one line:\n%s", a, code, stderr, want)
		}
	}
}

// Each alias sets its turnstile setting, labelled with the name used, from
// a flag, a variable and a file key; the help lists it.
func TestCompat_Aliases(t *testing.T) {
	cases := []struct {
		args          []string
		setting, want string
	}{
		{[]string{"-w", "3"}, "workers", "3"},
		{[]string{"-t", "30"}, "timeout", "30s"},
		{[]string{"--log-level", "DEBUG"}, "log-level", "DEBUG"}, // gunicorn's case: taken in any case
		{[]string{"--keep-alive", "2"}, "timeout-keep-alive", "2s"},
		{[]string{"--limit-max-requests", "7"}, "max-requests", "7"},
		{[]string{"--timeout-graceful-shutdown", "9"}, "graceful-timeout", "9s"},
		{[]string{"--no-server-header"}, "server-header", "false"},
		{[]string{"--no-date-header"}, "date-header", "false"},
		{[]string{"--no-proxy-headers"}, "proxy-headers", "false"},
	}
	for _, c := range cases {
		r, stderr, code := cfCheck(t, cfEnv(), append(c.args, "conf_app:app")...)
		origin := c.args[0]
		switch origin {
		case "-w":
			origin = "--workers"
		case "-t":
			origin = "--timeout"
		}
		if got := r.get(t, c.setting); code != 0 || got.Value != c.want || got.Source != "flag" || got.Origin != origin {
			t.Errorf("%v: exit %d, %+v, want %s = %s from %s\n%s", c.args, code, got, c.setting, c.want, origin, stderr)
		}
	}
	r, stderr, code := cfCheck(t, cfEnv("TURNSTILE_LIMIT_MAX_REQUESTS=5"), "--config", cfWriteFile(t, "keep-alive = 3\ntimeout-graceful-shutdown = \"4s\"\n"), "conf_app:app")
	if code != 0 || r.get(t, "max-requests").Value != "5" || r.get(t, "max-requests").Origin != "TURNSTILE_LIMIT_MAX_REQUESTS" ||
		r.get(t, "timeout-keep-alive").Value != "3s" || r.get(t, "graceful-timeout").Value != "4s" {
		t.Errorf("aliases from the environment and the file: exit %d, %+v\n%s", code, r.Settings, stderr)
	}
	// --ssl-ca-certs and --ca-certs are --ssl-ca: its check, under the name used.
	for _, name := range []string{"--ssl-ca-certs", "--ca-certs"} {
		compatExit(t, "turnstile: "+name+", --ssl-keyfile-password and --ssl-client-verify need --ssl-certfile and --ssl-keyfile", name, "/ca.pem")
	}
	// -c is --config.
	if r, _, code := cfCheck(t, cfEnv(), "-c", cfWriteFile(t, "workers = 2\n"), "conf_app:app"); code != 0 || r.get(t, "workers").Value != "2" {
		t.Errorf("-c FILE: exit %d, %+v", code, r.get(t, "workers"))
	}
	out, _, code := cfRun(t, cfEnv(), "--help")
	for _, want := range []string{"-b, --bind", "-w, --workers", "-c, --config", "--keep-alive seconds", "alias of --timeout-keep-alive (gunicorn's name",
		"alias of --max-requests (uvicorn's name)", "alias of --graceful-timeout (uvicorn's name)", "alias of --ssl-ca (uvicorn's name)",
		"alias of --ssl-certfile (gunicorn's name)", "alias of --ssl-keyfile (gunicorn's name)", "-t, --timeout",
		"--no-server-header", "--no-date-header", "--header stringArray", "--env-file", "--chdir"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--help (exit %d) lacks %q", code, want)
		}
	}
	for _, hidden := range []string{"--preload", "--daemon", "--worker-class", "--access-logfile"} {
		if strings.Contains(out, hidden) {
			t.Errorf("--help lists the refused %s", hidden)
		}
	}
	// check's text report names the alias a value came from.
	out, _, _ = cfRun(t, cfEnv(), "check", "--keep-alive", "2", "conf_app:app")
	if !regexpMatch(`(?m)^timeout-keep-alive\s+2s\s+flag \(--keep-alive\)$`, out) {
		t.Errorf("check does not show --keep-alive:\n%s", out)
	}
}

// The flags turnstile has no use for: one line saying what it does
// instead, exit 2, before anything starts.
func TestCompat_Refused(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--preload"}, "turnstile: --preload: not needed: each worker is its own process that imports the app itself (re-executed, its own CPython, no fork after import), so there is nothing to share copy-on-write; an idle hello worker is 27 MiB RSS, 18 MiB of it file pages (binary, libpython, stdlib) the workers already share"},
		{[]string{"-D"}, `turnstile: --daemon: not supported: turnstile stays in the foreground; run it under systemd (Type=notify, see the README, "Deployment"), a container or supervisord`},
		{[]string{"--daemon"}, `turnstile: --daemon: not supported: turnstile stays in the foreground; run it under systemd (Type=notify, see the README, "Deployment"), a container or supervisord`},
		{[]string{"-k", "gevent"}, "turnstile: --worker-class: not needed: turnstile tells WSGI from ASGI itself (--interface), runs WSGI views on --blocking-threads Python threads and an ASGI app on one event loop per worker (--loop uvloop, as uvicorn's workers); there are no gevent or eventlet workers"},
		{[]string{"--worker-class", "uvicorn.workers.UvicornWorker"}, "turnstile: --worker-class: not needed: turnstile tells WSGI from ASGI itself (--interface), runs WSGI views on --blocking-threads Python threads and an ASGI app on one event loop per worker (--loop uvloop, as uvicorn's workers); there are no gevent or eventlet workers"},
		{[]string{"--access-logfile", "/var/log/access.log"}, "turnstile: --access-logfile: a file is not supported: --access-logfile - (or --access-log) logs each request to stderr with the other records (one stream, not gunicorn's stdout) for journald or the container to collect"},
		// Issue 28: what turnstile does instead of each. (Issue 26 made
		// --access-logformat and --log-config settings: logfmt_test.go.)
		{[]string{"--ssl-cert-reqs", "2"}, "turnstile: --ssl-cert-reqs: use --ssl-client-verify none, optional or required (uvicorn's 0, 1 and 2)"},
		{[]string{"--env", "A=1"}, "turnstile: --env: not supported: set the variable in the environment, or put KEY=VALUE lines in a file for --env-file"},
		{[]string{"-e", "A=1"}, "turnstile: --env: not supported: set the variable in the environment, or put KEY=VALUE lines in a file for --env-file"},
		{[]string{"--ws", "websockets"}, "turnstile: --ws: not needed: turnstile's WebSocket is built in (Go frames it; see --ws-max-size, --ws-ping-interval, --ws-per-message-deflate)"},
		{[]string{"--fd", "3"}, `turnstile: --fd: not supported: turnstile takes a socket from systemd socket activation (LISTEN_FDS, see the README, "Deployment") or binds --uds / --host and --port itself`},
		{[]string{"--no-access-log"}, "turnstile: --no-access-log: not needed: the access log is off by default (--access-log=false)"},
		{[]string{"--reload-dir", "src"}, "turnstile: --reload-dir: not supported: --reload watches .py files under --app-dir; add other files with --reload-include GLOB"},
		{[]string{"--error-logfile", "/var/log/x.log"}, `turnstile: --error-logfile: turnstile logs to stderr only (gunicorn's default, "-"): redirect it, or let journald or the container collect it`},
		{[]string{"--log-file", "/var/log/x.log"}, `turnstile: --log-file: turnstile logs to stderr only (gunicorn's default, "-"): redirect it, or let journald or the container collect it`},
		{[]string{"-b", "127.0.0.1:8001", "--bind", "unix:/tmp/t.sock"}, "turnstile: --bind given 2 times: turnstile serves one address (one socket the workers share); put a proxy in front for more, or run a second turnstile"},
		{[]string{"-b", "127.0.0.1:8001"}, "turnstile: --bind and --host: both set the address; give one"}, // the harness gives --host and --port
		{[]string{"-c", "gunicorn.conf.py"}, `turnstile: --config gunicorn.conf.py: turnstile's file is TOML with its flag names (workers = 4), not gunicorn's Python: see the README, "Coming from gunicorn / uvicorn"`},
		{[]string{"--header", "X-Frame-Options"}, `turnstile: --header "X-Frame-Options": want NAME:VALUE, like X-Frame-Options:DENY`},
		{[]string{"--header", "Date: now"}, `turnstile: --header "Date: now": Date is turnstile's to send (see --date-header, --server-header)`},
		{[]string{"--chdir", "/no/such/dir"}, `turnstile: --chdir "/no/such/dir": no such file or directory`},
		{[]string{"--env-file", "/no/such/.env"}, `turnstile: --env-file "/no/such/.env": no such file or directory`},
	}
	for _, c := range cases {
		compatExit(t, c.want, c.args...)
	}
	// --error-logfile - and --log-file - are stderr: what turnstile does.
	for _, f := range []string{"--error-logfile", "--log-file"} {
		if _, stderr, code := cfRun(t, cfEnv(), "check", f, "-", "conf_app:app"); code != 0 {
			t.Errorf("%s -: exit %d:\n%s", f, code, stderr)
		}
	}
	// --access-logfile - (gunicorn's stdout) turns the access log on; its
	// records go to stderr with the others.
	if r, stderr, code := cfCheck(t, cfEnv(), "--access-logfile", "-", "conf_app:app"); code != 0 || r.get(t, "access-log").Value != "true" {
		t.Errorf("--access-logfile -: exit %d, %+v\n%s", code, r.get(t, "access-log"), stderr)
	}
	// An unknown flag is never pointed at a refused one (issue 28:
	// --access-logformat was pointed at the refused --access-logfile).
	compatExit(t, "turnstile: unknown flag: --worker-clas", "--worker-clas", "x")
}

// Issue 28: a bad number is one line naming where it came from and what
// it wants, never strconv's text, from a flag, a variable and the file.
func TestCompat_BadNumber(t *testing.T) {
	compatExit(t, `turnstile: --workers "abc": want an integer`, "--workers", "abc")
	compatExit(t, `turnstile: --workers "abc": want an integer`, "-w", "abc")
	compatExit(t, `turnstile: --http2-max-frame-size "-1": want an integer, 0 or more`, "--http2-max-frame-size", "-1")
	compatExit(t, `turnstile: --switch-interval "often": want a number`, "--switch-interval", "often")
	_, stderr, code := cfRun(t, cfEnv("TURNSTILE_WORKERS=abc"), "check", "conf_app:app")
	if code != 2 || strings.TrimSpace(stderr) != `turnstile: TURNSTILE_WORKERS="abc": want an integer` {
		t.Errorf("TURNSTILE_WORKERS=abc: exit %d:\n%s", code, stderr)
	}
	p := cfWriteFile(t, "workers = \"abc\"\n")
	_, stderr, code = cfRun(t, cfEnv(), "check", "--config", p, "conf_app:app")
	if code != 2 || strings.TrimSpace(stderr) != "turnstile: "+p+`: workers = "abc": want an integer` {
		t.Errorf("workers = \"abc\": exit %d:\n%s", code, stderr)
	}
}

// Issue 28: 0 of a timeout never silently means its default. It means
// what the help says (check shows it), or it is refused with one line.
func TestCompat_ZeroTimeouts(t *testing.T) {
	for _, c := range []struct{ flag, setting, text string }{
		{"--graceful-timeout", "graceful-timeout", "0s (none: stop at once)"},
		{"--timeout-graceful-shutdown", "graceful-timeout", "0s (none: stop at once)"},
		{"--queue-timeout", "queue-timeout", "0s (no limit)"},
		{"--startup-timeout", "startup-timeout", "0s (no limit)"},
		{"--timeout-keep-alive-drain", "timeout-keep-alive-drain", "0s (close at once)"},
		{"--keep-alive", "timeout-keep-alive", "0s (no keep-alive: each HTTP/1.1 response closes its connection)"},
	} {
		r, stderr, code := cfCheck(t, cfEnv(), c.flag, "0", "conf_app:app")
		if code != 0 || r.get(t, c.setting).Value != "0s" {
			t.Errorf("%s 0: exit %d, %+v\n%s", c.flag, code, r.get(t, c.setting), stderr)
		}
		out, _, _ := cfRun(t, cfEnv(), "check", c.flag, "0", "conf_app:app")
		if !regexpMatch(`(?m)^`+c.setting+`\s+`+regexp.QuoteMeta(c.text)+`\s+flag`, out) {
			t.Errorf("%s 0: check's text lacks %q:\n%s", c.flag, c.text, out)
		}
	}
	for _, f := range []string{"--timeout-request-header", "--timeout-body", "--timeout-write", "--http2-keep-alive-timeout"} {
		compatExit(t, "turnstile: "+f+" 0: want more than 0 (it has no off: a client could hold a connection for ever)", f, "0")
	}
	compatExit(t, "turnstile: --limit-request-line 0: want at least 1", "--limit-request-line", "0")
	// A server under --graceful-timeout 0 serves (and stops at once).
	s := Start(t, "--graceful-timeout", "0", "hello:app")
	if code, _ := s.Get(t, "/"); code != 200 {
		t.Fatalf("GET /: %d", code)
	}
	// gunicorn's --keep-alive 0: every response closes its connection.
	ka := Start(t, "--keep-alive", "0", "hello:app")
	conn, err := net.Dial("tcp", ka.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	out, _ := io.ReadAll(conn) // EOF: the server closed after the response
	if !strings.HasPrefix(string(out), "HTTP/1.1 200") || !strings.Contains(string(out), "Connection: close\r\n") {
		t.Errorf("--keep-alive 0: %q; want 200 with Connection: close, then EOF", out)
	}
}

// Issue 28: a repeatable setting takes one TOML string as well as an
// array (bind = "127.0.0.1:8000").
func TestCompat_TOMLListScalar(t *testing.T) {
	p := cfWriteFile(t, "bind = \"127.0.0.1:8123\"\nheader = \"X-Frame-Options:DENY\"\n")
	cmd := compatCommand(t, AppDir(), "check", "--format", "json", "--config", p, "hello:app")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), `"address": "127.0.0.1:8123"`) || !regexpMatch(`"name": "header",\s+"value": \[\s+"X-Frame-Options:DENY"\s+\]`, string(out)) {
		t.Errorf("bind and header as TOML strings: %v\n%s", err, out)
	}
}

// A bind without --host/--port (the harness gives both), a malformed one.
func compatCommand(t *testing.T, dir string, args ...string) *exec.Cmd {
	base := []string{"--admin-bind", "127.0.0.1:0", "--log-format", "json"}
	if v := os.Getenv("TURNSTILE_VENV"); v != "" {
		base = append(base, "--venv", v)
	}
	cmd := exec.Command(binPath(t), append(base, args...)...)
	cmd.Dir = dir
	cmd.Env = cfEnv()
	return cmd
}

func TestCompat_Bind(t *testing.T) {
	s := cfStartCmd(t, compatCommand(t, AppDir(), "-b", "127.0.0.1:0", "hello:app"))
	if code, body := s.Get(t, "/"); code != 200 || body != "Hello, World!\n" {
		t.Errorf("-b 127.0.0.1:0: %d %q", code, body)
	}
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Errorf("-b 127.0.0.1:0 listens on %q", s.Addr)
	}
	sock := filepath.Join(t.TempDir(), "t.sock")
	cmd := compatCommand(t, AppDir(), "--bind", "unix:"+sock, "hello:app")
	u, _ := startCmd(t, cmd)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("--bind unix:%s: no socket:\n%s", sock, u.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	if got, _ := ReadAll(c, 10*time.Second); !strings.Contains(got, "Hello, World!") {
		t.Errorf("over --bind unix: %q", got)
	}
	c.Close()
	for _, c := range []struct{ bind, want string }{
		{":8000", `turnstile: --bind ":8000": give the host (0.0.0.0 for every IPv4 interface)`},
		{"::1", `turnstile: --bind "::1": want HOST:PORT, HOST, [IPV6]:PORT or unix:PATH`},
		{"localhost:http", `turnstile: --bind "localhost:http": want a port 0..65535`},
	} {
		cmd := compatCommand(t, AppDir(), "check", "-b", c.bind, "hello:app")
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || strings.TrimSpace(string(out)) != c.want {
			t.Errorf("-b %s: exit %d:\n%s\nwant:\n%s", c.bind, cmd.ProcessState.ExitCode(), out, c.want)
		}
	}
	// A bare host takes gunicorn's port, 8000; [::1] an IPv6 host. check
	// shows the address served.
	for _, c := range []struct{ bind, addr string }{{"localhost", "localhost:8000"}, {"[::1]:9", "[::1]:9"}, {"0.0.0.0:8080", "0.0.0.0:8080"}, {"unix:/run/x.sock", "unix:/run/x.sock"}} {
		cmd := compatCommand(t, AppDir(), "check", "--format", "json", "-b", c.bind, "hello:app")
		out, err := cmd.Output()
		if err != nil || !regexpMatch(`"name": "bind",\s+"value": \[\s+"`+regexp.QuoteMeta(c.bind)+`"\s+\],\s+"source": "flag"`, string(out)) ||
			!strings.Contains(string(out), `"address": "`+c.addr+`"`) {
			t.Errorf("-b %s: %v\n%s", c.bind, err, out)
		}
	}
}

// --header, --server-header, --no-date-header on the wire; the defaults:
// Date, no Server.
func TestCompat_Headers(t *testing.T) {
	get := func(s *Server) string {
		raw, _ := Raw(t, s.Addr, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 10*time.Second)
		head, _, _ := strings.Cut(raw, "\r\n\r\n")
		return head + "\r\n"
	}
	head := get(Start(t, "hello:app"))
	if !strings.Contains(head, "\r\nDate: ") || strings.Contains(head, "\r\nServer:") {
		t.Errorf("defaults: want Date and no Server:\n%s", head)
	}
	head = get(Start(t, "--header", "X-Frame-Options:DENY", "--header", "X-Two: two words", "--server-header", "--no-date-header", "hello:app"))
	for _, want := range []string{"\r\nX-Frame-Options: DENY\r\n", "\r\nX-Two: two words\r\n", "\r\nServer: turnstile\r\n"} {
		if !strings.Contains(head, want) {
			t.Errorf("lacks %q:\n%s", want, head)
		}
	}
	if strings.Contains(head, "\r\nDate:") {
		t.Errorf("--no-date-header sent Date:\n%s", head)
	}
	// HTTP/2 (h2c) the same.
	s := Start(t, "--header", "X-Frame-Options:DENY", "--server-header", "--no-date-header", "hello:app")
	code, h, _ := do(t, h2cConn(t, s.Addr), "GET", s.URL+"/", nil)
	if code != 200 || h.Get("X-Frame-Options") != "DENY" || h.Get("Server") != "turnstile" || h.Values("Date") != nil {
		t.Errorf("HTTP/2: %d %v", code, h)
	}
}

// --chdir is a real chdir before everything (the app's os.getcwd(), the
// default --app-dir, a relative --env-file); --env-file's variables reach
// os.environ, and a variable already set wins, as in uvicorn.
func TestCompat_ChdirEnvFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("compat_probe.py", `import json, os

def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps({"cwd": os.getcwd(), "greeting": os.environ.get("GREETING"),
                        "quoted": os.environ.get("QUOTED"), "kept": os.environ.get("KEPT")}).encode()]
`)
	write("app.env", "# settings\nGREETING=hello\nexport QUOTED=\"two\\nlines\" # comment\nKEPT=from-file\n")
	// A relative --chdir: the workers, started with the same arguments,
	// must not change directory again.
	cmd := compatCommand(t, filepath.Dir(dir), "--host", "127.0.0.1", "--port", "0", "--workers", "2", "--chdir", filepath.Base(dir), "--env-file", "app.env", "compat_probe:app")
	cmd.Env = append(cmd.Env, "KEPT=from-env")
	s := cfStartCmd(t, cmd)
	m := cfApp(t, s)
	real, _ := filepath.EvalSymlinks(dir)
	if m["cwd"] != real && m["cwd"] != dir {
		t.Errorf("cwd %v, want %s", m["cwd"], dir)
	}
	if m["greeting"] != "hello" || m["quoted"] != "two\nlines" || m["kept"] != "from-env" {
		t.Errorf("environment from --env-file: %v", m)
	}
	write("bad.env", "GREETING=hello\nnot a line\n")
	cmd = compatCommand(t, "/", "check", "--chdir", dir, "--env-file", "bad.env", "compat_probe:app")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || strings.TrimSpace(string(out)) != "turnstile: --env-file bad.env: line 2: want KEY=VALUE" {
		t.Errorf("bad env file: exit %d:\n%s", cmd.ProcessState.ExitCode(), out)
	}
}

// An unknown flag gets the nearest name, like an unknown TURNSTILE_*
// variable; an app given as a file or without its attribute gets a hint.
func TestCompat_Hints(t *testing.T) {
	compatExit(t, "turnstile: unknown flag: --wokers (did you mean --workers?)", "--wokers", "2")
	compatExit(t, "turnstile: unknown flag: --timeout-keepalive (did you mean --timeout-keep-alive?)", "--timeout-keepalive", "5")
	compatExit(t, "turnstile: unknown flag: --nothing-like-it", "--nothing-like-it")
	for _, c := range []struct{ app, want string }{
		{"app.py:app", `turnstile: app "app.py:app": MODULE is a module name, not a file: give app:app`},
		{"src/app.py:app", `turnstile: app "src/app.py:app": MODULE is a module name, not a file: give --app-dir src app:app`},
		{"app", `turnstile: app "app" is not MODULE:ATTR: turnstile does not default the attribute (gunicorn would take app:application; uvicorn, like turnstile, wants it): give app:application or app:app`},
		{"app:", `turnstile: app "app:" is not MODULE:ATTR`},
	} {
		for _, sub := range [][]string{nil, {"check"}} {
			_, stderr, code := cfRun(t, cfEnv(), append(sub, c.app)...)
			if code != 2 || strings.TrimRight(stderr, "\n") != c.want {
				t.Errorf("%v %s: exit %d, stderr:\n%s\nwant:\n%s", sub, c.app, code, stderr, c.want)
			}
		}
	}
}

// `turnstile version` is --version.
func TestCompat_Version(t *testing.T) {
	word, _, code1 := cfRun(t, cfEnv(), "version")
	flag, _, code2 := cfRun(t, cfEnv(), "--version")
	if code1 != 0 || code2 != 0 || word != flag || !strings.HasPrefix(word, "turnstile version ") || !strings.Contains(word, "CPython 3.") {
		t.Errorf("version: %d %q; --version: %d %q", code1, word, code2, flag)
	}
}

// Issue 28: --ssl-ca (uvicorn's --ssl-ca-certs) without
// --ssl-client-verify serves, as uvicorn does with cert_reqs none, and
// the master warns once that no client certificate is asked for.
func TestCompat_SSLCAWithoutVerify(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "--workers", "2", "--ssl-ca-certs", p.CAFile, "hello:app")...)
	const warn = "client certificates are not requested until --ssl-client-verify optional or required"
	if n := strings.Count(s.Logs(), warn); n != 1 {
		t.Errorf("the warning is logged %d times; want once:\n%s", n, s.Logs())
	}
}
