package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/youmark/pkcs8"
)

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// selfSigned returns a certificate PEM and its key.
func selfSigned(t *testing.T) ([]byte, *ecdsa.PrivateKey) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "t"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string // "" = valid
	}{
		{Config{}, ""},
		{Config{CAFile: "ca.pem"}, "need --ssl-certfile"},
		{Config{CertFiles: []string{"c"}}, "both --ssl-certfile and --ssl-keyfile"},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}}, ""},
		{Config{CertFiles: []string{"c", "d"}, KeyFiles: []string{"k"}}, "--ssl-certfile is given 2 times and --ssl-keyfile 1"},
		{Config{CertFiles: []string{"c", "d"}, KeyFiles: []string{"k", ""}}, "an empty file name"},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, ClientVerify: "required"}, "needs --ssl-ca"},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, ClientVerify: "optional", CAFile: "ca"}, ""},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, CAFile: "ca"}, ""}, // uvicorn's ca_certs with cert_reqs none: CAUnused, a warning
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, ClientVerify: "yes"}, "want none, optional or required"},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, MinVersion: "1.3"}, ""},
		{Config{CertFiles: []string{"c"}, KeyFiles: []string{"k"}, MinVersion: "1.0"}, "--ssl-min-version"},
	} {
		err := tc.c.Check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%+v) = %v; want %q", tc.c, err, tc.want)
		}
	}
}

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	certPEM, key := selfSigned(t)
	cert := writeFile(t, dir, "cert.pem", certPEM)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	plain := writeFile(t, dir, "key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	encDER, err := pkcs8.MarshalPrivateKey(key, []byte("pw"), nil)
	if err != nil {
		t.Fatal(err)
	}
	enc := writeFile(t, dir, "enc.pem", pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: encDER}))
	ecDER, _ := x509.MarshalECPrivateKey(key)
	//lint:ignore SA1019 testing the legacy format on purpose
	legacyBlock, err := x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", ecDER, []byte("pw"), x509.PEMCipherAES256) //nolint:staticcheck
	if err != nil {
		t.Fatal(err)
	}
	legacy := writeFile(t, dir, "legacy.pem", pem.EncodeToMemory(legacyBlock))

	for _, tc := range []struct {
		name, key, pw, want string
	}{
		{"plain", plain, "", ""},
		{"plain with a password", plain, "pw", "not encrypted"},
		{"pkcs8 encrypted", enc, "pw", ""},
		{"pkcs8 wrong password", enc, "no", "wrong --ssl-keyfile-password"},
		{"pkcs8 no password", enc, "", "give --ssl-keyfile-password"},
		{"legacy encrypted", legacy, "pw", ""},
		{"legacy wrong password", legacy, "no", "wrong --ssl-keyfile-password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{CertFiles: []string{cert}, KeyFiles: []string{tc.key}, KeyPassword: tc.pw, NextProtos: []string{"h2"}}
			tc2, err := Load(&c)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Load = %v; want an error saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc2.GetCertificate == nil || tc2.MinVersion != tls.VersionTLS12 || tc2.NextProtos[0] != "h2" {
				t.Errorf("config = %+v", tc2)
			}
		})
	}

	// A legacy (RFC 1423) block has no integrity check: about one wrong
	// password in 256 passes the padding check and decrypts to garbage,
	// which gave "tls: failed to parse private key" (a CI run hit it).
	// Every wrong password must be named as such.
	t.Run("legacy wrong passwords", func(t *testing.T) {
		for i := 0; i < 2000; i++ {
			pw := fmt.Sprintf("wrong-%d", i)
			c := Config{CertFiles: []string{cert}, KeyFiles: []string{legacy}, KeyPassword: pw}
			if _, err := Load(&c); err == nil || !strings.Contains(err.Error(), "wrong --ssl-keyfile-password") {
				t.Fatalf("password %q: Load = %v; want an error saying \"wrong --ssl-keyfile-password\"", pw, err)
			}
		}
	})
}
