package server

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"turnstile/internal/acme"
	"turnstile/internal/config"
)

// newACME returns the certificate manager for --acme-*: TLS-ALPN-01
// validations come to the TLS listener at tcp.
func newACME(cfg *config.Config, tcp net.Addr, log *slog.Logger) (*acme.Manager, error) {
	ta, ok := tcp.(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("--acme-domain needs a TCP listener, not %s", tcp)
	}
	challenges := cfg.ACMEChallenge
	if challenges == "any" {
		challenges = ""
	}
	return acme.New(acme.Config{
		Domains:    cfg.ACMEDomains,
		Email:      cfg.ACMEEmail,
		CA:         cfg.ACMECA,
		CARoot:     cfg.ACMECARoot,
		Storage:    cfg.ACMEStorage,
		Challenges: challenges,
		HTTPPort:   cfg.ACMEHTTPPort,
		TLSPort:    ta.Port,
		RenewCheck: cfg.ACMERenewCheck,
		Timeout:    max(cfg.StartupTimeout-5*time.Second, 10*time.Second),
	}, log)
}
