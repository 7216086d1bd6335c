package h2_test

// The connection layer in process, with a raw client (http2.Framer over
// loopback) and Go handlers: no Python. Abuse cases of issue #24 each
// have a test here.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
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
	srv := &http1.Server{Handler: h, HTTP2: h2.New(cfg, nil), WriteTimeout: cfg.WriteTimeout}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// rawClient is an HTTP/2 client connection made of frames.
type rawClient struct {
	t   *testing.T
	c   net.Conn
	bw  *bufio.Writer
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer
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
			rc.flush()
		}
		if pred(f) {
			return nil
		}
	}
}

// response reads stream id's response: status, body, or "RST_STREAM
// CODE" / "GOAWAY CODE" as status.
func (rc *rawClient) response(id uint32) (status, body string) {
	var b strings.Builder
	err := rc.until(func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == id {
				if s := f.PseudoValue("status"); s != "100" {
					status = s
				}
				return f.StreamEnded()
			}
		case *http2.DataFrame:
			if f.StreamID == id {
				b.Write(f.Data())
				if len(f.Data()) > 0 {
					rc.fr.WriteWindowUpdate(0, uint32(len(f.Data())))
					rc.fr.WriteWindowUpdate(id, uint32(len(f.Data())))
					rc.flush()
				}
				return f.StreamEnded()
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				status = "RST_STREAM " + f.ErrCode.String()
				return true
			}
		case *http2.GoAwayFrame:
			status = "GOAWAY " + f.ErrCode.String()
			return true
		}
		return false
	})
	if err != nil && status == "" {
		status = "error: " + err.Error()
	}
	return status, b.String()
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
