package tests

// Configuration (issue 9): every flag also from TURNSTILE_* variables and
// a TOML file (--config, TURNSTILE_CONFIG), flags > env > file > default;
// `turnstile check`. App: testapps/conf_app.py (it reports SCRIPT_NAME,
// i.e. --root-path, and its ids).

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cfEnv is the test's environment without any TURNSTILE_* variable (the
// harness's TURNSTILE_BIN and TURNSTILE_VENV would be settings or
// errors), plus extra.
func cfEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TURNSTILE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// cfRun runs the binary (Command's flags, then args) with env and returns
// stdout, stderr and the exit status.
func cfRun(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := Command(t, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit within 60s:\n%s", args, stderr.String())
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

type cfSetting struct {
	Name   string `json:"name"`
	Value  any    `json:"value"`
	Source string `json:"source"`
	Origin string `json:"origin"`
}

type cfReport struct {
	App        string      `json:"app"`
	Interface  *string     `json:"interface"`
	ConfigFile string      `json:"config_file"`
	Settings   []cfSetting `json:"settings"`
	Error      string      `json:"error"`
}

func (r cfReport) get(t *testing.T, name string) cfSetting {
	t.Helper()
	for _, s := range r.Settings {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no setting %q in the report", name)
	return cfSetting{}
}

// cfCheck runs `turnstile check --format json` and parses its report.
func cfCheck(t *testing.T, env []string, args ...string) (cfReport, string, int) {
	t.Helper()
	out, errOut, code := cfRun(t, env, append([]string{"check", "--format", "json"}, args...)...)
	var r cfReport
	if code != 2 {
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("check output is not JSON (%v), exit %d:\n%s\nstderr:\n%s", err, code, out, errOut)
		}
	}
	return r, errOut, code
}

// cfWriteFile writes a TOML file into a temp dir and returns its path.
func cfWriteFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "turnstile.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// cfStartCmd starts cmd (a turnstile, possibly behind a wrapper) and waits
// for its "listening" record, as Start does for the harness's command.
func cfStartCmd(t *testing.T, cmd *exec.Cmd) *Server {
	t.Helper()
	s, listening := startCmd(t, cmd)
	WaitListening(t, s, listening, 60*time.Second)
	return s
}

// cfStart serves with env and args (Command's flags first).
func cfStart(t *testing.T, env []string, args ...string) *Server {
	t.Helper()
	cmd := Command(t, args...)
	cmd.Env = env
	return cfStartCmd(t, cmd)
}

// cfApp GETs conf_app's report.
func cfApp(t *testing.T, s *Server) map[string]any {
	t.Helper()
	code, body := s.Get(t, "/")
	if code != 200 {
		t.Fatalf("GET /: %d %s", code, body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("app answer %q: %v", body, err)
	}
	return m
}

// Flags beat the environment, which beats the file, which beats the
// defaults: shown by check's report and by what a served app sees.
func TestConfig_Precedence(t *testing.T) {
	file := cfWriteFile(t, `
# turnstile settings
root-path = "/file"
max-requests = 100
graceful-timeout = "9s"
reload-include = ["*.txt", "*.cfg"]
workers = 2
`)
	env := cfEnv("TURNSTILE_ROOT_PATH=/env", "TURNSTILE_MAX_REQUESTS=200")
	r, stderr, code := cfCheck(t, env, "--config", file, "--root-path", "/flag", "conf_app:app")
	if code != 0 {
		t.Fatalf("check exited %d:\n%s", code, stderr)
	}
	if r.Interface == nil || *r.Interface != "wsgi" || r.App != "conf_app:app" || r.ConfigFile != file {
		t.Fatalf("report head: app %q interface %v file %q", r.App, r.Interface, r.ConfigFile)
	}
	for _, want := range []cfSetting{
		{Name: "root-path", Value: "/flag", Source: "flag", Origin: "--root-path"},
		{Name: "max-requests", Value: "200", Source: "env", Origin: "TURNSTILE_MAX_REQUESTS"},
		{Name: "graceful-timeout", Value: "9s", Source: "file", Origin: file + ": graceful-timeout"},
		{Name: "workers", Value: "2", Source: "file", Origin: file + ": workers"},
		{Name: "backlog", Value: "2048", Source: "default"},
		{Name: "port", Value: "0", Source: "flag", Origin: "--port"},
	} {
		got := r.get(t, want.Name)
		if got.Value != want.Value || got.Source != want.Source || got.Origin != want.Origin {
			t.Errorf("%s: got %+v, want %+v", want.Name, got, want)
		}
	}
	if got := r.get(t, "reload-include"); got.Source != "file" || strings.Join(toStrings(got.Value), "|") != "*.txt|*.cfg" {
		t.Errorf("reload-include: got %+v", got)
	}

	// The text report says the same.
	out, _, code := cfRun(t, env, "check", "--config", file, "conf_app:app")
	if code != 0 || !regexpMatch(`(?m)^interface\s+wsgi$`, out) || !regexpMatch(`(?m)^max-requests\s+200\s+env \(TURNSTILE_MAX_REQUESTS\)$`, out) ||
		!regexpMatch(`(?m)^backlog\s+2048\s+default$`, out) {
		t.Errorf("text report (exit %d):\n%s", code, out)
	}

	// Served: the app sees each source's value, in both workers.
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{env, []string{"--root-path", "/flag"}, "/flag"},
		{env, nil, "/env"},
		{cfEnv(), nil, "/file"},
	} {
		s := cfStart(t, c.env, append(append([]string{"--config", file}, c.args...), "conf_app:app")...)
		pids := map[float64]bool{}
		for i := 0; i < 40 && len(pids) < 2; i++ {
			m := cfApp(t, s)
			if m["script_name"] != c.want {
				t.Errorf("served SCRIPT_NAME %v, want %s", m["script_name"], c.want)
			}
			pids[m["pid"].(float64)] = true
		}
		if n := supCount(s.Logs(), "worker ready"); n != 2 {
			t.Errorf("%d workers ready, want 2 (workers = 2 from the file)", n)
		}
		if s.Stop() != 0 {
			t.Errorf("exit status %d", s.exitCode)
		}
	}

	// TURNSTILE_CONFIG names the file when --config is not given.
	r, stderr, code = cfCheck(t, cfEnv("TURNSTILE_CONFIG="+file), "conf_app:app")
	if code != 0 || r.get(t, "root-path").Value != "/file" || r.ConfigFile != file {
		t.Errorf("TURNSTILE_CONFIG: exit %d, root-path %+v, file %q\n%s", code, r.get(t, "root-path"), r.ConfigFile, stderr)
	}
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, e := range l {
			s, _ := e.(string)
			out = append(out, s)
		}
	}
	return out
}

// Repeatable flags from the environment: comma-separated, CSV quoting.
func TestConfig_ListFromEnv(t *testing.T) {
	r, stderr, code := cfCheck(t, cfEnv(`TURNSTILE_RELOAD_INCLUDE=*.txt,"conf/a,b.cfg"`), "conf_app:app")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	got := r.get(t, "reload-include")
	if strings.Join(toStrings(got.Value), "|") != "*.txt|conf/a,b.cfg" || got.Source != "env" {
		t.Fatalf("reload-include: %+v", got)
	}
	// An alias (--threads) from the file sets its flag.
	file := cfWriteFile(t, "threads = 7\n")
	r, stderr, code = cfCheck(t, cfEnv(), "--config", file, "conf_app:app")
	if got := r.get(t, "blocking-threads"); code != 0 || got.Value != "7" || got.Source != "file" {
		t.Fatalf("threads = 7: exit %d, %+v\n%s", code, got, stderr)
	}
}

// A bad value from each source: one line naming the source, exit 2,
// every bad value reported at once; the server never starts.
func TestConfig_BadValues(t *testing.T) {
	file := cfWriteFile(t, "workers = -1\nlog-level = \"loud\"\nbacklog = \"big\"\nhost = [\"a\", \"b\"]\n")
	cases := []struct {
		name  string
		env   []string
		args  []string
		lines []string
	}{
		{"flag", cfEnv(), []string{"--workers=-1"}, []string{"turnstile: --workers -1: want at least 1"}},
		{"flag-parse", cfEnv(), []string{"--workers", "four"}, []string{`turnstile: --workers "four": want an integer`}},
		{"env", cfEnv("TURNSTILE_WORKERS=-1"), nil, []string{"turnstile: TURNSTILE_WORKERS -1: want at least 1"}},
		{"env-parse", cfEnv("TURNSTILE_WORKERS=four", "TURNSTILE_GRACEFUL_TIMEOUT=soon", "TURNSTILE_ACCESS_LOG=maybe"), nil, []string{
			`turnstile: TURNSTILE_WORKERS="four": want an integer`,
			`turnstile: TURNSTILE_GRACEFUL_TIMEOUT="soon": want seconds or a duration like 30s`,
			`turnstile: TURNSTILE_ACCESS_LOG="maybe": want true or false`,
		}},
		{"file", cfEnv(), []string{"--config", file}, []string{
			"turnstile: " + file + `: backlog = "big": want an integer`,
			"turnstile: " + file + `: host: want one value, not an array`, // a repeatable setting takes a string too (issue 28)
		}},
		// NaN, the infinities and more than a Duration holds wrapped to
		// about -292 years ("no limit" for --queue-timeout) before.
		{"seconds-nan", cfEnv(), []string{"--queue-timeout=NaN"}, []string{`turnstile: --queue-timeout "NaN": want seconds or a duration like 30s`}},
		{"seconds-huge", cfEnv("TURNSTILE_GRACEFUL_TIMEOUT=1e100", "TURNSTILE_QUEUE_TIMEOUT=inf"), nil, []string{
			`turnstile: TURNSTILE_GRACEFUL_TIMEOUT="1e100": want seconds or a duration like 30s`,
			`turnstile: TURNSTILE_QUEUE_TIMEOUT="inf": want seconds or a duration like 30s`,
		}},
		// NaN fails every range comparison and was accepted; CPython keeps
		// whole microseconds, so 1e-9 became 0.
		{"switch-interval", cfEnv("TURNSTILE_SWITCH_INTERVAL=NaN"), nil, []string{
			"turnstile: TURNSTILE_SWITCH_INTERVAL NaN: want seconds in [0.000001, 10], or 0 for CPython's default (0.005)"}},
		{"switch-interval-tiny", cfEnv(), []string{"--switch-interval=1e-9"}, []string{
			"turnstile: --switch-interval 1e-09: want seconds in [0.000001, 10], or 0 for CPython's default (0.005)"}},
		{"umask", cfEnv("TURNSTILE_UMASK=999"), nil, []string{`turnstile: TURNSTILE_UMASK "999": want an octal mask like 0o22 or 027 (at most 0777)`}},
		{"user", cfEnv(), []string{"--user", "no-such-user-here"}, []string{`turnstile: --user "no-such-user-here": no such user`}},
		{"request-buffer", cfEnv("TURNSTILE_REQUEST_BUFFER_DISK=-1"), []string{"--request-buffer", "100000000", "--request-buffer-dir", "/no/such/dir"}, []string{
			"turnstile: --request-buffer 100000000: want bytes, 0..67108864 (64 MiB; a larger body spools to --request-buffer-dir)",
			"turnstile: TURNSTILE_REQUEST_BUFFER_DISK -1: must not be negative",
			`turnstile: --request-buffer-dir "/no/such/dir": want an existing directory`,
		}},
		// A directory that exists but takes no file: every spooled upload
		// would have been a 503 (a fresh review).
		{"request-buffer-dir-unusable", cfEnv(), []string{"--request-buffer-dir", "/proc"}, []string{
			`turnstile: --request-buffer-dir "/proc": cannot create a file there (spool files for request bodies)`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, sub := range [][]string{{"check"}, nil} {
				args := append(append(append([]string{}, sub...), c.args...), "conf_app:app")
				_, stderr, code := cfRun(t, c.env, args...)
				if code != 2 {
					t.Errorf("%v: exit %d, want 2:\n%s", args, code, stderr)
				}
				for _, want := range c.lines {
					if !strings.Contains(stderr, want) {
						t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
					}
				}
				if strings.Contains(stderr, "listening") || strings.Contains(stderr, "turnstile starting") {
					t.Errorf("%v: the server started:\n%s", args, stderr)
				}
			}
		})
	}
	// The file's values that parse are validated too, each naming its key.
	_, stderr, code := cfRun(t, cfEnv(), "--config", cfWriteFile(t, "workers = -1\nlog-level = \"loud\"\n"), "conf_app:app")
	for _, want := range []string{": workers -1: want at least 1", `: log-level "loud": want debug, info, warning or error`} {
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, stderr)
		}
	}
	if n := strings.Count(strings.TrimSpace(stderr), "\n") + 1; n != 2 {
		t.Errorf("%d lines for 2 bad values:\n%s", n, stderr)
	}
	// A flag over a bad value of the environment wins: nothing to report.
	if _, stderr, code := cfRun(t, cfEnv("TURNSTILE_WORKERS=-1"), "--workers", "1", "check", "conf_app:app"); code != 0 {
		t.Errorf("a flag over a bad env value: exit %d:\n%s", code, stderr)
	}
}

// Unknown keys and unknown TURNSTILE_* variables are errors with a
// suggestion; so is a TOML syntax error, with its line.
func TestConfig_Unknown(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"key", cfEnv(), []string{"--config", cfWriteFile(t, "wokers = 2\n")}, ": wokers: unknown setting (did you mean workers?)"},
		{"key-underscore", cfEnv(), []string{"--config", cfWriteFile(t, "graceful_timeout = \"5s\"\n")}, ": graceful_timeout: unknown setting (did you mean graceful-timeout?)"},
		{"table", cfEnv(), []string{"--config", cfWriteFile(t, "[server]\nworkers = 2\n")}, ": server: unknown setting"},
		{"env", cfEnv("TURNSTILE_GRACEFULL_TIMEOUT=5s"), nil, "turnstile: TURNSTILE_GRACEFULL_TIMEOUT: unknown variable (did you mean TURNSTILE_GRACEFUL_TIMEOUT?)"},
		{"env-far", cfEnv("TURNSTILE_NOTHING_LIKE_IT=1"), nil, "turnstile: TURNSTILE_NOTHING_LIKE_IT: unknown variable"},
		{"syntax", cfEnv(), []string{"--config", cfWriteFile(t, "workers = 2\nport = \n")}, ": line 2: "},
		{"missing", cfEnv(), []string{"--config", "/nonexistent/turnstile.toml"}, "--config /nonexistent/turnstile.toml: open /nonexistent/turnstile.toml: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := cfRun(t, c.env, append(c.args, "conf_app:app")...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d (want 2), stderr lacks %q:\n%s", code, c.want, stderr)
			}
		})
	}
}

// check imports the app as a worker would: the interface of an ASGI app,
// a factory, and an app that cannot be imported (its traceback, exit 1).
func TestConfig_Check(t *testing.T) {
	r, stderr, code := cfCheck(t, cfEnv(), "asgi_hello:app")
	if code != 0 || r.Interface == nil || *r.Interface != "asgi" {
		t.Fatalf("asgi_hello: exit %d, interface %v\n%s", code, r.Interface, stderr)
	}
	r, stderr, code = cfCheck(t, cfEnv(), "err_import:app")
	if code != 1 || r.Interface != nil || !strings.Contains(r.Error, "err_import exploded at import time") {
		t.Fatalf("err_import: exit %d, report %+v\n%s", code, r, stderr)
	}
	if !strings.Contains(stderr, "Traceback") || !strings.Contains(stderr, "RuntimeError: err_import exploded at import time") {
		t.Errorf("err_import: no traceback on stderr:\n%s", stderr)
	}
	_, stderr, code = cfRun(t, cfEnv(), "check", "no_such_module_here:app")
	if code != 1 || !strings.Contains(stderr, "no_such_module_here") {
		t.Errorf("missing module: exit %d:\n%s", code, stderr)
	}
	// check never serves: it exits by itself, and nothing was bound.
	out, _, code := cfRun(t, cfEnv(), "check", "--port", "0", "conf_app:app")
	if code != 0 || strings.Contains(out, "listening") {
		t.Errorf("check: exit %d:\n%s", code, out)
	}
	// A 0 that means something says what, as the flag's help does; the
	// JSON report keeps the plain value.
	for _, re := range []string{`(?m)^timeout\s+0s \(off\)\s+default$`, `(?m)^max-requests\s+0 \(never\)\s+default$`,
		`(?m)^limit-concurrency\s+0 \(no limit\)\s+default$`, `(?m)^max-requests-jitter\s+0\s+default$`} {
		if !regexpMatch(re, out) {
			t.Errorf("check's text report does not match %s:\n%s", re, out)
		}
	}
	if r, _, _ := cfCheck(t, cfEnv(), "conf_app:app"); r.get(t, "timeout").Value != "0s" {
		t.Errorf("JSON timeout: %+v, want the plain 0s", r.get(t, "timeout"))
	}
}

// Workers get the master's settings, not a fresh read: a file changed
// (or made unreadable) after start does not reach the workers a SIGHUP
// starts.
func TestConfig_WorkersKeepMasterSettings(t *testing.T) {
	file := cfWriteFile(t, "root-path = \"/file\"\nworkers = 2\n")
	s := cfStart(t, cfEnv("TURNSTILE_MAX_REQUESTS=1000"), "--config", file, "conf_app:app")
	if m := cfApp(t, s); m["script_name"] != "/file" {
		t.Fatalf("SCRIPT_NAME %v", m["script_name"])
	}
	if err := os.WriteFile(file, []byte("root-path = \"/changed\"\nworkers = 2\nbogus = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGHUP)
	supWaitLog(t, s, 60*time.Second, 2, "worker replaced", "cause", "hup")
	seen := map[float64]bool{}
	for i := 0; i < 40; i++ {
		m := cfApp(t, s)
		seen[m["pid"].(float64)] = true
		if m["script_name"] != "/file" {
			t.Fatalf("after SIGHUP a worker serves SCRIPT_NAME %v, want the master's /file", m["script_name"])
		}
	}
	if s.Stop() != 0 {
		t.Errorf("exit %d", s.exitCode)
	}
}

// regexpMatch reports whether pattern matches s.
func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
