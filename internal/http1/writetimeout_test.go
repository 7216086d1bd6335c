package http1

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bigServer answers /big with n bytes written in one ResponseWriter.Write
// (as an ASGI app sending its body in one message does) and reports that
// Write's error and duration on done; other paths get a small 200.
func bigServer(t *testing.T, writeTimeout time.Duration, n int) (*testServer, chan writeResult) {
	done := make(chan writeResult, 1)
	body := make([]byte, n)
	ts := newTestServer(t, func(s *Server) { s.WriteTimeout = writeTimeout }, func(w *ResponseWriter, r *Request) {
		if string(r.Path) != "/big" {
			w.WriteSimple(200, "text/plain", []byte("ok\n"), nil)
			return
		}
		w.WriteHead(200, []byte("200 OK"), nil, int64(n), false)
		start := time.Now()
		_, err := w.Write(body)
		if err == nil {
			err = w.Flush()
		}
		done <- writeResult{err, time.Since(start)}
	})
	return ts, done
}

type writeResult struct {
	err error
	d   time.Duration
}

// dialSmallWindow dials addr with a 16 KiB receive buffer, so that a
// client that does not read stalls the server's writes quickly.
func dialSmallWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		})
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServer_WriteTimeout: a client that stops reading a large response
// is dropped once one socket write has been blocked for WriteTimeout, and
// the server keeps serving others meanwhile (case B40, slow readers); a
// client that reads slowly but steadily gets the whole body even when it
// takes far longer than WriteTimeout (each 64 KiB step has its own
// deadline, not the whole Write).
func TestServer_WriteTimeout(t *testing.T) {
	t.Run("stalled-reader", func(t *testing.T) {
		const timeout = 300 * time.Millisecond
		ts, done := bigServer(t, timeout, 32<<20)
		c := dialSmallWindow(t, ts.addr)
		defer c.Close()
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n") // and never read
		start := time.Now()

		// Others are served while the write is stuck.
		if out, _ := ts.exchange(t, "GET /other HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3*time.Second); !strings.HasSuffix(out, "ok\n") {
			t.Errorf("another client during the stalled write got %q", out)
		}
		var res writeResult
		select {
		case res = <-done:
		case <-time.After(timeout + 5*time.Second):
			t.Fatalf("the write to a client that does not read was not given up within %v", timeout+5*time.Second)
		}
		if !errors.Is(res.err, ErrClientGone) {
			t.Errorf("Write error = %v; want ErrClientGone", res.err)
		}
		if res.d > timeout+3*time.Second {
			t.Errorf("the write gave up after %v; want about %v", res.d, timeout)
		}
		for ts.ActiveConns() != 0 && time.Since(start) < 10*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		if n := ts.ActiveConns(); n != 0 {
			t.Errorf("ActiveConns = %d after the write timeout; want 0", n)
		}
		if out, _ := ts.exchange(t, "GET /after HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3*time.Second); !strings.HasSuffix(out, "ok\n") {
			t.Errorf("a client after the write timeout got %q", out)
		}
	})

	t.Run("slow-steady-reader", func(t *testing.T) {
		// 16 MiB read 64 KiB per 10 ms takes about 2.6 s; each step of the
		// one 16 MiB Write waits about 10 ms for the reader.
		const size = 16 << 20
		ts, done := bigServer(t, 750*time.Millisecond, size)
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		br := bufio.NewReaderSize(c, 64<<10)
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		var got int
		buf := make([]byte, 64<<10)
		for {
			n, err := io.ReadFull(resp.Body, buf)
			got += n
			if err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got != size {
			t.Errorf("read %d body bytes; want %d", got, size)
		}
		if res := <-done; res.err != nil {
			t.Errorf("Write to a steady reader failed after %v: %v", res.d, res.err)
		}
	})
}

// TestServer_WriteDeadlineNotLeftArmed: a write deadline armed for a
// response that had to wait for the client (its socket buffer full) must
// not outlive that response: on a kept-alive connection idle for longer
// than WriteTimeout, the next response is written, not failed at once by
// the old deadline having passed.
func TestServer_WriteDeadlineNotLeftArmed(t *testing.T) {
	const timeout = 300 * time.Millisecond
	const size = 4 << 20
	ts, done := bigServer(t, timeout, size)
	c := dialSmallWindow(t, ts.addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(c, 64<<10)
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(50 * time.Millisecond) // the server's write fills the buffers and waits
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, resp.Body); n != size || err != nil {
		t.Fatalf("big body: %d bytes, %v; want %d", n, err, size)
	}
	if res := <-done; res.err != nil {
		t.Fatalf("big write: %v", res.err)
	}
	time.Sleep(3 * timeout) // past any deadline the big write armed
	io.WriteString(c, "GET /small HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err = http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatalf("the response after an idle spell longer than WriteTimeout: %v", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16))
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Errorf("after the idle spell: %d %q; want 200 \"ok\\n\"", resp.StatusCode, body)
	}
}

// TestServer_SendFileDeadlineNotLeftArmed: the same for a file sent with
// sendfile(2), whose write deadline is armed before it starts.
func TestServer_SendFileDeadlineNotLeftArmed(t *testing.T) {
	const timeout = 300 * time.Millisecond
	f, err := os.CreateTemp(t.TempDir(), "file")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("file\n")
	ts := newTestServer(t, func(s *Server) { s.WriteTimeout = timeout }, func(w *ResponseWriter, r *Request) {
		if string(r.Path) != "/file" {
			w.WriteSimple(200, "text/plain", []byte("ok\n"), nil)
			return
		}
		w.WriteHead(200, []byte("200 OK"), nil, 5, false)
		w.SendFile(f, 0, 5)
	})
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	for i, path := range []string{"/file", "/small"} {
		if i > 0 {
			time.Sleep(3 * timeout) // past the deadline the sendfile armed
		}
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || len(body) == 0 {
			t.Errorf("GET %s: %d %q", path, resp.StatusCode, body)
		}
	}
}
