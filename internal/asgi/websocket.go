package asgi

// WebSockets for ASGI apps (ASGI HTTP & WebSocket spec 2.5, RFC 6455).
//
// Go owns the framing (github.com/gorilla/websocket), ping/pong, the size
// and queue limits and the close handshake; only messages reach Python.
// websocket.c describes the loop's side.
//
// # Life of a WebSocket
//
//  1. ServeHTTP1 sees an Upgrade: websocket request and calls
//     serveWebSocket, which checks the handshake (RFC 6455 §4.2.1): 400 for
//     a malformed one, 426 with Sec-WebSocket-Version: 13 for another
//     version.
//  2. The websocket scope goes to the loop (TS_EV_WS_NEW); the HTTP
//     response is held until the app answers. websocket.accept is a
//     Channel.start with status 101: Go hijacks the connection from http1
//     and lets gorilla's Upgrader write the 101, with the
//     permessage-deflate answer of negotiateDeflate (wsdeflate.go). Any
//     other answer (websocket.close → 403, the websocket.http.response
//     extension) is written as a plain HTTP response and the connection
//     stays HTTP.
//  3. After the 101, ServeHTTP1 returns (http1 has forgotten the
//     connection; the request's memory goes back) and two goroutines run
//     the session: the reader reads messages (gorilla reassembles
//     fragments and answers pings, behind the frame checks of wsWire,
//     wswire.go), checks UTF-8 and pushes them to the loop, pausing while
//     MaxQueue messages wait for receive(); the writer waits for the
//     slot's wake-up (ready.go) and writes the app's records
//     (websocket.send, websocket.close). A timer pings the client.
//  4. The end: whoever ends the connection — the client's close frame, a
//     reset, a limit (1009, 1007, 1002), a ping timeout (1011), the app's
//     close or return, server stop (1012) — the app gets exactly one
//     websocket.disconnect with the code, and the writer releases the slot
//     once the reader has finished. 1005 and 1006 never go on the wire.
//
// # Server stop
//
// A worker stops (SIGTERM; on SIGHUP the master replaces the workers one
// by one) after it has stopped accepting. CloseWebSockets then ends every
// session (issue 29):
//
//   - The writer sends the close frame with 1012 (Service Restart) at
//     once (sendStopClose): the client learns of the stop one round trip
//     early and stops sending.
//   - The reader goes on reading: every message that precedes the
//     client's close frame — all the client sent before our close frame
//     reached it — goes to the app, with MaxQueue back-pressure as
//     always. Then the app gets websocket.disconnect with 1012, whatever
//     code the client echoed (readEnd).
//   - Bounds: the closing handshake's read deadline (wsCloseTimeout, 5 s)
//     and, when the queue is full, wsStopReadWait (1 s) without the app
//     reading: then the disconnect goes after what is queued and the rest
//     is dropped. Loop.Stop bounds it all by --graceful-timeout.
//   - What the app sends after the close frame is dropped (RFC 6455
//     §5.5.1); send() does not raise while the app reads its way to the
//     disconnect (_asgi.py, WSCycle._ended).
//
// The client loses what it sends after it received our close frame (a
// client that follows RFC 6455 §7.1.2 sends none: it answers with its own
// close frame) and what was still on the wire past those bounds. A
// handshake that reaches a stopping worker — on a connection it accepted
// just before it stopped accepting — is served, and its session closed at
// once with 1012, which a client reads as "reconnect"; a 503 would be a
// failed handshake.

/*
#include <stdlib.h>
#include "asgi.h"
*/
import "C"

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/gorilla/websocket"

	"turnstile/internal/http1"
	"turnstile/internal/reqblock"
)

// Defaults of WebSocketConfig (uvicorn's).
const (
	DefaultWSMaxSizeBytes = 16 << 20
	DefaultWSMaxQueue     = 32
	DefaultWSWriteTimeout = 30 * time.Second
)

const (
	// wsCloseTimeout bounds the wait for the client's close frame after
	// ours, and the linger after a protocol failure.
	wsCloseTimeout = 5 * time.Second
	// wsLingerTimeout bounds the drain after we failed the connection
	// (1009, 1007, 1002): the client gets our close frame before the FIN
	// rather than a reset for the bytes it is still sending.
	wsLingerTimeout = 2 * time.Second
	// wsStopReadWait bounds how long, at a server stop, a reader whose
	// queue is full waits for the app to read on before it gives the app
	// its websocket.disconnect and drops what the client still sends (see
	// "Server stop").
	wsStopReadWait = time.Second
	// wsKeepBuffer is the largest message buffer kept in the pool.
	wsKeepBuffer = 64 << 10
	// wsReadBufferSize is each connection's read buffer.
	wsReadBufferSize = 1 << 10
)

// WebSocketConfig configures WebSocket connections. The zero value is
// valid: the default sizes, no pings, no compression.
type WebSocketConfig struct {
	// MaxSizeBytes is the largest message accepted, in bytes; a larger one
	// (or a frame header announcing one) closes the connection with 1009
	// before its payload is read. Default DefaultWSMaxSizeBytes (16 MiB).
	MaxSizeBytes int64
	// MaxQueue is how many received messages may wait for the app's
	// receive() before Go stops reading the socket (TCP then pushes back
	// on the client). Default DefaultWSMaxQueue (32).
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

func (c WebSocketConfig) withDefaults() WebSocketConfig {
	if c.MaxSizeBytes <= 0 {
		c.MaxSizeBytes = DefaultWSMaxSizeBytes
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = DefaultWSMaxQueue
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWSWriteTimeout
	}
	if c.PingInterval < 0 {
		c.PingInterval = 0
	}
	if c.PingTimeout < 0 {
		c.PingTimeout = 0
	}
	return c
}

// ---- the handshake -------------------------------------------------------

// isWebSocket reports whether r asks for a WebSocket: an Upgrade field
// whose token list holds "websocket" (case-insensitive). Whether it asks
// correctly is checkHandshake's job.
func isWebSocket(r *http1.Request) bool {
	for i := range r.Header {
		f := &r.Header[i]
		if len(f.Name) == 7 && reqblock.EqualFold(f.Name, []byte("upgrade")) && hasToken(f.Value, "websocket") {
			return true
		}
	}
	return false
}

// hasToken reports whether the comma-separated list v holds token
// (ASCII case-insensitive, surrounding whitespace ignored).
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var elem []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			elem, v = v[:i], v[i+1:]
		} else {
			elem, v = v, nil
		}
		elem = bytes.Trim(elem, " \t")
		if reqblock.EqualFold(elem, []byte(token)) {
			return true
		}
	}
	return false
}

// handshake is what checkHandshake extracts from a valid request.
type handshake struct {
	key        string
	protocols  [][]byte // Sec-WebSocket-Protocol tokens, in order
	extensions []string // Sec-WebSocket-Extensions field values
}

// checkHandshake validates an opening handshake (RFC 6455 §4.2.1) and
// returns it, or the status to refuse it with (400; 426 for a version
// other than 13, §4.2.2) and a fixed reason.
func checkHandshake(r *http1.Request) (hs handshake, status int, why string) {
	if string(r.Method) != "GET" {
		return hs, 400, "a WebSocket handshake must be a GET"
	}
	if r.ProtoMinor < 1 {
		return hs, 400, "a WebSocket handshake needs HTTP/1.1"
	}
	if r.ContentLength != 0 || r.Chunked {
		return hs, 400, "a WebSocket handshake has no body"
	}
	var conn, version bool
	keys, versions := 0, 0
	for i := range r.Header {
		f := &r.Header[i]
		switch {
		case reqblock.EqualFold(f.Name, []byte("connection")):
			conn = conn || hasToken(f.Value, "upgrade")
		case reqblock.EqualFold(f.Name, []byte("sec-websocket-version")):
			versions++
			version = string(bytes.Trim(f.Value, " \t")) == "13"
		case reqblock.EqualFold(f.Name, []byte("sec-websocket-key")):
			keys++
			hs.key = string(f.Value)
		case reqblock.EqualFold(f.Name, []byte("sec-websocket-protocol")):
			v := f.Value
			for len(v) > 0 {
				var elem []byte
				if i := bytes.IndexByte(v, ','); i >= 0 {
					elem, v = v[:i], v[i+1:]
				} else {
					elem, v = v, nil
				}
				if elem = bytes.Trim(elem, " \t"); len(elem) == 0 {
					continue
				}
				if !isToken(elem) {
					return hs, 400, "invalid Sec-WebSocket-Protocol"
				}
				hs.protocols = append(hs.protocols, elem)
			}
		case reqblock.EqualFold(f.Name, []byte("sec-websocket-extensions")):
			hs.extensions = append(hs.extensions, string(f.Value))
		}
	}
	if !conn {
		return hs, 400, "Connection must list upgrade"
	}
	if versions != 1 || !version {
		return hs, 426, "Sec-WebSocket-Version must be 13"
	}
	// §4.2.1 item 5: "a base64-encoded value that, when decoded, is 16
	// bytes in length".
	if keys != 1 {
		return hs, 400, "exactly one Sec-WebSocket-Key is required"
	}
	if k, err := base64.StdEncoding.DecodeString(hs.key); err != nil || len(k) != 16 {
		return hs, 400, "invalid Sec-WebSocket-Key"
	}
	return hs, 0, ""
}

func isToken(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return len(b) > 0
}

var upgradeRequired = []byte("Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nContent-Type: text/plain; charset=utf-8\r\n")

func refuse(w *http1.ResponseWriter, status int, why string) {
	body := []byte(why + "\n")
	if status == 426 {
		w.WriteHead(426, []byte("426 Upgrade Required"), upgradeRequired, int64(len(body)), false)
		w.Write(body)
		return
	}
	w.WriteSimple(status, "text/plain; charset=utf-8", body, nil)
}

// serveWebSocket runs a WebSocket request through the loop: step 1 and 2
// of "Life of a WebSocket". It returns after the handshake is answered.
func (h *Handler) serveWebSocket(w *http1.ResponseWriter, r *http1.Request) {
	start := time.Now()
	status := 0
	defer func() {
		if h.Done != nil {
			h.Done(r, Result{Status: status, Duration: time.Since(start), Bytes: w.Written()})
		}
	}()
	hs, code, why := checkHandshake(r)
	if code != 0 {
		status = code
		refuse(w, code, why)
		return
	}
	// A handshake that reaches a stopping worker (on a connection it
	// accepted just before it stopped accepting) is served like any
	// other: the app accepts, and the session is closed at once with
	// 1012 (wsRegister), which a client reads as "reconnect", where a 503
	// would be a failed handshake. See "Server stop".
	s, err := getSlot()
	if err != nil {
		h.logger().Error(err.Error())
		status = 503
		w.WriteSimple(503, "text/plain; charset=utf-8", unavailable, []byte("Retry-After: 1\r\n"))
		return
	}
	gen := C.ts_asgi_begin(h.Loop.c, s.c)
	held := true // Go's hold on the slot, passed to the session on accept
	defer func() {
		if held {
			C.ts_asgi_release(s.c)
		}
	}()
	s.rec.Begin(time.Now(), r.Method, r.Path)
	defer s.rec.End()
	cfg := &h.ws().cfg

	block, n := s.buildScope(r, h.RootPath)
	for _, p := range hs.protocols {
		block = reqblock.AppendEntry(block, C.TS_SC_SUBPROTOCOL, nil, p)
		n++
	}
	s.block = block
	if C.ts_asgi_reserve(s.c, C.size_t(len(block))) != 0 {
		status = 503
		w.WriteSimple(503, "text/plain; charset=utf-8", unavailable, []byte("Retry-After: 1\r\n"))
		return
	}
	C.memcpy(unsafe.Pointer(s.c.req), unsafe.Pointer(&block[0]), C.size_t(len(block)))
	s.c.req_len = C.size_t(len(block))
	s.c.nentries = C.int(n)
	s.c.body_off, s.c.body_len, s.c.body_done = 0, 0, 1
	s.c.ws_max_queue = C.int(cfg.MaxQueue)
	s.block = nil // the scratch buffer would stay pinned by a long session
	if C.ts_asgi_push(h.Loop.c, C.TS_EV_WS_NEW, s.c, gen, nil, 0, 0) != 0 {
		status = 503
		w.WriteSimple(503, "text/plain; charset=utf-8", unavailable, []byte("Retry-After: 1\r\n"))
		return
	}
	// A client that leaves before the app answers: websocket.disconnect
	// (a late call after the slot moved on is dropped by its gen).
	w.NotifyClose(func() { pushClose(s, gen, 1006, "") })

	// Wait for the app's answer: websocket.accept (a 101 head), or a
	// denial response written like an HTTP one.
	headSent := false
	for {
		<-s.ready
		t := s.take // C memory: the hot cgo call passes no Go pointer
		C.ts_asgi_take(s.c, t)
		if t.head_ready != 0 && t.status == 101 && !headSent {
			head := C.GoBytes(unsafe.Pointer(t.head), C.int(t.status_len+t.header_len))[t.status_len:]
			ws, err := h.upgrade(w, hs, head, s, gen)
			if err != nil {
				switch err {
				case errUnofferedSubprotocol:
					// RFC 6455 §4.2.2: no 101 with it; a 500 as for an
					// app that raised before accepting (send() raises
					// for the subprotocol key, so only a hand-set header
					// gets here).
					h.logger().Error(err.Error(), "path", string(r.Path), "offered", string(bytes.Join(hs.protocols, []byte(", "))))
					status = 500
					w.WriteSimple(500, "text/plain; charset=utf-8", []byte("Internal Server Error\n"), nil)
				case errDeflateLine:
					h.logger().Error(err.Error())
					status = 500
				default:
					// The 101 could not be written: the client is gone.
					h.logger().Debug("asgi: websocket upgrade failed", "err", err)
					status = 101
				}
				pushClose(s, gen, 1006, "")
				C.ts_asgi_written(s.c, gen)
				if t.error != nil {
					C.free(unsafe.Pointer(t.error))
				}
				return
			}
			status, held = 101, false
			ws.start(t) // frees t.error; the writer takes into s.take only after this
			return
		}
		if t.head_ready != 0 && !headSent {
			cl := int64(t.content_length)
			if cl < 0 && t.finished != 0 {
				cl = int64(t.out_len)
			}
			head := unsafe.Slice((*byte)(unsafe.Pointer(t.head)), int(t.status_len+t.header_len))
			w.WriteHead(int(t.status), head[:t.status_len], head[t.status_len:], cl, t.close != 0)
			headSent, status = true, int(t.status)
		}
		if headSent && t.out_len > 0 {
			w.Write(unsafe.Slice((*byte)(unsafe.Pointer(t.out)), int(t.out_len)))
		}
		C.ts_asgi_written(s.c, gen)
		if t.error != nil {
			C.free(unsafe.Pointer(t.error))
		}
		if headSent && t.finished != 0 {
			pushClose(s, gen, 1006, "") // denied: the app's receive() ends
			return
		}
		if t.app_done != 0 {
			if !headSent {
				// ASGI: an app that returns (or raises) without accepting or
				// closing gets a 500; a traceback was logged on the loop.
				if t.error == nil {
					h.logger().Error("asgi: the app returned without accepting or closing the WebSocket", "path", string(r.Path))
				}
				status = 500
				w.WriteSimple(500, "text/plain; charset=utf-8", []byte("Internal Server Error\n"), nil)
				return
			}
			w.Abort()
			return
		}
		if headSent && t.out_len > 0 {
			w.Flush()
		}
	}
}

// pushClose tells the loop the WebSocket ended (websocket.disconnect).
func pushClose(s *slot, gen C.uint32_t, code int, reason string) {
	var p *C.char
	if reason != "" {
		p = (*C.char)(unsafe.Pointer(unsafe.StringData(reason)))
	}
	C.ts_asgi_push(s.c.loop, C.TS_EV_WS_CLOSE, s.c, gen, p, C.size_t(len(reason)), C.int(code)) // a late one: dropped by gen
}

// hijacker is the http.ResponseWriter and http.Hijacker gorilla's Upgrader
// needs, over an http1.ResponseWriter. The connection it hands gorilla is
// a wsWire over the hijacked one: gorilla reads and writes through it.
type hijacker struct {
	w    *http1.ResponseWriter
	hdr  http.Header
	ext  string  // the negotiated Sec-WebSocket-Extensions value ("" none)
	wire *wsWire // set by Hijack
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
	a.wire = newWSWire(c, a.ext)
	return a.wire, brw, nil
}

var wsWriteBuffers sync.Pool // gorilla's write buffers: held only while a message is written

// upgrader returns the Upgrader for cfg. The handshake was checked
// already; the origin is the app's to check (it is in the scope's
// headers), as with uvicorn.
func upgrader(cfg WebSocketConfig) *websocket.Upgrader {
	return &websocket.Upgrader{
		CheckOrigin:       func(*http.Request) bool { return true },
		EnableCompression: cfg.PerMessageDeflate,
		// An idle connection keeps only its read buffer (writes borrow
		// one from the pool). 1 KiB holds small messages whole; gorilla
		// reads larger payloads straight into the message buffer.
		ReadBufferSize:  wsReadBufferSize,
		WriteBufferPool: &wsWriteBuffers,
		// Not reached for a request checkHandshake passed; if it is, the
		// client gets the status rather than http1's 500.
		Error: func(w http.ResponseWriter, _ *http.Request, status int, _ error) {
			if a, ok := w.(*hijacker); ok {
				a.w.WriteSimple(status, "text/plain; charset=utf-8", []byte(http.StatusText(status)+"\n"), nil)
			}
		},
	}
}

// errUnofferedSubprotocol: the app's accept names a subprotocol the client
// did not offer (or more than one).
var errUnofferedSubprotocol = errors.New("asgi: websocket.accept names a subprotocol the client did not offer")

// upgrade writes the 101 with the app's subprotocol and headers (head: the
// header lines Channel.start validated) and returns the session.
//
// RFC 6455 §4.2.2: the server's Sec-WebSocket-Protocol is one of the
// client's; send() refuses another (_asgi.py), and a header the app set
// by hand is checked here: errUnofferedSubprotocol, before anything is
// written. permessage-deflate is negotiated here (negotiateDeflate):
// gorilla sees the offer only when we accept one, and wsWire writes our
// answer in the 101.
func (h *Handler) upgrade(w *http1.ResponseWriter, hs handshake, head []byte, s *slot, gen C.uint32_t) (*wsSession, error) {
	shared := h.ws()
	req := &http.Request{Method: "GET", Header: http.Header{
		"Connection":            {"Upgrade"},
		"Upgrade":               {"websocket"},
		"Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key":     {hs.key},
	}}
	ext := ""
	if shared.cfg.PerMessageDeflate {
		ext = negotiateDeflate(hs.extensions)
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
			if _, twice := resp["Sec-Websocket-Protocol"]; twice || !offered(hs.protocols, value) {
				return nil, errUnofferedSubprotocol
			}
			resp["Sec-Websocket-Protocol"] = []string{string(value)}
		case "upgrade", "sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-version":
			// the server's own (connection, content-length and the like
			// were dropped by Channel.start)
		default:
			k := string(name)
			resp[k] = append(resp[k], string(value))
		}
	}
	hj := &hijacker{w: w, ext: ext}
	conn, err := shared.upgrader.Upgrade(hj, req, resp)
	if err != nil {
		return nil, err
	}
	registerShutdown(w.Server())
	ws := newSession(s, gen, conn, hj.wire.Conn, ext != "", shared)
	if ext != "" {
		// The limit is on the message (readMessage checks it after
		// inflating); on the wire, deflate adds to bytes that do not
		// compress: 5 bytes per stored block, and a client with a small
		// memLevel (websockets uses 5: 2 KiB blocks) makes small blocks.
		// zlib's deflateBound allows 1/8 + 1/64 for any settings.
		conn.SetReadLimit(shared.cfg.MaxSizeBytes + shared.cfg.MaxSizeBytes/8 + shared.cfg.MaxSizeBytes/64 + 64)
	}
	return ws, nil
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

// ---- the session -----------------------------------------------------------

// wsSession is one accepted WebSocket: its reader goroutine, its writer
// goroutine and its ping timer.
type wsSession struct {
	s    *slot
	gen  C.uint32_t
	conn *websocket.Conn
	raw  net.Conn // the hijacked connection, under gorilla's wsWire
	cfg  *WebSocketConfig
	log  *slog.Logger

	deflate bool // permessage-deflate was negotiated

	resume chan struct{} // writer → reader: the app consumed, read on (cap 1)
	quit   chan struct{} // closed with our close frame: the reader stops waiting for the app

	readerDone atomic.Bool
	paused     atomic.Bool  // the reader waits for the app (MaxQueue)
	stopCode   atomic.Int32 // a close requested from outside the writer (server stop)
	draining   atomic.Bool  // our close frame is the stop's: the reader still delivers (sendStopClose)
	appEnded   atomic.Bool  // the app has returned: nothing more to deliver
	pingSent   atomic.Int64 // unix ns of the ping awaiting its pong; 0 = none
	lastPong   atomic.Int64 // unix ns
	timer      *time.Timer

	mu        sync.Mutex
	closeSent bool // guarded by mu: our close frame is out (or being sent)
	gone      bool // guarded by mu: websocket.disconnect was pushed
	released  bool // guarded by mu: the writer released the slot

	// owned by the writer goroutine
	appDone, appErr, writeFailed bool
}

func newSession(s *slot, gen C.uint32_t, conn *websocket.Conn, raw net.Conn, deflate bool, shared *wsShared) *wsSession {
	cfg := &shared.cfg
	ws := &wsSession{s: s, gen: gen, conn: conn, raw: raw, cfg: cfg, log: shared.log, deflate: deflate,
		resume: make(chan struct{}, 1), quit: make(chan struct{})}
	conn.SetReadLimit(cfg.MaxSizeBytes)
	conn.SetPongHandler(func(string) error {
		ws.lastPong.Store(time.Now().UnixNano())
		return nil
	})
	return ws
}

// wsShared is what a Handler's WebSockets share: the effective settings
// and the Upgrader.
type wsShared struct {
	cfg      WebSocketConfig
	upgrader *websocket.Upgrader
	log      *slog.Logger
}

// ws returns the handler's wsShared, made on first use from h.WebSocket.
func (h *Handler) ws() *wsShared {
	h.wsOnce.Do(func() {
		cfg := h.WebSocket.withDefaults()
		h.wsState = &wsShared{cfg: cfg, upgrader: upgrader(cfg), log: h.logger()}
	})
	return h.wsState
}

// start runs the session: the records that came with the accept, then the
// reader, the writer and the ping timer. Called by the handler goroutine,
// which then returns.
func (ws *wsSession) start(t *C.ts_asgi_take_result) {
	wsRegister(ws)
	ws.handle(t)
	C.ts_asgi_written(ws.s.c, ws.gen)
	C.ts_asgi_ws_trim(ws.s.c)
	if ws.cfg.PingInterval > 0 {
		// Armed only once ws.timer is set: tick reads it.
		ws.timer = time.AfterFunc(math.MaxInt64, ws.tick)
		ws.timer.Reset(ws.cfg.PingInterval)
	}
	go ws.readLoop()
	go ws.writeLoop()
}

// handle acts on one take: the records, then the app's end.
func (ws *wsSession) handle(t *C.ts_asgi_take_result) {
	if t.error != nil {
		C.free(unsafe.Pointer(t.error))
		ws.appErr = true
	}
	if t.ws_resume != 0 {
		select {
		case ws.resume <- struct{}{}:
		default:
		}
	}
	if t.out_len > 0 {
		ws.writeRecords(unsafe.Slice((*byte)(unsafe.Pointer(t.out)), int(t.out_len)))
	}
	if t.app_done != 0 && !ws.appDone {
		ws.appDone = true
		ws.appEnded.Store(true)
		// ASGI: an app that returns after the accept without closing gets
		// a normal close; one that raised, 1011 (internal error).
		if ws.appErr {
			ws.sendClose(websocket.CloseInternalServerErr, "")
		} else {
			ws.sendClose(websocket.CloseNormalClosure, "")
		}
	}
}

// writeRecords writes the app's records (asgi.h, TS_WS_*) in order.
func (ws *wsSession) writeRecords(out []byte) {
	if !ws.writeFailed {
		ws.conn.SetWriteDeadline(time.Now().Add(ws.cfg.WriteTimeout))
	}
	for len(out) >= C.TS_WS_RECORD_HDR {
		kind := out[0]
		n := int(binary.NativeEndian.Uint32(out[1:5]))
		data := out[C.TS_WS_RECORD_HDR : C.TS_WS_RECORD_HDR+n]
		out = out[C.TS_WS_RECORD_HDR+n:]
		if ws.writeFailed || ws.closing() {
			continue // the connection is closing: what the app sent is dropped
		}
		switch kind {
		case C.TS_WS_TEXT, C.TS_WS_BINARY:
			typ := websocket.TextMessage
			if kind == C.TS_WS_BINARY {
				typ = websocket.BinaryMessage
			}
			if err := ws.conn.WriteMessage(typ, data); err != nil {
				// The client is gone or stopped reading: drop the
				// connection; the reader reports the end to the app.
				ws.writeFailed = true
				ws.raw.Close()
			}
		case C.TS_WS_CLOSE:
			code, reason := 0, ""
			if len(data) >= 2 {
				code, reason = int(binary.BigEndian.Uint16(data)), string(data[2:])
			}
			ws.sendClose(code, reason)
		}
	}
}

func (ws *wsSession) closing() bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.closeSent
}

// sendClose starts the closing handshake once (RFC 6455 §7.1.2): our
// close frame (code 0: no body; never 1005 or 1006, §7.4.1), then the
// client gets wsCloseTimeout to answer before the reader gives up. Any
// goroutine.
func (ws *wsSession) sendClose(code int, reason string) {
	ws.mu.Lock()
	if ws.closeSent {
		ws.mu.Unlock()
		return
	}
	ws.closeSent = true
	close(ws.quit)
	ws.mu.Unlock()
	var msg []byte
	if code != 0 && code != websocket.CloseNoStatusReceived && code != websocket.CloseAbnormalClosure {
		msg = websocket.FormatCloseMessage(code, reason)
	}
	ws.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(wsCloseTimeout))
	ws.raw.SetReadDeadline(time.Now().Add(wsCloseTimeout))
}

// sendStopClose is sendClose for a server stop: unless a close frame is
// out already (then it reports false), it sends ours with code and sets
// draining, in one step under mu, so that the reader never drops a message
// that arrives after our close frame (see "Server stop").
func (ws *wsSession) sendStopClose(code int) bool {
	ws.mu.Lock()
	if ws.closeSent {
		ws.mu.Unlock()
		return false
	}
	ws.closeSent = true
	ws.draining.Store(true)
	close(ws.quit)
	ws.mu.Unlock()
	ws.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(wsCloseTimeout))
	ws.raw.SetReadDeadline(time.Now().Add(wsCloseTimeout))
	return true
}

// disconnect pushes websocket.disconnect, once, while Go holds the slot.
// Any goroutine.
func (ws *wsSession) disconnect(code int, reason string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.gone || ws.released {
		return
	}
	ws.gone = true
	pushClose(ws.s, ws.gen, code, reason)
}

// wake makes the writer look at the session's state.
func (ws *wsSession) wake() {
	ws.s.wake()
}

// writeLoop is the writer goroutine: it waits for the slot's wake-up and
// writes what the app sent, until the reader has finished.
func (ws *wsSession) writeLoop() {
	s := ws.s
	for {
		<-s.ready
		if ws.readerDone.Load() {
			break
		}
		t := s.take
		C.ts_asgi_take(s.c, t)
		ws.handle(t)
		C.ts_asgi_written(s.c, ws.gen)
		if code := int(ws.stopCode.Load()); code != 0 && !ws.draining.Load() {
			// Before handle sees the app's return: it must not close
			// with 1000. The reader pushes the disconnect once it has
			// delivered what came before the client's close frame; when
			// our close frame was already out (the app's), at once.
			if !ws.sendStopClose(code) {
				ws.disconnect(code, "")
			}
		}
	}
	ws.finish()
}

// finish ends the session once the reader is done: the slot goes back
// (the loop keeps its own hold while the app runs).
func (ws *wsSession) finish() {
	if ws.timer != nil {
		ws.timer.Stop()
	}
	ws.raw.Close()
	ws.mu.Lock()
	ws.released = true
	ws.mu.Unlock()
	wsUnregister(ws)
	C.ts_asgi_release(ws.s.c)
}

var wsReadBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// readLoop is the reader goroutine: message by message to the loop.
func (ws *wsSession) readLoop() {
	defer func() {
		ws.readerDone.Store(true)
		ws.wake()
	}()
	gaveUp := false // at a server stop: the app stopped reading (waitApp)
	for {
		typ, r, err := ws.conn.NextReader()
		if err != nil {
			ws.readEnd(err)
			return
		}
		bp := wsReadBuffers.Get().(*[]byte)
		data, err := readMessage(r, (*bp)[:0], ws.cfg.MaxSizeBytes)
		if err == errTooBig {
			wsPutBuffer(bp, data)
			ws.fail(websocket.CloseMessageTooBig, "")
			return
		}
		if err != nil {
			wsPutBuffer(bp, data)
			ws.readEnd(err)
			return
		}
		// RFC 6455 §8.1: text must be UTF-8, else fail with 1007.
		if typ == websocket.TextMessage && !utf8.Valid(data) {
			wsPutBuffer(bp, data)
			ws.fail(websocket.CloseInvalidFramePayloadData, "invalid UTF-8 in a text message")
			return
		}
		if ws.closing() && (!ws.draining.Load() || gaveUp || ws.appEnded.Load()) {
			// After our close frame: read on to the client's, drop data
			// — except at a server stop, while the app reads.
			wsPutBuffer(bp, data)
			continue
		}
		opcode := C.int(C.TS_WS_TEXT)
		if typ == websocket.BinaryMessage {
			opcode = C.TS_WS_BINARY
		}
		var p *C.char
		if len(data) > 0 {
			p = (*C.char)(unsafe.Pointer(&data[0]))
		}
		rc := C.ts_asgi_ws_push(ws.s.c, ws.gen, p, C.size_t(len(data)), opcode)
		wsPutBuffer(bp, data)
		switch rc {
		case -1: // the loop is stopping
			ws.fail(websocket.CloseServiceRestart, "")
			return
		case 1:
			ws.paused.Store(true)
			if !ws.waitApp() && ws.draining.Load() {
				// A server stop, and the app has not read for
				// wsStopReadWait: it gets its disconnect after what is
				// queued, and the rest is dropped.
				gaveUp = true
				ws.disconnect(int(ws.stopCode.Load()), "")
			}
			ws.paused.Store(false)
		}
	}
}

// waitApp waits, with MaxQueue messages queued, until the app has read
// half of them (true). Once our close frame is out it stops waiting
// (false) — except at a server stop (draining), where the app has
// wsStopReadWait to read on.
func (ws *wsSession) waitApp() bool {
	select {
	case <-ws.resume:
		return true
	case <-ws.quit:
	}
	if !ws.draining.Load() {
		return false
	}
	t := time.NewTimer(wsStopReadWait)
	defer t.Stop()
	select {
	case <-ws.resume:
		return true
	case <-t.C:
		return false
	}
}

func wsPutBuffer(bp *[]byte, data []byte) {
	if cap(data) <= wsKeepBuffer {
		*bp = data[:0]
		wsReadBuffers.Put(bp)
	}
}

var errTooBig = errors.New("asgi: websocket message too big")

// readMessage reads a whole message into buf, growing it as bytes arrive,
// never from a length a frame header announces (gorilla's read limit
// refuses a header above max on the wire before its payload is read).
// The limit is checked again after decompression (errTooBig): a small
// permessage-deflate frame can inflate to any size.
func readMessage(r io.Reader, buf []byte, max int64) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= max+1 {
				return buf, errTooBig
			}
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):cap(buf)]
		if left := max + 1 - int64(len(buf)); int64(len(room)) > left {
			room = room[:left]
		}
		n, err := r.Read(room)
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return buf, errTooBig
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readEnd reports why reading stopped to the app and closes the socket.
// A frame wsWire refused, and a compressed message that does not inflate,
// fail the connection with a close frame of their own code (fail).
func (ws *wsSession) readEnd(err error) {
	var v *wsViolation
	if errors.As(err, &v) {
		ws.fail(v.code, v.reason)
		return
	}
	if ws.deflate && isCorruptDeflate(err) {
		// RFC 7692 §8.1: "fail the WebSocket connection" on data that
		// does not inflate; 1007, invalid frame payload data (RFC 6455
		// §7.4.1), as the message's data is what is wrong.
		ws.fail(websocket.CloseInvalidFramePayloadData, "invalid permessage-deflate data")
		return
	}
	code, reason, linger := 1006, "", false
	var ce *websocket.CloseError
	switch {
	case errors.As(err, &ce):
		// The client's close frame (gorilla answered it), or gorilla's
		// 1006 for an EOF.
		code = ce.Code
		if code != websocket.CloseAbnormalClosure {
			reason = ce.Text
		}
	case errors.Is(err, websocket.ErrReadLimit):
		code, linger = websocket.CloseMessageTooBig, true // gorilla sent the 1009
	case isProtocolError(err):
		code, linger = websocket.CloseProtocolError, true // gorilla sent the 1002
	}
	if ws.draining.Load() && !linger {
		// A server stop: the client's close frame (whatever code it
		// echoed), or the connection ended or timed out during the
		// closing handshake. The app learns why: 1012.
		code, reason = int(ws.stopCode.Load()), ""
	}
	if linger {
		ws.mu.Lock()
		if !ws.closeSent {
			ws.closeSent = true
			close(ws.quit)
		}
		ws.mu.Unlock()
	}
	ws.log.Debug("asgi: websocket ended", "code", code, "err", err)
	ws.disconnect(code, reason)
	if linger {
		ws.linger()
	}
	ws.raw.Close()
}

// isProtocolError reports a frame gorilla refused (it has sent a 1002
// close). gorilla has no error type for them: they are plain errors
// prefixed "websocket: ", unlike network errors and EOF.
func isProtocolError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return false
	}
	return strings.HasPrefix(err.Error(), "websocket: ")
}

// isCorruptDeflate reports an error of compress/flate inflating a
// message: corrupt data, or a stream that ends inside a block (gorilla
// appends an empty final block to each message, so a whole one never
// ends early). A connection that drops mid-message is a *CloseError
// (1006) from gorilla, not io.ErrUnexpectedEOF.
func isCorruptDeflate(err error) bool {
	var ce flate.CorruptInputError
	return errors.As(err, &ce) || err == io.ErrUnexpectedEOF
}

// fail closes the connection for a violation found in Go (1002, 1007,
// 1009), or because the server stops: our close frame, then the linger,
// then the TCP close.
func (ws *wsSession) fail(code int, reason string) {
	ws.log.Debug("asgi: websocket failed", "code", code, "reason", reason)
	// The close frame before the disconnect: an app that returns on the
	// disconnect would otherwise have the writer close with 1000 first.
	ws.sendClose(code, reason)
	ws.disconnect(code, "")
	ws.linger()
	ws.raw.Close()
}

// linger half-closes and drains for a while, so that the bytes the client
// is still sending do not turn our close into a reset that destroys the
// close frame in flight (as http1's lingerClose).
func (ws *wsSession) linger() {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := ws.raw.(closeWriter); !ok || cw.CloseWrite() != nil {
		return
	}
	ws.raw.SetReadDeadline(time.Now().Add(wsLingerTimeout))
	var buf [512]byte
	for {
		if _, err := ws.raw.Read(buf[:]); err != nil {
			return
		}
	}
}

// tick is the ping timer: a ping every PingInterval; when PingTimeout is
// set, no pong within it closes the connection with 1011. A reader paused
// on MaxQueue reads no pongs: the client counts as alive then.
func (ws *wsSession) tick() {
	if ws.readerDone.Load() || ws.closing() {
		return
	}
	cfg := ws.cfg
	if sent := ws.pingSent.Load(); sent != 0 {
		if ws.lastPong.Load() < sent && !ws.paused.Load() {
			ws.sendCloseNow(websocket.CloseInternalServerErr, "keepalive ping timeout")
			ws.disconnect(websocket.CloseInternalServerErr, "keepalive ping timeout")
			ws.raw.Close()
			return
		}
		ws.pingSent.Store(0)
		if rest := cfg.PingInterval - cfg.PingTimeout; rest > 0 {
			ws.timer.Reset(rest)
			return
		}
	}
	now := time.Now()
	if cfg.PingTimeout > 0 {
		ws.pingSent.Store(now.UnixNano())
		ws.timer.Reset(cfg.PingTimeout)
	} else {
		ws.timer.Reset(cfg.PingInterval)
	}
	ws.conn.WriteControl(websocket.PingMessage, nil, now.Add(time.Second))
}

// sendCloseNow is sendClose for a dead peer: a short write deadline.
func (ws *wsSession) sendCloseNow(code int, reason string) {
	ws.mu.Lock()
	if ws.closeSent {
		ws.mu.Unlock()
		return
	}
	ws.closeSent = true
	close(ws.quit)
	ws.mu.Unlock()
	ws.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
}

// ---- server stop -----------------------------------------------------------

var wsLive struct {
	mu       sync.Mutex
	m        map[*wsSession]struct{} // guarded by mu
	stopping bool                    // guarded by mu
	servers  map[*http1.Server]bool  // guarded by mu: RegisterOnShutdown done
	empty    *sync.Cond              // signalled when m empties
}

func init() { wsLive.empty = sync.NewCond(&wsLive.mu) }

func registerShutdown(srv *http1.Server) {
	wsLive.mu.Lock()
	defer wsLive.mu.Unlock()
	if wsLive.servers == nil {
		wsLive.servers = make(map[*http1.Server]bool)
	}
	if !wsLive.servers[srv] {
		wsLive.servers[srv] = true
		srv.RegisterOnShutdown(CloseWebSockets)
	}
}

func wsRegister(ws *wsSession) {
	wsLive.mu.Lock()
	if wsLive.m == nil {
		wsLive.m = make(map[*wsSession]struct{})
	}
	wsLive.m[ws] = struct{}{}
	stopping := wsLive.stopping
	wsLive.mu.Unlock()
	if stopping { // accepted while the server stops
		ws.stopCode.Store(websocket.CloseServiceRestart)
		ws.wake()
	}
}

func wsUnregister(ws *wsSession) {
	wsLive.mu.Lock()
	delete(wsLive.m, ws)
	if len(wsLive.m) == 0 {
		wsLive.empty.Broadcast()
	}
	wsLive.mu.Unlock()
}

// CloseWebSockets starts the closing handshake of every WebSocket with
// 1012 (service restart; RFC 6455 §7.4.1 via the IANA registry); their
// apps get what the clients sent before their close frames, then
// websocket.disconnect (see "Server stop"). Sessions accepted later are
// closed the same way as soon as they start. The http1 servers call it
// when they shut down.
func CloseWebSockets() {
	wsLive.mu.Lock()
	wsLive.stopping = true
	all := make([]*wsSession, 0, len(wsLive.m))
	for ws := range wsLive.m {
		all = append(all, ws)
	}
	wsLive.mu.Unlock()
	for _, ws := range all {
		ws.stopCode.CompareAndSwap(0, websocket.CloseServiceRestart)
		ws.wake()
	}
}

// waitWebSockets waits until every WebSocket connection has ended, or
// until deadline. It reports whether they all did.
func waitWebSockets(deadline time.Time) bool {
	done := make(chan struct{})
	go func() {
		wsLive.mu.Lock()
		for len(wsLive.m) > 0 && time.Now().Before(deadline) {
			wsLive.empty.Wait()
		}
		wsLive.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(time.Until(deadline)):
		wsLive.mu.Lock()
		wsLive.empty.Broadcast() // let the waiter see the deadline
		wsLive.mu.Unlock()
		return false
	}
}
