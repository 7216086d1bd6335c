package tests

// The ASGI tls extension and the WSGI mod_ssl keys (issue 25), with mTLS
// off, optional and required, over HTTP/1.1, HTTP/2 and HTTP/3; never on
// a plain connection, never from a proxy's headers.

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"
)

type tlsScope struct {
	HasTLS bool `json:"has_tls"`
	TLS    *struct {
		ServerCert      *string  `json:"server_cert"`
		ClientCertChain []string `json:"client_cert_chain"`
		ClientCertName  *string  `json:"client_cert_name"`
		ClientCertError *string  `json:"client_cert_error"`
		TLSVersion      int      `json:"tls_version"`
		CipherSuite     int      `json:"cipher_suite"`
	} `json:"tls"`
	Types       map[string]string `json:"types"`
	HTTPVersion string            `json:"http_version"`
}

// tlsClients are clients over HTTP/1.1, HTTP/2 and HTTP/3 presenting
// certs (none: no client certificate).
func tlsClients(p *testPKI, certs ...tls.Certificate) map[string]*http.Client {
	tc := func() *tls.Config {
		c := &tls.Config{RootCAs: p.Pool}
		if len(certs) > 0 {
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
		}
		return c
	}
	return map[string]*http.Client{
		"1.1": {Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tc()}},
		"2":   {Timeout: 20 * time.Second, Transport: &http2.Transport{TLSClientConfig: tc()}},
		"3":   {Timeout: 20 * time.Second, Transport: &http3.Transport{TLSClientConfig: tc()}},
	}
}

func getBody(t *testing.T, c *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
	}
	return resp, b
}

func TestTLS_ScopeAndEnviron(t *testing.T) {
	p := newPKI(t)
	serverPEM, _ := os.ReadFile(p.CertFile)
	clientPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ClientCert.Certificate[0]}))
	for _, mode := range []string{"none", "optional", "required"} {
		t.Run(mode, func(t *testing.T) {
			args := append(p.TLSArgs(), "--http3", "--ssl-ca", p.CAFile, "--ssl-client-verify", mode)
			asgi := Start(t, append(args, "tls_echo:asgi")...)
			wsgi := Start(t, append(args, "tls_echo:app")...)
			cases := []struct {
				name   string
				certs  []tls.Certificate
				expect bool // the client certificate reaches the app
			}{{"with-cert", []tls.Certificate{p.ClientCert}, mode != "none"}}
			if mode != "required" {
				cases = append(cases, struct {
					name   string
					certs  []tls.Certificate
					expect bool
				}{"without-cert", nil, false})
			}
			for _, cs := range cases {
				for proto, c := range tlsClients(p, cs.certs...) {
					resp, body := getBody(t, c, httpsURL(asgi)+"/")
					var sc tlsScope
					if err := json.Unmarshal(body, &sc); err != nil || !sc.HasTLS || sc.TLS == nil {
						t.Fatalf("%s over %s: no tls extension: %s", cs.name, proto, body)
					}
					where := cs.name + " over HTTP/" + proto
					if sc.HTTPVersion != proto {
						t.Errorf("%s: http_version %q", where, sc.HTTPVersion)
					}
					x := sc.TLS
					if x.TLSVersion != int(resp.TLS.Version) || x.CipherSuite != int(resp.TLS.CipherSuite) {
						t.Errorf("%s: tls_version %#x cipher_suite %#x; the client saw %#x %#x", where, x.TLSVersion, x.CipherSuite, resp.TLS.Version, resp.TLS.CipherSuite)
					}
					if sc.Types["tls_version"] != "int" || sc.Types["cipher_suite"] != "int" || sc.Types["client_cert_chain"] != "list" {
						t.Errorf("%s: types %v", where, sc.Types)
					}
					if x.ServerCert == nil || *x.ServerCert != string(serverPEM) {
						t.Errorf("%s: server_cert %v; want the PEM of --ssl-certfile", where, x.ServerCert)
					}
					if x.ClientCertError != nil {
						t.Errorf("%s: client_cert_error %q; want None", where, *x.ClientCertError)
					}
					if cs.expect {
						if len(x.ClientCertChain) != 1 || x.ClientCertChain[0] != clientPEM {
							t.Errorf("%s: client_cert_chain %q; want the client's PEM", where, x.ClientCertChain)
						}
						if x.ClientCertName == nil || *x.ClientCertName != "CN=turnstile-test" {
							t.Errorf("%s: client_cert_name %v; want CN=turnstile-test", where, x.ClientCertName)
						}
					} else if len(x.ClientCertChain) != 0 || x.ClientCertName != nil {
						t.Errorf("%s: client_cert_chain %q, name %v; want none", where, x.ClientCertChain, x.ClientCertName)
					}

					_, body = getBody(t, c, httpsURL(wsgi)+"/")
					var env map[string]string
					json.Unmarshal(body, &env)
					if env["HTTPS"] != "on" || env["SSL_PROTOCOL"] != "TLSv1.3" || env["SSL_CIPHER"] == "" || env["SSL_SERVER_CERT"] != string(serverPEM) {
						t.Errorf("%s: WSGI environ %v", where, env)
					}
					if cs.expect {
						if env["SSL_CLIENT_VERIFY"] != "SUCCESS" || env["SSL_CLIENT_CERT"] != clientPEM ||
							env["SSL_CLIENT_S_DN"] != "CN=turnstile-test" || env["SSL_CLIENT_I_DN"] != "CN=turnstile test CA" || env["SSL_CLIENT_M_SERIAL"] != "7" {
							t.Errorf("%s: WSGI environ %v", where, env)
						}
					} else if env["SSL_CLIENT_VERIFY"] != "NONE" || env["SSL_CLIENT_CERT"] != "" {
						t.Errorf("%s: WSGI environ %v; want SSL_CLIENT_VERIFY NONE and no certificate", where, env)
					}
				}
			}
		})
	}
	// A plain connection: no tls extension and no SSL_* keys, even when a
	// trusted proxy says https.
	t.Run("plain", func(t *testing.T) {
		asgi := Start(t, "tls_echo:asgi")
		wsgi := Start(t, "tls_echo:app")
		req, _ := http.NewRequest("GET", asgi.URL+"/", nil)
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var sc tlsScope
		json.Unmarshal(body, &sc)
		if sc.HasTLS || !strings.Contains(string(body), `"scheme": "https"`) {
			t.Errorf("plain connection, X-Forwarded-Proto https: %s; want scheme https and no tls extension", body)
		}
		req, _ = http.NewRequest("GET", wsgi.URL+"/", nil)
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "SSL_") || strings.Contains(string(body), "HTTPS") || !strings.Contains(string(body), `"scheme": "https"`) {
			t.Errorf("plain connection, X-Forwarded-Proto https: %s; want no SSL_* keys", body)
		}
	})
}

// The subject names are RFC 4514 strings of the certificate's own RDN
// order (last RDN first): a subject encoded CN then O is
// "O=Example,CN=alice" (pkix.Name.String gave Go's own order,
// "CN=alice,O=Example", as for a subject encoded O then CN), as
// openssl's -nameopt RFC2253 and mod_ssl write it.
func TestTLS_ClientCertNameRFC4514(t *testing.T) {
	p := newPKI(t)
	cn, o, ou := asn1.ObjectIdentifier{2, 5, 4, 3}, asn1.ObjectIdentifier{2, 5, 4, 10}, asn1.ObjectIdentifier{2, 5, 4, 11}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(77),
		Subject: pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: cn, Value: "alice"}, {Type: o, Value: "Example"}, {Type: ou, Value: "ops"},
		}},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	const want = "OU=ops,O=Example,CN=alice"
	args := append(p.TLSArgs(), "--ssl-ca", p.CAFile, "--ssl-client-verify", "required")
	asgi := Start(t, append(args, "tls_echo:asgi")...)
	wsgi := Start(t, append(args, "tls_echo:app")...)
	c := tlsClients(p, cert)["1.1"]
	_, body := getBody(t, c, httpsURL(asgi)+"/")
	var sc tlsScope
	if err := json.Unmarshal(body, &sc); err != nil || sc.TLS == nil || sc.TLS.ClientCertName == nil || *sc.TLS.ClientCertName != want {
		t.Errorf("ASGI client_cert_name: %s; want %q", body, want)
	}
	_, body = getBody(t, c, httpsURL(wsgi)+"/")
	var env map[string]string
	json.Unmarshal(body, &env)
	if env["SSL_CLIENT_S_DN"] != want || env["SSL_CLIENT_I_DN"] != "CN=turnstile test CA" {
		t.Errorf("WSGI SSL_CLIENT_S_DN %q, SSL_CLIENT_I_DN %q; want %q and CN=turnstile test CA", env["SSL_CLIENT_S_DN"], env["SSL_CLIENT_I_DN"], want)
	}
}
