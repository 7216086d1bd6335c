package server

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"turnstile/internal/asgi"
	"turnstile/internal/chlayer"
	"turnstile/internal/config"
	"turnstile/internal/http1"
	"turnstile/internal/inflight"
	"turnstile/internal/python"
	"turnstile/internal/sysmon"
	"turnstile/internal/watchdog"
	"turnstile/internal/websocket"
	"turnstile/internal/workerctl"
	"turnstile/internal/wsgi"
)

// activeWatchdog is the running watchdog, for /readyz and /debug/stalls.
var activeWatchdog atomic.Pointer[watchdog.Watchdog]

// loopStalled reports whether loop i is stalled now (the watchdog's
// LoopStalled), for the ASGI handler's choice of loop; false before the
// watchdog runs or without it.
func loopStalled(i int) bool {
	if wd := activeWatchdog.Load(); wd != nil {
		return wd.LoopStalled(i)
	}
	return false
}

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

// Interface is what serves the loaded app: a WSGI app's handler on its
// pool of Python threads (*wsgi.Handler over a python.Pool), or an ASGI
// app's on its event loop (*asgi.Handler over an asgi.Loop).
// startInterface builds one; past that choice the worker knows the app
// only through this.
type Interface interface {
	// ServeHTTP1 serves one request; Handler.Done gets its
	// inflight.Result.
	http1.Handler
	// Stop stops what runs the app (WSGI: the pool's threads after their
	// jobs; ASGI: the loop after lifespan shutdown), waiting at most
	// timeout, and reports whether it stopped; when not, it has logged
	// what still runs.
	Stop(timeout time.Duration) bool
	// ExpireQueued answers 503 to the requests still waiting for a
	// thread, shortly before the graceful timeout (WSGI; a loop has no
	// such queue).
	ExpireQueued()
	// Requests returns the requests in flight.
	Requests() []inflight.Request
	// Loops and Pools are what the watchdog and --timeout watch (ASGI:
	// the loop; WSGI: the pool's requests).
	Loops() []watchdog.Loop
	Pools() []watchdog.Pool
}

// Interface guards.
var (
	_ Interface = (*wsgi.Handler)(nil)
	_ Interface = (*asgi.Handler)(nil)
)

// startWatchdog starts the loop watchdog over ifc's loops and the
// slow-request sampler over its pools, and registers the loops' metrics
// (a worker without loops exports none of them).
func startWatchdog(ifc Interface, cfg *config.Config, log *slog.Logger, m *metrics) *watchdog.Watchdog {
	wd := &watchdog.Watchdog{
		StallThreshold: cfg.LoopStallThreshold,
		SlowRequest:    cfg.SlowRequestThreshold,
		Loops:          ifc.Loops(),
		Pools:          ifc.Pools(),
		Log:            log,
	}
	if wd.StallThreshold < 0 {
		wd.StallThreshold = 0
	}
	if wd.SlowRequest < 0 {
		wd.SlowRequest = 0
	}
	if len(wd.Loops) > 0 && cfg.Timeout > 0 && (wd.StallThreshold == 0 || wd.StallThreshold > cfg.Timeout) {
		// --timeout on a loop is a loop that has not turned for that long
		// (track.go): the loops are watched, at the timeout at the latest.
		wd.StallThreshold = cfg.Timeout
	}
	if m != nil && len(wd.Loops) > 0 { // the loops' lag and stalls
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
// its watchdog, and returns the Interface and the function that stops
// both within a deadline.
func startInterface(kind string, cfg *config.Config, log *slog.Logger, m *metrics, acc *accessLog) (Interface, func(deadline time.Time), error) {
	chlayer.Host.SetLimits(cfg.ChannelLayerMemoryBytes, int(cfg.ChannelLayerMaxMessage)) // before any app code can send
	startLayerRelay(cfg, log)
	if cfg.Switches.SysmonBatch {
		// docs/design.md, "sysmon and the loop thread run under SCHED_BATCH"
		if tid, err := sysmon.Batch(time.Second); err != nil {
			log.Debug("sysmon stays SCHED_OTHER", "err", err)
		} else {
			log.Debug("sysmon runs under SCHED_BATCH", "tid", tid)
		}
	}
	ifc, err := buildInterface(kind, cfg, log, requestDone(kind, acc, m), acc.keepHeader())
	if err != nil {
		return nil, nil, err
	}
	wd := startWatchdog(ifc, cfg, log, m)
	// An ASGI app's pools for sync work (syncpools.go): watched like the
	// WSGI pool's threads, stopped after the loop that submits to them.
	var sync []*python.Pool
	if p := syncPools.Load(); p != nil {
		sync = p[:]
	}
	stopWatch := watchSyncPools(cfg, log, m, sync...)
	stop := func(deadline time.Time) {
		wd.Stop()
		stopWatch()
		if ifc.Stop(time.Until(deadline)+workerctl.StopGrace) &&
			stopSyncPools(log, time.Until(deadline)+workerctl.StopGrace, sync...) {
			python.Shutdown()
		}
	}
	return ifc, stop, nil
}

// buildInterface starts the pool or the loop for an app of kind ("wsgi",
// "asgi") and returns the handler serving on it, which calls done after
// each request (nil: nothing to do); keepHeader: the handlers keep each
// response's header lines for done (accessLog.keepHeader).
func buildInterface(kind string, cfg *config.Config, log *slog.Logger, done func(*http1.Request, inflight.Result), keepHeader bool) (Interface, error) {
	switch kind {
	case "wsgi":
		if cfg.BlockingThreads == 0 {
			return nil, errors.New("--blocking-threads 0: off is for ASGI apps only; a WSGI app needs at least 1 thread")
		}
		if cfg.Loops > 1 {
			log.Warn("--loops applies to ASGI apps: a WSGI app runs on --blocking-threads threads, the setting is ignored", "loops", cfg.Loops)
		}
		pool, err := python.StartPool(python.PoolConfig{Threads: cfg.BlockingThreads, QueueSize: cfg.QueueSize,
			NoTurn: !cfg.Switches.PoolTurn, NoBatch: !cfg.Switches.PoolBatch})
		if err != nil {
			return nil, err
		}
		wsgiPool.Store(pool)
		h := &wsgi.Handler{Pool: pool, ScriptName: cfg.RootPath, Logger: log, BufferBytes: cfg.RequestBufferBytes,
			BufferDiskBytes: cfg.RequestBufferDiskBytes, BufferDir: cfg.RequestBufferDir, Done: done, KeepHeader: keepHeader}
		if cfg.QueueTimeout > 0 {
			h.QueueTimeout = cfg.QueueTimeout
		}
		return h, nil
	case "asgi":
		// The pools for the app's sync work (docs/design.md, "Sync work of
		// async apps"), before the loop that binds connections to them.
		httpPool, sessPool, err := startSyncPools(cfg, log)
		if err != nil {
			return nil, err
		}
		syncPools.Store(&[2]*python.Pool{httpPool, sessPool})
		// The worker's event loops (--loops): the only place that knows
		// how many there are. Each runs its own lifespan startup, one
		// after the other (the first loop thread compiles _asgi.py for
		// all); a failure on any stops those already started and fails
		// the worker as a failed startup always did.
		n := max(cfg.Loops, 1)
		loops := make([]*asgi.Loop, 0, n)
		var loopName string
		for i := range n {
			loop, err := asgi.NewLoop(i, asgi.LoopConfig{
				Lifespan: cfg.Lifespan, Loop: cfg.Loop, ExecutorThreads: cfg.ExecutorThreads, Batch: cfg.Switches.LoopBatch,
			})
			if err == nil {
				loopName, err = loop.Start()
			}
			if err != nil {
				if len(loops) > 0 {
					asgi.StopLoops(loops, 5*time.Second) // lifespan shutdown of the loops that started
				}
				var se *asgi.StartupError
				if errors.As(err, &se) {
					if n > 1 {
						return nil, fmt.Errorf("%w: ASGI lifespan startup failed on loop %d: %s", errStartup, i, se.Message)
					}
					return nil, fmt.Errorf("%w: ASGI lifespan startup failed: %s", errStartup, se.Message)
				}
				return nil, err
			}
			loops = append(loops, loop)
		}
		if n == 1 {
			log.Info("event loop running", "loop", loopName, "lifespan", cfg.Lifespan)
		} else {
			// On a GIL build the loops take turns holding the GIL: they
			// isolate connections from a loop blocked in a call that
			// releases it (I/O, time.sleep), they add no Python CPU.
			log.Info("event loops running", "loops", n, "loop", loopName, "lifespan", cfg.Lifespan,
				"gil", "the loops take turns holding the GIL: isolation, not parallelism (more Python CPU comes from --workers)")
		}
		return &asgi.Handler{EventLoops: loops, LoopStalled: loopStalled, RootPath: cfg.RootPath, Logger: log, Done: done, KeepHeader: keepHeader, WebSocket: websocket.Config{
			MaxSizeBytes:      cfg.WSMaxSizeBytes,
			MaxQueue:          cfg.WSMaxQueue,
			PingInterval:      cfg.WSPingInterval,
			PingTimeout:       cfg.WSPingTimeout,
			PerMessageDeflate: cfg.WSPerMessageDeflate,
			WriteTimeout:      cfg.TimeoutWrite,
		}}, nil
	}
	return nil, fmt.Errorf("server: unknown interface %q", kind)
}

// requestDone returns what runs after each request: the metrics and the
// access log (acc, nil when off) of an app of kind; nil when neither is on.
func requestDone(kind string, acc *accessLog, m *metrics) func(*http1.Request, inflight.Result) {
	if m == nil && acc == nil {
		return nil
	}
	return func(r *http1.Request, res inflight.Result) {
		loop := -1
		if kind == "asgi" {
			loop = res.Loop // the event loop that served it (--loops)
		}
		if m != nil {
			m.observe(res)
		}
		switch {
		case acc == nil:
		case res.Withdrawn:
			// Status 499 (nginx's "client closed request"): no response
			// was sent.
			acc.write(r, res, loop,
				slog.Int64("queue_wait_us", res.QueueWait.Microseconds()), slog.Bool("withdrawn", true))
		case res.Pool:
			acc.write(r, res, loop,
				slog.Int64("queue_wait_us", res.QueueWait.Microseconds()), slog.Int64("gil_wait_us", res.GILWait.Microseconds()))
		default: // an event loop: no queue, no GIL wait of its own
			acc.write(r, res, loop)
		}
	}
}
