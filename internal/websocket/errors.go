package websocket

import "errors"

var (
	// ErrUnofferedSubprotocol is returned by Upgrader.Upgrade, before
	// anything is written, when the app's header lines name a
	// Sec-WebSocket-Protocol the client did not offer, or more than one
	// (RFC 6455 §4.2.2).
	ErrUnofferedSubprotocol = errors.New("websocket: websocket.accept names a subprotocol the client did not offer")
	// ErrDeflateLine is returned by Upgrader.Upgrade when gorilla's 101
	// lacks the permessage-deflate line the negotiated answer replaces
	// (wire.Write): a gorilla/websocket other than the one wire.go was
	// written against. Nothing was written.
	ErrDeflateLine = errors.New("websocket: gorilla/websocket's 101 lacks its permessage-deflate line")
)

// errTooBig: a message over Config.MaxSizeBytes (readMessage); not seen
// by users, the session fails the connection with 1009.
var errTooBig = errors.New("websocket: message too big")
