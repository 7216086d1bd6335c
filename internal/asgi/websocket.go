package asgi

// WebSockets for ASGI apps (ASGI HTTP & WebSocket spec 2.5): the adapter
// between internal/websocket, which owns the protocol (RFC 6455, RFC 7692:
// handshake checks, framing through github.com/gorilla/websocket,
// ping/pong, the size limit and the close handshake), and the loop, where
// only messages reach Python. websocket.c describes the loop's side.
//
// # Life of a WebSocket
//
//  1. ServeHTTP1 sees an Upgrade: websocket request
//     (websocket.IsUpgrade) and calls serveWebSocket, which checks the
//     handshake (websocket.CheckHandshake, RFC 6455 §4.2.1): 400 for a
//     malformed one, 426 with Sec-WebSocket-Version: 13 for another
//     version.
//  2. The websocket scope goes to the loop (TS_EV_WS_NEW); the HTTP
//     response is held until the app answers. websocket.accept is a
//     Channel.start with status 101: websocket.Upgrader.Upgrade hijacks
//     the connection from http1 and writes the 101 with the app's
//     subprotocol and headers and the negotiated permessage-deflate
//     answer. Any other answer (websocket.close → 403, the
//     websocket.http.response extension) is written as a plain HTTP
//     response and the connection stays HTTP.
//  3. After the 101, ServeHTTP1 returns (http1 has forgotten the
//     connection; the request's memory goes back) and two goroutines run
//     the session: the websocket.Session's reader reads messages and hands
//     them to wsSession.Deliver, which pushes them to the loop, pausing
//     the reader (websocket.Full) while MaxQueue messages wait for
//     receive(); the writer (writeLoop) waits for the slot's wake-up
//     (ready.go) and writes the app's records (websocket.send,
//     websocket.close) through the Session. A timer pings the client.
//     While the writer is idle, the loop's ready-list dispatcher writes
//     the app's messages itself when the socket takes them at once
//     (tryTurn, "Writes without a hand-off" below).
//  4. The end: whoever ends the connection — the client's close frame, a
//     reset, a limit (1009, 1007, 1002), a ping timeout (1011), the app's
//     close or return, server stop (1012) — the app gets exactly one
//     websocket.disconnect with the code (wsSession.Disconnect), and the
//     writer releases the slot once the reader has finished. 1005 and
//     1006 never go on the wire.
//
// # Server stop
//
// A worker stops (SIGTERM; on SIGHUP the master replaces the workers one
// by one) after it has stopped accepting. CloseWebSockets then ends every
// session (issue 29):
//
//   - The writer sends the close frame with 1012 (Service Restart) at
//     once (websocket.Session.StopClose): the client learns of the stop
//     one round trip early and stops sending.
//   - The reader goes on reading: every message that precedes the
//     client's close frame — all the client sent before our close frame
//     reached it — goes to the app, with MaxQueue back-pressure as
//     always. Then the app gets websocket.disconnect with 1012, whatever
//     code the client echoed.
//   - Bounds: the closing handshake's read deadline (5 s) and, when the
//     queue is full, 1 s without the app reading: then the disconnect
//     goes after what is queued and the rest is dropped. Loop.Stop bounds
//     it all by --graceful-timeout.
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
	"bytes"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"turnstile/internal/chlayer"
	"turnstile/internal/http1"
	"turnstile/internal/inflight"
	"turnstile/internal/reqblock"
	"turnstile/internal/websocket"
)

// serveWebSocket runs a WebSocket request through the loop: step 1 and 2
// of "Life of a WebSocket". It returns after the handshake is answered.
func (h *Handler) serveWebSocket(w *http1.ResponseWriter, r *http1.Request) {
	start := time.Now()
	status := 0
	li := 0 // the loop's index, once chosen
	defer func() {
		if h.Done != nil {
			h.Done(r, inflight.Result{Status: status, Duration: time.Since(start), Bytes: w.Written(), Loop: li})
		}
	}()
	hs, code, why := websocket.CheckHandshake(r)
	if code != 0 {
		status = code
		websocket.Refuse(w, code, why)
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
	loop := h.loopFor(r)
	li = loop.index
	s.counted = h.counted(loop) // a session is counted on its loop until finish
	gen := C.ts_asgi_begin(loop.c, s.c)
	held := true // Go's hold on the slot, passed to the session on accept
	defer func() {
		if held {
			uncount(s.counted)
			s.counted = nil
			chlayer.Host.DropSocket(uint64(s.c.index)<<32 | uint64(gen)) // a channel made before the denial
			C.ts_asgi_release(s.c)
		}
	}()
	s.rec.Begin(time.Now(), r.Method, r.Path)
	defer s.rec.End()
	s.conn.Begin(time.Now(), r.Method, r.Path)
	defer func() {
		if held {
			s.conn.End() // not accepted; else finish ends it
		}
	}()
	up := h.ws()
	cfg := up.Config()

	block, n := s.buildScope(r, h.RootPath)
	for _, p := range hs.Protocols {
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
	s.block = nil // the scratch buffer would stay pinned by a long session
	if C.ts_asgi_push_new(loop.c, C.TS_EV_WS_NEW, s.c, gen, C.size_t(len(block)), C.int(n), 0, 0, 1, C.int(cfg.MaxQueue)) != 0 {
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
			sess, err := up.Upgrade(w, hs, head)
			if err != nil {
				switch err {
				case websocket.ErrUnofferedSubprotocol:
					// RFC 6455 §4.2.2: no 101 with it; a 500 as for an
					// app that raised before accepting (send() raises
					// for the subprotocol key, so only a hand-set header
					// gets here).
					h.logger().Error(err.Error(), "path", string(r.Path), "offered", string(bytes.Join(hs.Protocols, []byte(", "))))
					status = 500
					w.WriteSimple(500, "text/plain; charset=utf-8", []byte("Internal Server Error\n"), nil)
				case websocket.ErrDeflateLine:
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
			registerShutdown(w.Server())
			ws := &wsSession{s: s, gen: gen, sess: sess}
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

// ---- the session -----------------------------------------------------------

// wsSession is the ASGI side of one accepted WebSocket: the slot the app's
// messages cross through, the writer goroutine that takes the app's
// records from it, and the websocket.Session that owns the connection.
// It is the session's websocket.App.
type wsSession struct {
	s    *slot
	gen  C.uint32_t
	sess *websocket.Session

	stopCode atomic.Int32 // a close requested from outside the writer (server stop)

	// wmu is the writer's lock: held by whoever takes and writes the
	// slot's records, the writer goroutine or the dispatcher (tryTurn).
	// It guards s.take, taken, flush, appDone and appErr and the
	// Session's writes.
	wmu   sync.Mutex
	taken bool // s.take holds a take the dispatcher left to the writer goroutine
	flush bool // a dispatcher's turn left bytes to write; then ts_asgi_written

	mu       sync.Mutex
	gone     bool // guarded by mu: websocket.disconnect was pushed
	released bool // guarded by mu: the writer released the slot

	appDone, appErr bool // guarded by wmu

	fan fanQueue // the channel layer's fan-out frames (fanout.go)
}

// ws returns the handler's websocket.Upgrader, made on first use from
// h.WebSocket.
func (h *Handler) ws() *websocket.Upgrader {
	h.wsOnce.Do(func() {
		h.wsState = websocket.NewUpgrader(h.WebSocket, h.logger())
	})
	return h.wsState
}

// start runs the session: the records that came with the accept, then the
// reader (websocket.Session.Start), the writer and the ping timer. Called
// by the handler goroutine, which then returns.
func (ws *wsSession) start(t *C.ts_asgi_take_result) {
	wsRegister(ws)
	fanRegister(ws)
	ws.handle(t)
	C.ts_asgi_written(ws.s.c, ws.gen)
	C.ts_asgi_ws_trim(ws.s.c)
	ws.sess.Start(ws)
	ws.s.ws.Store(ws)
	go ws.writeLoop()
}

// handle acts on one take: the records, then the app's end.
func (ws *wsSession) handle(t *C.ts_asgi_take_result) {
	if t.error != nil {
		C.free(unsafe.Pointer(t.error))
		ws.appErr = true
	}
	if t.ws_resume != 0 {
		ws.sess.Resume()
	}
	if t.out_len > 0 {
		ws.writeRecords(unsafe.Slice((*byte)(unsafe.Pointer(t.out)), int(t.out_len)), false)
	}
	if t.app_done != 0 && !ws.appDone {
		ws.appDone = true
		ws.sess.AppReturned()
		// ASGI: an app that returns after the accept without closing gets
		// a normal close; one that raised, 1011 (internal error).
		if ws.appErr {
			ws.sess.Close(websocket.CloseInternalServerErr, "")
		} else {
			ws.sess.Close(websocket.CloseNormalClosure, "")
		}
	}
}

// writeRecords writes the app's records (asgi.h, TS_WS_*) in order; try:
// in the dispatcher's try batch (tryTurn), which holds only messages.
func (ws *wsSession) writeRecords(out []byte, try bool) {
	if !try {
		ws.sess.BeginWrites()
	}
	for len(out) >= C.TS_WS_RECORD_HDR {
		kind := out[0]
		n := int(binary.NativeEndian.Uint32(out[1:5]))
		data := out[C.TS_WS_RECORD_HDR : C.TS_WS_RECORD_HDR+n]
		out = out[C.TS_WS_RECORD_HDR+n:]
		if ws.sess.Dropping() {
			continue // the connection is closing: what the app sent is dropped
		}
		switch kind {
		case C.TS_WS_TEXT, C.TS_WS_BINARY:
			ws.sess.Send(kind == C.TS_WS_TEXT, data)
		case C.TS_WS_CLOSE:
			code, reason := 0, ""
			if len(data) >= 2 {
				code, reason = int(binary.BigEndian.Uint16(data)), string(data[2:])
			}
			ws.sess.Close(code, reason)
		}
	}
}

// Deliver pushes one received message to the loop (websocket.App): Full
// when MaxQueue messages wait for receive(), Stopping when the loop stops.
func (ws *wsSession) Deliver(text bool, data []byte) websocket.Delivery {
	opcode := C.int(C.TS_WS_BINARY)
	if text {
		opcode = C.TS_WS_TEXT
	}
	var p *C.char
	if len(data) > 0 {
		p = (*C.char)(unsafe.Pointer(&data[0]))
	}
	switch C.ts_asgi_ws_push(ws.s.c, ws.gen, p, C.size_t(len(data)), opcode) {
	case -1: // the loop is stopping
		return websocket.Stopping
	case 1:
		return websocket.Full
	}
	return websocket.Delivered
}

// Disconnect pushes websocket.disconnect, once, while Go holds the slot
// (websocket.App). Any goroutine.
func (ws *wsSession) Disconnect(code int, reason string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.gone || ws.released {
		return
	}
	ws.gone = true
	pushClose(ws.s, ws.gen, code, reason)
}

// ReaderDone wakes the writer, which then finishes (websocket.App).
func (ws *wsSession) ReaderDone() { ws.wake() }

// wake makes the writer look at the session's state.
func (ws *wsSession) wake() {
	ws.s.wake()
}

// writeLoop is the writer goroutine: it waits for the slot's wake-up and
// writes what the app sent, until the reader has finished. What a
// dispatcher's turn left (tryTurn) goes first: the bytes the socket did
// not take, or a take it did not write.
func (ws *wsSession) writeLoop() {
	s := ws.s
	for {
		<-s.ready
		ws.wmu.Lock()
		if ws.sess.Done() {
			s.ws.Store(nil)
			if ws.taken && s.take.error != nil {
				C.free(unsafe.Pointer(s.take.error))
			}
			ws.wmu.Unlock()
			break
		}
		// The fan-out frames before the records, written after them: see
		// fanout.go's order (the dispatcher writes records only under
		// wmu, so what it took is out, or pending and flushed here first).
		fan := ws.takeFan()
		t := s.take
		if ws.flush {
			ws.flush = false
			ws.sess.FlushPending()
			C.ts_asgi_written(s.c, ws.gen)
		}
		if ws.taken {
			ws.taken = false
			ws.handle(t)
			C.ts_asgi_written(s.c, ws.gen)
		}
		// Always a take of our own: a wake-up for what came after the
		// dispatcher's take may have coalesced with the one for it.
		C.ts_asgi_take(s.c, t)
		ws.handle(t)
		C.ts_asgi_written(s.c, ws.gen)
		ws.writeFan(fan)
		if code := int(ws.stopCode.Load()); code != 0 && !ws.sess.Draining() {
			// Before handle sees the app's return: it must not close
			// with 1000. The reader pushes the disconnect once it has
			// delivered what came before the client's close frame; when
			// our close frame was already out (the app's), at once.
			if !ws.sess.StopClose(code) {
				ws.Disconnect(code, "")
			}
		}
		ws.wmu.Unlock()
	}
	ws.finish()
}

// finish ends the session once the reader is done: the slot goes back
// (the loop keeps its own hold while the app runs).
func (ws *wsSession) finish() {
	ws.sess.Finish()
	ws.mu.Lock()
	ws.released = true
	ws.mu.Unlock()
	wsUnregister(ws)
	fanUnregister(ws)
	ws.s.conn.End()
	uncount(ws.s.counted)
	ws.s.counted = nil
	C.ts_asgi_release(ws.s.c)
}

// ---- writes without a hand-off --------------------------------------------
//
// A frame the app sends used to cost two goroutine wake-ups in Go: the
// ready list's dispatcher, woken by the loop's eventfd, woke the
// session's writer goroutine, which took and wrote the records. On a
// push workload (small frames at a low rate per connection: game ticks,
// chat lines) each frame is a burst of its own, and those wake-ups, not
// the bytes, were most of Go's CPU per frame (docs/design.md, "Go's share
// per pushed frame"). tryTurn lets the dispatcher write instead, on the
// condition that nothing it does can wait: the writer goroutine is idle
// (wmu), no other goroutine writes to the connection and no bytes of an
// earlier batch wait (websocket.Session.TryBegin), the take holds only
// messages (text, bytes), at most tryMax bytes of them, and no error, end
// of the app or server stop. Each frame is then one non-blocking write(2);
// what the socket does not take at once stays in order in the session
// (at most tryMax bytes and their frame headers) and the writer goroutine
// writes it, blocking, with the write timeout as always, before anything
// else. Anything else goes to the writer goroutine as before (a take the
// dispatcher made, it hands over in s.take: taken).

// tryMax is the most bytes of records a dispatcher's turn writes; a
// larger take goes to the writer goroutine.
const tryMax = 64 << 10

// tryTurn is a writer's turn made by the loop's dispatcher goroutine: it
// reports whether the turn is done; false: the writer goroutine is to be
// woken (it may have a take to write: taken, or bytes to flush).
func (ws *wsSession) tryTurn() bool {
	if !ws.wmu.TryLock() {
		return false // the writer is writing: its next turn takes this
	}
	defer ws.wmu.Unlock()
	if ws.taken || ws.flush || ws.sess.Done() || ws.stopCode.Load() != 0 || !ws.sess.TryBegin() {
		return false
	}
	s := ws.s
	t := s.take
	C.ts_asgi_take(s.c, t)
	if !tryable(t) {
		ws.sess.TryEnd()
		ws.taken = true
		return false
	}
	if t.ws_resume != 0 {
		ws.sess.Resume()
	}
	if t.out_len > 0 {
		ws.writeRecords(unsafe.Slice((*byte)(unsafe.Pointer(t.out)), int(t.out_len)), true)
	}
	ws.sess.TryEnd()
	if ws.sess.Pending() {
		ws.flush = true // the writer writes the rest, then tells the loop
		return false
	}
	C.ts_asgi_written(s.c, ws.gen)
	return true
}

// tryable reports whether a take holds only messages, at most tryMax
// bytes of records, and nothing else for the writer.
func tryable(t *C.ts_asgi_take_result) bool {
	if t.error != nil || t.app_done != 0 || t.out_len > tryMax {
		return false
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(t.out)), int(t.out_len))
	for len(out) >= C.TS_WS_RECORD_HDR {
		if k := out[0]; k != C.TS_WS_TEXT && k != C.TS_WS_BINARY {
			return false
		}
		out = out[C.TS_WS_RECORD_HDR+int(binary.NativeEndian.Uint32(out[1:5])):]
	}
	return true
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

// WebSocketSessions returns the number of WebSocket sessions open in this
// worker (accepted and not yet finished), for /debug/status.
func WebSocketSessions() int {
	wsLive.mu.Lock()
	defer wsLive.mu.Unlock()
	return len(wsLive.m)
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
