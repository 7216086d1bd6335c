package http1

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"
)

// HTTP/2 and HTTP/3 streams as requests.
//
// An HTTP/2 connection (Server.HTTP2, internal/h2) or an HTTP/3 one
// (internal/h3, with Server.StreamHandler) calls StreamHandler.ServeStream
// once per stream, on a goroutine of its own; what follows says HTTP/2,
// and holds for HTTP/3 with ProtoMajor 3 (RFC 9114 §4.2, §4.3).
// The stream becomes a Request, Body and ResponseWriter of this package
// whose backend is the Stream instead of the connection's buffers, so
// every Handler (WSGI, ASGI, static files) serves HTTP/2 unchanged:
//
//  1. The head, already checked by the HTTP/2 layer (RFC 9113 §8.2 field
//     validity, §8.3.1 pseudo-header fields), is checked like an HTTP/1
//     head (method token, target characters and form, Host, field counts
//     and sizes, body limit) and copied into a Request: ProtoMajor 2,
//     Host and a first "host" field from :authority (§8.3.1), the other
//     fields in wire order (cookies already joined, §8.2.3).
//  2. ResponseWriter.WriteHead turns the serialised header block into
//     lowercase fields, dropping the connection-specific fields HTTP/2
//     forbids (RFC 9113 §8.2.2), adds date, server and content-length;
//     no type is sniffed. Write, Flush and SendFile write DATA to the
//     stream (the write that completes a declared Content-Length ends the
//     stream); errors wrap ErrClientGone.
//  3. Body.Read reads the stream's DATA (the HTTP/2 layer sends 100
//     Continue when asked). BodyTimeout bounds each wait for DATA, and
//     WriteTimeout each wait for the peer's flow-control window; so does
//     MinBodyRate, checked as each read returns.
//  4. NotifyClose and Presence watch Stream.Done: RST_STREAM or the
//     connection closing ends it while the handler runs (ASGI
//     http.disconnect, case B25).
//  5. Abort, or a response shorter than its Content-Length, makes
//     ServeStream report a reset (RST_STREAM INTERNAL_ERROR) so the client
//     sees a truncated response, as a closed HTTP/1 connection shows it.

// HTTP2Server serves HTTP/2 connections for a Server (internal/h2).
type HTTP2Server interface {
	// ServeConn serves c, whose client preface has not been read yet,
	// until it closes, calling h.ServeStream for each stream, and returns
	// once every ServeStream has returned.
	ServeConn(c net.Conn, h *StreamHandler)
	// Shutdown asks every connection to go away gracefully (GOAWAY, then
	// close once its streams are done). It does not wait.
	Shutdown()
}

// StreamHead is the request head of one HTTP/2 stream, already checked by
// the HTTP/2 layer against RFC 9113 §8.2 (field names and values,
// connection-specific fields) and §8.3.1 (pseudo-header fields).
type StreamHead struct {
	Method    []byte // :method
	Path      []byte // :path (empty for CONNECT)
	Authority []byte // :authority, else the Host field
	// Header holds the regular fields in wire order, names lowercase,
	// cookie fields joined into one (RFC 9113 §8.2.3), Host excluded.
	Header []Field
	// ContentLength is the content-length field, -1 if absent.
	ContentLength int64
	// EndStream: the HEADERS frame ended the stream (no body).
	EndStream bool
	// TooLarge: the field section exceeded SETTINGS_MAX_HEADER_LIST_SIZE
	// and was cut; the request is answered 431.
	TooLarge bool
	// ExpectContinue: "expect: 100-continue" with a body to come.
	ExpectContinue bool
	// Protocol is :protocol of an extended CONNECT (RFC 8441 §4; Path
	// is then :path), nil otherwise.
	Protocol []byte
}

// Stream is one HTTP/2 stream as the connection serves it to
// ServeStream. Its methods are called from the ServeStream goroutine only,
// except Done.
type Stream interface {
	// ReadData reads request body bytes into p. It returns io.EOF at the
	// end of the stream, os.ErrDeadlineExceeded when no byte arrived by
	// deadline (zero: none), another error when the stream was reset or
	// the connection is gone. The first call sends 100 Continue when the
	// head asked for it.
	ReadData(p []byte, deadline time.Time) (int, error)
	// Trailer returns the request's trailer fields once ReadData has
	// returned io.EOF.
	Trailer() []Field
	// WriteHeaders sends the response head: status and fields (lowercase
	// names); endStream ends the stream.
	WriteHeaders(status int, fields []Field, endStream bool) error
	// WriteData sends body bytes, waiting for flow-control window until
	// deadline (zero: none); endStream ends the stream after them.
	WriteData(p []byte, endStream bool, deadline time.Time) (int, error)
	// Flush sends the bytes buffered on the connection.
	Flush() error
	// Done is closed when the client resets the stream or the connection
	// goes.
	Done() <-chan struct{}
}

// StreamHandler serves the streams of one HTTP/2 or HTTP/3 connection.
type StreamHandler struct {
	s             *Server
	lim           limits
	remote, local net.Addr
	scheme        string
	tls           *tls.ConnectionState // Request.TLS
	certs         *ConnCerts           // Request.Certs: the connection's, shared by its streams
	proto         int                  // Request.ProtoMajor: 2 or 3
	conn          *ConnData            // Request.Conn: the connection's, shared by its streams
}

// StreamHandler returns the handler for the streams of one HTTP/3
// connection (internal/h3) from remote to local with TLS state cs: its
// requests reach Handler with ProtoMajor protoMajor (3) and scheme
// "https", under the Server's limits (fields, body, MaxConcurrency,
// timeouts).
func (s *Server) StreamHandler(remote, local net.Addr, cs *tls.ConnectionState, protoMajor int) *StreamHandler {
	return &StreamHandler{s: s, lim: s.limits(), remote: remote, local: local, scheme: "https", tls: cs, certs: newConnCerts(cs, s.TLSServerCert), proto: protoMajor, conn: new(ConnData)}
}

// stream is one HTTP/2 stream seen as a request.
type stream struct {
	s     *Server
	lim   limits
	proto int
	bk    Stream
	head  *StreamHead
	req   Request
	addrs AddrText // req.Addrs
	body  Body
	w     ResponseWriter

	aborted  bool          // Abort was called: reset the stream
	tunnel   *tunnelConn   // Hijack (RFC 8441): the stream as a net.Conn
	bodyWait time.Duration // time spent blocked in body reads (MinBodyRate)

	watchStop chan struct{} // NotifyClose: closed when the handler returned
	watchDone chan struct{} // closed when the watcher exited
	buf       []byte        // scratch for SendFile
	fields    []Field       // response fields (writeHead)
	lower     []byte        // lowercased response names, response values made here (writeHead)
	header    []Field       // request fields (build): req.Header's array
}

var streamPool = sync.Pool{New: func() any { return new(stream) }}

// ServeStream serves one stream: see the flow above. It reports whether
// the stream must be reset (RST_STREAM INTERNAL_ERROR) instead of ended;
// when it reports false the response may still lack its END_STREAM,
// which the caller then sends.
func (h *StreamHandler) ServeStream(bk Stream, head *StreamHead) (reset bool) {
	st := streamPool.Get().(*stream)
	reset = st.serve(h, bk, head)
	// The scratch slices and the address text outlive the stream in the
	// pool: a stream from it allocates none of them again, and formats
	// the addresses only for another connection (Request.Addrs).
	buf, fields, lower, header, addrs := st.buf, st.fields[:0], st.lower[:0], st.header[:0], st.addrs
	*st = stream{buf: buf, fields: fields, lower: lower, header: header, addrs: addrs}
	streamPool.Put(st)
	return reset
}

// serve runs the handler for the stream and reports whether the stream
// must be reset.
func (st *stream) serve(h *StreamHandler, bk Stream, head *StreamHead) (reset bool) {
	s := h.s
	st.s, st.lim, st.proto, st.bk, st.head = s, h.lim, h.proto, bk, head
	st.body = Body{st: st, max: max(s.MaxBodyBytes, 0)}
	st.req = Request{Body: &st.body, RemoteAddr: h.remote, LocalAddr: h.local, Scheme: h.scheme, TLS: h.tls, Certs: h.certs, addrs: &st.addrs, Conn: h.conn}
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

	select {
	case <-bk.Done():
		return true // reset before the app started: it never starts
	default:
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

	if tc := st.tunnel; tc != nil {
		// Hijacked (an RFC 8441 WebSocket): the stream is the session's
		// until it closes the conn; like a hijacked HTTP/1 connection it
		// no longer counts as in flight.
		s.inflight.Add(-1)
		<-tc.closed
		s.inflight.Add(1)
		return !tc.headSent.Load() || panicked
	}
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

// build fills st.req from the stream's head, checking it as parseHead
// checks an HTTP/1 head.
func (st *stream) build() *protoError {
	hd, r, lim := st.head, &st.req, st.lim
	if hd.TooLarge {
		return errHeaderTooLarge
	}
	if !isToken(hd.Method) {
		return errMethod
	}
	r.Method = hd.Method
	r.ProtoMajor, r.ProtoMinor = st.proto, 0
	if hd.Protocol != nil {
		// RFC 8441: the one protocol served is the WebSocket (§5);
		// another names a tunnel we do not make.
		if !equalFoldString(hd.Protocol, "websocket") {
			return errProtocol
		}
		r.Protocol = hd.Protocol
	}
	target := hd.Path
	if len(target) > lim.reqLine {
		return errLineTooLong
	}
	if len(target) == 0 {
		return errTarget // CONNECT's authority-form, as for HTTP/1
	}
	for _, c := range target {
		if c < 0x21 || c > 0x7e || c == '#' {
			return errTarget
		}
	}
	r.Target = target
	switch {
	case target[0] == '/':
		if q := bytes.IndexByte(target, '?'); q >= 0 {
			r.Path, r.RawQuery = r.Target[:q], r.Target[q+1:]
		} else {
			r.Path = r.Target
		}
	case string(target) == "*" && string(hd.Method) == "OPTIONS":
		r.Path = r.Target
	default:
		return errTarget
	}

	host := hd.Authority
	if len(host) == 0 {
		return errNoHost
	}
	if !validHost(host) {
		return errBadHost
	}
	// A Host field naming another entity than :authority never gets here:
	// the HTTP/2 layer resets the stream (RFC 9113 §8.3.1). The app sees
	// one host, in r.Host and the first "host" field, as with HTTP/1.1's
	// absolute-form.
	r.Host = host

	if 1+len(hd.Header) > lim.fields {
		return errTooManyFields
	}
	total := 0
	for _, f := range hd.Header {
		if len(f.Name)+2+len(f.Value) > lim.fieldBytes {
			return errFieldTooLong
		}
		if total += len(f.Name) + len(f.Value) + 4; total > lim.headerBytes {
			return errHeaderTooLarge
		}
		if !validFieldValue(f.Value) {
			return errFieldValue
		}
	}
	r.Header = append(st.header[:0], Field{Name: nameHost, Value: r.Host})
	r.Header = append(r.Header, hd.Header...)
	st.header = r.Header

	r.ContentLength = hd.ContentLength
	switch {
	case hd.EndStream || r.Protocol != nil:
		// An extended CONNECT's DATA is the tunnel's (Hijack), not a
		// body: NotifyClose then watches the stream until the hijack.
		r.ContentLength = 0
	case r.ContentLength < 0:
		r.Chunked = true // length unknown: read to the end of the stream
	}
	st.body.eof = r.ContentLength == 0
	r.ExpectContinue = hd.ExpectContinue && !st.body.eof
	return nil
}

// hopByHop reports the connection-specific fields an HTTP/2 response must
// not carry (RFC 9113 §8.2.2: "An endpoint MUST NOT generate an HTTP/2
// message containing connection-specific header fields", naming
// Connection, Proxy-Connection, Keep-Alive, TE, Transfer-Encoding and
// Upgrade; TE "MAY be present in an HTTP/2 request" only). A client
// treats a response with one as malformed (curl: PROTOCOL_ERROR).
func hopByHop(name []byte) bool {
	switch len(name) {
	case 2:
		return equalFoldString(name, "te")
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
	fs := st.fields[:0]
	low := st.lower[:0]
	if !st.s.NoDateHeader {
		fs = append(fs, Field{Name: nameDate, Value: httpDate()})
	}
	// Names are lowercased into low, and the values made here appended to
	// it; it must not move while fs points into it: grow it first.
	server := st.s.ServerHeader
	if server != "" && hasField(header, "server") {
		server = ""
	}
	need := len(st.s.ExtraHeader) + len(header) + len(server) + len(contentType) + 20
	if cap(low) < need {
		low = make([]byte, 0, need)
	}
	// value appends v to low and returns it as a field value of its own.
	value := func(v string) []byte {
		start := len(low)
		low = append(low, v...)
		return low[start:len(low):len(low)]
	}
	if server != "" {
		fs = append(fs, Field{Name: nameServer, Value: value(server)})
	}
	if contentType != "" {
		fs = append(fs, Field{Name: nameContentType, Value: value(contentType)})
	}
	for _, block := range [2][]byte{st.s.ExtraHeader, header} {
		for len(block) > 0 {
			line := block
			if i := bytes.Index(block, crlf); i >= 0 {
				line, block = block[:i], block[i+2:]
			} else {
				block = nil
			}
			colon := bytes.IndexByte(line, ':')
			if colon <= 0 || hopByHop(line[:colon]) {
				continue
			}
			start := len(low)
			for _, c := range line[:colon] {
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				low = append(low, c)
			}
			fs = append(fs, Field{Name: low[start:len(low):len(low)], Value: trimOWS(line[colon+1:])})
		}
	}
	w.noBody = st.req.isHead() || status == 204 || status == 304
	if n >= 0 && status != 204 && status != 304 {
		w.declared = n
		start := len(low)
		low = strconv.AppendInt(low, n, 10) // within need's 20 bytes
		fs = append(fs, Field{Name: nameContentLength, Value: low[start:len(low):len(low)]})
	}
	st.fields, st.lower = fs, low
	end := w.noBody || w.declared == 0
	if err := st.bk.WriteHeaders(status, fs, end); err != nil {
		w.err = &clientGoneError{err}
		return w.err
	}
	return nil
}

var (
	crlf              = []byte("\r\n")
	nameHost          = []byte("host")
	nameDate          = []byte("date")
	nameServer        = []byte("server")
	nameContentType   = []byte("content-type")
	nameContentLength = []byte("content-length")
)

func (st *stream) writeDeadline() time.Time { return time.Now().Add(st.lim.write) }

func (st *stream) write(p []byte) (int, error) {
	w := &st.w
	end := w.declared >= 0 && w.written+int64(len(p)) == w.declared
	n, err := st.bk.WriteData(p, end, st.writeDeadline())
	if err != nil {
		err = &clientGoneError{err}
	}
	return n, err
}

func (st *stream) flush() error {
	if err := st.bk.Flush(); err != nil {
		return &clientGoneError{err}
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
	start := time.Now()
	n, err := st.bk.ReadData(p, start.Add(st.lim.body))
	b.total += int64(n)
	b.expect = false
	if b.max > 0 && b.total > b.max {
		b.err = ErrBodyTooLarge
		return 0, b.err
	}
	// The minimum data rate (Server.MinBodyRate), on the time spent
	// waiting for DATA only (bytes already received cost nothing): a
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
		// after them (the HTTP/2 layer resets a stream whose DATA exceeds
		// its content-length, RFC 9113 §8.1.1).
		if cl := st.req.ContentLength; cl > 0 && b.total == cl {
			b.eof = true
		}
	case err == io.EOF:
		b.eof = true
		b.trailer = st.bk.Trailer()
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.err = ErrBodyTimeout
		err = b.err
	default:
		b.err = &clientGoneError{err}
		err = b.err
	}
	return n, err
}

// notifyClose is ResponseWriter.NotifyClose for a stream: Done ends on
// RST_STREAM or when the connection goes.
func (st *stream) notifyClose(onClose func()) bool {
	if !st.body.eof || st.watchStop != nil {
		return false
	}
	st.watchStop, st.watchDone = make(chan struct{}), make(chan struct{})
	gone, stop, done := st.bk.Done(), st.watchStop, st.watchDone
	go func() {
		defer close(done)
		select {
		case <-gone:
			onClose()
		case <-stop:
		}
	}()
	return true
}

// stopWatch ends NotifyClose's watch and waits for it, once the handler
// returned.
func (st *stream) stopWatch() {
	if st.watchStop != nil {
		close(st.watchStop)
		<-st.watchDone
	}
}

// TrailerWriter is a Stream that can end with a trailer section (an
// HTTP/2 stream: a HEADERS frame with END_STREAM, RFC 9113 §8.1).
type TrailerWriter interface {
	// WriteTrailers sends fields (lowercase names) and ends the stream.
	WriteTrailers(fields []Field) error
}

// writeTrailers ends the stream with header's fields when the stream can
// carry them and the body has not ended it (a declared Content-Length
// met ends it: the trailers are then dropped).
func (st *stream) writeTrailers(w *ResponseWriter, header []byte) error {
	tw, ok := st.bk.(TrailerWriter)
	if !ok || w.err != nil || w.declared >= 0 {
		return nil
	}
	if err := tw.WriteTrailers(headerFields(header)); err != nil {
		w.err = &clientGoneError{err}
		return w.err
	}
	return nil
}

// headerFields splits "Name: value\r\n" lines into fields, names
// lowercased (RFC 9113 §8.2.1), without the connection-specific ones
// (hopByHop, §8.2.2: trailers and 1xx heads carry none either).
func headerFields(header []byte) []Field {
	var fs []Field
	for block := header; len(block) > 0; {
		line := block
		if i := bytes.Index(block, crlf); i >= 0 {
			line, block = block[:i], block[i+2:]
		} else {
			block = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || hopByHop(line[:colon]) {
			continue
		}
		fs = append(fs, Field{Name: bytes.ToLower(line[:colon]), Value: trimOWS(line[colon+1:])})
	}
	return fs
}

// writeInterim sends a 1xx head (status 103 from WriteEarlyHints) with the
// fields of header ("Name: value\r\n" lines), lowercased; the final head
// follows later (RFC 9113 §8.1).
func (st *stream) writeInterim(w *ResponseWriter, status int, header []byte) error {
	if err := st.bk.WriteHeaders(status, headerFields(header), false); err != nil {
		w.err = &clientGoneError{err}
		return w.err
	}
	return st.bk.Flush()
}
