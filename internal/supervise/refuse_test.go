package supervise

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// After refuseSYN, a connection already established keeps talking, one
// already in the accept queue can still be accepted and talk, a new dial
// gets no answer, and once the socket is closed it is refused.
func TestRefuseSYN(t *testing.T) {
	// Plain TCP, as listen.Bind makes it: Go's net.Listen makes an
	// MPTCP socket where the kernel has it, and MPTCP refuses socket
	// filters (EOPNOTSUPP).
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	est, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	estSrv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer estSrv.Close()
	queued, err := net.Dial("tcp", addr) // completed, not yet accepted
	if err != nil {
		t.Fatal(err)
	}
	defer queued.Close()

	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	if err := refuseSYN(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// File() made the shared description blocking; Accept must not hang.
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))

	echo := func(c, s net.Conn, what string) {
		t.Helper()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		s.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatalf("%s: write: %v", what, err)
		}
		b := make([]byte, 4)
		if _, err := io.ReadFull(s, b); err != nil || string(b) != "ping" {
			t.Fatalf("%s: read %q, %v; want \"ping\"", what, b, err)
		}
	}
	echo(est, estSrv, "established connection")
	qs, err := ln.Accept()
	if err != nil {
		t.Fatalf("accepting the queued connection: %v", err)
	}
	defer qs.Close()
	echo(queued, qs, "queued connection")

	if c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a new connection completed its handshake after refuseSYN")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("new dial: %v; want a timeout (SYN dropped)", err)
	}

	ln.Close()
	_, err = net.DialTimeout("tcp", addr, 5*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after close: %v; want connection refused", err)
	}
}
