package tests

// Slow request bodies (case B40): a client trickling a body must neither
// hold a Python thread nor stay connected forever.

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestB40_SmallSlowBodyHoldsNoThread: with one pool thread, a client that
// trickles a small body does not keep other requests waiting: Go reads the
// body ahead (up to 64 KiB) before a Python thread is involved.
func TestB40_SmallSlowBodyHoldsNoThread(t *testing.T) {
	s := Start(t, "--blocking-threads", "1", "echo:app")
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n"))
	stop := make(chan struct{})
	go func() {
		for i := 0; i < 20; i++ {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				c.Write([]byte("x"))
			}
		}
	}()
	defer close(stop)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	code, body := s.Get(t, "/fast")
	if code != 200 || !strings.Contains(body, `"path": "/fast"`) {
		t.Fatalf("GET /fast = %d %q", code, body)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("GET /fast took %v while a body trickled in: the pool thread was held", d)
	}
}

// TestB40_MinBodyRate: a body trickled at 10 B/s is cut with 408 soon
// after the 5 s grace, though each byte beats the inactivity timeout.
func TestB40_MinBodyRate(t *testing.T) {
	s := Start(t, "--timeout-body", "30s", "echo:app")
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("POST /trickle HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n"))
	start := time.Now()
	done := make(chan string, 1)
	go func() {
		got, _ := ReadAll(c, 15*time.Second)
		done <- got
	}()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case got := <-done:
			elapsed := time.Since(start)
			if codes := StatusCodes(got); len(codes) != 1 || codes[0] != "408" {
				t.Errorf("status codes = %v; want [408]\n%q", codes, got)
			}
			if elapsed > 9*time.Second {
				t.Errorf("cut after %v; want soon after the 5 s grace", elapsed)
			}
			return
		case <-ticker.C:
			c.Write([]byte("x")) // 10 bytes per second
		case <-time.After(20 * time.Second):
			t.Fatal("the trickling body was never cut")
		}
	}
}
