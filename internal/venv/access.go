package venv

// What a worker run as --user/--group must be able to read, checked by the
// master (as root) before it forks (issue 28): with pyenv's Python under
// /root (mode 0700) and --user nobody, the dynamic loader cannot reach the
// build's libpython through the rpath and silently takes the distribution's
// libpython of the same soname (Debian's 3.11.2 under a 3.11.7 build), with
// the other standard library; an app directory the user cannot read is a
// worker that fails at import, restarted in a loop.

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Access bits of a permission check (the "other" triplet of a mode).
const (
	accessRead   = 4
	accessSearch = 1 // a directory's x: search; a file's: execute
)

// Worker names the files a worker reads to start CPython and import the
// app.
type Worker struct {
	// Python is sys.executable, as Python returns it: the virtualenv's
	// bin/python, or the build's own python. Required.
	Python string
	// Venv is the virtualenv directory (absolute), "" for none.
	Venv string
	// AppDir is the directory put on sys.path (absolute). Required.
	AppDir string
}

// CheckAccess reports the first file of w, of this binary's libpython and
// of the build's standard library that a process with cred cannot read,
// as one line for the master to print (exit 2): the path, the directory
// or file that stops it with its mode and owner, and the fix. who names
// the user as given ("--user nobody"). nil when cred is nil or uid 0 (root
// reads everything), or when every file is readable. Permissions are the
// mode bits (owner, group, other; ACLs are not read); a file that does
// not exist is left to the checks that look for it.
func CheckAccess(who string, cred *syscall.Credential, b Build, w Worker) error {
	if cred == nil || cred.Uid == 0 {
		return nil
	}
	buildFix := "build turnstile against a Python installed where that user can read it (make build PYTHON=..., " +
		"e.g. one under /usr/local or /opt: pyenv's versions under /root are not) and make the virtualenv with that Python"
	type need struct {
		path, what, fix string
		want            uint32
	}
	var needs []need
	if lib := linkedLibpython(); lib != "" {
		needs = append(needs, need{lib, "the libpython this binary is built with: a worker would load another libpython of the same soname, or none",
			buildFix, accessRead})
	}
	if b.Executable != "" {
		prefix := filepath.Dir(filepath.Dir(resolve(b.Executable)))
		needs = append(needs, need{filepath.Join(prefix, "lib", "python"+b.Minor()), "the standard library of the build's Python",
			buildFix, accessRead | accessSearch})
	}
	needs = append(needs, need{w.Python, "the Python a worker starts as (sys.executable)", buildFix, accessSearch})
	if w.Venv != "" {
		fix := "make the virtualenv where that user can read it, or give it read access (chmod -R o+rX, or chown to it)"
		needs = append(needs,
			need{filepath.Join(w.Venv, "pyvenv.cfg"), "the virtualenv's pyvenv.cfg", fix, accessRead},
			need{w.Venv, "the virtualenv", fix, accessRead | accessSearch})
	}
	needs = append(needs, need{w.AppDir, "the app directory (--app-dir, or the current directory)",
		"give that user read access to it (chmod o+rX, or chown to it), or serve the app from a directory it can read", accessRead | accessSearch})
	for _, n := range needs {
		if _, err := os.Stat(n.path); err != nil {
			continue
		}
		block, fi, leaf := blocked(n.path, n.want, cred)
		if block == "" {
			continue
		}
		verb, at := "search", ""
		switch {
		case leaf && n.want&accessRead != 0:
			verb = "read"
		case leaf && !fi.IsDir():
			verb = "execute"
		}
		if block != n.path {
			at = " on the way to " + n.path
		}
		return fmt.Errorf("%s cannot %s %s (%s %s)%s, %s; %s", who, verb, block, fi.Mode(), owner(fi), at, n.what, n.fix)
	}
	return nil
}

// blocked returns the first path on the way to p (each directory from /,
// then p itself; the literal path, then the one with symlinks resolved)
// that cred may not use: a directory it cannot search, or p without the
// access bits want (leaf). "" when none.
func blocked(p string, want uint32, cred *syscall.Credential) (path string, fi fs.FileInfo, leaf bool) {
	paths := []string{filepath.Clean(p)}
	if r, err := filepath.EvalSymlinks(p); err == nil && r != paths[0] {
		paths = append(paths, r)
	}
	for _, path = range paths {
		dir := "/"
		parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
		for i, part := range parts {
			if i > 0 {
				if fi, err := os.Stat(dir); err == nil && fi.IsDir() && !permits(fi, accessSearch, cred) {
					return dir, fi, false
				}
			}
			dir = filepath.Join(dir, part)
		}
		if fi, err := os.Stat(path); err == nil && !permits(fi, want, cred) {
			return path, fi, true
		}
	}
	return "", nil, false
}

// permits reports whether cred has the access bits want on fi, as the
// kernel decides from the mode: the owner's triplet for the owner, the
// group's for a member of the group, else the others'.
func permits(fi fs.FileInfo, want uint32, cred *syscall.Credential) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := uint32(fi.Mode().Perm())
	switch {
	case st.Uid == cred.Uid:
		mode >>= 6
	case inGroup(st.Gid, cred):
		mode >>= 3
	}
	return mode&want == want
}

func inGroup(gid uint32, cred *syscall.Credential) bool {
	if gid == cred.Gid {
		return true
	}
	for _, g := range cred.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

// owner is fi's "user:group", names where the system has them.
func owner(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	u, g := strconv.Itoa(int(st.Uid)), strconv.Itoa(int(st.Gid))
	if pw, err := user.LookupId(u); err == nil {
		u = pw.Username
	}
	if gr, err := user.LookupGroupId(g); err == nil {
		g = gr.Name
	}
	return u + ":" + g
}

// linkedLibpython is the libpython this binary loads through its rpath
// (DT_RUNPATH or DT_RPATH, set by the Makefile to the build Python's
// LIBDIR, joined with the DT_NEEDED libpython soname), "" when the binary
// has no rpath or no such file there.
func linkedLibpython() string {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return ""
	}
	defer f.Close()
	needed, _ := f.DynString(elf.DT_NEEDED)
	soname := ""
	for _, n := range needed {
		if strings.HasPrefix(n, "libpython") {
			soname = n
		}
	}
	if soname == "" {
		return ""
	}
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		v, _ := f.DynString(tag)
		for _, list := range v {
			for _, dir := range strings.Split(list, ":") {
				p := filepath.Join(dir, soname)
				if _, err := os.Stat(p); err == nil {
					return p
				} else if !errors.Is(err, fs.ErrNotExist) {
					return p
				}
			}
		}
	}
	return ""
}
