package tests

// Automatic certificates (--acme-domain, internal/acme) against pebble,
// Let's Encrypt's test ACME server, run in this test process: a
// certificate obtained with TLS-ALPN-01 and with HTTP-01, served, and
// renewed (short-lived certificates) while a client keeps requesting;
// a stored certificate served when the CA is unreachable at start, and a
// clear error when there is none.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
)

type pebble struct {
	srv    *httptest.Server
	Dir    string         // the ACME directory URL
	CARoot string         // PEM file of the pebble server's own certificate (--acme-ca-root)
	Roots  *x509.CertPool // the roots of the certificates pebble issues
}

// startPebble runs pebble in this process: its validation authority
// connects to tlsPort (TLS-ALPN-01) and httpPort (HTTP-01) on the names
// it validates; certificates are valid for validity.
func startPebble(t *testing.T, tlsPort, httpPort int, validity time.Duration) *pebble {
	t.Helper()
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	logger := log.New(io.Discard, "pebble ", 0)
	if testing.Verbose() {
		logger = log.New(os.Stderr, "pebble ", log.LstdFlags)
	}
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{
		"default": {Description: "test", ValidityPeriod: uint64(validity / time.Second)},
	})
	vauth := va.New(logger, httpPort, tlsPort, false, "", store)
	front := wfe.New(logger, store, vauth, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	srv := httptest.NewUnstartedServer(front.Handler())
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p := &pebble{srv: srv, Dir: srv.URL + wfe.DirectoryPath, CARoot: filepath.Join(t.TempDir(), "pebble.pem"), Roots: x509.NewCertPool()}
	writePEM(t, p.CARoot, "CERTIFICATE", srv.Certificate().Raw)
	for i := range authority.GetNumberOfRootCerts() {
		p.Roots.AddCert(authority.GetRootCert(i).Cert)
	}
	return p
}

// acmeGet GETs https://localhost:port/ with a new connection and
// returns the serial number of the certificate served.
func acmeGet(p *pebble, port int) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: p.Roots, ServerName: "localhost"},
		DisableKeepAlives: true,
	}}
	resp, err := c.Get(fmt.Sprintf("https://localhost:%d/ok", port))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber.String(), nil
}

func acmeArgs(p *pebble, port int, storage string, extra ...string) []string {
	return append([]string{"--port", fmt.Sprint(port), "--acme-domain", "localhost", "--acme-email", "ops@example.com",
		"--acme-ca", p.Dir, "--acme-ca-root", p.CARoot, "--acme-storage", storage}, extra...)
}

// Obtained at start with each challenge (two workers: one obtains under
// the storage's lock, the other loads it), served, and renewed without a
// restart while a client keeps requesting over new connections: no
// request fails, and the serial number changes.
func TestACME_ObtainAndRenew(t *testing.T) {
	for _, challenge := range []string{"tls-alpn-01", "http-01"} {
		t.Run(challenge, func(t *testing.T) {
			port, httpPort := freePort(t), freePort(t)
			p := startPebble(t, port, httpPort, 30*time.Second)
			storage := t.TempDir()
			s := Start(t, append(acmeArgs(p, port, storage, "--acme-challenge", challenge, "--acme-http-port", fmt.Sprint(httpPort),
				"--acme-renew-check", "1s", "--workers", "2"), "h2_wsgi:app")...)
			first, err := acmeGet(p, port)
			if err != nil {
				t.Fatalf("first request: %v", err)
			}
			serials := map[string]int{first: 1}
			var mu sync.Mutex
			fails := 0
			for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline) && len(serials) < 2; {
				sn, err := acmeGet(p, port)
				mu.Lock()
				if err != nil {
					fails++
					t.Errorf("request: %v", err)
				} else {
					serials[sn]++
				}
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("serials served: %v, failed requests: %d", serials, fails)
			if len(serials) < 2 {
				t.Errorf("the certificate was not renewed within 40 s (30 s certificates)")
			}
			if n := strings.Count(s.Logs(), `"worker ready"`); n < 2 {
				t.Errorf("%d workers ready", n)
			}
		})
	}
}

// The CA unreachable at start: with a certificate in the storage the
// server serves it; with none, it stops with an error naming the CA.
func TestACME_UnreachableCA(t *testing.T) {
	port, httpPort := freePort(t), freePort(t)
	p := startPebble(t, port, httpPort, time.Hour)
	storage := t.TempDir()
	s := Start(t, append(acmeArgs(p, port, storage, "--acme-challenge", "tls-alpn-01"), "h2_wsgi:app")...)
	sn, err := acmeGet(p, port)
	if err != nil {
		t.Fatal(err)
	}
	if code := s.Stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	p.srv.Close() // the CA goes away
	s = Start(t, append(acmeArgs(p, port, storage, "--acme-challenge", "tls-alpn-01"), "h2_wsgi:app")...)
	if sn2, err := acmeGet(p, port); err != nil || sn2 != sn {
		t.Errorf("with the CA gone: serial %s, %v; want the stored certificate %s", sn2, err, sn)
	}
	s.Stop()

	cmd := Command(t, append(acmeArgs(p, freePort(t), t.TempDir(), "--acme-challenge", "tls-alpn-01", "--startup-timeout", "30s"), "h2_wsgi:app")...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("started without a certificate and without a CA:\n%s", out)
	}
	if !strings.Contains(string(out), "no certificate for [localhost] from "+p.Dir) {
		t.Errorf("the error does not say which certificate and which CA:\n%s", out)
	}
}

// Without --acme-email the certificate is obtained all the same (an
// account without a contact) and certmagic's stdin prompt for an address
// never reaches the log (a new user's review of issue 25).
func TestACME_NoEmail(t *testing.T) {
	port, httpPort := freePort(t), freePort(t)
	p := startPebble(t, port, httpPort, time.Hour)
	var args []string
	for _, a := range acmeArgs(p, port, t.TempDir()) {
		if a == "--acme-email" || a == "ops@example.com" {
			continue
		}
		args = append(args, a)
	}
	s := Start(t, append(args, "h2_wsgi:app")...)
	if _, err := acmeGet(p, port); err != nil {
		t.Fatalf("request: %v", err)
	}
	if logs := s.Logs(); strings.Contains(logs, "Email address") || strings.Contains(logs, "terms of service") {
		t.Errorf("certmagic's prompt reached the log:\n%s", logs)
	}
}
