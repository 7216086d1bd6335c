package http1

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestHijack: after Hijack the server forgets the connection (not active,
// not in flight, not closed by Shutdown), bytes the client sent after the
// request come first from the returned Reader, and the handler may keep
// using the connection after it returns.
func TestHijack(t *testing.T) {
	got := make(chan string, 1)
	var ts *testServer
	ts = newTestServer(t, nil, func(w *ResponseWriter, r *Request) {
		conn, rw, err := w.Hijack()
		if err != nil {
			t.Errorf("Hijack = %v", err)
			return
		}
		if err := w.WriteSimple(200, "", nil, nil); err == nil {
			t.Errorf("WriteSimple after Hijack = nil; want an error")
		}
		if n := ts.ActiveConns(); n != 0 {
			t.Errorf("ActiveConns after Hijack = %d; want 0", n)
		}
		if n := ts.InFlight(); n != 0 {
			t.Errorf("InFlight after Hijack = %d; want 0", n)
		}
		go func() {
			defer conn.Close()
			line, _ := rw.ReadString('\n') // "pipelined\n", sent with the request
			rest := make([]byte, 5)
			io.ReadFull(rw, rest) // "later", sent after the handler returned
			got <- line + string(rest)
			rw.WriteString("bye\n")
			rw.Flush()
		}()
	})
	var ran = make(chan struct{})
	ts.RegisterOnShutdown(func() { close(ran) })

	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET /ws HTTP/1.1\r\nHost: x\r\n\r\npipelined\n"))
	time.Sleep(50 * time.Millisecond) // the handler has returned
	c.Write([]byte("later"))
	select {
	case s := <-got:
		if s != "pipelined\nlater" {
			t.Errorf("hijacked reader got %q; want %q", s, "pipelined\nlater")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("hijacked connection read nothing")
	}
	out, _ := io.ReadAll(bufio.NewReader(c))
	if string(out) != "bye\n" {
		t.Errorf("client read %q; want only %q (no response from the server)", out, "bye\n")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v; want nil (hijacked connections are not waited for)", err)
	}
	select {
	case <-ran:
	case <-time.After(time.Second):
		t.Error("RegisterOnShutdown function not called")
	}
}

// TestHijackRefused: a started response or an unread body cannot be
// hijacked, and the response goes on normally.
func TestHijackRefused(t *testing.T) {
	ts := newTestServer(t, nil, func(w *ResponseWriter, r *Request) {
		if string(r.Path) == "/started" {
			w.WriteSimple(200, "text/plain", []byte("ok"), nil)
		}
		if _, _, err := w.Hijack(); err != ErrHijacked {
			t.Errorf("Hijack on %s = %v; want ErrHijacked", r.Path, err)
		}
		if !w.Started() {
			w.WriteSimple(200, "text/plain", []byte("ok"), nil)
		}
	})
	for _, raw := range []string{
		"GET /started HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
	} {
		out, _ := ts.exchange(t, raw, time.Second)
		if !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(out, "ok") {
			t.Errorf("%q → %q; want a 200 with body ok", raw, out)
		}
	}
}
