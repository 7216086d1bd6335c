package python

/*
#include <stdlib.h>
#include "tspy.h"

static const char *ts_runtime_version(void) { return Py_GetVersion(); }
static long ts_runtime_hex(void) { return (long)Py_Version; }
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"unsafe"
)

// BuildExecutable is the python executable of the CPython this binary was
// built against (set by the Makefile with -ldflags -X). Without a virtualenv
// it becomes sys.executable, so the standard library is the build's own.
var BuildExecutable string

// BuildVersion is the CPython version in the headers this binary was
// compiled with, "3.11.7".
var BuildVersion = fmt.Sprintf("%d.%d.%d", C.PY_MAJOR_VERSION, C.PY_MINOR_VERSION, C.PY_MICRO_VERSION)

// BuildMinor is "3.11": the binary only runs with this minor version.
var BuildMinor = fmt.Sprintf("%d.%d", C.PY_MAJOR_VERSION, C.PY_MINOR_VERSION)

// RuntimeVersion returns sys.version of the libpython loaded at run time.
// Safe before Start.
func RuntimeVersion() string { return C.GoString(C.ts_runtime_version()) }

// ErrVersionMismatch is returned by Start when the loaded libpython is not
// the minor version the binary was built for.
var ErrVersionMismatch = errors.New("python: loaded libpython is not the version this binary was built for")

// Error is a Python exception carried into Go: the formatted traceback
// (or, for a load failure the bootstrap explains, one line).
type Error struct {
	Text string
}

func (e *Error) Error() string { return e.Text }

var logger atomic.Pointer[slog.Logger]

// SetLogger sets where Python's output and the bridge's records go.
func SetLogger(l *slog.Logger) { logger.Store(l) }

// Logger returns the logger set by SetLogger, or slog.Default().
func Logger() *slog.Logger {
	if l := logger.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// Config is what Start needs to initialise CPython and load the app.
type Config struct {
	ProgramName    string  // sys.executable: a virtualenv's bin/python or BuildExecutable. Required.
	Bootstrap      string  // source of python/turnstile/_bootstrap.py. Required.
	AppDir         string  // put first on sys.path; "" = none
	AppSpec        string  // MODULE:ATTR. Required.
	Factory        bool    // call ATTR to get the app
	Interface      string  // auto, wsgi or asgi
	SwitchInterval float64 // seconds, sys.setswitchinterval; 0 = CPython's default (0.005)
	Workers        int     // worker processes, for wsgi.multiprocess
	// LogConfig is a logging configuration file the bootstrap applies
	// before the app is imported ("" = none), read as LogConfigKind says:
	// "json" or "yaml" (logging.config.dictConfig), "ini" (fileConfig).
	LogConfig, LogConfigKind string
	// AfterLoad are C functions `int f(void)` run in order on the main
	// Python thread after the app loaded (attached; -1 with an exception
	// set on failure): the interface packages' setup. At most 4.
	AfterLoad []unsafe.Pointer
}

var started atomic.Bool

// Start initialises CPython on its own main thread, runs the bootstrap and
// loads the app. It blocks until that is done and returns the interface the
// app speaks ("wsgi" or "asgi"), or an *Error with the traceback, or
// ErrVersionMismatch. Start may be called once per process.
func Start(cfg Config) (kind string, err error) {
	if !started.CompareAndSwap(false, true) {
		return "", errors.New("python: Start called twice")
	}
	hex := int64(C.ts_runtime_hex())
	if hex>>16 != int64(C.PY_VERSION_HEX)>>16 {
		return "", fmt.Errorf("%w: built for %s, loaded %s", ErrVersionMismatch, BuildVersion, RuntimeVersion())
	}
	cs := func(s string) *C.char { return C.CString(s) }
	c := (*C.ts_interp_config)(C.calloc(1, C.size_t(unsafe.Sizeof(C.ts_interp_config{}))))
	// The strings and the struct stay allocated: the main thread keeps cfg.
	c.program_name = cs(cfg.ProgramName)
	c.bootstrap_src = cs(cfg.Bootstrap)
	c.app_dir = cs(cfg.AppDir)
	c.app_spec = cs(cfg.AppSpec)
	if cfg.Factory {
		c.factory = 1
	}
	c._interface = cs(cfg.Interface)
	c.switch_interval = C.double(cfg.SwitchInterval)
	c.workers = C.int(cfg.Workers)
	c.log_config = cs(cfg.LogConfig)
	c.log_config_kind = cs(cfg.LogConfigKind)
	for i, f := range cfg.AfterLoad {
		c.after_load[i] = (*[0]byte)(f)
	}

	var ckind, cerr *C.char
	if C.ts_interp_start(c, &ckind, &cerr) != 0 {
		text := "python: start-up failed"
		if cerr != nil {
			text = strings.TrimRight(C.GoString(cerr), "\n")
			C.free(unsafe.Pointer(cerr))
		}
		return "", &Error{Text: text}
	}
	kind = C.GoString(ckind)
	C.free(unsafe.Pointer(ckind))
	return kind, nil
}

// Shutdown runs atexit handlers and logging.shutdown() on the main Python
// thread and flushes Python's stdio. It does not finalise the interpreter
// (DESIGN.md: after Py_FinalizeEx a thread that attaches exits through
// pthread_exit). Call it after the pool has stopped.
func Shutdown() {
	if started.Load() {
		C.ts_interp_shutdown()
	}
}
