package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"turnstile/internal/acme"
	"turnstile/internal/config"
	"turnstile/internal/h3"
	"turnstile/internal/http1"
	"turnstile/internal/listen"
	"turnstile/internal/python"
	"turnstile/internal/static"
	"turnstile/internal/tlsconf"
	"turnstile/internal/venv"
	"turnstile/internal/watchdog"
)

// Exit statuses of a worker.
const (
	ExitOK     = 0
	ExitFailed = 1 // start-up failed: bad config, app import error, bind error
)

// Run runs one worker with cfg (defaults applied and validated) until it is
// told to stop, and returns the process exit status.
func Run(cfg *config.Config, log *slog.Logger) int {
	python.SetLogger(log)
	slog.SetDefault(log)
	// Without Python's own handlers, a write to a closed pipe or socket
	// from a thread Go did not create (any threading.Thread) would deliver
	// SIGPIPE with the default action and kill the process; ignored, the
	// write fails with EPIPE and Python raises BrokenPipeError. Children
	// started with subprocess get the default back (restore_signals).
	signal.Ignore(syscall.SIGPIPE)

	program, err := pythonProgram(cfg)
	if err != nil {
		log.Error(err.Error())
		return ExitFailed
	}
	log.Info("turnstile starting", "python", strings.SplitN(python.RuntimeVersion(), " ", 2)[0],
		"built_for", python.BuildVersion, "executable", program, "app", cfg.App, "pid", os.Getpid())
	if attrs := python.VersionMismatch(); attrs != nil {
		log.Warn("the running CPython is not the version this binary was built for", attrs...)
	}

	// The admin listener answers /livez at once; /readyz says 503 until
	// the app is loaded.
	var ready atomic.Bool
	var srv http1.Server
	adminStop := func() {}
	var m *metrics
	if cfg.AdminBind != "off" {
		m = newMetrics(&srv)
		stop, addr, err := startAdmin(cfg, log, &ready, m)
		if err != nil {
			log.Error(err.Error())
			return ExitFailed
		}
		adminStop = stop
		log.Info(workerMsg("admin listening"), "addr", addr)
	}
	defer adminStop()

	ln, err := listener(cfg) // inherited from the master in a worker (inherit.go)
	if err != nil {
		log.Error(err.Error())
		return ExitFailed
	}
	ln = proxyListener(ln, cfg, log) // --proxy-protocol (proxy.go)
	// TLS wraps the accepted connections last (after any PROXY protocol
	// reader); the files are read here, and again on each SIGHUP the
	// master forwards (certs.go), in place.
	tlsCfg := cfg.TLS()
	tc, certs, err := tlsconf.LoadCerts(&tlsCfg)
	if err != nil {
		log.Error("turnstile: TLS: " + err.Error())
		return ExitFailed
	}
	// --acme-domain (internal/acme): the certificate comes from the CA;
	// TLS-ALPN-01 challenges are answered by the same listener, which
	// must serve while Obtain runs (below, once the app is loaded).
	var acmeMgr *acme.Manager
	if tc != nil && tlsCfg.ACME {
		if acmeMgr, err = newACME(cfg, ln.Addr(), log); err != nil {
			log.Error("turnstile: " + err.Error())
			return ExitFailed
		}
		defer acmeMgr.Stop()
		acmeMgr.TLSConfig(tc)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	// HTTP/3 (--http3, http3.go): the slot's UDP socket, on the TLS port.
	var quicPC *net.UDPConn
	if cfg.HTTP3 && tc != nil {
		if quicPC, err = quicConn(cfg, ln.Addr()); err != nil {
			log.Error("turnstile: HTTP/3: " + err.Error())
			return ExitFailed
		}
		defer quicPC.Close()
	}

	kind, err := python.Start(pythonConfig(cfg, program))
	if err != nil {
		var pe *python.Error
		if errors.As(err, &pe) {
			// The app's exception in its own traceback field (the
			// first-start record the master points to); turnstile's own
			// reason (no such module or attribute) on the message.
			if reason, ok := strings.CutPrefix(pe.Text, "turnstile: "); ok && strings.HasPrefix(reason, "--log-config ") && !strings.Contains(reason, "\n") {
				log.Error(pe.Text) // the logging configuration, before the app
			} else if ok && !strings.Contains(reason, "\n") {
				log.Error("turnstile: cannot load the app " + cfg.App + ": " + reason)
			} else {
				log.Error("turnstile: cannot load the app "+cfg.App, "traceback", pe.Text)
			}
		} else {
			log.Error(err.Error())
		}
		return ExitFailed
	}
	acc, err := newAccessLog(cfg, log)
	if err != nil {
		log.Error(err.Error())
		return ExitFailed
	}
	ifc, stopInterface, err := startInterface(kind, cfg, log, m, acc)
	if err != nil {
		log.Error(err.Error())
		return ExitFailed
	}
	activeIfc.Store(&ifc)
	// Static mounts answer in Go before the app (internal/static).
	h, err := static.New(static.Config{Mounts: cfg.StaticMounts, CacheControl: cfg.StaticCacheControl,
		Symlinks: cfg.StaticSymlinkPolicy, Fallthrough: cfg.StaticFallthrough, Index: cfg.StaticIndex, Logger: log,
		Access: staticAccess(acc)}, ifc)
	if err != nil {
		log.Error(err.Error())
		return ExitFailed
	}
	srv = http1.Server{
		Handler:             proxyHeaders(track(h, cfg, log, ifc), cfg),
		MaxRequestLineBytes: cfg.LimitRequestLine,
		MaxHeaderFields:     cfg.LimitRequestFields,
		MaxHeaderFieldBytes: cfg.LimitRequestFieldSize,
		MaxBodyBytes:        cfg.LimitRequestBody,
		MaxConcurrency:      cfg.LimitConcurrency,
		HeaderTimeout:       cfg.TimeoutRequestHeader,
		KeepAliveTimeout:    cfg.TimeoutKeepAlive,
		DisableKeepAlive:    cfg.TimeoutKeepAlive == 0,
		KeepAliveDrain:      cfg.TimeoutKeepAliveDrain,
		BodyTimeout:         cfg.TimeoutBody,
		MinBodyRate:         minBodyRate(cfg.MinBodyRate),
		WriteTimeout:        cfg.TimeoutWrite,
		NoDateHeader:        !cfg.DateHeader,
		Logger:              log,
	}
	if !cfg.ProxyProtocol {
		srv.ProxyHeaderHint = proxyHeaderHint
	}
	if cfg.ServerHeader {
		srv.ServerHeader = "turnstile"
	}
	srv.ExtraHeader, _ = cfg.HeaderBlock() // validated at start
	if certs != nil {
		srv.TLSServerCert = certs.ServerCert
	}
	if cfg.HTTP != "1" {
		srv.HTTP2 = newHTTP2(cfg, log, kind == "asgi")
		srv.HTTP2Only = cfg.HTTP == "2"
	}
	if cfg.LimitRequestFieldSize > srv.MaxHeaderBytes {
		srv.MaxHeaderBytes = 0 // http1 derives it from the field limit
	}
	var h3srv *h3.Server
	if quicPC != nil {
		srv.ExtraHeader = append(srv.ExtraHeader, altSvcHeader(cfg, quicPC)...)
		h3srv = newHTTP3(cfg, tc, &srv, log)
	}

	// A worker that asks to be replaced (--max-requests, --timeout) drains
	// from then on: its responses announce the close (RFC 9112 §9.6) and
	// its HTTP/2 connections get GOAWAY (RFC 9113 §6.8), while it keeps
	// serving until the master stops it once the replacement is ready.
	if worker != nil {
		worker.ctl.onRecycle(srv.Drain)
	}
	if g := theGate.Load(); g != nil && len(ifc.Pools()) > 0 && cfg.Workers > 1 && cfg.Switches.GateDefer {
		g.setShare(cfg.BlockingThreads, func() int { return srv.InFlight() + srv.FreshConns() }) // spread bursts over the workers (gate.go)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if h3srv != nil {
		go func() {
			if err := h3srv.Serve(quicPC); err != nil {
				serveErr <- fmt.Errorf("http3: %w", err)
			}
		}()
	}
	if acmeMgr != nil {
		if err := acmeMgr.Obtain(context.Background()); err != nil {
			log.Error("turnstile: " + err.Error())
			return ExitFailed
		}
	}
	if certs != nil {
		defer reloadCertsOnHUP(certs, log)() // before ready: the master forwards SIGHUP only to ready workers
	}
	ready.Store(true)
	workerReady()
	if len(ifc.Pools()) > 0 {
		log.Info(workerMsg("listening"), "addr", ln.Addr().String(), "interface", kind, "blocking_threads", cfg.BlockingThreads,
			"turnstile_barrier", python.TurnEnabled(), "gil_wait_timing", python.GILWaitTiming(), "http", cfg.HTTP, "http3", h3srv != nil, "tls", tlsconf.Describe(&tlsCfg))
	} else {
		// The WSGI pool's settings do not apply to an ASGI app (its event
		// loop's are in the "event loop running" record); its pools for
		// sync work are --blocking-threads and --session-threads (0: off).
		log.Info(workerMsg("listening"), "addr", ln.Addr().String(), "interface", kind, "blocking_threads", cfg.BlockingThreads,
			"session_threads", cfg.SessionThreads, "http", cfg.HTTP, "http3", h3srv != nil, "tls", tlsconf.Describe(&tlsCfg))
	}

	select {
	case err := <-serveErr:
		log.Error("serve failed", "err", err)
		return ExitFailed
	case sig := <-sigs:
		log.Info("stopping: finishing in-flight requests", "signal", sig.String(), "graceful_timeout", cfg.GracefulTimeout.String())
	}
	ready.Store(false)
	go func() {
		sig := <-sigs
		log.Warn("second signal: exiting now", "signal", sig.String())
		os.Exit(ExitFailed)
	}()

	deadline := time.Now().Add(cfg.GracefulTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// Requests still waiting for a pool thread shortly before the graceful
	// timeout (a thread stuck in a view) get a 503 with Retry-After, not
	// their connection closed under them.
	margin := min(cfg.GracefulTimeout/10, 500*time.Millisecond)
	expire := time.AfterFunc(time.Until(deadline)-margin, ifc.ExpireQueued)
	defer expire.Stop()
	// HTTP/3 connections get GOAWAY (RFC 9114 §5.2) and are waited for
	// alongside the TCP ones.
	h3done := make(chan error, 1)
	if h3srv != nil {
		go func() { h3done <- h3srv.Shutdown(ctx) }()
	} else {
		h3done <- nil
	}
	if err := srv.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
		log.Warn("graceful timeout passed with requests still running: their connections closed",
			"graceful_timeout", cfg.GracefulTimeout.String())
	} else if err != nil {
		log.Warn("graceful stop: connections closed", "err", err)
	}
	if err := <-h3done; err != nil {
		log.Warn("graceful timeout passed: HTTP/3 connections closed", "err", err)
	}
	stopInterface(deadline)
	if ownsUDS(cfg) {
		os.Remove(cfg.UDS)
	}
	log.Info("stopped")
	return ExitOK
}

// minBodyRate maps the flag (0 = off) to http1's field (negative = off).
func minBodyRate(v int) int {
	if v <= 0 {
		return -1
	}
	return v
}

// addrString is a client's address for a log record: host:port, the host
// alone when the port is unknown (0), "" for an unnamed Unix socket.
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	s := a.String()
	if s == "@" { // "@": an unnamed Unix socket client, REMOTE_ADDR "" (internal/http1/addr.go)
		return ""
	}
	// A client named by a proxy's header (--proxy-headers) has no known
	// port: "1.2.3.4", not "1.2.3.4:0".
	if host, port, err := net.SplitHostPort(s); err == nil && port == "0" {
		return host
	}
	return s
}

func appDir(cfg *config.Config) string {
	if cfg.AppDir != "" {
		if abs, err := filepath.Abs(cfg.AppDir); err == nil {
			return abs
		}
		return cfg.AppDir
	}
	wd, _ := os.Getwd()
	return wd
}

// pythonProgram picks sys.executable: the virtualenv's python, else the
// build's own python. The master has already checked the virtualenv and
// the app directory (cmd/turnstile); a worker started directly, or after
// the virtualenv changed under a running master (SIGHUP), checks them
// again here, with the same pure-Go function.
func pythonProgram(cfg *config.Config) (string, error) {
	if err := venv.CheckAppDir(cfg.AppDir); err != nil {
		return "", err
	}
	return venv.Python(cfg.Venv, os.Getenv("VIRTUAL_ENV"), BuildInfo())
}

// BuildInfo is the CPython this binary was built against, for package
// venv's checks.
func BuildInfo() venv.Build {
	return venv.Build{Executable: python.BuildExecutable, Version: python.BuildVersion}
}

func startAdmin(cfg *config.Config, log *slog.Logger, ready *atomic.Bool, m *metrics) (stop func(), addr string, err error) {
	ln, err := listen.Admin(cfg.AdminBind)
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready: starting or stopping\n"))
			return
		}
		if s := wsgiPoolStats(); s.Threads > 0 && s.Queued >= s.QueueSize {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready: request queue full\n"))
			return
		}
		if wd := activeWatchdog.Load(); wd != nil {
			if age := wd.Stalled(); age > 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				if n := len(wd.Loops); n > 1 { // Stalled: every loop is, the latest to stall this long
					fmt.Fprintf(w, "not ready: every event loop (%d) stalled, the latest for %d ms\n", n, age.Milliseconds())
				} else {
					fmt.Fprintf(w, "not ready: event loop stalled for %d ms\n", age.Milliseconds())
				}
				return
			}
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/debug/stalls", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		stalls := []watchdog.Stall{}
		if wd := activeWatchdog.Load(); wd != nil {
			stalls = append(stalls, wd.Stalls()...)
		}
		json.NewEncoder(w).Encode(stalls)
	})
	mux.HandleFunc("/debug/threads", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		writeThreads(w) // syncpools.go
	})
	mux.HandleFunc("/debug/layer", layerDebug) // layer.go
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	statusHandlers(mux, m)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go hs.Serve(ln)
	return func() { hs.Close() }, ln.Addr().String(), nil
}
