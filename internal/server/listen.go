package server

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// Listen binds a TCP (host:port) or Unix (uds) listener with an explicit
// listen(2) backlog, which net.Listen does not expose.
func Listen(host string, port int, uds string, backlog int) (net.Listener, error) {
	if uds != "" {
		_ = os.Remove(uds) // a stale socket file from a previous run
		l, err := net.Listen("unix", uds)
		if err != nil {
			return nil, fmt.Errorf("server: listen on %s: %w", uds, err)
		}
		return l, nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("server: cannot resolve host %q: %v", host, err)
	}
	ip := ips[0]
	family, sa := syscall.AF_INET, syscall.Sockaddr(nil)
	if ip4 := ip.To4(); ip4 != nil {
		a := &syscall.SockaddrInet4{Port: port}
		copy(a.Addr[:], ip4)
		sa = a
	} else {
		family = syscall.AF_INET6
		a := &syscall.SockaddrInet6{Port: port}
		copy(a.Addr[:], ip.To16())
		sa = a
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("server: socket: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("server: SO_REUSEADDR: %w", err)
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("server: bind %s: %w", addr, err)
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("server: listen %s: %w", addr, err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("server: listener %s: %w", addr, err)
	}
	return l, nil
}
