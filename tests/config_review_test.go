package tests

// Configuration fixes from a fresh user's review (issue 9): the
// --proxy-headers / --no-proxy-headers pair is one setting, two names of
// one setting in one source are an error, a TOML integer umask, the
// worker's own variables kept from the app, the virtualenv message.

import (
	"os/exec"
	"strings"
	"testing"
)

// --proxy-headers and --no-proxy-headers are one setting: a flag beats
// the environment across both names, and two names in one source are an
// error naming both.
func TestConfig_ProxyHeadersPair(t *testing.T) {
	r, stderr, code := cfCheck(t, cfEnv("TURNSTILE_NO_PROXY_HEADERS=1"), "--proxy-headers", "conf_app:app")
	if got := r.get(t, "proxy-headers"); code != 0 || got.Value != "true" || got.Source != "flag" || got.Origin != "--proxy-headers" {
		t.Errorf("--proxy-headers under TURNSTILE_NO_PROXY_HEADERS=1: exit %d, %+v\n%s", code, got, stderr)
	}
	for _, s := range r.Settings {
		if s.Name == "no-proxy-headers" {
			t.Errorf("no-proxy-headers is listed as its own setting: %+v", s)
		}
	}
	r, stderr, code = cfCheck(t, cfEnv("TURNSTILE_PROXY_HEADERS=true"), "--no-proxy-headers", "conf_app:app")
	if got := r.get(t, "proxy-headers"); code != 0 || got.Value != "false" || got.Source != "flag" || got.Origin != "--no-proxy-headers" {
		t.Errorf("--no-proxy-headers under TURNSTILE_PROXY_HEADERS=true: exit %d, %+v\n%s", code, got, stderr)
	}
	r, stderr, code = cfCheck(t, cfEnv("TURNSTILE_NO_PROXY_HEADERS=1"), "--config", cfWriteFile(t, "proxy-headers = true\n"), "conf_app:app")
	if got := r.get(t, "proxy-headers"); code != 0 || got.Value != "false" || got.Origin != "TURNSTILE_NO_PROXY_HEADERS" {
		t.Errorf("env no-proxy-headers over the file's proxy-headers: exit %d, %+v\n%s", code, got, stderr)
	}

	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"flags", cfEnv(), []string{"--no-proxy-headers", "--proxy-headers"}, []string{"--no-proxy-headers", "--proxy-headers"}},
		{"env", cfEnv("TURNSTILE_PROXY_HEADERS=1", "TURNSTILE_NO_PROXY_HEADERS=1"), nil, []string{"TURNSTILE_PROXY_HEADERS", "TURNSTILE_NO_PROXY_HEADERS"}},
		{"file", cfEnv(), []string{"--config", cfWriteFile(t, "proxy-headers = true\nno-proxy-headers = true\n")}, []string{": proxy-headers", "no-proxy-headers"}},
	} {
		for _, sub := range [][]string{{"check"}, nil} {
			args := append(append(append([]string{}, sub...), c.args...), "conf_app:app")
			_, stderr, code := cfRun(t, c.env, args...)
			if code != 2 {
				t.Errorf("%s %v: exit %d, want 2:\n%s", c.name, args, code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%s %v: stderr lacks %q:\n%s", c.name, args, w, stderr)
				}
			}
		}
	}
}

// --threads (alias of --blocking-threads) and --blocking-threads on one
// command line are an error, as in the environment and the file; one of
// them alone is labelled by the name used.
func TestConfig_AliasBothFlags(t *testing.T) {
	for _, sub := range [][]string{{"check"}, nil} {
		args := append(append([]string{}, sub...), "--threads", "3", "--blocking-threads", "5", "conf_app:app")
		_, stderr, code := cfRun(t, cfEnv(), args...)
		if code != 2 || !strings.Contains(stderr, "--blocking-threads") || !strings.Contains(stderr, "--threads") || !strings.Contains(stderr, "give one") {
			t.Errorf("%v: exit %d (want 2), stderr:\n%s", args, code, stderr)
		}
	}
	for _, name := range []string{"--threads", "--blocking-threads"} {
		r, stderr, code := cfCheck(t, cfEnv(), name, "3", "conf_app:app")
		if got := r.get(t, "blocking-threads"); code != 0 || got.Value != "3" || got.Origin != name {
			t.Errorf("%s 3: exit %d, %+v\n%s", name, code, got, stderr)
		}
	}
}

// A TOML integer umask is that integer: umask = 0o27 is mask 027.
func TestConfig_UmaskTOMLInteger(t *testing.T) {
	for toml, want := range map[string]string{"umask = 0o27\n": "0o27", "umask = 0o22\n": "0o22", "umask = \"027\"\n": "027"} {
		file := cfWriteFile(t, toml)
		r, stderr, code := cfCheck(t, cfEnv(), "--config", file, "conf_app:app")
		if got := r.get(t, "umask"); code != 0 || got.Value != want || got.Origin != file+": umask" {
			t.Errorf("%q: exit %d, %+v, want %q\n%s", toml, code, got, want, stderr)
		}
	}
	_, stderr, code := cfRun(t, cfEnv(), "check", "--config", cfWriteFile(t, "umask = 0o1777\n"), "conf_app:app")
	if code != 2 || !strings.Contains(stderr, `: umask "0o1777": want an octal mask`) {
		t.Errorf("umask = 0o1777: exit %d:\n%s", code, stderr)
	}
}

// A worker takes its own TURNSTILE_WORKER* variables out of the
// environment before Python starts: the app and its subprocesses (a
// turnstile among them) never see them.
func TestConfig_WorkerEnvNotInherited(t *testing.T) {
	for _, workers := range []string{"1", "2"} {
		s := cfStart(t, cfEnv("TURNSTILE_ROOT_PATH=/x"), "--workers", workers, "conf_env:app")
		code, body := s.Get(t, "/")
		if code != 200 || strings.Contains(body, "TURNSTILE_WORKER") {
			t.Errorf("--workers %s: the app sees %d %s", workers, code, body)
		}
		if s.Stop() != 0 {
			t.Errorf("exit status %d", s.exitCode)
		}
	}
}

// A missing virtualenv is one line, "turnstile: " once, naming where the
// path came from. check reports it as a bad value (exit 2) before it
// imports anything (it was exit 1, as an import error; issue 27).
func TestConfig_VenvMessage(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{cfEnv("VIRTUAL_ENV=/nonexistent"), nil, "turnstile: VIRTUAL_ENV=/nonexistent does not exist"},
		{cfEnv(), []string{"--venv", "/nonexistent"}, "turnstile: --venv /nonexistent does not exist"},
	} {
		cmd := exec.Command(binPath(t), append(append([]string{"check", "--app-dir", AppDir()}, c.args...), "conf_app:app")...)
		cmd.Env = c.env
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "turnstile: turnstile:") {
			t.Errorf("%v %v: exit %d, want 2 and %q:\n%s", c.env[len(c.env)-1], c.args, cmd.ProcessState.ExitCode(), c.want, out)
		}
	}
}

// FORWARDED_ALLOW_IPS (read below the flag, the TURNSTILE_ variable and
// the file) is named when its value is bad, and every bad entry of a
// list is reported.
func TestConfig_ForwardedAllowIPsErrors(t *testing.T) {
	for _, sub := range [][]string{{"check"}, nil} {
		args := append(append([]string{}, sub...), "conf_app:app")
		_, stderr, code := cfRun(t, cfEnv("FORWARDED_ALLOW_IPS=nope"), args...)
		if code != 2 || !strings.Contains(stderr, `turnstile: FORWARDED_ALLOW_IPS: "nope" is not`) || strings.Contains(stderr, "--forwarded-allow-ips") {
			t.Errorf("FORWARDED_ALLOW_IPS=nope %v: exit %d:\n%s", args, code, stderr)
		}
	}
	r, stderr, code := cfCheck(t, cfEnv("FORWARDED_ALLOW_IPS=10.1.0.0/16"), "conf_app:app")
	if got := r.get(t, "forwarded-allow-ips"); code != 0 || got.Value != "10.1.0.0/16" || got.Source != "env" || got.Origin != "FORWARDED_ALLOW_IPS" {
		t.Errorf("FORWARDED_ALLOW_IPS=10.1.0.0/16: exit %d, %+v\n%s", code, got, stderr)
	}
	// The TURNSTILE_ variable is above it.
	r, stderr, code = cfCheck(t, cfEnv("FORWARDED_ALLOW_IPS=nope", "TURNSTILE_FORWARDED_ALLOW_IPS=10.2.0.0/16"), "conf_app:app")
	if got := r.get(t, "forwarded-allow-ips"); code != 0 || got.Value != "10.2.0.0/16" || got.Origin != "TURNSTILE_FORWARDED_ALLOW_IPS" {
		t.Errorf("TURNSTILE_FORWARDED_ALLOW_IPS over FORWARDED_ALLOW_IPS: exit %d, %+v\n%s", code, got, stderr)
	}
	_, stderr, code = cfRun(t, cfEnv(), "check", "--forwarded-allow-ips", "10.0.0.0/8,garbage,1.2.3.999", "conf_app:app")
	if code != 2 || !strings.Contains(stderr, "--forwarded-allow-ips") || !strings.Contains(stderr, `"garbage"`) || !strings.Contains(stderr, `"1.2.3.999"`) {
		t.Errorf("two bad entries: exit %d:\n%s", code, stderr)
	}
}
