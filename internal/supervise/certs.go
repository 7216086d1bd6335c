package supervise

import (
	"net/http"
	"os"
	"syscall"
	"time"

	"turnstile/internal/tlsconf"
)

// Certificate reload (--ssl-certfile/--ssl-keyfile): on SIGHUP, and on
// POST /ctl/reload-certs (`turnstile ctl reload-certs`), the master reads
// the files as a worker would (tlsconf.Load). When they load it sends
// SIGHUP to every ready worker, which re-reads them in place
// (internal/server, certs.go): the handshakes that follow get the new
// certificates, the connections already made keep going, no worker is
// replaced. SIGHUP then goes on to the rolling restart, as gunicorn's
// does; reload-certs stops there. When the files do not load, one error
// record says why, the workers keep the certificates they serve, and a
// SIGHUP restarts no worker (a replacement could not load them either).

// ctlSignal is an action of the admin listener that no signal stands for,
// posted to the loop as a signal is (Master.Signal).
type ctlSignal string

func (s ctlSignal) String() string { return string(s) }
func (ctlSignal) Signal()          {}

// reloadCerts is POST /ctl/reload-certs.
const reloadCerts = ctlSignal("reload-certs")

// forwardCerts reads the certificate files and, when they load, sends
// SIGHUP to the ready workers. It returns false, after one error record
// naming the file, when they do not load; true when they do, and when
// TLS is off or the certificate comes from ACME (nothing to read). why
// starts the record: "SIGHUP", "reload-certs".
func (m *Master) forwardCerts(why string) bool {
	t := m.cfg.TLS()
	if !t.Enabled() || t.ACME {
		return true
	}
	if _, err := tlsconf.Load(&t); err != nil {
		m.log.Error(why + ": TLS: certificates not reloaded, the workers keep the ones in use: " + err.Error())
		return false
	}
	for _, w := range tlsconf.Validity(&t, time.Now()) {
		m.log.Warn(why + ": TLS: " + w)
	}
	for _, p := range m.slots {
		if p != nil && p.state == stateReady {
			p.signal(syscall.SIGHUP)
		}
	}
	return true
}

// controlCerts answers POST /ctl/reload and /ctl/reload-certs as control
// does, but first reads the certificate files as forwardCerts will: when
// they do not load, the answer is 422 with the reason (so `turnstile ctl`
// exits 1 saying why, instead of "ok" while nothing was reloaded);
// reload-certs without certificate files is control's 409 (refuse).
// The action is posted either way when there are files: the loop's own read decides, and writes
// the error record and the systemd status as for a SIGHUP.
func (m *Master) controlCerts(sig os.Signal) http.HandlerFunc {
	post := m.control(sig)
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// reload-certs without certificate files: control's refuse (409)
			if t := m.cfg.TLS(); t.Enabled() && !t.ACME {
				if _, err := tlsconf.Load(&t); err != nil {
					m.Signal(sig)
					http.Error(w, signalName(sig)+": TLS: certificates not reloaded, the workers keep the ones in use: "+err.Error(), http.StatusUnprocessableEntity)
					return
				}
			}
		}
		post(w, r)
	}
}
