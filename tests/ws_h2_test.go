package tests

// WebSockets over HTTP/2 (RFC 8441) from a raw HTTP/2 client (x/net's
// Framer): SETTINGS_ENABLE_CONNECT_PROTOCOL, the extended CONNECT, the
// 200 with the app's subprotocol and headers, frames both ways in DATA,
// the closing handshake; the same ASGI websocket scope; no extended
// CONNECT for a WSGI app.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

type h2wsClient struct {
	t        *testing.T
	c        net.Conn
	bw       *bufio.Writer
	fr       *http2.Framer
	settings map[http2.SettingID]uint32
	head     []hpack.HeaderField // the response HEADERS of stream 1
	data     bytes.Buffer        // stream 1's DATA not yet parsed
	ended    bool                // stream 1 ended (END_STREAM or RST_STREAM)
	rst      http2.ErrCode
}

func dialH2WS(t *testing.T, addr string) *h2wsClient {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	h := &h2wsClient{t: t, c: c, bw: bufio.NewWriter(c), settings: map[http2.SettingID]uint32{}}
	h.fr = http2.NewFramer(h.bw, c)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.bw.WriteString(http2.ClientPreface)
	h.fr.WriteSettings()
	h.bw.Flush()
	// The server's SETTINGS come first (RFC 9113 §3.4).
	for {
		f := h.next()
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			sf.ForeachSetting(func(s http2.Setting) error { h.settings[s.ID] = s.Val; return nil })
			h.fr.WriteSettingsAck()
			h.bw.Flush()
			return h
		}
	}
}

// next reads one frame, recording stream 1's head, DATA and end.
func (h *h2wsClient) next() http2.Frame {
	h.t.Helper()
	f, err := h.fr.ReadFrame()
	if err != nil {
		h.t.Fatalf("read frame: %v", err)
	}
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		if f.StreamID == 1 {
			h.head = f.Fields
			h.ended = h.ended || f.StreamEnded()
		}
	case *http2.DataFrame:
		if f.StreamID == 1 {
			h.data.Write(f.Data())
			h.ended = h.ended || f.StreamEnded()
		}
	case *http2.RSTStreamFrame:
		if f.StreamID == 1 {
			h.ended, h.rst = true, f.ErrCode
		}
	case *http2.GoAwayFrame:
		if f.ErrCode != http2.ErrCodeNo {
			h.t.Fatalf("GOAWAY %v", f.ErrCode)
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			h.fr.WritePing(true, f.Data)
			h.bw.Flush()
		}
	}
	return f
}

func (h *h2wsClient) connect(path string, extra ...string) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := []string{":method", "CONNECT", ":protocol", "websocket", ":scheme", "http", ":path", path,
		":authority", "localhost", "sec-websocket-version", "13"}
	fields = append(fields, extra...)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	h.bw.Flush()
	for h.head == nil && !h.ended {
		h.next()
	}
}

// send writes one masked client frame (RFC 6455 §5.2) as DATA.
func (h *h2wsClient) send(op byte, payload []byte) {
	frame := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		frame = append(frame, 0x80|byte(n))
	default:
		frame = append(frame, 0x80|126, byte(n>>8), byte(n))
	}
	mask := [4]byte{1, 2, 3, 4}
	frame = append(frame, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	h.fr.WriteData(1, false, frame)
	h.bw.Flush()
}

// recv returns the next server frame's opcode and payload (unmasked,
// unfragmented: the echo's messages are small).
func (h *h2wsClient) recv() (byte, []byte) {
	for {
		b := h.data.Bytes()
		if len(b) >= 4 || len(b) >= 2 && b[1]&0x7f < 126 {
			n, off := int(b[1]&0x7f), 2
			if n == 126 {
				n, off = int(binary.BigEndian.Uint16(b[2:4])), 4
			}
			if len(b) >= off+n {
				op, p := b[0]&0x0f, append([]byte(nil), b[off:off+n]...)
				h.data.Next(off + n)
				return op, p
			}
		}
		if h.ended {
			h.t.Fatalf("stream 1 ended (rst %v) with %d bytes unparsed", h.rst, h.data.Len())
		}
		h.next()
	}
}

func field(fs []hpack.HeaderField, name string) (string, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

func TestWS_HTTP2_ExtendedConnect(t *testing.T) {
	s := Start(t, "ws_echo:app")
	h := dialH2WS(t, s.Addr)
	if h.settings[http2.SettingEnableConnectProtocol] != 1 {
		t.Fatalf("server SETTINGS %v: no ENABLE_CONNECT_PROTOCOL = 1", h.settings)
	}
	h.connect("/echo", "sec-websocket-protocol", "chat, other")
	if st, _ := field(h.head, ":status"); st != "200" {
		t.Fatalf("extended CONNECT answered %v", h.head)
	}
	if v, _ := field(h.head, "sec-websocket-protocol"); v != "chat" {
		t.Errorf("sec-websocket-protocol %q; want chat (%v)", v, h.head)
	}
	if v, _ := field(h.head, "x-accept"); v != "yes" {
		t.Errorf("x-accept %q; want the app's header (%v)", v, h.head)
	}
	for _, name := range []string{"upgrade", "connection", "sec-websocket-accept"} {
		if _, ok := field(h.head, name); ok {
			t.Errorf("the 200 carries %s: %v", name, h.head)
		}
	}
	h.send(0x1, []byte("hello over h2"))
	if op, p := h.recv(); op != 0x1 || string(p) != "hello over h2" {
		t.Errorf("text echo: op %d %q", op, p)
	}
	big := bytes.Repeat([]byte{0xab}, 1000)
	h.send(0x2, big)
	if op, p := h.recv(); op != 0x2 || !bytes.Equal(p, big) {
		t.Errorf("binary echo: op %d, %d bytes", op, len(p))
	}
	h.send(0x8, []byte{0x03, 0xe8}) // close 1000
	op, p := h.recv()
	if op != 0x8 || len(p) < 2 || binary.BigEndian.Uint16(p) != 1000 {
		t.Errorf("close answer: op %d %x", op, p)
	}
	for !h.ended {
		h.next()
	}
	if h.rst != 0 && h.rst != http2.ErrCodeNo {
		t.Errorf("the stream ended with RST_STREAM %v", h.rst)
	}

	// The scope: the same websocket scope, over HTTP/2.
	h = dialH2WS(t, s.Addr)
	h.connect("/scope")
	op, p = h.recv()
	var scope map[string]any
	if err := json.Unmarshal(p, &scope); op != 0x1 || err != nil {
		t.Fatalf("scope message: op %d %q %v", op, p, err)
	}
	if scope["type"] != "websocket" || scope["http_version"] != "2" || scope["scheme"] != "ws" || scope["path"] != "/scope" {
		t.Errorf("scope %v; want websocket, http_version 2, scheme ws, path /scope", scope)
	}
}

// A WSGI app serves no WebSocket: the server does not offer extended
// CONNECT, and a :protocol request is malformed (RFC 9113 §8.3).
func TestWS_HTTP2_NotOfferedForWSGI(t *testing.T) {
	s := Start(t, "h2_wsgi:app")
	h := dialH2WS(t, s.Addr)
	if v, ok := h.settings[http2.SettingEnableConnectProtocol]; ok && v != 0 {
		t.Fatalf("ENABLE_CONNECT_PROTOCOL = %d for a WSGI app", v)
	}
	h.connect("/echo")
	if !h.ended || h.rst != http2.ErrCodeProtocol {
		t.Errorf("extended CONNECT to a WSGI app: head %v, rst %v; want RST_STREAM PROTOCOL_ERROR", h.head, h.rst)
	}
}

// The client resetting the stream is the WebSocket's end: the app gets
// websocket.disconnect (1006); other streams of the connection go on.
// A server stop closes the session with 1012, as over HTTP/1.1.
func TestWS_HTTP2_ResetAndStop(t *testing.T) {
	s := Start(t, "--graceful-timeout", "5s", "ws_echo:app")
	h := dialH2WS(t, s.Addr)
	h.connect("/echo")
	h.send(0x1, []byte("one"))
	if op, p := h.recv(); op != 0x1 || string(p) != "one" {
		t.Fatalf("echo: op %d %q", op, p)
	}
	h.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	h.bw.Flush()
	var stats struct{ Disconnects [][]any }
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := s.Get(t, "/stats")
		json.Unmarshal([]byte(body), &stats)
		if len(stats.Disconnects) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(stats.Disconnects) != 1 || stats.Disconnects[0][0] != float64(1006) {
		t.Errorf("disconnects %v after RST_STREAM; want one 1006", stats.Disconnects)
	}

	// :protocol other than websocket: 501.
	h2 := dialH2WS(t, s.Addr)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "CONNECT"}, {":protocol", "webtransport"}, {":scheme", "http"}, {":path", "/echo"}, {":authority", "localhost"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	h2.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	h2.bw.Flush()
	for h2.head == nil && !h2.ended {
		h2.next()
	}
	if st, _ := field(h2.head, ":status"); st != "501" {
		t.Errorf(":protocol webtransport answered %v (rst %v); want 501", h2.head, h2.rst)
	}

	h3 := dialH2WS(t, s.Addr)
	h3.connect("/echo")
	s.Signal(syscall.SIGTERM)
	op, p := h3.recv()
	if op != 0x8 || len(p) < 2 || binary.BigEndian.Uint16(p) != 1012 {
		t.Errorf("at stop: op %d %x; want a close frame with 1012", op, p)
	}
	h3.send(0x8, p) // the closing handshake's answer
	if rc := s.Wait(4 * time.Second); rc != 0 {
		t.Errorf("exit status %d within 4s of SIGTERM; want 0", rc)
	}
}
