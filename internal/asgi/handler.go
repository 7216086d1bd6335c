package asgi

/*
#include <stdlib.h>
#include "asgi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"turnstile/internal/http1"
	"turnstile/internal/inflight"
	"turnstile/internal/reqblock"
	"turnstile/internal/websocket"
)

// MaxPrefetchBytes bounds the body bytes sent with the scope when the
// whole body has already arrived; larger bodies stream as http.request
// events, one chunk of at most BodyChunkBytes per receive().
const (
	MaxPrefetchBytes = 64 << 10
	BodyChunkBytes   = 64 << 10
)

// Handler serves an ASGI app's HTTP requests and WebSockets on its event
// loops: an http1.Handler. Start the loops (Loop.Start) before serving.
//
// With several loops (--loops), each new connection is assigned to one
// (pick) and stays on it: every request of an HTTP/1.1 connection, every
// stream of an HTTP/2 or HTTP/3 connection (http1.Request.Conn), and a
// WebSocket for its session. With one loop nothing is chosen or counted.
type Handler struct {
	// EventLoops are the event loops the requests run on, EventLoops[i]
	// being loop number i. Required: at least one.
	EventLoops []*Loop
	// LoopStalled, when set, reports whether loop i is stalled now (the
	// watchdog's Watchdog.LoopStalled): pick gives such a loop no new
	// connection while another one turns.
	LoopStalled func(i int) bool
	// RootPath is the ASGI root_path (the mount prefix). Default "".
	RootPath string
	Logger   *slog.Logger
	// Done, when set, is called after each request. For a WebSocket it is
	// called when the handshake has been answered (Status 101 once
	// accepted).
	Done func(r *http1.Request, res inflight.Result)
	// KeepHeader: copy the app's response header lines into the Result
	// (inflight.Result.Header) for Done; off, nothing is copied.
	KeepHeader bool
	// WebSocket configures WebSocket connections (websocket.go,
	// internal/websocket).
	WebSocket websocket.Config

	wsOnce  sync.Once
	wsState *websocket.Upgrader // settings and Upgrader shared by the WebSockets
	next    atomic.Uint32       // pick's starting loop, turned per choice: ties spread
}

// loopFor returns the loop r's connection is assigned to, assigning it
// now if it has none (a new connection; a request without Conn is
// assigned on its own). With one loop it is that loop.
func (h *Handler) loopFor(r *http1.Request) *Loop {
	if len(h.EventLoops) == 1 {
		return h.EventLoops[0]
	}
	cd := r.Conn
	if cd != nil {
		if a := cd.Affinity.Load(); a > 0 {
			return h.EventLoops[a-1]
		}
	}
	i := h.pick()
	if cd != nil && !cd.Affinity.CompareAndSwap(0, int32(i+1)) {
		i = int(cd.Affinity.Load()) - 1 // another stream of the connection chose first
	}
	return h.EventLoops[i]
}

// pick chooses the loop for a new connection: the one with the fewest
// requests and WebSocket sessions in flight (Loop.load) among those not
// stalled now; every loop when all are stalled. Ties go to the first
// from a starting point that turns with each choice, so that idle loops
// take new connections in turn. Only with several loops.
func (h *Handler) pick() int {
	n := len(h.EventLoops)
	start := int(h.next.Add(1) % uint32(n))
	best, bestLoad := -1, int32(0)
	for pass := 0; pass < 2 && best < 0; pass++ {
		for k := 0; k < n; k++ {
			i := (start + k) % n
			if pass == 0 && h.LoopStalled != nil && h.LoopStalled(i) {
				continue
			}
			if ld := h.EventLoops[i].load.Load(); best < 0 || ld < bestLoad {
				best, bestLoad = i, ld
			}
		}
	}
	return best
}

// counted returns l when the handler counts load (several loops), after
// counting one more request or session on it; nil otherwise. Undo with
// uncount.
func (h *Handler) counted(l *Loop) *Loop {
	if len(h.EventLoops) == 1 {
		return nil
	}
	l.load.Add(1)
	return l
}

// uncount undoes counted (nil: nothing was counted).
func uncount(l *Loop) {
	if l != nil {
		l.load.Add(-1)
	}
}

// slot is the Go half of a C ts_asgi_slot: its wake-up channel and scratch space.
type slot struct {
	c     *C.ts_asgi_slot
	ready chan struct{} // the loop has something for Go (ready.go)
	// take receives ts_asgi_take's result; in C memory, so that the hot
	// cgo call passes no Go pointer for cgocheck to inspect.
	take *C.ts_asgi_take_result
	rec  inflight.Record // the request being served, for Requests (watch.go)
	// conn is the WebSocket the slot serves, for its whole session (rec
	// ends at the accept): for ByTag (pools.go). An HTTP request has rec
	// only (one record per request: it costs a lock and two copies).
	conn  inflight.Record
	block []byte
	path  []byte
	lower []byte
	// header is the app's response header lines when the Handler keeps
	// them (KeepHeader): a fresh copy per response, handed to its Result.
	header []byte
	buf    []byte // request body chunks
	// bodyEOF: the loop has the whole request body; a want_body then asks
	// to watch for the client leaving.
	bodyEOF bool
	// counted is the loop a WebSocket session is counted on (Handler.counted)
	// until it finishes; nil with one loop.
	counted *Loop
	// ws is the accepted WebSocket the slot serves, while its writer
	// runs: the ready list's dispatcher may write for it (tryTurn).
	ws atomic.Pointer[wsSession]
}

// slots is the registry of request slots, shared by every loop: a slot
// serves one request at a time, on the loop its ts_asgi_begin names
// (s.c.loop).
var slots struct {
	mu  sync.Mutex
	all []*slot // by the C slot's index
}

func getSlot() (*slot, error) {
	if cs := C.ts_asgi_slot_new(-1); cs != nil {
		slots.mu.Lock()
		s := slots.all[cs.index]
		slots.mu.Unlock()
		return s, nil
	}
	slots.mu.Lock()
	defer slots.mu.Unlock()
	idx := len(slots.all)
	cs := C.ts_asgi_slot_new(C.int(idx))
	if cs == nil {
		return nil, errors.New("asgi: cannot allocate a request slot")
	}
	take := (*C.ts_asgi_take_result)(C.calloc(1, C.sizeof_ts_asgi_take_result))
	if take == nil {
		return nil, errors.New("asgi: cannot allocate a request slot")
	}
	s := &slot{c: cs, ready: make(chan struct{}, 1), take: take}
	slots.all = append(slots.all, s)
	return s, nil
}

func (h *Handler) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

var unavailable = []byte("Service Unavailable\n")

// ServeHTTP1 runs one HTTP request through the loop (queue.c, "Notes
// about the implementation").
func (h *Handler) ServeHTTP1(w *http1.ResponseWriter, r *http1.Request) {
	if websocket.IsUpgrade(r) {
		h.serveWebSocket(w, r) // websocket.go
		return
	}
	start := time.Now()
	status := 0
	var header []byte // KeepHeader: the app's header lines, a copy
	li := 0           // the loop's index, once chosen
	defer func() {
		if h.Done != nil {
			h.Done(r, inflight.Result{Status: status, Duration: time.Since(start), Bytes: w.Written(), Header: header, Loop: li})
		}
	}()
	s, err := getSlot()
	if err != nil {
		h.logger().Error(err.Error())
		status = 503
		w.WriteSimple(503, "text/plain; charset=utf-8", unavailable, []byte("Retry-After: 1\r\n"))
		return
	}
	loop := h.loopFor(r)
	li = loop.index
	defer uncount(h.counted(loop))
	gen := C.ts_asgi_begin(loop.c, s.c)
	defer C.ts_asgi_release(s.c)
	s.rec.Begin(start, r.Method, r.Path)
	defer s.rec.End()

	// 1. The scope block, and the body if it is all here and small.
	block, n := s.buildScope(r, h.RootPath)
	bodyOff := len(block)
	bodyDone := r.Body.Done()
	var pre []byte
	if bodyDone {
		if pre = r.Body.Buffered(); len(pre) <= MaxPrefetchBytes {
			block = append(block, pre...)
		} else {
			pre, bodyDone = nil, false
		}
	}
	s.block = block
	if C.ts_asgi_reserve(s.c, C.size_t(len(block))) != 0 {
		status = 503
		w.WriteSimple(503, "text/plain; charset=utf-8", unavailable, []byte("Retry-After: 1\r\n"))
		return
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(s.c.req)), len(block)), block) // into C memory: no cgo call
	if pre != nil {
		r.Body.Consume(len(pre))
	}

	// 2. Hand it to the loop, with the block's shape (one cgo call that
	//    sets the slot's fields, then pushes); from here the client
	//    leaving is an event.
	if C.ts_asgi_push_new(loop.c, C.TS_EV_NEW, s.c, gen, C.size_t(len(block)), C.int(n), C.size_t(bodyOff),
		C.size_t(len(pre)), boolInt(bodyDone), 0) != 0 {
		status = 503
		w.WriteSimple(503, "text/plain; charset=utf-8", unavailable, []byte("Retry-After: 1\r\n"))
		return
	}
	// A late call, after the slot moved on, goes to the slot's loop then,
	// which drops it by its gen.
	disconnect := func() { C.ts_asgi_push(s.c.loop, C.TS_EV_DISCONNECT, s.c, gen, nil, 0, 0) }
	// The client leaving is watched for only once the app waits for it
	// (a receive() after the whole body, which asks through want_body):
	// watching every request costs a goroutine and a wake-up each, and an
	// app learns of a disconnect only from receive() or a failed send().
	s.bodyEOF = bodyDone

	// 3. Serve the loop's output until the response is complete.
	status = s.serve(h, w, r, gen, disconnect)
	header, s.header = s.header, nil
}

// keepHeader keeps a copy of the app's header lines for the Result when
// h asks for them (KeepHeader).
func (s *slot) keepHeader(h *Handler, lines []byte) {
	if h.KeepHeader {
		s.header = append([]byte(nil), lines...)
	}
}

// serve writes what the loop produces and feeds it body chunks; it returns
// the status sent.
func (s *slot) serve(h *Handler, w *http1.ResponseWriter, r *http1.Request, gen C.uint32_t, disconnect func()) int {
	headSent := false
	status := 0
	for {
		flush := false
		<-s.ready
		t := s.take
		C.ts_asgi_take(s.c, t)
		if t.hints != nil {
			// http.response.early_hint: a 103 before the head (RFC 8297);
			// http1 drops it for HTTP/1.0 and once the head is out.
			if !headSent {
				w.WriteEarlyHints(unsafe.Slice((*byte)(unsafe.Pointer(t.hints)), int(t.hints_len)))
			}
			C.free(unsafe.Pointer(t.hints))
			t.hints = nil
		}
		var trailers []byte
		if t.trailers != nil {
			// http.response.trailers, complete: copied, written after the
			// body below
			trailers = C.GoBytes(unsafe.Pointer(t.trailers), C.int(t.trailers_len))
			C.free(unsafe.Pointer(t.trailers))
			t.trailers = nil
		}
		headReady := t.head_ready != 0
		if headReady && !headSent && t.app_done != 0 && t.finished == 0 && t.out_len == 0 && t.pathsend == nil {
			// The app failed (or returned) after http.response.start but
			// before any body: its head has not left, so the client gets
			// the 500 below rather than the app's head on a cut
			// connection.
			headReady = false
		}
		if headReady && !headSent {
			cl := int64(t.content_length)
			if cl < 0 && t.finished != 0 && t.pathsend == nil && t.trailers_wanted == 0 && (t.out_len > 0 || string(r.Method) != "HEAD") {
				cl = int64(t.out_len) // the whole body is here: no chunking
			}
			head := unsafe.Slice((*byte)(unsafe.Pointer(t.head)), int(t.status_len+t.header_len))
			if t.pathsend != nil {
				if f, size, err := openPath(t.pathsend); err == nil {
					defer f.Close()
					if cl < 0 {
						cl = size
					} else if cl != size && string(r.Method) != "HEAD" && t.status != 204 && t.status != 304 {
						// The file disagrees with the app's Content-Length
						// (RFC 9110 §8.6): held to it as a body sent by
						// send() is, before anything left.
						h.logger().Error("asgi: http.response.pathsend: the file's size disagrees with the response's Content-Length: answered 500",
							"method", string(r.Method), "path", string(r.Path), "file", f.Name(), "size", size, "content_length", cl)
						w.WriteSimple(500, "text/plain; charset=utf-8", []byte("Internal Server Error\n"), nil)
						return 500
					}
					s.keepHeader(h, head[t.status_len:])
					w.WriteHead(int(t.status), head[:t.status_len], head[t.status_len:], cl, t.close != 0)
					w.SendFile(f, 0, size)
					return int(t.status)
				} else {
					h.logger().Error("asgi: http.response.pathsend: answered 500", "method", string(r.Method), "path", string(r.Path), "err", err)
					w.WriteSimple(500, "text/plain; charset=utf-8", []byte("Internal Server Error\n"), nil)
					return 500
				}
			}
			s.keepHeader(h, head[t.status_len:])
			if err := w.WriteHead(int(t.status), head[:t.status_len], head[t.status_len:], cl, t.close != 0); err != nil {
				disconnect()
				return int(t.status)
			}
			headSent, status, flush = true, int(t.status), true
		}
		if t.pathsend != nil {
			// A pathsend once the head is out (send() refuses one after a
			// body; this is the guard): free it, cut the response.
			C.free(unsafe.Pointer(t.pathsend))
			h.logger().Error("asgi: http.response.pathsend after the response started: the connection is cut", "method", string(r.Method), "path", string(r.Path))
			w.Abort()
			return status
		}
		if t.out_len > 0 {
			if _, err := w.Write(unsafe.Slice((*byte)(unsafe.Pointer(t.out)), int(t.out_len))); err != nil && !errors.Is(err, http1.ErrContentLength) {
				disconnect()
				w.Abort()
				return status
			}
		}
		C.ts_asgi_written(s.c, gen)
		if t.finished != 0 {
			if trailers != nil {
				w.WriteTrailers(trailers) // chunked HTTP/1.1 or HTTP/2; else dropped
			}
			return status // http1 finishes the framing and flushes
		}
		if t.out_len > 0 || flush {
			if err := w.Flush(); err != nil {
				disconnect()
				w.Abort()
				return status
			}
		}
		if t.want_body != 0 {
			if s.bodyEOF {
				w.NotifyClose(disconnect)
			} else {
				s.readBody(w, r, gen, disconnect)
			}
		}
		if t.app_done != 0 {
			if t.error != nil {
				C.free(unsafe.Pointer(t.error))
			}
			if !headSent {
				// The request body failed (too large, too slow, bad
				// framing, client gone): the app saw http.disconnect and
				// gave up; http1 answers the body's 4xx, never a 500.
				if err := r.Body.Err(); err != nil {
					return http1.BodyErrStatus(err)
				}
				// ASGI: an app that returns (or raises) without a response
				// gets a 500; its traceback was logged on the loop.
				w.WriteSimple(500, "text/plain; charset=utf-8", []byte("Internal Server Error\n"), nil)
				return 500
			}
			w.Abort() // the response was cut short: the client must see it
			return status
		}
	}
}

// readBody reads the next request body chunk and hands it to the loop.
func (s *slot) readBody(w *http1.ResponseWriter, r *http1.Request, gen C.uint32_t, disconnect func()) {
	if s.buf == nil {
		s.buf = make([]byte, BodyChunkBytes)
	}
	for {
		n, err := r.Body.Read(s.buf)
		more := C.int(1)
		if errors.Is(err, io.EOF) || (err == nil && r.Body.AtEOF()) {
			more, err = 0, nil // the last bytes say more_body False: no empty message after them
		}
		if err != nil {
			// Framing error, too large, timeout or client gone: the app
			// sees a disconnect; http1 answers the 4xx if nothing was sent.
			disconnect()
			return
		}
		if n == 0 && more == 1 {
			continue
		}
		var p *C.char
		if n > 0 {
			p = (*C.char)(unsafe.Pointer(&s.buf[0]))
		}
		C.ts_asgi_push(s.c.loop, C.TS_EV_BODY, s.c, gen, p, C.size_t(n), more)
		if more == 0 {
			s.bodyEOF = true
		}
		return
	}
}

func openPath(p *C.char) (*os.File, int64, error) {
	name := C.GoString(p)
	C.free(unsafe.Pointer(p))
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("asgi: pathsend %s is not a regular file", name)
	}
	return f, st.Size(), nil
}

// Scope entry ids (asgi.h, TS_SC_*).
const (
	scMethod = iota + 1
	scPath
	scRawPath
	scQuery
	scRootPath
	scHTTPVersion
	scClientHost
	scClientPort
	scServerHost
	scServerPort
	scScheme // only for "https": C sets "https" (or "wss"), interned; else "http"/"ws"
)

// buildScope writes the request block for the HTTP connection scope (ASGI
// HTTP, "Connection Scope"): header names lower-cased, path
// percent-decoded (the loop decodes it as UTF-8), root_path prefixed to
// path and raw_path unless the request path already carries it.
func (s *slot) buildScope(r *http1.Request, rootPath string) ([]byte, int) {
	b := s.block[:0]
	n := 0
	add := func(id uint16, key, val []byte) {
		b = reqblock.AppendEntry(b, id, key, val)
		n++
	}
	add(scMethod, nil, r.Method)
	raw := r.Path
	if rootPath != "" && !reqblock.HasPathPrefix(raw, []byte(rootPath)) {
		raw = append([]byte(rootPath), raw...)
	}
	s.path = reqblock.PercentDecode(s.path[:0], raw)
	add(scPath, nil, s.path)
	add(scRawPath, nil, raw)
	add(scQuery, nil, r.RawQuery)
	add(scRootPath, nil, []byte(rootPath))
	if r.ProtoMajor == 3 {
		add(scHTTPVersion, nil, []byte("3"))
	} else if r.ProtoMajor == 2 {
		add(scHTTPVersion, nil, []byte("2"))
	} else if r.ProtoMinor == 0 {
		add(scHTTPVersion, nil, []byte("1.0"))
	} else {
		add(scHTTPVersion, nil, []byte("1.1"))
	}
	ac := r.Addrs()
	add(scClientHost, nil, ac.RemoteHost)
	add(scClientPort, nil, ac.RemotePort)
	add(scServerHost, nil, ac.LocalHost)
	add(scServerPort, nil, ac.LocalPort)
	if r.Scheme == "https" { // TLS, or a trusted proxy said so (internal/proxy)
		add(scScheme, nil, []byte("https"))
	}
	// The tls extension (ASGI TLS extension): from the connection only,
	// never from a proxy's headers. client_cert_error is always None:
	// crypto/tls ends the handshake of a client whose certificate does
	// not verify, so no request with one arrives.
	if ts := r.TLS; ts != nil {
		var num [20]byte
		add(C.TS_SC_TLS_VERSION, nil, strconv.AppendUint(num[:0], uint64(ts.Version), 10))
		add(C.TS_SC_TLS_CIPHER, nil, strconv.AppendUint(num[:0], uint64(ts.CipherSuite), 10))
		if sc := r.Certs.ServerCert(); sc != nil {
			add(C.TS_SC_TLS_SERVER_CERT, nil, sc)
		}
		if cc := r.Certs.Client(); cc != nil {
			for _, pem := range cc.Chain {
				add(C.TS_SC_TLS_CLIENT_CERT, nil, pem)
			}
			add(C.TS_SC_TLS_CLIENT_NAME, nil, cc.SubjectDN)
		}
	}
	for i := range r.Header {
		name := r.Header[i].Name
		s.lower = s.lower[:0]
		for _, c := range name {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			s.lower = append(s.lower, c)
		}
		add(0, s.lower, r.Header[i].Value)
	}
	return b, n
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
