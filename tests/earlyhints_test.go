package tests

// 103 Early Hints (RFC 8297): the ASGI http.response.early_hint extension
// and WSGI's environ["wsgi.early_hints"] over HTTP/1.1, HTTP/2 (a raw Framer client) and HTTP/1.0 (no 1xx, RFC
// 9110 §15.2).

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const hintLinks = "Link: </style.css>; rel=preload; as=style\r\nLink: </app.js>; rel=preload; as=script\r\n"

func TestEarlyHints_HTTP1(t *testing.T) {
	for _, app := range []string{"hints_asgi:app", "hints_wsgi:app"} {
		t.Run(app, func(t *testing.T) { testEarlyHintsHTTP1(t, app) })
	}
}

func testEarlyHintsHTTP1(t *testing.T, app string) {
	s := Start(t, app)
	out, _ := Raw(t, s.Addr, "GET /hints HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
	if want := "HTTP/1.1 103 Early Hints\r\n" + hintLinks + "\r\nHTTP/1.1 200 OK\r\n"; !strings.HasPrefix(out, want) {
		t.Errorf("HTTP/1.1 /hints:\n%q\nwant prefix\n%q", out, want)
	}
	if !strings.HasSuffix(out, "ok extension=1") {
		t.Errorf("HTTP/1.1 /hints body: %q", out)
	}

	out, _ = Raw(t, s.Addr, "GET /hints HTTP/1.0\r\nHost: x\r\n\r\n", 5*time.Second)
	if !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || strings.Contains(out, "103") {
		t.Errorf("HTTP/1.0 /hints got a 1xx or no 200:\n%q", out)
	}

	out, _ = Raw(t, s.Addr, "GET /late HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
	if !strings.HasPrefix(out, "HTTP/1.1 200 OK\r\n") || strings.Contains(out, "103") || !strings.Contains(out, "ok ") || !strings.Contains(out, "extension=1") {
		t.Errorf("HTTP/1.1 /late (hint after the head):\n%q", out)
	}

	out, _ = Raw(t, s.Addr, "GET /bad HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
	if !strings.HasPrefix(out, "HTTP/1.1 500 ") || strings.Contains(out, "Set-Cookie") {
		t.Errorf("HTTP/1.1 /bad (CR LF in a link):\n%q", out)
	}
}

// h2Exchange sends one GET for path on a fresh h2c connection and returns
// the decoded header blocks of the response, in order, and the body.
func h2Exchange(t *testing.T, addr, path string) ([][]hpack.HeaderField, string) {
	t.Helper()
	h := dialRawH2(t, addr)
	bw, fr := h.bw, h.fr
	h.c.SetDeadline(time.Now().Add(10 * time.Second))
	block := hpackBlock([][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", path}, {":authority", "localhost"}})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true})
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var blocks [][]hpack.HeaderField
	var body bytes.Buffer
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("read frame: %v (blocks %v)", err, blocks)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
				bw.Flush()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				blocks = append(blocks, f.Fields)
				if f.StreamEnded() {
					return blocks, body.String()
				}
			}
		case *http2.DataFrame:
			if f.StreamID == 1 {
				body.Write(f.Data())
				if f.StreamEnded() {
					return blocks, body.String()
				}
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset: %v", f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY: %v", f.ErrCode)
		}
	}
}

func fieldValues(fs []hpack.HeaderField, name string) []string {
	var vs []string
	for _, f := range fs {
		if f.Name == name {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

func TestEarlyHints_HTTP2(t *testing.T) {
	for _, app := range []string{"hints_asgi:app", "hints_wsgi:app"} {
		t.Run(app, func(t *testing.T) { testEarlyHintsHTTP2(t, app) })
	}
}

func testEarlyHintsHTTP2(t *testing.T, app string) {
	s := Start(t, app)
	blocks, body := h2Exchange(t, s.Addr, "/hints")
	if len(blocks) != 2 {
		t.Fatalf("/hints: %d header blocks %v; want a 103 then a 200", len(blocks), blocks)
	}
	if st := fieldValues(blocks[0], ":status"); len(st) != 1 || st[0] != "103" {
		t.Errorf("first block %v; want :status 103", blocks[0])
	}
	links := fieldValues(blocks[0], "link")
	if want := []string{"</style.css>; rel=preload; as=style", "</app.js>; rel=preload; as=script"}; strings.Join(links, "|") != strings.Join(want, "|") {
		t.Errorf("103 links %q; want %q", links, want)
	}
	if st := fieldValues(blocks[1], ":status"); len(st) != 1 || st[0] != "200" {
		t.Errorf("second block %v; want :status 200", blocks[1])
	}
	if body != "ok extension=1" {
		t.Errorf("body %q", body)
	}

	blocks, body = h2Exchange(t, s.Addr, "/late")
	if len(blocks) != 1 || fieldValues(blocks[0], ":status")[0] != "200" {
		t.Errorf("/late (hint after the head): blocks %v; want one 200", blocks)
	}
	if !strings.HasSuffix(body, "extension=1") {
		t.Errorf("/late body %q", body)
	}
}

// Over HTTP/3 the 103 reaches quic-go's client (httptrace's
// Got1xxResponse), its Link fields stay out of the final head, and the
// final head keeps the app's status and fields.
func TestEarlyHints_HTTP3(t *testing.T) {
	p := newPKI(t)
	for _, app := range []string{"hints_asgi:app", "hints_wsgi:app"} {
		t.Run(app, func(t *testing.T) {
			s := startH3(t, p, app)
			c := h3Client(t, p)
			var got []string
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				got = append(got, strconv.Itoa(code)+" "+strings.Join(h.Values("Link"), "|"))
				return nil
			}}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", httpsURL(s)+"/hints", nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 3 || resp.StatusCode != 200 || string(body) != "ok extension=1" {
				t.Fatalf("%s %d %q", resp.Proto, resp.StatusCode, body)
			}
			if want := "103 </style.css>; rel=preload; as=style|</app.js>; rel=preload; as=script"; len(got) != 1 || got[0] != want {
				t.Errorf("1xx responses %q; want [%q]", got, want)
			}
			if l := resp.Header.Values("Link"); len(l) != 0 {
				t.Errorf("the final head carries the hints' Link fields: %q", l)
			}

			// The final head after a 103 is the app's: its status and
			// fields (quic-go's Flush once committed a bare 200 instead).
			got = nil
			req, _ = http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", httpsURL(s)+"/hints-404", nil)
			resp, err = c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 404 || resp.Header.Get("X-Final") != "yes" || resp.Header.Get("Content-Type") != "text/plain" || string(body) != "ok extension=1" {
				t.Errorf("/hints-404: %d %v %q; want 404 with x-final: yes and content-type: text/plain", resp.StatusCode, resp.Header, body)
			}
			if len(got) != 1 {
				t.Errorf("/hints-404: 1xx responses %q; want one 103", got)
			}
		})
	}
}

// An HTTP/1.0 client over TLS offers ALPN "http/1.0" only (curl
// --http1.0): the handshake succeeds (crypto/tls refused it with
// no_application_protocol while only "h2" and "http/1.1" were listed),
// and its request gets no 1xx, as on a plain connection.
func TestEarlyHints_HTTP10OverTLS(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "hints_asgi:app")...)
	c, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: p.Pool, ServerName: "localhost", NextProtos: []string{"http/1.0"}})
	if err != nil {
		t.Fatalf("TLS handshake offering ALPN http/1.0: %v", err)
	}
	defer c.Close()
	if np := c.ConnectionState().NegotiatedProtocol; np != "http/1.0" {
		t.Errorf("ALPN negotiated %q; want http/1.0", np)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /hints HTTP/1.0\r\nHost: x\r\n\r\n")
	out, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(out), "HTTP/1.1 200 OK\r\n") || strings.Contains(string(out), "103") || !strings.HasSuffix(string(out), "ok extension=1") {
		t.Errorf("HTTP/1.0 over TLS /hints:\n%q", out)
	}
}
