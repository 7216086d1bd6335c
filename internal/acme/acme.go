// Package acme obtains and renews the server's certificates from an ACME
// CA (RFC 8555: Let's Encrypt by default, any ACME CA with --acme-ca) with
// certmagic, for --acme-domain.
//
// Every worker runs a Manager on the same storage directory
// (--acme-storage, certmagic's FileStorage). certmagic takes a lock file
// in the storage before it obtains or renews a certificate, so one worker
// talks to the CA while the others wait for the lock and then load what
// it stored; each worker's maintenance goroutine checks its certificates
// every RenewCheck and renews one when a third of its lifetime is left
// (certmagic's default RenewalWindowRatio), or loads the renewal another
// worker stored first: renewed without a restart. A certificate already
// in the storage is served without contacting the CA, so an unreachable
// CA at start stops the server only when there is none.
//
// Challenges are answered in Go by certmagic: TLS-ALPN-01 (RFC 8737) on
// the TLS port, through Manager's GetCertificate, which the worker's TLS
// configuration uses, with "acme-tls/1" offered by ALPN; HTTP-01 (RFC
// 8555 §8.3) on HTTPPort (default 80), which certmagic's solver listens on
// for the time of a challenge. The challenge data is kept in the storage
// (certmagic's distributed solving), so any worker can answer a
// TLS-ALPN-01 validation that the kernel sends its way.
package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// DefaultCA is Let's Encrypt's production directory.
const DefaultCA = certmagic.LetsEncryptProductionCA

// Config is what --acme-* give.
type Config struct {
	Domains []string // --acme-domain: the names on the certificate(s)
	Email   string   // --acme-email: the ACME account's contact
	CA      string   // --acme-ca: the CA's directory URL; "": DefaultCA
	// CARoot is a PEM bundle the CA's HTTPS server is verified with
	// (--acme-ca-root; a private CA, pebble); "": the system's roots.
	CARoot string
	// Storage is the directory certificates, keys, account and locks are
	// kept in (--acme-storage), shared by the workers; "": certmagic's
	// ($XDG_DATA_HOME/certmagic, else ~/.local/share/certmagic).
	Storage string
	// Challenges: "tls-alpn-01", "http-01", or "" for both.
	Challenges string
	// HTTPPort is the port HTTP-01 validations come to (80).
	HTTPPort int
	// TLSPort is the TLS listener's port, where TLS-ALPN-01 validations
	// come to (certmagic then finds it bound and answers through
	// GetCertificate).
	TLSPort int
	// RenewCheck is how often the certificates are checked for renewal
	// (certmagic's RenewCheckInterval); 0: 10 minutes.
	RenewCheck time.Duration
	// Timeout bounds obtaining the certificates at start.
	Timeout time.Duration
}

// Manager holds the certificates of Config.Domains.
type Manager struct {
	c     Config
	ca    string
	cfg   *certmagic.Config
	cache *certmagic.Cache
}

// New returns the Manager of c. It answers TLS-ALPN-01 challenges
// (TLSConfig) from now on; Obtain gets the certificates.
func New(c Config, log *slog.Logger) (*Manager, error) {
	zl := zap.New(&slogCore{log: log, level: zapcore.InfoLevel})
	var roots *x509.CertPool
	if c.CARoot != "" {
		pem, err := os.ReadFile(c.CARoot)
		if err != nil {
			return nil, fmt.Errorf("--acme-ca-root: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--acme-ca-root %s: no PEM certificate found", c.CARoot)
		}
	}
	ca := c.CA
	if ca == "" {
		ca = DefaultCA
	}
	var mcfg *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return mcfg, nil },
		RenewCheckInterval: c.RenewCheck,
		Logger:             zl,
	})
	var storage certmagic.Storage = &certmagic.FileStorage{Path: c.Storage}
	if c.Storage == "" {
		storage = certmagic.Default.Storage // $XDG_DATA_HOME/certmagic, ~/.local/share/certmagic
	}
	mcfg = certmagic.New(cache, certmagic.Config{Storage: storage, Logger: zl})
	issuer := certmagic.NewACMEIssuer(mcfg, certmagic.ACMEIssuer{
		CA:                      ca,
		Email:                   c.Email,
		Agreed:                  true,
		TrustedRoots:            roots,
		DisableHTTPChallenge:    c.Challenges == "tls-alpn-01",
		DisableTLSALPNChallenge: c.Challenges == "http-01",
		AltHTTPPort:             c.HTTPPort,
		AltTLSALPNPort:          c.TLSPort,
		Logger:                  zl,
	})
	mcfg.Issuers = []certmagic.Issuer{issuer}
	return &Manager{c: c, ca: ca, cfg: mcfg, cache: cache}, nil
}

// Obtain loads the certificates of the domains from the storage, or
// obtains them from the CA (one worker at a time: the storage's lock),
// and starts their maintenance (renewal). It returns once every domain
// has a certificate, or the error that left one without. The TLS
// listener must be serving meanwhile: the CA's TLS-ALPN-01 validation
// comes to it.
func (m *Manager) Obtain(ctx context.Context) error {
	if m.c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.c.Timeout)
		defer cancel()
	}
	// Obtained first without prompts: ManageSync is certmagic's
	// "interactive" obtain, which with no --acme-email and none in the
	// storage asks for one on stdin and prints the question (into the
	// worker's log); ObtainCertAsync is the same obtain, synchronous,
	// without prompts (an account without a contact, as a blank answer
	// gives). ManageSync then finds the certificates in the storage.
	for _, d := range m.c.Domains {
		if err := m.cfg.ObtainCertAsync(ctx, d); err != nil {
			return fmt.Errorf("acme: no certificate for %v from %s: %w", m.c.Domains, m.ca, err)
		}
	}
	if err := m.cfg.ManageSync(ctx, m.c.Domains); err != nil {
		return fmt.Errorf("acme: no certificate for %v from %s: %w", m.c.Domains, m.ca, err)
	}
	return nil
}

// TLSConfig makes tc serve the managed certificates (by SNI; a client
// without SNI gets the first domain's) and answer TLS-ALPN-01 challenges.
func (m *Manager) TLSConfig(tc *tls.Config) {
	firstDomain := m.c.Domains[0]
	tc.Certificates = nil
	tc.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if hello.ServerName == "" {
			h := *hello
			h.ServerName = firstDomain
			hello = &h
		}
		return m.cfg.GetCertificate(hello)
	}
	if !slices.Contains(tc.NextProtos, "acme-tls/1") {
		tc.NextProtos = append(tc.NextProtos, "acme-tls/1")
	}
}

// Stop ends the maintenance goroutine.
func (m *Manager) Stop() { m.cache.Stop() }

// slogCore sends certmagic's zap records to slog at their level (debug
// records are dropped).
type slogCore struct {
	log    *slog.Logger
	level  zapcore.Level
	fields []zapcore.Field
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.level }

func (c *slogCore) With(fs []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, level: c.level, fields: append(slices.Clip(c.fields), fs...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clip(c.fields), fs...) {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields)+2)
	for k, v := range enc.Fields {
		attrs = append(attrs, k, v)
	}
	lvl := slog.LevelInfo
	switch {
	case e.Level >= zapcore.ErrorLevel:
		lvl = slog.LevelError
	case e.Level == zapcore.WarnLevel:
		lvl = slog.LevelWarn
	}
	c.log.Log(context.Background(), lvl, "acme: "+e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }
