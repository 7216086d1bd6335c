package http1_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"turnstile/internal/h2"
	"turnstile/internal/http1"
)

// selfSigned returns a certificate for 127.0.0.1 with subject CN cn,
// signed by its own key.
func selfSigned(t *testing.T, cn string, serial int64) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// The requests of one TLS connection, HTTP/1.1 keep-alive or HTTP/2
// streams, share its certificates' text (Request.Certs): the server's
// certificate is picked once per connection, not per request, and the
// client's chain is encoded once.
func TestConnCertsOncePerConnection(t *testing.T) {
	srvCert, cliCert := selfSigned(t, "server", 1), selfSigned(t, "client", 0xab)
	srvPEM := http1.CertPEM(srvCert.Certificate[0])
	var picks atomic.Int32
	var mu sync.Mutex
	clients := map[*http1.ClientCert]bool{} // the encodings the handler saw
	srv := &http1.Server{
		Handler: http1.HandlerFunc(func(w *http1.ResponseWriter, r *http1.Request) {
			cc := r.Certs.Client()
			ok := bytes.Equal(r.Certs.ServerCert(), srvPEM) && cc != nil &&
				bytes.Equal(cc.Chain[0], http1.CertPEM(cliCert.Certificate[0])) &&
				string(cc.SubjectDN) == "CN=client" && string(cc.IssuerDN) == "CN=client" && string(cc.Serial) == "AB"
			mu.Lock()
			clients[cc] = true
			mu.Unlock()
			if !ok {
				w.WriteSimple(500, "text/plain", []byte("wrong certificates"), nil)
				return
			}
			w.WriteSimple(200, "text/plain", []byte("ok"), nil)
		}),
		HTTP2: h2.New(h2.Config{}, nil),
		TLSServerCert: func(serverName string) []byte {
			picks.Add(1)
			return srvPEM
		},
	}
	pool := x509.NewCertPool()
	pool.AddCert(srvCert.Leaf)
	cliPool := x509.NewCertPool()
	cliPool.AddCert(cliCert.Leaf)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(tls.NewListener(ln, &tls.Config{
		Certificates: []tls.Certificate{srvCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    cliPool,
		NextProtos:   []string{"h2", "http/1.1"},
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	url := "https://" + ln.Addr().String() + "/"

	for _, proto := range []string{"http/1.1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			picks.Store(0)
			mu.Lock()
			clear(clients)
			mu.Unlock()
			tc := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cliCert}, NextProtos: []string{proto}}
			var rt http.RoundTripper = &http.Transport{TLSClientConfig: tc, MaxConnsPerHost: 1}
			if proto == "h2" {
				rt = &http2.Transport{TLSClientConfig: tc}
			}
			cl := &http.Client{Transport: rt, Timeout: 10 * time.Second}
			defer cl.CloseIdleConnections()
			for i := 0; i < 3; i++ {
				resp, err := cl.Get(url)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.ProtoMajor != map[string]int{"http/1.1": 1, "h2": 2}[proto] {
					t.Fatalf("request %d: %s %d %q", i, resp.Proto, resp.StatusCode, body)
				}
			}
			if n := picks.Load(); n != 1 {
				t.Errorf("TLSServerCert called %d times for 3 requests on one connection; want 1", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if n := len(clients); n != 1 {
				t.Errorf("%d client certificate encodings for 3 requests on one connection; want 1", n)
			}
		})
	}
}
