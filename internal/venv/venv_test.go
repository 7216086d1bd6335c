package venv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakePython makes dir/bin/<names...> (the first a file, the others
// symlinks to it) and returns the first's path.
func fakePython(t *testing.T, dir string, names ...string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, names[0])
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names[1:] {
		if err := os.Symlink(names[0], filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	return exe
}

// fakeVenv writes a virtualenv directory whose pyvenv.cfg holds cfg.
func fakeVenv(t *testing.T, cfg string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "venv")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pyvenv.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheck(t *testing.T) {
	root := t.TempDir()
	build := fakePython(t, filepath.Join(root, "pyenv"), "python3.11", "python3", "python")
	other := fakePython(t, filepath.Join(root, "usr"), "python3.11", "python3")
	link := filepath.Join(root, "link-bin")
	if err := os.Symlink(filepath.Dir(build), link); err != nil {
		t.Fatal(err)
	}
	b := Build{Executable: build, Version: "3.11.7"}
	buildBin, otherBin := filepath.Dir(build), filepath.Dir(other)

	for _, c := range []struct {
		name, cfg string
		want      string // "" = accepted; else a substring of the error
	}{
		{"same", "home = " + buildBin + "\nversion = 3.11.7\nexecutable = " + build + "\n", ""},
		{"made-by-python3", "home = " + buildBin + "\nversion = 3.11.7\nexecutable = " + filepath.Join(buildBin, "python3") + "\n", ""},
		{"home-symlink", "home = " + link + "\nversion = 3.11.7\n", ""},
		{"virtualenv-version-info", "home = " + buildBin + "\nversion_info = 3.11.7.final.0\n", ""},
		{"upgraded-in-place", "home = " + buildBin + "\nversion = 3.11.2\n", ""},
		{"no-version", "home = " + buildBin + "\n", ""},
		{"no-home", "version = 3.11.4\n", ""},
		{"other-install", "home = " + otherBin + "\nversion = 3.11.2\nexecutable = " + other + "\n",
			"was made by " + other + " (3.11.2); this binary is built for " + build + " (3.11.7): rebuild with make build PYTHON=" + other +
				", or recreate the virtualenv with " + build + " -m venv --clear "},
		{"other-install-same-version", "home = " + otherBin + "\nversion = 3.11.7\n", "was made by " + filepath.Join(otherBin, "python3.11") + " (3.11.7)"},
		{"other-install-no-keys", "home = " + otherBin + "\n", "was made by " + filepath.Join(otherBin, "python3") + "; this binary"},
		{"other-minor", "home = " + buildBin + "\nversion = 3.12.1\n", "(3.12.1); this binary is built for " + build + " (3.11.7): rebuild with make build PYTHON=" +
			filepath.Join(buildBin, "python3") + " (it makes bin/turnstile-3.12), or recreate the virtualenv with " + build + " -m venv --clear "},
		{"other-minor-no-home", "version_info = 3.12.1.final.0\n", "was made by python3.12 (3.12.1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := fakeVenv(t, c.cfg)
			err := Check(dir, b)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Errorf("accepted; want %q", c.want)
			case err != nil && (!strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
				t.Errorf("error %q; want one line with %q", err, c.want)
			}
		})
	}

	// Without the build's executable (a plain go build) only the minor
	// version is compared.
	if err := Check(fakeVenv(t, "home = "+otherBin+"\nversion = 3.11.2\n"), Build{Version: "3.11.7"}); err != nil {
		t.Errorf("no build executable, same minor: %v", err)
	}
	err := Check(fakeVenv(t, "home = "+otherBin+"\nversion = 3.12.1\n"), Build{Version: "3.11.7"})
	if err == nil || !strings.Contains(err.Error(), "built for CPython (3.11.7)") || !strings.Contains(err.Error(), "with python3.11 -m venv --clear") {
		t.Errorf("no build executable, other minor: %v", err)
	}
}

// A virtualenv named for the other version (.venv-3.12, as the Makefile
// names them) is not advised to be made again under that name for this
// binary's version (issue 28: a 3.12 binary advised `-m venv .venv-3.11`):
// a new one named for this binary's version, with its own Python.
func TestCheckVersionNamedVenv(t *testing.T) {
	root := t.TempDir()
	build := fakePython(t, filepath.Join(root, "py311"), "python3.11")
	other := fakePython(t, filepath.Join(root, "py312"), "python3.12")
	dir := filepath.Join(root, "app", ".venv-3.12")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pyvenv.cfg"), []byte("home = "+filepath.Dir(other)+"\nversion = 3.12.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Check(dir, Build{Executable: build, Version: "3.11.7"})
	want := "rebuild with make build PYTHON=" + other + " (it makes bin/turnstile-3.12), or make one for this binary with " +
		build + " -m venv " + filepath.Join(root, "app", ".venv-3.11") + " and use --venv " + filepath.Join(root, "app", ".venv-3.11")
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %v; want it to end with %q", err, want)
	}
}

func TestCheckNotAVenv(t *testing.T) {
	b := Build{Version: "3.11.7"}
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "does not exist"},
		{file, "is not a directory"},
		{dir, "is not a virtualenv (no pyvenv.cfg)"},
	} {
		if err := Check(c.path, b); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v; want %q", c.path, err, c.want)
		}
	}
}

func TestPython(t *testing.T) {
	b := Build{Executable: "/opt/py/bin/python3.11", Version: "3.11.7"}
	if p, err := Python("", "", b); err != nil || p != b.Executable {
		t.Errorf("no venv: %q, %v", p, err)
	}
	if p, err := Python("", "", Build{Version: "3.11.7"}); err != nil || p != "python3" {
		t.Errorf("no venv, no build executable: %q, %v", p, err)
	}
	v := fakeVenv(t, "version = 3.11.7\n")
	if p, err := Python("", v, b); err != nil || p != filepath.Join(v, "bin", "python") {
		t.Errorf("VIRTUAL_ENV: %q, %v", p, err)
	}
	if _, err := Python("/nonexistent", v, b); err == nil || err.Error() != "--venv /nonexistent does not exist" {
		t.Errorf("--venv over VIRTUAL_ENV: %v", err)
	}
	if _, err := Python("", "/nonexistent", b); err == nil || err.Error() != "VIRTUAL_ENV=/nonexistent does not exist" {
		t.Errorf("VIRTUAL_ENV: %v", err)
	}
}

func TestCheckAppDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct{ path, want string }{
		{"", ""},
		{dir, ""},
		{filepath.Join(dir, "missing"), "--app-dir " + filepath.Join(dir, "missing") + " does not exist"},
		{file, "--app-dir " + file + " is not a directory"},
	} {
		err := CheckAppDir(c.path)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("%q: %q; want %q", c.path, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%q: accepted; want %q", c.path, c.want)
		}
	}
}

func TestFullVersion(t *testing.T) {
	for in, want := range map[string]string{"3.11.7": "3.11.7", "3.11.7.final.0": "3.11.7", "3.12": "3.12", "3.13.0rc1": "3.13", "": "", "x": ""} {
		if got := fullVersion(in); got != want {
			t.Errorf("fullVersion(%q) = %q; want %q", in, got, want)
		}
	}
}
