package websocket

// The bytes of a WebSocket between the socket and gorilla/websocket: the
// frame checks gorilla does not make, or makes with the wrong close code,
// and the permessage-deflate line of the 101.

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// violation is a frame the client must not send: the connection is
// failed (RFC 6455 §7.1.7) with code, and the frame never reaches gorilla.
type violation struct {
	code   int
	reason string // for the close frame; short, ASCII
}

func (v *violation) Error() string { return "websocket: frame refused: " + v.reason }

var (
	// RFC 6455 §5.2: "the most significant bit MUST be 0" in a 64-bit
	// payload length. gorilla reads it as a negative length and returns
	// ErrReadLimit without a close frame.
	errLengthMSB = &violation{1002, "64-bit payload length with the most significant bit set"}
	// RFC 6455 §5.2: RSV2 and RSV3 are 0 unless an extension defines them
	// (none we negotiate does).
	errRSV23 = &violation{1002, "RSV2 or RSV3 set"}
	// RFC 6455 §5.2 and RFC 7692 §6.1: RSV1 ("Per-Message Compressed")
	// only with permessage-deflate, and only on the first frame of a data
	// message: never on a control frame or a continuation frame.
	errRSV1        = &violation{1002, "RSV1 set without permessage-deflate"}
	errRSV1Control = &violation{1002, "RSV1 set on a control frame"}
	errRSV1Cont    = &violation{1002, "RSV1 set on a continuation frame"}
	// RFC 6455 §5.5: control frames have at most 125 bytes of payload and
	// are not fragmented.
	errControlLen = &violation{1002, "control frame payload over 125 bytes"}
	errControlFIN = &violation{1002, "fragmented control frame"}
	// RFC 6455 §5.5.1: a close frame's body, if any, starts with a 2-byte
	// code; one byte is no body at all.
	errCloseLen1 = &violation{1002, "close frame with a 1-byte payload"}
	// RFC 6455 §7.4: a close code the client may send (gorilla's list:
	// 1000-1003, 1007-1013, 3000-4999).
	errCloseCode = &violation{1002, "invalid close code"}
	// RFC 6455 §5.5.1 and §8.1: the close reason is UTF-8; data that
	// is not fails the connection with 1007 (§7.4.1).
	errCloseUTF8 = &violation{1007, "invalid UTF-8 in a close reason"}
)

// wire is the net.Conn that gorilla's Conn reads and writes through.
//
// Reads: it walks the frame headers of what the client sends (payloads
// are skipped, except a close frame's 125 bytes) and refuses, before
// gorilla parses them, the frames gorilla would accept or answer with the
// wrong code (the violation values above). The bytes before the refused
// frame pass; from it on Read returns the *violation, which reaches the
// reader goroutine through gorilla's NextReader or message reader. The
// reader then sends the close frame with the violation's code (fail).
//
// Writes: the first write is gorilla's 101. gorilla answers any
// permessage-deflate offer with a fixed line; when the negotiated
// response (NegotiateDeflate) is another, the first write replaces it.
// Later writes pass through, except in try mode (see tryMark).
type wire struct {
	net.Conn
	rc syscall.RawConn // the socket's, for try writes; nil: none (TLS, HTTP/2, bytes read ahead)

	// Try writes (Session.TryBegin). try is set and read only by gorilla's
	// writers, which gorilla serialises; held is set from a blocking
	// writer's deadline to the end of its write, so that a try batch is
	// not begun while gorilla's write lock may be held for a while.
	try     bool
	held    atomic.Bool
	io      sync.Mutex // held across each write(2) of the socket; guards pending
	pending []byte     // bytes a try write left for a blocking write, in order

	deflate  bool   // permessage-deflate is negotiated
	ext      string // our Sec-WebSocket-Extensions value, "" for none
	headDone bool   // the 101 went out
	bad      *violation

	// The frame parser: hdr holds the header bytes of the current frame
	// until need of them are in; then left counts its payload.
	hdr     [14]byte
	hlen    int
	need    int
	left    uint64
	inClose bool   // the current frame is a close frame: keep its payload
	close   []byte // a close frame's payload, masked, as it arrives
}

func newWire(c net.Conn, ext string) *wire {
	w := &wire{Conn: c, deflate: ext != "", ext: ext, need: 2}
	switch t := c.(type) { // concrete sockets only: a wrapper may add to Write
	case *net.TCPConn:
		w.rc, _ = t.SyscallConn()
	case *net.UnixConn:
		w.rc, _ = t.SyscallConn()
	}
	return w
}

// tryMark is the write deadline that puts the wire in try mode for the
// writes gorilla makes under it (Session.TryBegin): gorilla sets its
// connection's deadline before each frame it writes, under the lock that
// serialises its writers, so the mode holds for the frames of the one
// writer that set it, and a ping or close frame that another goroutine
// writes with its own deadline is written blocking as always. It is a
// date no real deadline has.
var tryMark = time.Unix(1, 0)

// SetWriteDeadline sets the socket's write deadline, or try mode for
// tryMark (which leaves the socket's deadline as it was).
func (w *wire) SetWriteDeadline(t time.Time) error {
	if w.rc != nil && t.Equal(tryMark) {
		w.try = true
		return nil
	}
	w.try = false
	if !t.IsZero() && w.headDone {
		// A gorilla writer's: until the end of the Write that follows.
		// (gorilla clears the handshake's deadline with a zero one,
		// and no write follows that.)
		w.held.Store(true)
	}
	return w.Conn.SetWriteDeadline(t)
}

// SetDeadline is SetWriteDeadline and SetReadDeadline.
func (w *wire) SetDeadline(t time.Time) error {
	if err := w.SetWriteDeadline(t); err != nil {
		return err
	}
	return w.Conn.SetReadDeadline(t)
}

// canTry reports, without blocking, whether a batch of try writes can
// begin: the socket allows them, no blocking write is under way, and no
// bytes of an earlier try write wait for flushPending.
func (w *wire) canTry() bool {
	if w.rc == nil || w.held.Load() || !w.io.TryLock() {
		return false
	}
	ok := len(w.pending) == 0
	w.io.Unlock()
	return ok
}

// hasPending reports whether try writes left bytes for flushPending.
func (w *wire) hasPending() bool {
	w.io.Lock()
	defer w.io.Unlock()
	return len(w.pending) > 0
}

// flushPending writes the bytes try writes left, blocking, within the
// deadline d.
func (w *wire) flushPending(d time.Time) error {
	w.io.Lock()
	defer w.io.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	w.Conn.SetWriteDeadline(d)
	return w.flushLocked()
}

// flushLocked writes pending, blocking. w.io held.
func (w *wire) flushLocked() error {
	n, err := w.Conn.Write(w.pending)
	w.pending = w.pending[n:]
	if len(w.pending) == 0 {
		w.pending = nil
	}
	return err
}

// tryWrite writes p in try mode: one non-blocking write(2) of what the
// socket buffer takes now; the rest is kept in pending, in order, for
// flushPending (after pending bytes, all of p is). It reports len(p)
// unless the socket failed. w.io held.
func (w *wire) tryWrite(p []byte) (int, error) {
	if len(w.pending) > 0 {
		w.pending = append(w.pending, p...)
		return len(p), nil
	}
	var n int
	var werr error
	err := w.rc.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), p)
			if werr != syscall.EINTR {
				return true // one attempt: never wait for the socket
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if werr != nil && werr != syscall.EAGAIN {
		return 0, werr
	}
	n = max(n, 0)
	if n < len(p) {
		w.pending = append(w.pending, p[n:]...)
	}
	return len(p), nil
}

// Read reads from the socket and checks what came (see wire).
func (w *wire) Read(p []byte) (int, error) {
	if w.bad != nil {
		return 0, w.bad
	}
	n, err := w.Conn.Read(p)
	if n > 0 {
		if cut, v := w.scan(p[:n]); v != nil {
			w.bad = v
			if cut > 0 {
				return cut, nil
			}
			return 0, v
		}
	}
	return n, err
}

// scan feeds b to the frame parser. On a violation it returns it and how
// many bytes of b come before the refused frame.
func (w *wire) scan(b []byte) (int, *violation) {
	start := 0 // where the current frame starts in b (0: before b)
	for i := 0; i < len(b); {
		if w.left > 0 {
			k := uint64(len(b) - i)
			if k > w.left {
				k = w.left
			}
			if w.inClose {
				w.close = append(w.close, b[i:i+int(k)]...)
			}
			i += int(k)
			if w.left -= k; w.left == 0 {
				if v := w.endFrame(); v != nil {
					return start, v
				}
				start = i
			}
			continue
		}
		w.hdr[w.hlen] = b[i]
		w.hlen++
		i++
		if v := w.headerByte(); v != nil {
			return start, v
		}
		if w.hlen < w.need {
			continue
		}
		w.startPayload()
		if w.left == 0 {
			if v := w.endFrame(); v != nil {
				return start, v
			}
			start = i
		}
	}
	return 0, nil
}

// headerByte checks the header bytes held so far, as soon as a rule can
// be judged, and sets need once the second byte tells the header's size.
func (w *wire) headerByte() *violation {
	switch w.hlen {
	case 2:
		b0, b1 := w.hdr[0], w.hdr[1]
		op, n7 := b0&0x0f, b1&0x7f
		control := op >= 8
		switch {
		case b0&0x30 != 0:
			return errRSV23
		case b0&0x40 != 0 && !w.deflate:
			return errRSV1
		case b0&0x40 != 0 && control:
			return errRSV1Control
		case b0&0x40 != 0 && op == 0:
			return errRSV1Cont
		case control && b0&0x80 == 0:
			return errControlFIN
		case control && n7 > 125:
			return errControlLen
		case op == 8 && n7 == 1:
			return errCloseLen1
		}
		w.need = 2
		switch n7 {
		case 126:
			w.need += 2
		case 127:
			w.need += 8
		}
		if b1&0x80 != 0 {
			w.need += 4
		}
	case 3:
		if w.hdr[1]&0x7f == 127 && w.hdr[2]&0x80 != 0 {
			return errLengthMSB
		}
	}
	return nil
}

// startPayload is called once the whole header is in.
func (w *wire) startPayload() {
	switch n7 := w.hdr[1] & 0x7f; n7 {
	case 126:
		w.left = uint64(binary.BigEndian.Uint16(w.hdr[2:4]))
	case 127:
		w.left = binary.BigEndian.Uint64(w.hdr[2:10])
	default:
		w.left = uint64(n7)
	}
	w.inClose = w.hdr[0]&0x0f == 8
	w.close = w.close[:0]
}

// endFrame is called when the current frame's payload is all in; it
// checks a close frame's body and readies the parser for the next frame.
func (w *wire) endFrame() *violation {
	inClose := w.inClose
	w.hlen, w.need, w.inClose = 0, 2, false
	if !inClose || len(w.close) < 2 {
		return nil
	}
	body := w.close
	if w.hdr[1]&0x80 != 0 {
		key := w.hdr[2:6] // a control frame's length fits the 7 bits
		for i := range body {
			body[i] ^= key[i&3]
		}
	}
	if code := int(binary.BigEndian.Uint16(body)); !ValidCloseCode(code) {
		return errCloseCode
	}
	if !utf8.Valid(body[2:]) {
		return errCloseUTF8
	}
	return nil
}

// ValidCloseCode reports whether a peer may send code in a close frame
// (RFC 6455 §7.4.1, §7.4.2): the codes gorilla accepts, so that both
// agree. 1005, 1006 and 1015 are never sent; 1004, 1014 and 1016-2999 are
// reserved.
func ValidCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1013:
		return true
	}
	return code >= 3000 && code <= 4999
}

// gorillaDeflateLine is the line gorilla's Upgrader writes when it
// accepts a permessage-deflate offer (github.com/gorilla/websocket
// v1.5.3, server.go); it is what gorilla then does on the wire.
var gorillaDeflateLine = []byte("Sec-WebSocket-Extensions: " + deflateAnswer + "\r\n")

// Write writes p; the first write (the 101) gets our extension line.
// gorilla serialises its writes (and the 101 is written before the
// session's goroutines start), so headDone needs no lock. In try mode
// (tryMark) the write does not block (tryWrite); else the bytes a try
// write left go first.
func (w *wire) Write(p []byte) (int, error) {
	if w.headDone {
		w.io.Lock()
		defer w.io.Unlock()
		if w.try {
			return w.tryWrite(p)
		}
		defer w.held.Store(false)
		if len(w.pending) > 0 {
			if err := w.flushLocked(); err != nil {
				return 0, err
			}
		}
		return w.Conn.Write(p)
	}
	defer w.held.Store(false)
	w.headDone = true
	if w.ext == "" || w.ext == deflateAnswer {
		return w.Conn.Write(p)
	}
	i := bytes.Index(p, gorillaDeflateLine)
	if i < 0 {
		return 0, ErrDeflateLine
	}
	head := make([]byte, 0, len(p)+len(w.ext))
	head = append(head, p[:i]...)
	head = append(head, "Sec-WebSocket-Extensions: "...)
	head = append(head, w.ext...)
	head = append(head, "\r\n"...)
	head = append(head, p[i+len(gorillaDeflateLine):]...)
	if _, err := w.Conn.Write(head); err != nil {
		return 0, err
	}
	return len(p), nil
}
