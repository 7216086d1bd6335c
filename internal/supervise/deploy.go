package supervise

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"turnstile/internal/listen"
	"turnstile/internal/systemd"
)

// Deployment: the listener systemd passes (socket activation), the
// service notifications (sd_notify), the workers' credentials (--user,
// --group) and --umask.
//
// Privileges: the master stays as started (root) and never runs app code
// (it never initialises Python); only the workers run as --user/--group,
// started with those credentials. So SIGHUP, --reload, SIGTTIN and
// respawns start new workers the same way at any time, the master still
// removes the --uds socket and the --pid-file at exit, and the listening
// socket, bound once, never needs binding again. This is gunicorn's
// choice.

// inUse turns a bind's EADDRINUSE into the one line that names the flag
// to change (uvicorn exits 1 on it too): "--port 8000 (or --bind):
// address already in use; give another, ...". Another error is err.
func inUse(err error, flag, what string) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	return fmt.Errorf("%s: address already in use; %s", flag, what)
}

// addressFlag names the flag that set the address served, with its
// value: --bind's, --uds's, or --port's.
func (m *Master) addressFlag() string {
	c := m.cfg
	switch {
	case len(c.Bind) > 0:
		return "--bind " + c.Bind[0]
	case c.UDS != "":
		return "--uds " + c.UDS
	}
	return "--port " + strconv.Itoa(c.Port) + " (or --bind)"
}

// bind returns the listening socket the workers inherit: the one systemd
// passed, or a new one bound from --host/--port or --uds.
func (m *Master) bind() (*os.File, string, error) {
	f, err := systemd.Listener()
	if err != nil {
		return nil, "", err
	}
	if f != nil {
		ln, err := net.FileListener(f) // a dup
		f.Close()
		if err != nil {
			return nil, "", fmt.Errorf("supervise: the socket systemd passed: %w", err)
		}
		m.activated = true
		addr := ln.Addr().String()
		if ln.Addr().Network() == "unix" {
			addr = "unix:" + addr
		}
		m.log.Info("using the socket systemd passed (socket activation); --host, --port and --uds are not used", "addr", addr)
		lf, err := listenerFile(ln)
		return lf, addr, err
	}
	ln, err := listen.Bind(m.cfg.Host, m.cfg.Port, m.cfg.UDS, m.cfg.Backlog)
	if err != nil {
		return nil, "", err
	}
	addr := ln.Addr().String()
	lf, err := listenerFile(ln)
	return lf, addr, err
}

// notify sends state to systemd when run as a Type=notify service.
func (m *Master) notify(state string) {
	if ok, err := systemd.Notify(state); err != nil {
		m.log.Warn("sd_notify", "err", err)
	} else if ok {
		m.log.Debug("sd_notify", "state", strings.ReplaceAll(state, "\n", " "))
	}
}

func (m *Master) notifyReady() {
	m.notify(fmt.Sprintf("READY=1\nMAINPID=%d\nSTATUS=serving on %s with %d workers", os.Getpid(), m.addr, m.want))
}

// reloadDone tells systemd a rolling restart (SIGHUP, --reload) has
// ended, once no replacement runs or waits for one.
func (m *Master) reloadDone() {
	if !m.reloading || m.replacing != nil || m.phase != phaseRunning {
		return
	}
	for _, r := range m.pending {
		if r.cause == "hup" || r.cause == "reload" {
			return
		}
	}
	m.reloading = false
	m.notifyReady()
}

// applyUmask sets --umask, before the master creates any file or socket.
func applyUmask(v int) int { return syscall.Umask(v) }

// ownDir gives the worker admin socket directory to the workers' user,
// who creates its socket there.
func (m *Master) ownDir() error {
	if m.cred == nil || m.dir == "" {
		return nil
	}
	if err := os.Chown(m.dir, int(m.cred.Uid), int(m.cred.Gid)); err != nil {
		return fmt.Errorf("supervise: worker admin socket directory: %w", err)
	}
	return nil
}

// childEnv drops the variables meant for the master alone: systemd's
// (a worker that notified or took LISTEN_FDS would confuse systemd).
func childEnv(env []string) []string {
	out := env[:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func credString(c *syscall.Credential) string {
	if c == nil {
		return ""
	}
	return strconv.Itoa(int(c.Uid)) + ":" + strconv.Itoa(int(c.Gid))
}

func systemdMonotonic() string { return systemd.MonotonicUsec() }
