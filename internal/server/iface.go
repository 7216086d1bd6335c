package server

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"turnstile/internal/asgi"
	"turnstile/internal/config"
	"turnstile/internal/http1"
	"turnstile/internal/python"
	"turnstile/internal/sysmon"
	"turnstile/internal/watchdog"
	"turnstile/internal/websocket"
	"turnstile/internal/workerctl"
	"turnstile/internal/wsgi"
)

// activeWatchdog is the running watchdog, for /readyz and /debug/stalls.
var activeWatchdog atomic.Pointer[watchdog.Watchdog]

// wsgiPool is the pool of Python threads the worker started for a WSGI
// app (nil for ASGI, and until startInterface made it), for the gate,
// /readyz and the pool's metrics.
var wsgiPool atomic.Pointer[python.Pool]

// wsgiPoolStats is the WSGI pool's snapshot, or zero stats (Threads 0)
// without one.
func wsgiPoolStats() python.PoolStats {
	if p := wsgiPool.Load(); p != nil {
		return p.Stats()
	}
	return python.PoolStats{}
}

// startWatchdog starts the loop watchdog (ASGI: loop is the worker's
// event loop) and the slow-request sampler (WSGI: loop is nil), and
// registers the loop's metrics for an ASGI worker (a WSGI worker has no
// loop: it exports none of them).
func startWatchdog(loop *asgi.Loop, cfg *config.Config, log *slog.Logger, m *metrics) *watchdog.Watchdog {
	wd := &watchdog.Watchdog{
		StallThreshold: cfg.LoopStallThreshold,
		SlowRequest:    cfg.SlowRequestThreshold,
		Loop:           loop,
		Log:            log,
	}
	if wd.StallThreshold < 0 {
		wd.StallThreshold = 0
	}
	if wd.SlowRequest < 0 {
		wd.SlowRequest = 0
	}
	if wd.Loop != nil && cfg.Timeout > 0 && (wd.StallThreshold == 0 || wd.StallThreshold > cfg.Timeout) {
		// --timeout on ASGI is a loop that has not turned for that long
		// (track.go): the loop is watched, at the timeout at the latest.
		wd.StallThreshold = cfg.Timeout
	}
	if m != nil && wd.Loop != nil { // the loop's lag and stalls: an ASGI worker's only
		m.reg.MustRegister(wd.Collectors()...)
	}
	if wd.StallThreshold == 0 && wd.SlowRequest == 0 {
		return wd // both off: no goroutine, no probe (Stop is a no-op)
	}
	wd.Start()
	activeWatchdog.Store(wd)
	return wd
}

// errStartup marks an app start-up failure the master must not retry
// (lifespan.startup.failed).
var errStartup = errors.New("server: the app failed to start")

// startInterface starts what serves the loaded app — the pool of Python
// threads for WSGI, the event loop (and lifespan startup) for ASGI — and
// returns the http1 handler and the function that stops it within a
// deadline.
func startInterface(kind string, cfg *config.Config, log *slog.Logger, m *metrics) (http1.Handler, func(deadline time.Time), error) {
	access := cfg.AccessLog
	if cfg.Switches.SysmonBatch {
		// docs/design.md, "sysmon and the loop thread run under SCHED_BATCH"
		if tid, err := sysmon.Batch(time.Second); err != nil {
			log.Debug("sysmon stays SCHED_OTHER", "err", err)
		} else {
			log.Debug("sysmon runs under SCHED_BATCH", "tid", tid)
		}
	}
	switch kind {
	case "wsgi":
		if cfg.BlockingThreads == 0 {
			return nil, nil, errors.New("--blocking-threads 0: off is for ASGI apps only; a WSGI app needs at least 1 thread")
		}
		pool, err := python.StartPool(python.PoolConfig{Threads: cfg.BlockingThreads, QueueSize: cfg.QueueSize,
			NoTurn: !cfg.Switches.PoolTurn, NoBatch: !cfg.Switches.PoolBatch})
		if err != nil {
			return nil, nil, err
		}
		wsgiPool.Store(pool)
		h := &wsgi.Handler{Pool: pool, ScriptName: cfg.RootPath, Logger: log, BufferBytes: cfg.RequestBufferBytes,
			BufferDiskBytes: cfg.RequestBufferDiskBytes, BufferDir: cfg.RequestBufferDir}
		if cfg.QueueTimeout > 0 {
			h.QueueTimeout = cfg.QueueTimeout
		}
		if m != nil || access {
			h.Done = func(r *http1.Request, res wsgi.Result) {
				if m != nil {
					m.observe(res)
				}
				if access && res.Withdrawn {
					// Status 499 (nginx's "client closed request"): no
					// response was sent.
					logAccess(log, r, res.Status, res.Bytes, res.Duration,
						slog.Int64("queue_wait_us", res.QueueWait.Microseconds()), slog.Bool("withdrawn", true))
				} else if access {
					logAccess(log, r, res.Status, res.Bytes, res.Duration,
						slog.Int64("queue_wait_us", res.QueueWait.Microseconds()), slog.Int64("gil_wait_us", res.GILWait.Microseconds()))
				}
			}
		}
		wd := startWatchdog(nil, cfg, log, m)
		stop := func(deadline time.Time) {
			wd.Stop()
			if !pool.Stop(time.Until(deadline) + workerctl.StopGrace) {
				log.Warn("pool threads still running at exit: exiting without them", "requests", runningRequests())
				return
			}
			python.Shutdown()
		}
		return h, stop, nil
	case "asgi":
		// The pools for the app's sync work (docs/design.md, "Sync work of
		// async apps"), before the loop that binds connections to them.
		httpPool, sessPool, err := startSyncPools(cfg, log)
		if err != nil {
			return nil, nil, err
		}
		// The worker's one event loop: the only place that knows how many
		// there are.
		loop, err := asgi.NewLoop(0, asgi.LoopConfig{
			Lifespan: cfg.Lifespan, Loop: cfg.Loop, ExecutorThreads: cfg.ExecutorThreads, Batch: cfg.Switches.LoopBatch,
		})
		if err != nil {
			return nil, nil, err
		}
		loopName, err := loop.Start()
		if err != nil {
			var se *asgi.StartupError
			if errors.As(err, &se) {
				return nil, nil, fmt.Errorf("%w: ASGI lifespan startup failed: %s", errStartup, se.Message)
			}
			return nil, nil, err
		}
		log.Info("event loop running", "loop", loopName, "lifespan", cfg.Lifespan)
		h := &asgi.Handler{Loop: loop, RootPath: cfg.RootPath, Logger: log, WebSocket: websocket.Config{
			MaxSizeBytes:      cfg.WSMaxSizeBytes,
			MaxQueue:          cfg.WSMaxQueue,
			PingInterval:      cfg.WSPingInterval,
			PingTimeout:       cfg.WSPingTimeout,
			PerMessageDeflate: cfg.WSPerMessageDeflate,
			WriteTimeout:      cfg.TimeoutWrite,
		}}
		if m != nil || access {
			h.Done = func(r *http1.Request, res asgi.Result) {
				if m != nil {
					m.observe(wsgi.Result{Status: res.Status, Duration: res.Duration})
				}
				if access {
					logAccess(log, r, res.Status, res.Bytes, res.Duration)
				}
			}
		}
		wd := startWatchdog(loop, cfg, log, m)
		syncPools.Store(&[2]*python.Pool{httpPool, sessPool})
		stopSync := watchSyncPools(cfg, log, m, httpPool, sessPool)
		stop := func(deadline time.Time) {
			wd.Stop()
			stopSync()
			if !loop.Stop(time.Until(deadline) + workerctl.StopGrace) {
				log.Warn("event loop still running at exit")
				return
			}
			if !stopSyncPools(log, time.Until(deadline)+workerctl.StopGrace, httpPool, sessPool) {
				return
			}
			python.Shutdown()
		}
		return h, stop, nil
	}
	return nil, nil, fmt.Errorf("server: unknown interface %q", kind)
}

// runningRequests describes the WSGI requests still in flight, oldest
// first: "GET /sleep running 3.002s", comma-separated ("queued" for one
// no pool thread took).
func runningRequests() string {
	reqs := wsgi.Requests()
	sort.Slice(reqs, func(i, j int) bool { return reqs[i].Start.Before(reqs[j].Start) })
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		state, since := " running ", r.Running
		if r.Running.IsZero() {
			state, since = " queued ", r.Start
		}
		parts[i] = r.Method + " " + r.Path + state + time.Since(since).Round(time.Millisecond).String()
	}
	return strings.Join(parts, ", ")
}
