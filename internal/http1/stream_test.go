package http1_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"turnstile/internal/h2"
	"turnstile/internal/http1"
)

// HTTP/2 streams through the http1 handler type (stream.go), in process:
// response framing, resets, the Go-made answers.
func TestStream(t *testing.T) {
	ok := []byte("200 OK")
	srv := &http1.Server{
		Handler: http1.HandlerFunc(func(w *http1.ResponseWriter, r *http1.Request) {
			switch string(r.Path) {
			case "/abort":
				w.WriteHead(200, ok, nil, -1, false)
				w.Write([]byte("part"))
				w.Flush()
				w.Abort()
			case "/short":
				w.WriteHead(200, ok, nil, 10, false)
				w.Write([]byte("12345"))
			case "/nosniff":
				w.WriteHead(200, ok, nil, 5, false)
				w.Write([]byte("<html"))
			case "/hop":
				w.WriteHead(200, ok, []byte("Connection: close\r\nKeep-Alive: timeout=5\r\nUpgrade: h2c\r\nX-A: 1\r\nX-A: 2\r\n"), 2, true)
				w.Write([]byte("ok"))
			case "/over":
				w.WriteHead(200, ok, nil, 3, false)
				if _, err := w.Write([]byte("12345")); err != http1.ErrContentLength {
					panic("Write past Content-Length: " + err.Error())
				}
			case "/panic":
				panic("boom")
			case "/nothing":
			case "/proto":
				body, _ := io.ReadAll(r.Body)
				w.WriteSimple(200, "text/plain", []byte("["+r.Scheme+"] "+string(r.Method)+" "+string(r.Target)+" "+
					string(r.Host)+" "+string(r.Header[0].Name)+" "+itoa(r.ProtoMajor)+" "+itoa(len(body))), nil)
			}
		}),
		HTTP2:        h2.New(h2.Config{}, nil),
		MaxBodyBytes: 100,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return net.Dial(network, addr)
	}}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	base := "http://" + ln.Addr().String()
	get := func(method, path string, body io.Reader) (*http.Response, []byte, error) {
		req, _ := http.NewRequest(method, base+path, body)
		resp, err := c.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}

	if _, b, err := get("GET", "/abort", nil); err == nil {
		t.Errorf("/abort: read %q without an error; want a reset stream", b)
	}
	if _, b, err := get("GET", "/short", nil); err == nil {
		t.Errorf("/short: read %q without an error; want a reset stream", b)
	}
	if resp, b, err := get("GET", "/nosniff", nil); err != nil || string(b) != "<html" || resp.Header["Content-Type"] != nil {
		t.Errorf("/nosniff: %v %q, Content-Type %q; want no Content-Type", err, b, resp.Header["Content-Type"])
	}
	resp, b, err := get("GET", "/hop", nil)
	if err != nil || string(b) != "ok" {
		t.Fatalf("/hop: %v %q", err, b)
	}
	for _, f := range []string{"Connection", "Keep-Alive", "Upgrade"} {
		if v, ok := resp.Header[f]; ok {
			t.Errorf("/hop: %s: %q sent over HTTP/2", f, v)
		}
	}
	if got := resp.Header["X-A"]; len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Errorf("/hop: X-A %q; want [1 2]", got)
	}
	if resp, b, err := get("GET", "/over", nil); err != nil || string(b) != "123" || resp.ContentLength != 3 {
		t.Errorf("/over: %v %q", err, b)
	}
	for _, p := range []string{"/panic", "/nothing"} {
		if resp, _, err := get("GET", p, nil); err != nil || resp.StatusCode != 500 {
			t.Errorf("%s: %v; want 500", p, err)
		}
	}
	if resp, b, err := get("HEAD", "/nosniff", nil); err != nil || len(b) != 0 || resp.ContentLength != 5 {
		t.Errorf("HEAD: %v, %d bytes, Content-Length %d; want none and 5", err, len(b), resp.ContentLength)
	}
	if _, b, err := get("POST", "/proto?x=1", strings.NewReader("hello")); err != nil || string(b) != "[] POST /proto?x=1 "+ln.Addr().String()+" host 2 5" {
		t.Errorf("/proto: %v %q", err, b)
	}
	if resp, _, err := get("POST", "/proto", strings.NewReader(strings.Repeat("x", 101))); err != nil || resp.StatusCode != 413 {
		t.Errorf("a body past MaxBodyBytes: %v %v; want 413", err, resp)
	}
	if n := srv.InFlight(); n != 0 {
		t.Errorf("InFlight = %d after the streams ended", n)
	}
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
