package tests

// WebSocket clients for the tests (RFC 6455, RFC 7692). Two kinds:
//
//   - gorilla/websocket's client (wsDial, wsDialJSON, wsCloseCode), for tests that
//     need a well-behaved peer;
//   - rawWS, a hand-driven connection, for tests that must see or shape
//     frames on the wire: its own handshake (wsRaw), masked client frames
//     (frame, wsMask), server frames read one at a time (readFrame, next,
//     closeFrame) and permessage-deflate payloads (deflateMessage,
//     inflateMessage).
//
// Used by websocket_test.go, websocket_rfc_test.go, ws_restart_test.go and
// the chlayer tests.

import (
	"bufio"
	"bytes"
	"compress/flate"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// ---- gorilla's client ---------------------------------------------------------

// wsURL is the ws:// URL of path on s.
func wsURL(s *Server, path string) string { return "ws://" + s.Addr + path }

// wsDial connects with gorilla's client (5 s handshake timeout), offering
// protocols as Sec-WebSocket-Protocol.
func wsDial(s *Server, path string, protocols ...string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: protocols}
	return d.Dial(wsURL(s, path), nil)
}

// wsDialJSON connects to path on s with websocket.DefaultDialer and
// header, failing t on an error, and returns the connection with next,
// which reads one JSON object frame within 5 s and fails t on an error.
// The caller closes the connection.
func wsDialJSON(t *testing.T, s *Server, path string, header http.Header) (*websocket.Conn, func() map[string]any) {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(wsURL(s, path), header)
	if err != nil {
		t.Fatal(err)
	}
	next := func() map[string]any {
		t.Helper()
		var m map[string]any
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := c.ReadJSON(&m); err != nil {
			t.Fatalf("reading a frame: %v", err)
		}
		return m
	}
	return c, next
}

// wsCloseCode reads until the connection ends and returns the close code
// the server sent (websocket.CloseNoStatusReceived for a body-less close
// frame, CloseAbnormalClosure when no close frame came), within d.
func wsCloseCode(c *websocket.Conn, d time.Duration) (int, string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		if ce, ok := err.(*websocket.CloseError); ok {
			return ce.Code, ce.Text, nil
		}
		return 0, "", err
	}
}

// ---- raw frames -----------------------------------------------------------------

// rawWS is a hand-driven client connection: the tests that must see or
// shape frames on the wire use it. Write sends bytes as they are; frame
// sends one well-formed masked frame.
type rawWS struct {
	net.Conn
	br   *bufio.Reader
	head string // the server's response head, up to and including its blank line
}

// wsRaw sends an opening handshake for path (RFC 6455 §4.1, a random
// Sec-WebSocket-Key) with extra header lines (each ending in CRLF) and
// reads the response head within 5 s. It fails t unless the status is
// 101.
func wsRaw(t testing.TB, addr, path, extra string) *rawWS {
	t.Helper()
	c := dialT(t, addr)
	key := make([]byte, 16)
	rand.Read(key)
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key) + "\r\n" + extra + "\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatalf("write handshake: %v", err)
	}
	r := &rawWS{Conn: c, br: bufio.NewReader(c)}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the handshake response: %v (so far %q)", err, r.head)
		}
		r.head += line
		if line == "\r\n" {
			break
		}
	}
	if !strings.HasPrefix(r.head, "HTTP/1.1 101 ") {
		t.Fatalf("handshake for %s = %q; want 101", path, r.head)
	}
	c.SetReadDeadline(time.Time{})
	return r
}

// wsMaskKey is the masking key of every frame rawWS.frame writes (RFC
// 6455 §5.3). It is fixed so that a test can build a frame by hand: the
// four bytes after the length, then wsMask(payload).
var wsMaskKey = [4]byte{1, 2, 3, 4}

// wsMask returns a copy of p masked with wsMaskKey (RFC 6455 §5.3).
func wsMask(p []byte) []byte {
	out := make([]byte, len(p))
	for i := range p {
		out[i] = p[i] ^ wsMaskKey[i%4]
	}
	return out
}

// frame writes one masked client frame (RFC 6455 §5.2) in one write:
// opcode may carry RSV bits (0x40|1 is a compressed text frame, RFC 7692
// §6); the length takes the shortest of the 7-, 16- and 64-bit forms.
func (r *rawWS) frame(fin bool, opcode byte, payload []byte) error {
	var hdr []byte
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	hdr = append(hdr, b0)
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	hdr = append(hdr, wsMaskKey[:]...)
	_, err := r.Write(append(hdr, wsMask(payload)...))
	return err
}

// readFrame reads one server frame (unmasked, RFC 6455 §5.2) within d:
// its first byte (FIN 0x80, RSV1-3 0x70, opcode 0x0f) and its payload.
// At the TCP close before a frame's first byte the error is io.EOF.
func (r *rawWS) readFrame(d time.Duration) (b0 byte, payload []byte, err error) {
	r.SetReadDeadline(time.Now().Add(d))
	var h [2]byte
	if _, err = io.ReadFull(r.br, h[:]); err != nil {
		return
	}
	b0 = h[0]
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err = io.ReadFull(r.br, b[:]); err != nil {
			return
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err = io.ReadFull(r.br, b[:]); err != nil {
			return
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(r.br, payload)
	return
}

// next reads one server frame within d, as readFrame, split into its FIN
// bit and opcode (RSV bits dropped).
func (r *rawWS) next(d time.Duration) (fin bool, opcode byte, payload []byte, err error) {
	b0, payload, err := r.readFrame(d)
	return b0&0x80 != 0, b0 & 0x0f, payload, err
}

// closeFrame reads frames until a close frame (opcode 8) and returns its
// body (a 2-byte code and a reason, or empty), or an error (io.EOF when
// the connection ended without a close frame). d bounds each frame.
func (r *rawWS) closeFrame(d time.Duration) ([]byte, error) {
	for {
		_, op, p, err := r.next(d)
		if err != nil {
			return nil, err
		}
		if op == 8 {
			return p, nil
		}
	}
}

// deflateMessage compresses p as one permessage-deflate message (RFC 7692
// §7.2.1: a sync flush, without its final 00 00 ff ff).
func deflateMessage(t testing.TB, p []byte) []byte {
	var b bytes.Buffer
	fw, _ := flate.NewWriter(&b, flate.BestSpeed)
	fw.Write(p)
	fw.Flush()
	out := b.Bytes()
	if !bytes.HasSuffix(out, []byte{0, 0, 0xff, 0xff}) {
		t.Fatalf("flate sync flush %x lacks 00 00 ff ff", out)
	}
	return out[:len(out)-4]
}

// inflateMessage undoes deflateMessage (RFC 7692 §7.2.2).
func inflateMessage(p []byte) ([]byte, error) {
	fr := flate.NewReader(io.MultiReader(bytes.NewReader(p), bytes.NewReader([]byte{0, 0, 0xff, 0xff, 1, 0, 0, 0xff, 0xff})))
	return io.ReadAll(fr)
}
