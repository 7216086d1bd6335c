package http1

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
)

// What the apps are told of a request's TLS connection (Request.TLS,
// Request.ServerCert): the ASGI tls extension (internal/asgi) and the
// mod_ssl environ keys (internal/wsgi) use these.

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
