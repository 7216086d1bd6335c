// Package tlsconf builds the server's *tls.Config from the --ssl-* flags:
// the certificate chain and its (possibly encrypted) private key, the CA
// bundle that verifies client certificates (mTLS), the client
// verification mode, the lowest TLS version, the TLS 1.2 cipher suites
// (ciphers.go) and the ALPN protocols.
//
// Several certificate pairs may serve one listener, chosen per handshake
// by the client's server name (certs.go). A worker reads the files when
// it starts (LoadCerts) and again, in place, when the master asks it to
// (Certs.Reload: SIGHUP, `turnstile ctl reload-certs`); a bad file then
// keeps the certificates in use. The master calls Load too before
// starting workers, so that a bad certificate, key or password stops
// start-up with one clear error.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/youmark/pkcs8"
)

// Client verification modes (--ssl-client-verify).
const (
	VerifyNone     = "none"     // no client certificate is asked for
	VerifyOptional = "optional" // asked for; verified against CAFile when given
	VerifyRequired = "required" // a client without a valid certificate fails the handshake
)

// Config is the TLS part of the configuration. The zero value means no
// TLS (Enabled reports false).
type Config struct {
	// ACME: the certificate comes from an ACME CA (--acme-domain,
	// internal/acme), which sets GetCertificate on what Load returns;
	// CertFiles and KeyFiles must be empty.
	ACME bool
	// CertFiles are PEM files, each with a server certificate followed by
	// its intermediates (--ssl-certfile, repeatable). Required for TLS.
	// The first is the default; the others serve the names of their
	// DNS SANs (Certs.GetCertificate).
	CertFiles []string
	// KeyFiles are the PEM private keys of CertFiles, pair by pair in
	// the same order (--ssl-keyfile, repeatable): PKCS#1, PKCS#8, SEC 1
	// (EC), encrypted PKCS#8 ("ENCRYPTED PRIVATE KEY") or a legacy
	// encrypted PEM ("Proc-Type: 4,ENCRYPTED").
	KeyFiles []string
	// KeyPassword decrypts the encrypted KeyFiles (--ssl-keyfile-password).
	KeyPassword string
	// CAFile is a PEM bundle of the CAs that sign client certificates
	// (--ssl-ca). Required when ClientVerify is "optional" or "required".
	CAFile string
	// ClientVerify is none, optional or required (--ssl-client-verify).
	// Default none.
	ClientVerify string
	// MinVersion is "1.2" or "1.3" (--ssl-min-version). Default "1.2".
	MinVersion string
	// Ciphers are the TLS 1.2 cipher suites (--ssl-ciphers), OpenSSL
	// names separated by ':' (ParseCiphers). Default "":
	// DefaultCipherSuites, Mozilla's intermediate configuration. TLS 1.3
	// suites are not configurable in Go.
	Ciphers string
	// NextProtos are the ALPN protocols offered, in order of preference
	// (RFC 7301): "h2", "http/1.1".
	NextProtos []string
}

// Enabled reports whether TLS is configured (a certificate is given, or
// obtained by ACME).
func (c *Config) Enabled() bool { return c.ACME || given(c.CertFiles) || given(c.KeyFiles) }

// given reports whether files names one: --ssl-certfile "" alone is no
// file, as it was when the flag took one value.
func given(files []string) bool {
	for _, f := range files {
		if f != "" {
			return true
		}
	}
	return false
}

// Check validates the settings without reading files.
func (c *Config) Check() error {
	if !c.Enabled() {
		if c.CAFile != "" || c.KeyPassword != "" || (c.ClientVerify != "" && c.ClientVerify != VerifyNone) {
			return errors.New("--ssl-ca, --ssl-keyfile-password and --ssl-client-verify need --ssl-certfile and --ssl-keyfile")
		}
		if c.Ciphers != "" {
			return errors.New("--ssl-ciphers needs --ssl-certfile and --ssl-keyfile")
		}
		return nil
	}
	if c.ACME {
		if given(c.CertFiles) || given(c.KeyFiles) || c.KeyPassword != "" {
			return errors.New("--acme-domain obtains the certificate: leave out --ssl-certfile, --ssl-keyfile and --ssl-keyfile-password")
		}
	} else if !given(c.CertFiles) || !given(c.KeyFiles) {
		return errors.New("TLS needs both --ssl-certfile and --ssl-keyfile")
	} else if len(c.CertFiles) != len(c.KeyFiles) {
		return fmt.Errorf("--ssl-certfile is given %d times and --ssl-keyfile %d: give them in pairs, in the same order", len(c.CertFiles), len(c.KeyFiles))
	} else {
		for i := range c.CertFiles {
			if c.CertFiles[i] == "" || c.KeyFiles[i] == "" {
				return errors.New("--ssl-certfile and --ssl-keyfile: an empty file name")
			}
		}
	}
	switch c.ClientVerify {
	case "", VerifyNone:
		// uvicorn takes --ssl-ca-certs with --ssl-cert-reqs 0 (none):
		// the bundle is read, no certificate asked for (CAUnused).
	case VerifyOptional, VerifyRequired:
		if c.CAFile == "" {
			return fmt.Errorf("--ssl-client-verify %s needs --ssl-ca (the CAs that sign client certificates)", c.ClientVerify)
		}
	default:
		return fmt.Errorf("--ssl-client-verify %q: want none, optional or required", c.ClientVerify)
	}
	mv, err := minVersion(c.MinVersion)
	if err != nil {
		return err
	}
	if c.Ciphers != "" {
		if mv >= tls.VersionTLS13 {
			return errors.New("--ssl-ciphers has no effect with --ssl-min-version 1.3 (Go's TLS 1.3 suites are not configurable): leave one out")
		}
		ids, _, err := ParseCiphers(c.Ciphers)
		if err != nil {
			return err
		}
		// internal/h2 closes a TLS 1.2 connection on a suite HTTP/2
		// prohibits, and RFC 9113 §9.2.2 requires the mandatory suite of
		// an HTTP/2 deployment on TLS 1.2: refuse a list that breaks h2.
		if offersH2(c) && !h2Mandatory(ids) {
			return errors.New("--ssl-ciphers: HTTP/2 on TLS 1.2 needs ECDHE-RSA-AES128-GCM-SHA256 or ECDHE-ECDSA-AES128-GCM-SHA256 (RFC 9113 §9.2.2): add one, or give --http 1")
		}
	}
	return nil
}

// CAUnused reports whether CAFile is given but no client certificate
// is asked for (ClientVerify none): the caller warns once.
func (c *Config) CAUnused() bool {
	return c.Enabled() && c.CAFile != "" && (c.ClientVerify == "" || c.ClientVerify == VerifyNone)
}

func minVersion(v string) (uint16, error) {
	switch v {
	case "", "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("--ssl-min-version %q: want 1.2 or 1.3", v)
}

// Load reads the files and returns the server's TLS configuration, or nil
// (and no error) when TLS is not enabled. Errors name the file and the
// flag: a missing or unreadable file, no certificate in a CertFile, a key
// that is encrypted without a password or with a wrong one, a key that
// does not match its certificate, no CA in CAFile.
func Load(c *Config) (*tls.Config, error) {
	tc, _, err := LoadCerts(c)
	return tc, err
}

// LoadCerts is Load that also returns the certificate set the
// configuration's GetCertificate serves from, for Reload and ServerCert;
// nil under ACME (and when TLS is off).
func LoadCerts(c *Config) (*tls.Config, *Certs, error) {
	if !c.Enabled() {
		return nil, nil, nil
	}
	if err := c.Check(); err != nil {
		return nil, nil, err
	}
	var certs *Certs
	if !c.ACME {
		var err error
		if certs, err = newCerts(c); err != nil {
			return nil, nil, err
		}
	}
	mv, _ := minVersion(c.MinVersion)
	suites := DefaultCipherSuites
	if c.Ciphers != "" {
		suites, _, _ = ParseCiphers(c.Ciphers) // checked by Check
	}
	tc := &tls.Config{
		MinVersion:   mv,
		CipherSuites: suites,
		NextProtos:   alpn(c.NextProtos),
	}
	if certs != nil {
		tc.GetCertificate = certs.GetCertificate
	}
	tc, err := finish(c, tc)
	if err != nil {
		return nil, nil, err
	}
	return tc, certs, nil
}

// alpn is the ALPN list given to crypto/tls: protos, and "http/1.0"
// after "http/1.1" when that is offered. A client that offers only
// "http/1.0" (curl --http1.0) is otherwise refused in the handshake
// (no_application_protocol, RFC 7301 §3.2: crypto/tls enforces an
// overlap) although HTTP/1.0 is served over HTTP/1.1's code; nginx
// accepts it likewise. The "listening" line names protos only.
func alpn(protos []string) []string {
	for i, p := range protos {
		if p == "http/1.1" {
			return append(append(slices.Clone(protos[:i+1]), "http/1.0"), protos[i+1:]...)
		}
	}
	return protos
}

// loadCert reads pair i: CertFiles[i] and KeyFiles[i].
func loadCert(c *Config, i int) (tls.Certificate, error) {
	var none tls.Certificate
	certFile, keyFile := c.CertFiles[i], c.KeyFiles[i]
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return none, fmt.Errorf("--ssl-certfile: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return none, fmt.Errorf("--ssl-keyfile: %w", err)
	}
	// One password serves every encrypted key; with several pairs a
	// plain key beside them is no error.
	keyPEM, err = decryptKey(keyPEM, c.KeyPassword, len(c.KeyFiles) > 1)
	if err != nil {
		return none, fmt.Errorf("--ssl-keyfile %s: %w", keyFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return none, fmt.Errorf("--ssl-certfile %s / --ssl-keyfile %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil { // GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return none, fmt.Errorf("--ssl-certfile %s: %w", certFile, err)
		}
	}
	return cert, nil
}

// finish adds client authentication to tc.
func finish(c *Config, tc *tls.Config) (*tls.Config, error) {
	switch c.ClientVerify {
	case VerifyOptional:
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	case VerifyRequired:
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if c.CAFile != "" {
		caPEM, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--ssl-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("--ssl-ca %s: no PEM certificate found", c.CAFile)
		}
		tc.ClientCAs = pool
	}
	return tc, nil
}

// decryptKey returns keyPEM with its private key decrypted, as an
// unencrypted PEM block ("PRIVATE KEY", PKCS#8), when it is encrypted;
// else keyPEM unchanged. An encrypted key without password, or a wrong
// password, is an error; so is a password for a plain key unless plainOK.
func decryptKey(keyPEM []byte, password string, plainOK bool) ([]byte, error) {
	rest := keyPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if password != "" && !plainOK {
				return nil, errors.New("--ssl-keyfile-password is given but the key is not encrypted")
			}
			return keyPEM, nil
		}
		if block.Type == "ENCRYPTED PRIVATE KEY" {
			if password == "" {
				return nil, errors.New("the key is encrypted: give --ssl-keyfile-password")
			}
			key, err := pkcs8.ParsePKCS8PrivateKey(block.Bytes, []byte(password))
			if err != nil {
				return nil, fmt.Errorf("cannot decrypt the key (wrong --ssl-keyfile-password?): %w", err)
			}
			der, err := x509.MarshalPKCS8PrivateKey(key)
			if err != nil {
				return nil, err
			}
			return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
		}
		//lint:ignore SA1019 legacy encrypted PEM (RFC 1423) is still what `openssl rsa -aes256` writes
		if strings.HasSuffix(block.Type, "PRIVATE KEY") && x509.IsEncryptedPEMBlock(block) { //nolint:staticcheck
			if password == "" {
				return nil, errors.New("the key is encrypted: give --ssl-keyfile-password")
			}
			der, err := x509.DecryptPEMBlock(block, []byte(password)) //nolint:staticcheck
			if err == nil && !isPrivateKeyDER(der) {
				// RFC 1423 has no integrity check: a wrong password passes
				// the padding check about once in 256 tries and yields
				// garbage (Go's DecryptPEMBlock says so).
				err = errors.New("the decrypted bytes are not a private key")
			}
			if err != nil {
				return nil, fmt.Errorf("cannot decrypt the key (wrong --ssl-keyfile-password?): %w", err)
			}
			return pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: der}), nil
		}
	}
}

// Describe returns a one-line summary for the "listening" log line, e.g.
// "TLS>=1.2 alpn=h2,http/1.1 client-verify=required", or "off"; with
// several --ssl-certfile pairs it counts them ("certs=3"). With
// --ssl-ciphers it names the TLS 1.2 suites in effect (OpenSSL names) and
// those skipped: "... ciphers=ECDHE-RSA-AES256-GCM-SHA384
// skipped=DHE-RSA-AES128-GCM-SHA256".
func Describe(c *Config) string {
	if !c.Enabled() {
		return "off"
	}
	mv := c.MinVersion
	if mv == "" {
		mv = "1.2"
	}
	cv := c.ClientVerify
	if cv == "" {
		cv = VerifyNone
	}
	d := "TLS>=" + mv + " alpn=" + strings.Join(c.NextProtos, ",") + " client-verify=" + cv
	if c.ACME {
		d += " cert=acme"
	} else if n := len(c.CertFiles); n > 1 {
		d += fmt.Sprintf(" certs=%d", n) // chosen by SNI
	}
	if c.Ciphers != "" {
		if ids, skipped, err := ParseCiphers(c.Ciphers); err == nil {
			names := make([]string, len(ids))
			for i, id := range ids {
				names[i] = CipherName(id)
			}
			d += " ciphers=" + strings.Join(names, ":")
			if len(skipped) > 0 {
				d += " skipped=" + strings.Join(skipped, ":")
			}
		}
	}
	return d
}

// isPrivateKeyDER reports whether der parses as a PKCS #1 RSA, SEC 1 EC or
// PKCS #8 private key, the forms a legacy encrypted PEM block holds.
func isPrivateKeyDER(der []byte) bool {
	if _, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return true
	}
	if _, err := x509.ParseECPrivateKey(der); err == nil {
		return true
	}
	_, err := x509.ParsePKCS8PrivateKey(der)
	return err == nil
}
