package websocket

// The 101 (RFC 6455 §4.2.2): gorilla's Upgrader writes it over the
// connection taken from http1.

import (
	"bufio"
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	gorilla "github.com/gorilla/websocket"

	"turnstile/internal/http1"
)

// Upgrader upgrades checked handshakes to Sessions with one Config. It is
// safe for concurrent use.
type Upgrader struct {
	cfg Config
	up  *gorilla.Upgrader
	log *slog.Logger
}

var writeBuffers sync.Pool // gorilla's write buffers: held only while a message is written

// NewUpgrader returns an Upgrader for cfg (its defaults filled in,
// Config.WithDefaults); log receives the sessions' debug lines. The
// handshake is checked by CheckHandshake before; the origin is the app's
// to check (it is in the scope's headers), as with uvicorn.
func NewUpgrader(cfg Config, log *slog.Logger) *Upgrader {
	cfg = cfg.WithDefaults()
	if log == nil {
		log = slog.Default()
	}
	return &Upgrader{cfg: cfg, log: log, up: &gorilla.Upgrader{
		CheckOrigin:       func(*http.Request) bool { return true },
		EnableCompression: cfg.PerMessageDeflate,
		// An idle connection keeps only its read buffer (writes borrow
		// one from the pool). 1 KiB holds small messages whole; gorilla
		// reads larger payloads straight into the message buffer.
		ReadBufferSize:  readBufferSize,
		WriteBufferPool: &writeBuffers,
		// Not reached for a request CheckHandshake passed; if it is, the
		// client gets the status rather than http1's 500.
		Error: func(w http.ResponseWriter, _ *http.Request, status int, _ error) {
			if a, ok := w.(*hijacker); ok {
				a.w.WriteSimple(status, "text/plain; charset=utf-8", []byte(http.StatusText(status)+"\n"), nil)
			}
		},
	}}
}

// Config returns the effective settings (defaults filled in).
func (u *Upgrader) Config() *Config { return &u.cfg }

// hijacker is the http.ResponseWriter and http.Hijacker gorilla's Upgrader
// needs, over an http1.ResponseWriter. The connection it hands gorilla is
// a wire over the hijacked one: gorilla reads and writes through it.
type hijacker struct {
	w    *http1.ResponseWriter
	hdr  http.Header
	ext  string // the negotiated Sec-WebSocket-Extensions value ("" none)
	wire *wire  // set by Hijack
}

func (a *hijacker) Header() http.Header {
	if a.hdr == nil {
		a.hdr = http.Header{}
	}
	return a.hdr
}
func (a *hijacker) WriteHeader(int)             {}
func (a *hijacker) Write(p []byte) (int, error) { return len(p), nil }
func (a *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := a.w.Hijack()
	if err != nil {
		return nil, nil, err
	}
	a.wire = newWire(c, a.ext)
	return a.wire, brw, nil
}

// Upgrade writes the 101 for hs with the app's subprotocol and header
// lines (head: "Name: value\r\n" lines, validated by the adapter; the
// connection's own fields among them are dropped) and returns the
// session, not yet started (Session.Start). After it returns without an
// error, http1 has forgotten the connection: the Session owns it.
//
// Errors: ErrUnofferedSubprotocol (RFC 6455 §4.2.2: the server's
// Sec-WebSocket-Protocol is one of the client's), before anything is
// written; ErrDeflateLine; or the error of the hijack or of writing the
// 101 (the client is gone).
//
// permessage-deflate is negotiated here (NegotiateDeflate): gorilla sees
// the offer only when we accept one, and the wire writes our answer in
// the 101.
func (u *Upgrader) Upgrade(w *http1.ResponseWriter, hs Handshake, head []byte) (*Session, error) {
	req := &http.Request{Method: "GET", Header: http.Header{
		"Connection":            {"Upgrade"},
		"Upgrade":               {"websocket"},
		"Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key":     {hs.Key},
	}}
	ext := ""
	if u.cfg.PerMessageDeflate {
		ext = NegotiateDeflate(hs.Extensions)
	}
	if ext != "" {
		req.Header["Sec-Websocket-Extensions"] = []string{"permessage-deflate"}
	}
	resp := http.Header{}
	for len(head) > 0 {
		i := bytes.Index(head, []byte("\r\n"))
		if i < 0 {
			break
		}
		line := head[:i]
		head = head[i+2:]
		name, value, ok := bytes.Cut(line, []byte(": "))
		if !ok {
			continue
		}
		switch strings.ToLower(string(name)) {
		case "sec-websocket-protocol":
			if _, twice := resp["Sec-Websocket-Protocol"]; twice || !offered(hs.Protocols, value) {
				return nil, ErrUnofferedSubprotocol
			}
			resp["Sec-Websocket-Protocol"] = []string{string(value)}
		case "upgrade", "sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-version":
			// the server's own (connection, content-length and the like
			// were dropped by the adapter)
		default:
			k := string(name)
			resp[k] = append(resp[k], string(value))
		}
	}
	hj := &hijacker{w: w, ext: ext}
	conn, err := u.up.Upgrade(hj, req, resp)
	if err != nil {
		return nil, err
	}
	s := newSession(conn, hj.wire, ext != "", u)
	if ext != "" {
		// The limit is on the message (readMessage checks it after
		// inflating); on the wire, deflate adds to bytes that do not
		// compress: 5 bytes per stored block, and a client with a small
		// memLevel (websockets uses 5: 2 KiB blocks) makes small blocks.
		// zlib's deflateBound allows 1/8 + 1/64 for any settings.
		conn.SetReadLimit(u.cfg.MaxSizeBytes + u.cfg.MaxSizeBytes/8 + u.cfg.MaxSizeBytes/64 + 64)
	}
	return s, nil
}

// offered reports whether the client's Sec-WebSocket-Protocol listed p.
func offered(protocols [][]byte, p []byte) bool {
	for _, q := range protocols {
		if bytes.Equal(q, p) {
			return true
		}
	}
	return false
}
