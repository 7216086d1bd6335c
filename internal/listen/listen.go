// Package listen opens the sockets turnstile serves on: the HTTP listener
// a lone server or the master binds (Bind), the one a worker inherits from
// the master (Inherited, at workerctl.ListenerFD), the admin listener
// (Admin), and HTTP/3's UDP sockets (BindUDP: one per worker slot in a
// SO_REUSEPORT group, which the master binds and a worker inherits at
// workerctl.QUICFD; PacketConn). It is pure Go (no cgo): the master (internal/supervise) binds
// with it and links no Python; internal/server wraps what it returns (the
// accept gate, the PROXY protocol reader, TLS).
package listen

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Bind binds a TCP (host:port) or Unix (uds, when not empty) listener with
// an explicit listen(2) backlog (connections), which net.Listen does not
// expose. A stale socket file at uds is removed first. Host is resolved
// and its first address taken; SO_REUSEADDR is set. The socket is
// close-on-exec.
func Bind(host string, port int, uds string, backlog int) (net.Listener, error) {
	if uds != "" {
		_ = os.Remove(uds) // a stale socket file from a previous run
		l, err := net.Listen("unix", uds)
		if err != nil {
			return nil, fmt.Errorf("listen: listen on %s: %w", uds, err)
		}
		return l, nil
	}
	family, sa, err := sockaddr(host, port)
	if err != nil {
		return nil, err
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("listen: socket: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("listen: SO_REUSEADDR: %w", err)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("listen: bind %s: %w", addr, err)
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("listen: listen %s: %w", addr, err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("listen: listener %s: %w", addr, err)
	}
	return l, nil
}

// Inherited returns the listening socket at fd, inherited from the parent
// (the master's listener in a worker, at workerctl.ListenerFD), as a
// net.Listener over a close-on-exec dup; fd itself is closed.
func Inherited(fd uintptr) (net.Listener, error) {
	f := os.NewFile(fd, "listener")
	ln, err := net.FileListener(f) // a dup with close-on-exec
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("listen: inherited listener (fd %d): %w", fd, err)
	}
	return ln, nil
}

// Admin binds the admin listener (/livez, /readyz, /metrics) at bind:
// host:port, or unix:/path (a stale socket file there is removed first).
func Admin(bind string) (net.Listener, error) {
	var ln net.Listener
	var err error
	if path, ok := strings.CutPrefix(bind, "unix:"); ok {
		_ = os.Remove(path)
		ln, err = net.Listen("unix", path)
	} else {
		ln, err = net.Listen("tcp", bind)
	}
	if err != nil {
		return nil, fmt.Errorf("listen: admin listener %s: %w", bind, err)
	}
	return ln, nil
}

// BindUDP binds a UDP socket on host:port for QUIC (HTTP/3) with
// SO_REUSEPORT, so that several can share the port as one reuseport
// group: the kernel hands each datagram to one of them by a hash of its
// source and destination addresses and ports, the same socket for every
// datagram of one client address as long as the group does not change.
// The master binds one per worker slot (internal/supervise), a lone
// server one. The socket is close-on-exec; the caller owns the file.
func BindUDP(host string, port int) (*os.File, error) {
	family, sa, err := sockaddr(host, port)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	fd, err := syscall.Socket(family, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("listen: udp socket: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("listen: SO_REUSEPORT: %w", err)
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("listen: bind udp %s: %w", addr, err)
	}
	return os.NewFile(uintptr(fd), "quic"), nil
}

// PacketConn returns the UDP socket f (BindUDP's, or inherited at
// workerctl.QUICFD) as a *net.UDPConn over a close-on-exec dup; f itself
// is closed.
func PacketConn(f *os.File) (*net.UDPConn, error) {
	fd := f.Fd()
	pc, err := net.FilePacketConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("listen: udp socket (fd %d): %w", fd, err)
	}
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		pc.Close()
		return nil, fmt.Errorf("listen: fd %d is not a UDP socket", fd)
	}
	return uc, nil
}

// sockaddr resolves host (its first address) into the socket family and
// address to bind port on, for Bind and BindUDP.
func sockaddr(host string, port int) (int, syscall.Sockaddr, error) {
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return 0, nil, fmt.Errorf("listen: cannot resolve host %q: %v", host, err)
	}
	ip := ips[0]
	if ip4 := ip.To4(); ip4 != nil {
		a := &syscall.SockaddrInet4{Port: port}
		copy(a.Addr[:], ip4)
		return syscall.AF_INET, a, nil
	}
	a := &syscall.SockaddrInet6{Port: port}
	copy(a.Addr[:], ip.To16())
	return syscall.AF_INET6, a, nil
}
