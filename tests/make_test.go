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

// makeCommand is make with args, in the repository, as a user at a shell
// runs it: without the MAKELEVEL and MAKEFLAGS of a `make test` that runs
// these tests (under them make is a sub-make, which prints "Entering
// directory" lines a user never sees).
func makeCommand(args ...string) *exec.Cmd {
	cmd := exec.Command("make", args...)
	cmd.Dir = repoRoot()
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

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
		cmd := makeCommand("venv-run", "PYTHON="+python, "VENV="+venv)
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
		cmd := makeCommand("-n", "-o", "build", "-o", "venv-run", "run", "PYTHON="+python, "ARGS="+c.args)
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

// The virtualenv outlives a switch between two names of one Python
// install (issue 28: `make run` with python3, then `make test
// PYTHON=.../python3.11`, then `make venv-run`: each switch said "was
// made by another Python" and wiped it). It is made again only for a
// virtualenv the binary would refuse: another install (scripts/venv-same,
// the binary's test).
func TestMake_VenvKeptAcrossPythonNames(t *testing.T) {
	_, _ = vnBuildPython(t)
	python := os.Getenv("TURNSTILE_PYTHON")
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	// Another name of the same interpreter in its directory (python3 for
	// python3.11).
	real, _ := filepath.EvalSymlinks(python)
	alias := ""
	for _, n := range []string{"python3", "python"} {
		p := filepath.Join(filepath.Dir(python), n)
		if r, _ := filepath.EvalSymlinks(p); p != python && r == real {
			alias = p
			break
		}
	}
	if alias == "" {
		t.Skipf("no other name of %s in its directory", python)
	}
	make := func(target, py, venv string) string {
		t.Helper()
		cmd := makeCommand("--no-print-directory", target, "PYTHON="+py, "VENV="+venv)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s PYTHON=%s: %v\n%s", target, py, err, out)
		}
		return string(out)
	}
	venv := filepath.Join(t.TempDir(), ".venv")
	make("venv-run", alias, venv)
	keep := filepath.Join(venv, "kept")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, py := range []string{python, alias, python} {
		if out := make("venv-run", py, venv); out != "" {
			t.Errorf("make venv-run PYTHON=%s printed:\n%s\nwant nothing (the virtualenv is this install's)", py, out)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the virtualenv was made again: %v", err)
	}

	// A virtualenv of another install is made again.
	other := filepath.Join(t.TempDir(), ".venv")
	os.MkdirAll(other, 0o755)
	cfg := "home = /opt/other-python/bin\nversion = " + strings.TrimSpace(pyVersion(t, python)) + "\n"
	if err := os.WriteFile(filepath.Join(other, "pyvenv.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := make("venv-check", python, other); !strings.Contains(out, "was made by another Python") {
		t.Errorf("make venv-check with another install's virtualenv printed:\n%s\nwant it made again", out)
	}
	if _, err := os.Stat(other); err == nil {
		t.Errorf("another install's virtualenv is still there")
	}
}

func pyVersion(t *testing.T, python string) string {
	out, err := exec.Command(python, "-c", "import platform; print(platform.python_version())").Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
