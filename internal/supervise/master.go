package supervise

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"turnstile/internal/config"
	"turnstile/internal/logs"
	"turnstile/internal/tlsconf"
	"turnstile/internal/workerctl"
)

// Exit statuses of the master.
const (
	ExitOK     = 0
	ExitFailed = 1 // a worker could not start, a bind failed, or a second signal
)

// Respawn back-off: a worker that dies is replaced at once; one that dies
// again within stableAfter of becoming ready (or never became ready) waits
// backoffBase, doubling up to backoffMax.
const (
	stableAfter = 30 * time.Second
	backoffBase = 500 * time.Millisecond
	backoffMax  = 30 * time.Second
	// killGrace is added to --graceful-timeout before a worker that was
	// told to stop is killed. The worker bounds its own drain by the
	// graceful timeout, then waits up to workerctl.StopGrace for its pool or
	// event loop (lifespan shutdown), then runs atexit handlers and exits,
	// or exits without them when a request outlived the graceful timeout.
	// The kill is the backstop for a worker that cannot exit (an atexit
	// handler that hangs): it must not fire while the worker is still
	// within its own bound, so it waits StopGrace plus exitGrace.
	killGrace = workerctl.StopGrace + exitGrace
	// exitGrace is the time a worker gets for atexit handlers,
	// logging.shutdown() and its exit after workerctl.StopGrace.
	exitGrace = 2 * time.Second
	// failedGrace bounds the exit of a worker that reported "failed".
	failedGrace = 5 * time.Second
	// checkEvery is the period of the lifetime and RSS checks.
	checkEvery = time.Second
)

// Errors returned by Start.
var (
	// ErrWorkerFailed: a worker could not start at first start (its
	// error is in the log).
	ErrWorkerFailed = errors.New("supervise: a worker failed to start")
	// ErrStopped: a signal stopped the master during start-up.
	ErrStopped = errors.New("supervise: stopped during start-up")
)

type phase int

const (
	phaseStarting phase = iota // first start: waiting for every worker's "ready"
	phaseRunning
	phaseStopping
)

type evKind int

const (
	evReady evKind = iota
	evFailed
	evRecycle
	evExit
	evStartTimeout
	evRespawn
	evSignal
	evReload
	evStopWait // stopWaitAfter after a graceful stop: name the workers still draining
)

// stopWaitAfter is how long after SIGTERM the master says which workers
// it still waits for (once): the ones that are not gone by then have
// requests in flight.
const stopWaitAfter = time.Second

type event struct {
	kind evKind
	p    *proc
	msg  workerctl.Msg // evFailed, evRecycle: the worker's control message
	text string        // evReload: the files that changed
	ps   *os.ProcessState
	id   int
	sig  os.Signal
}

// replaceReq is a queued graceful replacement of slot id.
type replaceReq struct {
	id    int
	cause string // hup, reload, max-requests, timeout, lifetime, max-rss
	why   string
	old   *proc // the worker to replace; nil: whichever serves the slot (rolling restarts)
	gen   int   // the rolling restart (SIGHUP, --reload) it belongs to; 0: none
}

// Master supervises the worker processes. Create it with New, then Start;
// Wait returns the exit status. The loop goroutine owns every field below
// "loop-owned"; the admin handlers read snap.
type Master struct {
	cfg  *config.Config
	log  *slog.Logger
	out  io.Writer // forwarded worker output (shares the logger's lock)
	exe  string
	args []string

	addr      string           // the listener's address, as logged
	lnFile    *os.File         // the listening socket as passed to workers (fd 3); nil once closed
	quic      map[int]*os.File // --http3: each worker slot's UDP socket (fd 5, quic.go)
	activated bool             // lnFile came from systemd (socket activation): never unlinked or filtered
	cred      *syscall.Credential
	reloading bool   // a SIGHUP/--reload rolling restart runs: READY=1 when it ends
	dir       string // worker admin sockets; "" when the admin listener is off
	admin     *http.Server
	spawner   *spawner
	events    chan event
	started   chan struct{} // closed when every worker is ready at first start
	done      chan struct{} // closed when the loop has ended
	code      int
	startErr  error

	snap     atomic.Pointer[snapshot]
	restarts *prometheus.CounterVec

	// loop-owned
	phase     phase
	want      int
	seq       int
	slots     map[int]*proc // the worker serving (or starting for) each slot 1..want
	procs     map[*proc]struct{}
	fails     map[int]int // consecutive quick deaths per slot (back-off)
	respawn   map[int]*time.Timer
	pending   []replaceReq
	replacing *proc // the replacement being started, at most one at a time
	gen       int   // rolling restarts so far (replaceReq.gen)
	forced    bool
	watcher   io.Closer
}

// snapshot is what the admin handlers see of the workers.
type snapshot struct {
	phase   phase
	want    int
	workers []workerInfo // slots 1..want that have a worker, in order
}

type workerInfo struct {
	id, pid int
	admin   string
	ready   bool
}

// New returns a master for cfg (defaults applied and validated) that logs
// to log and forwards its workers' output to out, which must be the
// logger's writer (writes are whole lines, serialised by the caller's
// lock; see Run).
func New(cfg *config.Config, log *slog.Logger, out io.Writer) *Master {
	m := &Master{cfg: cfg, log: log, out: out, exe: "/proc/self/exe", args: os.Args[1:],
		events: make(chan event, 64), started: make(chan struct{}), done: make(chan struct{}),
		want: cfg.Workers, slots: map[int]*proc{}, procs: map[*proc]struct{}{}, fails: map[int]int{},
		respawn: map[int]*time.Timer{}}
	m.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "turnstile_worker_restarts_total",
		Help: "Worker processes replaced, by cause: crash, hup, reload, max-requests, timeout, lifetime, max-rss.",
	}, []string{"cause"})
	for _, c := range []string{"crash", "hup", "reload", workerctl.CauseMaxRequests, workerctl.CauseTimeout, "lifetime", "max-rss"} {
		m.restarts.WithLabelValues(c)
	}
	m.publish()
	return m
}

// Run is the whole master: it writes the pid file, starts the workers,
// handles signals (SIGTERM/SIGINT: graceful stop, a second one: kill now;
// SIGHUP: certificates re-read by the workers (certs.go), then a rolling
// restart; SIGTTIN/SIGTTOU: one worker more/less) and
// returns the exit status.
func Run(cfg *config.Config, stderr io.Writer) int {
	// On a terminal, and under --reload (a person reads it), text records
	// print a traceback as the lines Python users know, after the
	// record's line, not escaped on it (logs.MultilineWriter). JSON
	// stays one record per line.
	var w io.Writer = stderr
	if cfg.LogFormat != "json" && (cfg.Reload || logs.IsTerminal(stderr)) {
		w = logs.MultilineWriter(stderr)
	}
	out := &logs.LockedWriter{W: w} // whole lines from the logger and the stderr forwarders
	log := logs.New(out, cfg.LogLevel, cfg.LogFormat)
	slog.SetDefault(log)
	signal.Ignore(syscall.SIGPIPE)
	if mask, ok, _ := cfg.UmaskValue(); ok {
		old := applyUmask(mask)
		log.Info("umask set", "umask", fmt.Sprintf("%#o", mask), "was", fmt.Sprintf("%#o", old))
	}
	// A bad certificate, key or password stops start-up here, once,
	// rather than in every worker (which load the files again).
	if t := cfg.TLS(); t.Enabled() {
		if _, err := tlsconf.Load(&t); err != nil {
			log.Error("turnstile: TLS: " + err.Error())
			return ExitFailed
		}
		for _, w := range tlsconf.Validity(&t, time.Now()) {
			log.Warn("TLS: " + w)
		}
		if t.CAUnused() {
			log.Warn("--ssl-ca is given but client certificates are not requested until --ssl-client-verify optional or required", "ssl_ca", t.CAFile)
		}
	}
	m := New(cfg, log, out)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGTTIN, syscall.SIGTTOU)
	go func() {
		for sig := range sigs {
			m.Signal(sig)
		}
	}()
	if cfg.PidFile != "" {
		// As gunicorn: a pid file naming a live process is another
		// server's; do not take it over (nor remove it at exit).
		if pid := readPid(cfg.PidFile); pid > 0 && pid != os.Getpid() && processAlive(pid) {
			log.Error(fmt.Sprintf("supervise: --pid-file %s: already running as pid %d (or the pid file is stale and the pid reused)", cfg.PidFile, pid))
			return ExitFailed
		}
		if err := os.WriteFile(cfg.PidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			log.Error("supervise: --pid-file: " + err.Error())
			return ExitFailed
		}
		defer func() {
			if readPid(cfg.PidFile) == os.Getpid() {
				os.Remove(cfg.PidFile)
			}
		}()
	}
	if err := m.Start(); err != nil {
		if errors.Is(err, ErrStopped) {
			return m.Wait()
		}
		if !errors.Is(err, ErrWorkerFailed) {
			log.Error(err.Error())
		}
		m.Wait()
		return ExitFailed
	}
	return m.Wait()
}

// Start binds the admin listener and the listener, starts the workers and
// waits until every one is ready, then logs "listening". It returns
// ErrWorkerFailed when a worker reports "failed", exits or passes
// --startup-timeout before it is ready (the others are stopped: never a
// respawn loop at first start), ErrStopped when a signal stopped the
// master meanwhile, or a bind error. After an error, Wait returns once
// every worker is gone.
func (m *Master) Start() error {
	cfg := m.cfg
	m.log.Info("master starting", "pid", os.Getpid(), "workers", cfg.Workers, "app", cfg.App)
	m.spawner = newSpawner()
	cred, err := cfg.Credential()
	if err != nil {
		return m.abort(err)
	}
	m.cred = cred
	if cfg.AdminBind != "off" {
		dir, err := os.MkdirTemp("", "turnstile-"+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			return m.abort(fmt.Errorf("supervise: worker admin sockets: %w", err))
		}
		m.dir = dir
		if err := m.ownDir(); err != nil {
			return m.abort(err)
		}
		addr, err := m.startAdmin(cfg.AdminBind)
		if err != nil {
			return m.abort(inUse(err, "--admin-bind "+cfg.AdminBind, "give another or off"))
		}
		m.log.Info("admin listening", "addr", addr)
	}
	if m.lnFile, m.addr, err = m.bind(); err != nil {
		return m.abort(inUse(err, m.addressFlag(), "give another, or stop the server using it"))
	}
	if cred != nil {
		m.log.Info("workers run as", "user", cfg.User, "group", cfg.Group, "uid", cred.Uid, "gid", cred.Gid)
	}
	for id := 1; id <= m.want; id++ {
		p, err := m.spawn(id, "start")
		if err != nil {
			m.log.Error(err.Error())
			m.phase = phaseStopping
			m.code = ExitFailed
			m.startErr = ErrWorkerFailed
			m.stopAll(syscall.SIGKILL) // before the loop runs: no race
			break
		}
		m.adopt(p)
	}
	go m.loop()
	select {
	case <-m.started:
		return nil
	case <-m.done:
		if m.startErr != nil {
			return m.startErr
		}
		return ErrWorkerFailed
	}
}

// abort ends a start that failed before any worker ran.
func (m *Master) abort(err error) error {
	m.phase = phaseStopping
	m.code = ExitFailed
	m.cleanup()
	close(m.done)
	return err
}

// Signal handles sig as the master's signal handler does (see Run).
func (m *Master) Signal(sig os.Signal) {
	select {
	case <-m.done:
	case m.events <- event{kind: evSignal, sig: sig}:
	}
}

// Stop stops the master gracefully, as SIGTERM does.
func (m *Master) Stop() { m.Signal(syscall.SIGTERM) }

// Wait waits for the loop to end (every worker gone) and returns the exit
// status: ExitOK after a graceful stop, ExitFailed after a failed start or
// a second signal.
func (m *Master) Wait() int {
	<-m.done
	return m.code
}

// adopt registers a new process and arms its start-up timeout.
func (m *Master) adopt(p *proc) {
	m.procs[p] = struct{}{}
	if p.cause == "start" || p.cause == "respawn" || p.cause == "ttin" {
		m.slots[p.id] = p
	}
	if d := m.cfg.StartupTimeout; d > 0 {
		p.after(d, func() { m.post(event{kind: evStartTimeout, p: p}) })
	}
	m.log.Info("worker started", "worker", p.id, "pid", p.pid, "cause", p.cause)
}

// post sends an event from a timer or reader goroutine.
func (m *Master) post(ev event) {
	select {
	case m.events <- ev:
	case <-m.done:
	}
}

func (m *Master) loop() {
	defer close(m.done)
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	if m.cfg.Reload && m.phase != phaseStopping {
		w, err := m.watch()
		if err != nil {
			m.log.Warn("--reload: cannot watch files; reloading is off", "err", err)
		} else {
			m.watcher = w
		}
	}
	for m.phase != phaseStopping || len(m.procs) > 0 {
		select {
		case ev := <-m.events:
			m.handle(ev)
		case <-tick.C:
			m.check()
		}
		m.publish()
	}
	if m.watcher != nil {
		m.watcher.Close()
	}
	m.cleanup()
	if m.startErr == nil && m.code == ExitOK {
		m.log.Info("stopped")
	}
}

// cleanup releases the master's sockets and files.
func (m *Master) cleanup() {
	if m.lnFile != nil {
		m.lnFile.Close()
		m.lnFile = nil
	}
	m.closeQUIC(0)
	if m.cfg.UDS != "" && m.addr != "" && !m.activated {
		os.Remove(m.cfg.UDS)
	}
	if m.admin != nil {
		m.admin.Close()
	}
	if m.dir != "" {
		os.RemoveAll(m.dir)
	}
}

func (m *Master) handle(ev event) {
	p := ev.p
	switch ev.kind {
	case evSignal:
		m.onSignal(ev.sig)
	case evReady:
		m.onReady(p)
	case evFailed:
		p.failMsg = ev.msg.Reason
		p.after(failedGrace, func() { p.signal(syscall.SIGKILL) })
	case evRecycle:
		cause, why := ev.msg.Cause, ev.msg.Reason
		if m.phase == phaseStopping || p.state != stateReady || p.recycleAsked || p.retry != nil || m.slots[p.id] != p {
			return
		}
		if m.phase == phaseStarting {
			// A ready worker serves while others still start, and asks
			// once (--max-requests, --timeout): replace it as soon as
			// every worker is ready (check).
			m.log.Info("worker asks to be replaced; once every worker is ready", "worker", p.id, "pid", p.pid, "cause", cause, whyAttr(why))
			p.retry = &replaceReq{id: p.id, cause: cause, why: why, old: p}
			return
		}
		m.log.Info("worker asks to be replaced", "worker", p.id, "pid", p.pid, "cause", cause, whyAttr(why))
		m.enqueue(replaceReq{id: p.id, cause: cause, why: why, old: p})
	case evStartTimeout:
		if p.state == stateStarting {
			if _, alive := m.procs[p]; alive {
				p.failMsg = "not ready within --startup-timeout " + m.cfg.StartupTimeout.String()
				p.signal(syscall.SIGKILL)
			}
		}
	case evExit:
		m.onExit(p, ev.ps)
	case evRespawn:
		delete(m.respawn, ev.id)
		if m.phase != phaseStopping && ev.id <= m.want && m.slots[ev.id] == nil &&
			(m.replacing == nil || m.replacing.id != ev.id) {
			m.start(ev.id, "respawn")
		}
	case evStopWait:
		left := make([]*proc, 0, len(m.procs))
		for p := range m.procs {
			left = append(left, p)
		}
		slices.SortFunc(left, func(a, b *proc) int { return cmp.Or(a.id-b.id, a.pid-b.pid) })
		var ids, pids []int
		for _, p := range left {
			ids, pids = append(ids, p.id), append(pids, p.pid)
		}
		if len(ids) > 0 && !m.forced {
			m.log.Info("waiting for draining workers to finish their requests", "workers", ids, "pids", pids,
				"until", ev.text, "then", "killed")
		}
	case evReload:
		if m.phase == phaseRunning {
			m.log.Info("files changed: restarting the workers one by one", "files", ev.text)
			m.rolling("reload")
		} else if m.phase == phaseStarting {
			// A worker failed at first start (onExit): start it again.
			for id := 1; id <= m.want; id++ {
				if m.slots[id] == nil && m.respawn[id] == nil {
					m.log.Info("files changed: starting the worker again", "worker", id, "files", ev.text)
					m.start(id, "start")
				}
			}
		}
	}
}

func (m *Master) onSignal(sig os.Signal) {
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT:
		if m.phase == phaseStopping {
			if !m.forced {
				m.forced = true
				m.code = ExitFailed
				m.log.Warn("second signal: killing the workers now", "signal", signalName(sig))
				m.stopAll(syscall.SIGKILL)
			}
			return
		}
		m.log.Info("stopping: workers finish in-flight requests", "signal", signalName(sig),
			"graceful_timeout", m.cfg.GracefulTimeout.String())
		m.notify("STOPPING=1\nSTATUS=stopping")
		if m.phase == phaseStarting {
			m.startErr = ErrStopped
		}
		m.phase = phaseStopping
		m.stopAll(syscall.SIGTERM)
		until := time.Now().Add(m.cfg.GracefulTimeout)
		time.AfterFunc(stopWaitAfter, func() { m.post(event{kind: evStopWait, text: until.UTC().Format(time.RFC3339)}) })
	case syscall.SIGHUP:
		if m.phase != phaseRunning {
			m.log.Info("SIGHUP ignored: not running")
			return
		}
		if !m.forwardCerts("SIGHUP") { // certs.go
			// Type=notify-reload waits for a reload cycle: end it at once
			// (systemd has no word for a failed one), the log says why.
			m.notify("RELOADING=1\nMONOTONIC_USEC=" + systemdMonotonic())
			m.notify(fmt.Sprintf("READY=1\nSTATUS=serving on %s with %d workers; SIGHUP: TLS certificates not reloaded, see the log", m.addr, m.want))
			return
		}
		m.log.Info("SIGHUP: restarting the workers one by one")
		m.reloading = true
		m.notify("RELOADING=1\nMONOTONIC_USEC=" + systemdMonotonic() + "\nSTATUS=restarting the workers")
		m.rolling("hup")
		m.reloadDone()
	case reloadCerts:
		t := m.cfg.TLS()
		if m.phase != phaseRunning || !t.Enabled() || t.ACME {
			m.log.Info("reload-certs ignored: not running, or no --ssl-certfile")
			return
		}
		if m.forwardCerts("reload-certs") {
			m.log.Info("reload-certs: the workers re-read the TLS certificates")
		}
	case syscall.SIGTTIN:
		if m.phase != phaseRunning {
			return
		}
		m.want++
		m.log.Info("SIGTTIN: one more worker", "workers", m.want)
		m.start(m.want, "ttin")
	case syscall.SIGTTOU:
		if m.phase != phaseRunning || m.want <= 1 {
			return
		}
		id := m.want
		m.want--
		m.log.Info("SIGTTOU: one worker less", "workers", m.want)
		if t := m.respawn[id]; t != nil {
			t.Stop()
			delete(m.respawn, id)
		}
		if p := m.slots[id]; p != nil {
			m.drain(p)
		}
		delete(m.slots, id)
		m.closeQUIC(id)
		if r := m.replacing; r != nil && r.id == id {
			m.drain(r)
		}
	}
}

// stopAll stops accepting and sends sig to every worker: SIGTERM (each
// drains, then is killed after the graceful timeout) or SIGKILL.
func (m *Master) stopAll(sig syscall.Signal) {
	m.pending = nil
	for id, t := range m.respawn {
		t.Stop()
		delete(m.respawn, id)
	}
	if m.lnFile != nil {
		// New connections are refused once the workers close theirs;
		// until then no new handshake completes (refuse.go).
		// Not on systemd's socket: the filter would outlive this
		// process and drop the SYNs meant for the next start.
		if sig != syscall.SIGKILL && m.cfg.UDS == "" && !m.activated {
			if err := refuseSYN(m.lnFile); err != nil {
				m.log.Warn("cannot stop new handshakes before the workers close the listener", "err", err)
			}
		}
		m.lnFile.Close()
		m.lnFile = nil
	}
	m.closeQUIC(0)
	for p := range m.procs {
		if sig == syscall.SIGKILL {
			p.signal(syscall.SIGKILL)
		} else if p.state != stateDraining {
			m.drain(p)
		}
	}
}

// drain tells p to stop gracefully and kills it if it is not gone after
// the graceful timeout.
func (m *Master) drain(p *proc) {
	p.state = stateDraining
	p.signal(syscall.SIGTERM)
	p.after(m.cfg.GracefulTimeout+killGrace, func() { p.signal(syscall.SIGKILL) })
}

// start spawns a worker for slot id (not a replacement).
func (m *Master) start(id int, cause string) {
	p, err := m.spawn(id, cause)
	if err != nil {
		m.log.Error(err.Error())
		m.scheduleRespawn(id)
		return
	}
	m.adopt(p)
}

func (m *Master) onReady(p *proc) {
	if _, alive := m.procs[p]; !alive || p.state != stateStarting {
		return
	}
	p.state = stateReady
	p.readyAt = time.Now()
	m.log.Info("worker ready", "worker", p.id, "pid", p.pid, "startup_s", seconds(p.readyAt.Sub(p.started)))
	if m.phase == phaseStopping {
		m.drain(p)
		return
	}
	if p == m.replacing {
		m.finishReplace(p)
		return
	}
	if m.phase == phaseStarting {
		for id := 1; id <= m.want; id++ {
			if s := m.slots[id]; s == nil || s.state != stateReady {
				return
			}
		}
		m.phase = phaseRunning
		// The admin handlers see it before anyone who reads "listening"
		// asks /readyz (the loop publishes again after this event anyway).
		m.publish()
		t := m.cfg.TLS()
		m.log.Info("listening", "addr", m.addr, "workers", m.want, "http", m.cfg.HTTP, "tls", tlsconf.Describe(&t))
		m.notifyReady()
		close(m.started)
	}
}

func (m *Master) onExit(p *proc, ps *os.ProcessState) {
	delete(m.procs, p)
	p.stopTimers()
	cause, sig, oom := exitCause(ps, p.killed.Load())
	uptime := seconds(time.Since(p.started))
	if m.slots[p.id] == p {
		delete(m.slots, p.id)
	}
	switch {
	case p.state == stateDraining || m.phase == phaseStopping:
		if ps != nil && ps.Success() {
			m.log.Info("worker stopped", "worker", p.id, "pid", p.pid)
		} else {
			m.log.Warn("worker stopped", "worker", p.id, "pid", p.pid, "cause", cause)
		}
		if p == m.replacing {
			m.replacing = nil
		}
		m.next()

	case p.state == stateStarting && m.phase == phaseStarting && m.watcher != nil:
		// First start under --reload: as uvicorn, keep watching; the
		// next change starts the worker again (evReload). Logged once per
		// failure, never a respawn loop.
		const wait = "; --reload: waiting for a change to start it again"
		if p.failMsg != "" && !strings.HasPrefix(p.failMsg, "not ready within") {
			m.log.Error("worker failed to start (its error is logged above)"+wait,
				"worker", p.id, "pid", p.pid, "exit", cause)
		} else {
			reason := p.failMsg
			if reason == "" {
				reason = "exited before it was ready: " + cause
			}
			m.log.Error("worker failed to start"+wait, "worker", p.id, "pid", p.pid, "err", reason,
				"signal", sig, "possible_oom", oom, p.tail.attr())
		}

	case p.state == stateStarting && m.phase == phaseStarting:
		// First start: never a respawn loop. Stop everything, exit 1.
		m.code = ExitFailed
		m.startErr = ErrWorkerFailed
		if p.failMsg != "" && !strings.HasPrefix(p.failMsg, "not ready within") {
			// The worker logged its error itself, once: do not repeat it.
			m.log.Info("stopping: a worker failed to start (its error is logged above)",
				"worker", p.id, "pid", p.pid, "exit", cause)
		} else {
			reason := p.failMsg
			if reason == "" {
				reason = "exited before it was ready: " + cause
			}
			m.log.Error("worker failed to start; stopping", "worker", p.id, "pid", p.pid, "err", reason,
				"signal", sig, "possible_oom", oom, p.tail.attr())
		}
		m.phase = phaseStopping
		m.stopAll(syscall.SIGTERM)

	case p.state == stateStarting && p == m.replacing:
		m.replacing = nil
		reason := p.failMsg
		if reason == "" {
			reason = "exited before it was ready: " + cause
		}
		m.log.Error("replacement worker failed to start; the running worker keeps serving",
			"worker", p.id, "pid", p.pid, "cause", p.cause, "err", reason, p.tail.attr())
		if old := p.replaces; old != nil {
			old.recycleAsked = false
			if p.cause != "hup" && p.cause != "reload" {
				// Try again later (a leaking worker must not be kept
				// forever), not in a loop.
				old.retry = &replaceReq{id: old.id, cause: p.cause, why: "retry", old: old}
				old.retryAt = time.Now().Add(backoffMax)
			}
		}
		if p.gen != 0 {
			// The new code does not start: call off the rest of this
			// rolling restart and keep the old workers until the next
			// change or signal. A later one queued meanwhile (a fix saved,
			// SIGHUP sent again while this replacement was starting)
			// goes on: its requests carry its own generation.
			kept := m.pending[:0]
			for _, r := range m.pending {
				if r.gen != p.gen {
					kept = append(kept, r)
				}
			}
			m.pending = kept
		}
		if m.slots[p.id] == nil && p.id <= m.want {
			m.scheduleRespawn(p.id)
		}
		m.next()

	case p.state == stateStarting:
		reason := p.failMsg
		if reason == "" {
			reason = "exited before it was ready: " + cause
		}
		m.log.Error("worker failed to start", "worker", p.id, "pid", p.pid, "err", reason,
			"signal", sig, "possible_oom", oom, p.tail.attr())
		m.scheduleRespawn(p.id)

	default: // a serving worker died
		m.restarts.WithLabelValues("crash").Inc()
		m.log.Error("worker exited", "worker", p.id, "pid", p.pid, "cause", cause, "signal", sig,
			"possible_oom", oom, "uptime_s", uptime, p.tail.attr())
		if !p.readyAt.IsZero() && time.Since(p.readyAt) > stableAfter {
			m.fails[p.id] = 0
		}
		if m.replacing != nil && m.replacing.id == p.id {
			return // its replacement is starting and takes the slot
		}
		if p.id <= m.want {
			m.scheduleRespawn(p.id)
		}
	}
}

// scheduleRespawn starts a worker for slot id after the back-off.
//
// Also at first start: a worker that was ready (it already served: the
// socket is shared) and then died is a crash, replaced as in service; only
// a worker that never got ready stops the first start.
func (m *Master) scheduleRespawn(id int) {
	if m.phase == phaseStopping || m.respawn[id] != nil {
		return
	}
	n := m.fails[id]
	m.fails[id] = n + 1
	var delay time.Duration
	if n > 0 {
		delay = min(backoffBase<<min(n-1, 10), backoffMax)
	}
	if delay > 0 {
		m.log.Info("respawning worker after back-off", "worker", id, "delay", delay.String())
	}
	m.respawn[id] = time.AfterFunc(delay, func() { m.post(event{kind: evRespawn, id: id}) })
}

// rolling queues a graceful replacement of every worker, one by one, as
// a new generation: a replacement that fails to start calls off the rest
// of its own generation only. A slot still queued from an earlier one
// joins this one (it will load the current code anyway); a slot whose
// replacement is starting now is queued again, since that replacement
// may have loaded the code this restart is for, or not.
func (m *Master) rolling(cause string) {
	m.gen++
	for id := 1; id <= m.want; id++ {
		dup := false
		for i, r := range m.pending {
			if r.id == id && r.old == nil {
				dup = true
				m.pending[i].gen, m.pending[i].cause = m.gen, cause
			}
		}
		if !dup {
			m.enqueue(replaceReq{id: id, cause: cause, gen: m.gen})
		}
	}
}

func (m *Master) enqueue(r replaceReq) {
	if r.old != nil {
		r.old.recycleAsked = true
	}
	m.pending = append(m.pending, r)
	m.next()
}

// next starts the next queued replacement when none is running: the
// replacement starts, and only when it is ready does the old worker get
// SIGTERM (finishReplace).
func (m *Master) next() {
	for m.replacing == nil && m.phase == phaseRunning && len(m.pending) > 0 {
		r := m.pending[0]
		m.pending = m.pending[1:]
		cur := m.slots[r.id]
		if r.id > m.want || cur == nil || cur.state != stateReady || (r.old != nil && r.old != cur) {
			continue // gone, or already being replaced by a respawn
		}
		p, err := m.spawn(r.id, r.cause)
		if err != nil {
			m.log.Error(err.Error())
			cur.recycleAsked = false
			continue
		}
		p.replaces = cur
		p.gen = r.gen
		m.replacing = p
		m.log.Info("replacing worker", "worker", r.id, "old_pid", cur.pid, "pid", p.pid, "cause", r.cause, whyAttr(r.why))
		m.adopt(p)
	}
	m.reloadDone()
}

func (m *Master) finishReplace(p *proc) {
	m.replacing = nil
	old := p.replaces
	if p.id > m.want {
		m.drain(p)
		m.next()
		return
	}
	m.slots[p.id] = p
	m.restarts.WithLabelValues(p.cause).Inc()
	oldPid := 0
	if old != nil {
		oldPid = old.pid
		if _, alive := m.procs[old]; alive && old.state != stateDraining {
			m.drain(old)
		}
	}
	m.log.Info("worker replaced", "worker", p.id, "old_pid", oldPid, "pid", p.pid, "cause", p.cause)
	m.next()
}

// check recycles workers past --workers-lifetime or --workers-max-rss, and
// retries a replacement that failed to start (retryAt).
func (m *Master) check() {
	if m.phase != phaseRunning {
		return
	}
	life, maxRSS := m.cfg.WorkersLifetime, m.cfg.WorkersMaxRSSBytes
	for id := 1; id <= m.want; id++ {
		p := m.slots[id]
		if p == nil || p.state != stateReady || p.recycleAsked || time.Now().Before(p.retryAt) {
			continue
		}
		if r := p.retry; r != nil {
			p.retry = nil
			m.enqueue(*r)
			continue
		}
		if life > 0 && time.Since(p.readyAt) >= life {
			m.enqueue(replaceReq{id: id, cause: "lifetime", why: "ready for " + time.Since(p.readyAt).Round(time.Second).String(), old: p})
			continue
		}
		if maxRSS > 0 {
			if rss, err := rssBytes(p.pid); err == nil && rss > maxRSS {
				m.enqueue(replaceReq{id: id, cause: "max-rss", old: p,
					why: fmt.Sprintf("RSS %d KiB > %d KiB (%d MiB)", rss>>10, maxRSS>>10, maxRSS>>20)})
			}
		}
	}
}

// publish refreshes the snapshot the admin handlers read.
func (m *Master) publish() {
	s := &snapshot{phase: m.phase, want: m.want}
	for id := 1; id <= m.want; id++ {
		if p := m.slots[id]; p != nil {
			s.workers = append(s.workers, workerInfo{id: id, pid: p.pid, admin: p.admin, ready: p.state == stateReady})
		}
	}
	m.snap.Store(s)
}

// seconds is d in seconds, to the millisecond, for log records: 1.997,
// where Duration.Seconds of a rounded duration can give
// 1.9969999999999999.
func seconds(d time.Duration) float64 {
	return float64(d.Milliseconds()) / 1000
}

func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if n := unix.SignalName(s); n != "" {
			return n
		}
	}
	return sig.String()
}

// listenerFile turns ln into the descriptor the workers inherit, and
// closes ln: the master never accepts.
//
// The socket's O_NONBLOCK flag belongs to the open file description,
// which the master and every worker share. A *os.File from
// TCPListener.File would flip it to blocking each time exec reads its
// Fd() for a new worker, and a running worker's accept(2) would then block
// in the kernel, where closing its listener cannot interrupt it (a stop
// hangs until the next connection). So the file is made from a plain dup,
// set blocking once here, before any worker exists (os.NewFile then
// neither registers it with the master's poller nor changes it later);
// each worker sets it non-blocking again when it wraps it.
func listenerFile(ln net.Listener) (*os.File, error) {
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false) // the master removes the path at exit
	}
	defer ln.Close()
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("supervise: listener %T has no descriptor", ln)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("supervise: listener: %w", err)
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(s uintptr) { fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("supervise: listener: %w", err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("supervise: dup listener: %w", dupErr)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("supervise: listener: %w", err)
	}
	return os.NewFile(uintptr(fd), "listener"), nil
}

// readPid returns the pid a pid file holds, or 0.
func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// processAlive reports whether a process with this pid exists (kill(2)
// with signal 0; EPERM means it exists under another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// whyAttr is the "why" field of a record, or nothing when there is no
// reason to give (a SIGHUP or --reload replacement): never why="".
func whyAttr(why string) slog.Attr {
	if why == "" {
		return slog.Attr{} // slog drops the zero Attr
	}
	return slog.String("why", why)
}
