package tests

// `make run` says only what it does (issue 28: its first line, before
// turnstile's, was make's "make[1]: '.venv-3.11/.installed-run' is up to
// date.").

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The virtualenv step of `make run` (venv-run) prints the commands it runs
// the first time and nothing once the virtualenv is up to date; its stamp
// stays (it is not an intermediate file make deletes). Run with a
// virtualenv in a temp directory (VENV=), so the repository's is left
// alone.
func TestMake_RunQuiet(t *testing.T) {
	_, _ = vnBuildPython(t)
	python := os.Getenv("TURNSTILE_PYTHON")
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	venv := filepath.Join(t.TempDir(), ".venv")
	run := func() string {
		t.Helper()
		cmd := exec.Command("make", "venv-run", "PYTHON="+python, "VENV="+venv)
		cmd.Dir = repoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make venv-run: %v\n%s", err, out)
		}
		return string(out)
	}
	first := run()
	if !strings.Contains(first, " -m venv "+venv) || strings.Contains(first, "up to date") {
		t.Errorf("first make venv-run printed:\n%s\nwant the venv and pip commands, no \"up to date\"", first)
	}
	if _, err := os.Stat(filepath.Join(venv, ".installed-run")); err != nil {
		t.Errorf("the stamp is gone after make venv-run: %v", err)
	}
	if again := run(); again != "" {
		t.Errorf("make venv-run with the virtualenv up to date printed:\n%s\nwant nothing", again)
	}
}

// `make run ARGS='-b ...'` (issue 28): the Makefile passes --port $(PORT)
// only when ARGS gives no address of its own, since turnstile refuses
// --bind with --port. make -n prints the command without building.
func TestMake_RunAddress(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	python := os.Getenv("TURNSTILE_PYTHON")
	if python == "" {
		python = "python3"
	}
	for _, c := range []struct {
		args string
		port bool
	}{
		{"", true}, {"-w 2 --backlog 5", true},
		{"-b 127.0.0.1:18130", false}, {"--bind=unix:/tmp/t.sock", false}, {"--uds /tmp/t.sock", false},
		{"--port 9000", false}, {"-b127.0.0.1", false},
	} {
		cmd := exec.Command("make", "-n", "-o", "build", "-o", "venv-run", "run", "PYTHON="+python, "ARGS="+c.args)
		cmd.Dir = repoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n run ARGS=%q: %v\n%s", c.args, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		last := lines[len(lines)-1]
		if got := strings.Contains(last, "--port 8000"); got != c.port || !strings.Contains(last, c.args+" app:app") {
			t.Errorf("make run ARGS=%q runs:\n%s\nwant --port 8000: %v, and the ARGS", c.args, last, c.port)
		}
	}
}
