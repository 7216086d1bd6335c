package python

// The running libpython versus the one this binary was built against: the
// rpath (DT_RUNPATH) names the build's LIBDIR, but when the worker's user
// cannot search that directory (a build against /root/.pyenv, mode 0700,
// run with --user nobody) the dynamic loader silently takes another
// libpython of the same soname, e.g. the distribution's.

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <Python.h>

static const char *ts_libpython_path(void) {
	Dl_info info;
	if (dladdr((void *)&Py_GetVersion, &info) && info.dli_fname != NULL)
		return info.dli_fname;
	return NULL;
}
*/
import "C"

import (
	"debug/elf"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// LoadedLibrary returns the path of the libpython this process loaded, ""
// when the dynamic loader cannot say. Safe before Start.
func LoadedLibrary() string {
	if p := C.ts_libpython_path(); p != nil {
		return C.GoString(p)
	}
	return ""
}

// buildRunpath returns this binary's DT_RUNPATH (or DT_RPATH): the build
// Python's LIBDIR set by the Makefile. "" when the binary cannot be read.
func buildRunpath() string {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		if v, err := f.DynString(tag); err == nil && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// VersionMismatch returns the attributes of a warning (slog key/value
// pairs) when the running CPython's version ("3.11.2") differs from
// BuildVersion ("3.11.7"), nil when they are equal. The likely cause it
// names: the build's libpython directory is not searchable by this
// process's user, so another libpython was loaded.
func VersionMismatch() []any {
	running := strings.SplitN(RuntimeVersion(), " ", 2)[0]
	if running == BuildVersion {
		return nil
	}
	dir := buildRunpath()
	searchable := dir == "" || unix.Access(dir, unix.R_OK|unix.X_OK) == nil
	return mismatchAttrs(running, BuildVersion, LoadedLibrary(), dir, searchable, os.Geteuid())
}

// mismatchAttrs builds VersionMismatch's attributes; nil when running ==
// built.
func mismatchAttrs(running, built, loaded, dir string, searchable bool, uid int) []any {
	if running == built {
		return nil
	}
	var cause string
	switch {
	case dir != "" && !searchable:
		cause = fmt.Sprintf("the build's libpython directory %s is not readable by this worker's user (uid %d; "+
			"check each parent directory, e.g. /root is 0700), so the dynamic loader took another libpython: "+
			"build against a Python the --user can read, or make that directory readable", dir, uid)
	case dir != "":
		cause = fmt.Sprintf("another libpython was found before the build's %s (LD_LIBRARY_PATH?), "+
			"or that directory is not readable by this worker's user (uid %d)", dir, uid)
	default:
		cause = fmt.Sprintf("the build's libpython directory is probably not readable by this worker's user (uid %d), "+
			"so the dynamic loader took another libpython", uid)
	}
	return []any{"python", running, "built_for", built, "libpython", loaded, "build_libdir", dir, "likely_cause", cause}
}
