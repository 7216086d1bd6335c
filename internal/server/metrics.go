package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"turnstile/internal/http1"
	"turnstile/internal/inflight"
	"turnstile/internal/procmetrics"
	"turnstile/internal/python"
	"turnstile/internal/wsgi"
)

// metrics are the worker's Prometheus series, served on the admin
// listener's /metrics.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  prometheus.Histogram
	gilWait   prometheus.Histogram
	queueWait prometheus.Histogram
	rejected  prometheus.Counter
}

var kindNames = [4]string{"pool", "loop", "sampler", "main"}

func newMetrics(srv *http1.Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "turnstile_requests_total", Help: "Requests answered, by status code.",
	}, []string{"code"})
	m.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "turnstile_request_duration_seconds", Help: "Time from handing a request to the pool to its response being written.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	})
	m.gilWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "turnstile_gil_wait_seconds", Help: "Per request: time its Python thread spent waiting for the GIL while running it, summed: inside CPython (take_gil) after a switch-interval drop or a blocking call, and at the turnstile's hand-overs (gil_wait_timing=take_gil in the listening record; \"attach\" times attaches only). The wait before a thread takes the request is queue wait.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 2, 18),
	})
	m.queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "turnstile_queue_wait_seconds", Help: "Per request: time in the job queue before a Python thread took it (a thread takes a job only once it holds the GIL, so this includes the wait for the GIL before the request starts).",
		Buckets: prometheus.ExponentialBuckets(0.00001, 2, 20),
	})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "turnstile_requests_rejected_total", Help: "Requests answered 503 because the queue was full or the wait timed out.",
	})
	gauge := func(name, help string, f func(python.PoolStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(wsgiPoolStats()) })
	}
	// process_* (resident memory, CPU seconds, open fds, start time...),
	// read from /proc at scrape time: the master labels them worker="<id>".
	m.reg.MustRegister(procmetrics.Collector())
	m.reg.MustRegister(m.requests, m.duration, m.gilWait, m.queueWait, m.rejected,
		gauge("turnstile_pool_threads", "Python threads in the pool.", func(s python.PoolStats) float64 { return float64(s.Threads) }),
		gauge("turnstile_pool_busy", "Python threads running a request.", func(s python.PoolStats) float64 { return float64(s.Busy) }),
		gauge("turnstile_pool_idle", "Python threads waiting for work.", func(s python.PoolStats) float64 { return float64(s.Idle) }),
		gauge("turnstile_queue_depth", "Requests waiting for a Python thread.", func(s python.PoolStats) float64 { return float64(s.Queued) }),
		gauge("turnstile_queue_size", "Bound of the request queue.", func(s python.PoolStats) float64 { return float64(s.QueueSize) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "turnstile_barrier_yields_total", Help: "Times a pool thread handed the GIL over at a job boundary (the turnstile)."},
			func() float64 { return float64(python.Turnstile().BarrierYields) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "turnstile_gil_passes_total", Help: "Times a pool thread woken for the GIL in the middle of its job let a thread waiting to attach take it first (the turnstile)."},
			func() float64 { return float64(python.Turnstile().GILPasses) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "turnstile_connections", Help: "Open client connections."},
			func() float64 { return float64(srv.ActiveConns()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "turnstile_requests_withdrawn_total", Help: "WSGI requests dropped from the queue, never started and never answered, because their client left while they waited for a Python thread (not in turnstile_requests_total)."},
			func() float64 { return float64(wsgi.Withdrawn()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "turnstile_requests_over_limit_total", Help: "Requests answered 503 by --limit-concurrency, before any app code (not in turnstile_requests_total)."},
			func() float64 { return float64(srv.OverLimit()) }),
		gateCounter("turnstile_gate_closed_total", "Times the accept gate found this worker full and stopped accepting (workers only).",
			func(g *gate) int64 { return g.gated.Load() }),
		gateCounter("turnstile_gate_stale_accepts_total", "Connections this worker accepted while its gate was closed, because they had waited in the kernel's queue (every worker full).",
			func(g *gate) int64 { return g.stale.Load() }),
		gateCounter("turnstile_gate_deferred_accepts_total", "Accepts this worker deferred to let a less loaded worker take the connection.",
			func(g *gate) int64 { return g.deferred.Load() }),
	)
	m.reg.MustRegister(h3Collectors()...)
	m.reg.MustRegister(layerCollectors()...)
	for i, k := range kindNames {
		i := i
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "turnstile_attaches_total", Help: "Attaches (GIL acquisitions through the server's attach pair), by thread kind.",
			ConstLabels: prometheus.Labels{"kind": k},
		}, func() float64 { return float64(python.Turnstile().Attaches[i]) }))
	}
	return m
}

// gateCounter is a counter of the worker's accept gate (0 without one).
func gateCounter(name, help string, f func(*gate) int64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
		if g := theGate.Load(); g != nil {
			return float64(f(g))
		}
		return 0
	})
}

var codeLabels = func() []string {
	s := make([]string, 600)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func (m *metrics) observe(res inflight.Result) {
	if res.Withdrawn {
		return // never answered: turnstile_requests_withdrawn_total
	}
	code := "0"
	if res.Status > 0 && res.Status < len(codeLabels) {
		code = codeLabels[res.Status]
	}
	m.requests.WithLabelValues(code).Inc()
	if res.Rejected {
		m.rejected.Inc()
		if res.QueueWait > 0 { // answered 503 by --queue-timeout: it waited that long
			m.queueWait.Observe(res.QueueWait.Seconds())
		}
		return
	}
	m.duration.Observe(res.Duration.Seconds())
	m.gilWait.Observe(res.GILWait.Seconds())
	m.queueWait.Observe(res.QueueWait.Seconds())
}

var _ = time.Second
