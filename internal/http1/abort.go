package http1

import "errors"

// errAborted marks a response the handler gave up on (not seen by users).
var errAborted = errors.New("http1: response aborted by the handler")

// Abort ends the response early: bytes already buffered are flushed, no
// chunked terminator is written, and the connection is closed after the
// handler returns, so the client sees a truncated response rather than a
// complete one (used when an app fails after its head was sent).
func (w *ResponseWriter) Abort() {
	if w.st != nil { // HTTP/2: flush, then reset the stream (stream.go)
		if w.err == nil {
			w.st.flush()
			w.err = errAborted
		}
		w.st.aborted = true
		return
	}
	if w.err == nil {
		if w.bw != nil {
			_ = w.bw.Flush() // best effort: the connection closes anyway
		}
		w.err = errAborted
	}
}

// Drop ends a request that gets no response because its client has gone
// (a queued WSGI request withdrawn, internal/wsgi/gone.go): nothing is
// written, the connection is closed after the handler returns (an HTTP/2
// stream is reset), and the server does not answer 500 for a handler that
// wrote nothing. After a response has started it is Abort.
func (w *ResponseWriter) Drop() {
	if w.started {
		w.Abort()
		return
	}
	w.started = true
	w.err = errAborted
	if w.st != nil {
		w.st.aborted = true
	}
}
