package tests

// HTTP/3 (--http3, internal/h3): quic-go's client against the real
// binary: WSGI and ASGI apps, bodies both ways, streaming, a client gone
// mid-response, a failing app, limits, Alt-Svc on TCP, graceful stop,
// /metrics, several workers sharing the UDP port, and floods of junk
// datagrams and Initial packets.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// h3Client is an HTTP/3 client trusting the test CA; each client has its
// own QUIC connection per origin.
func h3Client(t testing.TB, p *testPKI) *http.Client {
	t.Helper()
	tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool}, QUICConfig: &quic.Config{MaxIdleTimeout: 30 * time.Second}}
	t.Cleanup(func() { tr.Close() })
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// h3Do sends a request over HTTP/3 and returns the status, header and
// body; it fails t unless the answer came over HTTP/3.
func h3Do(t testing.TB, c *http.Client, method, url string, body []byte, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s over HTTP/3: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	if resp.ProtoMajor != 3 {
		t.Fatalf("%s %s: answered over %s", method, url, resp.Proto)
	}
	return resp.StatusCode, resp.Header, b
}

func startH3(t *testing.T, p *testPKI, args ...string) *Server {
	return Start(t, append(append(p.TLSArgs(), "--http3"), args...)...)
}

// Both apps over HTTP/3: SERVER_PROTOCOL / http_version, scheme, bodies
// both ways (3 MiB up, 5 MB down), 100 streams at once on one
// connection, Alt-Svc on the TCP responses, and the QUIC metrics.
func TestHTTP3_Apps(t *testing.T) {
	p := newPKI(t)
	payload := make([]byte, 3<<20+17)
	rand.Read(payload)
	sum := sha256.Sum256(payload)
	for _, app := range []string{"h2_wsgi:app", "h2_asgi:app"} {
		t.Run(app, func(t *testing.T) {
			s := startH3(t, p, app)
			_, port, _ := net.SplitHostPort(s.Addr)
			// Alt-Svc on HTTP/1.1 over TLS.
			resp, err := p.httpsClient().Get(httpsURL(s) + "/")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got, want := resp.Header.Get("Alt-Svc"), `h3=":`+port+`"; ma=86400`; got != want {
				t.Errorf("Alt-Svc over TCP = %q; want %q", got, want)
			}
			c := h3Client(t, p)
			code, h, body := h3Do(t, c, "GET", httpsURL(s)+"/a?b=1", nil)
			if code != 200 || h.Get("X-App") != "h2" {
				t.Fatalf("GET = %d %v %s", code, h, body)
			}
			for _, f := range []string{"Connection", "Keep-Alive", "Upgrade"} {
				if h.Get(f) != "" {
					t.Errorf("HTTP/3 response carries %s: %q", f, h.Get(f))
				}
			}
			if app == "h2_wsgi:app" {
				var f wsgiFacts
				json.Unmarshal(body, &f)
				if f.Protocol != "HTTP/3" || f.Scheme != "https" || f.Path != "/a" || f.Query != "b=1" || f.Host != "127.0.0.1:"+port {
					t.Errorf("environ = %+v; want SERVER_PROTOCOL HTTP/3, https, /a, b=1", f)
				}
			} else {
				var f asgiFacts
				json.Unmarshal(body, &f)
				if f.HTTPVersion != "3" || f.Scheme != "https" || f.Path != "/a" || f.Query != "b=1" {
					t.Errorf("scope = %+v; want http_version 3, https", f)
				}
				if hs := f.header("host"); len(hs) != 1 || hs[0] != "127.0.0.1:"+port {
					t.Errorf("host headers %q; want one, the :authority", hs)
				}
			}
			code, _, body = h3Do(t, c, "POST", httpsURL(s)+"/upload", payload)
			var got struct {
				BodyLen int    `json:"body_len"`
				SHA     string `json:"body_sha256"`
			}
			json.Unmarshal(body, &got)
			if code != 200 || got.BodyLen != len(payload) {
				t.Errorf("POST 3 MiB = %d, the app read %d bytes; want %d", code, got.BodyLen, len(payload))
			}
			if app == "h2_wsgi:app" {
				if got.SHA != hex.EncodeToString(sum[:]) {
					t.Errorf("the app read other bytes than sent")
				}
				code, h, body := h3Do(t, c, "GET", httpsURL(s)+"/big?n=5000000", nil)
				if code != 200 || len(body) != 5000000 || h.Get("Content-Length") != "5000000" {
					t.Errorf("GET /big = %d, %d bytes, Content-Length %q", code, len(body), h.Get("Content-Length"))
				}
			}
			var wg sync.WaitGroup
			errs := make(chan string, 100)
			for i := range 100 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("POST", httpsURL(s)+fmt.Sprintf("/c/%d", i), strings.NewReader(strings.Repeat("y", i*100)))
					resp, err := c.Do(req)
					if err != nil {
						errs <- err.Error()
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || !bytes.Contains(b, []byte(fmt.Sprintf(`"body_len": %d`, i*100))) {
						errs <- fmt.Sprintf("stream %d: %d %s", i, resp.StatusCode, b)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			if n := metricSum(t, s, "turnstile_quic_connections_total"); n != 1 {
				t.Errorf("turnstile_quic_connections_total = %v; want 1 (one client, one connection)", n)
			}
			if n := metricSum(t, s, "turnstile_quic_0rtt_refused_total"); n != 0 {
				t.Errorf("turnstile_quic_0rtt_refused_total = %v; want 0", n)
			}
		})
	}
}

// A streaming response read in part, then the client cancels: the WSGI
// iterable is closed, the ASGI app gets http.disconnect; a failing app is
// a 500 (head not sent) or a reset stream (head sent); the connection
// stays usable.
func TestHTTP3_StreamingAndClientGone(t *testing.T) {
	p := newPKI(t)
	for _, app := range []string{"h2_wsgi:app", "h2_asgi:app"} {
		t.Run(app, func(t *testing.T) {
			s := startH3(t, p, app)
			c := h3Client(t, p)
			stats := func() b25Stats {
				_, _, b := h3Do(t, c, "GET", httpsURL(s)+"/stats", nil)
				var st b25Stats
				json.Unmarshal(b, &st)
				return st
			}
			path, first, want := "/stream", len("chunk 1\n"), func(a, b b25Stats) bool { return b.Closed > a.Closed }
			if app == "h2_asgi:app" {
				path, first, want = "/sse", len("data: hi\n\n"), func(a, b b25Stats) bool { return b.Disconnects > a.Disconnects && b.Cleanups > a.Cleanups }
			}
			for i := range 5 {
				base := stats()
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, "GET", httpsURL(s)+path, nil)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(resp.Body, make([]byte, first)); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				cancel()
				resp.Body.Close()
				for deadline := time.Now().Add(10 * time.Second); ; {
					if want(base, stats()) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("round %d: the app did not see its client go within 10s: %+v", i, stats())
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	t.Run("err_app", func(t *testing.T) {
		s := startH3(t, p, "err_app:app")
		c := h3Client(t, p)
		if code, _, body := h3Do(t, c, "GET", httpsURL(s)+"/raise", nil); code != 500 || strings.Contains(string(body), "err-secret") {
			t.Errorf("/raise = %d %q; want 500 without the exception", code, body)
		}
		if code, _, _ := h3Do(t, c, "GET", httpsURL(s)+"/raise-in-iter", nil); code != 500 {
			t.Errorf("/raise-in-iter = %d; want 500 (no body yet: the head is not sent)", code)
		}
		// Head sent, then the iterable raises: the stream is reset, with
		// and without a Content-Length.
		for _, path := range []string{"/after-head", "/after-head-length"} {
			resp, err := c.Get(httpsURL(s) + path)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Errorf("%s: the response looked complete; want a reset stream", path)
			}
		}
		if code, _, body := h3Do(t, c, "GET", httpsURL(s)+"/ok", nil); code != 200 || string(body) != "ok" {
			t.Errorf("/ok after the failures = %d %q", code, body)
		}
	})
}

// The HTTP/1 limits hold over HTTP/3: body (413, declared or not),
// fields (431), :path (414), --limit-concurrency (503); and the
// connection stays usable.
func TestHTTP3_Limits(t *testing.T) {
	p := newPKI(t)
	for _, app := range []string{"h2_wsgi:app", "h2_asgi:app"} {
		t.Run(app, func(t *testing.T) {
			s := startH3(t, p, "--limit-request-body", "1000", "--limit-request-fields", "20", "--limit-request-line", "500", app)
			c := h3Client(t, p)
			u := httpsURL(s)
			if code, _, body := h3Do(t, c, "POST", u+"/", bytes.Repeat([]byte("a"), 5000)); code != 413 {
				t.Errorf("POST 5000 bytes = %d %s; want 413", code, body)
			}
			req, _ := http.NewRequest("POST", u+"/", io.MultiReader(strings.NewReader(strings.Repeat("b", 3000))))
			req.ContentLength = -1
			if resp, err := c.Do(req); err != nil {
				t.Errorf("POST of unknown length: %v", err)
			} else {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 413 {
					t.Errorf("POST 3000 bytes of unknown length = %d; want 413", resp.StatusCode)
				}
			}
			if code, _, _ := h3Do(t, c, "POST", u+"/", bytes.Repeat([]byte("c"), 999)); code != 200 {
				t.Errorf("POST 999 bytes = %d; want 200", code)
			}
			var hdr []string
			for i := range 25 {
				hdr = append(hdr, fmt.Sprintf("X-F%d", i), "v")
			}
			if code, _, _ := h3Do(t, c, "GET", u+"/", nil, hdr...); code != 431 {
				t.Errorf("25 header fields = %d; want 431", code)
			}
			if code, _, _ := h3Do(t, c, "GET", u+"/"+strings.Repeat("p", 600), nil); code != 414 {
				t.Errorf("a 600-byte :path = %d; want 414", code)
			}
			if code, _, _ := h3Do(t, c, "GET", u+"/ok", nil); code != 200 {
				t.Errorf("the connection is not usable after the refusals: %d", code)
			}
		})
	}
}

// --min-body-rate over HTTP/3: a body trickling a byte every 3 s is cut
// with 408 once the 5 s grace is spent.
func TestHTTP3_SlowBody(t *testing.T) {
	p := newPKI(t)
	s := startH3(t, p, "h2_wsgi:app")
	c := h3Client(t, p)
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < 20; i++ {
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(3 * time.Second)
		}
		pw.Close()
	}()
	defer pw.Close()
	req, _ := http.NewRequest("POST", httpsURL(s)+"/", pr)
	req.ContentLength = 20
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 408 {
		t.Errorf("a trickling body = %d; want 408", resp.StatusCode)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("408 after %v; want soon after the 5 s grace", d)
	}
}

// SIGTERM with an HTTP/3 request in flight: GOAWAY, the request
// finishes, the process exits 0 long before --graceful-timeout.
func TestHTTP3_StopFinishesInFlight(t *testing.T) {
	p := newPKI(t)
	s := startH3(t, p, "--graceful-timeout", "60s", "h2_wsgi:app")
	c := h3Client(t, p)
	h3Do(t, c, "GET", httpsURL(s)+"/ok", nil) // connected
	type result struct {
		code int
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.Get(httpsURL(s) + "/slow")
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{resp.StatusCode, string(b), err}
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	s.Signal(syscall.SIGTERM)
	select {
	case r := <-done:
		if r.err != nil || r.code != 200 || r.body != "done" {
			t.Errorf("in-flight request: %d %q %v; want 200 done", r.code, r.body, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the in-flight request did not finish")
	}
	if code := s.Wait(30 * time.Second); code != 0 {
		t.Errorf("exit %d; want 0", code)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("stopped after %v; want soon after the request (GOAWAY)", d)
	}
}

// Several workers share the UDP port as a reuseport group of one socket
// per worker slot: 40 clients (40 QUIC connections from 40 ports) make
// 10 requests each, none fails, and the connections are spread over the
// workers.
func TestHTTP3_Workers(t *testing.T) {
	p := newPKI(t)
	s := startH3(t, p, "--workers", "2", "--access-log", "h2_wsgi:app")
	var wg sync.WaitGroup
	errs := make(chan string, 400)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool}}
			defer tr.Close()
			c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			for j := range 10 {
				resp, err := c.Get(httpsURL(s) + fmt.Sprintf("/w/%d/%d", i, j))
				if err != nil {
					errs <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"HTTP/3"`)) {
					errs <- fmt.Sprintf("client %d request %d: %d %s", i, j, resp.StatusCode, b)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for e := range errs {
		if n++; n <= 10 {
			t.Error(e)
		}
	}
	if n > 0 {
		t.Errorf("%d of 400 requests failed", n)
	}
	_, _, page := adminMetric(t, s, "turnstile_quic_connections_total")
	per := map[string]float64{}
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "turnstile_quic_connections_total{") {
			var v float64
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			per[line[:strings.LastIndexByte(line, ' ')]] = v
		}
	}
	total := 0.0
	for _, v := range per {
		total += v
	}
	t.Logf("QUIC connections per worker: %v", per)
	if total != 40 {
		t.Errorf("turnstile_quic_connections_total = %v; want 40", total)
	}
	if len(per) != 2 {
		t.Errorf("connections per worker %v; want both workers serving", per)
	}
	for k, v := range per {
		if v < 5 {
			t.Errorf("%s = %v: the reuseport hash left a worker almost idle", k, v)
		}
	}
	if c := strings.Count(s.Logs(), `"protocol":"HTTP/3.0"`); c < 400 {
		t.Errorf("%d access records say HTTP/3.0; want 400", c)
	}
}

// initialPacket is a QUIC v1 Initial (RFC 9000 §17.2.2) with a random
// connection ID and a payload of junk, padded to 1200 bytes: the server
// derives its keys and finds it does not decrypt.
func initialPacket() []byte {
	b := make([]byte, 0, 1200)
	b = append(b, 0xc3)                     // long header, Initial, 4-byte packet number
	b = binary.BigEndian.AppendUint32(b, 1) // version 1
	dcid := make([]byte, 8)
	rand.Read(dcid)
	b = append(b, 8)
	b = append(b, dcid...)
	b = append(b, 8)
	b = append(b, dcid...) // SCID
	b = append(b, 0)       // no token
	rest := 1200 - len(b) - 2
	b = binary.BigEndian.AppendUint16(b, 0x4000|uint16(rest))
	junk := make([]byte, rest)
	rand.Read(junk)
	return append(b, junk...)
}

// Floods: 20 000 junk datagrams and 20 000 Initial packets from random
// connection IDs leave the server serving HTTP/3 and HTTP/1.1 (past
// --http3-retry-above handshakes in progress, new ones get a Retry and
// cost the server no state); 0-RTT packets are refused and counted.
func TestHTTP3_Flood(t *testing.T) {
	p := newPKI(t)
	s := startH3(t, p, "h2_wsgi:app")
	addr, _ := net.ResolveUDPAddr("udp", s.Addr)
	uc, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	junk := make([]byte, 1200)
	start := time.Now()
	for i := range 20000 {
		rand.Read(junk[:64])
		uc.Write(junk[:64+i%1100])
		uc.Write(initialPacket())
	}
	t.Logf("sent 40 000 datagrams in %v", time.Since(start))
	// 0-RTT packets (RFC 9000 §17.2.3) are refused and counted.
	for range 100 {
		p0 := initialPacket()
		p0[0] = 0xd3 // long header, 0-RTT
		uc.Write(p0)
	}
	c := h3Client(t, p)
	ok := time.Now()
	if code, _, _ := h3Do(t, c, "GET", httpsURL(s)+"/ok", nil); code != 200 {
		t.Errorf("HTTP/3 after the flood = %d", code)
	}
	t.Logf("an HTTP/3 request after the flood took %v", time.Since(ok))
	resp, err := p.httpsClient().Get(httpsURL(s) + "/ok")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("HTTP/1.1 after the flood: %v", err)
	} else {
		resp.Body.Close()
	}
	t.Logf("handshake failures %v, retries %v", metricSum(t, s, "turnstile_quic_handshake_failures_total"), metricSum(t, s, "turnstile_quic_retries_total"))
	if n := metricSum(t, s, "turnstile_quic_0rtt_refused_total"); n != 100 {
		t.Errorf("turnstile_quic_0rtt_refused_total = %v; want 100", n)
	}
}

// A rolling restart (SIGHUP) of two workers under HTTP/3 load: 8 clients
// keep their connections busy; none of their requests fails. While the
// old and the new worker of a slot both read its socket, datagrams of
// one's connections reaching the other are dropped and resent by QUIC's
// loss recovery: the requests caught in it are slower (logged), not lost.
func TestHTTP3_WorkersRollingRestart(t *testing.T) {
	p := newPKI(t)
	s := startH3(t, p, "--workers", "2", "h2_wsgi:app")
	var ok, fail, slow atomic.Int64
	var worst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool}}
			defer tr.Close()
			c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				resp, err := c.Get(httpsURL(s) + fmt.Sprintf("/r/%d", i))
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				d := time.Since(start)
				if err != nil {
					fail.Add(1)
					t.Errorf("client %d: %v after %v", i, err, d)
					continue
				}
				ok.Add(1)
				if d > 200*time.Millisecond {
					slow.Add(1)
				}
				if int64(d) > worst.Load() {
					worst.Store(int64(d))
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	s.Signal(syscall.SIGHUP)
	supWaitLog(t, s, 60*time.Second, 2, "worker replaced")
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("rolling restart under HTTP/3: %d requests, %d failed, %d over 200 ms, slowest %v",
		ok.Load()+fail.Load(), fail.Load(), slow.Load(), time.Duration(worst.Load()))
}
