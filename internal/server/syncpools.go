package server

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"turnstile/internal/asgi"
	"turnstile/internal/config"
	"turnstile/internal/python"
	"turnstile/internal/watchdog"
	"turnstile/internal/workerctl"
)

// httpCallsPerRequest bounds the calls one bound HTTP request may have
// queued at once, on average (startSyncPools).
const httpCallsPerRequest = 4

// syncPools holds an ASGI worker's pools for sync work, HTTP then
// session (either nil when off), for metrics and /debug/threads.
var syncPools atomic.Pointer[[2]*python.Pool]

// startSyncPools starts an ASGI worker's pools for the app's sync work
// (docs/design.md, "Sync work of async apps"): ts-http-N
// (--blocking-threads, 0 = none) and ts-sess-N (--session-threads, 0 =
// none), the same pool threads as WSGI's, and hands them to the loops
// (asgi.SetPools). At most blocking_threads + queue_size HTTP requests
// are bound at once; more are answered 503 before the app runs.
func startSyncPools(cfg *config.Config, log *slog.Logger) (httpPool, sessPool *python.Pool, err error) {
	start := func(name string, n, calls int) (*python.Pool, error) {
		if n == 0 {
			return nil, nil
		}
		return python.StartPool(python.PoolConfig{Name: name, Threads: n, QueueSize: calls,
			NoTurn: !cfg.Switches.PoolTurn, NoBatch: !cfg.Switches.PoolBatch})
	}
	// The bound rule, per pool, on calls queued: the HTTP pool's requests
	// are bounded first (blocking_threads + queue_size, 503 past it), and
	// one request may have a few calls queued at once (asgiref gathers the
	// sync receivers of a Django signal: httpCallsPerRequest); a session
	// pool queues at most --queue-size calls (past it the app's
	// sync_to_async raises RuntimeError).
	if httpPool, err = start("ts-http", cfg.BlockingThreads, httpCallsPerRequest*(cfg.BlockingThreads+cfg.QueueSize)); err != nil {
		return nil, nil, err
	}
	if sessPool, err = start("ts-sess", cfg.SessionThreads, cfg.QueueSize); err != nil {
		return nil, nil, err
	}
	asgi.SetPools(httpPool, sessPool, cfg.BlockingThreads+cfg.QueueSize)
	log.Debug("pools for sync work", "blocking_threads", cfg.BlockingThreads, "session_threads", cfg.SessionThreads)
	return httpPool, sessPool, nil
}

// stopSyncPools stops the pools after the loop, within timeout; false
// (logged) when a thread still runs: the worker exits without it.
func stopSyncPools(log *slog.Logger, timeout time.Duration, pools ...*python.Pool) bool {
	for _, p := range pools {
		if p != nil && !p.Stop(timeout) {
			log.Warn("sync-work threads still running at exit: exiting without them", "pool", p.Name())
			return false
		}
	}
	return true
}

// watchSyncPools watches the threads of the pools the way the loop
// watchdog watches the loop: a call running past --slow-request-threshold
// (then twice as long, and so on) is logged with its stack, the
// connections bound to its thread and those waiting there; one running
// past --timeout is logged and the worker replaced (workerctl.CauseTimeout),
// as a stuck WSGI request is (track.go). It registers the pools' metrics
// on m. The returned function stops the watching.
func watchSyncPools(cfg *config.Config, log *slog.Logger, m *metrics, pools ...*python.Pool) func() {
	var live []*python.Pool
	for _, p := range pools {
		if p != nil {
			live = append(live, p)
		}
	}
	if m != nil && len(live) > 0 {
		m.reg.MustRegister(syncPoolCollector(live))
	}
	slow, timeout := max(cfg.SlowRequestThreshold, 0), max(cfg.Timeout, 0)
	if len(live) == 0 || (slow == 0 && timeout == 0) {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		type state struct {
			since    int64         // the call's start (ns): a new call resets next
			next     time.Duration // log when it runs this long
			timedOut bool
		}
		states := map[string]*state{}
		tick := time.NewTicker(watchdog.SlowEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			now := python.Now()
			for _, p := range live {
				for i := range p.Threads() {
					st := p.ThreadStats(i, false)
					name := p.ThreadName(i)
					s := states[name]
					if st.RunningSince == 0 {
						delete(states, name)
						continue
					}
					if s == nil || s.since != st.RunningSince {
						s = &state{since: st.RunningSince, next: slow}
						states[name] = s
					}
					age := time.Duration(now - st.RunningSince)
					logSlow := slow > 0 && age >= s.next
					logTimeout := timeout > 0 && age >= timeout && !s.timedOut
					if !logSlow && !logTimeout {
						continue
					}
					oldest := time.Duration(0)
					if st.OldestQueued != 0 {
						oldest = time.Duration(now - st.OldestQueued)
					}
					frames := python.SampleStack(p.ThreadState(i))
					stack := joinFrames(frames)
					attrs := []any{"thread", name, "pool", p.Name(), "age_ms", age.Milliseconds(), "pinned", st.Bound,
						"queued", st.Queued, "waiting_conns", st.WaitingConns, "oldest_wait_ms", oldest.Milliseconds(),
						"conn", connTag(st.RunningTag), "stack", stack}
					if logSlow {
						for s.next <= age {
							s.next *= 2
						}
						log.Warn("slow sync call", attrs...)
						keepSlowCall(name, st.RunningTag, age, frames)
					}
					if logTimeout {
						s.timedOut = true
						log.Warn("sync call running past --timeout; replacing this worker gracefully", attrs...)
						if worker != nil {
							worker.ctl.recycle(workerctl.CauseTimeout, "sync call on "+name+" running "+age.Round(time.Millisecond).String())
						}
					}
				}
			}
		}
	}()
	return func() { close(done) }
}

// keepSlowCall keeps a slow sync call as a slow-request record of the
// watchdog (/debug/status slow_requests, turnstile top's LAST SLOW
// REQUESTS), as a WSGI request's: the connection's method, path and start
// (none once it is over), the thread, the call's age and its stack.
func keepSlowCall(thread string, tag uint64, age time.Duration, frames []python.Frame) {
	wd := activeWatchdog.Load()
	if wd == nil {
		return
	}
	rec := watchdog.Slow{Thread: thread, Start: time.Now().Add(-age), AgeMS: float64(age.Microseconds()) / 1000,
		Stack: wd.Describe(frames)}
	if f, ok := asgi.ByTag(tag); ok {
		rec.Method, rec.Target, rec.Start = f.Method, f.Path, f.Start
	}
	wd.KeepSlow(rec)
}

// syncThreads maps each request a thread of the pools for sync work runs
// a call of now ("METHOD PATH START_NS", as the watchdog keys requests)
// to that thread's name: an ASGI request's thread in /debug/status.
func syncThreads() map[string]string {
	if syncPools.Load() == nil {
		return nil
	}
	out := map[string]string{}
	eachSyncCall(func(p *python.Pool, i int, st python.LaneStats) {
		if f, ok := asgi.ByTag(st.RunningTag); ok {
			out[requestKey(f.Method, f.Path, f.Start)] = p.ThreadName(i)
		}
	})
	return out
}

// syncStacks samples the stack of each thread of the pools for sync work
// running a call now, with the connection's method and path when it is
// still open.
func syncStacks(describe func([]python.Frame) []string) []ThreadStack {
	var out []ThreadStack
	eachSyncCall(func(p *python.Pool, i int, st python.LaneStats) {
		ts := ThreadStack{Thread: p.ThreadName(i), Stack: describe(python.SampleStack(p.ThreadState(i)))}
		if f, ok := asgi.ByTag(st.RunningTag); ok {
			ts.Method, ts.Target = f.Method, f.Path
		}
		out = append(out, ts)
	})
	return out
}

// eachSyncCall calls f for each thread of the pools for sync work running
// a call now (thread i of pool p, its stats); none before the pools start.
func eachSyncCall(f func(p *python.Pool, i int, st python.LaneStats)) {
	pools := syncPools.Load()
	if pools == nil {
		return
	}
	for _, p := range pools {
		if p == nil {
			continue
		}
		for i := range p.Threads() {
			if st := p.ThreadStats(i, false); st.RunningSince != 0 {
				f(p, i, st)
			}
		}
	}
}

func requestKey(method, path string, start time.Time) string {
	return method + " " + path + " " + strconv.FormatInt(start.UnixNano(), 10)
}

// connTag renders a call's tag (_asgi.py: the Channel's slot << 32 |
// generation) as the connection it names, "GET /ws/room/ (open 12.3s)",
// or "slot/gen" once that connection is over.
func connTag(tag uint64) string {
	if tag == 0 {
		return ""
	}
	if f, ok := asgi.ByTag(tag); ok {
		return f.Method + " " + f.Path + " (open " + time.Since(f.Start).Round(time.Millisecond).String() + ")"
	}
	return strconv.FormatUint(tag>>32, 10) + "/" + strconv.FormatUint(tag&0xffffffff, 10)
}

// writeThreads writes /debug/threads: each thread of the pools for sync
// work, its state (idle, or running a call of which connection for how
// long), the connections bound to it, its queued calls and the oldest
// wait among them.
func writeThreads(w io.Writer) {
	pools := syncPools.Load()
	if pools == nil || (pools[0] == nil && pools[1] == nil) {
		fmt.Fprintln(w, "no pools for sync work (a WSGI worker, or --blocking-threads 0 and --session-threads 0)")
		return
	}
	now := python.Now()
	for _, p := range pools {
		if p == nil {
			continue
		}
		for i := range p.Threads() {
			st := p.ThreadStats(i, false)
			state := "idle"
			if st.RunningSince != 0 {
				state = "running " + time.Duration(now-st.RunningSince).Round(time.Millisecond).String() + ": " + connTag(st.RunningTag)
			}
			oldest := ""
			if st.OldestQueued != 0 {
				oldest = ", oldest waiting " + time.Duration(now-st.OldestQueued).Round(time.Millisecond).String()
			}
			fmt.Fprintf(w, "%s  %s; bound %d, queued %d from %d connections%s; busy %.3fs, %d calls\n",
				p.ThreadName(i), state, st.Bound, st.Queued, st.WaitingConns, oldest, st.Busy.Seconds(), st.Calls)
			const shown = 50
			for _, tag := range p.BoundTags(i, shown) {
				fmt.Fprintf(w, "    bound: %s\n", connTag(tag))
			}
			if st.Bound > shown {
				fmt.Fprintf(w, "    bound: … %d more\n", st.Bound-shown)
			}
		}
	}
}

// syncPoolCollector exports the pools' threads: per {pool, thread} the
// connections pinned, the calls queued, the longest queue wait since the
// last scrape, the busy seconds; per pool the calls run.
type syncPoolCollector []*python.Pool

var (
	descSyncPinned  = prometheus.NewDesc("turnstile_sync_thread_pinned", "Connections bound to this sync-work thread (ASGI: WebSocket sessions pinned, HTTP requests bound).", []string{"pool", "thread"}, nil)
	descSyncQueued  = prometheus.NewDesc("turnstile_sync_thread_queued", "Sync calls waiting for this thread.", []string{"pool", "thread"}, nil)
	descSyncWaitMax = prometheus.NewDesc("turnstile_sync_thread_queue_wait_max_seconds", "Longest time a sync call waited for this thread since the previous scrape.", []string{"pool", "thread"}, nil)
	descSyncBusy    = prometheus.NewDesc("turnstile_sync_thread_busy_seconds_total", "Time this thread spent running sync calls.", []string{"pool", "thread"}, nil)
	descSyncCalls   = prometheus.NewDesc("turnstile_sync_calls_total", "Sync calls run by the pool's threads.", []string{"pool"}, nil)
)

func (c syncPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSyncPinned, descSyncQueued, descSyncWaitMax, descSyncBusy, descSyncCalls} {
		ch <- d
	}
}

func (c syncPoolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c {
		pool := strings.TrimPrefix(p.Name(), "ts-")
		var calls uint64
		for i := range p.Threads() {
			st := p.ThreadStats(i, true)
			th := p.ThreadName(i)
			calls += st.Calls
			ch <- prometheus.MustNewConstMetric(descSyncPinned, prometheus.GaugeValue, float64(st.Bound), pool, th)
			ch <- prometheus.MustNewConstMetric(descSyncQueued, prometheus.GaugeValue, float64(st.Queued), pool, th)
			ch <- prometheus.MustNewConstMetric(descSyncWaitMax, prometheus.GaugeValue, st.WaitMax.Seconds(), pool, th)
			ch <- prometheus.MustNewConstMetric(descSyncBusy, prometheus.CounterValue, st.Busy.Seconds(), pool, th)
		}
		ch <- prometheus.MustNewConstMetric(descSyncCalls, prometheus.CounterValue, float64(calls), pool)
	}
}
