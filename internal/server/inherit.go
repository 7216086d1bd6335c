package server

import (
	"log/slog"
	"net"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"turnstile/internal/config"
	"turnstile/internal/listen"
	"turnstile/internal/workerctl"
)

// What a worker inherits from the master (internal/supervise): the
// variables, file descriptors and control messages of internal/workerctl.

// workerMode is set by RunWorker before Run: how this worker differs from
// a server that binds its own sockets.
type workerMode struct {
	id  string
	ctl *control
}

// worker is nil unless RunWorker runs this process.
var worker *workerMode

// workerID and workerAdmin are workerctl.EnvWorker and EnvWorkerAdmin as
// this process started with: init takes both out of the environment.
var workerID, workerAdmin = os.Getenv(workerctl.EnvWorker), os.Getenv(workerctl.EnvWorkerAdmin)

// IsWorker reports whether the environment this process started with
// says it is a worker started by the master.
func IsWorker() bool { return workerID != "" }

// RunWorker runs this process as worker workerctl.EnvWorker of a master:
// it listens on the inherited workerctl.ListenerFD, serves its admin
// handler on the Unix socket EnvWorkerAdmin, and reports on ControlFD:
// Ready once it serves, or Failed with the last error it logged when it
// exits before. It returns the process exit status, like Run.
func RunWorker(cfg *config.Config, log *slog.Logger) int {
	id := workerID
	ctl, err := openControl(workerctl.ControlFD)
	if err != nil {
		log.Error(err.Error())
		return ExitFailed
	}
	if path := workerAdmin; path != "" {
		cfg.AdminBind = "unix:" + path
	} else {
		cfg.AdminBind = "off"
	}
	last := newLastError(log.Handler())
	// An integer, as in the master's records: one JSON type per field.
	n, _ := strconv.Atoi(id)
	log = slog.New(last).With("worker", n)
	worker = &workerMode{id: id, ctl: ctl}
	code := Run(cfg, log)
	if code != ExitOK && !ctl.wasReady() {
		ctl.failed(last.text())
	}
	return code
}

// workerMsg names a start-up record: a worker says "worker listening"
// where a lone server says "listening", so that only the master's records
// announce the server's addresses.
func workerMsg(msg string) string {
	if worker != nil {
		return "worker " + msg
	}
	return msg
}

// workerReady tells the master this worker serves.
func workerReady() {
	if worker != nil {
		worker.ctl.ready()
	}
}

// listener returns the inherited listener in a worker, else binds cfg's.
// In a worker the listener is wrapped in the accept gate (gate.go).
func listener(cfg *config.Config) (net.Listener, error) {
	if worker == nil {
		return listen.Bind(cfg.Host, cfg.Port, cfg.UDS, cfg.Backlog)
	}
	ln, err := listen.Inherited(workerctl.ListenerFD)
	if err != nil {
		return nil, err
	}
	return newGate(ln, gateModeFor(cfg.Switches.Gate, cfg.Workers), cfg.QueueTimeout), nil
}

// ownsUDS reports whether this process removes cfg.UDS at exit: the
// master owns the socket file when there are workers.
func ownsUDS(cfg *config.Config) bool { return cfg.UDS != "" && worker == nil }

func init() {
	// Descriptors inherited from the master must not leak into processes
	// the app starts (subprocess, multiprocessing).
	if IsWorker() {
		syscall.CloseOnExec(workerctl.ListenerFD)
		syscall.CloseOnExec(workerctl.ControlFD)
		syscall.CloseOnExec(workerctl.LayerFD) // EBADF from an older master: harmless
		setProcessName("turnstile-w" + workerID)
		unsetWorkerEnv()
	}
}

// setProcessName sets the name ps -e and top show for this process (the
// kernel's comm, 15 bytes at most), which is "exe" for a worker the master
// started through /proc/self/exe. It runs in package init, before Python
// starts a thread: every thread there is Go's, and each is renamed, since
// internal/sysmon tells Go's threads from Python's (ts-py-N, ts-loop-0) by
// the main thread's name; threads started later inherit it. The command
// line ps -f shows is the master's argv[0] (supervise: "turnstile: worker
// N [app]").
func setProcessName(name string) {
	if len(name) > 15 {
		name = name[:15]
	}
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(unsafe.StringData(name+"\x00"))), 0, 0, 0)
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		_ = os.WriteFile("/proc/self/task/"+t.Name()+"/comm", []byte(name), 0)
	}
}

// unsetWorkerEnv takes the worker's own variables (read above) out of the
// environment before Python copies it into os.environ: a turnstile the
// app starts (a subprocess inherits os.environ) would otherwise believe
// it is a worker and look for a listener on fd 3. os.Unsetenv calls C
// unsetenv (cgo), so the C environ Python reads loses them too.
// TURNSTILE_WORKER_SETTINGS is taken out by cmd/turnstile once read.
func unsetWorkerEnv() {
	os.Unsetenv(workerctl.EnvWorker)
	os.Unsetenv(workerctl.EnvWorkerAdmin)
}
