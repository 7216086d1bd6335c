package h2

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"turnstile/internal/http1"
)

const (
	initialWindow   = 65535 // RFC 9113 §6.9.2
	maxWindow       = 1<<31 - 1
	minMaxFrameSize = 1 << 14
	maxMaxFrameSize = 1<<24 - 1
	// prefaceTimeout bounds the wait for the client preface and its
	// SETTINGS (RFC 9113 §3.4).
	prefaceTimeout = 10 * time.Second
	// lingerTimeout bounds the reads after our last frame before the
	// close, so that the client's frames in flight do not turn the close
	// into a TCP reset that destroys our GOAWAY.
	lingerTimeout = 500 * time.Millisecond
	// maxLingerBytes bounds what the linger reads.
	maxLingerBytes = 256 << 10
	readBufSize    = 16 << 10
	writeBufSize   = 16 << 10
	// maxQueuedFactor: a client keeping more than this many times
	// MaxConcurrentStreams streams waiting for a handler (it resets
	// streams whose handler still runs, CVE-2023-44487) is sent GOAWAY
	// ENHANCE_YOUR_CALM.
	maxQueuedFactor = 4
	// maxEmptyData bounds the DATA frames without payload or END_STREAM
	// a stream may receive (each costs us a wake-up and the client
	// nothing): more is a connection error ENHANCE_YOUR_CALM.
	maxEmptyData = 1000
	// blockSlack is what a field block (HEADERS and its CONTINUATION
	// frames, RFC 9113 §6.10) may read past its HEADERS payload and twice
	// SETTINGS_MAX_HEADER_LIST_SIZE: room for the frame headers (9 bytes
	// each) of an honest split. x/net's Framer refuses a fragment larger
	// than twice the list size still allowed, but an empty CONTINUATION
	// adds nothing to the list: without this bound a block of them never
	// ends (each costs the client 9 bytes and us a frame read).
	blockSlack = 64 << 10
)

// errors seen by handlers through http1 (wrapped in ErrClientGone).
var (
	errStreamReset = errors.New("h2: stream reset by the client")
	errStreamDone  = errors.New("h2: stream closed")
	errConnGone    = errors.New("h2: connection closed")
)

// errBlockTooLong: a field block read more than its budget (blockSlack).
var errBlockTooLong = errors.New("h2: field block too long (CONTINUATION flood)")

// blockReader is the Framer's reader: c.br, with a byte budget while a
// field block is read (arm, disarm); past it, reads fail with
// errBlockTooLong.
type blockReader struct {
	r    *bufio.Reader
	left int64 // bytes still allowed; < 0: no budget
}

func (b *blockReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return b.r.Read(p)
	}
	if b.left == 0 {
		return 0, errBlockTooLong
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// conn is one HTTP/2 connection. The reader goroutine (serve) owns fr's
// read side; mu guards everything else, including fr's write side, the
// HPACK encoder and bw, so a frame is written whole by one goroutine.
type conn struct {
	srv *Server
	cfg *Config
	nc  net.Conn
	h   *http1.StreamHandler
	br  *bufio.Reader
	brd blockReader // fr's reader: br with a field block's budget
	blk *fieldBlock // the field block read last (reader goroutine)
	fr  *http2.Framer

	mu   sync.Mutex
	bw   *bufio.Writer
	cw   connWriter
	henc *hpack.Encoder
	// lastHead holds the fields of the response head written last
	// (lastFieldLocked).
	lastHead [8]hpack.HeaderField
	hbuf     bytes.Buffer
	werr     error              // first write error: the connection is broken
	streams  map[uint32]*stream // open and half-closed streams
	maxID    uint32             // highest stream id the client opened
	pending  []*stream          // opened since the last read boundary
	queued   []*stream          // waiting for a handler slot
	running  int                // handler goroutines serving a stream
	sendWin  int64              // connection send window (§6.9.1)
	recvWin  int64              // connection receive window left
	recvAck  int64              // bytes consumed, not yet returned by WINDOW_UPDATE
	peerWin  int32              // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	peerMax  uint32             // the peer's SETTINGS_MAX_FRAME_SIZE
	// parked holds the handler goroutines that have no stream to serve,
	// each waiting on its channel (runStreams): a new stream goes to the
	// last one parked rather than to a new goroutine, whose stack would
	// grow again on the way down to the app (runtime.newstack was 6–12 %
	// of the worker's CPU at 1 connection × 100 streams, 4–5 % at 64
	// connections × 10 streams while goroutines past running+parkSpare
	// were ended at once). At most MaxConcurrentStreams goroutines exist
	// per connection (running + parked); those parked past running +
	// parkSpare are ended parkLinger after the first of them parked
	// (trimParked), so a client's steady concurrency keeps its goroutines
	// and a burst's goroutines do not outlive it; teardown ends the parked
	// ones.
	parked []chan *stream
	trim   *time.Timer // trimParked, armed while parked > running+parkSpare
	// flushOwed: a goroutine has bytes in bw to send and has yielded
	// (flushSoon); it flushes when it runs again, so another writer need
	// not.
	flushOwed bool
	// reset holds the streams we reset last (a ring): frames the client
	// sent on them before it saw our RST_STREAM are ignored (§5.1: "An
	// endpoint MUST ignore frames that it receives on closed streams
	// after it has sent a RST_STREAM frame").
	reset      [64]uint32
	nreset     int
	goAwaySent bool
	closing    bool // no stream left after GOAWAY, or a connection error: the reader ends
	gone       bool // torn down: every stream's Done is closed

	wg         sync.WaitGroup // handler goroutines
	idleTimer  *time.Timer
	kaTimer    *time.Timer
	framesRead atomic.Uint64 // for the keep-alive
	pingSent   atomic.Bool
}

func newConn(s *Server, nc net.Conn, h *http1.StreamHandler) *conn {
	c := &conn{srv: s, cfg: &s.cfg, nc: nc, h: h, streams: make(map[uint32]*stream)}
	c.cw = connWriter{nc: nc, timeout: s.cfg.WriteTimeout}
	c.br = bufio.NewReaderSize(nc, readBufSize)
	c.bw = bufio.NewWriterSize(&c.cw, writeBufSize)
	c.brd = blockReader{r: c.br, left: -1}
	c.fr = http2.NewFramer(c.bw, &c.brd)
	c.fr.SetMaxReadFrameSize(s.cfg.MaxFrameSize)
	c.fr.MaxHeaderListSize = uint32(min(s.cfg.MaxHeadersSize, maxWindow))
	c.blk = newFieldBlock(c.fr.MaxHeaderListSize)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.sendWin = initialWindow
	c.recvWin = int64(s.cfg.InitialConnectionWindowSize)
	c.peerWin = initialWindow
	c.peerMax = minMaxFrameSize
	return c
}

// connWriter arms the write deadline (Config.WriteTimeout) before a
// socket write when the last one is more than half used.
type connWriter struct {
	nc      net.Conn
	timeout time.Duration
	armed   time.Time
}

func (w *connWriter) Write(p []byte) (int, error) {
	if w.timeout > 0 {
		if now := time.Now(); now.Sub(w.armed) > w.timeout/2 {
			w.armed = now
			w.nc.SetWriteDeadline(now.Add(w.timeout))
		}
	}
	return w.nc.Write(p)
}

// serve runs the connection: see the package doc.
func (c *conn) serve() {
	defer c.teardown()
	c.mu.Lock()
	settings := []http2.Setting{
		{ID: http2.SettingMaxConcurrentStreams, Val: c.cfg.MaxConcurrentStreams},
		{ID: http2.SettingInitialWindowSize, Val: uint32(c.cfg.InitialStreamWindowSize)},
		{ID: http2.SettingMaxFrameSize, Val: c.cfg.MaxFrameSize},
		{ID: http2.SettingMaxHeaderListSize, Val: c.fr.MaxHeaderListSize},
	}
	if c.cfg.ExtendedConnect {
		settings = append(settings, http2.Setting{ID: http2.SettingEnableConnectProtocol, Val: 1}) // RFC 8441 §3
	}
	c.fr.WriteSettings(settings...)
	if inc := c.cfg.InitialConnectionWindowSize - initialWindow; inc > 0 {
		c.fr.WriteWindowUpdate(0, uint32(inc))
	}
	c.flushLocked()
	c.mu.Unlock()
	if tc, ok := c.nc.(*tls.Conn); ok {
		// §9.2.2: "An endpoint MAY choose to generate a connection error
		// (Section 5.4.1) of type INADEQUATE_SECURITY if one of the
		// prohibited cipher suites is negotiated." (TLS 1.2 only.)
		if cs := tc.ConnectionState(); cs.Version < tls.VersionTLS13 && !suiteAllowed(cs.CipherSuite) {
			c.connError(http2.ErrCodeInadequateSecurity, "prohibited TLS 1.2 cipher suite "+tls.CipherSuiteName(cs.CipherSuite))
			return
		}
	}

	c.nc.SetReadDeadline(time.Now().Add(prefaceTimeout))
	var pre [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, pre[:]); err != nil {
		return
	}
	if string(pre[:]) != http2.ClientPreface {
		c.connError(http2.ErrCodeProtocol, "invalid client preface")
		return
	}
	// §3.4: "The SETTINGS frame MUST be the first frame the client sends".
	f, err := c.fr.ReadFrame()
	if err != nil {
		c.readError(err, http2.FrameHeader{Type: http2.FrameSettings})
		return
	}
	if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
		c.connError(http2.ErrCodeProtocol, "first frame is not SETTINGS")
		return
	}
	c.nc.SetReadDeadline(time.Time{}) // a whole frame read: nothing is cut
	if err := c.process(f); err != nil {
		c.readError(err, http2.FrameHeader{Type: http2.FrameSettings})
		return
	}
	c.startTimers()

	for {
		if c.br.Buffered() == 0 && !c.boundary() {
			return
		}
		fh, err := c.fr.ReadFrameHeader()
		var f http2.Frame
		if err == nil {
			if fh.Type == http2.FrameHeaders {
				c.brd.left = int64(fh.Length) + 2*int64(c.fr.MaxHeaderListSize) + blockSlack
			}
			f, err = c.fr.ReadFrameForHeader(fh)
			if hf, ok := f.(*http2.HeadersFrame); ok && err == nil {
				err = c.blk.readBlock(c.fr, hf)
				if se, ok := err.(http2.StreamError); ok {
					err = c.malformedBlockError(se)
				}
			}
			c.brd.left = -1
		}
		if err == nil {
			c.framesRead.Add(1)
			err = c.process(f)
		}
		if err != nil && !c.readError(err, fh) {
			return
		}
	}
}

// malformedBlockError is the error of a malformed field block (se, from
// readBlock) on stream se.StreamID: se, unless the HEADERS frame was a
// connection error before its fields count, as onHeaders finds it: on an
// even stream identifier PROTOCOL_ERROR (§5.1.1: "Streams initiated by a
// client MUST use odd-numbered stream identifiers"; an RST_STREAM there
// would be on an idle stream, which §6.4 forbids), on a closed stream
// STREAM_CLOSED (§5.1).
func (c *conn) malformedBlockError(se http2.StreamError) error {
	id := se.StreamID
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streams[id] == nil && id <= c.maxID && !c.wasResetLocked(id) {
		return http2.ConnectionError(http2.ErrCodeStreamClosed)
	}
	return se
}

// boundary is called when the reader has consumed every byte read: it
// starts the streams opened meanwhile and flushes. It reports false when
// the connection is to end.
func (c *conn) boundary() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.pending {
		if st.rst {
			continue // reset before its handler started: never started
		}
		if c.running < int(c.cfg.MaxConcurrentStreams) {
			c.startLocked(st)
		} else {
			c.queued = append(c.queued, st)
		}
	}
	clear(c.pending)
	c.pending = c.pending[:0]
	if len(c.queued) > maxQueuedFactor*int(c.cfg.MaxConcurrentStreams) {
		c.srv.log.Debug("http2: too many streams waiting for a handler", "remote", c.nc.RemoteAddr())
		c.connErrorLocked(http2.ErrCodeEnhanceYourCalm, "too many streams")
		return false
	}
	c.flushLocked()
	if c.closing || c.werr != nil {
		return false
	}
	return true
}

// startLocked runs st's handler on the handler goroutine parked last, or
// on a new one.
func (c *conn) startLocked(st *stream) {
	c.running++
	if n := len(c.parked); n > 0 {
		ch := c.parked[n-1]
		c.parked[n-1] = nil
		c.parked = c.parked[:n-1]
		ch <- st // 1-buffered and empty while parked: never blocks
		return
	}
	c.wg.Add(1)
	go c.runStreams(st)
}

// runStreams is a handler goroutine: it serves st, then the queued
// streams while there are any, then parks until startLocked hands it
// another stream or teardown ends it (nil).
func (c *conn) runStreams(st *stream) {
	defer c.wg.Done()
	ch := make(chan *stream, 1)
	for st != nil {
		c.mu.Lock()
		skip := st.rst
		c.mu.Unlock()
		if !skip {
			c.finish(st, c.h.ServeStream(st, &st.head))
		}
		if st = c.next(ch); st == nil {
			st = <-ch
		}
	}
}

// next takes the next queued stream not reset meanwhile, or gives up the
// handler slot and parks ch (returning nil: the caller then waits on ch),
// or closes ch when the connection is going.
func (c *conn) next(ch chan *stream) *stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queued) > 0 {
		st := c.queued[0]
		c.queued[0] = nil
		c.queued = c.queued[1:]
		if !st.rst {
			return st
		}
	}
	c.running--
	if c.gone {
		close(ch)
	} else {
		c.parked = append(c.parked, ch)
		if len(c.parked) > c.running+parkSpare && c.trim == nil {
			c.trim = time.AfterFunc(parkLinger, c.trimParked)
		}
	}
	c.maybeCloseLocked()
	return nil
}

// parkSpare bounds the parked handler goroutines a connection keeps past
// parkLinger to the streams it is serving plus parkSpare: a burst of 100
// streams followed by one long-lived stream (a WebSocket over HTTP/2, an
// event stream) keeps 1 + parkSpare goroutines, not 100, for the life of
// the connection.
const parkSpare = 4

// parkLinger is how long goroutines parked past running+parkSpare wait
// for a stream before trimParked ends them: longer than the gaps of a
// client that keeps a steady number of streams open (h2load -m 10, a
// browser loading a page), shorter than an idle connection's life.
const parkLinger = time.Second

// trimParked ends the parked goroutines past running+parkSpare, oldest
// first (the timer of next).
func (c *conn) trimParked() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trim = nil
	for len(c.parked) > c.running+parkSpare {
		close(c.parked[0])
		c.parked[0] = nil
		c.parked = c.parked[1:]
	}
}

// finish ends st after its handler returned: RST_STREAM INTERNAL_ERROR
// when reset, else END_STREAM if not sent yet; a request still open then
// is reset with NO_ERROR (§8.1: the response is complete).
func (c *conn) finish(st *stream, reset bool) {
	defer c.flushSoon()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(st)
	if st.closed {
		return
	}
	switch {
	case reset:
		c.resetLocked(st, http2.ErrCodeInternal)
	case !st.endSent:
		st.endSent = true
		c.fr.WriteData(st.id, true, nil)
		fallthrough
	default:
		if st.remoteClosed {
			c.closeLocked(st)
		} else {
			c.resetLocked(st, http2.ErrCodeNo)
		}
	}
}

// readError handles an error of reading or processing the frame whose
// header is fh: it reports true when the connection goes on (a stream
// error, §5.4.2).
func (c *conn) readError(err error, fh http2.FrameHeader) bool {
	if fh.Type == http2.FrameHeaders && fh.StreamID%2 == 1 {
		// A request whose HEADERS failed still opened its stream (§5.1.1),
		// also when the failure is the connection's (a field over
		// --http2-max-headers-size: COMPRESSION_ERROR from the Framer, a
		// CONTINUATION flood): the GOAWAY names it as acted on (§6.8),
		// not as unprocessed and safe to retry (§8.7).
		c.mu.Lock()
		c.maxID = max(c.maxID, fh.StreamID)
		c.mu.Unlock()
	}
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		c.mu.Lock()
		if st := c.streams[se.StreamID]; st != nil {
			c.resetLocked(st, se.Code)
		} else {
			c.fr.WriteRSTStream(se.StreamID, se.Code)
			c.noteResetLocked(se.StreamID)
		}
		c.mu.Unlock()
		return true
	case errors.As(err, &ce):
		c.connError(http2.ErrCode(ce), "")
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.connError(http2.ErrCodeFrameSize, "")
	case errors.Is(err, errBlockTooLong):
		c.srv.log.Debug("http2: field block too long: closing", "remote", c.nc.RemoteAddr())
		c.connError(http2.ErrCodeEnhanceYourCalm, "")
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	default:
		c.srv.log.Debug("http2: read failed", "remote", c.nc.RemoteAddr(), "err", err)
	}
	return false
}

// suiteAllowed reports whether HTTP/2 may run over TLS 1.2 suite id:
// RFC 9113 §9.2.2 and RFC 7540 Appendix A prohibit every suite without an
// ephemeral key exchange or with a non-AEAD cipher; of the suites Go
// implements, that leaves ECDHE with AES-GCM or ChaCha20-Poly1305 (the
// rule internal/tlsconf checks --ssl-ciphers against).
func suiteAllowed(id uint16) bool {
	n := tls.CipherSuiteName(id)
	return strings.HasPrefix(n, "TLS_ECDHE_") && (strings.Contains(n, "_GCM_") || strings.Contains(n, "_CHACHA20_POLY1305"))
}

// connError sends GOAWAY with code (§5.4.1) and ends the connection.
func (c *conn) connError(code http2.ErrCode, why string) {
	c.mu.Lock()
	c.connErrorLocked(code, why)
	c.mu.Unlock()
}

func (c *conn) connErrorLocked(code http2.ErrCode, why string) {
	if why != "" {
		c.srv.log.Debug("http2: connection error", "remote", c.nc.RemoteAddr(), "code", code, "reason", why)
	}
	c.goAwaySent = true
	c.closing = true
	c.fr.WriteGoAway(c.maxID, code, nil)
	c.flushLocked()
}

// goAway starts a graceful shutdown (Server.Shutdown): GOAWAY NO_ERROR
// with the last stream id seen; streams up to it are served (§6.8).
func (c *conn) goAway() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goAwaySent || c.gone {
		return
	}
	c.goAwaySent = true
	c.fr.WriteGoAway(c.maxID, http2.ErrCodeNo, nil)
	c.flushLocked()
	c.maybeCloseLocked()
}

// maybeCloseLocked ends the connection after GOAWAY once no stream and no
// handler is left: the reader, woken by an expired read deadline, lingers
// and closes.
func (c *conn) maybeCloseLocked() {
	if c.goAwaySent && !c.closing && len(c.streams) == 0 && c.running == 0 && len(c.pending) == 0 {
		c.closing = true
		c.nc.SetReadDeadline(time.Now())
	}
	if len(c.streams) == 0 && c.idleTimer != nil && !c.closing {
		c.idleTimer.Reset(c.cfg.IdleTimeout)
	}
}

// flushSoon sends what bw holds once the goroutines ready to run have
// run: they are, under load, other handlers of the connection finishing
// their responses (woken together by their loop's dispatcher), and one
// write(2) (on TLS one record) then carries them all, where a flush per
// stream end cost 13–15 % of the worker's CPU. The first writer with bytes
// to send owes the flush: it yields (runtime.Gosched: to the global run
// queue, which a P takes from when its own queue is empty and at least
// every 61st turn; no timer) and flushes when it runs again; writers
// meanwhile see the flush owed and leave their frames to it. An idle connection's
// lone response waits for no one: with nothing else ready to run the
// yield returns at once. It returns the connection's write error, if any.
// Called without c.mu.
func (c *conn) flushSoon() error {
	c.mu.Lock()
	if c.flushOwed || c.werr != nil || c.bw.Buffered() == 0 {
		err := c.werr
		c.mu.Unlock()
		return err
	}
	c.flushOwed = true
	c.mu.Unlock()
	runtime.Gosched()
	c.mu.Lock()
	c.flushOwed = false
	c.flushLocked()
	err := c.werr
	c.mu.Unlock()
	return err
}

// flushLocked writes bw to the socket; a failure breaks the connection.
func (c *conn) flushLocked() {
	if c.werr != nil || c.bw.Buffered() == 0 {
		return
	}
	if err := c.bw.Flush(); err != nil {
		c.werr = err
		c.nc.Close() // the reader ends
	}
}

// teardown ends the connection: every stream's Done closes, the handlers
// are waited for, then the socket lingers and closes.
func (c *conn) teardown() {
	c.mu.Lock()
	c.gone = true
	c.closing = true
	for _, st := range c.streams {
		st.fail(errConnGone)
	}
	for _, st := range c.pending {
		st.fail(errConnGone)
	}
	for _, st := range c.queued {
		st.fail(errConnGone)
	}
	c.pending, c.queued = nil, nil
	for _, ch := range c.parked {
		close(ch)
	}
	c.parked = nil
	if c.trim != nil {
		c.trim.Stop()
		c.trim = nil
	}
	c.flushLocked()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	if c.kaTimer != nil {
		c.kaTimer.Stop()
	}
	werr := c.werr
	c.mu.Unlock()
	// The connection closes before the handlers are waited for: after a
	// connection error's GOAWAY "the endpoint MUST close the TCP
	// connection" (§5.4.1), and a handler still running (an app that does
	// not return at once) kept it open, frames after the GOAWAY included.
	// Every stream has failed: what a handler writes now goes nowhere.
	if werr == nil {
		// Linger: read (and drop) what the client still sends, briefly.
		if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		c.nc.SetReadDeadline(time.Now().Add(lingerTimeout))
		io.CopyN(io.Discard, c.br, maxLingerBytes)
	}
	c.nc.Close()
	c.wg.Wait()
}

// startTimers arms the idle timeout and the keep-alive PING.
func (c *conn) startTimers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.cfg.IdleTimeout; d > 0 {
		c.idleTimer = time.AfterFunc(d, c.idle)
	}
	if d := c.cfg.KeepAliveInterval; d > 0 {
		seen := c.framesRead.Load()
		tick := func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.gone {
				return
			}
			if now := c.framesRead.Load(); now != seen {
				seen = now
				c.pingSent.Store(false)
				c.kaTimer.Reset(d)
				return
			}
			if c.pingSent.Load() {
				c.srv.log.Debug("http2: PING unanswered: closing", "remote", c.nc.RemoteAddr())
				c.nc.Close()
				return
			}
			c.pingSent.Store(true)
			c.fr.WritePing(false, [8]byte{'t', 'u', 'r', 'n', 's', 't', 'i', 'l'})
			c.flushLocked()
			c.kaTimer.Reset(c.cfg.KeepAliveTimeout)
		}
		c.kaTimer = time.AfterFunc(d, tick)
	}
}

// idle closes a connection with no stream for IdleTimeout (GOAWAY).
func (c *conn) idle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.streams) > 0 || c.running > 0 || c.closing {
		return
	}
	if !c.goAwaySent {
		c.goAwaySent = true
		c.fr.WriteGoAway(c.maxID, http2.ErrCodeNo, nil)
		c.flushLocked()
	}
	c.closing = true
	c.nc.SetReadDeadline(time.Now())
}

// process handles one frame from the reader. A returned error is a
// stream or connection error (readError).
func (c *conn) process(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		return c.onHeaders(c.blk) // read by readBlock
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		if f.IsAck() {
			c.pingSent.Store(false)
			return nil
		}
		c.mu.Lock()
		c.fr.WritePing(true, f.Data)
		c.mu.Unlock()
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.onReset(f)
	case *http2.PriorityFrame:
		// §5.3.2: priority signals are ignored; §5.3.1: "A stream cannot
		// depend on itself. An endpoint MUST treat this as a stream error
		// (Section 5.4.2) of type PROTOCOL_ERROR."
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
	case *http2.PushPromiseFrame:
		// §8.4: "A client cannot push."
		return http2.ConnectionError(http2.ErrCodeProtocol)
	case *http2.GoAwayFrame:
		// The client opens no more streams; ours finish.
	}
	// Unknown frame types are ignored (§5.5).
	return nil
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	if err := f.ForeachSetting(func(s http2.Setting) error { return s.Valid() }); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingInitialWindowSize:
			// §6.9.2: the change applies to every stream's send window.
			delta := int64(s.Val) - int64(c.peerWin)
			c.peerWin = int32(s.Val)
			for _, st := range c.streams {
				st.sendWin += delta
				if st.sendWin > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
				st.wake(st.winCh)
			}
		case http2.SettingMaxFrameSize:
			c.peerMax = s.Val
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.fr.WriteSettingsAck()
	return nil
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if c.sendWin += inc; c.sendWin > maxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		for _, st := range c.streams {
			st.wake(st.winCh)
		}
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.maxID {
			return http2.ConnectionError(http2.ErrCodeProtocol) // idle, §5.1
		}
		return nil // closed: allowed for a short while (§5.1), ignored
	}
	if st.sendWin += inc; st.sendWin > maxWindow {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeFlowControl}
	}
	st.wake(st.winCh)
	return nil
}

func (c *conn) onReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.maxID {
			return http2.ConnectionError(http2.ErrCodeProtocol) // idle, §6.4
		}
		return nil
	}
	st.fail(errStreamReset)
	c.dropLocked(st)
	c.closeLocked(st)
	return nil
}

func (c *conn) onHeaders(f *fieldBlock) error {
	id := f.StreamID
	if id%2 == 0 {
		// §5.1.1: "Streams initiated by a client MUST use odd-numbered
		// stream identifiers".
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.streams[id]; st != nil {
		return c.onTrailer(st, f)
	}
	if id <= c.maxID && c.wasResetLocked(id) {
		return nil // sent before the client saw our RST_STREAM (§5.1)
	}
	if id <= c.maxID {
		// A closed stream (§5.1: "An endpoint that receives any frames
		// after receiving a frame with the END_STREAM flag set MUST treat
		// that as a connection error of type STREAM_CLOSED"); a reset
		// one a stream error; an identifier below one already used is
		// refused as such too.
		return http2.ConnectionError(http2.ErrCodeStreamClosed)
	}
	c.maxID = id
	if c.goAwaySent {
		return nil // §6.8: new streams after GOAWAY are ignored
	}
	if f.HasPriority() && f.Priority.StreamDep == id {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol} // §5.3.1
	}
	if uint32(len(c.streams)) >= c.cfg.MaxConcurrentStreams {
		// §5.1.2: "An endpoint that receives a HEADERS frame that causes
		// its advertised concurrent stream limit to be exceeded MUST treat
		// this as a stream error of type PROTOCOL_ERROR or REFUSED_STREAM."
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	st := newStream(c, id)
	if !buildHead(f, &st.head, c.cfg.ExtendedConnect) {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	st.clWant = st.head.ContentLength
	if f.StreamEnded() {
		st.remoteClosed, st.eof = true, true
	}
	c.streams[id] = st
	c.pending = append(c.pending, st)
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	return nil
}

// onTrailer handles a second HEADERS on an open stream: the trailer
// section, which must end the stream (§8.1).
func (c *conn) onTrailer(st *stream, f *fieldBlock) error {
	if st.remoteClosed {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeStreamClosed} // §5.1
	}
	if !f.StreamEnded() {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	fs, ok := checkTrailer(f)
	if !ok || (st.clWant >= 0 && st.clGot != st.clWant) {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	st.trailer = fs
	c.remoteEndLocked(st)
	return nil
}

func (c *conn) onData(f *http2.DataFrame) error {
	id, n := f.StreamID, int64(f.Length)
	c.mu.Lock()
	defer c.mu.Unlock()
	// §6.9.1: the whole payload, padding included, counts.
	if n > c.recvWin {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvWin -= n
	st := c.streams[id]
	if st == nil || st.remoteClosed {
		c.creditLocked(nil, n)
		if st == nil && id > c.maxID {
			return http2.ConnectionError(http2.ErrCodeProtocol) // idle, §5.1
		}
		if st == nil && c.wasResetLocked(id) {
			return nil // sent before the client saw our RST_STREAM (§5.1)
		}
		// §6.1: "If a DATA frame is received whose stream is not in the
		// "open" or "half-closed (local)" state, the recipient MUST
		// respond with a stream error (Section 5.4.2) of type
		// STREAM_CLOSED."
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	if n > st.recvWin {
		c.creditLocked(nil, n)
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
	}
	data := f.Data()
	st.recvWin -= n
	if pad := n - int64(len(data)); pad > 0 {
		c.creditLocked(st, pad)
	}
	if len(data) == 0 && !f.StreamEnded() {
		if st.emptyData++; st.emptyData > maxEmptyData {
			return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
	}
	st.clGot += int64(len(data))
	if st.clWant >= 0 && (st.clGot > st.clWant || f.StreamEnded() && st.clGot != st.clWant) {
		// §8.1.1: a content-length not equal to the DATA received is
		// malformed.
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	st.data = append(st.data, data...)
	if f.StreamEnded() {
		c.remoteEndLocked(st)
	}
	st.wake(st.dataCh)
	return nil
}

// remoteEndLocked: END_STREAM from the client (half-closed remote).
func (c *conn) remoteEndLocked(st *stream) {
	st.remoteClosed, st.eof = true, true
	st.wake(st.dataCh)
	if st.endSent {
		c.closeLocked(st)
	}
}

// noteResetLocked remembers that we reset stream id (c.reset).
func (c *conn) noteResetLocked(id uint32) {
	c.reset[c.nreset%len(c.reset)] = id
	c.nreset++
}

// wasResetLocked reports whether we reset stream id lately.
func (c *conn) wasResetLocked(id uint32) bool {
	for _, r := range c.reset[:min(c.nreset, len(c.reset))] {
		if r == id {
			return true
		}
	}
	return false
}

// resetLocked sends RST_STREAM code and closes st.
func (c *conn) resetLocked(st *stream, code http2.ErrCode) {
	c.fr.WriteRSTStream(st.id, code)
	c.noteResetLocked(st.id)
	st.fail(errStreamDone)
	c.dropLocked(st)
	c.closeLocked(st)
}

// closeLocked forgets a closed stream (§5.1 "closed"). Its unread DATA
// stays for its handler (dropped when the handler returns).
func (c *conn) closeLocked(st *stream) {
	if st.closed {
		return
	}
	st.closed = true
	delete(c.streams, st.id)
	c.maybeCloseLocked()
}
