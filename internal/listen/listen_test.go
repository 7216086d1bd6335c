package listen

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestBindTCP(t *testing.T) {
	ln, err := Bind("127.0.0.1", 0, "", 16)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := Bind("127.0.0.1", ln.Addr().(*net.TCPAddr).Port, "", 16); err == nil {
		t.Error("Bind on a port in use: no error")
	}
	if _, err := Bind("no-such-host.invalid", 0, "", 16); err == nil {
		t.Error("Bind on an unresolvable host: no error")
	}
}

func TestBindUnixStale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil { // a stale file
		t.Fatal(err)
	}
	ln, err := Bind("", 0, path, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ln.Addr().Network() != "unix" {
		t.Errorf("network %s; want unix", ln.Addr().Network())
	}
}

func TestAdmin(t *testing.T) {
	for _, bind := range []string{"127.0.0.1:0", "unix:" + filepath.Join(t.TempDir(), "a.sock")} {
		ln, err := Admin(bind)
		if err != nil {
			t.Fatalf("Admin(%q): %v", bind, err)
		}
		ln.Close()
	}
	if _, err := Admin("127.0.0.1:bad"); err == nil {
		t.Error("Admin on a bad address: no error")
	}
}

// Inherited takes a listening socket at a descriptor, as a worker takes
// the master's at workerctl.ListenerFD, and closes that descriptor.
func TestInherited(t *testing.T) {
	ln, err := Bind("127.0.0.1", 0, "", 16)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	n, err := syscall.Dup(int(f.Fd())) // a descriptor no *os.File owns
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	fd := uintptr(n)
	in, err := Inherited(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.Addr().String() != ln.Addr().String() {
		t.Errorf("Inherited addr %s; want %s", in.Addr(), ln.Addr())
	}
	if _, err := syscall.Dup(int(fd)); err == nil {
		t.Errorf("fd %d still open after Inherited", fd)
	}
}
