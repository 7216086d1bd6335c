package tests

// Proxy headers, the request scheme and the PROXY protocol
// (internal/proxy), against the real binary: trust is decided by the peer
// address, so the tests dial from a second loopback address (127.0.0.2)
// with net.Dialer.LocalAddr.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pires/go-proxyproto"
)

// dialFrom opens a TCP connection to addr from the local IP from.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange writes one GET with the extra header lines on c and returns
// the decoded JSON body (the connection stays open).
func exchange(t *testing.T, c net.Conn, br *bufio.Reader, path string, headers ...string) map[string]any {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: internal:8000\r\n"
	for _, h := range headers {
		req += h + "\r\n"
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return out
}

// fetch is exchange on a new connection from the local IP from.
func fetch(t *testing.T, s *Server, from string, headers ...string) map[string]any {
	t.Helper()
	c := dialFrom(t, from, s.Addr)
	return exchange(t, c, bufio.NewReader(c), "/", headers...)
}

// expect compares the keys of want with got (numbers as JSON numbers).
func expect(t *testing.T, what string, got map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s: %s = %v, want %v (all: %v)", what, k, got[k], v, got)
		}
	}
}

var forwarded = []string{"X-Forwarded-For: 203.0.113.7", "X-Forwarded-Proto: https", "X-Forwarded-Host: example.com"}

// TestProxy_TrustFromSecondLoopback: with the default trust (127.0.0.1,
// ::1) the headers apply from 127.0.0.1 and not from 127.0.0.2; with
// --forwarded-allow-ips 127.0.0.2 the reverse. Also: a kept-alive
// connection judges each request afresh.
func TestProxy_TrustFromSecondLoopback(t *testing.T) {
	applied := map[string]any{"REMOTE_ADDR": "203.0.113.7", "REMOTE_PORT": "0", "wsgi.url_scheme": "https",
		"interned": true, "HTTP_HOST": "example.com", "SERVER_NAME": "example.com", "SERVER_PORT": "443"}
	notApplied := func(from string) map[string]any {
		return map[string]any{"REMOTE_ADDR": from, "wsgi.url_scheme": "http", "interned": true,
			"HTTP_HOST": "internal:8000", "SERVER_NAME": "internal", "SERVER_PORT": "8000",
			"HTTP_X_FORWARDED_FOR": "203.0.113.7"}
	}

	s := Start(t, "proxy_echo:wsgi_app")
	expect(t, "default trust, from 127.0.0.1", fetch(t, s, "127.0.0.1", forwarded...), applied)
	expect(t, "default trust, from 127.0.0.2", fetch(t, s, "127.0.0.2", forwarded...), notApplied("127.0.0.2"))

	// One kept-alive connection: forwarded, then plain, then forwarded.
	c := dialFrom(t, "127.0.0.1", s.Addr)
	br := bufio.NewReader(c)
	expect(t, "keep-alive 1", exchange(t, c, br, "/", forwarded...), applied)
	plain := exchange(t, c, br, "/")
	expect(t, "keep-alive 2 (no headers)", plain, map[string]any{"REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http", "HTTP_HOST": "internal:8000", "SERVER_PORT": "8000"})
	expect(t, "keep-alive 3", exchange(t, c, br, "/", "X-Forwarded-For: 198.51.100.9"), map[string]any{"REMOTE_ADDR": "198.51.100.9", "wsgi.url_scheme": "http"})

	s2 := Start(t, "--forwarded-allow-ips", "127.0.0.2", "proxy_echo:wsgi_app")
	expect(t, "127.0.0.2 trusted, from 127.0.0.2", fetch(t, s2, "127.0.0.2", forwarded...), applied)
	expect(t, "127.0.0.2 trusted, from 127.0.0.1", fetch(t, s2, "127.0.0.1", forwarded...), notApplied("127.0.0.1"))

	// FORWARDED_ALLOW_IPS, as uvicorn and gunicorn read it; the flag wins.
	t.Setenv("FORWARDED_ALLOW_IPS", "127.0.0.2/32")
	s3 := Start(t, "proxy_echo:wsgi_app")
	expect(t, "FORWARDED_ALLOW_IPS=127.0.0.2/32, from 127.0.0.2", fetch(t, s3, "127.0.0.2", forwarded...), applied)
	expect(t, "FORWARDED_ALLOW_IPS=127.0.0.2/32, from 127.0.0.1", fetch(t, s3, "127.0.0.1", forwarded...), notApplied("127.0.0.1"))
	s4 := Start(t, "--forwarded-allow-ips", "127.0.0.1", "proxy_echo:wsgi_app")
	expect(t, "flag over FORWARDED_ALLOW_IPS", fetch(t, s4, "127.0.0.1", forwarded...), applied)
}

// TestProxy_XForwardedForChain: the client is the rightmost hop not
// trusted, across several fields; garbage leaves the peer's address and
// is never an error.
func TestProxy_XForwardedForChain(t *testing.T) {
	s := Start(t, "--forwarded-allow-ips", "127.0.0.1, 10.0.0.0/8", "proxy_echo:wsgi_app")
	cases := []struct {
		name    string
		headers []string
		want    map[string]any
	}{
		{"four hops", []string{"X-Forwarded-For: 198.51.100.1, 203.0.113.7, 10.1.1.1, 10.2.2.2"}, map[string]any{"REMOTE_ADDR": "203.0.113.7"}},
		{"two fields", []string{"X-Forwarded-For: 198.51.100.1, 203.0.113.7", "X-Forwarded-For: 10.1.1.1"}, map[string]any{"REMOTE_ADDR": "203.0.113.7"}},
		{"all trusted", []string{"X-Forwarded-For: 10.3.3.3, 10.1.1.1"}, map[string]any{"REMOTE_ADDR": "10.3.3.3"}},
		{"port", []string{"X-Forwarded-For: 203.0.113.7:5555"}, map[string]any{"REMOTE_ADDR": "203.0.113.7", "REMOTE_PORT": "5555"}},
		{"IPv6", []string{"X-Forwarded-For: 2001:db8::7, 10.1.1.1"}, map[string]any{"REMOTE_ADDR": "2001:db8::7"}},
		{"proto per hop", []string{"X-Forwarded-For: 203.0.113.7, 10.1.1.1", "X-Forwarded-Proto: https, http"}, map[string]any{"REMOTE_ADDR": "203.0.113.7", "wsgi.url_scheme": "https"}},
		{"garbage hop", []string{"X-Forwarded-For: 203.0.113.7, not-an-ip, 10.1.1.1"}, map[string]any{"REMOTE_ADDR": "127.0.0.1"}},
		{"garbage proto", []string{"X-Forwarded-Proto: javascript"}, map[string]any{"wsgi.url_scheme": "http"}},
		{"garbage host", []string{"X-Forwarded-Host: a b"}, map[string]any{"HTTP_HOST": "internal:8000"}},
		{"host and port", []string{"X-Forwarded-Host: example.com", "X-Forwarded-Port: 8443", "X-Forwarded-Proto: https"},
			map[string]any{"HTTP_HOST": "example.com:8443", "SERVER_NAME": "example.com", "SERVER_PORT": "8443", "wsgi.url_scheme": "https"}},
		{"X-Forwarded-* wins over Forwarded", []string{"Forwarded: for=198.51.100.1;proto=https", "X-Forwarded-For: 203.0.113.7"},
			map[string]any{"REMOTE_ADDR": "203.0.113.7", "wsgi.url_scheme": "http"}},
	}
	for _, c := range cases {
		expect(t, c.name, fetch(t, s, "127.0.0.1", c.headers...), c.want)
	}
}

// TestProxy_Forwarded: RFC 7239 with a quoted IPv6 node, obfuscated and
// unknown hops, in WSGI and ASGI.
func TestProxy_Forwarded(t *testing.T) {
	ipv6 := `Forwarded: for="[2001:db8:cafe::17]:4711";proto=https;host=example.com`
	s := Start(t, "proxy_echo:wsgi_app")
	expect(t, "quoted IPv6", fetch(t, s, "127.0.0.1", ipv6), map[string]any{
		"REMOTE_ADDR": "2001:db8:cafe::17", "REMOTE_PORT": "4711", "wsgi.url_scheme": "https",
		"HTTP_HOST": "example.com", "SERVER_PORT": "443"})
	expect(t, "chain", fetch(t, s, "127.0.0.1", "Forwarded: for=192.0.2.43, for=198.51.100.17;proto=https, for=127.0.0.1"),
		map[string]any{"REMOTE_ADDR": "198.51.100.17", "wsgi.url_scheme": "https"})
	expect(t, "obfuscated", fetch(t, s, "127.0.0.1", "Forwarded: for=_hidden;proto=https"),
		map[string]any{"REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "https"})
	expect(t, "unknown", fetch(t, s, "127.0.0.1", "Forwarded: for=unknown"), map[string]any{"REMOTE_ADDR": "127.0.0.1"})
	expect(t, "malformed", fetch(t, s, "127.0.0.1", `Forwarded: for="[2001:db8::1`), map[string]any{"REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http"})
	expect(t, "untrusted peer", fetch(t, s, "127.0.0.2", ipv6), map[string]any{"REMOTE_ADDR": "127.0.0.2", "wsgi.url_scheme": "http"})

	a := Start(t, "proxy_echo:asgi_app")
	got := fetch(t, a, "127.0.0.1", ipv6)
	expect(t, "ASGI quoted IPv6", got, map[string]any{"scheme": "https", "interned": true, "client": []any{"2001:db8:cafe::17", 4711}, "host": "example.com"})
}

// TestProxy_ASGIScheme: X-Forwarded-Proto reaches the HTTP scope's
// scheme and the WebSocket scope's (ws/wss), interned; a plain request
// keeps http/ws.
func TestProxy_ASGIScheme(t *testing.T) {
	s := Start(t, "proxy_echo:asgi_app")
	expect(t, "https", fetch(t, s, "127.0.0.1", forwarded...), map[string]any{
		"type": "http", "scheme": "https", "interned": true, "client": []any{"203.0.113.7", 0}, "host": "example.com"})
	expect(t, "plain", fetch(t, s, "127.0.0.1"), map[string]any{"scheme": "http", "interned": true, "host": "internal:8000"})
	expect(t, "untrusted", fetch(t, s, "127.0.0.2", forwarded...), map[string]any{"scheme": "http", "host": "internal:8000"})

	ws := func(from string, headers ...string) map[string]any {
		t.Helper()
		d := websocket.Dialer{HandshakeTimeout: 10 * time.Second,
			NetDial: func(network, addr string) (net.Conn, error) {
				return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).Dial(network, addr)
			}}
		h := http.Header{}
		for _, kv := range headers {
			k, v, _ := strings.Cut(kv, ": ")
			h.Add(k, v)
		}
		c, _, err := d.Dial("ws://"+s.Addr+"/ws", h)
		if err != nil {
			t.Fatalf("websocket dial: %v", err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("websocket read: %v", err)
		}
		var out map[string]any
		if err := json.Unmarshal(msg, &out); err != nil {
			t.Fatalf("websocket message %q: %v", msg, err)
		}
		return out
	}
	expect(t, "ws https", ws("127.0.0.1", forwarded...), map[string]any{"type": "websocket", "scheme": "wss", "interned": true, "client": []any{"203.0.113.7", 0}})
	expect(t, "ws wss", ws("127.0.0.1", "X-Forwarded-Proto: wss"), map[string]any{"scheme": "wss"})
	expect(t, "ws plain", ws("127.0.0.1"), map[string]any{"scheme": "ws", "interned": true})
	expect(t, "ws untrusted", ws("127.0.0.2", forwarded...), map[string]any{"scheme": "ws"})
}

// TestProxy_Off: --no-proxy-headers ignores the headers even from a
// trusted peer; X-Forwarded-Prefix is never trusted (--root-path is the
// mount prefix).
func TestProxy_Off(t *testing.T) {
	s := Start(t, "--no-proxy-headers", "proxy_echo:wsgi_app")
	expect(t, "off", fetch(t, s, "127.0.0.1", forwarded...), map[string]any{"REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http", "HTTP_HOST": "internal:8000"})

	r := Start(t, "--root-path", "/app", "proxy_echo:wsgi_app")
	c := dialFrom(t, "127.0.0.1", r.Addr)
	got := exchange(t, c, bufio.NewReader(c), "/app/x", "X-Forwarded-Prefix: /evil")
	expect(t, "X-Forwarded-Prefix", got, map[string]any{"SCRIPT_NAME": "/app", "PATH_INFO": "/x", "HTTP_X_FORWARDED_PREFIX": "/evil"})

	if code, out := runBadFlag(t, "--forwarded-allow-ips", "10.0.0.0/8,localhost"); code != 2 || !strings.Contains(out, "localhost") {
		t.Errorf("bad --forwarded-allow-ips: exit %d, output %q", code, out)
	}
}

// TestProxy_UnixSocket: a Unix-socket peer is trusted (only processes the
// socket file lets in can connect: the reverse proxy), in WSGI and ASGI.
func TestProxy_UnixSocket(t *testing.T) {
	for _, app := range []string{"proxy_echo:wsgi_app", "proxy_echo:asgi_app"} {
		sock := filepath.Join(t.TempDir(), "ts.sock")
		Start(t, "--uds", sock, app)
		c, err := net.DialTimeout("unix", sock, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got := exchange(t, c, bufio.NewReader(c), "/", forwarded...)
		if strings.HasSuffix(app, "wsgi_app") {
			expect(t, "WSGI over a Unix socket", got, map[string]any{"REMOTE_ADDR": "203.0.113.7", "wsgi.url_scheme": "https", "HTTP_HOST": "example.com"})
		} else {
			expect(t, "ASGI over a Unix socket", got, map[string]any{"client": []any{"203.0.113.7", 0}, "scheme": "https", "host": "example.com"})
		}
	}
}

func runBadFlag(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := Command(t, append(args, "proxy_echo:wsgi_app")...)
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

// readClosed reads c until the server closes it and returns what came.
func readClosed(t *testing.T, c net.Conn) (string, bool) {
	t.Helper()
	return ReadAll(c, 20*time.Second)
}

// TestProxy_Protocol: --proxy-protocol v1 and v2 over raw TCP; the
// header's source is the client, and proxy headers apply on top when it
// is trusted; a trusted peer without a valid header, and an untrusted
// peer with one, are closed.
func TestProxy_Protocol(t *testing.T) {
	s := Start(t, "--proxy-protocol", "--forwarded-allow-ips", "127.0.0.1,10.0.0.0/8", "--timeout-request-header", "3s", "proxy_echo:wsgi_app")

	// v1, then a second request on the same connection.
	c := dialFrom(t, "127.0.0.1", s.Addr)
	io.WriteString(c, "PROXY TCP4 198.51.100.7 127.0.0.1 4711 8000\r\n")
	br := bufio.NewReader(c)
	expect(t, "v1", exchange(t, c, br, "/"), map[string]any{"REMOTE_ADDR": "198.51.100.7", "REMOTE_PORT": "4711"})
	expect(t, "v1, second request", exchange(t, c, br, "/", "X-Forwarded-For: 203.0.113.7"), map[string]any{"REMOTE_ADDR": "198.51.100.7"})

	// v2 (IPv6) from go-proxyproto's writer.
	c = dialFrom(t, "127.0.0.1", s.Addr)
	h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP("2001:db8::7"), Port: 5000}, &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443})
	if _, err := h.WriteTo(c); err != nil {
		t.Fatal(err)
	}
	expect(t, "v2", exchange(t, c, bufio.NewReader(c), "/"), map[string]any{"REMOTE_ADDR": "2001:db8::7", "REMOTE_PORT": "5000"})

	// The load balancer's source is a trusted proxy: its headers apply.
	c = dialFrom(t, "127.0.0.1", s.Addr)
	io.WriteString(c, "PROXY TCP4 10.0.0.5 10.0.0.1 40000 80\r\n")
	expect(t, "v1 + X-Forwarded-For", exchange(t, c, bufio.NewReader(c), "/", forwarded...), map[string]any{"REMOTE_ADDR": "203.0.113.7", "wsgi.url_scheme": "https"})

	// Required from 127.0.0.1: a plain request, or a bad header, is closed.
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"PROXY TCP4 198.51.100.7 nonsense 1 2\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"PROXY TCP9 198.51.100.7 127.0.0.1 1 2\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\xff", // a v2 signature with a bad length
	} {
		c = dialFrom(t, "127.0.0.1", s.Addr)
		io.WriteString(c, raw)
		if out, closed := readClosed(t, c); !closed || out != "" {
			t.Errorf("%q: closed=%v, got %q", raw, closed, out)
		}
	}
	// A silent trusted peer is closed after the header timeout, and does
	// not hold up other connections meanwhile.
	silent := dialFrom(t, "127.0.0.1", s.Addr)
	c = dialFrom(t, "127.0.0.1", s.Addr)
	io.WriteString(c, "PROXY TCP4 198.51.100.8 127.0.0.1 1 2\r\n")
	expect(t, "beside a silent peer", exchange(t, c, bufio.NewReader(c), "/"), map[string]any{"REMOTE_ADDR": "198.51.100.8"})
	if out, closed := readClosed(t, silent); !closed || out != "" {
		t.Errorf("silent peer: closed=%v, got %q", closed, out)
	}

	// From 127.0.0.2 (untrusted): plain is served, a header is refused.
	expect(t, "untrusted plain", fetch(t, s, "127.0.0.2"), map[string]any{"REMOTE_ADDR": "127.0.0.2"})
	c = dialFrom(t, "127.0.0.2", s.Addr)
	io.WriteString(c, "PROXY TCP4 198.51.100.7 127.0.0.1 4711 8000\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if out, closed := readClosed(t, c); !closed || out != "" {
		t.Errorf("untrusted header: closed=%v, got %q", closed, out)
	}
	if !strings.Contains(s.Logs(), "proxy protocol: connection closed") {
		t.Errorf("no warning logged for a refused connection")
	}
}

// TestProxy_ProtocolTLS: behind a TCP load balancer that passes TLS
// through, the PROXY header comes first on the wire, then the TLS
// handshake: the app sees the header's client and https (from TLS, not
// from a header), in WSGI and, over HTTP/2 by ALPN, too.
func TestProxy_ProtocolTLS(t *testing.T) {
	pki := newPKI(t)
	s := Start(t, append(pki.TLSArgs(), "--proxy-protocol", "proxy_echo:wsgi_app")...)
	for _, proto := range []string{"http/1.1", "h2"} {
		c := dialFrom(t, "127.0.0.1", s.Addr)
		io.WriteString(c, "PROXY TCP4 198.51.100.7 127.0.0.1 4711 443\r\n")
		tc := tls.Client(c, &tls.Config{RootCAs: pki.Pool, ServerName: "localhost", NextProtos: []string{proto}})
		tc.SetDeadline(time.Now().Add(30 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Fatalf("%s: handshake after the PROXY header: %v", proto, err)
		}
		var got map[string]any
		if proto == "h2" {
			if np := tc.ConnectionState().NegotiatedProtocol; np != "h2" {
				t.Fatalf("ALPN: %q", np)
			}
			// One request over this very connection: net/http's HTTP/2
			// client takes the dialled TLS conn from DialTLSContext.
			used := false
			tr2 := &http.Transport{ForceAttemptHTTP2: true}
			tr2.Protocols = new(http.Protocols)
			tr2.Protocols.SetHTTP2(true)
			tr2.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if used {
					return nil, fmt.Errorf("a second connection")
				}
				used = true
				return tc, nil
			}
			resp, err := (&http.Client{Transport: tr2, Timeout: 30 * time.Second}).Get("https://localhost/")
			if err != nil {
				t.Fatalf("h2 GET: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 {
				t.Errorf("h2: response over %s", resp.Proto)
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("h2 body %q: %v", body, err)
			}
			tr2.CloseIdleConnections()
		} else {
			got = exchange(t, tc, bufio.NewReader(tc), "/")
		}
		expect(t, "TLS after PROXY, "+proto, got, map[string]any{"REMOTE_ADDR": "198.51.100.7", "REMOTE_PORT": "4711", "wsgi.url_scheme": "https"})
	}
}

// TestProxy_HeaderWithoutFlag: a host started without --proxy-protocol
// behind a balancer that sends PROXY headers (issue 23's review). The
// balancer's checks go to the admin listener and pass, so the host stays
// in and every request sent to it failed with a 400 that named no cause
// ("bare LF in request head" for v2, "malformed request line" for v1)
// and no log line. Now: a 400 that says what arrived, and one warning
// naming the flag.
func TestProxy_HeaderWithoutFlag(t *testing.T) {
	s := Start(t, "proxy_echo:wsgi_app")
	v2 := "\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xc6\x33\x64\x07\x7f\x00\x00\x01\x12\x67\x1f\x40"
	for _, raw := range []string{
		v2 + "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"PROXY TCP4 198.51.100.7 127.0.0.1 4711 8000\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		out, _ := Raw(t, s.Addr, raw, 10*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.1 400 ") || !strings.Contains(out, "PROXY protocol header") {
			t.Errorf("%q: got %q, want a 400 naming the PROXY protocol header", raw[:12], out)
		}
	}
	// The worker's log reaches the master's through a pipe: wait for it.
	warned := func(rec map[string]any) bool {
		m, _ := rec["msg"].(string)
		return strings.Contains(m, "--proxy-protocol is off")
	}
	waitLogRecords(s.Logs, 5*time.Second, warned)
	if n := strings.Count(s.Logs(), "--proxy-protocol is off"); n != 1 {
		t.Errorf("%d warnings naming --proxy-protocol, want 1 (at most one a second):\n%s", n, s.Logs())
	}
	// A request line that only starts like one is the app's.
	out, _ := Raw(t, s.Addr, "PROXYFIND / HTTP/1.1\r\nHost: x\r\n\r\n", 10*time.Second)
	if strings.Contains(out, "PROXY protocol header") {
		t.Errorf("PROXYFIND taken for a PROXY header: %q", out)
	}
	// Over TLS (HAProxy in mode tcp): the header is what the handshake reads.
	pki := newPKI(t)
	s = Start(t, append(pki.TLSArgs(), "proxy_echo:wsgi_app")...)
	for _, raw := range []string{v2, "PROXY TCP4 198.51.100.7 127.0.0.1 4711 8443\r\n"} {
		out, _ := Raw(t, s.Addr, raw+"\x16\x03\x01\x00\x05hello", 10*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.0 400 ") || !strings.Contains(out, "PROXY protocol header") {
			t.Errorf("TLS, %q: got %q, want a 400 naming the PROXY protocol header", raw[:12], out)
		}
	}
	if len(waitLogRecords(s.Logs, 5*time.Second, warned)) == 0 {
		t.Errorf("TLS: no warning naming --proxy-protocol:\n%s", s.Logs())
	}
}
