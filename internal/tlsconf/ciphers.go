package tlsconf

// TLS 1.2 cipher suites: the default list (--ssl-ciphers unset) and the
// parsing of --ssl-ciphers.
//
// TLS 1.3 suites are not configurable in Go's crypto/tls (all three are
// always on, and sound); this only governs TLS 1.2. Go ignores the order
// of tls.Config.CipherSuites (since Go 1.17): it picks by its own
// preference, AEAD with ECDHE first, AES-GCM before ChaCha20-Poly1305
// when both ends have AES hardware.

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
)

// DefaultCipherSuites are the TLS 1.2 suites offered when --ssl-ciphers
// is not given: Mozilla's "intermediate" configuration (Server Side TLS
// guidelines, https://wiki.mozilla.org/Security/Server_Side_TLS and
// https://ssl-config.mozilla.org), ECDHE key exchange with AES-GCM or
// ChaCha20-Poly1305 only. Its 5.x versions also list three DHE-RSA
// suites, which Go does not implement. Go's own default adds the
// ECDHE CBC-SHA1 suites, which testssl.sh reports as open to LUCKY13.
// Every suite here is allowed by HTTP/2 (RFC 9113 §9.2.2, RFC 7540
// Appendix A), and the list holds both of the suites x/net/http2 takes
// as HTTP/2's mandatory one (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, or
// its ECDSA twin for an ECDSA-only server).
var DefaultCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// opensslNames maps each TLS 1.0–1.2 suite Go implements to its OpenSSL
// name (`openssl ciphers -stdname`), the names gunicorn's --ciphers and
// uvicorn's --ssl-ciphers take (Python's SSLContext.set_ciphers).
var opensslNames = map[uint16]string{
	tls.TLS_RSA_WITH_RC4_128_SHA:                      "RC4-SHA",
	tls.TLS_RSA_WITH_3DES_EDE_CBC_SHA:                 "DES-CBC3-SHA",
	tls.TLS_RSA_WITH_AES_128_CBC_SHA:                  "AES128-SHA",
	tls.TLS_RSA_WITH_AES_256_CBC_SHA:                  "AES256-SHA",
	tls.TLS_RSA_WITH_AES_128_CBC_SHA256:               "AES128-SHA256",
	tls.TLS_RSA_WITH_AES_128_GCM_SHA256:               "AES128-GCM-SHA256",
	tls.TLS_RSA_WITH_AES_256_GCM_SHA384:               "AES256-GCM-SHA384",
	tls.TLS_ECDHE_ECDSA_WITH_RC4_128_SHA:              "ECDHE-ECDSA-RC4-SHA",
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA:          "ECDHE-ECDSA-AES128-SHA",
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA:          "ECDHE-ECDSA-AES256-SHA",
	tls.TLS_ECDHE_RSA_WITH_RC4_128_SHA:                "ECDHE-RSA-RC4-SHA",
	tls.TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA:           "ECDHE-RSA-DES-CBC3-SHA",
	tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA:            "ECDHE-RSA-AES128-SHA",
	tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA:            "ECDHE-RSA-AES256-SHA",
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256:       "ECDHE-ECDSA-AES128-SHA256",
	tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256:         "ECDHE-RSA-AES128-SHA256",
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:         "ECDHE-RSA-AES128-GCM-SHA256",
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:       "ECDHE-ECDSA-AES128-GCM-SHA256",
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:         "ECDHE-RSA-AES256-GCM-SHA384",
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:       "ECDHE-ECDSA-AES256-GCM-SHA384",
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:   "ECDHE-RSA-CHACHA20-POLY1305",
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-ECDSA-CHACHA20-POLY1305",
}

// notInGo are OpenSSL suite names that Mozilla's configurations list
// but Go does not implement (DHE key exchange, CBC with SHA-384 or
// SHA-256 other than the three Go has). A list naming them is taken as
// OpenSSL takes a list naming a suite it lacks: they are skipped. Any
// other unknown name is an error (a typo should not pass).
var notInGo = map[string]bool{
	"DHE-RSA-AES128-GCM-SHA256": true, "DHE-RSA-AES256-GCM-SHA384": true, "DHE-RSA-CHACHA20-POLY1305": true,
	"DHE-RSA-AES128-SHA256": true, "DHE-RSA-AES256-SHA256": true, "DHE-RSA-AES128-SHA": true, "DHE-RSA-AES256-SHA": true,
	"ECDHE-ECDSA-AES256-SHA384": true, "ECDHE-RSA-AES256-SHA384": true, "AES256-SHA256": true,
}

// suiteByName finds a TLS 1.2 suite by its OpenSSL name or its IANA/Go
// name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256; Go's older spelling
// without _SHA256 for ChaCha20 too), case-insensitively.
var suiteByName = func() map[string]uint16 {
	m := map[string]uint16{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if !isTLS12(cs) {
			continue
		}
		m[strings.ToUpper(cs.Name)] = cs.ID
		if o, ok := opensslNames[cs.ID]; ok {
			m[o] = cs.ID
		}
	}
	m["TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"] = tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
	m["TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"] = tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
	return m
}()

// tls13Names are the TLS 1.3 suites' names (TLS_AES_128_GCM_SHA256, …):
// always on in Go, so a list naming them is not an error, but they
// change nothing.
var tls13Names = func() map[string]bool {
	m := map[string]bool{}
	for _, cs := range tls.CipherSuites() {
		if !isTLS12(cs) {
			m[cs.Name] = true
		}
	}
	return m
}()

func isTLS12(cs *tls.CipherSuite) bool {
	for _, v := range cs.SupportedVersions {
		if v <= tls.VersionTLS12 {
			return true
		}
	}
	return false
}

// CipherName is a suite's OpenSSL name, or Go's name when OpenSSL has
// none.
func CipherName(id uint16) string {
	if o, ok := opensslNames[id]; ok {
		return o
	}
	return tls.CipherSuiteName(id)
}

// ParseCiphers parses an --ssl-ciphers value: suite names separated by
// ':' (OpenSSL's separator; ',' and spaces are taken too), each an
// OpenSSL name (ECDHE-RSA-AES128-GCM-SHA256) or an IANA/Go name
// (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256). OpenSSL's keywords and
// operators (HIGH, !aNULL, +RSA, @STRENGTH) are not taken. It returns the
// suites, and the names that were skipped: OpenSSL names Go does not
// implement (notInGo) and TLS 1.3 names. An unknown name, an RC4 suite
// (RFC 7465 forbids them), a 3DES one (SWEET32) or a list that leaves no
// suite is an error
// naming the value.
func ParseCiphers(s string) (ids []uint16, skipped []string, err error) {
	names := strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == ',' || r == ' ' || r == '\t' })
	var unknown []string
	seen := map[uint16]bool{}
	for _, n := range names {
		up := strings.ToUpper(n)
		id, ok := suiteByName[up]
		switch {
		case ok && strings.Contains(tls.CipherSuiteName(id), "_RC4_"):
			return nil, nil, fmt.Errorf("--ssl-ciphers: %s is an RC4 suite, which TLS must not negotiate (RFC 7465)", n)
		case ok && strings.Contains(tls.CipherSuiteName(id), "_3DES_"):
			return nil, nil, fmt.Errorf("--ssl-ciphers: %s is a 3DES suite, open to SWEET32 (CVE-2016-2183; RFC 9325 §4.1 forbids it)", n)
		case ok:
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		case notInGo[up] || tls13Names[up]:
			skipped = append(skipped, n)
		default:
			unknown = append(unknown, n)
		}
	}
	const want = "want OpenSSL names such as ECDHE-RSA-AES128-GCM-SHA256, separated by ':'; keywords such as HIGH or !aNULL are not taken"
	switch {
	case len(unknown) == 1:
		return nil, nil, fmt.Errorf("--ssl-ciphers: unknown cipher %q (%s)", unknown[0], want)
	case len(unknown) > 1:
		return nil, nil, fmt.Errorf("--ssl-ciphers: unknown ciphers %s (%s)", quoteAll(unknown), want)
	case len(names) == 0:
		return nil, nil, errors.New("--ssl-ciphers: no cipher named (leave it unset for the default)")
	case len(ids) == 0:
		why := []string{}
		var lacks, v13 []string
		for _, n := range skipped {
			if tls13Names[strings.ToUpper(n)] {
				v13 = append(v13, n)
			} else {
				lacks = append(lacks, n)
			}
		}
		if len(lacks) > 0 {
			why = append(why, "Go does not implement "+strings.Join(lacks, ", "))
		}
		if len(v13) > 0 {
			why = append(why, "TLS 1.3 suites are always on: "+strings.Join(v13, ", "))
		}
		return nil, nil, fmt.Errorf("--ssl-ciphers %q: no TLS 1.2 suite left (%s)", s, strings.Join(why, "; "))
	}
	return ids, skipped, nil
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// h2Mandatory reports whether ids holds one of the suites taken as
// HTTP/2's mandatory one: RFC 9113 §9.2.2 (RFC 7540 §9.2.2) requires
// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 of an HTTP/2 deployment on TLS
// 1.2, and TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 is accepted for an
// ECDSA-only server (as x/net/http2's http2.ConfigureServer does).
func h2Mandatory(ids []uint16) bool {
	for _, id := range ids {
		if id == tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 || id == tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 {
			return true
		}
	}
	return false
}

// h2Allowed reports whether HTTP/2 may run over suite id on TLS 1.2: RFC
// 9113 §9.2.2 and RFC 7540 Appendix A prohibit every suite without an
// ephemeral key exchange or with a non-AEAD cipher, and internal/h2
// closes such a connection with INADEQUATE_SECURITY (suiteAllowed there). Of the suites Go
// implements, that leaves ECDHE with AES-GCM or ChaCha20-Poly1305.
func h2Allowed(id uint16) bool {
	n := tls.CipherSuiteName(id)
	return strings.HasPrefix(n, "TLS_ECDHE_") && (strings.Contains(n, "_GCM_") || strings.Contains(n, "_CHACHA20_POLY1305"))
}

// keyKind is "RSA" or "ECDSA" (the suite family a certificate's key
// signs or decrypts for on TLS 1.2; Ed25519 signs ECDHE_ECDSA suites),
// or "" when unknown.
func keyKind(cert *tls.Certificate) string {
	switch cert.PrivateKey.(type) {
	case *rsa.PrivateKey:
		return "RSA"
	case *ecdsa.PrivateKey, ed25519.PrivateKey:
		return "ECDSA"
	}
	return ""
}

// usableWith reports whether suite id can be negotiated with a key of
// this kind on TLS 1.2.
func usableWith(id uint16, kind string) bool {
	n := tls.CipherSuiteName(id)
	switch kind {
	case "RSA":
		return strings.HasPrefix(n, "TLS_ECDHE_RSA_") || strings.HasPrefix(n, "TLS_RSA_")
	case "ECDSA":
		return strings.HasPrefix(n, "TLS_ECDHE_ECDSA_")
	}
	return true
}

// checkSuitesForKey checks a --ssl-ciphers list against the certificate
// of pair i:
// on TLS 1.2 at least one suite must suit its key, and when h2 is offered
// one that HTTP/2 allows, else every TLS 1.2 (HTTP/2) client would fail.
func checkSuitesForKey(c *Config, i int, ids []uint16, cert *tls.Certificate) error {
	kind := keyKind(cert)
	if kind == "" {
		return nil
	}
	usable, h2ok := false, false
	for _, id := range ids {
		if usableWith(id, kind) {
			usable = true
			h2ok = h2ok || h2Allowed(id)
		}
	}
	if !usable {
		return fmt.Errorf("--ssl-ciphers: no listed suite works with the %s key of --ssl-certfile %s on TLS 1.2 (want ECDHE-%s-… suites)", kind, c.CertFiles[i], kind)
	}
	if offersH2(c) && !h2ok {
		return fmt.Errorf("--ssl-ciphers: no listed suite for the %s key of --ssl-certfile %s is allowed by HTTP/2 (RFC 9113 §9.2.2: ECDHE with AES-GCM or CHACHA20-POLY1305); add ECDHE-%s-AES128-GCM-SHA256, or give --http 1", kind, c.CertFiles[i], kind)
	}
	return nil
}

func offersH2(c *Config) bool {
	for _, p := range c.NextProtos {
		if p == "h2" {
			return true
		}
	}
	return false
}
