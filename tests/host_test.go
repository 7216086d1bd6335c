package tests

// One host for every interface and protocol (issue 27, "host confusion"):
// the request's host is decided once in Go (internal/http1 and
// internal/proxy) and WSGI's HTTP_HOST and the ASGI scope's "host" header
// carry the same value. Served by testapps/host_echo.py.

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// hostOf sends raw on a new connection and returns the first line of the
// response body and the status line.
func hostOf(t *testing.T, s *Server, raw string) (status, body string) {
	t.Helper()
	resp, _ := Raw(t, s.Addr, raw, 10*time.Second)
	status = firstLine(resp)
	if i := strings.Index(resp, "\r\n\r\n"); i >= 0 {
		body = strings.TrimSpace(resp[i+4:])
		if j := strings.IndexByte(body, '\n'); j >= 0 {
			body = body[:j]
		}
	}
	return status, body
}

func TestHost_OneRuleForBothInterfaces(t *testing.T) {
	wsgi := Start(t, "--forwarded-allow-ips", "127.0.0.1", "host_echo:wsgi_app")
	asgi := Start(t, "--forwarded-allow-ips", "127.0.0.1", "host_echo:asgi_app")

	cases := []struct {
		name, raw  string
		wsgi, asgi string // the host each app must see (first field of its answer)
	}{
		// RFC 9112 §3.2.2: the authority of an absolute-form target wins
		// over Host. The ASGI scope carried the raw Host field.
		{"absolute-form", "GET http://evil.example/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", "evil.example", "evil.example"},
		{"absolute-form-port", "GET https://a.example:8443/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", "a.example:8443", "a.example:8443"},
		// HTTP/1.0 may omit Host; the absolute-form authority is the host.
		{"absolute-form-1.0", "GET http://b.example/x HTTP/1.0\r\n\r\n", "b.example", "b.example"},
		{"origin-form", "GET /x HTTP/1.1\r\nHost: c.example\r\nConnection: close\r\n\r\n", "c.example", "c.example"},
		// A trusted proxy's X-Forwarded-Host wins over both.
		{"forwarded-host", "GET http://evil.example/x HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-Host: d.example\r\nConnection: close\r\n\r\n", "d.example", "d.example"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws, wb := hostOf(t, wsgi, c.raw)
			as, ab := hostOf(t, asgi, c.raw)
			if !strings.Contains(ws, " 200 ") || !strings.Contains(as, " 200 ") {
				t.Fatalf("status WSGI %q, ASGI %q; want 200", ws, as)
			}
			if got := strings.Fields(wb)[0]; got != c.wsgi {
				t.Errorf("WSGI HTTP_HOST = %q (%q); want %q", got, wb, c.wsgi)
			}
			if got := strings.Fields(ab)[0]; got != c.asgi {
				t.Errorf("ASGI host header(s) = %q (%q); want %q", got, ab, c.asgi)
			}
		})
	}

	// HTTP/2 (h2c with prior knowledge): :authority is the host, one
	// "host" entry reaches the app; a Host field naming another entity
	// makes the request malformed (RFC 9113 §8.3.1): a stream error of
	// type PROTOCOL_ERROR (§8.1.1), never a request.
	for _, s := range []*Server{wsgi, asgi} {
		status, body := h2Raw(t, s.Addr, "e.example", "")
		if status != "200" || strings.Fields(body)[0] != "e.example" {
			t.Errorf("h2 :authority e.example: %s %q; want 200 and e.example", status, body)
		}
		status, body = h2Raw(t, s.Addr, "e.example", "e.example")
		if status != "200" || strings.Fields(body)[0] != "e.example" {
			t.Errorf("h2 :authority e.example, Host e.example: %s %q; want 200 and e.example", status, body)
		}
		if status, _ = h2Raw(t, s.Addr, "e.example", "localhost"); status != "RST_STREAM PROTOCOL_ERROR" {
			t.Errorf("h2 :authority e.example, Host localhost: %s; want RST_STREAM PROTOCOL_ERROR", status)
		}
	}
}

// h2Raw sends one GET / with the given :authority and, when host is not
// empty, a regular "host" field (Go's client never sends one), over h2c
// with prior knowledge, and returns the :status and the body.
func h2Raw(t *testing.T, addr, authority, host string) (status, body string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", authority}, {":path", "/"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if host != "" {
		enc.WriteField(hpack.HeaderField{Name: "host", Value: host})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	var out bytes.Buffer
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("h2 :authority %s host %q: %v (status %q)", authority, host, err, status)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			status = f.PseudoValue("status")
			if f.StreamEnded() {
				return status, out.String()
			}
		case *http2.DataFrame:
			out.Write(f.Data())
			if f.StreamEnded() {
				return status, out.String()
			}
		case *http2.RSTStreamFrame:
			return "RST_STREAM " + f.ErrCode.String(), ""
		case *http2.GoAwayFrame:
			return "GOAWAY " + f.ErrCode.String(), ""
		}
	}
}
