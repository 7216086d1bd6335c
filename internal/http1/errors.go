package http1

import (
	"errors"
	"fmt"
)

// Errors returned to handlers and to callers of Server methods.
var (
	// ErrServerClosed is returned by Serve after Shutdown or Close.
	ErrServerClosed = errors.New("http1: server closed")

	// ErrBodyTooLarge is returned by Body.Read when a chunked body grows
	// past Server.MaxBodyBytes. The server answers 413 if no response has
	// started, and closes the connection either way.
	ErrBodyTooLarge = errors.New("http1: request body too large")

	// ErrBodyTimeout is returned by Body.Read when no body bytes arrived
	// for Server.BodyTimeout. The server answers 408 if no response has
	// started, and closes the connection.
	ErrBodyTimeout = errors.New("http1: request body read timeout")

	// ErrBodyFraming is returned (wrapped, with detail) by Body.Read when
	// the chunked framing is invalid (RFC 9112 §7.1) or the client closed
	// the connection before the declared Content-Length arrived. The server
	// answers 400 if no response has started and closes the connection.
	ErrBodyFraming = errors.New("http1: invalid request body framing")

	// ErrClientGone is returned (wrapping the network error) by
	// ResponseWriter.Write, Flush, SendFile and WriteHead when the socket
	// write failed: the client has gone or stopped reading for
	// Server.WriteTimeout. Handlers use it to stop producing output.
	ErrClientGone = errors.New("http1: client gone")

	// ErrContentLength is returned by ResponseWriter.Write and SendFile when
	// more bytes are written than the contentLength given to WriteHead. The
	// declared count has been sent; the excess is dropped.
	ErrContentLength = errors.New("http1: wrote more than the declared Content-Length")

	// ErrHeadWritten is returned by WriteHead and WriteSimple when the
	// response head has already been written.
	ErrHeadWritten = errors.New("http1: response head already written")

	// ErrNoHead is returned by Write and SendFile before WriteHead.
	ErrNoHead = errors.New("http1: Write before WriteHead")

	// ErrBadStatus is returned by WriteHead for a status outside 200–599 (RFC 9110 §15)
	// (1xx responses are produced only by the server, for 100-continue).
	ErrBadStatus = errors.New("http1: invalid response status")
)

// clientGoneError wraps a socket write error so that
// errors.Is(err, ErrClientGone) holds and the cause stays reachable.
type clientGoneError struct{ err error }

func (e *clientGoneError) Error() string        { return "http1: client gone: " + e.err.Error() }
func (e *clientGoneError) Unwrap() []error      { return []error{ErrClientGone, e.err} }
func (e *clientGoneError) Is(target error) bool { return target == ErrClientGone }

// framingError carries the detail of a chunked framing violation.
func framingError(detail string) error { return fmt.Errorf("%w: %s", ErrBodyFraming, detail) }

// protoError is a request the server refuses before the handler runs. It is
// not seen by users: the server answers it with status and a fixed text
// (never an echo of the input, so nothing the client sent is reflected) and
// closes the connection. The values are allocated once, so rejecting a
// request costs no allocation.
type protoError struct {
	status int
	msg    string // short, fixed; sent as the plain-text body
}

func (e *protoError) Error() string { return "http1: " + e.msg }

func perr(status int, msg string) *protoError { return &protoError{status, msg} }

var (
	errBareLF          = perr(400, "bare LF in request head")
	errBareCR          = perr(400, "bare CR in request head")
	errRequestLine     = perr(400, "malformed request line")
	errMethod          = perr(400, "invalid method")
	errTarget          = perr(400, "invalid request target")
	errProtocol        = perr(501, "unsupported :protocol (RFC 8441)")
	errVersion         = perr(400, "malformed HTTP version")
	errVersionNotSupp  = perr(505, "HTTP version not supported")
	errHTTP2Only       = perr(505, "this server speaks HTTP/2 only (--http 2): connect with prior knowledge (RFC 9113 section 3.3)")
	errObsFold         = perr(400, "obsolete line folding")
	errFieldName       = perr(400, "invalid header field name")
	errFieldValue      = perr(400, "invalid header field value")
	errNoHost          = perr(400, "missing Host header")
	errMultiHost       = perr(400, "multiple Host headers")
	errBadHost         = perr(400, "invalid Host header")
	errContentLength   = perr(400, "invalid Content-Length")
	errTransferEnc     = perr(400, "invalid Transfer-Encoding")
	errTEUnsupported   = perr(501, "unsupported transfer coding")
	errTEAndCL         = perr(400, "both Transfer-Encoding and Content-Length")
	errFramingAlias    = perr(400, "header name spells Content-Length or Transfer-Encoding with '_'")
	errTEHTTP10        = perr(400, "Transfer-Encoding in an HTTP/1.0 request")
	errConnection      = perr(400, "invalid Connection header")
	errLineTooLong     = perr(414, "request line too long")
	errFieldTooLong    = perr(431, "header field too large")
	errTooManyFields   = perr(431, "too many header fields")
	errHeaderTooLarge  = perr(431, "header section too large")
	errBodyTooLarge413 = perr(413, "request body too large")
	errHeadTimeout     = perr(408, "request header timeout")
	errBodyFraming400  = perr(400, "invalid request body framing")
	errBodyTimeout408  = perr(408, "request body timeout")
	errOverloaded      = perr(503, "server overloaded")
)
