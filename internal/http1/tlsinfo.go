package http1

import (
	"crypto/tls"
	"encoding/pem"
)

// What the apps are told of a request's TLS connection (Request.TLS,
// Request.ServerCert): the ASGI tls extension (internal/asgi) and the
// mod_ssl environ keys (internal/wsgi) use these.

// CertPEM returns der (an X.509 certificate) as PEM.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
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
