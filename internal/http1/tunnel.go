package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// An HTTP/2 stream as a net.Conn: the WebSocket of RFC 8441.
//
// A hijacked extended CONNECT stream carries a WebSocket's frames in its
// DATA frames (RFC 8441 §5), so the WebSocket code (internal/websocket,
// gorilla's Upgrader) runs over it as over a hijacked HTTP/1.1
// connection:
//
//   - The first Write is the upgrader's HTTP/1.1 101 head. It becomes the
//     response HEADERS, :status 200 (§5: "a 2xx series status code"),
//     with its fields but those of HTTP/1.1's handshake (Upgrade,
//     Connection, Sec-WebSocket-Accept: §5 "the Sec-WebSocket-Key and
//     Sec-WebSocket-Accept header fields are not used"). Later writes
//     are DATA, flushed at once; SetWriteDeadline bounds each wait for
//     flow-control window.
//   - Read returns the stream's DATA, io.EOF after the client's
//     END_STREAM. One goroutine reads the stream ahead by one chunk so
//     that SetReadDeadline and Close take effect on a Read already
//     waiting (the session moves the deadline while its reader waits).
//   - Close ends the hijack: ServeStream returns, and the connection
//     ends the stream (END_STREAM, then RST_STREAM NO_ERROR if the
//     client has not ended its side, RFC 9113 §8.1); a stream whose 200
//     never went out is reset.

// tunnelChunk is the most one read of the stream takes.
const tunnelChunk = 16 << 10

type tunnelResult struct {
	data []byte
	err  error
}

type tunnelConn struct {
	bk            Stream
	local, remote net.Addr

	headSent  atomic.Bool // the 200 went out
	closed    chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	rdl, wdl time.Time     // deadlines (zero: none)
	dlCh     chan struct{} // closed when the read deadline changes

	startRead sync.Once
	rd        chan tunnelResult
	pending   []byte // read from the stream, not yet returned
	rerr      error  // the stream's end (sticky)
}

// hijack hands an extended CONNECT stream over as a tunnelConn.
func (st *stream) hijack(w *ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	if w.started || st.req.Protocol == nil || st.tunnel != nil {
		return nil, nil, ErrHijacked
	}
	tc := newTunnel(st.bk, st.req.LocalAddr, st.req.RemoteAddr)
	st.tunnel = tc
	w.started, w.status, w.err = true, 200, ErrHijacked
	return tc, bufio.NewReadWriter(bufio.NewReaderSize(tc, 16), bufio.NewWriterSize(tc, 16)), nil
}

func newTunnel(bk Stream, local, remote net.Addr) *tunnelConn {
	return &tunnelConn{bk: bk, local: local, remote: remote,
		closed: make(chan struct{}), dlCh: make(chan struct{}), rd: make(chan tunnelResult)}
}

func (tc *tunnelConn) reader() {
	for {
		buf := make([]byte, tunnelChunk)
		n, err := tc.bk.ReadData(buf, time.Time{})
		if n == 0 && err == nil {
			continue
		}
		select {
		case tc.rd <- tunnelResult{buf[:n], err}:
		case <-tc.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read implements net.Conn.
func (tc *tunnelConn) Read(p []byte) (int, error) {
	tc.startRead.Do(func() { go tc.reader() })
	for {
		if len(tc.pending) > 0 {
			n := copy(p, tc.pending)
			tc.pending = tc.pending[n:]
			return n, nil
		}
		if tc.rerr != nil {
			return 0, tc.rerr
		}
		tc.mu.Lock()
		dl, changed := tc.rdl, tc.dlCh
		tc.mu.Unlock()
		var timeout <-chan time.Time
		var t *time.Timer
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t = time.NewTimer(d)
			timeout = t.C
		}
		select {
		case r := <-tc.rd:
			tc.pending = r.data
			if r.err != nil {
				tc.rerr = r.err
				if !errors.Is(r.err, io.EOF) {
					tc.rerr = &clientGoneError{r.err}
				}
			}
		case <-timeout:
			return 0, os.ErrDeadlineExceeded
		case <-changed:
		case <-tc.closed:
			return 0, net.ErrClosed
		}
		if t != nil {
			t.Stop()
		}
	}
}

// hop101 are the 101's fields RFC 8441 §5 leaves out of the 200 (and
// RFC 9113 §8.2.2 forbids).
func hop101(name []byte) bool {
	return equalFoldString(name, "upgrade") || equalFoldString(name, "connection") ||
		equalFoldString(name, "sec-websocket-accept")
}

// Write implements net.Conn; see the type's comment for the first write.
func (tc *tunnelConn) Write(p []byte) (int, error) {
	select {
	case <-tc.closed:
		return 0, net.ErrClosed
	default:
	}
	if !tc.headSent.Load() {
		end := bytes.Index(p, []byte("\r\n\r\n"))
		if end < 0 {
			return 0, errors.New("http1: tunnel: the first write is not a whole HTTP/1.1 head")
		}
		head := p[:end+2]
		if i := bytes.Index(head, crlf); i >= 0 {
			head = head[i+2:] // the status line
		}
		var fs []Field
		for _, f := range headerFields(head) {
			if !hop101(f.Name) {
				fs = append(fs, f)
			}
		}
		if err := tc.bk.WriteHeaders(200, fs, false); err != nil {
			return 0, &clientGoneError{err}
		}
		tc.headSent.Store(true)
		if rest := p[end+4:]; len(rest) > 0 {
			if _, err := tc.write(rest); err != nil {
				return 0, err
			}
		} else if err := tc.bk.Flush(); err != nil {
			return 0, &clientGoneError{err}
		}
		return len(p), nil
	}
	return tc.write(p)
}

func (tc *tunnelConn) write(p []byte) (int, error) {
	tc.mu.Lock()
	dl := tc.wdl
	tc.mu.Unlock()
	n, err := tc.bk.WriteData(p, false, dl)
	if err == nil {
		err = tc.bk.Flush()
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		return n, &clientGoneError{err}
	}
	return n, nil
}

// Close implements net.Conn: the hijack ends (ServeStream returns).
func (tc *tunnelConn) Close() error {
	tc.closeOnce.Do(func() { close(tc.closed) })
	return nil
}

func (tc *tunnelConn) LocalAddr() net.Addr  { return tc.local }
func (tc *tunnelConn) RemoteAddr() net.Addr { return tc.remote }

func (tc *tunnelConn) SetDeadline(t time.Time) error {
	tc.SetReadDeadline(t)
	return tc.SetWriteDeadline(t)
}

func (tc *tunnelConn) SetReadDeadline(t time.Time) error {
	tc.mu.Lock()
	tc.rdl = t
	close(tc.dlCh)
	tc.dlCh = make(chan struct{})
	tc.mu.Unlock()
	return nil
}

func (tc *tunnelConn) SetWriteDeadline(t time.Time) error {
	tc.mu.Lock()
	tc.wdl = t
	tc.mu.Unlock()
	return nil
}
