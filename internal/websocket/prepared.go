package websocket

// One message for many connections (the channel layer's fan-out,
// internal/chlayer frames.go): framed once, its permessage-deflate form
// (RFC 7692 §7.2.1, no context takeover) made once on the first
// connection that negotiated it, both shared by every connection it is
// written to.

import gorilla "github.com/gorilla/websocket"

// Prepared is one text or binary message ready for any number of
// sessions.
type Prepared struct {
	pm *gorilla.PreparedMessage
	n  int // payload bytes, for the adapter's bounds
}

// Prepare frames data (text: a text message, UTF-8 checked by the
// caller; else binary). data must not change afterwards.
func Prepare(text bool, data []byte) (*Prepared, error) {
	typ := gorilla.BinaryMessage
	if text {
		typ = gorilla.TextMessage
	}
	pm, err := gorilla.NewPreparedMessage(typ, data)
	if err != nil {
		return nil, err
	}
	return &Prepared{pm: pm, n: len(data)}, nil
}

// Len is the message's payload length in bytes (before deflate).
func (p *Prepared) Len() int { return p.n }

// SendPrepared writes p as Send writes a message: writer goroutine only,
// inside a BeginWrites batch; a failed write drops the connection.
func (s *Session) SendPrepared(p *Prepared) {
	if !s.trying {
		s.wl <- struct{}{} // every frame through gorilla holds wl (Session)
		defer s.unlock()
	}
	if err := s.conn.WritePreparedMessage(p.pm); err != nil {
		s.writeFailed = true
		s.raw.Close()
	}
}
