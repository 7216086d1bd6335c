package websocket

// Sessions end to end without Python: an http1.Server on a loopback
// listener upgrades with Upgrader and runs each Session against testApp,
// which stands for the ASGI adapter; the client writes raw frames.

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"turnstile/internal/http1"
)

// ---- the server side ---------------------------------------------------------

type message struct {
	text bool
	data string
}

type closeInfo struct {
	code   int
	reason string
}

// testApp is the App of one session: it records what the session
// delivers, echoes it when asked, and runs the writer goroutine (the
// adapter's writeLoop) that calls Finish once the reader is done.
type testApp struct {
	sess    *Session
	echo    bool
	deliver func(n int) Delivery // what Deliver returns for the n-th message (from 1); nil: Delivered

	mu    sync.Mutex
	n     int
	got   chan message   // delivered messages
	disc  chan closeInfo // the first Disconnect
	once  sync.Once
	ops   chan func() // run on the writer goroutine
	done  chan struct{}
	ended chan struct{} // Finish was called
}

func (a *testApp) Deliver(text bool, data []byte) Delivery {
	m := message{text, string(data)}
	a.got <- m
	if a.echo {
		a.write(func() { a.sess.Send(m.text, []byte(m.data)) })
	}
	a.mu.Lock()
	a.n++
	n := a.n
	a.mu.Unlock()
	if a.deliver != nil {
		return a.deliver(n)
	}
	return Delivered
}

func (a *testApp) Disconnect(code int, reason string) {
	a.once.Do(func() { a.disc <- closeInfo{code, reason} })
}

func (a *testApp) ReaderDone() { close(a.done) }

// write runs f on the writer goroutine, as the adapter's writer does
// with the app's records: dropped once the connection closes.
func (a *testApp) write(f func()) {
	a.ops <- func() {
		a.sess.BeginWrites()
		if !a.sess.Dropping() {
			f()
		}
	}
}

// do runs f on the writer goroutine as it is (StopClose).
func (a *testApp) do(f func()) { a.ops <- f }

func (a *testApp) writeLoop() {
	for {
		select {
		case f := <-a.ops:
			f()
		case <-a.done:
			a.sess.Finish()
			close(a.ended)
			return
		}
	}
}

// wantDisconnect waits for the app's disconnect and checks it.
func (a *testApp) wantDisconnect(t *testing.T, code int, reason string) {
	t.Helper()
	select {
	case d := <-a.disc:
		if d.code != code || d.reason != reason {
			t.Errorf("Disconnect(%d, %q); want (%d, %q)", d.code, d.reason, code, reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no Disconnect; want (%d, %q)", code, reason)
	}
	select {
	case <-a.ended:
	case <-time.After(5 * time.Second):
		t.Error("the reader did not finish after the disconnect")
	}
}

// wantMessages checks what was delivered, in order, and nothing more.
func (a *testApp) wantMessages(t *testing.T, want ...message) {
	t.Helper()
	for _, w := range want {
		select {
		case m := <-a.got:
			if m != w {
				t.Errorf("delivered %+v; want %+v", m, w)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("nothing delivered; want %+v", w)
		}
	}
	select {
	case m := <-a.got:
		t.Errorf("delivered %+v; want nothing more", m)
	default:
	}
}

// testServer upgrades every valid handshake with up and hands the
// sessions' apps on apps.
type testServer struct {
	addr string
	apps chan *testApp
	errs chan error // Upgrade's errors
	// head is the app's header lines for the 101; setup prepares the app.
	head  func(r *http1.Request) []byte
	setup func(a *testApp)
}

func startServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	ts := &testServer{apps: make(chan *testApp, 4), errs: make(chan error, 4)}
	up := NewUpgrader(cfg, nil)
	srv := &http1.Server{Handler: http1.HandlerFunc(func(w *http1.ResponseWriter, r *http1.Request) {
		if !IsUpgrade(r) {
			w.WriteSimple(404, "text/plain", nil, nil)
			return
		}
		hs, code, why := CheckHandshake(r)
		if code != 0 {
			Refuse(w, code, why)
			return
		}
		var head []byte
		if ts.head != nil {
			head = ts.head(r)
		}
		sess, err := up.Upgrade(w, hs, head)
		if err != nil {
			ts.errs <- err
			w.WriteSimple(500, "text/plain", []byte("Internal Server Error\n"), nil)
			return
		}
		a := &testApp{sess: sess, echo: true, got: make(chan message, 64), disc: make(chan closeInfo, 1),
			ops: make(chan func(), 64), done: make(chan struct{}), ended: make(chan struct{})}
		if ts.setup != nil {
			ts.setup(a)
		}
		sess.Start(a)
		go a.writeLoop()
		ts.apps <- a
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ts.addr = ln.Addr().String()
	return ts
}

// app returns the next session's app.
func (ts *testServer) app(t *testing.T) *testApp {
	t.Helper()
	select {
	case a := <-ts.apps:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no session")
		return nil
	}
}

// ---- the client side ---------------------------------------------------------

// rawClient is a hand-driven client connection.
type rawClient struct {
	net.Conn
	br   *bufio.Reader
	head string // the server's response head
}

// dial sends an opening handshake with extra header lines and reads the
// response head, whatever its status.
func dial(t *testing.T, addr, extra string) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "+testKey+"\r\n"+extra+"\r\n")
	c := &rawClient{Conn: conn, br: bufio.NewReader(conn)}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		line, err := c.br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the handshake response: %v (so far %q)", err, c.head)
		}
		c.head += line
		if line == "\r\n" {
			break
		}
	}
	return c
}

// dialWS is dial that wants a 101.
func dialWS(t *testing.T, addr, extra string) *rawClient {
	t.Helper()
	c := dial(t, addr, extra)
	if !strings.HasPrefix(c.head, "HTTP/1.1 101 ") {
		t.Fatalf("handshake = %q; want 101", c.head)
	}
	// RFC 6455 §4.2.2 item 5.4: the accept value of §1.3's sample nonce.
	if !strings.Contains(c.head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n") {
		t.Errorf("101 %q lacks the Sec-WebSocket-Accept of the key", c.head)
	}
	return c
}

func (c *rawClient) send(b0 byte, payload []byte) { c.Write(clientFrame(b0, payload)) }

// next reads one server frame within d.
func (c *rawClient) next(d time.Duration) (b0 byte, payload []byte, err error) {
	c.SetReadDeadline(time.Now().Add(d))
	var h [2]byte
	if _, err = io.ReadFull(c.br, h[:]); err != nil {
		return
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err = io.ReadFull(c.br, b[:]); err != nil {
			return
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err = io.ReadFull(c.br, b[:]); err != nil {
			return
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(c.br, payload)
	return h[0], payload, err
}

// wantFrame reads the next frame and wants its first byte and payload.
func (c *rawClient) wantFrame(t *testing.T, b0 byte, payload string) {
	t.Helper()
	g0, p, err := c.next(3 * time.Second)
	if err != nil || g0 != b0 || string(p) != payload {
		t.Fatalf("frame %#x %q, %v; want %#x %q", g0, p, err, b0, payload)
	}
}

// wantClose reads frames up to a close frame and wants its code and
// reason (code 0: an empty body).
func (c *rawClient) wantClose(t *testing.T, code int, reason string) {
	t.Helper()
	for {
		b0, p, err := c.next(5 * time.Second)
		if err != nil {
			t.Fatalf("reading the close frame: %v; want %d %q", err, code, reason)
		}
		if b0&0x0f != 8 {
			continue
		}
		switch {
		case code == 0 && len(p) != 0:
			t.Errorf("close frame %x; want an empty one", p)
		case code != 0 && (len(p) < 2 || int(binary.BigEndian.Uint16(p)) != code || string(p[2:]) != reason):
			t.Errorf("close frame %x (%q); want %d %q", p, p, code, reason)
		}
		return
	}
}

// wantEOF wants the server to close TCP (after its close frame).
func (c *rawClient) wantEOF(t *testing.T) {
	t.Helper()
	for {
		_, _, err := c.next(5 * time.Second)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("after the close frame: %v; want EOF", err)
		}
	}
}

func closeBody(code int, reason string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}

// deflateMessage compresses p as one permessage-deflate message (RFC 7692
// §7.2.1: a sync flush without its final 00 00 ff ff).
func deflateMessage(p []byte) []byte {
	var b bytes.Buffer
	fw, _ := flate.NewWriter(&b, flate.BestSpeed)
	fw.Write(p)
	fw.Flush()
	return bytes.TrimSuffix(b.Bytes(), []byte{0, 0, 0xff, 0xff})
}

// inflateMessage undoes deflateMessage (RFC 7692 §7.2.2).
func inflateMessage(p []byte) ([]byte, error) {
	return io.ReadAll(flate.NewReader(io.MultiReader(bytes.NewReader(p), bytes.NewReader([]byte{0, 0, 0xff, 0xff, 1, 0, 0, 0xff, 0xff}))))
}

// ---- the tests -----------------------------------------------------------------

// TestSession_Echo: text and binary messages reach the app and go back;
// a fragmented message is delivered whole, and the ping inside it is
// answered first (RFC 6455 §5.4, §5.5.2).
func TestSession_Echo(t *testing.T) {
	ts := startServer(t, Config{})
	c := dialWS(t, ts.addr, "")
	a := ts.app(t)
	c.send(0x81, []byte("héllo"))
	c.wantFrame(t, 0x81, "héllo")
	c.send(0x82, []byte{0, 1, 2})
	c.wantFrame(t, 0x82, "\x00\x01\x02")
	c.send(0x01, []byte("frag"))
	c.send(0x89, []byte("p"))
	c.send(0x80, []byte("ment"))
	c.wantFrame(t, 0x8a, "p")
	c.wantFrame(t, 0x81, "fragment")
	c.send(0x81, nil)
	c.wantFrame(t, 0x81, "")
	a.wantMessages(t, message{true, "héllo"}, message{false, "\x00\x01\x02"}, message{true, "fragment"}, message{true, ""})
	c.send(0x88, closeBody(1000, "done"))
	c.wantClose(t, 1000, "")
	a.wantDisconnect(t, 1000, "done")
}

// TestSession_ClientEnds: what the app learns when the client ends the
// connection: its close code and reason (and gorilla echoes the code,
// RFC 6455 §5.5.1), 1005 for a close frame without a body, 1006 for a TCP
// close without one (§7.1.5, §7.1.6; never on the wire).
func TestSession_ClientEnds(t *testing.T) {
	ts := startServer(t, Config{})
	for _, tc := range []struct {
		id     string
		end    func(c *rawClient)
		code   int
		reason string
	}{
		{"close-4001", func(c *rawClient) { c.send(0x88, closeBody(4001, "bye €")) }, 4001, "bye €"},
		{"close-empty", func(c *rawClient) { c.send(0x88, nil) }, 1005, ""},
		{"tcp-close", func(c *rawClient) { c.Conn.(*net.TCPConn).CloseWrite() }, 1006, ""},
	} {
		t.Run(tc.id, func(t *testing.T) {
			c := dialWS(t, ts.addr, "")
			a := ts.app(t)
			tc.end(c)
			a.wantDisconnect(t, tc.code, tc.reason)
			a.wantMessages(t)
		})
	}
}

// TestSession_Violations: the connection is failed with a close frame
// carrying the RFC's code before the TCP close, and the app gets that
// code and nothing of the message: 1009 over MaxSizeBytes (a frame header
// announcing it, a message that grows past it in fragments, a compressed
// one that inflates past it), 1007 for text that is not UTF-8, a close
// reason that is not UTF-8 (§8.1) or data that does not inflate (RFC 7692
// §8.1), 1002 for the frames the wire refuses (§5.2, §5.5) and those
// gorilla refuses (an unknown opcode, a continuation with nothing to
// continue).
func TestSession_Violations(t *testing.T) {
	ts := startServer(t, Config{MaxSizeBytes: 16, PerMessageDeflate: true})
	const deflate = "Sec-WebSocket-Extensions: permessage-deflate\r\n"
	for _, tc := range []struct {
		id   string
		ext  string
		send func(c *rawClient)
		code int
	}{
		{"too-big", "", func(c *rawClient) { c.send(0x82, bytes.Repeat([]byte("x"), 17)) }, 1009},
		{"too-big-header-2^62", "", func(c *rawClient) {
			c.Write([]byte{0x82, 0x80 | 127, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4})
		}, 1009},
		{"too-big-in-fragments", "", func(c *rawClient) {
			c.send(0x02, bytes.Repeat([]byte("x"), 9))
			c.send(0x80, bytes.Repeat([]byte("x"), 8))
		}, 1009},
		{"too-big-inflated", deflate, func(c *rawClient) { c.send(0x80|0x40|2, deflateMessage(make([]byte, 1000))) }, 1009},
		{"text-not-utf8", "", func(c *rawClient) { c.send(0x81, []byte{'a', 0xff}) }, 1007},
		{"text-not-utf8-fragments", "", func(c *rawClient) {
			c.send(0x01, []byte("€"[:2]))
			c.send(0x80, []byte("x"))
		}, 1007},
		{"close-reason-not-utf8", "", func(c *rawClient) { c.send(0x88, []byte{0x03, 0xe8, 0xff}) }, 1007},
		{"deflate-corrupt", deflate, func(c *rawClient) { c.send(0x80|0x40|2, []byte{0xff, 0xff, 0xff}) }, 1007},
		{"deflate-cut-short", deflate, func(c *rawClient) { c.send(0x80|0x40|2, []byte{0x00, 0xe8, 0x03, 0x17, 0xfc, 'a'}) }, 1007},
		{"rsv2", "", func(c *rawClient) { c.send(0x80|0x20|1, []byte("x")) }, 1002},
		{"rsv1-without-deflate", "", func(c *rawClient) { c.send(0x80|0x40|1, []byte("x")) }, 1002},
		{"rsv1-on-ping", deflate, func(c *rawClient) { c.send(0x80|0x40|9, []byte("p")) }, 1002},
		{"ping-126-bytes", "", func(c *rawClient) { c.send(0x89, bytes.Repeat([]byte("p"), 126)) }, 1002},
		{"close-code-1006", "", func(c *rawClient) { c.send(0x88, closeBody(1006, "")) }, 1002},
		{"len64-msb", "", func(c *rawClient) {
			c.Write([]byte{0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4, 'x'})
		}, 1002},
		{"gorilla-unknown-opcode", "", func(c *rawClient) { c.send(0x83, []byte("x")) }, 1002},
		{"gorilla-lone-continuation", "", func(c *rawClient) { c.send(0x80, []byte("x")) }, 1002},
	} {
		t.Run(tc.id, func(t *testing.T) {
			c := dialWS(t, ts.addr, tc.ext)
			if tc.ext != "" && !strings.Contains(c.head, "permessage-deflate") {
				t.Fatalf("101 %q did not negotiate permessage-deflate", c.head)
			}
			a := ts.app(t)
			c.send(0x81, []byte("ok")) // a message before: delivered
			if b0, p, err := c.next(3 * time.Second); err != nil || b0&0x0f != 1 {
				t.Fatalf("echo %#x %q, %v; want a text frame", b0, p, err)
			}
			tc.send(c)
			b0, p, err := c.next(5 * time.Second)
			for err == nil && b0&0x0f != 8 {
				b0, p, err = c.next(5 * time.Second)
			}
			if err != nil || len(p) < 2 || int(binary.BigEndian.Uint16(p)) != tc.code {
				t.Fatalf("close frame %x (%q), %v; want code %d", p, p, err, tc.code)
			}
			// The server lingers until our FIN (or for lingerTimeout)
			// before it closes TCP.
			c.Conn.(*net.TCPConn).CloseWrite()
			c.wantEOF(t)
			a.wantDisconnect(t, tc.code, "")
			a.wantMessages(t, message{true, "ok"})
		})
	}
}

// TestSession_AppClose: the app's close goes out with its code and
// reason; 1005 and 1006 (and none) as an empty close frame (RFC 6455
// §7.4.1: never on the wire); what the app sends after it is dropped; the
// client's answer ends the session with its code.
func TestSession_AppClose(t *testing.T) {
	ts := startServer(t, Config{})
	for _, tc := range []struct {
		code   int
		reason string
		want   int
	}{
		{4321, "reason €", 4321},
		{1000, "", 1000},
		{1005, "", 0},
		{1006, "x", 0},
		{0, "", 0},
	} {
		c := dialWS(t, ts.addr, "")
		a := ts.app(t)
		a.write(func() { a.sess.Close(tc.code, tc.reason) })
		a.write(func() { a.sess.Send(true, []byte("dropped")) })
		a.write(func() { a.sess.Close(1001, "second") }) // once only
		wantReason := tc.reason
		if tc.want == 0 {
			wantReason = ""
		}
		c.wantClose(t, tc.want, wantReason)
		c.send(0x88, closeBody(1000, "ack"))
		a.wantDisconnect(t, 1000, "ack")
		c.wantEOF(t)
	}
}

// TestSession_Keepalive: with no pong within PingTimeout the connection
// closes with 1011 (the app gets it too); a client that answers stays.
func TestSession_Keepalive(t *testing.T) {
	ts := startServer(t, Config{PingInterval: 50 * time.Millisecond, PingTimeout: 50 * time.Millisecond})

	t.Run("no-pong", func(t *testing.T) {
		c := dialWS(t, ts.addr, "")
		a := ts.app(t)
		c.wantFrame(t, 0x89, "")
		c.wantClose(t, 1011, "keepalive ping timeout")
		a.wantDisconnect(t, 1011, "keepalive ping timeout")
	})
	t.Run("pong", func(t *testing.T) {
		c := dialWS(t, ts.addr, "")
		a := ts.app(t)
		pings := 0
		for end := time.Now().Add(400 * time.Millisecond); time.Now().Before(end); {
			b0, p, err := c.next(time.Second)
			if err != nil || b0 != 0x89 {
				t.Fatalf("frame %#x %q, %v; want pings only", b0, p, err)
			}
			pings++
			c.send(0x8a, p)
		}
		if pings < 3 {
			t.Errorf("%d pings in 400 ms; want one per 100 ms (interval + timeout)", pings)
		}
		select {
		case d := <-a.disc:
			t.Errorf("Disconnect%v while the client answered", d)
		default:
		}
	})
}

// TestSession_BackPressure: Full stops the reader until Resume.
func TestSession_BackPressure(t *testing.T) {
	ts := startServer(t, Config{})
	ts.setup = func(a *testApp) {
		a.echo = false
		a.deliver = func(n int) Delivery {
			if n == 1 {
				return Full
			}
			return Delivered
		}
	}
	c := dialWS(t, ts.addr, "")
	a := ts.app(t)
	c.send(0x81, []byte("1"))
	c.send(0x81, []byte("2"))
	a.wantMessages(t, message{true, "1"})
	time.Sleep(150 * time.Millisecond)
	a.wantMessages(t) // the reader waits
	a.sess.Resume()
	a.wantMessages(t, message{true, "2"})
}

// TestSession_Stopping: a Deliver that reports the app's side stopping
// fails the connection with 1012.
func TestSession_Stopping(t *testing.T) {
	ts := startServer(t, Config{})
	ts.setup = func(a *testApp) { a.echo, a.deliver = false, func(int) Delivery { return Stopping } }
	c := dialWS(t, ts.addr, "")
	a := ts.app(t)
	c.send(0x81, []byte("x"))
	c.wantClose(t, 1012, "")
	c.Conn.(*net.TCPConn).CloseWrite() // ends the server's linger
	c.wantEOF(t)
	a.wantDisconnect(t, 1012, "")
}

// TestSession_StopClose: at a server stop our 1012 goes out at once; what
// the client sends before its close frame still reaches the app, which
// then gets 1012 whatever code the client echoed. After another close,
// StopClose reports false.
func TestSession_StopClose(t *testing.T) {
	ts := startServer(t, Config{})
	ts.setup = func(a *testApp) { a.echo = false }
	c := dialWS(t, ts.addr, "")
	a := ts.app(t)
	c.send(0x81, []byte("before"))
	a.wantMessages(t, message{true, "before"})
	stopped := make(chan bool, 1)
	a.do(func() { stopped <- a.sess.StopClose(CloseServiceRestart) })
	if !<-stopped {
		t.Fatal("StopClose = false; want true")
	}
	if !a.sess.Draining() {
		t.Error("Draining = false after StopClose")
	}
	c.wantClose(t, 1012, "")
	c.send(0x81, []byte("in flight"))
	c.send(0x88, closeBody(1000, ""))
	a.wantDisconnect(t, 1012, "")
	a.wantMessages(t, message{true, "in flight"})

	c = dialWS(t, ts.addr, "")
	a = ts.app(t)
	a.write(func() { a.sess.Close(1000, "") })
	a.do(func() { stopped <- a.sess.StopClose(CloseServiceRestart) })
	if <-stopped {
		t.Error("StopClose after Close = true; want false")
	}
	c.wantClose(t, 1000, "")
}

// TestUpgrade_Head: the app's subprotocol must be one the client offered
// (RFC 6455 §4.2.2), once; its other header lines go out; the server's
// own fields are not taken from the app.
func TestUpgrade_Head(t *testing.T) {
	ts := startServer(t, Config{})
	head := ""
	ts.head = func(*http1.Request) []byte { return []byte(head) }

	head = "Sec-WebSocket-Protocol: json\r\nX-App: 1\r\nUpgrade: nope\r\nSec-WebSocket-Accept: forged\r\n"
	c := dialWS(t, ts.addr, "Sec-WebSocket-Protocol: chat, json\r\n")
	ts.app(t)
	for _, want := range []string{"Sec-WebSocket-Protocol: json\r\n", "X-App: 1\r\n", "Upgrade: websocket\r\n"} {
		if !strings.Contains(c.head, want) {
			t.Errorf("101 %q lacks %q", c.head, want)
		}
	}
	for _, bad := range []string{"nope", "forged"} {
		if strings.Contains(c.head, bad) {
			t.Errorf("101 %q has the app's %q", c.head, bad)
		}
	}

	for _, tc := range []struct{ id, head, offer string }{
		{"not-offered", "Sec-WebSocket-Protocol: evil\r\n", "Sec-WebSocket-Protocol: chat\r\n"},
		{"none-offered", "Sec-WebSocket-Protocol: chat\r\n", ""},
		{"twice", "Sec-WebSocket-Protocol: chat\r\nSec-WebSocket-Protocol: json\r\n", "Sec-WebSocket-Protocol: chat, json\r\n"},
	} {
		head = tc.head
		c := dial(t, ts.addr, tc.offer)
		if !strings.HasPrefix(c.head, "HTTP/1.1 500 ") {
			t.Errorf("%s: response %q; want 500", tc.id, c.head)
		}
		if err := <-ts.errs; !errors.Is(err, ErrUnofferedSubprotocol) {
			t.Errorf("%s: Upgrade error %v; want ErrUnofferedSubprotocol", tc.id, err)
		}
	}
}

// TestUpgrade_Refused: Refuse's answers reach the client (426 names the
// version, RFC 6455 §4.2.2).
func TestUpgrade_Refused(t *testing.T) {
	ts := startServer(t, Config{})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\nSec-WebSocket-Key: "+testKey+"\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 426 || resp.Header.Get("Sec-WebSocket-Version") != "13" || resp.Header.Get("Upgrade") != "websocket" {
		t.Errorf("response %d %v; want 426 with Sec-WebSocket-Version: 13", resp.StatusCode, resp.Header)
	}
	if string(body) != "Sec-WebSocket-Version must be 13\n" {
		t.Errorf("body %q", body)
	}
}

// TestUpgrade_Deflate: the 101 carries NegotiateDeflate's answer (not
// gorilla's fixed line) and the wire then does what it says: compressed
// echoes; without PerMessageDeflate, no extension and plain echoes.
func TestUpgrade_Deflate(t *testing.T) {
	const base = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
	for _, tc := range []struct {
		id    string
		on    bool
		offer string
		want  string
	}{
		{"plain", true, "permessage-deflate", base},
		{"server-max-15", true, "permessage-deflate; server_max_window_bits=15", base + "; server_max_window_bits=15"},
		{"server-max-10", true, "permessage-deflate; server_max_window_bits=10", ""},
		{"off", false, "permessage-deflate", ""},
	} {
		t.Run(tc.id, func(t *testing.T) {
			ts := startServer(t, Config{PerMessageDeflate: tc.on})
			c := dialWS(t, ts.addr, "Sec-WebSocket-Extensions: "+tc.offer+"\r\n")
			ts.app(t)
			var got []string
			for _, line := range strings.Split(c.head, "\r\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "sec-websocket-extensions") {
					got = append(got, strings.TrimSpace(v))
				}
			}
			if strings.Join(got, ", ") != tc.want {
				t.Fatalf("Sec-WebSocket-Extensions %q; want %q", got, tc.want)
			}
			msg := []byte("compress me, compress me, compress me ✓")
			if tc.want != "" {
				c.send(0x80|0x40|1, deflateMessage(msg))
			} else {
				c.send(0x81, msg)
			}
			b0, p, err := c.next(3 * time.Second)
			if err != nil || b0&0x0f != 1 {
				t.Fatalf("echo %#x %q, %v", b0, p, err)
			}
			if compressed := b0&0x40 != 0; compressed != (tc.want != "") {
				t.Fatalf("echo compressed=%v; the 101 said %q", compressed, tc.want)
			}
			if tc.want != "" {
				if p, err = inflateMessage(p); err != nil {
					t.Fatalf("echo does not inflate: %v", err)
				}
			}
			if !bytes.Equal(p, msg) {
				t.Errorf("echo %q; want %q", p, msg)
			}
		})
	}
}

// TestSession_TryWrites: a batch of try writes never blocks; what the
// socket does not take waits in order, behind it the frames of the
// batch and of other writers (a ping), until FlushPending; a client that
// never reads fails FlushPending after the write timeout.
func TestSession_TryWrites(t *testing.T) {
	ts := startServer(t, Config{WriteTimeout: 300 * time.Millisecond})
	ts.setup = func(a *testApp) { a.echo = false }
	c := dialWS(t, ts.addr, "")
	a := ts.app(t)
	onWriter := func(f func()) {
		done := make(chan struct{})
		a.do(func() { f(); close(done) })
		<-done
	}

	// A socket with room: written at once.
	onWriter(func() {
		if !a.sess.TryBegin() {
			t.Fatal("TryBegin = false on an idle session")
		}
		a.sess.Send(true, []byte("first"))
		a.sess.TryEnd()
		if a.sess.Pending() {
			t.Error("Pending after a small try write")
		}
	})
	c.wantFrame(t, 0x81, "first")

	// The client stops reading: the batch goes on without blocking
	// until bytes wait; then no batch begins.
	big := bytes.Repeat([]byte("x"), 60000)
	sent := 0
	onWriter(func() {
		if !a.sess.TryBegin() {
			t.Fatal("TryBegin = false before the socket filled")
		}
		for !a.sess.Pending() && sent < 2000 {
			binary.BigEndian.PutUint32(big, uint32(sent))
			a.sess.Send(false, big)
			sent++
		}
		// Two more behind the waiting bytes, in the same batch.
		for range 2 {
			binary.BigEndian.PutUint32(big, uint32(sent))
			a.sess.Send(false, big)
			sent++
		}
		a.sess.TryEnd()
		if !a.sess.Pending() {
			t.Fatalf("no bytes wait after %d × 60000 bytes to a client that does not read", sent)
		}
		if a.sess.TryBegin() {
			a.sess.TryEnd()
			t.Error("TryBegin = true while bytes of a batch wait")
		}
	})
	// A ping from another goroutine goes after them (its write flushes
	// them first), and FlushPending on the writer: both wait for the
	// client, which now reads every frame in order.
	pinged := make(chan error, 1)
	go func() { pinged <- a.sess.control(0x9, []byte("p"), time.Now().Add(5*time.Second)) }()
	flushed := make(chan struct{})
	a.do(func() { a.sess.FlushPending(); close(flushed) })
	for i := 0; i < sent; i++ {
		b0, p, err := c.next(3 * time.Second)
		if err != nil || b0 != 0x82 || len(p) != len(big) || binary.BigEndian.Uint32(p) != uint32(i) {
			t.Fatalf("frame %d: %#x, %d bytes, %v; want message %d", i, b0, len(p), err, i)
		}
	}
	c.wantFrame(t, 0x89, "p")
	if err := <-pinged; err != nil {
		t.Errorf("ping: %v", err)
	}
	<-flushed
	if a.sess.Pending() || a.sess.Dropping() {
		t.Errorf("after the flush: Pending %v, Dropping %v; want both false", a.sess.Pending(), a.sess.Dropping())
	}

	// A client that never reads again: FlushPending fails after the
	// write timeout and the connection is dropped. The kernel may still
	// grow the connection's buffers (TCP autotuning, after the client
	// read megabytes above), so a flush can succeed while they grow:
	// fill and flush again until one blocks, as a client that never
	// reads makes it do in the end.
	var d time.Duration
	for round := 0; round < 50 && !a.sess.Dropping(); round++ {
		onWriter(func() {
			if !a.sess.TryBegin() {
				t.Fatal("TryBegin = false after the flush")
			}
			for n := 0; !a.sess.Pending() && n < 2000; n++ {
				a.sess.Send(false, big)
			}
			a.sess.TryEnd()
		})
		start := time.Now()
		onWriter(a.sess.FlushPending)
		d = time.Since(start)
	}
	if !a.sess.Dropping() || d < 250*time.Millisecond || d > 3*time.Second {
		t.Errorf("FlushPending to a client that does not read: the last returned after %v, dropping %v; want the 300 ms write timeout and the drop", d, a.sess.Dropping())
	}
	// The dropped connection ends the reader, and so the writer.
	select {
	case <-a.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the session did not end after the failed flush")
	}
	if !a.sess.Dropping() {
		t.Error("Dropping = false after a failed flush")
	}
}

// TestSession_ControlDeadline: a control frame waits for a writer blocked
// on a client that does not read no longer than its own deadline.
func TestSession_ControlDeadline(t *testing.T) {
	ts := startServer(t, Config{WriteTimeout: 3 * time.Second})
	ts.setup = func(a *testApp) { a.echo = false }
	dialWS(t, ts.addr, "")
	a := ts.app(t)
	big := bytes.Repeat([]byte("x"), 60000)
	a.write(func() {
		for range 400 { // 24 MB: more than the socket buffers take
			a.sess.Send(false, big)
		}
	})
	time.Sleep(300 * time.Millisecond) // the writer blocks on the full socket
	start := time.Now()
	err := a.sess.control(0x9, nil, time.Now().Add(200*time.Millisecond))
	if d := time.Since(start); err == nil || d > time.Second {
		t.Errorf("ping behind a blocked writer: %v after %v; want an error within its 200 ms deadline", err, d)
	}
}
