package tests

// Several --ssl-certfile/--ssl-keyfile pairs on one listener, chosen by
// SNI over HTTP/1.1, HTTP/2 and HTTP/3, and certificate files re-read in
// place (SIGHUP, POST /ctl/reload-certs) under load (issue 25).

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"
)

// writeNamedCert writes a server certificate for the DNS names dns (no
// IP address), signed by the test CA, with its own key; it returns the
// two file names and the certificate's PEM.
func (p *testPKI) writeNamedCert(t testing.TB, serial int64, dns ...string) (certFile, keyFile string, certPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: dns[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(p.dir, fmt.Sprintf("cert-%d.pem", serial))
	keyFile = filepath.Join(p.dir, fmt.Sprintf("key-%d.pem", serial))
	writePEM(t, certFile, "CERTIFICATE", der)
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// sniSerial does a TLS handshake with addr sending serverName as SNI (""
// sends none) and returns the serial of the certificate served; it does
// not verify it (an unknown name gets the default certificate).
func sniSerial(addr, serverName string, protos ...string) (int64, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: serverName, InsecureSkipVerify: true, NextProtos: protos})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// Three pairs: the default (127.0.0.1, localhost: 100), a.test (501) and
// *.b.test (502). Each name gets its certificate over HTTP/1.1, HTTP/2 and
// HTTP/3, verified by the client; no SNI and an unknown name get the
// first pair's; SSL_SERVER_CERT is the certificate the connection got.
func TestTLS_SNICertificates(t *testing.T) {
	p := newPKI(t)
	aCert, aKey, aPEM := p.writeNamedCert(t, 501, "a.test")
	bCert, bKey, bPEM := p.writeNamedCert(t, 502, "*.b.test")
	s := Start(t, "--ssl-certfile", p.CertFile, "--ssl-keyfile", p.KeyFile,
		"--ssl-certfile", aCert, "--ssl-keyfile", aKey,
		"--ssl-certfile", bCert, "--ssl-keyfile", bKey, "--http3", "tls_echo:app")
	if !strings.Contains(s.Logs(), "client-verify=none certs=3") {
		t.Errorf("the listening line does not count the certificates:\n%s", s.Logs())
	}

	for _, tc := range []struct {
		sni  string
		want int64
	}{{"", 100}, {"localhost", 100}, {"a.test", 501}, {"A.TEST", 501}, {"x.b.test", 502}, {"b.test", 100}, {"y.x.b.test", 100}, {"nope.test", 100}} {
		for _, protos := range [][]string{{"http/1.1"}, {"h2"}} {
			if got, err := sniSerial(s.Addr, tc.sni, protos...); err != nil || got != tc.want {
				t.Errorf("SNI %q, ALPN %v: serial %d, %v; want %d", tc.sni, protos, got, err, tc.want)
			}
		}
	}

	want := map[string]struct {
		serial int64
		pem    []byte
	}{"a.test": {501, aPEM}, "x.b.test": {502, bPEM}}
	for name, w := range want {
		tc := &tls.Config{RootCAs: p.Pool, ServerName: name}
		clients := map[string]*http.Client{
			"1.1": {Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.Clone()}},
			"2":   {Timeout: 20 * time.Second, Transport: &http2.Transport{TLSClientConfig: tc.Clone()}},
			"3":   {Timeout: 20 * time.Second, Transport: &http3.Transport{TLSClientConfig: tc.Clone()}},
		}
		for proto, c := range clients {
			resp, body := getBody(t, c, httpsURL(s)+"/")
			if resp.ProtoMajor != int(proto[0]-'0') {
				t.Errorf("%s over %s: answered over %s", name, proto, resp.Proto)
			}
			if resp.TLS == nil || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != w.serial {
				t.Errorf("%s over HTTP/%s: not served certificate %d", name, proto, w.serial)
			}
			var env map[string]string
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatalf("%s over HTTP/%s: %v in %q", name, proto, err, body)
			}
			if env["SSL_SERVER_CERT"] != string(w.pem) {
				t.Errorf("%s over HTTP/%s: SSL_SERVER_CERT is not the certificate served:\n%s", name, proto, env["SSL_SERVER_CERT"])
			}
		}
	}
	// The default pair by IP address (no SNI), over HTTP/1.1.
	getTLSJSON(t, p.httpsClient(), httpsURL(s), nil)
}

// tlsLoad runs n clients that each open a new TLS connection for every
// GET until stop is closed; it counts requests and failures and the
// serials served.
type tlsLoad struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	serials    map[int64]int
	errs       []string
	wg         sync.WaitGroup
	stop       chan struct{}
}

func startTLSLoad(t *testing.T, p *testPKI, url string, n int) *tlsLoad {
	l := &tlsLoad{serials: map[int64]int{}, stop: make(chan struct{})}
	for range n {
		c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool}, DisableKeepAlives: true}}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				resp, err := c.Get(url)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				l.mu.Lock()
				if err != nil {
					l.failed.Add(1)
					l.errs = append(l.errs, err.Error())
				} else {
					l.ok.Add(1)
					l.serials[resp.TLS.PeerCertificates[0].SerialNumber.Int64()]++
				}
				l.mu.Unlock()
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

func (l *tlsLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// waitSerial waits until 8 handshakes in a row get serial.
func waitSerial(t *testing.T, s *Server, serial int64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		n := 0
		for range 8 {
			if got, err := sniSerial(s.Addr, ""); err == nil && got == serial {
				n++
			}
		}
		if n == 8 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("serial %d not served within %v (%d/8)", serial, d, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SIGHUP while four clients request in a loop, each on a new connection:
// the workers swap the certificate in place, then the rolling restart
// runs; no request fails and the new serial is served. A bad certificate
// file then keeps the one in use, with one error record, and a SIGHUP
// restarts no worker. POST /ctl/reload-certs swaps it without replacing
// any worker.
func TestTLS_ReloadCertificatesUnderLoad(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "--workers", "2", "tls_echo:app")...)
	l := startTLSLoad(t, p, httpsURL(s)+"/", 4)
	time.Sleep(500 * time.Millisecond)

	p.WriteServerCert(t, 200)
	s.Signal(syscall.SIGHUP)
	supWaitLog(t, s, 30*time.Second, 2, "worker TLS certificates reloaded")
	waitSerial(t, s, 200, 60*time.Second)
	supWaitLog(t, s, 60*time.Second, 4, "worker ready") // the rolling restart's two replacements
	time.Sleep(500 * time.Millisecond)

	// A bad file: unparsable certificate.
	started := supCount(s.Logs(), "worker started")
	if err := os.WriteFile(p.CertFile, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGHUP)
	supWaitLog(t, s, 10*time.Second, 1, "SIGHUP: TLS: certificates not reloaded, the workers keep the ones in use: --ssl-certfile "+p.CertFile+" / --ssl-keyfile "+p.KeyFile+": tls: failed to find any PEM data in certificate input")
	time.Sleep(time.Second)
	if got, err := sniSerial(s.Addr, ""); err != nil || got != 200 {
		t.Errorf("after a bad file: serial %d, %v; want 200 still", got, err)
	}
	// A key that does not match, by POST /ctl/reload-certs.
	p.WriteServerCert(t, 300)
	okder, _ := x509.MarshalPKCS8PrivateKey(newKey(t))
	writePEM(t, p.KeyFile, "PRIVATE KEY", okder)
	// `turnstile ctl reload-certs` says so and exits 1 (it said "ok").
	out, err := exec.Command(binPath(t), "ctl", "reload-certs", "--admin", adminAddr(s)).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "422") || !strings.Contains(string(out), "tls: private key does not match public key") {
		t.Errorf("ctl reload-certs with a mismatched key: %v\n%s\nwant exit status 1 with the 422 and the reason", err, out)
	}
	supWaitLog(t, s, 10*time.Second, 1, "reload-certs: TLS: certificates not reloaded, the workers keep the ones in use: --ssl-certfile "+p.CertFile+" / --ssl-keyfile "+p.KeyFile+": tls: private key does not match public key")
	if got, err := sniSerial(s.Addr, ""); err != nil || got != 200 {
		t.Errorf("after a mismatched key: serial %d, %v; want 200 still", got, err)
	}

	// Good files again, by POST /ctl/reload-certs: no worker replaced.
	p.WriteServerCert(t, 300)
	ctlPost(t, s, "/ctl/reload-certs")
	supWaitLog(t, s, 10*time.Second, 1, "reload-certs: the workers re-read the TLS certificates")
	waitSerial(t, s, 300, 30*time.Second)
	supWaitLog(t, s, 10*time.Second, 4, "worker TLS certificates reloaded")
	time.Sleep(500 * time.Millisecond)
	if n := supCount(s.Logs(), "worker started"); n != started {
		t.Errorf("%d workers started since the bad file; want none", n-started)
	}
	if n := supCount(s.Logs(), "SIGHUP: restarting the workers one by one"); n != 1 {
		t.Errorf("%d rolling restarts; want 1 (a bad file restarts no worker)", n)
	}

	l.end()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%d requests, serials %v", l.ok.Load(), l.serials)
	if f := l.failed.Load(); f > 0 {
		t.Errorf("%d of %d requests failed: %s", f, f+l.ok.Load(), strings.Join(l.errs[:min(len(l.errs), 5)], "; "))
	}
	if l.serials[100] == 0 || l.serials[200] == 0 || l.serials[300] == 0 {
		t.Errorf("serials seen %v; want 100, 200 and 300", l.serials)
	}
	if strings.Contains(s.Logs(), `"level":"ERROR"`) && supCount(s.Logs(), "turnstile: TLS: certificates not reloaded, the ones in use stay") > 0 {
		t.Errorf("a worker failed to reload files the master had read")
	}
}

// ctlPost POSTs to the master's admin endpoint path and wants 202.
func ctlPost(t *testing.T, s *Server, path string) {
	t.Helper()
	resp, err := adminClient.Post(s.adminURL()+path, "", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s = %d; want 202", path, resp.StatusCode)
	}
}

// Pairs that do not pair up exit 2 with one line, from the flags, the
// environment and a TOML file alike.
func TestTLS_SNIBadFlags(t *testing.T) {
	p := newPKI(t)
	aCert, aKey, _ := p.writeNamedCert(t, 501, "a.test")
	fhExit(t, cfEnv(), []string{"turnstile: --ssl-certfile is given 2 times and --ssl-keyfile 1: give them in pairs, in the same order"},
		"--ssl-certfile", p.CertFile, "--ssl-certfile", aCert, "--ssl-keyfile", p.KeyFile)
	fhExit(t, cfEnv("TURNSTILE_SSL_CERTFILE="+p.CertFile, "TURNSTILE_SSL_KEYFILE="+p.KeyFile+","+aKey),
		[]string{"turnstile: TURNSTILE_SSL_CERTFILE is given 1 times and --ssl-keyfile 2: give them in pairs, in the same order"})
	file := cfWriteFile(t, fmt.Sprintf("ssl-certfile = [%q, %q]\nssl-keyfile = %q\n", p.CertFile, aCert, p.KeyFile))
	fhExit(t, cfEnv(), []string{"turnstile: " + file + ": ssl-certfile is given 2 times and --ssl-keyfile 1: give them in pairs, in the same order"}, "--config", file)
	fhExit(t, cfEnv(), []string{"turnstile: --acme-domain obtains the certificate: leave out --ssl-certfile, --ssl-keyfile and --ssl-keyfile-password"},
		"--ssl-certfile", p.CertFile, "--ssl-keyfile", p.KeyFile, "--acme-domain", "a.test")
	// Paired up, from the environment and from TOML: served.
	for _, env := range [][]string{
		{"TURNSTILE_SSL_CERTFILE=" + p.CertFile + "," + aCert, "TURNSTILE_SSL_KEYFILE=" + p.KeyFile + "," + aKey},
	} {
		cmd := Command(t, "h2_wsgi:app")
		cmd.Env = append(cfEnv(), env...)
		s := cfStartCmd(t, cmd)
		if got, err := sniSerial(s.Addr, "a.test"); err != nil || got != 501 {
			t.Errorf("from the environment: SNI a.test got serial %d, %v; want 501", got, err)
		}
	}
	file = cfWriteFile(t, fmt.Sprintf("ssl-certfile = [%q, %q]\nssl-keyfile = [%q, %q]\n", p.CertFile, aCert, p.KeyFile, aKey))
	s := Start(t, "--config", file, "h2_wsgi:app")
	if got, err := sniSerial(s.Addr, "a.test"); err != nil || got != 501 {
		t.Errorf("from TOML: SNI a.test got serial %d, %v; want 501", got, err)
	}
}

// A SIGHUP whose certificate files do not load still ends systemd's
// reload cycle (Type=notify-reload waits for one): RELOADING=1, then
// READY=1 whose STATUS says the certificates were not reloaded.
func TestTLS_ReloadBadCertNotify(t *testing.T) {
	p := newPKI(t)
	path := filepath.Join(t.TempDir(), "notify.sock")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	next := func(want string) string {
		t.Helper()
		buf := make([]byte, 4096)
		nc.SetReadDeadline(time.Now().Add(60 * time.Second))
		n, _, err := nc.ReadFromUnix(buf)
		if err != nil {
			t.Fatalf("no %s notification: %v", want, err)
		}
		m := string(buf[:n])
		if !strings.Contains("\n"+m+"\n", "\n"+want+"\n") {
			t.Fatalf("notification %q, want %s", m, want)
		}
		return m
	}
	s := cfStart(t, cfEnv("NOTIFY_SOCKET="+path), append(p.TLSArgs(), "h2_wsgi:app")...)
	next("READY=1")
	os.WriteFile(p.KeyFile, []byte("garbage\n"), 0o600)
	s.Signal(syscall.SIGHUP)
	next("RELOADING=1")
	if m := next("READY=1"); !strings.Contains(m, "TLS certificates not reloaded") {
		t.Errorf("READY message %q does not say the certificates were not reloaded", m)
	}
	if got, err := sniSerial(s.Addr, ""); err != nil || got != 100 {
		t.Errorf("serial %d, %v; want 100 still", got, err)
	}
}
