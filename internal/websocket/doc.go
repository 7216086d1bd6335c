// Package websocket is the WebSocket protocol of the server (RFC 6455,
// RFC 7692), in pure Go on github.com/gorilla/websocket: the opening
// handshake's checks, the 101 with the negotiated permessage-deflate
// answer, the frame checks gorilla does not make, the message size limit,
// ping/pong keepalive and the closing handshake with its codes. It knows
// nothing of Python or ASGI: an application adapter (internal/asgi) builds
// the scope, waits for the app's accept and moves messages through its
// App interface.
//
// # Life of a connection
//
//  1. The front (http1) hands a request; IsUpgrade says whether it asks
//     for a WebSocket and CheckHandshake whether it asks correctly
//     (RFC 6455 §4.2.1): 400 for a malformed handshake, 426 with
//     Sec-WebSocket-Version: 13 for another version (§4.2.2); Refuse
//     writes either.
//  2. Once the app accepts, Upgrader.Upgrade writes the 101 with the
//     app's subprotocol (one the client offered, §4.2.2:
//     ErrUnofferedSubprotocol otherwise) and header lines, and the
//     permessage-deflate answer of NegotiateDeflate (deflate.go). The
//     connection is taken from http1 (hijack.go) and wrapped in a wire
//     (wire.go) that checks each frame header before gorilla parses it.
//  3. Session.Start runs the reader goroutine (session.go): gorilla
//     reassembles fragments and answers pings; each message is checked
//     (size, UTF-8 of text) and handed to App.Deliver, which may ask the
//     reader to wait (Full) until the adapter calls Resume. The adapter's
//     writer sends the app's messages (Send) and close (Close) inside a
//     BeginWrites batch, or, when nothing can block, in a non-blocking
//     turn (TryBegin, TryEnd: what the socket did not take waits in the
//     wire for FlushPending). A message for many connections (the
//     channel layer's fan-out) is framed once (Prepare, SendPrepared;
//     prepared.go). A timer pings the client (keepalive.go).
//  4. The end: the client's close frame, a reset, a violation, a ping
//     timeout, the app's close or a server stop. App.Disconnect gets the
//     code the app is to see, App.ReaderDone follows once the reader has
//     finished, and the adapter calls Finish.
//
// # Close codes (RFC 6455 §7.4.1)
//
//   - 1002 (protocol error): a frame RFC 6455 §5 refuses (wire.go), or
//     one gorilla refuses (it sends the close frame).
//   - 1007 (invalid frame payload data): text or a close reason that is
//     not UTF-8 (§8.1), a compressed message that does not inflate
//     (RFC 7692 §8.1).
//   - 1009 (message too big): a message over Config.MaxSizeBytes, before
//     its payload is read when a frame header announces it, or after
//     inflating.
//   - 1011 (internal error): a ping with no pong within
//     Config.PingTimeout.
//   - 1012 (service restart): a server stop (Session.StopClose), or the
//     adapter's side stopping (App.Deliver returns Stopping).
//   - 1005 and 1006 are never sent (§7.4.1); they reach the app only.
//
// After failing the connection (1002, 1007, 1009) the server half-closes
// and drains for a while (linger), so that the client reads the close
// frame rather than a reset.
//
// Over HTTP/2 (RFC 8441) the handshake is an extended CONNECT
// (http1.Request.Protocol): CheckHandshake takes its form, and Hijack
// gives the stream as a net.Conn whose first write, gorilla's 101,
// becomes the 200 HEADERS (internal/http1 tunnel.go); the rest is the
// same.
package websocket
