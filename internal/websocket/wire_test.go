package websocket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
)

// clientFrame is one masked client frame (RFC 6455 §5.2); b0 holds FIN,
// the RSV bits and the opcode.
func clientFrame(b0 byte, payload []byte) []byte {
	hdr := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	mask := []byte{1, 2, 3, 4}
	hdr = append(hdr, mask...)
	for i, c := range payload {
		hdr = append(hdr, c^mask[i%4])
	}
	return hdr
}

// chunkConn is a net.Conn whose reads return src in pieces of at most
// step bytes.
type chunkConn struct {
	net.Conn
	src  []byte
	step int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.step, len(c.src))
	n = copy(p, c.src[:n])
	c.src = c.src[n:]
	return n, nil
}

// readWire reads all a wire over src passes, step bytes per socket read;
// it returns what passed and the error that ended it.
func readWire(src []byte, step int, deflate bool) ([]byte, error) {
	ext := ""
	if deflate {
		ext = deflateAnswer
	}
	w := newWire(&chunkConn{src: src, step: step}, ext)
	var out []byte
	buf := make([]byte, 64)
	for {
		n, err := w.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, err
		}
	}
}

// TestRFC6455_WireViolations: each frame rule the wire enforces before
// gorilla (RFC 6455 §5.2, §5.5, §5.5.1, §7.4, §8.1; RFC 7692 §6.1), read
// whole and one byte per socket read; the frames before the refused one
// pass whole, nothing of it does.
func TestRFC6455_WireViolations(t *testing.T) {
	ok := clientFrame(0x81, []byte("fine"))
	for _, tc := range []struct {
		id      string
		frames  []byte
		deflate bool
		want    *violation
	}{
		{"len64-msb", append([]byte{0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4}, "hello"...), false, errLengthMSB},
		{"close-1-byte", clientFrame(0x88, []byte{0x03}), false, errCloseLen1},
		{"close-reason-not-utf8", clientFrame(0x88, []byte{0x03, 0xe8, 'o', 0xff, 0xfe}), false, errCloseUTF8},
		{"close-reason-truncated-utf8", clientFrame(0x88, append([]byte{0x0f, 0xa0}, "€"[:2]...)), false, errCloseUTF8},
		{"close-code-999", clientFrame(0x88, []byte{0x03, 0xe7}), false, errCloseCode},
		{"close-code-1005", clientFrame(0x88, []byte{0x03, 0xed}), false, errCloseCode},
		{"close-code-1006", clientFrame(0x88, []byte{0x03, 0xee}), false, errCloseCode},
		{"close-code-5000", clientFrame(0x88, []byte{0x13, 0x88}), false, errCloseCode},
		{"ping-126-bytes", clientFrame(0x89, bytes.Repeat([]byte("p"), 126)), false, errControlLen},
		{"ping-fragmented", clientFrame(0x09, []byte("p")), false, errControlFIN},
		{"ping-fragmented-inside-a-message", append(clientFrame(0x01, []byte("frag")), clientFrame(0x09, []byte("p"))...), false, errControlFIN},
		{"rsv1-ping-deflate", clientFrame(0x80|0x40|9, []byte("p")), true, errRSV1Control},
		{"rsv1-close-deflate", clientFrame(0x80|0x40|8, []byte{0x03, 0xe8}), true, errRSV1Control},
		{"rsv1-continuation-deflate", append(clientFrame(0x40|1, []byte("abc")), clientFrame(0x80|0x40, []byte("def"))...), true, errRSV1Cont},
		{"rsv1-without-deflate", clientFrame(0x80|0x40|1, []byte("x")), false, errRSV1},
		{"rsv2", clientFrame(0x80|0x20|1, []byte("x")), true, errRSV23},
		{"rsv3", clientFrame(0x80|0x10|2, []byte("x")), false, errRSV23},
	} {
		for _, step := range []int{1 << 20, 1, 3} {
			src := append(append([]byte(nil), ok...), tc.frames...)
			passed, err := readWire(src, step, tc.deflate)
			var v *violation
			if !errors.As(err, &v) || v != tc.want {
				t.Errorf("%s, %d bytes per read: error %v; want %v", tc.id, step, err, tc.want)
				continue
			}
			// What passed: the good frame whole, and of the frames that
			// precede the refused one in tc.frames, all.
			if !bytes.HasPrefix(passed, ok) {
				t.Errorf("%s, %d bytes per read: passed %x; want the good frame %x first", tc.id, step, passed, ok)
			}
			if len(passed) >= len(src) {
				t.Errorf("%s, %d bytes per read: the refused frame passed", tc.id, step)
			}
			// A second Read returns the violation again.
			w := &wire{bad: v}
			if _, err := w.Read(make([]byte, 1)); err != v {
				t.Errorf("%s: Read after the violation = %v", tc.id, err)
			}
		}
	}
}

// TestRFC6455_WirePasses: frames the wire lets through, whole, in pieces:
// a close with a valid code and UTF-8 reason, an empty close, a 125-byte
// ping, RSV1 on a data frame with permessage-deflate, a 64-bit length
// without its top bit, a fragmented message with a ping inside it.
func TestRFC6455_WirePasses(t *testing.T) {
	var src []byte
	src = append(src, clientFrame(0x88, append([]byte{0x03, 0xe8}, "bye €"...))...)
	src = append(src, clientFrame(0x88, nil)...)
	src = append(src, clientFrame(0x88, []byte{0x0f, 0xa0})...) // 4000
	src = append(src, clientFrame(0x89, bytes.Repeat([]byte("p"), 125))...)
	src = append(src, clientFrame(0x80|0x40|1, []byte("zz"))...)
	src = append(src, clientFrame(0x02, []byte("frag"))...)
	src = append(src, clientFrame(0x8a, []byte("pong"))...)
	src = append(src, clientFrame(0x80, []byte("ment"))...)
	src = append(src, clientFrame(0x82, bytes.Repeat([]byte("b"), 70000))...)
	for _, step := range []int{1 << 20, 1, 7} {
		passed, err := readWire(src, step, true)
		if err != io.EOF || !bytes.Equal(passed, src) {
			t.Errorf("%d bytes per read: passed %d of %d bytes, %v; want all, EOF", step, len(passed), len(src), err)
		}
	}
}

// TestRFC6455_ValidCloseCode: the codes a peer may send (§7.4.1, §7.4.2).
func TestRFC6455_ValidCloseCode(t *testing.T) {
	valid := map[int]bool{}
	for c := 1000; c <= 1003; c++ {
		valid[c] = true
	}
	for c := 1007; c <= 1013; c++ {
		valid[c] = true
	}
	for c := 3000; c <= 4999; c++ {
		valid[c] = true
	}
	for c := 0; c < 6000; c++ {
		if got := ValidCloseCode(c); got != valid[c] {
			t.Errorf("ValidCloseCode(%d) = %v; want %v", c, got, valid[c])
		}
	}
}

// TestRFC7692_WireDeflateLine: the 101 gorilla writes gets the negotiated
// answer in place of gorilla's fixed line; later writes pass untouched.
func TestRFC7692_WireDeflateLine(t *testing.T) {
	head := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n" + string(gorillaDeflateLine) + "X: y\r\n\r\n"
	for _, tc := range []struct{ ext, want string }{
		{"", head},
		{deflateAnswer, head},
		{deflateAnswer + "; server_max_window_bits=15", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Extensions: " + deflateAnswer + "; server_max_window_bits=15\r\nX: y\r\n\r\n"},
	} {
		c1, c2 := net.Pipe()
		w := newWire(c1, tc.ext)
		got := make(chan string)
		go func() {
			b, _ := io.ReadAll(c2)
			got <- string(b)
		}()
		if n, err := w.Write([]byte(head)); err != nil || n != len(head) {
			t.Errorf("ext %q: Write = %d, %v; want %d, nil", tc.ext, n, err, len(head))
		}
		w.Write(gorillaDeflateLine) // a later write: untouched
		c1.Close()
		if g := <-got; g != tc.want+string(gorillaDeflateLine) {
			t.Errorf("ext %q: wrote %q; want %q", tc.ext, g, tc.want+string(gorillaDeflateLine))
		}
	}
	// A 101 without gorilla's line: refused, nothing written.
	w := newWire(&chunkConn{}, deflateAnswer+"; server_max_window_bits=15")
	if _, err := w.Write([]byte("HTTP/1.1 101 Switching Protocols\r\n\r\n")); err != ErrDeflateLine {
		t.Errorf("Write without gorilla's line = %v; want ErrDeflateLine", err)
	}
}
