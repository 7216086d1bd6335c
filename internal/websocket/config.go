package websocket

import "time"

// Defaults of Config (uvicorn's).
const (
	DefaultMaxSizeBytes = 16 << 20
	DefaultMaxQueue     = 32
	DefaultWriteTimeout = 30 * time.Second
)

const (
	// closeTimeout bounds the wait for the client's close frame after
	// ours, and the write of our close frame.
	closeTimeout = 5 * time.Second
	// lingerTimeout bounds the drain after we failed the connection
	// (1009, 1007, 1002): the client gets our close frame before the FIN
	// rather than a reset for the bytes it is still sending.
	lingerTimeout = 2 * time.Second
	// stopReadWait bounds how long, at a server stop, a reader whose
	// queue is full waits for the app to read on before it gives the app
	// its disconnect and drops what the client still sends
	// (Session.StopClose).
	stopReadWait = time.Second
	// keepBuffer is the largest message buffer kept in the pool.
	keepBuffer = 64 << 10
	// readBufferSize is each connection's read buffer.
	readBufferSize = 1 << 10
)

// Config configures WebSocket connections. The zero value is valid: the
// default sizes, no pings, no compression.
type Config struct {
	// MaxSizeBytes is the largest message accepted, in bytes; a larger one
	// (or a frame header announcing one) closes the connection with 1009
	// before its payload is read. Default DefaultMaxSizeBytes (16 MiB).
	MaxSizeBytes int64
	// MaxQueue is how many received messages may wait for the app's
	// receive() before Go stops reading the socket (TCP then pushes back
	// on the client). The adapter keeps the queue (App.Deliver returns
	// Full). Default DefaultMaxQueue (32).
	MaxQueue int
	// PingInterval is how often Go pings the client; zero: never.
	PingInterval time.Duration
	// PingTimeout closes the connection with 1011 when a ping has no pong
	// within it; zero: pings are not timed.
	PingTimeout time.Duration
	// PerMessageDeflate negotiates permessage-deflate (RFC 7692) when the
	// client offers it.
	PerMessageDeflate bool
	// WriteTimeout bounds one blocked write to a client that does not
	// read; past it the connection is dropped. Default 30s.
	WriteTimeout time.Duration
}

// WithDefaults returns c with each zero or negative field replaced by its
// default (zero for the ping settings).
func (c Config) WithDefaults() Config {
	if c.MaxSizeBytes <= 0 {
		c.MaxSizeBytes = DefaultMaxSizeBytes
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.PingInterval < 0 {
		c.PingInterval = 0
	}
	if c.PingTimeout < 0 {
		c.PingTimeout = 0
	}
	return c
}

// Close codes the server sends or reports (RFC 6455 §7.4.1; 1012 from the
// IANA registry, §11.7).
const (
	CloseNormalClosure           = 1000
	CloseGoingAway               = 1001
	CloseProtocolError           = 1002
	CloseNoStatusReceived        = 1005 // never on the wire
	CloseAbnormalClosure         = 1006 // never on the wire
	CloseInvalidFramePayloadData = 1007
	CloseMessageTooBig           = 1009
	CloseInternalServerErr       = 1011
	CloseServiceRestart          = 1012
)
