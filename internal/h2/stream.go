package h2

import (
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"turnstile/internal/http1"
)

// stream is one HTTP/2 stream; it implements http1.Stream for the
// handler goroutine. Its state is guarded by c.mu.
type stream struct {
	c    *conn
	id   uint32
	head http1.StreamHead // filled by the reader before the handler starts

	data    []byte // DATA received, not read yet
	eof     bool   // END_STREAM received: data is all there is
	err     error  // reset or connection gone (sticky)
	trailer []http1.Field
	recvWin int64 // our receive window left, as the peer sees it
	recvAck int64 // bytes read, not yet returned by WINDOW_UPDATE
	sendWin int64 // the peer's receive window
	clWant  int64 // content-length, -1 if none
	clGot   int64 // DATA payload received
	// emptyData counts DATA frames without payload or END_STREAM
	// (maxEmptyData).
	emptyData int

	remoteClosed bool // END_STREAM or RST_STREAM received (half-closed remote)
	endSent      bool // END_STREAM sent (half-closed local)
	closed       bool // no longer in c.streams
	rst          bool // reset (either side): a handler not started never starts
	sent100      bool // 100 Continue sent

	// dataCh and winCh are made by the handler when it first waits
	// (chanLocked), so a stream that never waits (a GET answered within
	// the windows) allocates neither; a wake on nil is a no-op.
	dataCh chan struct{} // 1-buffered: data, eof or err changed
	winCh  chan struct{} // 1-buffered: sendWin or err changed
	done   chan struct{} // closed with err
}

func newStream(c *conn, id uint32) *stream {
	return &stream{
		c: c, id: id,
		recvWin: int64(c.cfg.InitialStreamWindowSize),
		sendWin: int64(c.peerWin),
		clWant:  -1,
		done:    make(chan struct{}),
	}
}

// chanLocked returns *ch, made first if nil (dataCh, winCh).
func chanLocked(ch *chan struct{}) chan struct{} {
	if *ch == nil {
		*ch = make(chan struct{}, 1)
	}
	return *ch
}

func (st *stream) wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// fail ends the stream for its handler with err (once): Done closes.
func (st *stream) fail(err error) {
	if st.err != nil {
		return
	}
	st.err, st.rst, st.remoteClosed = err, true, true
	close(st.done)
	st.wake(st.dataCh)
	st.wake(st.winCh)
}

// wait blocks until ch is signalled, the stream fails or deadline
// passes (os.ErrDeadlineExceeded). Called without c.mu.
func (st *stream) wait(ch chan struct{}, deadline time.Time) error {
	if deadline.IsZero() {
		select {
		case <-ch:
		case <-st.done:
		}
		return nil
	}
	d := time.Until(deadline)
	if d <= 0 {
		return os.ErrDeadlineExceeded
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-st.done:
	case <-t.C:
		return os.ErrDeadlineExceeded
	}
	return nil
}

// ReadData implements http1.Stream.
func (st *stream) ReadData(p []byte, deadline time.Time) (int, error) {
	c := st.c
	c.mu.Lock()
	if st.head.ExpectContinue && !st.sent100 && len(st.data) == 0 && !st.eof && st.err == nil {
		// RFC 9110 §10.1.1: the client waits for 100 Continue.
		st.sent100 = true
		c.hbuf.Reset()
		c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: "100"})
		c.writeBlockLocked(st.id, c.hbuf.Bytes(), false)
		c.flushLocked()
	}
	for {
		if len(st.data) > 0 {
			n := copy(p, st.data)
			st.data = st.data[:copy(st.data, st.data[n:])]
			if c.creditLocked(st, int64(n)) {
				c.flushLocked()
			}
			c.mu.Unlock()
			return n, nil
		}
		if st.err != nil {
			c.mu.Unlock()
			return 0, st.err
		}
		if st.eof {
			c.mu.Unlock()
			return 0, io.EOF
		}
		ch := chanLocked(&st.dataCh)
		c.mu.Unlock()
		if err := st.wait(ch, deadline); err != nil {
			return 0, err
		}
		c.mu.Lock()
	}
}

// Trailer implements http1.Stream.
func (st *stream) Trailer() []http1.Field {
	st.c.mu.Lock()
	defer st.c.mu.Unlock()
	return st.trailer
}

// Done implements http1.Stream.
func (st *stream) Done() <-chan struct{} { return st.done }

// WriteHeaders implements http1.Stream.
func (st *stream) WriteHeaders(status int, fields []http1.Field, endStream bool) error {
	c := st.c
	c.mu.Lock()
	if err := st.writableLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	c.hbuf.Reset()
	c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: statusValue(status)})
	for i, f := range fields {
		c.henc.WriteField(c.lastFieldLocked(i, f))
	}
	c.writeBlockLocked(st.id, c.hbuf.Bytes(), endStream)
	if !endStream {
		werr := c.werr
		c.mu.Unlock()
		if werr != nil {
			return errConnGone
		}
		return nil
	}
	c.endLocked(st)
	c.mu.Unlock()
	if c.flushSoon() != nil {
		return errConnGone
	}
	return nil
}

// lastFieldLocked returns f, the i-th field of a response head, as the
// encoder takes it: the strings of the connection's previous head's i-th
// field when f has the same name and value (the responses of one
// connection mostly share their fields: server, content-type, the date
// within a second), else new ones, kept for the next head.
func (c *conn) lastFieldLocked(i int, f http1.Field) hpack.HeaderField {
	if i >= len(c.lastHead) {
		return hpack.HeaderField{Name: string(f.Name), Value: string(f.Value)}
	}
	last := &c.lastHead[i]
	if last.Name != string(f.Name) {
		last.Name = string(f.Name)
		last.Value = string(f.Value)
	} else if last.Value != string(f.Value) {
		last.Value = string(f.Value)
	}
	return *last
}

// WriteTrailers implements http1.TrailerWriter: a HEADERS frame without
// pseudo-header fields that ends the stream (RFC 9113 §8.1).
func (st *stream) WriteTrailers(fields []http1.Field) error {
	c := st.c
	c.mu.Lock()
	if err := st.writableLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	c.hbuf.Reset()
	for _, f := range fields {
		c.henc.WriteField(hpack.HeaderField{Name: string(f.Name), Value: string(f.Value)})
	}
	c.writeBlockLocked(st.id, c.hbuf.Bytes(), true)
	c.endLocked(st)
	c.mu.Unlock()
	if c.flushSoon() != nil {
		return errConnGone
	}
	return nil
}

// WriteData implements http1.Stream: p is cut to the peer's
// SETTINGS_MAX_FRAME_SIZE and to the stream's and the connection's send
// windows (RFC 9113 §6.9.1), waiting for WINDOW_UPDATE until deadline.
func (st *stream) WriteData(p []byte, endStream bool, deadline time.Time) (int, error) {
	c := st.c
	total := 0
	c.mu.Lock()
	for {
		if err := st.writableLocked(); err != nil {
			c.mu.Unlock()
			return total, err
		}
		if len(p) == 0 {
			if endStream {
				c.fr.WriteData(st.id, true, nil)
				c.endLocked(st)
			}
			c.mu.Unlock()
			if endStream {
				c.flushSoon()
			}
			return total, nil
		}
		n := min(st.sendWin, c.sendWin, int64(c.peerMax), int64(len(p)))
		if n <= 0 {
			c.flushLocked()
			ch := chanLocked(&st.winCh)
			c.mu.Unlock()
			if err := st.wait(ch, deadline); err != nil {
				return total, err
			}
			c.mu.Lock()
			continue
		}
		st.sendWin -= n
		c.sendWin -= n
		last := endStream && n == int64(len(p))
		c.fr.WriteData(st.id, last, p[:n])
		p = p[n:]
		total += int(n)
		if last {
			c.endLocked(st)
			c.mu.Unlock()
			c.flushSoon()
			return total, nil
		}
	}
}

// Flush implements http1.Stream: the bytes go out with flushSoon, once
// the goroutines ready to run have run.
func (st *stream) Flush() error {
	c := st.c
	if c.flushSoon() != nil {
		return errConnGone
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return st.err
}

func (st *stream) writableLocked() error {
	switch {
	case st.err != nil:
		return st.err
	case st.endSent || st.closed:
		return errStreamDone
	case st.c.werr != nil:
		return errConnGone
	}
	return nil
}

// endLocked: END_STREAM was written; the response is complete. The
// caller, once it has unlocked c.mu, sends it with flushSoon.
func (c *conn) endLocked(st *stream) {
	st.endSent = true
	if st.remoteClosed {
		c.closeLocked(st)
	}
}

// writeBlockLocked writes a header block as HEADERS and as many
// CONTINUATION frames as the peer's SETTINGS_MAX_FRAME_SIZE needs.
func (c *conn) writeBlockLocked(id uint32, block []byte, endStream bool) {
	max := int(c.peerMax)
	first := block[:min(len(block), max)]
	block = block[len(first):]
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: endStream, EndHeaders: len(block) == 0})
	for len(block) > 0 {
		frag := block[:min(len(block), max)]
		block = block[len(frag):]
		c.fr.WriteContinuation(id, len(block) == 0, frag)
	}
}

// creditLocked returns n bytes read (or dropped) to the receive windows
// of the connection and, while the client may still send on it, of st
// (nil: the connection only), with WINDOW_UPDATE once half a window is
// owed. It reports whether a frame was written.
func (c *conn) creditLocked(st *stream, n int64) bool {
	wrote := false
	c.recvAck += n
	if c.recvAck >= int64(c.cfg.InitialConnectionWindowSize)/2 {
		c.recvWin += c.recvAck
		c.fr.WriteWindowUpdate(0, uint32(c.recvAck))
		c.recvAck = 0
		wrote = true
	}
	if st != nil && !st.remoteClosed {
		st.recvAck += n
		if st.recvAck >= int64(c.cfg.InitialStreamWindowSize)/2 {
			st.recvWin += st.recvAck
			c.fr.WriteWindowUpdate(st.id, uint32(st.recvAck))
			st.recvAck = 0
			wrote = true
		}
	}
	return wrote
}

// dropLocked discards st's unread DATA, returning it to the connection
// window.
func (c *conn) dropLocked(st *stream) {
	if n := len(st.data); n > 0 {
		st.data = nil
		c.creditLocked(nil, int64(n))
	}
}

var statusValues [600]string

func init() {
	for i := 100; i < len(statusValues); i++ {
		statusValues[i] = strconv.Itoa(i)
	}
}

func statusValue(code int) string {
	if code >= 100 && code < len(statusValues) {
		return statusValues[code]
	}
	return strconv.Itoa(code)
}
