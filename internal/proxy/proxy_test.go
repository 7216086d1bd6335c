package proxy

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"turnstile/internal/http1"
)

func mustList(t testing.TB, s string) *AllowList {
	t.Helper()
	a, err := ParseAllowList(s)
	if err != nil {
		t.Fatalf("ParseAllowList(%q): %v", s, err)
	}
	return a
}

func TestParseAllowList(t *testing.T) {
	a := mustList(t, " 127.0.0.1, ::1 ,10.0.0.0/8,fd00::/8,, ::ffff:192.0.2.9")
	for ip, want := range map[string]bool{
		"127.0.0.1": true, "127.0.0.2": false, "::1": true, "10.200.3.4": true,
		"11.0.0.1": false, "fd12::5": true, "fe80::1": false, "192.0.2.9": true,
		"::ffff:127.0.0.1": true, // an IPv4-mapped peer is its IPv4 address
	} {
		if got := a.Contains(netip.MustParseAddr(ip)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", ip, got, want)
		}
	}
	if !mustList(t, "*").Contains(netip.MustParseAddr("203.0.113.7")) {
		t.Error("* does not trust everything")
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "1.2.3", "fe80::1%eth0", "*x"} {
		if _, err := ParseAllowList(bad); err == nil {
			t.Errorf("ParseAllowList(%q): no error", bad)
		}
	}
	if !a.Peer(&net.UnixAddr{Name: "@", Net: "unix"}) {
		t.Error("a Unix-socket peer is not trusted")
	}
	if a.Peer(&net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 5}) {
		t.Error("127.0.0.2 is trusted")
	}
}

func fields(kv ...string) []http1.Field {
	var f []http1.Field
	for i := 0; i < len(kv); i += 2 {
		f = append(f, http1.Field{Name: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return f
}

type want struct {
	client string // "" = none
	port   int
	scheme string
	host   string // "" = unchanged
}

func check(t *testing.T, name string, res Result, w want) {
	t.Helper()
	client := ""
	if res.Client.IsValid() {
		client = res.Client.String()
	}
	if client != w.client || res.ClientPort != w.port || res.Scheme != w.scheme || string(res.Host) != w.host {
		t.Errorf("%s: got client=%q port=%d scheme=%q host=%q; want %+v", name, client, res.ClientPort, res.Scheme, res.Host, w)
	}
}

func TestResolveXForwarded(t *testing.T) {
	trusted := mustList(t, "127.0.0.1,10.0.0.0/8")
	cases := []struct {
		name string
		f    []http1.Field
		host string
		w    want
	}{
		{"one hop", fields("X-Forwarded-For", "203.0.113.7"), "", want{client: "203.0.113.7"}},
		{"chain: rightmost untrusted", fields("X-Forwarded-For", "198.51.100.1, 203.0.113.7, 10.1.1.1, 10.2.2.2"), "", want{client: "203.0.113.7"}},
		{"chain across fields", fields("x-forwarded-for", "198.51.100.1, 203.0.113.7", "X-FORWARDED-FOR", "10.1.1.1"), "", want{client: "203.0.113.7"}},
		{"all trusted: leftmost", fields("X-Forwarded-For", "10.9.9.9, 10.1.1.1"), "", want{client: "10.9.9.9"}},
		{"with ports", fields("X-Forwarded-For", "[2001:db8::7]:4711, 203.0.113.7:8080"), "", want{client: "203.0.113.7", port: 8080}},
		{"bare IPv6", fields("X-Forwarded-For", "2001:db8::7"), "", want{client: "2001:db8::7"}},
		{"bracketed IPv6 with port", fields("X-Forwarded-For", "[2001:db8::7]:4711"), "", want{client: "2001:db8::7", port: 4711}},
		{"garbage hop stops the walk", fields("X-Forwarded-For", "203.0.113.7, evil, 10.1.1.1"), "", want{}},
		{"empty", fields("X-Forwarded-For", ""), "", want{}},
		{"bad port", fields("X-Forwarded-For", "203.0.113.7:99999"), "", want{}},
		{"proto https", fields("X-Forwarded-Proto", "https"), "", want{scheme: "https"}},
		{"proto WSS", fields("X-Forwarded-Proto", "WSS"), "", want{scheme: "https"}},
		{"proto ws", fields("X-Forwarded-Proto", "ws"), "", want{scheme: "http"}},
		{"proto junk", fields("X-Forwarded-Proto", "gopher"), "", want{}},
		{"proto list aligned with the client's hop", fields("X-Forwarded-For", "203.0.113.7, 10.1.1.1", "X-Forwarded-Proto", "https, http"), "", want{client: "203.0.113.7", scheme: "https"}},
		{"proto single value behind two hops", fields("X-Forwarded-For", "203.0.113.7, 10.1.1.1", "X-Forwarded-Proto", "https"), "", want{client: "203.0.113.7", scheme: "https"}},
		{"host", fields("X-Forwarded-Host", "example.com"), "internal:8000", want{host: "example.com"}},
		{"host with port", fields("X-Forwarded-Host", "example.com:8443"), "internal", want{host: "example.com:8443"}},
		{"bad host", fields("X-Forwarded-Host", "exa mple.com"), "internal", want{}},
		{"bad host CRLF-free junk", fields("X-Forwarded-Host", "a/b"), "internal", want{}},
		{"host and port", fields("X-Forwarded-Host", "example.com", "X-Forwarded-Port", "8443", "X-Forwarded-Proto", "https"), "internal", want{scheme: "https", host: "example.com:8443"}},
		{"default port dropped", fields("X-Forwarded-Host", "example.com:80", "X-Forwarded-Port", "443", "X-Forwarded-Proto", "https"), "internal", want{scheme: "https", host: "example.com"}},
		{"port alone replaces Host's", fields("X-Forwarded-Port", "9000"), "internal:8000", want{host: "internal:9000"}},
		{"port alone, IPv6 Host", fields("X-Forwarded-Port", "9000"), "[::1]:8000", want{host: "[::1]:9000"}},
		{"bad port ignored", fields("X-Forwarded-Port", "0"), "internal:8000", want{}},
		{"X-Forwarded-* wins over Forwarded", fields("Forwarded", "for=198.51.100.1;proto=https", "X-Forwarded-For", "203.0.113.7"), "", want{client: "203.0.113.7"}},
	}
	for _, c := range cases {
		check(t, c.name, Resolve(c.f, []byte(c.host), trusted), c.w)
	}
}

func TestResolveForwarded(t *testing.T) {
	trusted := mustList(t, "127.0.0.1,10.0.0.0/8,2001:db8:ffff::/48")
	cases := []struct {
		name string
		v    []string
		w    want
	}{
		{"one", []string{"for=192.0.2.60;proto=https;by=203.0.113.43"}, want{client: "192.0.2.60", scheme: "https"}},
		{"case-insensitive names", []string{"For=192.0.2.60;PROTO=http;Host=example.com"}, want{client: "192.0.2.60", scheme: "http", host: "example.com"}},
		{"quoted IPv6 with port", []string{`for="[2001:db8:cafe::17]:4711"`}, want{client: "2001:db8:cafe::17", port: 4711}},
		{"quoted IPv6", []string{`For="[2001:db8:cafe::17]"`}, want{client: "2001:db8:cafe::17"}},
		{"chain", []string{"for=192.0.2.43, for=198.51.100.17;proto=https, for=10.0.0.1"}, want{client: "198.51.100.17", scheme: "https"}},
		{"chain across fields", []string{"for=192.0.2.43", "for=10.0.0.2;proto=https"}, want{client: "192.0.2.43", scheme: "https"}},
		{"trusted IPv6 hop", []string{`for=192.0.2.43, for="[2001:db8:ffff::1]"`}, want{client: "192.0.2.43"}},
		{"unknown stops the walk", []string{"for=192.0.2.43, for=unknown;proto=https, for=10.0.0.1"}, want{scheme: "https"}},
		{"obfuscated stops the walk", []string{"for=_hidden;host=example.com, for=10.0.0.1"}, want{host: "example.com"}},
		{"obfuscated port", []string{`for="192.0.2.43:_p1"`}, want{client: "192.0.2.43"}},
		{"no for", []string{"proto=https;host=example.com"}, want{scheme: "https", host: "example.com"}},
		{"quoted host with escape", []string{`host="exam\ple.com";for=192.0.2.1`}, want{client: "192.0.2.1", host: "example.com"}},
		{"quoted comma", []string{`for=192.0.2.1;host="a,b", for=10.0.0.1`}, want{client: "192.0.2.1", host: "a,b"}}, // sub-delims are host characters
		{"empty list elements", []string{", ,for=192.0.2.1,"}, want{client: "192.0.2.1"}},
		{"all trusted: leftmost", []string{"for=10.0.0.9, for=10.0.0.1"}, want{client: "10.0.0.9"}},
		{"unquoted IPv6 is a syntax error", []string{"for=[2001:db8::1]"}, want{}},
		{"duplicate parameter", []string{"for=192.0.2.1;for=192.0.2.2"}, want{}},
		{"unterminated quote", []string{`for="192.0.2.1`}, want{}},
		{"missing value", []string{"for="}, want{}},
		{"one bad field spoils all", []string{"for=192.0.2.1", "for=="}, want{}},
		{"bad proto ignored", []string{"for=192.0.2.1;proto=ftp"}, want{client: "192.0.2.1"}},
	}
	for _, c := range cases {
		var f []http1.Field
		for _, v := range c.v {
			f = append(f, http1.Field{Name: []byte("Forwarded"), Value: []byte(v)})
		}
		check(t, c.name, Resolve(f, nil, trusted), c.w)
	}
}

type recorder struct {
	remote net.Addr
	scheme string
	host   string
	hostF  string
}

func (rec *recorder) ServeHTTP1(w *http1.ResponseWriter, r *http1.Request) {
	rec.remote, rec.scheme, rec.host = r.RemoteAddr, r.Scheme, string(r.Host)
	rec.hostF = string(r.HeaderValue("host"))
}

func TestHeadersRestores(t *testing.T) {
	rec := &recorder{}
	h := &Headers{Next: rec, Trusted: mustList(t, "127.0.0.1")}
	peer := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555}
	r := &http1.Request{RemoteAddr: peer, Host: []byte("internal"),
		Header: fields("Host", "internal", "X-Forwarded-For", "203.0.113.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.com")}
	h.ServeHTTP1(nil, r)
	if rec.remote.String() != "203.0.113.7:0" || rec.scheme != "https" || rec.host != "example.com" || rec.hostF != "example.com" {
		t.Errorf("the app saw %v %q %q %q", rec.remote, rec.scheme, rec.host, rec.hostF)
	}
	if r.RemoteAddr != peer || r.Scheme != "" || string(r.Host) != "internal" || string(r.HeaderValue("host")) != "internal" {
		t.Errorf("not restored: %v %q %q %q", r.RemoteAddr, r.Scheme, r.Host, r.HeaderValue("host"))
	}
	// An untrusted peer changes nothing.
	r.RemoteAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 5555}
	h.ServeHTTP1(nil, r)
	if rec.remote != r.RemoteAddr || rec.scheme != "" || rec.host != "internal" {
		t.Errorf("untrusted peer: the app saw %v %q %q", rec.remote, rec.scheme, rec.host)
	}
}

func TestResolveNoAllocs(t *testing.T) {
	trusted := mustList(t, "127.0.0.1")
	f := fields("Host", "x", "User-Agent", "y", "X-Forwarded-For", "203.0.113.7, 127.0.0.1", "X-Forwarded-Proto", "https")
	if n := testing.AllocsPerRun(100, func() { Resolve(f, nil, trusted) }); n != 0 {
		t.Errorf("Resolve allocates %v times", n)
	}
	f = fields("Host", "x", "Forwarded", `for="[2001:db8::1]:80";proto=https, for=127.0.0.1`)
	if n := testing.AllocsPerRun(100, func() { Resolve(f, nil, trusted) }); n != 0 {
		t.Errorf("Resolve (Forwarded) allocates %v times", n)
	}
}

// serveOne accepts on a proxy Listener and reports the first line read
// and the addresses, or the read error.
type accepted struct {
	line          string
	remote, local string
	err           error
}

func proxyListener(t *testing.T, trusted string, timeout time.Duration) (*Listener, chan accepted) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pl := &Listener{Listener: ln, Trusted: mustList(t, trusted), HeaderTimeout: timeout}
	t.Cleanup(func() { pl.Close() })
	out := make(chan accepted, 4)
	go func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				remote, local := c.RemoteAddr().String(), c.LocalAddr().String()
				line, err := bufio.NewReader(c).ReadString('\n')
				out <- accepted{line, remote, local, err}
			}()
		}
	}()
	return pl, out
}

func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func got(t *testing.T, ch chan accepted) accepted {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no connection served")
	}
	return accepted{}
}

func TestListenerV1V2(t *testing.T) {
	pl, ch := proxyListener(t, "127.0.0.1", 2*time.Second)
	addr := pl.Addr().String()

	c := dialFrom(t, "127.0.0.1", addr)
	io.WriteString(c, "PROXY TCP4 203.0.113.7 192.0.2.1 4711 443\r\nGET / HTTP/1.1\r\n")
	if a := got(t, ch); a.err != nil || a.remote != "203.0.113.7:4711" || a.local != "192.0.2.1:443" || a.line != "GET / HTTP/1.1\r\n" {
		t.Errorf("v1: %+v", a)
	}

	c = dialFrom(t, "127.0.0.1", addr)
	h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP("2001:db8::7"), Port: 5000}, &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443})
	h.WriteTo(c)
	io.WriteString(c, "hello\n")
	if a := got(t, ch); a.err != nil || a.remote != "[2001:db8::7]:5000" || a.line != "hello\n" {
		t.Errorf("v2: %+v", a)
	}

	// LOCAL (a health check): the socket's addresses.
	c = dialFrom(t, "127.0.0.1", addr)
	(&proxyproto.Header{Version: 2, Command: proxyproto.LOCAL}).WriteTo(c)
	io.WriteString(c, "hc\n")
	if a := got(t, ch); a.err != nil || !strings.HasPrefix(a.remote, "127.0.0.1:") || a.line != "hc\n" {
		t.Errorf("v2 LOCAL: %+v", a)
	}

	// Required from a trusted peer: none, or a bad one, fails the read.
	c = dialFrom(t, "127.0.0.1", addr)
	io.WriteString(c, "GET / HTTP/1.1\r\n")
	if a := got(t, ch); a.err == nil {
		t.Errorf("no header from a trusted peer was served: %+v", a)
	}
	c = dialFrom(t, "127.0.0.1", addr)
	io.WriteString(c, "PROXY TCP4 203.0.113.7 nonsense 1 2\r\nGET / HTTP/1.1\r\n")
	if a := got(t, ch); a.err == nil {
		t.Errorf("a bad header was served: %+v", a)
	}

	// An untrusted peer: served plain, refused with a header.
	c = dialFrom(t, "127.0.0.2", addr)
	io.WriteString(c, "GET / HTTP/1.1\r\n")
	if a := got(t, ch); a.err != nil || !strings.HasPrefix(a.remote, "127.0.0.2:") || a.line != "GET / HTTP/1.1\r\n" {
		t.Errorf("untrusted plain: %+v", a)
	}
	c = dialFrom(t, "127.0.0.2", addr)
	io.WriteString(c, "PROXY TCP4 203.0.113.7 192.0.2.1 4711 443\r\nGET / HTTP/1.1\r\n")
	if a := got(t, ch); a.err == nil {
		t.Errorf("a header from an untrusted peer was used: %+v", a)
	}
}

func TestListenerAcceptDoesNotWait(t *testing.T) {
	pl, ch := proxyListener(t, "127.0.0.1", 6*time.Second)
	// A silent trusted peer must not hold up the next connection: served
	// well before the silent one's header timeout.
	dialFrom(t, "127.0.0.1", pl.Addr().String())
	c := dialFrom(t, "127.0.0.1", pl.Addr().String())
	io.WriteString(c, "PROXY TCP4 203.0.113.9 192.0.2.1 1 2\r\nx\n")
	start := time.Now()
	if a := got(t, ch); a.remote != "203.0.113.9:1" || time.Since(start) > 4*time.Second {
		t.Errorf("second connection: %+v after %v", a, time.Since(start))
	}
	if a := got(t, ch); a.err == nil {
		t.Errorf("the silent peer was served: %+v", a)
	}
}

// The per-request cost of Headers in front of a handler that does
// nothing: a trusted peer without forwarding headers (the default setup
// with a local client), with X-Forwarded-*, with Forwarded, and an
// untrusted peer.
func BenchmarkHeaders(b *testing.B) {
	base := []string{"Host", "example.com", "User-Agent", "wrk", "Accept", "*/*"}
	for _, bc := range []struct {
		name string
		peer string
		f    []string
	}{
		{"trusted-none", "127.0.0.1", nil},
		{"trusted-xforwarded", "127.0.0.1", []string{"X-Forwarded-For", "203.0.113.7, 10.0.0.1", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "example.org"}},
		{"trusted-forwarded", "127.0.0.1", []string{"Forwarded", `for="[2001:db8::7]:4711";proto=https;host=example.org`}},
		{"untrusted", "192.0.2.1", []string{"X-Forwarded-For", "203.0.113.7"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := &Headers{Next: nop{}, Trusted: mustList(b, "127.0.0.1,10.0.0.0/8")}
			r := &http1.Request{RemoteAddr: &net.TCPAddr{IP: net.ParseIP(bc.peer), Port: 5555}, Host: []byte("example.com"),
				Header: fields(append(append([]string{}, base...), bc.f...)...)}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP1(nil, r)
			}
		})
	}
}

type nop struct{}

func (nop) ServeHTTP1(w *http1.ResponseWriter, r *http1.Request) {}

// FuzzResolve: no forwarding header value makes Resolve panic, and what
// it returns is well-formed (a scheme is http or https, a host passes
// validHost, a port is in range).
func FuzzResolve(f *testing.F) {
	for _, seed := range [][2]string{
		{"X-Forwarded-For", "203.0.113.7, [2001:db8::1]:80, 10.0.0.1"},
		{"X-Forwarded-Proto", "https, http"},
		{"X-Forwarded-Host", "example.com:8443"},
		{"X-Forwarded-Port", "443"},
		{"Forwarded", `for="[2001:db8:cafe::17]:4711";proto=https;host="a\"b", for=_x;by=unknown`},
		{"Forwarded", `for=192.0.2.1;;, ,host="`},
	} {
		f.Add(seed[0], seed[1])
	}
	trusted, _ := ParseAllowList("127.0.0.1,10.0.0.0/8")
	f.Fuzz(func(t *testing.T, name, value string) {
		fs := []http1.Field{{Name: []byte(name), Value: []byte(value)}, {Name: []byte("X-Forwarded-Port"), Value: []byte("8080")}}
		for _, fields := range [][]http1.Field{fs[:1], fs} {
			res := Resolve(fields, []byte("internal:8000"), trusted)
			if res.Scheme != "" && res.Scheme != "http" && res.Scheme != "https" {
				t.Fatalf("scheme %q", res.Scheme)
			}
			if res.Host != nil && !validHost(res.Host) {
				t.Fatalf("host %q", res.Host)
			}
			if res.ClientPort < 0 || res.ClientPort > 65535 {
				t.Fatalf("port %d", res.ClientPort)
			}
		}
	})
}
