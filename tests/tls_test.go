package tests

// TLS (--ssl-*): HTTPS, mTLS, encrypted keys, cipher suites, start-up errors, the
// handshake timeout and certificate reload on SIGHUP. Certificates are
// made here with crypto/x509: a CA, a server certificate for 127.0.0.1
// and a client certificate.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/youmark/pkcs8"
	"golang.org/x/net/http2"
)

// testPKI is a throwaway CA with a server and a client certificate, as
// PEM files in a temporary directory.
type testPKI struct {
	dir               string
	ca                *x509.Certificate
	caKey             *ecdsa.PrivateKey
	CAFile            string
	CertFile, KeyFile string // server, for 127.0.0.1 and localhost
	ClientCert        tls.Certificate
	ClientCertFile    string
	ClientKeyFile     string
	Pool              *x509.CertPool // trusts the CA
	serverKey         *ecdsa.PrivateKey
	serverSerial      int64
	ClientCertOtherCA tls.Certificate // signed by another CA
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return ca, key
}

func signLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, key *ecdsa.PrivateKey, serial int64, client bool) []byte {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "turnstile-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	p.ca, p.caKey = newCA(t, "turnstile test CA")
	p.CAFile = filepath.Join(p.dir, "ca.pem")
	writePEM(t, p.CAFile, "CERTIFICATE", p.ca.Raw)
	p.Pool = x509.NewCertPool()
	p.Pool.AddCert(p.ca)

	p.CertFile, p.KeyFile = filepath.Join(p.dir, "cert.pem"), filepath.Join(p.dir, "key.pem")
	p.serverKey = newKey(t)
	p.WriteServerCert(t, 100)

	ckey := newKey(t)
	cder := signLeaf(t, p.ca, p.caKey, ckey, 7, true)
	p.ClientCertFile, p.ClientKeyFile = filepath.Join(p.dir, "client.pem"), filepath.Join(p.dir, "client-key.pem")
	writePEM(t, p.ClientCertFile, "CERTIFICATE", cder)
	kder, _ := x509.MarshalPKCS8PrivateKey(ckey)
	writePEM(t, p.ClientKeyFile, "PRIVATE KEY", kder)
	p.ClientCert = tls.Certificate{Certificate: [][]byte{cder}, PrivateKey: ckey}

	other, otherKey := newCA(t, "another CA")
	okey := newKey(t)
	p.ClientCertOtherCA = tls.Certificate{Certificate: [][]byte{signLeaf(t, other, otherKey, okey, 8, true)}, PrivateKey: okey}
	return p
}

// WriteServerCert (re)writes the server certificate and key files with a
// new certificate of this serial number.
func (p *testPKI) WriteServerCert(t testing.TB, serial int64) {
	t.Helper()
	p.serverSerial = serial
	der := signLeaf(t, p.ca, p.caKey, p.serverKey, serial, false)
	kder, _ := x509.MarshalPKCS8PrivateKey(p.serverKey)
	// Write to temporary names and rename: a worker never reads half a file.
	writePEM(t, p.CertFile+".tmp", "CERTIFICATE", der)
	writePEM(t, p.KeyFile+".tmp", "PRIVATE KEY", kder)
	os.Rename(p.KeyFile+".tmp", p.KeyFile)
	os.Rename(p.CertFile+".tmp", p.CertFile)
}

// TLSArgs are the flags serving the server certificate.
func (p *testPKI) TLSArgs() []string {
	return []string{"--ssl-certfile", p.CertFile, "--ssl-keyfile", p.KeyFile}
}

// httpsClient is an HTTP/1.1 client trusting the test CA, with certs
// presented as client certificates.
func (p *testPKI) httpsClient(certs ...tls.Certificate) *http.Client {
	tc := &tls.Config{RootCAs: p.Pool}
	if len(certs) > 0 {
		// Always present it: Go's client would otherwise send none when
		// the server's list of acceptable CAs does not name its issuer.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
}

func httpsURL(s *Server) string { return "https://" + s.Addr }

// getJSON GETs url and decodes a 200 JSON answer into v.
func getTLSJSON(t testing.TB, c *http.Client, url string, v any) *http.Response {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d; want 200: %s", url, resp.StatusCode, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v in %q", url, err, body)
		}
	}
	return resp
}

type wsgiFacts struct {
	Protocol   string            `json:"protocol"`
	Scheme     string            `json:"scheme"`
	Host       string            `json:"host"`
	ServerName string            `json:"server_name"`
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Query      string            `json:"query"`
	Headers    map[string]string `json:"headers"`
	BodyLen    int               `json:"body_len"`
	BodySHA    string            `json:"body_sha256"`
}

func TestTLS_HTTPS(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "h2_wsgi:app")...)
	if !strings.Contains(s.Logs(), `"tls":"TLS\u003e=1.2 alpn=h2,http/1.1 client-verify=none"`) &&
		!strings.Contains(s.Logs(), `"tls":"TLS>=1.2 alpn=h2,http/1.1 client-verify=none"`) {
		t.Errorf("the listening line does not give the TLS setting:\n%s", s.Logs())
	}
	var f wsgiFacts
	resp := getTLSJSON(t, p.httpsClient(), httpsURL(s)+"/a?b=1", &f)
	if resp.TLS == nil || resp.ProtoMajor != 1 {
		t.Fatalf("response over %s, TLS %v; want HTTP/1.1 over TLS", resp.Proto, resp.TLS != nil)
	}
	if f.Protocol != "HTTP/1.1" || f.Path != "/a" || f.Query != "b=1" {
		t.Errorf("environ = %+v", f)
	}
	if f.Scheme != "https" {
		t.Errorf("wsgi.url_scheme = %q; want https", f.Scheme)
	}
	// Plain HTTP on the TLS port is not served.
	if code, _ := httpStatus(s.URL + "/"); code == 200 {
		t.Errorf("plain HTTP on the TLS port got 200")
	}
	// TLS 1.1 is below the default minimum (1.2).
	old := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool, MaxVersion: tls.VersionTLS11}}}
	if _, err := old.Get(httpsURL(s)); err == nil {
		t.Errorf("a TLS 1.1 client was served")
	}
}

func httpStatus(url string) (int, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestTLS_MinVersion13(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "--ssl-min-version", "1.3", "h2_wsgi:app")...)
	c12 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool, MaxVersion: tls.VersionTLS12}}}
	if _, err := c12.Get(httpsURL(s)); err == nil {
		t.Errorf("a TLS 1.2 client was served with --ssl-min-version 1.3")
	}
	resp := getTLSJSON(t, p.httpsClient(), httpsURL(s), nil)
	if v := resp.TLS.Version; v != tls.VersionTLS13 {
		t.Errorf("TLS version %x; want 1.3", v)
	}
}

func TestTLS_ClientVerifyRequired(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "--ssl-ca", p.CAFile, "--ssl-client-verify", "required", "h2_wsgi:app")...)
	if _, err := p.httpsClient().Get(httpsURL(s)); err == nil {
		t.Errorf("a client without a certificate was served (--ssl-client-verify required)")
	}
	if _, err := p.httpsClient(p.ClientCertOtherCA).Get(httpsURL(s)); err == nil {
		t.Errorf("a client certificate from another CA was accepted")
	}
	getTLSJSON(t, p.httpsClient(p.ClientCert), httpsURL(s), nil)
	// curl too, with the certificate files.
	out, err := runCurl(t, "--cacert", p.CAFile, "--cert", p.ClientCertFile, "--key", p.ClientKeyFile, httpsURL(s)+"/")
	if err != nil || !strings.Contains(out, `"protocol"`) {
		t.Errorf("curl with a client certificate: %v\n%s", err, out)
	}
	if out, err := runCurl(t, "--cacert", p.CAFile, httpsURL(s)+"/"); err == nil {
		t.Errorf("curl without a client certificate was served: %s", out)
	}
}

func TestTLS_ClientVerifyOptional(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "--ssl-ca", p.CAFile, "--ssl-client-verify", "optional", "h2_wsgi:app")...)
	getTLSJSON(t, p.httpsClient(), httpsURL(s), nil)
	getTLSJSON(t, p.httpsClient(p.ClientCert), httpsURL(s), nil)
	if _, err := p.httpsClient(p.ClientCertOtherCA).Get(httpsURL(s)); err == nil {
		t.Errorf("a client certificate from another CA was accepted (optional still verifies a given one)")
	}
}

func TestTLS_EncryptedKey(t *testing.T) {
	p := newPKI(t)
	der, err := pkcs8.MarshalPrivateKey(p.serverKey, []byte("s3cret"), nil)
	if err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(p.dir, "key-enc.pem")
	writePEM(t, enc, "ENCRYPTED PRIVATE KEY", der)
	s := Start(t, "--ssl-certfile", p.CertFile, "--ssl-keyfile", enc, "--ssl-keyfile-password", "s3cret", "h2_wsgi:app")
	getTLSJSON(t, p.httpsClient(), httpsURL(s), nil)
}

// A bad certificate, key or password stops start-up with one clear error
// and a non-zero exit, before any worker starts.
func TestTLS_BadConfigStopsStartup(t *testing.T) {
	p := newPKI(t)
	der, _ := pkcs8.MarshalPrivateKey(p.serverKey, []byte("s3cret"), nil)
	enc := filepath.Join(p.dir, "key-enc.pem")
	writePEM(t, enc, "ENCRYPTED PRIVATE KEY", der)
	other := filepath.Join(p.dir, "other-key.pem")
	okder, _ := x509.MarshalPKCS8PrivateKey(newKey(t))
	writePEM(t, other, "PRIVATE KEY", okder)
	garbage := filepath.Join(p.dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate\n"), 0o600)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"wrong password", []string{"--ssl-certfile", p.CertFile, "--ssl-keyfile", enc, "--ssl-keyfile-password", "nope"}, "wrong --ssl-keyfile-password"},
		{"no password", []string{"--ssl-certfile", p.CertFile, "--ssl-keyfile", enc}, "give --ssl-keyfile-password"},
		{"key mismatch", []string{"--ssl-certfile", p.CertFile, "--ssl-keyfile", other}, "private key does not match public key"},
		{"missing file", []string{"--ssl-certfile", filepath.Join(p.dir, "nope.pem"), "--ssl-keyfile", p.KeyFile}, "--ssl-certfile"},
		{"not a certificate", []string{"--ssl-certfile", garbage, "--ssl-keyfile", p.KeyFile}, "--ssl-certfile"},
		{"verify without CA", []string{"--ssl-certfile", p.CertFile, "--ssl-keyfile", p.KeyFile, "--ssl-client-verify", "required"}, "needs --ssl-ca"},
		{"bad min version", []string{"--ssl-certfile", p.CertFile, "--ssl-keyfile", p.KeyFile, "--ssl-min-version", "1.1"}, "--ssl-min-version"},
		{"ciphers for another key", []string{"--ssl-certfile", p.CertFile, "--ssl-keyfile", p.KeyFile, "--ssl-ciphers", "ECDHE-RSA-AES256-GCM-SHA384", "--http", "1"}, "--ssl-ciphers: no listed suite works with the ECDSA key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := Command(t, append(tc.args, "h2_wsgi:app")...)
			done := make(chan struct{})
			var out []byte
			go func() { out, _ = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("did not exit within 30s")
			}
			if cmd.ProcessState.ExitCode() == 0 {
				t.Fatalf("exit status 0; want non-zero:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output does not say %q:\n%s", tc.want, out)
			}
			if strings.Contains(string(out), "worker started") {
				t.Errorf("a worker was started before the TLS settings were checked:\n%s", out)
			}
			// turnstile check reads the files as a worker does.
			check := Command(t, append(append([]string{"check"}, tc.args...), "h2_wsgi:app")...)
			cout, _ := check.CombinedOutput()
			if check.ProcessState.ExitCode() == 0 || !strings.Contains(string(cout), tc.want) {
				t.Errorf("turnstile check: exit %d, output does not say %q:\n%s", check.ProcessState.ExitCode(), tc.want, cout)
			}
		})
	}
}

// The handshake shares the header timeout: a client that connects and
// says nothing is closed.
func TestTLS_HandshakeTimeout(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "--timeout-request-header", "1s", "h2_wsgi:app")...)
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if err == nil || os.IsTimeout(err) {
		t.Fatalf("read = %v; want the server to close", err)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 10*time.Second {
		t.Errorf("closed after %v; want about 1s", d)
	}
}

// SIGHUP to the master (a rolling restart) makes new workers read the
// certificate files again: renewed certificates are served.
func TestTLS_SIGHUPReloadsCertificate(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "--workers", "2", "h2_wsgi:app")...)
	serial := func() int64 {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.Addr, &tls.Config{RootCAs: p.Pool})
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 100 {
		t.Fatalf("serial %d; want 100", got)
	}
	p.WriteServerCert(t, 200)
	if got := serial(); got != 100 {
		t.Fatalf("serial %d before SIGHUP; want 100 (files are read at worker start)", got)
	}
	s.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Both workers must serve the new certificate: several dials.
		n := 0
		for range 8 {
			if serial() == 200 {
				n++
			}
		}
		if n == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still serving the old certificate 60s after SIGHUP (%d/8 new)", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	getTLSJSON(t, p.httpsClient(), httpsURL(s), nil)
}

// WriteRSAServerCert writes an RSA server certificate for 127.0.0.1,
// signed by the test CA, and its key; it returns the two file names.
// The ECDHE-RSA suites need an RSA key (the test PKI's own keys are
// ECDSA).
func (p *testPKI) WriteRSAServerCert(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(300),
		Subject:      pkix.Name{CommonName: "turnstile-test-rsa"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, "rsa-cert.pem"), filepath.Join(p.dir, "rsa-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

// tls12Dial does a TLS 1.2 handshake with addr offering only suites
// (Go's default list when nil) and ALPN protos; it returns the
// connection, or the handshake's error.
func tls12Dial(addr string, p *testPKI, suites []uint16, protos ...string) (*tls.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{
		RootCAs: p.Pool, MaxVersion: tls.VersionTLS12, CipherSuites: suites, NextProtos: protos})
}

// h2Get sends GET / as HTTP/2 on an established TLS connection whose
// ALPN said h2, and returns the status (x/net/http2 closes a TLS 1.2
// connection on a suite HTTP/2 prohibits: then an error).
func h2Get(c *tls.Conn) (int, error) {
	cc, err := (&http2.Transport{}).NewClientConn(c)
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+c.RemoteAddr().String()+"/", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// By default TLS 1.2 offers Mozilla's intermediate suites only (ECDHE
// with AES-GCM or ChaCha20-Poly1305): a client offering only a CBC-SHA1
// suite (LUCKY13) fails the handshake, for HTTP/1.1 and h2 alike; an
// AES-GCM or ChaCha20 client is served over both, and h2 on TLS 1.2 is
// not refused by x/net/http2 (INADEQUATE_SECURITY).
func TestTLS_CiphersDefault(t *testing.T) {
	p := newPKI(t)
	rsaCert, rsaKey := p.WriteRSAServerCert(t)
	for _, key := range []struct {
		name      string
		args      []string
		cbc, aead []uint16
		rsaKexGCM uint16
	}{
		{"ecdsa", p.TLSArgs(),
			[]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA},
			[]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}, 0},
		{"rsa", []string{"--ssl-certfile", rsaCert, "--ssl-keyfile", rsaKey},
			[]uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA},
			[]uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256},
			tls.TLS_RSA_WITH_AES_128_GCM_SHA256},
	} {
		t.Run(key.name, func(t *testing.T) {
			s := Start(t, append(key.args, "h2_wsgi:app")...)
			refused := key.cbc
			if key.rsaKexGCM != 0 {
				refused = append(refused, key.rsaKexGCM) // no forward secrecy: not in the list either
			}
			for _, cs := range refused {
				for _, alpn := range [][]string{{"http/1.1"}, {"h2", "http/1.1"}} {
					if c, err := tls12Dial(s.Addr, p, []uint16{cs}, alpn...); err == nil {
						c.Close()
						t.Errorf("a TLS 1.2 client offering only %s (ALPN %v) completed the handshake", tls.CipherSuiteName(cs), alpn)
					}
				}
			}
			for _, cs := range key.aead {
				c, err := tls12Dial(s.Addr, p, []uint16{cs}, "h2", "http/1.1")
				if err != nil {
					t.Errorf("a TLS 1.2 client offering %s: %v", tls.CipherSuiteName(cs), err)
					continue
				}
				st := c.ConnectionState()
				if st.Version != tls.VersionTLS12 || st.CipherSuite != cs || st.NegotiatedProtocol != "h2" {
					t.Errorf("negotiated %x %s %q; want TLS 1.2, %s, h2", st.Version, tls.CipherSuiteName(st.CipherSuite), st.NegotiatedProtocol, tls.CipherSuiteName(cs))
				}
				if code, err := h2Get(c); err != nil || code != 200 {
					t.Errorf("HTTP/2 GET over TLS 1.2 %s: %d %v", tls.CipherSuiteName(cs), code, err)
				}
				c.Close()
			}
			// HTTP/1.1 over TLS 1.2 with an AES-GCM suite.
			c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs: p.Pool, MaxVersion: tls.VersionTLS12, CipherSuites: key.aead[:1]}}}
			resp := getTLSJSON(t, c, httpsURL(s)+"/", nil)
			if resp.TLS.Version != tls.VersionTLS12 || resp.TLS.CipherSuite != key.aead[0] || resp.ProtoMajor != 1 {
				t.Errorf("HTTP/1.1 over %x %s", resp.TLS.Version, tls.CipherSuiteName(resp.TLS.CipherSuite))
			}
			// TLS 1.3 is unaffected.
			if resp := getTLSJSON(t, p.httpsClient(), httpsURL(s)+"/", nil); resp.TLS.Version != tls.VersionTLS13 {
				t.Errorf("a default client got TLS %x; want 1.3", resp.TLS.Version)
			}
		})
	}
}

// --ssl-ciphers limits TLS 1.2 to the suites listed, from the flag, its
// alias --ciphers or TURNSTILE_SSL_CIPHERS.
func TestTLS_SSLCiphers(t *testing.T) {
	p := newPKI(t)
	rsaCert, rsaKey := p.WriteRSAServerCert(t)
	rsaArgs := []string{"--ssl-certfile", rsaCert, "--ssl-keyfile", rsaKey}

	t.Run("only that suite", func(t *testing.T) {
		// One AES-256 suite leaves h2 without its mandatory suite: --http 1.
		s := Start(t, append(rsaArgs, "--ssl-ciphers", "ECDHE-RSA-AES256-GCM-SHA384", "--http", "1", "h2_wsgi:app")...)
		if !strings.Contains(s.Logs(), "ciphers=ECDHE-RSA-AES256-GCM-SHA384") {
			t.Errorf("the listening line does not name the suites:\n%s", s.Logs())
		}
		// A client offering everything Go has gets the one suite.
		all := []uint16{}
		for _, cs := range tls.CipherSuites() {
			all = append(all, cs.ID)
		}
		c, err := tls12Dial(s.Addr, p, all, "http/1.1")
		if err != nil {
			t.Fatalf("TLS 1.2 handshake: %v", err)
		}
		if got := c.ConnectionState().CipherSuite; got != tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 {
			t.Errorf("negotiated %s; want TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", tls.CipherSuiteName(got))
		}
		c.Close()
		for _, cs := range []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA} {
			if c, err := tls12Dial(s.Addr, p, []uint16{cs}, "http/1.1"); err == nil {
				c.Close()
				t.Errorf("a client offering only %s was served", tls.CipherSuiteName(cs))
			}
		}
		hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool, MaxVersion: tls.VersionTLS12}}}
		if resp := getTLSJSON(t, hc, httpsURL(s)+"/", nil); resp.TLS.CipherSuite != tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 {
			t.Errorf("HTTP/1.1 over %s", tls.CipherSuiteName(resp.TLS.CipherSuite))
		}
	})

	// A legacy CBC suite added back for old clients, from the
	// environment, next to the mandatory h2 suite: CBC-only TLS 1.2
	// clients are served HTTP/1.1, the others get AES-GCM and h2.
	t.Run("environment, cbc for old clients", func(t *testing.T) {
		cmd := Command(t, append(rsaArgs, "h2_wsgi:app")...)
		cmd.Env = append(os.Environ(), "TURNSTILE_SSL_CIPHERS=ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES128-GCM-SHA256")
		s, listening := startCmd(t, cmd)
		WaitListening(t, s, listening, 30*time.Second)
		c, err := tls12Dial(s.Addr, p, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}, "http/1.1")
		if err != nil {
			t.Fatalf("a CBC-only client: %v", err)
		}
		c.Close()
		c, err = tls12Dial(s.Addr, p, nil, "h2")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if st := c.ConnectionState(); st.CipherSuite != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 {
			t.Errorf("a default TLS 1.2 client got %s; want TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", tls.CipherSuiteName(st.CipherSuite))
		}
		if code, err := h2Get(c); err != nil || code != 200 {
			t.Errorf("HTTP/2 GET: %d %v", code, err)
		}
	})

	t.Run("alias --ciphers", func(t *testing.T) {
		s := Start(t, append(rsaArgs, "--ciphers", "ECDHE-RSA-CHACHA20-POLY1305", "--http", "1", "h2_wsgi:app")...)
		c, err := tls12Dial(s.Addr, p, nil, "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := c.ConnectionState().CipherSuite; got != tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 {
			t.Errorf("negotiated %s; want ChaCha20-Poly1305", tls.CipherSuiteName(got))
		}
	})
}

// A bad --ssl-ciphers is one line naming the bad name and exit status
// 2, before anything starts, from serving and from turnstile check.
func TestTLS_SSLCiphersBad(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"unknown name", []string{"--ssl-ciphers", "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA512"}, "", `--ssl-ciphers: unknown cipher "ECDHE-RSA-AES128-GCM-SHA512"`},
		{"unknown name, alias", []string{"--ciphers", "HIGH"}, "", `--ciphers: unknown cipher "HIGH"`},
		{"unknown name, environment", nil, "TURNSTILE_SSL_CIPHERS=NOPE", `TURNSTILE_SSL_CIPHERS: unknown cipher "NOPE"`},
		{"no suite left", []string{"--ssl-ciphers", "DHE-RSA-AES128-GCM-SHA256:TLS_AES_128_GCM_SHA256"}, "", "no TLS 1.2 suite left (Go does not implement DHE-RSA-AES128-GCM-SHA256"},
		{"rc4", []string{"--ssl-ciphers", "RC4-SHA"}, "", "RC4-SHA is an RC4 suite"},
		{"breaks h2", []string{"--ssl-ciphers", "ECDHE-ECDSA-AES256-GCM-SHA384"}, "", "--ssl-ciphers: HTTP/2 on TLS 1.2 needs ECDHE-RSA-AES128-GCM-SHA256 or ECDHE-ECDSA-AES128-GCM-SHA256"},
		{"with TLS 1.3 only", []string{"--ssl-ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256", "--ssl-min-version", "1.3"}, "", "--ssl-ciphers has no effect with --ssl-min-version 1.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, sub := range [][]string{nil, {"check"}} {
				cmd := Command(t, append(append(append(sub, p.TLSArgs()...), tc.args...), "h2_wsgi:app")...)
				if tc.env != "" {
					cmd.Env = append(os.Environ(), tc.env)
				}
				out, _ := cmd.CombinedOutput()
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				if code := cmd.ProcessState.ExitCode(); code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
					t.Errorf("turnstile %v: exit %d, %d lines; want 2 and one line saying %q:\n%s", sub, code, len(lines), tc.want, out)
				}
			}
		})
	}
}

// An expired certificate is served (crypto/tls does not check it) but
// start-up and a reload warn, naming the file and the date: clients will
// refuse every handshake.
func TestTLS_ExpiredCertificateWarns(t *testing.T) {
	p := newPKI(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(900),
		Subject:      pkix.Name{CommonName: "turnstile-test"},
		NotBefore:    time.Now().Add(-48 * time.Hour),
		NotAfter:     time.Now().Add(-24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &p.serverKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, p.CertFile, "CERTIFICATE", der)
	s := Start(t, append(p.TLSArgs(), "h2_wsgi:app")...)
	want := "TLS: --ssl-certfile " + p.CertFile + ": the certificate expired on " + tmpl.NotAfter.UTC().Format(time.RFC3339)
	if !strings.Contains(s.Logs(), want) {
		t.Errorf("no start-up warning %q:\n%s", want, s.Logs())
	}
	ctlPost(t, s, "/ctl/reload-certs")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.Logs(), "reload-certs: "+want) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload warning %q:\n%s", "reload-certs: "+want, s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
