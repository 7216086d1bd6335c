package http1

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HTTP/2 streams as requests.
//
// An HTTP/2 connection (Server.HTTP2, served by golang.org/x/net/http2 in
// internal/h2) calls streamHandler.ServeHTTP once per stream. The stream
// becomes a Request, Body and ResponseWriter of this package whose
// backend is the stream instead of the connection's buffers, so every
// Handler (WSGI, ASGI, static files) serves HTTP/2 unchanged:
//
//  1. The request is checked like an HTTP/1 head (method token, target
//     characters and form, Host, field counts and sizes, body limit) and
//     copied into a Request: ProtoMajor 2, Host and a first "host" field
//     from :authority (RFC 9113 §8.3.1), the other fields sorted by name
//     (net/http hands them over as a map; repeated fields keep their
//     order, and x/net has already joined split cookies, §8.2.3).
//  2. ResponseWriter.WriteHead turns the serialised header block back
//     into http.Header, dropping the connection-specific fields HTTP/2
//     forbids (RFC 9113 §8.2.2), and declares Content-Length; no type is
//     sniffed. Write, Flush and SendFile write to the stream; errors wrap
//     ErrClientGone.
//  3. Body.Read reads the stream's DATA (x/net sends 100 Continue when
//     asked). MaxBodyBytes, BodyTimeout (re-armed lazily: an idle gap
//     ends between BodyTimeout/2 and BodyTimeout) and the per-stream
//     write deadline (the same, with WriteTimeout) apply; so does
//     MinBodyRate, checked as each read returns.
//  4. NotifyClose watches the stream's context: RST_STREAM or the
//     connection closing ends it while the handler runs (ASGI
//     http.disconnect, case B25).
//  5. Abort, or a response shorter than its Content-Length, resets the
//     stream (RST_STREAM INTERNAL_ERROR, by panicking with
//     http.ErrAbortHandler after the handler returned) so the client sees
//     a truncated response, as a closed HTTP/1 connection shows it.

// HTTP2Server serves HTTP/2 connections for a Server (internal/h2).
type HTTP2Server interface {
	// ServeConn serves c, whose client preface has not been read yet,
	// until it closes, calling h for each stream.
	ServeConn(c net.Conn, h http.Handler)
	// Shutdown asks every connection to go away gracefully (GOAWAY, then
	// close once its streams are done). It does not wait.
	Shutdown()
}

// streamHandler serves the streams of one HTTP/2 connection.
type streamHandler struct {
	s             *Server
	lim           limits
	remote, local net.Addr
	scheme        string
}

// stream is one HTTP/2 stream seen as a request.
type stream struct {
	s     *Server
	lim   limits
	hw    http.ResponseWriter
	hr    *http.Request
	req   Request
	addrs AddrText // req.Addrs
	body  Body
	w     ResponseWriter

	aborted    bool      // Abort was called: reset the stream
	readArmed  time.Time // when the read deadline was last set
	writeArmed time.Time
	bodyWait   time.Duration // time spent blocked in body reads (MinBodyRate)

	watchStop chan struct{} // NotifyClose: closed when the handler returned
	watchDone chan struct{} // closed when the watcher exited
	buf       []byte        // scratch for SendFile
}

var streamPool = sync.Pool{New: func() any { return new(stream) }}

// ServeHTTP serves one stream. See the flow above.
func (h *streamHandler) ServeHTTP(hw http.ResponseWriter, hr *http.Request) {
	st := streamPool.Get().(*stream)
	reset := st.serve(h, hw, hr)
	buf := st.buf
	*st = stream{buf: buf}
	streamPool.Put(st)
	if reset {
		panic(http.ErrAbortHandler) // x/net/http2 sends RST_STREAM, logs nothing
	}
}

// serve runs the handler for the stream and reports whether the stream
// must be reset.
func (st *stream) serve(h *streamHandler, hw http.ResponseWriter, hr *http.Request) (reset bool) {
	s := h.s
	st.s, st.lim, st.hw, st.hr = s, h.lim, hw, hr
	st.body = Body{st: st, max: max(s.MaxBodyBytes, 0)}
	st.req = Request{Body: &st.body, RemoteAddr: h.remote, LocalAddr: h.local, Scheme: h.scheme, addrs: &st.addrs}
	st.w = ResponseWriter{st: st, req: &st.req, declared: -1}
	req, w := &st.req, &st.w

	if perr := st.build(); perr != nil {
		s.logger().Debug("http2: request rejected", "remote", req.RemoteAddr, "status", perr.status, "reason", perr.msg)
		st.writeError(perr)
		return false
	}
	if max := s.MaxBodyBytes; max > 0 && req.ContentLength > max {
		st.writeError(errBodyTooLarge413) // before reading the body
		return false
	}

	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	var panicked bool
	if s.MaxConcurrency > 0 && n > int64(s.MaxConcurrency) {
		s.overLimit.Add(1)
		w.WriteSimple(503, "text/plain; charset=utf-8", []byte("503 Service Unavailable\n"), retryAfter)
	} else {
		panicked = st.callHandler()
	}
	st.stopWatch()

	if !w.started {
		if perr := bodyErrStatus(st.body.err); perr != nil {
			s.logger().Debug("http2: request body failed", "remote", req.RemoteAddr, "err", st.body.err)
			if errors.Is(st.body.err, ErrClientGone) {
				return true
			}
			st.writeError(perr)
			return false
		}
		if !panicked {
			s.logger().Error("http2: handler returned without a response", "method", string(req.Method), "path", string(req.Path))
		}
		w.WriteSimple(500, "text/plain; charset=utf-8", []byte("500 Internal Server Error\n"), nil)
		return false
	}
	if st.aborted || panicked || w.err != nil {
		return true
	}
	// A body shorter than its Content-Length must not look complete.
	return !w.noBody && w.declared >= 0 && w.written < w.declared
}

func (st *stream) callHandler() (panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
			st.s.logger().Error("http2: handler panic", "method", string(st.req.Method), "path", string(st.req.Path), "panic", v, "stack", string(debug.Stack()))
		}
	}()
	st.s.Handler.ServeHTTP1(&st.w, &st.req)
	return false
}

func (st *stream) writeError(perr *protoError) {
	var extra []byte
	if perr.status == 503 {
		extra = retryAfter
	}
	st.w.WriteSimple(perr.status, "text/plain; charset=utf-8", []byte(perr.msg+"\n"), extra)
}

// build fills st.req from the stream's request, checking it as parseHead
// checks an HTTP/1 head (x/net/http2 has already refused invalid field
// names and values, connection-specific fields and bad pseudo-headers,
// RFC 9113 §8.2 and §8.3).
func (st *stream) build() *protoError {
	hr, r, lim := st.hr, &st.req, st.lim
	if !isToken([]byte(hr.Method)) {
		return errMethod
	}
	r.Method = []byte(hr.Method)
	r.ProtoMajor, r.ProtoMinor = 2, 0
	target := hr.RequestURI // :path as received
	if len(target) > lim.reqLine {
		return errLineTooLong
	}
	if target == "" {
		return errTarget
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c < 0x21 || c > 0x7e || c == '#' {
			return errTarget
		}
	}
	r.Target = []byte(target)
	switch {
	case target[0] == '/':
		if q := strings.IndexByte(target, '?'); q >= 0 {
			r.Path, r.RawQuery = r.Target[:q], r.Target[q+1:]
		} else {
			r.Path = r.Target
		}
	case target == "*" && hr.Method == "OPTIONS":
		r.Path = r.Target
	default:
		return errTarget // CONNECT's authority-form, as for HTTP/1
	}

	host := hr.Host // :authority, else the Host field
	if host == "" {
		return errNoHost
	}
	if !validHost([]byte(host)) {
		return errBadHost
	}
	// A Host field that names another entity than :authority never gets
	// here: x/net/http2 resets the stream with PROTOCOL_ERROR (RFC 9113
	// §8.3.1). The app sees one host, in r.Host and the first "host"
	// field (the Host field itself is not copied), as with HTTP/1.1's
	// absolute-form.
	r.Host = []byte(host)

	nfields := 1
	for k, vv := range hr.Header {
		if k != "Host" {
			nfields += len(vv)
		}
	}
	if nfields > lim.fields {
		return errTooManyFields
	}
	r.Header = make([]Field, 0, nfields)
	r.Header = append(r.Header, Field{Name: []byte("host"), Value: r.Host})
	keys := make([]string, 0, len(hr.Header))
	for k := range hr.Header {
		if k != "Host" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	total := 0
	for _, k := range keys {
		name := []byte(strings.ToLower(k))
		for _, v := range hr.Header[k] {
			if len(k)+2+len(v) > lim.fieldBytes {
				return errFieldTooLong
			}
			if total += len(k) + len(v) + 4; total > lim.headerBytes {
				return errHeaderTooLarge
			}
			if !validFieldValue([]byte(v)) {
				return errFieldValue
			}
			r.Header = append(r.Header, Field{Name: name, Value: []byte(v)})
		}
	}

	r.ContentLength = hr.ContentLength
	switch {
	case hr.Body == nil || hr.Body == http.NoBody:
		r.ContentLength = 0
	case r.ContentLength < 0:
		r.Chunked = true // length unknown: read to the end of the stream
	}
	st.body.eof = r.ContentLength == 0
	r.ExpectContinue = strings.EqualFold(hr.Header.Get("Expect"), "100-continue") && !st.body.eof
	return nil
}

// hopByHop reports the connection-specific fields an HTTP/2 response must
// not carry (RFC 9113 §8.2.2: "An endpoint MUST NOT generate an HTTP/2
// message containing connection-specific header fields").
func hopByHop(name []byte) bool {
	switch len(name) {
	case 7:
		return equalFoldString(name, "upgrade")
	case 10:
		return equalFoldString(name, "connection") || equalFoldString(name, "keep-alive")
	case 16:
		return equalFoldString(name, "proxy-connection")
	case 17:
		return equalFoldString(name, "transfer-encoding")
	}
	return false
}

// writeHead is WriteHead and WriteSimple for a stream: header is the
// serialised "Name: value\r\n" block (validated by the caller).
func (st *stream) writeHead(w *ResponseWriter, status int, contentType string, header []byte, n int64) error {
	if w.started {
		return ErrHeadWritten
	}
	if status < 200 || status > 599 {
		return ErrBadStatus
	}
	w.started, w.status = true, status
	h := st.hw.Header()
	if contentType != "" {
		h["Content-Type"] = []string{contentType}
	}
	if st.s.NoDateHeader {
		h["Date"] = nil // present and empty: x/net does not add one
	}
	appServer := hasField(header, "server")
	if len(st.s.ExtraHeader) > 0 {
		header = append(append([]byte(nil), st.s.ExtraHeader...), header...)
	}
	for len(header) > 0 {
		line := header
		if i := bytes.Index(header, crlf); i >= 0 {
			line, header = header[:i], header[i+2:]
		} else {
			header = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || hopByHop(line[:colon]) {
			continue
		}
		h.Add(string(line[:colon]), string(trimOWS(line[colon+1:])))
	}
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil // present and empty: x/net does not sniff one
	}
	if s := st.s.ServerHeader; s != "" && !appServer {
		h["Server"] = []string{s}
	}
	w.noBody = st.req.isHead() || status == 204 || status == 304
	if n >= 0 && status != 204 && status != 304 {
		w.declared = n
		h["Content-Length"] = []string{strconv.FormatInt(n, 10)}
	}
	st.hw.WriteHeader(status)
	return nil
}

var crlf = []byte("\r\n")

// armWrite sets the stream's write deadline when the last one is more
// than half used (each call costs x/net a message to its serve loop).
func (st *stream) armWrite() {
	d := st.lim.write
	if now := time.Now(); now.Sub(st.writeArmed) > d/2 {
		st.writeArmed = now
		if dw, ok := st.hw.(interface{ SetWriteDeadline(time.Time) error }); ok {
			dw.SetWriteDeadline(now.Add(d))
		}
	}
}

func (st *stream) write(p []byte) (int, error) {
	st.armWrite()
	n, err := st.hw.Write(p)
	if err != nil {
		err = &clientGoneError{err}
	}
	return n, err
}

func (st *stream) flush() error {
	st.armWrite()
	if f, ok := st.hw.(interface{ FlushError() error }); ok {
		if err := f.FlushError(); err != nil {
			return &clientGoneError{err}
		}
		return nil
	}
	if f, ok := st.hw.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// sendFile copies n bytes of f from offset to the stream.
func (st *stream) sendFile(w *ResponseWriter, f *os.File, offset, n int64) (int64, error) {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, err
	}
	if st.buf == nil {
		st.buf = make([]byte, 32<<10)
	}
	var sent int64
	for sent < n {
		m, rerr := f.Read(st.buf[:min(int64(len(st.buf)), n-sent)])
		if m > 0 {
			k, err := st.write(st.buf[:m])
			sent += int64(k)
			w.written += int64(k)
			if err != nil {
				w.err = err
				return sent, err
			}
		}
		if rerr == io.EOF {
			return sent, io.ErrUnexpectedEOF // shorter than promised
		}
		if rerr != nil {
			return sent, rerr
		}
	}
	return sent, nil
}

// readBody is Body.Read for a stream.
func (st *stream) readBody(b *Body, p []byte) (int, error) {
	if b.max > 0 && int64(len(p)) > b.max-b.total+1 {
		p = p[:b.max-b.total+1] // one byte more tells a body too large
	}
	d := st.lim.body
	if now := time.Now(); now.Sub(st.readArmed) > d/2 {
		st.readArmed = now
		if dr, ok := st.hw.(interface{ SetReadDeadline(time.Time) error }); ok {
			dr.SetReadDeadline(now.Add(d))
		}
	}
	start := time.Now()
	n, err := st.hr.Body.Read(p)
	b.total += int64(n)
	b.expect = false
	if b.max > 0 && b.total > b.max {
		b.err = ErrBodyTooLarge
		return 0, b.err
	}
	// The minimum data rate (Server.MinBodyRate), on the time spent
	// waiting for DATA only (bytes x/net already holds cost nothing): a
	// client trickling a byte just often enough to beat BodyTimeout is
	// caught when its byte arrives (case B40).
	if rate := st.lim.bodyRate; rate > 0 && err == nil {
		st.bodyWait += time.Since(start)
		allowed := max(BodyRateGrace, time.Duration(float64(b.total)/float64(rate)*float64(time.Second)))
		if st.bodyWait > allowed {
			b.err = ErrBodyTimeout
			return 0, b.err
		}
	}
	switch {
	case err == nil:
		// The declared length's last byte ends the body, as on HTTP/1.1:
		// a reader learns it with those bytes, not from an empty read
		// after them (x/net answers io.EOF only at END_STREAM, and
		// resets a stream whose DATA exceeds its content-length).
		if cl := st.req.ContentLength; cl > 0 && b.total == cl {
			b.eof = true
		}
	case err == io.EOF:
		b.eof = true
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.err = ErrBodyTimeout
		err = b.err
	default:
		b.err = &clientGoneError{err}
		err = b.err
	}
	return n, err
}

// notifyClose is ResponseWriter.NotifyClose for a stream: the stream's
// context ends on RST_STREAM or when the connection goes.
func (st *stream) notifyClose(onClose func()) bool {
	if !st.body.eof || st.watchStop != nil {
		return false
	}
	st.watchStop, st.watchDone = make(chan struct{}), make(chan struct{})
	ctx, stop, done := st.hr.Context(), st.watchStop, st.watchDone
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			onClose()
		case <-stop:
		}
	}()
	return true
}

// stopWatch ends NotifyClose's watch and waits for it, once the handler
// returned (x/net cancels the context only after ServeHTTP returns, so a
// cancellation seen by then was the client's).
func (st *stream) stopWatch() {
	if st.watchStop != nil {
		close(st.watchStop)
		<-st.watchDone
	}
}
