// Package venv checks, by reading files only, that a virtualenv and an app
// directory can be used by this binary's embedded CPython. It has no cgo
// and never touches Python, so the master (which never initialises
// Python) runs the same checks as a worker, before it binds anything.
//
// Why the interpreter must match and not only its minor version: a
// virtualenv's pyvenv.cfg names the Python that made it (home). CPython,
// initialised with the virtualenv's bin/python as sys.executable, takes
// its standard library from that Python's prefix, while the libpython
// doing the work is the build's. Two builds of 3.11 disagree on which
// modules are compiled into libpython and which live in lib-dynload:
// Debian's 3.11.2 has _struct built in (so its lib-dynload has no
// _struct.so), pyenv's 3.11.7 builds it as a shared module, so a Debian
// virtualenv under a binary built with pyenv's Python fails deep in the
// app's import with "No module named '_struct'".
package venv

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Build is the CPython a binary was built against.
type Build struct {
	// Executable is the build Python's sys.executable, as the Makefile
	// passes it (internal/python.BuildExecutable); "" when the binary was
	// built without the Makefile, and then only the minor version is
	// compared.
	Executable string
	// Version is the full version of the headers the binary was compiled
	// with, "3.11.7" (internal/python.BuildVersion).
	Version string
}

// Minor is the build's "3.11".
func (b Build) Minor() string { return minor(b.Version) }

// Python returns the sys.executable a worker should start CPython with,
// after checking the virtualenv: flag (--venv) if set, else virtualEnv
// ($VIRTUAL_ENV). It must exist, be a directory holding pyvenv.cfg, and
// have been made by the build's own Python installation (see Check).
// Without a virtualenv it is the build's own python (b.Executable), or
// "python3" when that is unknown. Each error is one line naming where the
// path came from ("--venv /x" or "VIRTUAL_ENV=/x"), as the master prints
// a bad value.
func Python(flag, virtualEnv string, b Build) (string, error) {
	dir, from := flag, "--venv "
	if dir == "" {
		dir, from = virtualEnv, "VIRTUAL_ENV="
	}
	if dir == "" {
		if b.Executable != "" {
			return b.Executable, nil
		}
		return "python3", nil
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := Check(dir, b); err != nil {
		return "", fmt.Errorf("%s%s %w", from, dir, err)
	}
	return filepath.Join(dir, "bin", "python"), nil
}

// Check reports why the virtualenv dir (absolute) cannot be used with
// build b, or nil. The error reads after the virtualenv's name: "is not a
// directory", "was made by ...". The virtualenv must have been made by the
// build's Python installation: pyvenv.cfg's home (or its executable /
// base-executable key, or home's python3.X) is the build's, symlinks
// resolved on both sides, so that a virtualenv made by .../bin/python3
// and a build with .../bin/python3.11 of the same install agree. A micro
// version that differs within the same install is accepted (the install
// was upgraded in place: the virtualenv follows it); a different minor
// version, or another install, is refused with the make command that
// fits and the venv command of the build's own Python.
func Check(dir string, b Build) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("does not exist")
	case err != nil:
		return fmt.Errorf("cannot be read: %v", unwrapPath(err))
	case !fi.IsDir():
		return errors.New("is not a directory")
	}
	cfg, err := readConfig(filepath.Join(dir, "pyvenv.cfg"))
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("is not a virtualenv (no pyvenv.cfg)")
	} else if err != nil {
		return fmt.Errorf("is not readable: pyvenv.cfg: %v", unwrapPath(err))
	}
	home := cfg["home"]
	version := fullVersion(cfg["version"])
	if version == "" {
		version = fullVersion(cfg["version_info"]) // virtualenv, uv: "3.11.7.final.0", "3.11.7"
	}
	maker := madeBy(cfg, home, version)
	refuse := func() error {
		v, rebuild := "", ""
		if version != "" {
			v = " (" + version + ")"
			if m := minor(version); m != b.Minor() {
				rebuild = " (it makes bin/turnstile-" + m + ")"
			}
		}
		built, py := b.Executable, b.Executable
		if built == "" {
			built, py = "CPython", "python"+b.Minor()
		}
		// Made again in place, the virtualenv needs --clear: without it
		// venv keeps the old bin/python (a symlink to the other Python,
		// which would then be sys.executable) and the old site-packages.
		// A name that says the other version (.venv-3.12, as the Makefile
		// names them) is left to it: a new one for this binary's version.
		again := "recreate the virtualenv with " + py + " -m venv --clear " + dir
		if nd := renamed(dir, minor(version), b.Minor()); nd != "" {
			again = "make one for this binary with " + py + " -m venv " + nd + " and use --venv " + nd
		}
		return fmt.Errorf("was made by %s%s; this binary is built for %s (%s): rebuild with make build PYTHON=%s%s, or %s",
			maker, v, built, b.Version, maker, rebuild, again)
	}
	if version != "" && minor(version) != b.Minor() {
		return refuse()
	}
	if home == "" || b.Executable == "" {
		return nil // nothing to compare with: the minor version is all we know
	}
	if !sameInstall(cfg, home, version, b.Executable) {
		return refuse()
	}
	return nil
}

// renamed is dir with its last element's version from (a minor version,
// "3.12") made to ("3.11"): /app/.venv-3.12 → /app/.venv-3.11. "" when
// the versions are the same, unknown, or not in the name.
func renamed(dir, from, to string) string {
	base := filepath.Base(dir)
	if from == "" || from == to || !strings.Contains(base, from) {
		return ""
	}
	return filepath.Join(filepath.Dir(dir), strings.Replace(base, from, to, 1))
}

// CheckAppDir reports why dir (--app-dir) cannot be put on sys.path, or
// nil; "" (the current directory) is always fine. The error starts with
// "--app-dir DIR", as the master prints a bad value.
func CheckAppDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--app-dir %s does not exist", dir)
	case err != nil:
		return fmt.Errorf("--app-dir %s cannot be read: %v", dir, unwrapPath(err))
	case !fi.IsDir():
		return fmt.Errorf("--app-dir %s is not a directory", dir)
	}
	return nil
}

// sameInstall reports whether the Python that made a virtualenv (its
// pyvenv.cfg keys cfg, home directory home) is the build's executable
// exe: the same file once symlinks are resolved, or the same directory.
func sameInstall(cfg map[string]string, home, version, exe string) bool {
	exeReal := resolve(exe)
	dirs := map[string]bool{resolve(filepath.Dir(exe)): true, filepath.Dir(exeReal): true}
	if dirs[resolve(home)] {
		return true
	}
	for _, p := range candidates(cfg, home, version) {
		if resolve(p) == exeReal {
			return true
		}
	}
	return false
}

// candidates are the interpreter paths a pyvenv.cfg names or implies: the
// executable key (venv, 3.11+), base-executable (virtualenv), then home's
// python3.X, python3 and python.
func candidates(cfg map[string]string, home, version string) []string {
	var out []string
	for _, k := range []string{"executable", "base-executable"} {
		if v := cfg[k]; v != "" {
			out = append(out, v)
		}
	}
	if home != "" {
		if m := minor(version); m != "" {
			out = append(out, filepath.Join(home, "python"+m))
		}
		out = append(out, filepath.Join(home, "python3"), filepath.Join(home, "python"))
	}
	return out
}

// madeBy names the Python that made the virtualenv, for the message: the
// first candidate that exists, else the first one, else pythonX.Y.
func madeBy(cfg map[string]string, home, version string) string {
	c := candidates(cfg, home, version)
	for _, p := range c {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if len(c) > 0 {
		return c[0]
	}
	return "python" + minor(version) // a pyvenv.cfg with a version but no path
}

// resolve is p with every symlink resolved, or p cleaned when it cannot
// be resolved (missing, or a directory this user cannot search).
func resolve(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// readConfig parses pyvenv.cfg: "key = value" lines, keys lower-cased
// (CPython's site.py reads it the same way).
func readConfig(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		cfg[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	return cfg, sc.Err()
}

// fullVersion is the "X.Y.Z" (or "X.Y") at the start of a pyvenv.cfg
// version: "3.11.7.final.0" → "3.11.7"; "" when it does not start with a
// number.
func fullVersion(v string) string {
	parts := strings.Split(v, ".")
	n := 0
	for n < len(parts) && n < 3 && parts[n] != "" && strings.Trim(parts[n], "0123456789") == "" {
		n++
	}
	if n == 0 {
		return ""
	}
	return strings.Join(parts[:n], ".")
}

// minor is "3.11" of "3.11.7", or v when it has no second part.
func minor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) >= 2 {
		return parts[0] + "." + parts[1]
	}
	return v
}

// unwrapPath drops an *fs.PathError's operation and path: the message
// names the path already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
