package http1

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"strings"
	"sync"
)

// What the apps are told of a request's TLS connection (Request.TLS,
// Request.Certs): the ASGI tls extension (internal/asgi) and the
// mod_ssl environ keys (internal/wsgi) use these.

// ConnCerts is the certificates of one TLS connection as the apps are
// told them, encoded once per connection, on the first request (or
// HTTP/2 or HTTP/3 stream) that asks, and shared read-only by the
// connection's requests (Request.Certs). Safe for concurrent use: the
// streams of one connection ask at once.
type ConnCerts struct {
	state      *tls.ConnectionState
	serverCert func(serverName string) []byte // Server.TLSServerCert; nil: unknown

	serverOnce sync.Once
	server     []byte
	clientOnce sync.Once
	client     *ClientCert
}

// newConnCerts returns the cache for a connection with TLS state cs
// whose server certificate serverCert picks (nil: unknown); nil when cs
// is nil (a plain connection).
func newConnCerts(cs *tls.ConnectionState, serverCert func(string) []byte) *ConnCerts {
	if cs == nil {
		return nil
	}
	return &ConnCerts{state: cs, serverCert: serverCert}
}

// ServerCert returns the PEM of the certificate the server sends: what
// Server.TLSServerCert picks for the connection's SNI server name,
// asked once per connection, at the first call. Nil when unknown (no
// TLSServerCert) or when c is nil (a plain connection).
func (c *ConnCerts) ServerCert() []byte {
	if c == nil || c.serverCert == nil {
		return nil
	}
	c.serverOnce.Do(func() { c.server = c.serverCert(c.state.ServerName) })
	return c.server
}

// ClientCert is the certificate chain the client sent, verified by the
// handshake, as text: mod_ssl's SSL_CLIENT_* keys and the ASGI tls
// extension's client_cert_chain and client_cert_name.
type ClientCert struct {
	Chain     [][]byte // PEM of each certificate (PeerCertificates), leaf first
	SubjectDN []byte   // the leaf's subject (DN)
	IssuerDN  []byte   // the leaf's issuer (DN)
	Serial    []byte   // the leaf's serial number, upper-case hex
}

// Client returns the client's certificate chain, encoded at the first
// call; nil when the client sent none or c is nil (a plain connection).
func (c *ConnCerts) Client() *ClientCert {
	if c == nil {
		return nil
	}
	c.clientOnce.Do(func() {
		pc := c.state.PeerCertificates
		if len(pc) == 0 {
			return
		}
		cc := &ClientCert{
			Chain:     make([][]byte, len(pc)),
			SubjectDN: []byte(DN(pc[0].RawSubject, pc[0].Subject)),
			IssuerDN:  []byte(DN(pc[0].RawIssuer, pc[0].Issuer)),
			Serial:    []byte(strings.ToUpper(pc[0].SerialNumber.Text(16))),
		}
		for i, x := range pc {
			cc.Chain[i] = CertPEM(x.Raw)
		}
		c.client = cc
	})
	return c.client
}

// CertPEM returns der (an X.509 certificate) as PEM.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// DN is the RFC 4514 string of a distinguished name as the certificate
// encodes it (raw: RawSubject or RawIssuer), its RDNs in the
// certificate's order, reversed as RFC 4514 §2.1 writes them. n (the
// parsed Subject or Issuer) is the fallback for raw bytes that do not
// parse; pkix.Name.String alone puts the attributes in Go's own order
// (C, O, OU, ..., CN), not the certificate's, and merges multi-valued RDNs.
func DN(raw []byte, n pkix.Name) string {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(raw, &seq); err == nil && len(rest) == 0 {
		return seq.String()
	}
	return n.String()
}

// TLSVersionName is the protocol's name as OpenSSL (mod_ssl's
// SSL_PROTOCOL) writes it: "TLSv1.2", "TLSv1.3".
func TLSVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLSv1.3"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS10:
		return "TLSv1"
	}
	return tls.VersionName(v)
}
