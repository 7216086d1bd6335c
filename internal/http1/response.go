package http1

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// ResponseWriter writes the response to one request. The server reuses one
// per connection; it must not be used after the handler returns.
//
// Life of a write: the handler's WriteHead/Write bytes go to the
// connection's bufio.Writer (4 KiB); chunk framing is added here for
// chunked responses; the bufio.Writer writes to connWriter, which arms the
// write deadline (Server.WriteTimeout) before each socket write and turns
// errors into ErrClientGone.
type ResponseWriter struct {
	c       *conn
	st      *stream // an HTTP/2 stream's response (stream.go); c is then nil
	bw      *bufio.Writer
	req     *Request
	started bool
	status  int

	noBody   bool   // HEAD, 204, 304: body bytes are discarded
	chunked  bool   // framing is chunked
	declared int64  // Content-Length given to WriteHead, -1 if none
	written  int64  // body bytes accepted so far
	close    bool   // Connection: close was sent; close after this response
	err      error  // first write error (sticky)
	trailer  []byte // WriteTrailers: the trailer section's lines, written by finish
}

func (w *ResponseWriter) reset(c *conn, req *Request) {
	*w = ResponseWriter{c: c, req: req, declared: -1} // bw: taken by begin
}

// Started reports whether WriteHead (or WriteSimple) has been called.
func (w *ResponseWriter) Started() bool { return w.started }

// Status is the status code of the head written, 0 before it.
func (w *ResponseWriter) Status() int { return w.status }

// Written is the body bytes sent so far (not the head, nor chunked
// framing): 0 for a response without a body (HEAD, 204, 304). For the
// access log.
func (w *ResponseWriter) Written() int64 { return w.written }

// WriteHead writes the status line and header section to the buffer.
//
// statusLine is e.g. "404 Not Found", already validated by the caller
// (three digits, SP, a reason with no CR or LF). header is a pre-serialised
// block of "Name: value\r\n" lines, already validated by the caller, and
// must not contain Content-Length, Transfer-Encoding, Connection, Date or
// Server: WriteHead adds those (RFC 9110 §6.6.1 Date; §10.2.4 Server).
//
// contentLength is the body length in bytes, or -1 if unknown: the body is
// then chunked for HTTP/1.1 (RFC 9112 §7.1) and close-delimited for HTTP/1.0
// (RFC 9112 §6.3 item 8). close forces "Connection: close"; it is also sent
// when the client asked to close, when the server drains (Drain, Shutdown;
// RFC 9112 §9.6), when a
// 100-continue body was left unrequested (RFC 9110 §10.1.1), and when a
// response with a known length leaves more than maxDrainBytes of the
// request body unread.
//
// status must be 200–599, a final status of RFC 9110 §15 (ErrBadStatus
// otherwise). Responses to HEAD and
// 204/304 responses carry no body (RFC 9110 §6.4.1); for HEAD the declared
// Content-Length is still sent (RFC 9110 §8.6).
// Errors: ErrHeadWritten, ErrBadStatus, ErrClientGone.
func (w *ResponseWriter) WriteHead(status int, statusLine []byte, header []byte, contentLength int64, close bool) error {
	if w.st != nil {
		return w.st.writeHead(w, status, "", header, contentLength)
	}
	if err := w.begin(status); err != nil {
		return err
	}
	w.bw.Write(statusLine)
	return w.finishHead("", header, contentLength, close)
}

// WriteSimple writes a complete small response: status with its standard
// reason phrase, Content-Type contentType (omitted if ""), extraHeader (as
// for WriteHead) and body. For Go-generated answers (errors, health).
func (w *ResponseWriter) WriteSimple(status int, contentType string, body []byte, extraHeader []byte) error {
	if w.st != nil {
		if err := w.st.writeHead(w, status, contentType, extraHeader, int64(len(body))); err != nil {
			return err
		}
		_, err := w.Write(body)
		return err
	}
	if err := w.begin(status); err != nil {
		return err
	}
	w.bw.Write(strconv.AppendInt(w.bw.AvailableBuffer(), int64(status), 10))
	w.bw.WriteByte(' ')
	w.bw.WriteString(statusText(status))
	if err := w.finishHead(contentType, extraHeader, int64(len(body)), false); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

func (w *ResponseWriter) begin(status int) error {
	if w.started {
		return ErrHeadWritten
	}
	if status < 200 || status > 599 {
		return ErrBadStatus
	}
	w.started = true
	w.status = status
	w.bw = w.c.writer()
	w.bw.WriteString("HTTP/1.1 ")
	return nil
}

func (w *ResponseWriter) finishHead(contentType string, header []byte, n int64, close bool) error {
	bw, req := w.bw, w.req
	bw.WriteString("\r\n")
	if !w.c.srv.NoDateHeader {
		bw.WriteString("Date: ")
		bw.Write(httpDate())
		bw.WriteString("\r\n")
	}
	if s := w.c.srv.ServerHeader; s != "" && !hasField(header, "server") {
		bw.WriteString("Server: ")
		bw.WriteString(s)
		bw.WriteString("\r\n")
	}
	if contentType != "" {
		bw.WriteString("Content-Type: ")
		bw.WriteString(contentType)
		bw.WriteString("\r\n")
	}
	bw.Write(w.c.srv.ExtraHeader)
	bw.Write(header)

	w.noBody = req.isHead() || w.status == 204 || w.status == 304
	switch {
	case w.status == 204 || w.status == 304:
		// RFC 9110 §8.6: no Content-Length in 204; none needed for 304.
	case n >= 0:
		w.declared = n
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), n, 10))
		bw.WriteString("\r\n")
	case req.isHead():
		// Unknown length and no body: nothing to frame.
	case req.ProtoMinor == 1:
		w.chunked = true
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	default:
		close = true // close-delimited for HTTP/1.0
	}
	// RFC 9110 §10.1.1: a server that answers without reading a
	// 100-continue body must close (or read it); we close.
	if req.Body.expect && !req.Body.sent100 && !req.Body.Done() {
		close = true
	}
	// More of a Content-Length body left unread than the server drains
	// after the response (maxDrainBytes) ends the connection: say so while
	// the head can, or a client's next request on it would be lost. Only
	// for a response whose length is known here, in practice the whole
	// answer: a streamed one (chunked) may still read the body as it goes,
	// full duplex, and keep the connection.
	if b := req.Body; n >= 0 && b.st == nil && !b.chunked && !b.eof && b.err == nil && b.remaining > maxDrainBytes {
		close = true
	}
	if close || req.Close || w.c.srv.isDraining() {
		w.close = true
		bw.WriteString("Connection: close\r\n\r\n")
	} else if req.ProtoMinor == 0 {
		bw.WriteString("Connection: keep-alive\r\n\r\n")
	} else {
		bw.WriteString("\r\n")
	}
	return w.check()
}

// check returns the sticky write error (bufio.Writer keeps the first one).
func (w *ResponseWriter) check() error {
	if w.err == nil && w.bw != nil {
		// bufio.Writer has no accessor; a zero-length write returns its error.
		if _, err := w.bw.Write(nil); err != nil {
			w.err = err
		}
	}
	return w.err
}

// Write writes body bytes to the connection's buffer. It never sends more
// than the declared Content-Length: the excess is dropped and
// ErrContentLength returned after the declared count. Bytes are discarded
// (and len(p) returned) for HEAD, 204 and 304. Errors: ErrNoHead,
// ErrContentLength, ErrClientGone.
func (w *ResponseWriter) Write(p []byte) (int, error) {
	if !w.started {
		return 0, ErrNoHead
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.noBody {
		return len(p), nil
	}
	var cut bool
	if w.declared >= 0 {
		if left := w.declared - w.written; int64(len(p)) > left {
			p, cut = p[:left], true
		}
	}
	if len(p) == 0 {
		if cut {
			return 0, ErrContentLength
		}
		return 0, nil
	}
	if w.st != nil {
		n, err := w.st.write(p)
		w.written += int64(n)
		if err != nil {
			w.err = err
			return n, err
		}
		if cut {
			return n, ErrContentLength
		}
		return n, nil
	}
	if w.chunked {
		w.bw.Write(strconv.AppendInt(w.bw.AvailableBuffer(), int64(len(p)), 16))
		w.bw.WriteString("\r\n")
	}
	n, err := w.bw.Write(p)
	if w.chunked && err == nil {
		_, err = w.bw.WriteString("\r\n")
	}
	w.written += int64(n)
	if err != nil {
		w.err = err
		return n, err
	}
	if cut {
		return n, ErrContentLength
	}
	return n, nil
}

// Flush writes the buffered bytes to the socket. Errors: ErrClientGone.
func (w *ResponseWriter) Flush() error {
	if w.err != nil {
		return w.err
	}
	if w.st != nil {
		w.err = w.st.flush()
		return w.err
	}
	if w.bw == nil {
		return nil // nothing written yet
	}
	if err := w.bw.Flush(); err != nil {
		w.err = err
	}
	return w.err
}

// sendFileStep is how much one sendfile call may send before the write
// deadline is re-armed (Server.WriteTimeout bounds each step).
const sendFileStep = 4 << 20

// SendFile sends n bytes of f starting at offset as body bytes. It flushes
// the buffer, then uses sendfile(2) through net.TCPConn.ReadFrom (falling
// back to copying for other connections). It moves f's file offset. As for
// Write, at most the declared Content-Length is sent (ErrContentLength).
// Errors: ErrNoHead, ErrContentLength, ErrClientGone, and f's read errors.
func (w *ResponseWriter) SendFile(f *os.File, offset, n int64) (int64, error) {
	if !w.started {
		return 0, ErrNoHead
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.noBody || n <= 0 {
		return 0, nil
	}
	var cut bool
	if w.declared >= 0 && n > w.declared-w.written {
		n, cut = w.declared-w.written, true
	}
	if n == 0 {
		return 0, ErrContentLength
	}
	if w.st != nil {
		sent, err := w.st.sendFile(w, f, offset, n)
		if err == nil && cut {
			err = ErrContentLength
		}
		return sent, err
	}
	if w.chunked {
		w.bw.Write(strconv.AppendInt(w.bw.AvailableBuffer(), n, 16))
		w.bw.WriteString("\r\n")
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, err
	}
	var sent int64
	lr := &io.LimitedReader{R: f}
	for sent < n {
		lr.N = min(n-sent, sendFileStep)
		m, err := w.c.cw.readFrom(lr)
		sent += m
		w.written += m
		if err != nil {
			w.err = err
			return sent, err
		}
		if m == 0 {
			// The file is shorter than promised: the response cannot be
			// completed; finish() will close the connection.
			return sent, io.ErrUnexpectedEOF
		}
	}
	if w.chunked {
		w.bw.WriteString("\r\n")
	}
	if cut {
		return sent, ErrContentLength
	}
	return sent, nil
}

// Short reports whether the body written so far falls short of the
// Content-Length given to WriteHead, with both counts in bytes; never for a
// response that carries no body (HEAD, 204, 304), and never after a write
// failed (ErrClientGone: the client left, an HTTP/2 stream reset; the app
// did not fall short). finish closes such a connection; a handler calls
// Short after its last write to report it (PEP 3333: "the server should
// close the connection and log or otherwise report the error").
func (w *ResponseWriter) Short() (declared, written int64, short bool) {
	return w.declared, w.written, w.started && !w.noBody && w.err == nil && w.declared >= 0 && w.written < w.declared
}

// finish completes the response after the handler returned: the chunked
// terminator and a flush. It reports whether the connection may be reused.
func (w *ResponseWriter) finish() bool {
	if w.chunked && w.err == nil {
		w.bw.WriteString("0\r\n")
		w.bw.Write(w.trailer) // trailer-section, RFC 9112 §7.1.2
		w.bw.WriteString("\r\n")
	}
	if w.bw == nil {
		return w.err == nil && !w.close // nothing was written
	}
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = err
		}
	}
	w.c.putWriter()
	w.bw = nil
	if w.err != nil || w.close {
		return false
	}
	// A body shorter than its Content-Length leaves the client waiting for
	// bytes that will never come: the connection cannot be reused.
	if !w.noBody && w.declared >= 0 && w.written < w.declared {
		return false
	}
	return true
}

// Date cache: the formatted Date value (RFC 9110 §5.6.7 IMF-fixdate) is
// rebuilt at most once per second and shared through an atomic pointer.
type dateValue struct {
	sec int64
	b   [29]byte
}

var dateCache atomic.Pointer[dateValue]

func httpDate() []byte {
	now := time.Now()
	d := dateCache.Load()
	if d == nil || d.sec != now.Unix() {
		d = &dateValue{sec: now.Unix()}
		now.UTC().AppendFormat(d.b[:0], "Mon, 02 Jan 2006 15:04:05 GMT")
		dateCache.Store(d)
	}
	return d.b[:]
}

func statusText(code int) string {
	switch code {
	case 200:
		return "OK"
	case 201:
		return "Created"
	case 204:
		return "No Content"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 304:
		return "Not Modified"
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 413:
		return "Content Too Large"
	case 414:
		return "URI Too Long"
	case 417:
		return "Expectation Failed"
	case 431:
		return "Request Header Fields Too Large"
	case 500:
		return "Internal Server Error"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Status"
}

// hasField reports whether the serialised header block has a field name
// (lower case).
func hasField(header []byte, name string) bool {
	for len(header) > 0 {
		line := header
		if i := bytes.Index(header, crlf); i >= 0 {
			line, header = header[:i], header[i+2:]
		} else {
			header = nil
		}
		if len(line) > len(name) && line[len(name)] == ':' && equalFoldString(line[:len(name)], name) {
			return true
		}
	}
	return false
}

// WriteEarlyHints sends a 103 (Early Hints) interim response (RFC 8297)
// carrying header, a block of "Link: value\r\n" lines already validated
// by the caller, and flushes it. It does nothing once the final head was
// written, to an HTTP/1.0 client (which never gets a 1xx, RFC 9110 §15.2),
// or for an empty header. Over HTTP/2 it is a HEADERS frame with :status
// 103 on the stream (RFC 9113 §8.1). Errors: ErrClientGone.
func (w *ResponseWriter) WriteEarlyHints(header []byte) error {
	if w.started || len(header) == 0 {
		return nil
	}
	if w.st != nil {
		return w.st.writeInterim(w, 103, header)
	}
	if w.req.ProtoMinor == 0 || w.err != nil {
		return w.err
	}
	bw := w.c.writer()
	bw.WriteString("HTTP/1.1 103 Early Hints\r\n")
	bw.Write(header)
	bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		w.err = err
		return err
	}
	return nil
}

// WriteTrailers sets the response's trailer section (RFC 9110 §6.5):
// header is a block of "Name: value\r\n" lines, validated by the caller,
// without framing fields. It is sent after the body: by the last-chunk of
// a chunked HTTP/1.1 body (RFC 9112 §7.1.2), as a HEADERS frame ending an
// HTTP/2 or HTTP/3 stream (RFC 9113 §8.1, RFC 9114 §4.1; without the
// connection-specific fields, RFC 9113 §8.2.2). A response framed
// otherwise (a Content-Length, HTTP/1.0, no body) has nowhere to carry
// them: they are dropped. Call it after the last Write. Errors:
// ErrClientGone.
func (w *ResponseWriter) WriteTrailers(header []byte) error {
	if !w.started || w.noBody || len(header) == 0 {
		return nil
	}
	if w.st != nil {
		return w.st.writeTrailers(w, header)
	}
	if w.chunked {
		w.trailer = append(w.trailer[:0], header...)
	}
	return nil
}
