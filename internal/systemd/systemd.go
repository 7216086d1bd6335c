// Package systemd is the two systemd protocols the master speaks, in a
// few lines of its own: socket activation (sd_listen_fds(3)) and service
// notification (sd_notify(3)).
package systemd

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ListenFDsStart is the first passed descriptor (SD_LISTEN_FDS_START).
const ListenFDsStart = 3

// Listener returns the listening socket systemd passed (fd 3) when
// LISTEN_PID is this process and LISTEN_FDS is at least 1, and nil
// otherwise. It unsets LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES, as
// sd_listen_fds(1) does, so that no child takes them for its own. The
// socket must be a listening stream socket (TCP or Unix: ListenStream=);
// more than one passed socket is an error (turnstile serves one). The
// file is close-on-exec; the caller owns it.
func Listener() (*os.File, error) {
	pid, fds := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS")
	if pid == "" || fds == "" {
		return nil, nil
	}
	defer func() {
		os.Unsetenv("LISTEN_PID")
		os.Unsetenv("LISTEN_FDS")
		os.Unsetenv("LISTEN_FDNAMES")
	}()
	if p, err := strconv.Atoi(pid); err != nil || p != os.Getpid() {
		return nil, nil // meant for another process
	}
	n, err := strconv.Atoi(fds)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("systemd: LISTEN_FDS=%q: want a count", fds)
	}
	if n == 0 {
		return nil, nil
	}
	if n > 1 {
		return nil, fmt.Errorf("systemd: socket activation passed %d sockets; turnstile serves one (one ListenStream= in the .socket unit)", n)
	}
	fd := ListenFDsStart
	unix.CloseOnExec(fd)
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return nil, fmt.Errorf("systemd: passed fd %d is not a socket: %w", fd, err)
	}
	if typ != unix.SOCK_STREAM {
		return nil, fmt.Errorf("systemd: passed fd %d is not a stream socket (ListenStream=)", fd)
	}
	if acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || acc == 0 {
		return nil, fmt.Errorf("systemd: passed fd %d is not listening (Accept=no is required)", fd)
	}
	return os.NewFile(uintptr(fd), "systemd-socket"), nil
}

// Notify sends state (newline-separated VAR=value lines: READY=1,
// RELOADING=1, STOPPING=1, STATUS=..., MAINPID=...) to the socket named
// by NOTIFY_SOCKET (a path, or an abstract name starting with @). It
// returns false, nil when NOTIFY_SOCKET is unset: not run by systemd.
func Notify(state string) (bool, error) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return false, nil
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("systemd: NOTIFY_SOCKET: %w", err)
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("systemd: NOTIFY_SOCKET: %w", err)
	}
	return true, nil
}

// MonotonicUsec is the MONOTONIC_USEC= value a RELOADING=1 message needs
// for Type=notify-reload (systemd 253).
func MonotonicUsec() string {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return strconv.FormatInt(ts.Sec*1_000_000+ts.Nsec/1000, 10)
}
