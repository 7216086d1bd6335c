package websocket

// One accepted connection: the reader goroutine, the writer's calls and
// the closing handshake (RFC 6455 §7).

import (
	"compress/flate"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	gorilla "github.com/gorilla/websocket"
)

// App is the application's end of a Session: the adapter that moves
// messages to and from the app (internal/asgi). Its methods are called on
// the session's reader goroutine, Disconnect also from the ping timer.
type App interface {
	// Deliver hands the app one message (text: a text message, UTF-8
	// checked; else binary). data is only valid during the call.
	Deliver(text bool, data []byte) Delivery
	// Disconnect tells the app that the connection ended, with the close
	// code and reason it is to see (1005 and 1006 included). It may be
	// called more than once; the app acts on the first.
	Disconnect(code int, reason string)
	// ReaderDone is called once, when the reader goroutine has finished:
	// nothing more will be delivered. The adapter then calls Finish.
	ReaderDone()
}

// Delivery is what App.Deliver did with a message.
type Delivery int

const (
	// Delivered: the reader reads on.
	Delivered Delivery = iota
	// Full: Config.MaxQueue messages wait for the app; the reader stops
	// reading the socket until the adapter calls Resume.
	Full
	// Stopping: the app's side is going away; the connection fails with
	// 1012.
	Stopping
)

// Session is one accepted WebSocket: its reader goroutine, the writes the
// adapter makes on its writer goroutine, and the ping timer.
type Session struct {
	conn *gorilla.Conn
	raw  net.Conn // the hijacked connection, under gorilla's wire
	wire *wire    // what gorilla reads and writes through
	cfg  *Config
	log  *slog.Logger
	app  App // set by Start

	deflate bool // permessage-deflate was negotiated

	resume chan struct{} // Resume → reader: the app consumed, read on (cap 1)
	quit   chan struct{} // closed with our close frame: the reader stops waiting for the app

	readerDone atomic.Bool
	paused     atomic.Bool  // the reader waits for the app (MaxQueue)
	draining   atomic.Bool  // our close frame is the stop's: the reader still delivers (StopClose)
	stopCode   atomic.Int32 // the code of StopClose's close frame
	appEnded   atomic.Bool  // the app has returned: nothing more to deliver (AppReturned)
	pingSent   atomic.Int64 // unix ns of the ping awaiting its pong; 0 = none
	lastPong   atomic.Int64 // unix ns
	timer      *time.Timer

	mu        sync.Mutex
	closeSent bool // guarded by mu: our close frame is out (or being sent)

	// wl is the write lock: held around each frame written through
	// gorilla (the writer's messages, every control frame but those
	// gorilla writes itself for a frame it refuses), or across a batch
	// of try writes (TryBegin), so that a try batch never waits for
	// gorilla's own lock. A channel of one, as gorilla's lock, so that a
	// control frame waits for it at most until its deadline (lockUntil),
	// as it waited for gorilla's.
	wl     chan struct{}
	trying bool // guarded by wl: a try batch is under way (TryBegin)

	writeFailed bool // owned by the writer goroutine
}

func newSession(conn *gorilla.Conn, w *wire, deflate bool, u *Upgrader) *Session {
	s := &Session{conn: conn, raw: w.Conn, wire: w, cfg: &u.cfg, log: u.log, deflate: deflate,
		resume: make(chan struct{}, 1), quit: make(chan struct{}), wl: make(chan struct{}, 1)}
	conn.SetReadLimit(u.cfg.MaxSizeBytes)
	conn.SetPongHandler(func(string) error {
		s.lastPong.Store(time.Now().UnixNano())
		return nil
	})
	// gorilla's answers to the client's pings and close frame, under wl.
	// gorilla gives them a second (its writeWait) and then drops them
	// without an error: so here for the wait for wl.
	ping, closed := conn.PingHandler(), conn.CloseHandler()
	conn.SetPingHandler(func(data string) error {
		if !s.lockUntil(time.Now().Add(time.Second)) {
			return nil
		}
		defer s.unlock()
		return ping(data)
	})
	conn.SetCloseHandler(func(code int, text string) error {
		if !s.lockUntil(time.Now().Add(time.Second)) {
			return nil
		}
		defer s.unlock()
		return closed(code, text)
	})
	return s
}

// Start arms the ping timer and starts the reader goroutine, which
// delivers to app. Writes (Send, Close) may come before it.
func (s *Session) Start(app App) {
	s.app = app
	if s.cfg.PingInterval > 0 {
		// Armed only once s.timer is set: tick reads it.
		s.timer = time.AfterFunc(math.MaxInt64, s.tick)
		s.timer.Reset(s.cfg.PingInterval)
	}
	go s.readLoop()
}

// Done reports whether the reader goroutine has finished
// (App.ReaderDone has been or is being called).
func (s *Session) Done() bool { return s.readerDone.Load() }

// Resume tells a reader that waits on Full that the app has read on. It
// never blocks; any goroutine.
func (s *Session) Resume() {
	select {
	case s.resume <- struct{}{}:
	default:
	}
}

// AppReturned records that the app has returned: messages that arrive
// after our close frame are dropped from now on, even at a server stop.
// The adapter then closes (Close) with the code the app's end calls for.
func (s *Session) AppReturned() { s.appEnded.Store(true) }

// Finish ends the session once the reader is done: the ping timer stops
// and the connection is closed.
func (s *Session) Finish() {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.raw.Close()
}

// ---- writes (the adapter's writer goroutine) -----------------------------
//
// "Writer goroutine only" below means: by one goroutine at a time, the
// adapter's writer, or another that holds the adapter's writer lock (its
// ready-list dispatcher, for a batch of try writes).

// BeginWrites starts a batch of writes: each of them must complete within
// Config.WriteTimeout. Writer goroutine only.
func (s *Session) BeginWrites() {
	if !s.writeFailed {
		s.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	}
}

// TryBegin begins, if it can without waiting, a batch of try writes:
// Sends that never block. Each frame goes to the socket with one
// non-blocking write(2) of what the socket buffer takes now; what it does
// not take waits, in order, for FlushPending (Pending reports it), and
// the frames after it join it. No write deadline is armed for them (none
// can time out). It reports false, having begun nothing, when a write
// failed, the connection is not a plain socket (TLS, HTTP/2), another
// goroutine writes, or bytes of an earlier batch wait. TryEnd ends the
// batch. Writer goroutine only.
//
// One wait remains: a frame the client sends that gorilla refuses itself
// (wire passes it) makes gorilla write a close frame on the reader
// goroutine, outside wl, for at most a second; a try batch that begins
// in the microseconds before that write sets its deadline waits for it.
func (s *Session) TryBegin() bool {
	if s.writeFailed {
		return false
	}
	select {
	case s.wl <- struct{}{}:
	default:
		return false
	}
	if !s.wire.canTry() {
		s.unlock()
		return false
	}
	s.trying = true
	s.conn.SetWriteDeadline(tryMark)
	return true
}

// TryEnd ends the batch TryBegin began.
func (s *Session) TryEnd() {
	s.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	s.trying = false
	s.unlock()
}

// Pending reports whether try writes left bytes for FlushPending.
func (s *Session) Pending() bool { return s.wire.hasPending() }

// FlushPending writes, blocking, what try writes left, within
// Config.WriteTimeout; a failure drops the connection as Send's does.
// Writer goroutine only.
func (s *Session) FlushPending() {
	if s.writeFailed {
		return
	}
	if err := s.wire.flushPending(time.Now().Add(s.cfg.WriteTimeout)); err != nil {
		s.writeFailed = true
		s.raw.Close()
	}
}

// Dropping reports whether what the app sends is dropped: our close frame
// is out, or a write failed. Writer goroutine only.
func (s *Session) Dropping() bool {
	return s.writeFailed || s.closing()
}

// Send writes one message. When the write fails (the client is gone or
// stopped reading past the write deadline) the connection is dropped and
// the reader reports the end to the app. Writer goroutine only.
func (s *Session) Send(text bool, data []byte) {
	typ := gorilla.BinaryMessage
	if text {
		typ = gorilla.TextMessage
	}
	if !s.trying {
		s.wl <- struct{}{}
		defer s.unlock()
	}
	if err := s.conn.WriteMessage(typ, data); err != nil {
		s.writeFailed = true
		s.raw.Close()
	}
}

func (s *Session) closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeSent
}

// Close starts the closing handshake once (RFC 6455 §7.1.2): our close
// frame (code 0: no body; never 1005 or 1006, §7.4.1), then the client
// gets closeTimeout to answer before the reader gives up. Any goroutine.
func (s *Session) Close(code int, reason string) {
	s.mu.Lock()
	if s.closeSent {
		s.mu.Unlock()
		return
	}
	s.closeSent = true
	close(s.quit)
	s.mu.Unlock()
	var msg []byte
	if code != 0 && code != CloseNoStatusReceived && code != CloseAbnormalClosure {
		msg = gorilla.FormatCloseMessage(code, reason)
	}
	s.control(gorilla.CloseMessage, msg, time.Now().Add(closeTimeout))
	s.raw.SetReadDeadline(time.Now().Add(closeTimeout))
}

// StopClose is Close for a server stop: unless a close frame is out
// already (then it reports false), it sends ours with code and sets
// draining, in one step under mu, so that the reader never drops a message
// that arrives after our close frame. Any goroutine.
//
// While draining, the reader goes on delivering: every message that
// precedes the client's close frame goes to the app, with the MaxQueue
// back-pressure as always, bounded by closeTimeout (the closing
// handshake's read deadline) and, when the app stops reading,
// stopReadWait: then the app gets its disconnect after what is queued and
// the rest is dropped. The app's disconnect carries code, whatever code
// the client echoed.
func (s *Session) StopClose(code int) bool {
	s.mu.Lock()
	if s.closeSent {
		s.mu.Unlock()
		return false
	}
	s.closeSent = true
	s.stopCode.Store(int32(code))
	s.draining.Store(true)
	close(s.quit)
	s.mu.Unlock()
	s.control(gorilla.CloseMessage, gorilla.FormatCloseMessage(code, ""), time.Now().Add(closeTimeout))
	s.raw.SetReadDeadline(time.Now().Add(closeTimeout))
	return true
}

// control writes a control frame under wl, waiting for it no later than
// deadline (then errWriteLock). Any goroutine but a try batch's.
func (s *Session) control(typ int, data []byte, deadline time.Time) error {
	if !s.lockUntil(deadline) {
		return errWriteLock
	}
	defer s.unlock()
	return s.conn.WriteControl(typ, data, deadline)
}

// errWriteLock: a control frame's deadline passed while another writer
// held the session's write lock (the frame is not written).
var errWriteLock = errors.New("websocket: write timeout waiting for the write lock")

// lockUntil takes wl, waiting no later than deadline; it reports whether
// it did.
func (s *Session) lockUntil(deadline time.Time) bool {
	select {
	case s.wl <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case s.wl <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func (s *Session) unlock() { <-s.wl }

// Draining reports whether StopClose sent our close frame.
func (s *Session) Draining() bool { return s.draining.Load() }

// ---- the reader ------------------------------------------------------------

var readBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// readLoop is the reader goroutine: message by message to the app.
func (s *Session) readLoop() {
	defer func() {
		s.readerDone.Store(true)
		s.app.ReaderDone()
	}()
	gaveUp := false // at a server stop: the app stopped reading (waitApp)
	for {
		typ, r, err := s.conn.NextReader()
		if err != nil {
			s.readEnd(err)
			return
		}
		bp := readBuffers.Get().(*[]byte)
		data, err := readMessage(r, (*bp)[:0], s.cfg.MaxSizeBytes)
		if err == errTooBig {
			putBuffer(bp, data)
			s.fail(CloseMessageTooBig, "")
			return
		}
		if err != nil {
			putBuffer(bp, data)
			s.readEnd(err)
			return
		}
		// RFC 6455 §8.1: text must be UTF-8, else fail with 1007.
		if typ == gorilla.TextMessage && !utf8.Valid(data) {
			putBuffer(bp, data)
			s.fail(CloseInvalidFramePayloadData, "invalid UTF-8 in a text message")
			return
		}
		if s.closing() && (!s.draining.Load() || gaveUp || s.appEnded.Load()) {
			// After our close frame: read on to the client's, drop data
			// — except at a server stop, while the app reads.
			putBuffer(bp, data)
			continue
		}
		d := s.app.Deliver(typ == gorilla.TextMessage, data)
		putBuffer(bp, data)
		switch d {
		case Stopping:
			s.fail(CloseServiceRestart, "")
			return
		case Full:
			s.paused.Store(true)
			if !s.waitApp() && s.draining.Load() {
				// A server stop, and the app has not read for
				// stopReadWait: it gets its disconnect after what is
				// queued, and the rest is dropped.
				gaveUp = true
				s.app.Disconnect(int(s.stopCode.Load()), "")
			}
			s.paused.Store(false)
		}
	}
}

// waitApp waits, with MaxQueue messages queued, until the app has read
// half of them (true). Once our close frame is out it stops waiting
// (false) — except at a server stop (draining), where the app has
// stopReadWait to read on.
func (s *Session) waitApp() bool {
	select {
	case <-s.resume:
		return true
	case <-s.quit:
	}
	if !s.draining.Load() {
		return false
	}
	t := time.NewTimer(stopReadWait)
	defer t.Stop()
	select {
	case <-s.resume:
		return true
	case <-t.C:
		return false
	}
}

func putBuffer(bp *[]byte, data []byte) {
	if cap(data) <= keepBuffer {
		*bp = data[:0]
		readBuffers.Put(bp)
	}
}

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
// A frame the wire refused, and a compressed message that does not
// inflate, fail the connection with a close frame of their own code
// (fail).
func (s *Session) readEnd(err error) {
	var v *violation
	if errors.As(err, &v) {
		s.fail(v.code, v.reason)
		return
	}
	if s.deflate && isCorruptDeflate(err) {
		// RFC 7692 §8.1: "fail the WebSocket connection" on data that
		// does not inflate; 1007, invalid frame payload data (RFC 6455
		// §7.4.1), as the message's data is what is wrong.
		s.fail(CloseInvalidFramePayloadData, "invalid permessage-deflate data")
		return
	}
	code, reason, linger := CloseAbnormalClosure, "", false
	var ce *gorilla.CloseError
	switch {
	case errors.As(err, &ce):
		// The client's close frame (gorilla answered it), or gorilla's
		// 1006 for an EOF.
		code = ce.Code
		if code != CloseAbnormalClosure {
			reason = ce.Text
		}
	case errors.Is(err, gorilla.ErrReadLimit):
		code, linger = CloseMessageTooBig, true // gorilla sent the 1009
	case isProtocolError(err):
		code, linger = CloseProtocolError, true // gorilla sent the 1002
	}
	if s.draining.Load() && !linger {
		// A server stop: the client's close frame (whatever code it
		// echoed), or the connection ended or timed out during the
		// closing handshake. The app learns why: the stop's code.
		code, reason = int(s.stopCode.Load()), ""
	}
	if linger {
		s.mu.Lock()
		if !s.closeSent {
			s.closeSent = true
			close(s.quit)
		}
		s.mu.Unlock()
	}
	s.log.Debug("websocket: ended", "code", code, "err", err)
	s.app.Disconnect(code, reason)
	if linger {
		s.linger()
	}
	s.raw.Close()
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
// 1009), or because the app's side stops (1012): our close frame, the
// app's disconnect, then the linger, then the TCP close.
func (s *Session) fail(code int, reason string) {
	s.log.Debug("websocket: failed", "code", code, "reason", reason)
	// The close frame before the disconnect: an app that returns on the
	// disconnect would otherwise have the writer close with 1000 first.
	s.Close(code, reason)
	s.app.Disconnect(code, "")
	s.linger()
	s.raw.Close()
}

// linger half-closes and drains for a while, so that the bytes the client
// is still sending do not turn our close into a reset that destroys the
// close frame in flight (as http1's lingerClose).
func (s *Session) linger() {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := s.raw.(closeWriter); !ok || cw.CloseWrite() != nil {
		return
	}
	s.raw.SetReadDeadline(time.Now().Add(lingerTimeout))
	var buf [512]byte
	for {
		if _, err := s.raw.Read(buf[:]); err != nil {
			return
		}
	}
}
