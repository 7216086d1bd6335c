package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"
)

// namedPair writes a self-signed certificate of this serial for dns, with
// an ECDSA key, or an RSA one when rsaKey; it returns the two files.
func namedPair(t *testing.T, dir string, serial int64, rsaKey bool, dns ...string) (string, string) {
	t.Helper()
	var key crypto.Signer
	if rsaKey {
		key, _ = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "t"}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return writeFile(t, dir, fmt.Sprintf("c%d.pem", serial), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		writeFile(t, dir, fmt.Sprintf("k%d.pem", serial), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

func TestCertsGetCertificate(t *testing.T) {
	dir := t.TempDir()
	var c Config
	for _, p := range []struct {
		serial int64
		rsa    bool
		dns    []string
	}{{1, false, []string{"default.test"}}, {2, false, []string{"a.test"}}, {3, false, []string{"*.b.test"}}, {4, true, []string{"a.test"}}} {
		cf, kf := namedPair(t, dir, p.serial, p.rsa, p.dns...)
		c.CertFiles, c.KeyFiles = append(c.CertFiles, cf), append(c.KeyFiles, kf)
	}
	_, certs, err := LoadCerts(&c)
	if err != nil {
		t.Fatal(err)
	}
	ecdsaOnly := []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256}
	rsaOnly := []tls.SignatureScheme{tls.PSSWithSHA256}
	for _, tc := range []struct {
		name    string
		schemes []tls.SignatureScheme
		want    int64
	}{
		{"", nil, 1}, {"default.test", nil, 1}, {"a.test", nil, 2}, {"A.Test", nil, 2},
		{"x.b.test", nil, 3}, {"b.test", nil, 1}, {"y.x.b.test", nil, 1}, {"other.test", nil, 1},
		{"a.test", ecdsaOnly, 2}, {"a.test", rsaOnly, 4}, {"x.b.test", rsaOnly, 3},
	} {
		hello := &tls.ClientHelloInfo{ServerName: tc.name, SignatureSchemes: tc.schemes,
			SupportedVersions: []uint16{tls.VersionTLS13}, SupportedCurves: []tls.CurveID{tls.CurveP256}}
		got, _ := certs.GetCertificate(hello)
		if s := got.Leaf.SerialNumber.Int64(); s != tc.want {
			t.Errorf("SNI %q, schemes %v: serial %d; want %d", tc.name, tc.schemes, s, tc.want)
		}
	}

	// Reload: a key that no longer matches keeps the set in use.
	_, otherKey := namedPair(t, t.TempDir(), 9, false, "a.test")
	keys := c.KeyFiles
	certs.c.KeyFiles = append([]string{otherKey}, keys[1:]...)
	if err := certs.Reload(); err == nil {
		t.Fatal("Reload with a mismatched key: no error")
	}
	if got, _ := certs.GetCertificate(&tls.ClientHelloInfo{}); got.Leaf.SerialNumber.Int64() != 1 {
		t.Errorf("after a failed Reload: serial %d; want 1", got.Leaf.SerialNumber.Int64())
	}
	// A new default pair.
	cf, kf := namedPair(t, dir, 1, false, "default.test") // same names, new key and certificate
	certs.c.CertFiles[0], certs.c.KeyFiles[0] = cf, kf
	before, _ := certs.GetCertificate(&tls.ClientHelloInfo{})
	if err := certs.Reload(); err != nil {
		t.Fatal(err)
	}
	after, _ := certs.GetCertificate(&tls.ClientHelloInfo{})
	if before == after || string(after.Leaf.Raw) == string(before.Leaf.Raw) {
		t.Error("Reload did not swap the certificate")
	}
}
