package h2_test

// The connection layer in process, with a raw client (http2.Framer over
// loopback) and Go handlers: no Python. Abuse cases of issue #24 each
// have a test here.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"turnstile/internal/h2"
	"turnstile/internal/http1"
)

// serve starts an http1.Server with HTTP/2 on loopback and returns its
// address; it is shut down when the test ends.
func serve(t *testing.T, cfg h2.Config, h http1.HandlerFunc) string {
	t.Helper()
	return serveWrapped(t, cfg, h, nil)
}

// serveWrapped is serve with the loopback listener passed through wrap
// (nil: served as it is).
func serveWrapped(t *testing.T, cfg h2.Config, h http1.HandlerFunc, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	srv := &http1.Server{Handler: h, HTTP2: h2.New(cfg, nil), WriteTimeout: cfg.WriteTimeout}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return addr
}

// rawClient is an HTTP/2 client connection made of frames.
type rawClient struct {
	t   *testing.T
	c   net.Conn
	bw  *bufio.Writer
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer

	results map[uint32]*result // response
}

func dial(t *testing.T, addr string, settings ...http2.Setting) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawClient{t: t, c: c, bw: bufio.NewWriterSize(c, 64<<10)}
	rc.fr = http2.NewFramer(rc.bw, c)
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.enc = hpack.NewEncoder(&rc.hb)
	rc.bw.WriteString(http2.ClientPreface)
	rc.fr.WriteSettings(settings...)
	rc.flush()
	return rc
}

func (rc *rawClient) flush() {
	if err := rc.bw.Flush(); err != nil {
		rc.t.Fatal(err)
	}
}

// block encodes fields ("name", "value", ...) after the usual GET
// pseudo-header fields for path.
func (rc *rawClient) block(method, path string, fields ...string) []byte {
	rc.hb.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "http"}, {":path", path}, {":authority", "example.test"}} {
		rc.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(fields); i += 2 {
		rc.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return bytes.Clone(rc.hb.Bytes())
}

func (rc *rawClient) headers(id uint32, end bool, block []byte) {
	rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: end, EndHeaders: true})
}

// until reads frames until pred reports true, the connection ends (io
// error returned) or 10 s pass.
func (rc *rawClient) until(pred func(f http2.Frame) bool) error {
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer rc.c.SetReadDeadline(time.Time{})
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return err
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			rc.fr.WriteSettingsAck()
			rc.bw.Flush() // an error shows in the next read
		}
		if pred(f) {
			return nil
		}
	}
}

// goAway reads frames until a GOAWAY and returns its error code, or 999
// when the connection ends first.
func (rc *rawClient) goAway() http2.ErrCode {
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return 999
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return g.ErrCode
		}
	}
}

type result struct {
	status string
	body   strings.Builder
	done   bool
}

// response reads frames until stream id's response is complete and
// returns it: status, body, or "RST_STREAM CODE" / "GOAWAY CODE" as
// status. Frames of other streams are kept for their own call.
func (rc *rawClient) response(id uint32) (status, body string) {
	if rc.results == nil {
		rc.results = make(map[uint32]*result)
	}
	get := func(id uint32) *result {
		r := rc.results[id]
		if r == nil {
			r = new(result)
			rc.results[id] = r
		}
		return r
	}
	r := get(id)
	var err error
	if !r.done {
		err = rc.until(func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				o := get(f.StreamID)
				if s := f.PseudoValue("status"); s != "100" && s != "" {
					o.status = s
				}
				o.done = o.done || f.StreamEnded()
			case *http2.DataFrame:
				o := get(f.StreamID)
				o.body.Write(f.Data())
				if len(f.Data()) > 0 {
					rc.fr.WriteWindowUpdate(0, uint32(len(f.Data())))
					rc.fr.WriteWindowUpdate(f.StreamID, uint32(len(f.Data())))
					rc.flush()
				}
				o.done = o.done || f.StreamEnded()
			case *http2.RSTStreamFrame:
				o := get(f.StreamID)
				o.status, o.done = "RST_STREAM "+f.ErrCode.String(), true
			case *http2.GoAwayFrame:
				if !r.done {
					r.status, r.done = "GOAWAY "+f.ErrCode.String(), true
				}
			}
			return r.done
		})
	}
	if err != nil && !r.done {
		return "error: " + err.Error(), r.body.String()
	}
	return r.status, r.body.String()
}

func echoHandler(w *http1.ResponseWriter, r *http1.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var b strings.Builder
	b.WriteString(string(r.Method) + " " + string(r.Target) + " " + string(r.Host) + " " + itoa(len(body)) + "\n")
	for _, f := range r.Header {
		b.WriteString(string(f.Name) + ": " + string(f.Value) + "\n")
	}
	w.WriteSimple(200, "text/plain", []byte(b.String()), nil)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// RFC 9113 §8.2.1, §8.2.2, §8.3.1: malformed requests are reset with
// PROTOCOL_ERROR and never reach the handler; valid ones arrive in wire
// order with cookies joined.
func TestMalformed(t *testing.T) {
	var calls atomic.Int32
	addr := serve(t, h2.Config{}, func(w *http1.ResponseWriter, r *http1.Request) {
		calls.Add(1)
		echoHandler(w, r)
	})
	rc := dial(t, addr)
	id := uint32(1)
	for _, tc := range []struct {
		name   string
		fields []string
	}{
		{"leading space", []string{"x-a", " v"}},
		{"trailing tab", []string{"x-a", "v\t"}},
		{"connection", []string{"connection", "close"}},
		{"keep-alive", []string{"keep-alive", "5"}},
		{"transfer-encoding", []string{"transfer-encoding", "chunked"}},
		{"upgrade", []string{"upgrade", "h2c"}},
		{"te gzip", []string{"te", "gzip"}},
		{"uppercase", []string{"X-A", "v"}},
		{"host differs", []string{"host", "other.test"}},
		{"two content-length", []string{"content-length", "1", "content-length", "2"}},
	} {
		rc.headers(id, true, rc.block("GET", "/", tc.fields...))
		rc.flush()
		if status, _ := rc.response(id); status != "RST_STREAM PROTOCOL_ERROR" {
			t.Errorf("%s: %s; want RST_STREAM PROTOCOL_ERROR", tc.name, status)
		}
		id += 2
	}
	rc.headers(id, true, rc.block("GET", "/p?q=1", "cookie", "a=1", "x-b", "2", "cookie", "b=2", "host", "example.test", "te", "trailers"))
	rc.flush()
	status, body := rc.response(id)
	want := "GET /p?q=1 example.test 0\nhost: example.test\ncookie: a=1; b=2\nx-b: 2\nte: trailers\n"
	if status != "200" || body != want {
		t.Errorf("valid request: %s %q; want 200 %q", status, body, want)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handler calls = %d; want 1", n)
	}
}

// Bodies larger than every window, both ways, with request trailers.
func TestFlowControl(t *testing.T) {
	addr := serve(t, h2.Config{InitialStreamWindowSize: 65535, InitialConnectionWindowSize: 65535}, func(w *http1.ResponseWriter, r *http1.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		tr := ""
		for _, f := range r.Body.Trailer() {
			tr += string(f.Name) + "=" + string(f.Value)
		}
		w.WriteHead(200, []byte("200 OK"), []byte("X-Trailer: "+tr+"\r\n"), int64(len(body)), false)
		w.Write(body)
	})
	rc := dial(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
	body := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640 000 bytes
	rc.headers(1, false, rc.block("POST", "/"))
	rc.flush()
	// Send within the server's windows, reading its WINDOW_UPDATEs.
	sendWin, connWin := int64(65535), int64(65535)
	rest := body
	var got bytes.Buffer
	done := false
	for !done {
		for len(rest) > 0 && sendWin > 0 && connWin > 0 {
			n := min(int64(len(rest)), sendWin, connWin, 16384)
			rc.fr.WriteData(1, false, rest[:n])
			rest, sendWin, connWin = rest[n:], sendWin-n, connWin-n
		}
		if len(rest) == 0 && rest != nil {
			rc.hb.Reset()
			rc.enc.WriteField(hpack.HeaderField{Name: "x-sum", Value: "ok"})
			rc.headers(1, true, bytes.Clone(rc.hb.Bytes()))
			rest = nil
		}
		rc.flush()
		err := rc.until(func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.WindowUpdateFrame:
				if f.StreamID == 0 {
					connWin += int64(f.Increment)
				} else {
					sendWin += int64(f.Increment)
				}
				return true
			case *http2.MetaHeadersFrame:
				if v := f.Fields; f.PseudoValue("status") != "200" || !strings.Contains(strings.Join(fieldStrings(v), ","), "x-trailer:x-sum=ok") {
					t.Errorf("response head %v", fieldStrings(v))
				}
				return false
			case *http2.DataFrame:
				got.Write(f.Data())
				if n := len(f.Data()); n > 0 {
					if n > 1000 {
						t.Fatalf("DATA of %d bytes beyond the 1000-byte window", n)
					}
					rc.fr.WriteWindowUpdate(0, uint32(n))
					rc.fr.WriteWindowUpdate(1, uint32(n))
					rc.flush()
				}
				done = f.StreamEnded()
				return true
			case *http2.RSTStreamFrame, *http2.GoAwayFrame:
				t.Fatalf("unexpected %v", f)
			}
			return false
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got.Bytes(), body) {
		t.Fatalf("echoed %d bytes; want %d equal", got.Len(), len(body))
	}
}

// h2cClient is an http.Client speaking HTTP/2 with prior knowledge.
func h2cClient() *http.Client {
	return &http.Client{Transport: &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, n, a string, _ *tls.Config) (net.Conn, error) {
		return net.Dial(n, a)
	}}}
}

func fieldStrings(fs []hpack.HeaderField) []string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Name+":"+f.Value)
	}
	return s
}

// CVE-2023-44487: streams opened and reset at once, 10 000 times, start
// no handler, and another client is served meanwhile.
func TestRapidReset(t *testing.T) {
	var attacked atomic.Int32
	addr := serve(t, h2.Config{MaxConcurrentStreams: 100}, func(w *http1.ResponseWriter, r *http1.Request) {
		if string(r.Path) == "/attack" {
			attacked.Add(1)
			time.Sleep(10 * time.Millisecond) // the app's work
		}
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	rc := dial(t, addr)
	go func() { // drain the server's frames
		for {
			if _, err := rc.fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var worst time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl := h2cClient()
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			resp, err := cl.Get("http://" + addr + "/other")
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			worst = max(worst, time.Since(start))
		}
	}()
	block := rc.block("GET", "/attack")
	id := uint32(1)
	for range 10000 {
		rc.headers(id, true, block)
		rc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		rc.flush() // both frames in one write
		id += 2
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := attacked.Load(); n != 0 {
		t.Errorf("%d of 10000 reset streams started the handler; want 0", n)
	}
	if worst > time.Second {
		t.Errorf("other client's slowest request took %v", worst)
	}
	t.Logf("other client's slowest request: %v", worst)
}

// Streams reset after their handler started: at most
// MaxConcurrentStreams handlers run for the connection, and a client
// that keeps resetting while they run is sent ENHANCE_YOUR_CALM.
func TestResetAfterStartBounded(t *testing.T) {
	var running, most atomic.Int32
	release := make(chan struct{})
	addr := serve(t, h2.Config{MaxConcurrentStreams: 4}, func(w *http1.ResponseWriter, r *http1.Request) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		running.Add(-1)
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	defer close(release)
	rc := dial(t, addr)
	block := rc.block("GET", "/")
	id := uint32(1)
	goaway := make(chan http2.ErrCode, 1)
	go func() {
		for {
			f, err := rc.fr.ReadFrame()
			if err != nil {
				return
			}
			if g, ok := f.(*http2.GoAwayFrame); ok {
				goaway <- g.ErrCode
				return
			}
		}
	}()
	for i := 0; i < 200; i++ {
		rc.headers(id, true, block)
		rc.flush()
		time.Sleep(time.Millisecond) // let it start, then reset
		rc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		if rc.bw.Flush() != nil {
			break
		}
		id += 2
	}
	select {
	case code := <-goaway:
		if code != http2.ErrCodeEnhanceYourCalm {
			t.Errorf("GOAWAY %v; want ENHANCE_YOUR_CALM", code)
		}
	case <-time.After(5 * time.Second):
		t.Error("no GOAWAY")
	}
	if m := most.Load(); m > 4 {
		t.Errorf("%d handlers ran at once; want at most 4", m)
	}
}

// More streams than SETTINGS_MAX_CONCURRENT_STREAMS: REFUSED_STREAM
// (RFC 9113 §5.1.2), the others are served.
func TestMaxConcurrentStreams(t *testing.T) {
	release := make(chan struct{})
	addr := serve(t, h2.Config{MaxConcurrentStreams: 2}, func(w *http1.ResponseWriter, r *http1.Request) {
		<-release
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	rc := dial(t, addr)
	block := rc.block("GET", "/")
	for id := uint32(1); id <= 5; id += 2 {
		rc.headers(id, true, block)
	}
	rc.flush()
	if status, _ := rc.response(5); status != "RST_STREAM REFUSED_STREAM" {
		t.Errorf("third stream: %s; want RST_STREAM REFUSED_STREAM", status)
	}
	close(release)
	for _, id := range []uint32{1, 3} {
		if status, body := rc.response(id); status != "200" || body != "ok" {
			t.Errorf("stream %d: %s %q", id, status, body)
		}
	}
}

// CONTINUATION flood (CVE-2024-27316 and kin): endless CONTINUATION
// frames end the connection once the header list is over its limit.
func TestContinuationFlood(t *testing.T) {
	var calls atomic.Int32
	addr := serve(t, h2.Config{MaxHeadersSize: 16 << 10}, func(w *http1.ResponseWriter, r *http1.Request) {
		calls.Add(1)
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	rc := dial(t, addr)
	rc.enc.SetMaxDynamicTableSizeLimit(0) // every field a literal
	rc.enc.SetMaxDynamicTableSize(0)
	rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block("GET", "/"), EndStream: true})
	rc.hb.Reset()
	for i := 0; i < 100; i++ {
		rc.enc.WriteField(hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("a", 100)})
	}
	frag := bytes.Clone(rc.hb.Bytes())
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() {
		for sent.Load() < 64<<20 {
			rc.fr.WriteContinuation(1, false, frag)
			if err := rc.bw.Flush(); err != nil {
				done <- err
				return
			}
			sent.Add(int64(len(frag)))
		}
		done <- nil
	}()
	goaway := rc.goAway()
	rc.c.Close()
	if err := <-done; err == nil {
		t.Fatalf("the server took %d bytes of CONTINUATION", sent.Load())
	}
	if goaway != 999 && goaway != http2.ErrCodeProtocol {
		t.Errorf("CONTINUATION flood: GOAWAY %v; want PROTOCOL_ERROR", goaway)
	}
	t.Logf("connection ended (GOAWAY %v) after %d bytes of CONTINUATION", goaway, sent.Load())
	if calls.Load() != 0 {
		t.Error("the handler ran")
	}
}

// Empty CONTINUATION frames add nothing to the header list, so x/net's
// size checks never end the block: the block's bytes are bounded
// (blockSlack) and the connection gets GOAWAY ENHANCE_YOUR_CALM. It read
// them until the idle timeout.
func TestEmptyContinuationFlood(t *testing.T) {
	var calls atomic.Int32
	addr := serve(t, h2.Config{MaxHeadersSize: 16 << 10, IdleTimeout: time.Minute}, func(w *http1.ResponseWriter, r *http1.Request) {
		calls.Add(1)
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	rc := dial(t, addr)
	rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block("GET", "/"), EndStream: true})
	var sent atomic.Int64
	go func() {
		for sent.Load() < 1<<20 { // frames, 9 MiB
			for range 1000 {
				rc.fr.WriteContinuation(1, false, nil)
			}
			if rc.bw.Flush() != nil {
				return
			}
			sent.Add(1000)
		}
	}()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	goaway := rc.goAway()
	if goaway != http2.ErrCodeEnhanceYourCalm {
		t.Errorf("empty CONTINUATION flood: GOAWAY %v after %d frames; want ENHANCE_YOUR_CALM", goaway, sent.Load())
	}
	if calls.Load() != 0 {
		t.Error("the handler ran")
	}
}

// A field longer than SETTINGS_MAX_HEADER_LIST_SIZE is a connection
// error (the Framer's COMPRESSION_ERROR), and the GOAWAY names the stream
// as acted on (RFC 9113 §6.8), not with last-stream-id 0, which tells
// the client it was not processed and may be retried (§8.7).
func TestOversizedFieldGoAwayNamesStream(t *testing.T) {
	addr := serve(t, h2.Config{MaxHeadersSize: 16 << 10}, echoHandler)
	rc := dial(t, addr)
	rc.headers(1, true, rc.block("GET", "/", "x-big", strings.Repeat("a", 20<<10)))
	rc.flush()
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.LastStreamID != 1 {
				t.Errorf("GOAWAY %v last-stream-id %d; want 1", g.ErrCode, g.LastStreamID)
			}
			return
		}
	}
}

// HPACK bomb: a small block that decodes to a huge field section (one
// dynamic-table entry indexed many times) is refused (431) or ends the
// connection; the handler never sees it.
func TestHPACKBomb(t *testing.T) {
	var calls atomic.Int32
	addr := serve(t, h2.Config{MaxHeadersSize: 64 << 10}, func(w *http1.ResponseWriter, r *http1.Request) {
		calls.Add(1)
		w.WriteSimple(200, "text/plain", []byte("ok"), nil)
	})
	rc := dial(t, addr)
	rc.hb.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "x"}} {
		rc.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	rc.enc.WriteField(hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 4000)})
	// Index 62 (the newest dynamic entry), 10 000 times: 40 MB decoded.
	block := append(bytes.Clone(rc.hb.Bytes()), bytes.Repeat([]byte{0x80 | 62}, 10000)...)
	for off := 0; off < len(block); off += 16384 {
		frag := block[off:min(off+16384, len(block))]
		if off == 0 {
			rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: frag, EndStream: true, EndHeaders: len(block) <= 16384})
		} else {
			rc.fr.WriteContinuation(1, off+16384 >= len(block), frag)
		}
	}
	rc.flush()
	status, _ := rc.response(1)
	if status != "431" && !strings.HasPrefix(status, "GOAWAY") && !strings.HasPrefix(status, "error") {
		t.Errorf("HPACK bomb: %s; want 431 or the connection ended", status)
	}
	if calls.Load() != 0 {
		t.Error("the handler ran")
	}
}

// PING and SETTINGS floods from a client that does not read: the
// connection ends by WriteTimeout instead of queueing answers.
func TestControlFloodNotReading(t *testing.T) {
	for _, kind := range []string{"PING", "SETTINGS"} {
		t.Run(kind, func(t *testing.T) {
			addr := serve(t, h2.Config{WriteTimeout: 500 * time.Millisecond}, func(w *http1.ResponseWriter, r *http1.Request) {})
			rc := dial(t, addr)
			start := time.Now()
			var err error
			for i := 0; err == nil && time.Since(start) < 10*time.Second; i++ {
				if kind == "PING" {
					rc.fr.WritePing(false, [8]byte{byte(i)})
				} else {
					rc.fr.WriteSettings(http2.Setting{ID: http2.SettingEnableConnectProtocol + 100, Val: uint32(i)})
				}
				if i%64 == 0 {
					rc.c.SetWriteDeadline(time.Now().Add(3 * time.Second))
					err = rc.bw.Flush()
				}
			}
			if err == nil {
				t.Fatalf("%s flood: connection still open after 10 s", kind)
			}
			t.Logf("%s flood ended after %v: %v", kind, time.Since(start), err)
		})
	}
}

// A client that opens no window (SETTINGS_INITIAL_WINDOW_SIZE 0, no
// WINDOW_UPDATE) stalls its stream only until WriteTimeout: the stream
// is reset and its handler returns; another stream is served meanwhile.
func TestZeroWindowStall(t *testing.T) {
	handlerErr := make(chan error, 1)
	addr := serve(t, h2.Config{WriteTimeout: 300 * time.Millisecond}, func(w *http1.ResponseWriter, r *http1.Request) {
		if string(r.Path) == "/big" {
			w.WriteHead(200, []byte("200 OK"), nil, 100000, false)
			_, err := w.Write(make([]byte, 100000))
			handlerErr <- err
			return
		}
		w.WriteSimple(204, "", nil, nil)
	})
	rc := dial(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.headers(1, true, rc.block("GET", "/big"))
	rc.headers(3, true, rc.block("GET", "/small"))
	rc.flush()
	if status, _ := rc.response(3); status != "204" {
		t.Errorf("other stream: %s; want 204", status)
	}
	select {
	case err := <-handlerErr:
		if !errors.Is(err, http1.ErrClientGone) {
			t.Errorf("stalled write: %v; want ErrClientGone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler still blocked after 5 s")
	}
	if status, _ := rc.response(1); status != "RST_STREAM INTERNAL_ERROR" {
		t.Errorf("stalled stream: %s; want RST_STREAM INTERNAL_ERROR", status)
	}
}

// Empty DATA frames without END_STREAM cost the client nothing and us a
// wake-up each: a flood of them ends the connection.
func TestEmptyDataFlood(t *testing.T) {
	addr := serve(t, h2.Config{}, func(w *http1.ResponseWriter, r *http1.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteSimple(204, "", nil, nil)
	})
	rc := dial(t, addr)
	rc.headers(1, false, rc.block("POST", "/"))
	for range 5000 {
		rc.fr.WriteData(1, false, nil)
	}
	rc.flush()
	if status, _ := rc.response(1); status != "GOAWAY ENHANCE_YOUR_CALM" {
		t.Errorf("empty DATA flood: %s; want GOAWAY ENHANCE_YOUR_CALM", status)
	}
}

// Frames the client sent before it saw our RST_STREAM are ignored (RFC
// 9113 §5.1): a handler that answers without reading a body resets the
// stream (NO_ERROR), and the body and trailers that follow leave the
// connection alone.
func TestFramesAfterOurReset(t *testing.T) {
	addr := serve(t, h2.Config{}, func(w *http1.ResponseWriter, r *http1.Request) {
		w.WriteSimple(200, "text/plain", []byte("early"), nil)
	})
	rc := dial(t, addr)
	rc.headers(1, false, rc.block("POST", "/"))
	rc.flush()
	if status, body := rc.response(1); status != "200" || body != "early" {
		t.Fatalf("early answer: %s %q", status, body)
	}
	rc.fr.WriteData(1, false, []byte("late body"))
	rc.hb.Reset()
	rc.enc.WriteField(hpack.HeaderField{Name: "x-t", Value: "1"})
	rc.headers(1, true, bytes.Clone(rc.hb.Bytes()))
	rc.headers(3, true, rc.block("GET", "/"))
	rc.flush()
	if status, body := rc.response(3); status != "200" || body != "early" {
		t.Errorf("next stream: %s %q; want 200 (the connection kept)", status, body)
	}
}

// Shutdown: GOAWAY NO_ERROR with the last stream id, the stream in flight
// finishes, a later stream is ignored, then the connection closes.
func TestGracefulShutdown(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	srv := &http1.Server{
		Handler: http1.HandlerFunc(func(w *http1.ResponseWriter, r *http1.Request) {
			close(started)
			<-release
			w.WriteSimple(200, "text/plain", []byte("done"), nil)
		}),
		HTTP2: h2.New(h2.Config{}, nil),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	rc := dial(t, ln.Addr().String())
	rc.headers(1, true, rc.block("GET", "/"))
	rc.flush()
	<-started
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- srv.Shutdown(ctx)
	}()
	var last uint32 = 999
	if err := rc.until(func(f http2.Frame) bool {
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeNo {
				t.Errorf("GOAWAY %v; want NO_ERROR", g.ErrCode)
			}
			last = g.LastStreamID
			return true
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if last != 1 {
		t.Errorf("GOAWAY last stream %d; want 1", last)
	}
	rc.headers(3, true, rc.block("GET", "/"))
	rc.flush()
	close(release)
	if status, body := rc.response(1); status != "200" || body != "done" {
		t.Errorf("stream in flight: %s %q", status, body)
	}
	if status, _ := rc.response(3); !strings.HasPrefix(status, "error") {
		t.Errorf("stream after GOAWAY: %s; want none (connection closed)", status)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// IdleTimeout closes a connection without streams (GOAWAY NO_ERROR);
// KeepAliveInterval sends PING when the client is silent.
func TestIdleAndKeepAlive(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		addr := serve(t, h2.Config{IdleTimeout: 200 * time.Millisecond}, echoHandler)
		rc := dial(t, addr)
		start := time.Now()
		if status, _ := rc.response(1); status != "GOAWAY NO_ERROR" {
			t.Errorf("idle connection: %s; want GOAWAY NO_ERROR", status)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("GOAWAY after %v; want about 200ms", d)
		}
	})
	t.Run("ping", func(t *testing.T) {
		addr := serve(t, h2.Config{KeepAliveInterval: 100 * time.Millisecond, KeepAliveTimeout: 300 * time.Millisecond}, echoHandler)
		rc := dial(t, addr)
		if err := rc.until(func(f http2.Frame) bool {
			p, ok := f.(*http2.PingFrame)
			return ok && !p.IsAck()
		}); err != nil {
			t.Fatalf("no PING: %v", err)
		}
		// Unanswered, the PING closes the connection.
		if err := rc.until(func(http2.Frame) bool { return false }); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("connection with an unanswered PING: %v; want closed", err)
		}
	})
}

// Expect: 100-continue gets 100 when the handler reads the body; HEAD
// gets the head with END_STREAM and the declared length.
func TestContinueAndHead(t *testing.T) {
	addr := serve(t, h2.Config{}, func(w *http1.ResponseWriter, r *http1.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteSimple(200, "text/plain", append([]byte("got "), body...), nil)
	})
	rc := dial(t, addr)
	rc.headers(1, false, rc.block("POST", "/", "expect", "100-continue", "content-length", "2"))
	rc.flush()
	if err := rc.until(func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		return ok && h.PseudoValue("status") == "100"
	}); err != nil {
		t.Fatalf("no 100 Continue: %v", err)
	}
	rc.fr.WriteData(1, true, []byte("hi"))
	rc.flush()
	if status, body := rc.response(1); status != "200" || body != "got hi" {
		t.Errorf("after 100: %s %q", status, body)
	}
	rc.headers(3, true, rc.block("HEAD", "/"))
	rc.flush()
	var cl string
	if err := rc.until(func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		if ok && h.StreamID == 3 {
			for _, hf := range h.RegularFields() {
				if hf.Name == "content-length" {
					cl = hf.Value
				}
			}
			if !h.StreamEnded() {
				t.Error("HEAD response HEADERS without END_STREAM")
			}
			return true
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if cl != "4" {
		t.Errorf("HEAD content-length %q; want 4", cl)
	}
}

// A PRIORITY frame that depends on itself is a stream error (RFC 9113
// §5.3.1) but does not open the stream: HEADERS on it later is served.
func TestPrioritySelfDependency(t *testing.T) {
	addr := serve(t, h2.Config{}, echoHandler)
	rc := dial(t, addr)
	rc.fr.WritePriority(5, http2.PriorityParam{StreamDep: 5, Weight: 15})
	rc.flush()
	if status, _ := rc.response(5); status != "RST_STREAM PROTOCOL_ERROR" {
		t.Fatalf("PRIORITY on itself: %s; want RST_STREAM PROTOCOL_ERROR", status)
	}
	delete(rc.results, 5)
	rc.headers(5, true, rc.block("GET", "/"))
	rc.flush()
	if status, _ := rc.response(5); status != "200" {
		t.Errorf("HEADERS after it: %s; want 200", status)
	}
}

// Many streams on a few connections, bodies larger than the windows both
// ways, through Go's HTTP/2 client: every echo comes back whole.
func TestConcurrentEcho(t *testing.T) {
	addr := serve(t, h2.Config{InitialStreamWindowSize: 65535, InitialConnectionWindowSize: 256 << 10, MaxConcurrentStreams: 32},
		func(w *http1.ResponseWriter, r *http1.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			if len(body)%2 == 0 {
				w.WriteHead(200, []byte("200 OK"), nil, int64(len(body)), false)
			} else {
				w.WriteHead(200, []byte("200 OK"), nil, -1, false) // no length: END_STREAM after
			}
			for len(body) > 0 { // in pieces, flushing, as an app streams
				n := min(len(body), 7000)
				if _, err := w.Write(body[:n]); err != nil {
					return
				}
				w.Flush()
				body = body[n:]
			}
		})
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		cl := h2cClient()
		for s := 0; s < 40; s++ {
			wg.Add(1)
			go func(seed int) {
				defer wg.Done()
				n := (seed*7919)%300000 + seed%2
				body := bytes.Repeat([]byte{byte(seed)}, n)
				resp, err := cl.Post("http://"+addr+"/", "application/octet-stream", bytes.NewReader(body))
				if err != nil {
					t.Errorf("stream %d: %v", seed, err)
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !bytes.Equal(got, body) {
					t.Errorf("stream %d: %d of %d bytes back, err %v", seed, len(got), n, err)
				}
			}(c*40 + s)
		}
	}
	wg.Wait()
}

// countingListener counts the Write calls on the connections it accepts.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// gatedStreams serves n streams on one connection whose handlers all wait
// for one gate, opens them, and returns once every handler waits: close
// gate to let them answer together. writes counts the server's socket
// writes.
func gatedStreams(t *testing.T, n int) (rc *rawClient, gate chan struct{}, writes *atomic.Int64) {
	t.Helper()
	gate = make(chan struct{})
	var waiting atomic.Int64
	writes = new(atomic.Int64)
	h := http1.HandlerFunc(func(w *http1.ResponseWriter, r *http1.Request) {
		waiting.Add(1)
		<-gate
		w.WriteSimple(200, "text/plain", []byte("ok\n"), nil)
	})
	addr := serveWrapped(t, h2.Config{}, h, func(ln net.Listener) net.Listener { return countingListener{ln, writes} })
	rc = dial(t, addr)
	for i := 0; i < n; i++ {
		rc.headers(uint32(2*i+1), true, rc.block("GET", "/"))
	}
	rc.flush()
	for deadline := time.Now().Add(10 * time.Second); waiting.Load() < int64(n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d handlers started", waiting.Load(), n)
		}
	}
	return rc, gate, writes
}

// Responses that end together leave in a few writes, not one each: the
// first to end owes the flush and yields to the others (flushSoon).
func TestStreamEndsCoalesced(t *testing.T) {
	const n = 40
	rc, gate, writes := gatedStreams(t, n)
	before := writes.Load()
	close(gate)
	for i := 0; i < n; i++ {
		if status, body := rc.response(uint32(2*i + 1)); status != "200" || body != "ok\n" {
			t.Fatalf("stream %d: %q %q; want 200 \"ok\\n\"", 2*i+1, status, body)
		}
	}
	if got := writes.Load() - before; got > n/4 {
		t.Errorf("%d responses ended together took %d socket writes; want at most %d", n, got, n/4)
	}
}

// The handler goroutines a connection keeps parked between streams end
// with it.
func TestParkedHandlersEnd(t *testing.T) {
	base := runtime.NumGoroutine()
	const n = 50
	rc, gate, _ := gatedStreams(t, n)
	close(gate)
	for i := 0; i < n; i++ {
		rc.response(uint32(2*i + 1))
	}
	// A second round reuses the parked goroutines.
	for i := n; i < 2*n; i++ {
		rc.headers(uint32(2*i+1), true, rc.block("GET", "/"))
	}
	rc.flush()
	for i := n; i < 2*n; i++ {
		if status, _ := rc.response(uint32(2*i + 1)); status != "200" {
			t.Fatalf("stream %d: %s; want 200", 2*i+1, status)
		}
	}
	rc.c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+2 { // the server's accept loop and its stop watcher
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the connection closed; %d before it", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Parked handler goroutines are bounded by the streams running: after a
// burst of 50 streams, with one long-lived stream still open, the
// connection keeps that stream's goroutine and at most a few parked ones
// (h2's parkSpare, 4).
func TestParkedHandlersBounded(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	h := http1.HandlerFunc(func(w *http1.ResponseWriter, r *http1.Request) {
		if string(r.Path) == "/hold" {
			<-hold
		}
		w.WriteSimple(200, "text/plain", []byte("ok\n"), nil)
	})
	rc := dial(t, serve(t, h2.Config{}, h))
	rc.headers(1, true, rc.block("GET", "/hold"))
	rc.flush()
	time.Sleep(50 * time.Millisecond)
	base := runtime.NumGoroutine() // the server, the connection, the held stream
	const n = 50
	for i := 1; i <= n; i++ {
		rc.headers(uint32(2*i+1), true, rc.block("GET", "/"))
	}
	rc.flush()
	for i := 1; i <= n; i++ {
		if status, _ := rc.response(uint32(2*i + 1)); status != "200" {
			t.Fatalf("stream %d: %s; want 200", 2*i+1, status)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+5 { // parked: at most running (1) + parkSpare (4)
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after a burst of %d with one stream held; %d before it (want at most 5 more: parked)",
				runtime.NumGoroutine(), n, base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
