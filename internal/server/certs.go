package server

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"turnstile/internal/tlsconf"
)

// reloadCertsOnHUP re-reads the --ssl-certfile/--ssl-keyfile pairs on
// each SIGHUP, in place (tlsconf.Certs.Reload): the handshakes that follow
// get the new certificates, the connections already made keep going. The
// master sends SIGHUP to its ready workers once it has read the files
// itself (SIGHUP to the master, `turnstile ctl reload-certs`). Files that
// do not load (unparsable, a key that does not match) keep the
// certificates in use, with one error record. It returns the function that
// stops watching (SIGHUP is ignored from then on).
func reloadCertsOnHUP(certs *tlsconf.Certs, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
			case <-done:
				return
			}
			if err := certs.Reload(); err != nil {
				log.Error("turnstile: TLS: certificates not reloaded, the ones in use stay: " + err.Error())
				continue
			}
			log.Info(workerMsg("TLS certificates reloaded"), "serials", certs.Serials())
		}
	}()
	return func() {
		// Ignored, not the default (which ends the process): a SIGHUP
		// may still come while the worker drains.
		signal.Ignore(syscall.SIGHUP)
		close(done)
	}
}
