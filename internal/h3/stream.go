package h3

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/quic-go/quic-go/http3"

	"turnstile/internal/http1"
)

// serveHTTP is the http3.Server's handler: one request stream, whose
// head quic-go has decoded (QPACK) and checked (RFC 9114 §4.3
// pseudo-header fields, §4.2 field names, connection-specific fields;
// cookie fields joined, §4.2.1), goes to the connection's
// http1.StreamHandler as an http1.Stream. A stream the handler asks to
// reset (a failed app, a short body) is reset with H3_INTERNAL_ERROR
// (http.ErrAbortHandler).
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var h *http1.StreamHandler
	if cs, _ := r.Context().Value(connKey{}).(*connState); cs != nil && cs.h != nil {
		h = cs.h
		cs.active.Add(1)
		defer cs.active.Add(-1)
	} else {
		// Not through our listener (cannot happen): the addresses quic-go
		// put in the context.
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		remote, _ := r.Context().Value(http3.RemoteAddrContextKey).(net.Addr)
		h = s.hs.StreamHandler(remote, local, r.TLS, 3)
	}
	st := &stream{w: w, r: r, rc: http.NewResponseController(w)}
	head := http1.StreamHead{
		Method:        []byte(r.Method),
		Path:          []byte(r.RequestURI),
		Authority:     []byte(r.Host),
		ContentLength: -1,
	}
	if _, ok := r.Header["Content-Length"]; ok {
		head.ContentLength = r.ContentLength
	}
	// Field names in a stable order (net/http's map lost the wire
	// order of distinct names; one name's values keep theirs), lowercase
	// as on the wire (RFC 9114 §4.2). Host went to :authority.
	names := make([]string, 0, len(r.Header))
	n := 0
	for k, vs := range r.Header {
		if k == "Host" {
			continue
		}
		names = append(names, k)
		n += len(vs)
	}
	sort.Strings(names)
	head.Header = make([]http1.Field, 0, n)
	for _, k := range names {
		lk := []byte(k)
		for i, c := range lk {
			if 'A' <= c && c <= 'Z' {
				lk[i] = c + 'a' - 'A'
			}
		}
		for _, v := range r.Header[k] {
			head.Header = append(head.Header, http1.Field{Name: lk, Value: []byte(v)})
			if k == "Expect" && equalFold(v, "100-continue") {
				head.ExpectContinue = true
			}
		}
	}
	if head.ContentLength == 0 {
		head.EndStream = true
		head.ExpectContinue = false
	}
	st.expect = head.ExpectContinue
	if h.ServeStream(st, &head) {
		panic(http.ErrAbortHandler)
	}
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// stream is one HTTP/3 request stream; it implements http1.Stream for
// the handler goroutine (http3.Server's, which runs serveHTTP).
type stream struct {
	w      http.ResponseWriter
	r      *http.Request
	rc     *http.ResponseController
	expect bool // send 100 Continue before the first body read
	eof    bool
	ended  bool // the response is complete: the handler returns soon
	final  bool // the final (non-1xx) head was given to quic-go
}

// ReadData implements http1.Stream. The first call sends 100 Continue
// when the head asked for it (RFC 9110 §10.1.1).
func (st *stream) ReadData(p []byte, deadline time.Time) (int, error) {
	if st.eof {
		return 0, io.EOF
	}
	if st.expect {
		st.expect = false
		st.w.WriteHeader(http.StatusContinue)
	}
	st.rc.SetReadDeadline(deadline)
	n, err := st.r.Body.Read(p)
	switch {
	case err == nil:
	case err == io.EOF:
		st.eof = true
	case isTimeout(err):
		err = os.ErrDeadlineExceeded
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// Trailer implements http1.Stream.
func (st *stream) Trailer() []http1.Field {
	if len(st.r.Trailer) == 0 {
		return nil
	}
	var fs []http1.Field
	for k, vs := range st.r.Trailer {
		for _, v := range vs {
			fs = append(fs, http1.Field{Name: lower(k), Value: []byte(v)})
		}
	}
	return fs
}

func lower(k string) []byte {
	b := []byte(k)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

// WriteHeaders implements http1.Stream. The fields go into the
// http.Header under their canonical names, so that quic-go sees the
// content-length we declare (and adds none of its own) and sniffs no
// content-type and adds no date when we did not (nil values: none).
func (st *stream) WriteHeaders(status int, fields []http1.Field, endStream bool) error {
	hdr := st.w.Header()
	hdr["Date"] = nil
	hdr["Content-Type"] = nil
	for _, f := range fields {
		k := http.CanonicalHeaderKey(string(f.Name))
		hdr[k] = append(hdr[k], string(f.Value))
	}
	st.w.WriteHeader(status)
	if status < 200 {
		// An interim head (103): quic-go writes it now; its fields must
		// not reach the final head through the shared header map.
		for _, f := range fields {
			delete(hdr, http.CanonicalHeaderKey(string(f.Name)))
		}
		return nil
	}
	st.final = true
	if endStream {
		st.ended = true
		return st.flush()
	}
	return nil
}

// WriteTrailers implements http1.TrailerWriter: the fields go into the
// header map under http.TrailerPrefix, and quic-go sends them as the
// HEADERS frame after the DATA frames when the handler returns (RFC 9114
// §4.1). The response is complete.
func (st *stream) WriteTrailers(fields []http1.Field) error {
	hdr := st.w.Header()
	for _, f := range fields {
		k := http.TrailerPrefix + http.CanonicalHeaderKey(string(f.Name))
		hdr[k] = append(hdr[k], string(f.Value))
	}
	st.ended = true
	return st.r.Context().Err()
}

// WriteData implements http1.Stream: quic-go's stream applies flow
// control (RFC 9000 §4.1); the write deadline bounds the wait for the
// peer's window.
func (st *stream) WriteData(p []byte, endStream bool, deadline time.Time) (int, error) {
	st.rc.SetWriteDeadline(deadline)
	n, err := st.w.Write(p)
	if err != nil {
		return n, err
	}
	if endStream {
		st.ended = true
		return n, st.flush()
	}
	return n, nil
}

func (st *stream) flush() error {
	return st.rc.Flush()
}

// Flush implements http1.Stream. Before the final head there is nothing
// to flush (quic-go wrote an interim head at once), and quic-go's Flush
// would commit a 200 with whatever the header map holds then, so that the
// app's own status and fields after a 103 were lost.
func (st *stream) Flush() error {
	if !st.final {
		return st.r.Context().Err()
	}
	if err := st.flush(); err != nil {
		return err
	}
	return st.r.Context().Err()
}

// Done implements http1.Stream: the request's context ends when the
// client resets the stream (or stops reading it) or the connection goes.
func (st *stream) Done() <-chan struct{} { return st.r.Context().Done() }
