package tlsconf

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"turnstile/internal/h2"
	"turnstile/internal/http1"
)

// Every TLS 1.2 suite Go implements has an OpenSSL name, and each name
// is the one `openssl ciphers -stdname` gives (when openssl is installed
// and still knows the suite: OpenSSL 3 drops RC4 and 3DES).
func TestOpenSSLNames(t *testing.T) {
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if isTLS12(cs) && opensslNames[cs.ID] == "" {
			t.Errorf("%s has no OpenSSL name", cs.Name)
		}
	}
	out, err := exec.Command("openssl", "ciphers", "-stdname", "ALL:COMPLEMENTOFALL").Output()
	if err != nil {
		t.Skipf("openssl: %v", err)
	}
	std := map[string]string{} // IANA name → OpenSSL name
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == "-" {
			std[f[0]] = f[2]
		}
	}
	checked := 0
	for id, name := range opensslNames {
		if o, ok := std[tls.CipherSuiteName(id)]; ok {
			checked++
			if o != name {
				t.Errorf("%s: OpenSSL calls it %s, not %s", tls.CipherSuiteName(id), o, name)
			}
		}
	}
	for name := range notInGo {
		found := false
		for _, o := range std {
			found = found || o == name
		}
		if !found {
			t.Logf("%s is not known to this openssl either", name)
		}
	}
	if checked < 15 {
		t.Errorf("only %d names checked against openssl", checked)
	}
}

func TestParseCiphers(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []uint16
		skipped []string
		err     string
	}{
		{in: "ECDHE-RSA-AES256-GCM-SHA384", want: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}},
		{in: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:ecdhe-ecdsa-aes128-gcm-sha256", want: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}},
		{in: "ECDHE-RSA-CHACHA20-POLY1305, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", want: []uint16{tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}},
		{in: "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES128-SHA", want: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}},
		// Mozilla's intermediate v5 string: its DHE suites are skipped.
		{in: "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305",
			want: DefaultCipherSuites, skipped: []string{"DHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES256-GCM-SHA384", "DHE-RSA-CHACHA20-POLY1305"}},
		{in: "TLS_AES_128_GCM_SHA256:ECDHE-RSA-AES128-GCM-SHA256", want: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}, skipped: []string{"TLS_AES_128_GCM_SHA256"}},
		{in: "ECDHE-RSA-AES128-GCM-SHA256:NOPE", err: `unknown cipher "NOPE"`},
		{in: "HIGH:!aNULL", err: `unknown ciphers "HIGH", "!aNULL"`},
		{in: "RC4-SHA", err: "RFC 7465"},
		{in: "DES-CBC3-SHA", err: "SWEET32"},
		{in: "ECDHE-RSA-DES-CBC3-SHA", err: "SWEET32"},
		{in: " : ", err: "no cipher named"},
		{in: "DHE-RSA-AES128-GCM-SHA256", err: "no TLS 1.2 suite left (Go does not implement DHE-RSA-AES128-GCM-SHA256)"},
		{in: "TLS_AES_128_GCM_SHA256:DHE-RSA-AES128-SHA", err: "(Go does not implement DHE-RSA-AES128-SHA; TLS 1.3 suites are always on: TLS_AES_128_GCM_SHA256)"},
	} {
		ids, skipped, err := ParseCiphers(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "--ssl-ciphers") || strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseCiphers(%q) = %v; want one line from --ssl-ciphers saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(ids, tc.want) || !slices.Equal(skipped, tc.skipped) {
			t.Errorf("ParseCiphers(%q) = %x, %q, %v; want %x, %q", tc.in, ids, skipped, err, tc.want, tc.skipped)
		}
	}
}

func TestCheckCiphers(t *testing.T) {
	h2 := []string{"h2", "http/1.1"}
	h1 := []string{"http/1.1"}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Ciphers: "ECDHE-RSA-AES128-GCM-SHA256"}, "--ssl-ciphers needs --ssl-certfile"},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, Ciphers: "ECDHE-RSA-AES128-GCM-SHA256", NextProtos: h2}, ""},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, Ciphers: "ECDHE-ECDSA-AES128-GCM-SHA256", NextProtos: []string{"h2"}}, ""},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, Ciphers: "ECDHE-RSA-AES256-GCM-SHA384", NextProtos: h2}, "HTTP/2 on TLS 1.2 needs"},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, Ciphers: "ECDHE-RSA-AES256-GCM-SHA384", NextProtos: h1}, ""},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, Ciphers: "ECDHE-RSA-AES256-GCM-SHA384", MinVersion: "1.3", NextProtos: h1}, "no effect with --ssl-min-version 1.3"},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, Ciphers: "bogus", NextProtos: h1}, `unknown cipher "bogus"`},
	} {
		err := tc.c.Check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%+v) = %v; want %q", tc.c, err, tc.want)
		}
	}
}

// The default list is Mozilla's intermediate TLS 1.2 list: no CBC, no
// RSA key exchange, and x/net/http2 takes it (http2.ConfigureServer
// refuses a list without HTTP/2's mandatory suite).
func TestDefaultCipherSuites(t *testing.T) {
	for _, id := range DefaultCipherSuites {
		n := tls.CipherSuiteName(id)
		if !h2Allowed(id) || strings.Contains(n, "CBC") || !strings.HasPrefix(n, "TLS_ECDHE_") {
			t.Errorf("default suite %s", n)
		}
	}
	srv := &http.Server{TLSConfig: &tls.Config{CipherSuites: DefaultCipherSuites}}
	if err := http2.ConfigureServer(srv, &http2.Server{}); err != nil {
		t.Errorf("http2.ConfigureServer: %v", err)
	}

	dir := t.TempDir()
	certPEM, key := selfSigned(t)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	c := Config{CertFiles: []string{writeFile(t, dir, "c.pem", certPEM)}, KeyFiles: []string{writeFile(t, dir, "k.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))}}
	tc, err := Load(&c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tc.CipherSuites, DefaultCipherSuites) {
		t.Errorf("CipherSuites = %x; want the default", tc.CipherSuites)
	}
	if d := Describe(&c); strings.Contains(d, "ciphers=") {
		t.Errorf("Describe = %q; the default list is not named", d)
	}
}

// rsaCert returns a self-signed RSA certificate and its key as a
// tls.Certificate and as PEM.
func rsaCert(t *testing.T) (tls.Certificate, []byte, []byte) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "t"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// A list that no TLS 1.2 client could use with the certificate's key,
// or none with HTTP/2, is refused when the files are read.
func TestLoadCiphersForKey(t *testing.T) {
	dir := t.TempDir()
	ecPEM, ecKey := selfSigned(t)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	ec := Config{CertFiles: []string{writeFile(t, dir, "ec.pem", ecPEM)}, KeyFiles: []string{writeFile(t, dir, "ec-key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}))}}
	_, rsaPEM, rsaKeyPEM := rsaCert(t)
	rs := Config{CertFiles: []string{writeFile(t, dir, "rsa.pem", rsaPEM)}, KeyFiles: []string{writeFile(t, dir, "rsa-key.pem", rsaKeyPEM)}}
	h2 := []string{"h2", "http/1.1"}
	h1 := []string{"http/1.1"}
	for _, tc := range []struct {
		name    string
		base    Config
		ciphers string
		protos  []string
		want    string
	}{
		{"rsa key, rsa suite", rs, "ECDHE-RSA-AES256-GCM-SHA384", h1, ""},
		{"ecdsa key, rsa suite", ec, "ECDHE-RSA-AES256-GCM-SHA384", h1, "no listed suite works with the ECDSA key"},
		{"rsa key, ecdsa suites", rs, "ECDHE-ECDSA-AES128-GCM-SHA256", h2, "no listed suite works with the RSA key"},
		{"rsa key, rsa kex", rs, "AES128-GCM-SHA256", h1, ""},
		// Passes Check (a mandatory suite is listed) but an ECDSA key
		// can only use the CBC one, which HTTP/2 prohibits.
		{"ecdsa key, h2, only cbc usable", ec, "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-SHA", h2, "allowed by HTTP/2"},
		{"ecdsa key, h1, only cbc usable", ec, "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-SHA", h1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.base
			c.Ciphers, c.NextProtos = tc.ciphers, tc.protos
			cfg, err := Load(&c)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--ssl-ciphers") {
					t.Fatalf("Load = %v; want an error saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, _, _ := ParseCiphers(tc.ciphers)
			if !slices.Equal(cfg.CipherSuites, want) {
				t.Errorf("CipherSuites = %x; want %x", cfg.CipherSuites, want)
			}
			if d := Describe(&c); !strings.Contains(d, " ciphers="+strings.ReplaceAll(tc.ciphers, ",", ":")) {
				t.Errorf("Describe = %q", d)
			}
		})
	}
}

// h2Allowed agrees with internal/h2, which closes a TLS 1.2 connection
// on a suite HTTP/2 prohibits (RFC 9113 §9.2.2, RFC 7540 Appendix A):
// each suite Go has, negotiated alone, then one HTTP/2 request.
func TestH2AllowedMatchesH2(t *testing.T) {
	rsaTLS, _, _ := rsaCert(t)
	ecPEM, ecKey := selfSigned(t)
	blk, _ := pem.Decode(ecPEM)
	ecTLS := tls.Certificate{Certificate: [][]byte{blk.Bytes}, PrivateKey: ecKey}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if !isTLS12(cs) {
			continue
		}
		cert := rsaTLS
		if usableWith(cs.ID, "ECDSA") {
			cert = ecTLS
		}
		t.Run(cs.Name, func(t *testing.T) {
			got := h2Works(t, cert, cs.ID)
			if got != h2Allowed(cs.ID) {
				t.Errorf("HTTP/2 request over %s: ok=%v; h2Allowed says %v", cs.Name, got, h2Allowed(cs.ID))
			}
		})
	}
}

func h2Works(t *testing.T, cert tls.Certificate, suite uint16) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http1.Server{
		Handler: http1.HandlerFunc(func(w *http1.ResponseWriter, r *http1.Request) { w.WriteSimple(200, "", nil, nil) }),
		HTTP2:   h2.New(h2.Config{}, nil),
	}
	go srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, CipherSuites: []uint16{suite},
		MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}))
	defer srv.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := tls.Client(cc, &tls.Config{InsecureSkipVerify: true, CipherSuites: []uint16{suite},
		MaxVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if got := c.ConnectionState().CipherSuite; got != suite {
		t.Fatalf("negotiated %x", got)
	}
	conn, err := (&http2.Transport{}).NewClientConn(c)
	if err != nil {
		return false
	}
	req, _ := http.NewRequest("GET", "https://t/", nil)
	resp, err := conn.RoundTrip(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}
