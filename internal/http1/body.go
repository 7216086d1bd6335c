package http1

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
)

// Body is the request body stream of one request (RFC 9112 §6). The server
// reuses one Body per connection; it is valid until the handler returns.
//
// Read sends "HTTP/1.1 100 Continue" once, on the first Read that needs
// bytes, when Request.ExpectContinue is set and no response has been
// written yet (PEP 3333, §HTTP 1.1 Expect/Continue; RFC 9110 §10.1.1). It
// never sends one to an HTTP/1.0 client (RFC 9110 §15.2), never twice.
type Body struct {
	c  *conn   // nil when used by the fuzz decoder or for a stream
	st *stream // an HTTP/2 stream's body (stream.go)
	br *bufio.Reader

	chunked   bool
	remaining int64 // Content-Length bytes left, or bytes left in the current chunk
	max       int64 // MaxBodyBytes for chunked bodies; 0 = unlimited
	total     int64 // chunk data bytes seen so far
	extBytes  int   // chunk-size line overhead so far (bounded, see maxChunkOverhead)
	state     chunkState
	eof       bool
	err       error // sticky

	expect  bool // 100-continue requested and not yet answered
	sent100 bool

	trailer    []Field
	trailerBuf []byte
}

// reset prepares b for a request. n is the Content-Length (-1 if chunked).
func (b *Body) reset(br *bufio.Reader, n int64, chunked bool, max int64, expect bool) {
	tb, tr := b.trailerBuf[:0], b.trailer[:0]
	c := b.c
	*b = Body{c: c, br: br, chunked: chunked, max: max, expect: expect, trailerBuf: tb, trailer: tr}
	if chunked {
		b.state = chunkSize
	} else {
		b.remaining = n
		b.eof = n == 0
	}
	if b.eof {
		b.expect = false
	}
}

// Read reads body bytes into p. It returns io.EOF after the last byte
// (for a chunked body, after the trailer section has been read).
// Errors: ErrBodyTooLarge, ErrBodyTimeout, an error wrapping ErrBodyFraming,
// or one wrapping ErrClientGone; all are sticky.
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.eof {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.st != nil {
		return b.st.readBody(b, p)
	}
	if b.expect {
		if err := b.send100(); err != nil {
			b.err = err
			return 0, err
		}
	}
	var n int
	var err error
	if b.chunked {
		n, err = b.readChunked(p)
	} else {
		if int64(len(p)) > b.remaining {
			p = p[:b.remaining]
		}
		n, err = b.br.Read(p)
		b.remaining -= int64(n)
		if b.remaining == 0 {
			b.eof = true
			err = nil
		} else if err != nil {
			err = b.ioErr(err)
		}
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// send100 writes the interim response if the final one has not started.
func (b *Body) send100() error {
	b.expect = false
	c := b.c
	if c == nil || c.w.started || b.sent100 {
		return nil
	}
	b.sent100 = true
	bw := c.writer()
	bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	return bw.Flush()
}

// ioErr maps a socket read error met inside the body.
func (b *Body) ioErr(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return ErrBodyTimeout
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return framingError("connection closed before the end of the body")
	default:
		return &clientGoneError{err}
	}
}

// Buffered returns the body bytes already in the connection's read buffer,
// without reading the socket, without sending 100 Continue and without
// consuming them. For a chunked body it returns the buffered part of the
// current chunk's data only. The slice is valid until the next Read or
// Consume. Used by the bridge's fast path together with Consume.
func (b *Body) Buffered() []byte {
	if b.err != nil || b.eof || b.br == nil {
		return nil
	}
	if b.chunked && b.state != chunkData {
		return nil
	}
	n := int64(b.br.Buffered())
	if n > b.remaining {
		n = b.remaining
	}
	p, _ := b.br.Peek(int(n))
	return p
}

// Consume discards the first n bytes returned by Buffered. n is clipped to
// len(Buffered()).
func (b *Body) Consume(n int) {
	if max := len(b.Buffered()); n > max {
		n = max
	}
	if n <= 0 {
		return
	}
	b.br.Discard(n)
	b.remaining -= int64(n)
	if b.remaining == 0 {
		if b.chunked {
			b.state = chunkDataCRLF
		} else {
			b.eof = true
		}
	}
	b.expect = false // the client sent body bytes: it is not waiting for a 100
}

// Done reports whether the rest of the body needs no more socket reads:
// it has been read to EOF, or (Content-Length bodies) all of it is in the
// read buffer. A chunked body is Done only once its terminator has been read.
func (b *Body) Done() bool {
	if b.eof {
		return true
	}
	return !b.chunked && b.err == nil && b.br != nil && int64(b.br.Buffered()) >= b.remaining
}

// AtEOF reports whether the body has been read to its end, so that the
// next Read returns io.EOF: a Content-Length body once its last byte is
// read, a chunked one once its terminator is.
func (b *Body) AtEOF() bool { return b.eof }

// Err returns the error that ended reading the body (sticky: the one Read
// returned), or nil.
func (b *Body) Err() error { return b.err }

// BodyErrStatus is the status the server answers for a body read error
// when no response has started: 413 (ErrBodyTooLarge), 408
// (ErrBodyTimeout), 400 (framing); 0 for nil or a client gone (nothing
// is sent).
func BodyErrStatus(err error) int {
	if err == nil || errors.Is(err, ErrClientGone) {
		return 0
	}
	return bodyErrStatus(err).status
}

// Trailer returns the trailer fields of a chunked body once Read has
// returned io.EOF (RFC 9112 §7.1.2). They are validated like header fields
// but never merged into Request.Header. Valid until the handler returns.
func (b *Body) Trailer() []Field { return b.trailer }

// discard drains at most limit body bytes, for a handler that left the
// body unread. It reports whether the body ended within the bound.
func (b *Body) discard(limit int64, scratch []byte) bool {
	b.expect = false
	for limit > 0 {
		if b.err != nil {
			return false
		}
		if b.eof {
			return true
		}
		if !b.chunked {
			if b.remaining > limit {
				return false
			}
			n, err := b.br.Discard(int(b.remaining))
			b.remaining -= int64(n)
			if err != nil {
				b.err = b.ioErr(err)
				return false
			}
			b.eof = true
			return true
		}
		p := scratch
		if int64(len(p)) > limit {
			p = p[:limit]
		}
		n, err := b.Read(p)
		limit -= int64(n)
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
	return b.eof
}
