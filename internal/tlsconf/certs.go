package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// Certs is the certificate set of a TLS listener (HTTP/1.1, HTTP/2 and
// HTTP/3 share it): the --ssl-certfile/--ssl-keyfile pairs in the order
// given, the first the default. GetCertificate chooses one per handshake
// by the client's server name (SNI, RFC 6066 §3); Reload reads the files
// again and swaps the set for the handshakes that follow. Safe for
// concurrent use: the set is one atomic pointer, never changed in place.
type Certs struct {
	c   Config
	set atomic.Pointer[certSet]
}

// certSet is one reading of the files.
type certSet struct {
	certs []*tls.Certificate // in flag order; certs[0] is the default
	leafs [][]byte           // PEM of each certificate's leaf (server_cert)
}

// newCerts reads c's pairs.
func newCerts(c *Config) (*Certs, error) {
	s := &Certs{c: *c}
	set, err := s.read()
	if err != nil {
		return nil, err
	}
	s.set.Store(set)
	return s, nil
}

// read reads every pair and checks each key against --ssl-ciphers.
func (s *Certs) read() (*certSet, error) {
	set := &certSet{}
	var suites []uint16
	if s.c.Ciphers != "" {
		suites, _, _ = ParseCiphers(s.c.Ciphers) // checked by Check
	}
	for i := range s.c.CertFiles {
		cert, err := loadCert(&s.c, i)
		if err != nil {
			return nil, err
		}
		if suites != nil {
			if err := checkSuitesForKey(&s.c, i, suites, &cert); err != nil {
				return nil, err
			}
		}
		set.certs = append(set.certs, &cert)
		set.leafs = append(set.leafs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))
	}
	if len(set.certs) == 0 {
		return nil, errors.New("no --ssl-certfile")
	}
	return set, nil
}

// Reload reads the files again. On success the new set serves the
// handshakes that follow (connections already made keep theirs) and
// Reload returns nil; on any error (a missing or unparsable file, a key
// that does not match its certificate) the set in use stays and the error
// names the file and the flag, as Load's do.
func (s *Certs) Reload() error {
	set, err := s.read()
	if err != nil {
		return err
	}
	s.set.Store(set)
	return nil
}

// Serials returns the serial numbers (hex) of the certificates in use, in
// flag order: for the log line of a reload.
func (s *Certs) Serials() []string {
	set := s.set.Load()
	out := make([]string, len(set.certs))
	for i, c := range set.certs {
		out[i] = fmt.Sprintf("%x", c.Leaf.SerialNumber)
	}
	return out
}

// GetCertificate is tls.Config.GetCertificate: the first pair whose leaf
// is valid for hello.ServerName (its DNS SANs, a wildcard matching one
// label; x509.Certificate.VerifyHostname) and that the client can use
// (its signature algorithms: an ECDSA and an RSA certificate for one name
// both serve); else the first pair valid for the name; else, and when the
// client sent no server name, the first pair. It never fails.
func (s *Certs) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	set := s.set.Load()
	return set.certs[set.pick(hello)], nil
}

// pick returns the index of the certificate for hello (GetCertificate).
func (set *certSet) pick(hello *tls.ClientHelloInfo) int {
	if hello.ServerName == "" || len(set.certs) == 1 {
		return 0
	}
	named := -1
	for i, c := range set.certs {
		if c.Leaf.VerifyHostname(hello.ServerName) != nil {
			continue
		}
		if named < 0 {
			named = i
		}
		// SupportsCertificate needs the hello of a real handshake (its
		// signature schemes); a bare one (ServerCert) has none.
		if len(hello.SignatureSchemes) == 0 || hello.SupportsCertificate(c) == nil {
			return i
		}
	}
	return max(named, 0)
}

// ServerCert returns the PEM of the leaf certificate the set in use
// chooses for serverName (the connection's SNI; "" for none): the ASGI
// tls extension's server_cert and WSGI's SSL_SERVER_CERT. After a Reload
// it is the new set's, though a connection made before it was served the
// old one.
func (s *Certs) ServerCert(serverName string) []byte {
	set := s.set.Load()
	return set.leafs[set.pick(&tls.ClientHelloInfo{ServerName: serverName})]
}

// Validity returns one line per --ssl-certfile whose leaf certificate is
// not valid at now: expired (NotAfter before now) or not yet valid
// (NotBefore after now), naming the file and the date (RFC 5280
// §4.1.2.5). crypto/tls serves such a certificate as any other and
// clients then refuse every handshake, so start-up and a reload warn.
// Files that do not read or parse are skipped (Load reports them).
func Validity(c *Config, now time.Time) []string {
	var out []string
	for _, f := range c.CertFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var leaf *x509.Certificate
		for {
			var blk *pem.Block
			blk, b = pem.Decode(b)
			if blk == nil {
				break
			}
			if blk.Type == "CERTIFICATE" {
				leaf, _ = x509.ParseCertificate(blk.Bytes)
				break
			}
		}
		switch {
		case leaf == nil:
		case now.After(leaf.NotAfter):
			out = append(out, fmt.Sprintf("--ssl-certfile %s: the certificate expired on %s (%s ago): clients will refuse it", f, leaf.NotAfter.UTC().Format(time.RFC3339), now.Sub(leaf.NotAfter).Round(time.Second)))
		case now.Before(leaf.NotBefore):
			out = append(out, fmt.Sprintf("--ssl-certfile %s: the certificate is not valid before %s: clients will refuse it until then", f, leaf.NotBefore.UTC().Format(time.RFC3339)))
		}
	}
	return out
}
