package tests

// A gunicorn or uvicorn user's first hour (issue 28), the review's
// findings: every bad value reported at once, from the flags, the
// TURNSTILE_* variables and the file alike; "" refused for a setting with
// choices; a missing file or directory a setting names is one line, exit
// 2, in check too; an address in use names the flag to change; a bare
// `turnstile`; --bind fd://; the file's keys labelled in errors; the
// refused names as variables and keys; check's address source; `make
// run ARGS=-b ...`. Through the real binary; helpers in config_test.go.

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fhRun runs the binary like cfRun, but without the harness's --host and
// --port (so that --bind may be given) and with --admin-bind
// 127.0.0.1:0 first (a later one wins).
func fhRun(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	base := []string{"--app-dir", AppDir(), "--admin-bind", "127.0.0.1:0", "--log-format", "json"}
	if v := os.Getenv("TURNSTILE_VENV"); v != "" {
		base = append(base, "--venv", v)
	}
	cmd := exec.Command(binPath(t), append(base, args...)...)
	cmd.Dir = AppDir()
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// fhExit wants exit 2 and exactly the lines want on stderr, when serving
// and under check.
func fhExit(t *testing.T, env []string, want []string, args ...string) {
	t.Helper()
	for _, sub := range [][]string{nil, {"check"}} {
		a := append(append(append([]string{}, sub...), args...), "conf_app:app")
		_, stderr, code := fhRun(t, env, a...)
		if got := strings.TrimRight(stderr, "\n"); code != 2 || got != strings.Join(want, "\n") {
			t.Errorf("%v: exit %d (want 2), stderr:\n%s\nwant:\n%s", a, code, stderr, strings.Join(want, "\n"))
		}
	}
}

// Every bad value is one line, not only the first: pflag stops at the
// first flag it cannot parse, so the table's values record theirs.
func TestCompat_EveryBadValue(t *testing.T) {
	fhExit(t, cfEnv(), []string{
		`turnstile: --keep-alive "x": want seconds or a duration like 30s`,
		`turnstile: --workers -1: want at least 1`,
		`turnstile: --log-level "loud": want debug, info, warning or error`,
	}, "-w", "-1", "--keep-alive", "x", "--log-level", "loud")
	fhExit(t, cfEnv(), []string{
		`turnstile: --workers "abc": want an integer`,
		`turnstile: --backlog "xyz": want an integer`,
		`turnstile: --no-date-header "maybe": want true or false`,
		`turnstile: --timeout "zz": want seconds or a duration like 30s`,
	}, "-w", "abc", "--backlog", "xyz", "--no-date-header=maybe", "-t", "zz")
	fhExit(t, cfEnv("TURNSTILE_WORKERS=abc", "TURNSTILE_BACKLOG=xyz", "TURNSTILE_LOG_LEVEL=loud"), []string{
		`turnstile: TURNSTILE_BACKLOG="xyz": want an integer`,
		`turnstile: TURNSTILE_WORKERS="abc": want an integer`,
		`turnstile: TURNSTILE_LOG_LEVEL "loud": want debug, info, warning or error`,
	})
	file := cfWriteFile(t, "workers = \"abc\"\nbacklog = -1\nlog-level = \"loud\"\n")
	fhExit(t, cfEnv(), []string{
		`turnstile: ` + file + `: workers = "abc": want an integer`,
		`turnstile: ` + file + `: backlog -1: want at least 1`,
		`turnstile: ` + file + `: log-level "loud": want debug, info, warning or error`,
	}, "-c", file)
	// All three sources at once, with a refused name among them.
	fhExit(t, cfEnv("TURNSTILE_BACKLOG=xyz"), []string{
		`turnstile: --workers "abc": want an integer`,
		`turnstile: TURNSTILE_BACKLOG="xyz": want an integer`,
		`turnstile: --preload: not needed: each worker is its own process that imports the app itself (re-executed, its own CPython, no fork after import), so there is nothing to share copy-on-write; an idle hello worker is 27 MiB RSS, 18 MiB of it file pages (binary, libpython, stdlib) the workers already share`,
		`turnstile: --loop "tokio": want auto, asyncio or uvloop`,
	}, "-w", "abc", "--preload", "--loop", "tokio")
}

// "" is not a choice: each setting with choices refuses it, naming them.
func TestCompat_EmptyChoice(t *testing.T) {
	for _, c := range []struct{ flag, want string }{
		{"log-level", "want debug, info, warning or error"},
		{"log-format", "want text or json"},
		{"http", "want auto, 1 or 2"},
		{"interface", "want auto, wsgi or asgi"},
		{"lifespan", "want auto, on or off"},
		{"loop", "want auto, asyncio or uvloop"},
		{"static-symlinks", "want follow, owner or nofollow"},
		{"ssl-client-verify", "want none, optional or required"},
		{"ssl-min-version", "want 1.2 or 1.3"},
		{"admin-bind", "want HOST:PORT, unix:PATH or off"},
	} {
		fhExit(t, cfEnv(), []string{"turnstile: --" + c.flag + ` "": ` + c.want}, "--"+c.flag, "")
	}
	fhExit(t, cfEnv("TURNSTILE_LOG_LEVEL="), []string{`turnstile: TURNSTILE_LOG_LEVEL "": want debug, info, warning or error`})
	file := cfWriteFile(t, "http = \"\"\n")
	fhExit(t, cfEnv(), []string{"turnstile: " + file + `: http "": want auto, 1 or 2`}, "-c", file)
	// --host "" stays 127.0.0.1, as documented.
	if out, stderr, code := fhRun(t, cfEnv(), "check", "--format", "json", "--host", "", "conf_app:app"); code != 0 || !strings.Contains(out, `"address": "127.0.0.1:8000"`) {
		t.Errorf("--host \"\": exit %d, want address 127.0.0.1:8000 in:\n%s\n%s", code, out, stderr)
	}
}

// A file or directory a setting names that is not there: one line, exit
// 2, when serving and under check.
func TestCompat_MissingPaths(t *testing.T) {
	fhExit(t, cfEnv(), []string{
		"turnstile: --ssl-certfile /nope.pem: no such file or directory",
		"turnstile: --ssl-keyfile /nope.key: no such file or directory",
		"turnstile: --ssl-ca /nope-ca.pem: no such file or directory",
	}, "--ssl-certfile", "/nope.pem", "--ssl-keyfile", "/nope.key", "--ssl-ca", "/nope-ca.pem")
	fhExit(t, cfEnv(), []string{"turnstile: --ssl-certfile " + AppDir() + ": is a directory, want a PEM file"},
		"--ssl-certfile", AppDir(), "--ssl-keyfile", filepath.Join(AppDir(), "conf_app.py"))
	fhExit(t, cfEnv(), []string{"turnstile: --pid-file /nope/x.pid: directory /nope does not exist"}, "--pid-file", "/nope/x.pid")
	fhExit(t, cfEnv(), []string{"turnstile: --bind unix:/nonexistent/dir/s.sock: directory /nonexistent/dir does not exist"}, "-b", "unix:/nonexistent/dir/s.sock")
	fhExit(t, cfEnv(), []string{"turnstile: --uds /nonexistent/dir/s.sock: directory /nonexistent/dir does not exist"}, "--uds", "/nonexistent/dir/s.sock")
	fhExit(t, cfEnv(), []string{"turnstile: --admin-bind unix:/nonexistent/a.sock: directory /nonexistent does not exist"}, "--admin-bind", "unix:/nonexistent/a.sock")
	fhExit(t, cfEnv("TURNSTILE_PID_FILE=/nope/x.pid"), []string{"turnstile: TURNSTILE_PID_FILE /nope/x.pid: directory /nope does not exist"})
}

// An address in use exits 1, as uvicorn does, with the line naming the
// flag to change.
func TestCompat_AddressInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", port, "--admin-bind", "off"}, `"msg":"--port ` + port + ` (or --bind): address already in use; give another, or stop the server using it"`},
		{[]string{"-b", "127.0.0.1:" + port, "--admin-bind", "off"}, `"msg":"--bind 127.0.0.1:` + port + `: address already in use; give another, or stop the server using it"`},
		{[]string{"--port", "0", "--admin-bind", "127.0.0.1:" + port}, `"msg":"--admin-bind 127.0.0.1:` + port + `: address already in use; give another or off"`},
	} {
		_, stderr, code := fhRun(t, cfEnv(), append(c.args, "conf_app:app")...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d (want 1), stderr:\n%s\nwant a record with %s", c.args, code, stderr, c.want)
		}
	}
}

// A bare `turnstile` or `turnstile check` says what to give.
func TestCompat_NoApp(t *testing.T) {
	for _, args := range [][]string{nil, {"check"}} {
		cmd := exec.Command(binPath(t), args...)
		cmd.Env = cfEnv()
		out, _ := cmd.CombinedOutput()
		want := "turnstile: give the app as MODULE:ATTR (e.g. hello:app); see turnstile --help\n"
		if cmd.ProcessState.ExitCode() != 2 || string(out) != want {
			t.Errorf("turnstile %v: exit %d, output:\n%s\nwant exit 2 and:\n%s", args, cmd.ProcessState.ExitCode(), out, want)
		}
	}
}

// The smaller findings: fd://, the file's key named for a bad list value,
// the refused names as variables and keys, relative paths of the file
// under its chdir, check's address source under --bind.
func TestCompat_FirstHourSmaller(t *testing.T) {
	fhExit(t, cfEnv(), []string{`turnstile: --bind "fd://3": gunicorn's fd:// is not supported: turnstile takes an inherited socket from systemd socket activation (LISTEN_FDS; see the README, "Deployment")`}, "-b", "fd://3")
	file := cfWriteFile(t, "static = 5\n")
	fhExit(t, cfEnv(), []string{"turnstile: " + file + `: static "5": want URL_PREFIX=DIR, e.g. /static=./staticfiles`}, "-c", file)

	refusedLine := "a file is not supported: --access-logfile - (or --access-log) logs each request to stderr with the other records (one stream, not gunicorn's stdout) for journald or the container to collect"
	fhExit(t, cfEnv("TURNSTILE_ACCESS_LOGFILE=/var/log/a.log"), []string{"turnstile: TURNSTILE_ACCESS_LOGFILE: " + refusedLine})
	file = cfWriteFile(t, "access-logfile = \"/var/log/a.log\"\n")
	fhExit(t, cfEnv(), []string{"turnstile: " + file + ": access-logfile: " + refusedLine}, "-c", file)
	file = cfWriteFile(t, "access-logfile = \"-\"\n")
	if r, stderr, code := cfCheck(t, cfEnv(), "-c", file, "conf_app:app"); code != 0 || r.get(t, "access-log").Value != "true" {
		t.Errorf("access-logfile = \"-\": exit %d, %+v\n%s", code, r.get(t, "access-log"), stderr)
	}

	// A relative path in the file is from the current directory after
	// chdir (README, "Configuration"): chdir in the same file is its base.
	if v := os.Getenv("TURNSTILE_VENV"); v != "" {
		dir := t.TempDir()
		if err := os.Symlink(v, filepath.Join(dir, "venv-link")); err != nil {
			t.Fatal(err)
		}
		file = cfWriteFile(t, "chdir = \""+dir+"\"\nvenv = \"venv-link\"\n")
		cmd := exec.Command(binPath(t), "check", "--format", "json", "--app-dir", AppDir(), "-c", file, "conf_app:app")
		cmd.Env, cmd.Dir = cfEnv(), "/"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("chdir and a relative venv in the file, started from /: %v\n%s", err, out)
		}
	}

	out, stderr, code := fhRun(t, cfEnv(), "check", "--format", "json", "-b", "127.0.0.1:18130", "conf_app:app")
	if code != 0 {
		t.Fatalf("check -b: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{`"address": "127.0.0.1:18130"`, `"name": "host",
      "value": "127.0.0.1",
      "source": "flag",
      "origin": "--bind"`, `"name": "port",
      "value": "18130",
      "source": "flag",
      "origin": "--bind"`} {
		if !strings.Contains(out, want) {
			t.Errorf("check -b 127.0.0.1:18130: want %s in:\n%s", want, out)
		}
	}
}
