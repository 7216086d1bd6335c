package tests

// WebSocket frames and handshakes the RFCs refuse (issue 27): RFC 6455
// frame rules gorilla/websocket lets through or answers with the wrong
// code, corrupt permessage-deflate data, the permessage-deflate
// negotiation of RFC 7692 §7, an app's close reason over 123 bytes and an
// app's subprotocol the client never offered. Raw frames from a TCP
// socket, and the websockets client from PyPI for the negotiation.
// Apps: testapps/ws_echo.py, ws_cases.py; client testapps/ws_client_deflate.py.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// wantFailed reads the server's close frame and wants code, then the TCP
// close (EOF) without our answering: the connection was failed.
func wantFailed(t *testing.T, r *rawWS, code uint16) {
	t.Helper()
	body, err := r.closeFrame(3 * time.Second)
	if err != nil || len(body) < 2 || binary.BigEndian.Uint16(body) != code {
		t.Fatalf("close frame %x (%q), %v; want code %d", body, body, err, code)
	}
	if !utf8.Valid(body[2:]) {
		t.Errorf("close reason %q is not UTF-8", body[2:])
	}
	if _, _, err := r.readFrame(3 * time.Second); err != io.EOF {
		t.Errorf("after the close frame: %v; want EOF (the server closes TCP)", err)
	}
}

// TestWS_FrameViolations: frames RFC 6455 (and RFC 7692 §6.1 once
// permessage-deflate is negotiated) refuse fail the connection with a
// close frame carrying the RFC's code before the TCP close, and nothing
// reaches the app, which gets websocket.disconnect with that code. Each
// shape of the rule, not one input: every control-frame rule (§5.5), the
// close body (§5.5.1, §7.4, §8.1), the 64-bit length (§5.2), RSV bits on
// each kind of frame.
func TestWS_FrameViolations(t *testing.T) {
	s := Start(t, "ws_echo:app")
	const deflate = "Sec-WebSocket-Extensions: permessage-deflate\r\n"
	cases := []violationCase{
		{"len64-msb", "", func(r *rawWS) {
			hdr := []byte{0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4}
			r.Write(append(hdr, wsMask([]byte("hello"))...))
		}, 1002, "TCP close without a close frame"},
		{"len64-msb-after-a-message", "", func(r *rawWS) {
			// the valid message before it reaches the app; nothing of
			// the refused frame does
			r.frame(true, 2, []byte("ok"))
			hdr := []byte{0x82, 0x80 | 127, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}
			r.Write(hdr)
		}, 1002, "TCP close without a close frame"},
		{"close-1-byte", "", func(r *rawWS) { r.frame(true, 8, []byte{0x03}) }, 1002, "an empty close frame"},
		{"close-reason-not-utf8", "", func(r *rawWS) { r.frame(true, 8, []byte{0x03, 0xe8, 'o', 0xff, 0xfe}) }, 1007, "1002"},
		{"close-reason-truncated-utf8", "", func(r *rawWS) { r.frame(true, 8, append([]byte{0x0f, 0xa0}, "€"[:2]...)) }, 1007, "1002"},
		{"close-code-999", "", func(r *rawWS) { r.frame(true, 8, []byte{0x03, 0xe7}) }, 1002, ""},
		{"close-code-1005", "", func(r *rawWS) { r.frame(true, 8, []byte{0x03, 0xed}) }, 1002, ""},
		{"close-code-5000", "", func(r *rawWS) { r.frame(true, 8, []byte{0x13, 0x88}) }, 1002, ""},
		{"ping-126-bytes", "", func(r *rawWS) { r.frame(true, 9, bytes.Repeat([]byte("p"), 126)) }, 1002, ""},
		{"ping-fragmented", "", func(r *rawWS) { r.frame(false, 9, []byte("p")) }, 1002, ""},
		{"ping-fragmented-inside-a-message", "", func(r *rawWS) {
			r.frame(false, 1, []byte("frag"))
			r.frame(false, 9, []byte("p"))
			r.frame(true, 0, []byte("ment"))
		}, 1002, ""},
		{"rsv1-ping-deflate", deflate, func(r *rawWS) { r.frame(true, 0x40|9, []byte("p")) }, 1002, "a pong"},
		{"rsv1-pong-deflate", deflate, func(r *rawWS) { r.frame(true, 0x40|10, []byte("p")) }, 1002, "ignored"},
		{"rsv1-close-deflate", deflate, func(r *rawWS) { r.frame(true, 0x40|8, []byte{0x03, 0xe8}) }, 1002, "1000 echoed"},
		{"rsv1-continuation-deflate", deflate, func(r *rawWS) {
			m := deflateMessage(t, []byte("hello hello hello"))
			r.frame(false, 0x40|1, m[:3])
			r.frame(true, 0x40|0, m[3:])
		}, 1002, "the message echoed"},
		{"rsv1-without-deflate", "", func(r *rawWS) { r.frame(true, 0x40|1, []byte("x")) }, 1002, ""},
		{"rsv2", deflate, func(r *rawWS) { r.frame(true, 0x20|1, []byte("x")) }, 1002, ""},
		{"rsv3", "", func(r *rawWS) { r.frame(true, 0x10|2, []byte("x")) }, 1002, ""},
	}
	// Each case twice: the frames in one write, and one byte per write
	// (the server's checks see headers and close bodies in pieces).
	for _, split := range []bool{false, true} {
		for _, tc := range cases {
			id := tc.id
			if split {
				id += "/byte-by-byte"
			}
			t.Run(id, func(t *testing.T) { runViolation(t, s, tc, split) })
		}
	}
	wsNoTracebacks(t, s)
}

// dribble is a connection that writes one byte at a time.
type dribble struct{ net.Conn }

func (d dribble) Write(p []byte) (int, error) {
	for i := range p {
		if _, err := d.Conn.Write(p[i : i+1]); err != nil {
			return i, err
		}
		time.Sleep(200 * time.Microsecond)
	}
	return len(p), nil
}

// violationCase is one case of TestWS_FrameViolations.
type violationCase struct {
	id    string
	ext   string // handshake header lines
	send  func(r *rawWS)
	code  uint16
	today string // what the server did before issue 27, if it differs
}

// runViolation runs tc against ws_echo's /echo.
func runViolation(t *testing.T, s *Server, tc violationCase, split bool) {
	var before echoStats
	getJSON(t, s, "/stats", &before)
	r := wsRaw(t, s.Addr, "/echo", tc.ext)
	defer r.Close()
	if split {
		r.Conn = dribble{r.Conn}
	}
	if tc.ext != "" && !strings.Contains(r.head, "permessage-deflate") {
		t.Fatalf("handshake %q did not negotiate permessage-deflate", r.head)
	}
	tc.send(r)
	wantFailed(t, r, tc.code)
	if tc.id == "len64-msb-after-a-message" {
		// The message before the bad frame reaches the app; the app's
		// echo of it may then raise (the connection is gone) before it
		// records its websocket.disconnect.
		st := waitStats(t, s, func(st echoStats) bool { return st.Received == before.Received+1 })
		for _, d := range st.Disconnects[len(before.Disconnects):] {
			if d[0] != float64(tc.code) {
				t.Errorf("the app's websocket.disconnect code %v; want %d", d[0], tc.code)
			}
		}
		return
	}
	st := waitStats(t, s, func(st echoStats) bool { return len(st.Disconnects) == len(before.Disconnects)+1 })
	if got := st.Disconnects[len(before.Disconnects)][0]; got != float64(tc.code) {
		t.Errorf("the app's websocket.disconnect code %v; want %d", got, tc.code)
	}
	if st.Received != before.Received {
		t.Errorf("the app received %d messages; want none (nothing of a refused frame)", st.Received-before.Received)
	}
}

// TestWS_DeflateCorrupt: a compressed message that does not inflate fails
// the connection with 1007 (RFC 7692 §8.1: fail the connection; RFC 6455
// §7.4.1: invalid frame payload data) as a close frame before the TCP
// close, and the app gets websocket.disconnect 1007, not the message. A
// good compressed message on the same kind of connection is echoed.
func TestWS_DeflateCorrupt(t *testing.T) {
	s := Start(t, "ws_echo:app")
	const ext = "Sec-WebSocket-Extensions: permessage-deflate\r\n"
	// A stored block announcing 1000 bytes with 3 in the message; one
	// whose NLEN is not the complement of LEN; a reserved block type.
	short := []byte{0x00, 0xe8, 0x03, 0x17, 0xfc, 'a', 'b', 'c'}
	badNLEN := []byte{0x00, 0x03, 0x00, 0x00, 0x00, 'a', 'b', 'c'}
	reserved := []byte{0xff, 0xff, 0xff}
	for i, tc := range []struct {
		id      string
		opcode  byte
		payload []byte
	}{
		{"stored-block-cut-short", 2, short},
		{"stored-block-bad-nlen", 2, badNLEN},
		{"reserved-block-type", 2, reserved},
		{"reserved-block-type-text", 1, reserved},
	} {
		t.Run(tc.id, func(t *testing.T) {
			r := wsRaw(t, s.Addr, "/echo", ext)
			defer r.Close()
			if !strings.Contains(r.head, "permessage-deflate") {
				t.Fatalf("handshake %q did not negotiate permessage-deflate", r.head)
			}
			// first a good compressed message: echoed, compressed
			r.frame(true, 0x40|2, deflateMessage(t, []byte("good good good")))
			b0, p, err := r.readFrame(3 * time.Second)
			if err != nil || b0&0x40 == 0 {
				t.Fatalf("echo %x %x, %v; want a compressed frame", b0, p, err)
			}
			if m, err := inflateMessage(p); err != nil || string(m) != "good good good" {
				t.Fatalf("echo inflates to %q, %v", m, err)
			}
			r.frame(true, 0x40|tc.opcode, tc.payload)
			wantFailed(t, r, 1007)
			st := waitStats(t, s, func(st echoStats) bool { return len(st.Disconnects) == i+1 })
			if got := st.Disconnects[i][0]; got != 1007.0 {
				t.Errorf("the app's websocket.disconnect code %v; want 1007", got)
			}
			if st.Received != i+1 {
				t.Errorf("the app received %d messages; want %d (the good ones only)", st.Received, i+1)
			}
		})
	}
	wsNoTracebacks(t, s)
}

// TestWS_DeflateNegotiation: permessage-deflate offers are judged by RFC
// 7692 §5 and §7: an offer with an unknown, invalid or repeated parameter
// is declined and the next offer is tried; server_max_window_bits below 15
// is declined (compress/flate's window is 32 KiB, §7.1.2.1) and 15 is
// echoed; client_max_window_bits needs no answer. No acceptable offer: the
// handshake completes without the extension. What the response says is
// what the wire does: a compressed echo when negotiated, a plain one when
// not.
func TestWS_DeflateNegotiation(t *testing.T) {
	s := Start(t, "ws_echo:app")
	const base = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
	for _, tc := range []struct {
		id, offer, want string // want: the response's Sec-WebSocket-Extensions, "" none
	}{
		{"plain", "permessage-deflate", base},
		{"browser", "permessage-deflate; client_max_window_bits", base},
		{"all-params", "permessage-deflate; server_no_context_takeover; client_no_context_takeover; client_max_window_bits=9; server_max_window_bits=15", base + "; server_max_window_bits=15"},
		{"server-max-15-quoted", `permessage-deflate; server_max_window_bits="15"`, base + "; server_max_window_bits=15"},
		{"server-max-10", "permessage-deflate; server_max_window_bits=10", ""},
		{"server-max-10-then-plain", "permessage-deflate; server_max_window_bits=10, permessage-deflate; client_max_window_bits", base},
		{"server-max-no-value", "permessage-deflate; server_max_window_bits", ""},
		{"server-max-16", "permessage-deflate; server_max_window_bits=16", ""},
		{"client-max-7", "permessage-deflate; client_max_window_bits=7", ""},
		{"client-max-leading-zero", "permessage-deflate; client_max_window_bits=09", ""},
		{"client-max-not-a-number", "permessage-deflate; client_max_window_bits=abc", ""},
		{"unknown-param", "permessage-deflate; foo=1", ""},
		{"unknown-param-then-plain", "permessage-deflate; foo, permessage-deflate", base},
		{"repeated-param", "permessage-deflate; client_no_context_takeover; client_no_context_takeover", ""},
		{"repeated-window", "permessage-deflate; client_max_window_bits=10; client_max_window_bits=10", ""},
		{"value-on-no-context-takeover", "permessage-deflate; server_no_context_takeover=1", ""},
		{"other-extension-first", "x-webkit-deflate-frame, permessage-deflate", base},
		{"two-fields", "permessage-deflate; bogus=\"a,b\"\r\nSec-WebSocket-Extensions: permessage-deflate", base},
		{"unterminated-quote", `permessage-deflate; client_max_window_bits="10`, ""},
	} {
		t.Run(tc.id, func(t *testing.T) {
			r := wsRaw(t, s.Addr, "/echo", "Sec-WebSocket-Extensions: "+tc.offer+"\r\n")
			defer r.Close()
			var got []string
			for _, line := range strings.Split(r.head, "\r\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "sec-websocket-extensions") {
					got = append(got, strings.TrimSpace(v))
				}
			}
			if strings.Join(got, ", ") != tc.want {
				t.Fatalf("Sec-WebSocket-Extensions %q; want %q", got, tc.want)
			}
			msg := []byte("compress me, compress me, compress me ✓")
			if tc.want != "" {
				r.frame(true, 0x40|1, deflateMessage(t, msg))
			} else {
				r.frame(true, 1, msg)
			}
			b0, p, err := r.readFrame(3 * time.Second)
			if err != nil || b0&0x0f != 1 {
				t.Fatalf("echo %x %q, %v", b0, p, err)
			}
			if compressed := b0&0x40 != 0; compressed != (tc.want != "") {
				t.Fatalf("echo compressed=%v; the response negotiated %q", compressed, tc.want)
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
	wsNoTracebacks(t, s)
}

// TestWS_DeflateWebsocketsClient: the websockets client from PyPI with
// server_max_window_bits=10 connects (the offer is declined: no
// compression; before issue 27 the server accepted it without the
// parameter and the client failed the handshake), with
// server_max_window_bits=15 it gets compression, and its default offer
// too; each echoes a message.
func TestWS_DeflateWebsocketsClient(t *testing.T) {
	venv := os.Getenv("TURNSTILE_VENV")
	if venv == "" {
		t.Skip("TURNSTILE_VENV is not set: the websockets client lives there")
	}
	s := Start(t, "ws_echo:app")
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), filepath.Join(AppDir(), "ws_client_deflate.py"), "ws://"+s.Addr+"/echo").CombinedOutput()
	if err != nil {
		t.Fatalf("websockets client: %v\n%s", err, out)
	}
	var got map[string]struct {
		Extensions *string
		Echo       bool
		Error      string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	const base = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
	for id, want := range map[string]string{
		"server_max_window_bits=10": "",
		"server_max_window_bits=15": base + "; server_max_window_bits=15",
		"default":                   base,
	} {
		g, ok := got[id]
		ext := ""
		if g.Extensions != nil {
			ext = *g.Extensions
		}
		if !ok || g.Error != "" || !g.Echo || ext != want {
			t.Errorf("%s: %+v (extensions %q); want an echo with extensions %q", id, g, ext, want)
		}
	}
	wsNoTracebacks(t, s)
}

// TestWS_CloseReasonTruncated: an app that closes with a reason over 123
// bytes of UTF-8 (ASGI allows any str) gets its code on the wire and the
// reason cut at a character boundary to fit a close frame (RFC 6455
// §5.5: 125 bytes with the code; §5.5.1: the reason is UTF-8).
func TestWS_CloseReasonTruncated(t *testing.T) {
	s := Start(t, "ws_cases:app")
	for _, tc := range []struct{ kind, want string }{
		{"ascii", strings.Repeat("x", 123)},
		{"euro", "x" + strings.Repeat("€", 40)}, // 121 bytes: a 41st € would end at 124
		{"e", strings.Repeat("é", 61)},          // 122 bytes
	} {
		t.Run(tc.kind, func(t *testing.T) {
			r := wsRaw(t, s.Addr, "/close-long?kind="+tc.kind, "")
			defer r.Close()
			body, err := r.closeFrame(3 * time.Second)
			if err != nil || len(body) < 2 {
				t.Fatalf("close frame %x, %v", body, err)
			}
			if code := binary.BigEndian.Uint16(body); code != 4321 || string(body[2:]) != tc.want {
				t.Errorf("close %d %q (%d bytes); want 4321 %q (%d bytes)", code, body[2:], len(body)-2, tc.want, len(tc.want))
			}
		})
	}
	wsNoTracebacks(t, s)
}

// TestWS_UnofferedSubprotocol: RFC 6455 §4.2.2: the server's subprotocol
// is one the client offered. websocket.accept with another raises
// ValueError in send(); an app that lets it propagate gets a 500 and its
// traceback logged, and no 101 goes out; an app that catches it can
// accept without one. A sec-websocket-protocol header set by hand is
// checked by Go: 500 and an error logged.
func TestWS_UnofferedSubprotocol(t *testing.T) {
	s := Start(t, "ws_cases:app")
	hs := "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	for _, tc := range []struct{ id, path, offer string }{
		{"offered-another", "/subproto/unoffered", "Sec-WebSocket-Protocol: chat, json\r\n"},
		{"offered-none", "/subproto/unoffered", ""},
		{"hand-set-header", "/subproto/header", "Sec-WebSocket-Protocol: chat\r\n"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			resp, _, err := roundTripRaw(s.Addr, []string{"GET " + tc.path + " HTTP/1.1\r\nHost: x\r\n" + hs + tc.offer + "\r\n"}, 0, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 500 || resp.Header.Get("Sec-WebSocket-Protocol") != "" {
				t.Errorf("%d, Sec-WebSocket-Protocol %q; want 500 without it", resp.StatusCode, resp.Header.Get("Sec-WebSocket-Protocol"))
			}
		})
	}
	c, resp, err := wsDial(s, "/subproto/caught", "chat")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, msg, err := c.ReadMessage()
	if err != nil || !strings.HasPrefix(string(msg), "ValueError: ") || !strings.Contains(string(msg), "'evil' was not offered") {
		t.Errorf("caught: %q, %v; want the ValueError", msg, err)
	}
	if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != "" {
		t.Errorf("caught: Sec-WebSocket-Protocol %q; want none", p)
	}
	logs := s.Logs()
	deadline := time.Now().Add(2 * time.Second)
	for (strings.Count(logs, "was not offered by the client") < 2 || !strings.Contains(logs, "did not offer")) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		logs = s.Logs()
	}
	if n := strings.Count(logs, "was not offered by the client"); n < 2 {
		t.Errorf("the two uncaught ValueErrors were logged %d times; want 2", n)
	}
	if !strings.Contains(logs, "did not offer") {
		t.Error("the hand-set sec-websocket-protocol refusal was not logged")
	}
}
