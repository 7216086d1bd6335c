package supervise

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"turnstile/internal/listen"
	"turnstile/internal/procmetrics"
)

// The admin listener belongs to the master: /livez answers from the
// master itself; /readyz and /metrics ask every worker over its Unix
// socket (the worker's own admin handler, internal/server) and merge the
// answers, so one scrape sees the whole server and ports never collide.
const (
	// scrapeTimeout bounds one worker's answer to /metrics or /readyz.
	// The worker answers from Go, without the GIL.
	scrapeTimeout = 2 * time.Second
)

func (m *Master) startAdmin(bind string) (string, error) {
	ln, err := listen.Admin(bind)
	if err != nil {
		return "", err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.restarts,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "turnstile_workers", Help: "Worker processes serving (ready)."},
			func() float64 { return float64(m.snap.Load().readyCount()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "turnstile_workers_desired", Help: "Worker processes the master keeps (--workers, SIGTTIN/SIGTTOU)."},
			func() float64 { return float64(m.snap.Load().want) }),
		// The channel layer's relay between the workers (layer.go).
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "turnstile_layer_relay_frames_total", Help: "Channel layer frames the master relayed or applied (joins, leaves, sends, group sends from the workers)."},
			func() float64 { f, _, _ := layerHub.Stats(); return float64(f) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "turnstile_layer_relay_dropped_total", Help: "Channel layer frames the master dropped because a worker's link was at its bound (it did not read)."},
			func() float64 { _, d, _ := layerHub.Stats(); return float64(d) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "turnstile_layer_relay_groups", Help: "Channel layer groups with members on some worker, as the master's relay knows them."},
			func() float64 { _, _, g := layerHub.Stats(); return float64(g) }),
		// The master's own process_* series, without a worker label
		// (each worker's carry worker="<id>").
		procmetrics.Collector(),
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/livez", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", m.readyz)
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { m.metrics(w, r, reg) })
	mux.HandleFunc("/debug/stalls", m.stalls)
	mux.HandleFunc("/debug/threads", m.threads)
	mux.HandleFunc("/debug/status", func(w http.ResponseWriter, r *http.Request) { m.status(w, r, reg) })
	mux.HandleFunc("/debug/stacks", m.list("/debug/stacks"))
	mux.HandleFunc("/debug/requests", m.list("/debug/requests"))
	mux.HandleFunc("/debug/layer", m.list("/debug/layer"))
	mux.HandleFunc("/ctl/reload", m.controlCerts(syscall.SIGHUP))
	mux.HandleFunc("/ctl/reload-certs", m.controlCerts(reloadCerts))
	mux.HandleFunc("/ctl/stop", m.control(syscall.SIGTERM))
	mux.HandleFunc("/ctl/add-worker", m.control(syscall.SIGTTIN))
	mux.HandleFunc("/ctl/remove-worker", m.control(syscall.SIGTTOU))
	m.admin = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelDebug)}
	go m.admin.Serve(ln)
	return ln.Addr().String(), nil
}

func (s *snapshot) readyCount() int {
	n := 0
	for _, w := range s.workers {
		if w.ready {
			n++
		}
	}
	return n
}

// workerClient talks HTTP to a worker's Unix socket.
func workerClient(path string) *http.Client {
	return &http.Client{
		Timeout: scrapeTimeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			DisableKeepAlives: true,
		},
	}
}

// ask GETs path from a worker: status, body.
func ask(w workerInfo, path string) (int, []byte, error) {
	resp, err := workerClient(w.admin).Get("http://worker" + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, b, err
}

// readyz is 200 only while the master runs and every worker is ready and
// says so itself (a worker whose request queue is full is not).
func (m *Master) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	s := m.snap.Load()
	if s.phase != phaseRunning {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %s\n", map[phase]string{phaseStarting: "starting", phaseStopping: "stopping"}[s.phase])
		return
	}
	var problems []string
	if s.readyCount() < s.want {
		problems = append(problems, fmt.Sprintf("%d of %d workers ready", s.readyCount(), s.want))
	}
	var mu sync.Mutex
	eachReady(s, func(_ int, wi workerInfo) {
		code, body, err := ask(wi, "/readyz")
		if err == nil && code == http.StatusOK {
			return
		}
		why := strings.TrimSpace(string(body))
		if err != nil {
			why = err.Error()
		}
		mu.Lock()
		problems = append(problems, fmt.Sprintf("worker %d (pid %d): %s", wi.id, wi.pid, why))
		mu.Unlock()
	})
	if len(problems) > 0 {
		sort.Strings(problems)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %s\n", strings.Join(problems, "; "))
		return
	}
	w.Write([]byte("ok\n"))
}

// metrics merges every ready worker's series, each labelled
// worker="<id>", with the master's own (turnstile_workers,
// turnstile_worker_restarts_total, turnstile_worker_up, and its process_*
// series without a worker label next to the workers' labelled ones).
func (m *Master) metrics(w http.ResponseWriter, r *http.Request, reg *prometheus.Registry) {
	s := m.snap.Load()
	type result struct {
		id  int
		fam map[string]*dto.MetricFamily
	}
	results := make([]result, len(s.workers))
	for i, wi := range s.workers {
		results[i].id = wi.id
	}
	eachReady(s, func(i int, wi workerInfo) {
		code, body, err := ask(wi, "/metrics")
		if err != nil || code != http.StatusOK {
			m.log.Debug("scraping a worker", "worker", wi.id, "pid", wi.pid, "status", code, "err", err)
			return
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fam, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			m.log.Debug("parsing a worker's metrics", "worker", wi.id, "pid", wi.pid, "err", err)
			return
		}
		results[i].fam = fam
	})

	merged := map[string]*dto.MetricFamily{}
	up := &dto.MetricFamily{Name: proto.String("turnstile_worker_up"),
		Help: proto.String("1 if the master could scrape the worker's metrics."), Type: dto.MetricType_GAUGE.Enum()}
	for _, res := range results {
		label := &dto.LabelPair{Name: proto.String("worker"), Value: proto.String(strconv.Itoa(res.id))}
		v := 0.0
		if res.fam != nil {
			v = 1
		}
		up.Metric = append(up.Metric, &dto.Metric{Label: []*dto.LabelPair{label}, Gauge: &dto.Gauge{Value: proto.Float64(v)}})
		for name, f := range res.fam {
			into := merged[name]
			if into == nil {
				into = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit}
				merged[name] = into
			}
			for _, mt := range f.Metric {
				mt.Label = append([]*dto.LabelPair{label}, mt.Label...)
				into.Metric = append(into.Metric, mt)
			}
		}
	}
	merged[up.GetName()] = up
	own, err := reg.Gather()
	if err != nil {
		m.log.Debug("gathering the master's metrics", "err", err)
	}
	for _, f := range own {
		if into := merged[f.GetName()]; into != nil {
			// A family both have (process_*): the master's series first,
			// unlabelled, then the workers'.
			into.Metric = append(f.Metric, into.Metric...)
			continue
		}
		merged[f.GetName()] = f
	}
	names := make([]string, 0, len(merged))
	for n := range merged {
		names = append(names, n)
	}
	sort.Strings(names)
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	w.Header().Set("Content-Type", string(format))
	enc := expfmt.NewEncoder(w, format)
	for _, n := range names {
		if err := enc.Encode(merged[n]); err != nil {
			m.log.Debug("writing metrics", "err", err)
			return
		}
	}
}

// stalls merges every worker's /debug/stalls (a JSON array of event-loop
// stalls, internal/watchdog) into one array, each stall with "worker" and
// "pid" added.
func (m *Master) stalls(w http.ResponseWriter, r *http.Request) {
	s := m.snap.Load()
	parts := make([][]map[string]any, len(s.workers))
	eachReady(s, func(i int, wi workerInfo) {
		code, body, err := ask(wi, "/debug/stalls")
		if err != nil || code != http.StatusOK {
			return
		}
		var list []map[string]any
		if json.Unmarshal(body, &list) != nil {
			return
		}
		for _, st := range list {
			st["worker"], st["pid"] = wi.id, wi.pid
		}
		parts[i] = list
	})
	all := []map[string]any{}
	for _, p := range parts {
		all = append(all, p...)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(all)
}

// masterStart is when the master started, for /debug/status's uptime_s.
var masterStart = time.Now()

// gather asks every ready worker for path (JSON) and returns the decoded
// answers by worker, each with "worker" and "pid" added; a worker that
// does not answer has an "error" instead.
func (m *Master) gather(path string) []map[string]any {
	s := m.snap.Load()
	out := make([]map[string]any, len(s.workers))
	for i, wi := range s.workers {
		out[i] = map[string]any{"worker": wi.id, "pid": wi.pid, "ready": wi.ready}
	}
	eachReady(s, func(i int, wi workerInfo) {
		code, body, err := ask(wi, path)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		var v any
		if err == nil {
			err = json.Unmarshal(body, &v)
		}
		if err != nil {
			out[i]["error"] = err.Error()
			return
		}
		if obj, ok := v.(map[string]any); ok {
			for k, x := range obj {
				if k != "pid" {
					out[i][k] = x
				}
			}
		} else {
			out[i]["items"] = v
		}
	})
	return out
}

// status answers /debug/status (JSON, docs/admin.md): the server's uptime,
// phase, desired workers and restarts by cause, and each worker's own
// /debug/status (internal/server, Status) with its id added.
func (m *Master) status(w http.ResponseWriter, r *http.Request, reg *prometheus.Registry) {
	s := m.snap.Load()
	restarts := map[string]uint64{}
	if fams, err := reg.Gather(); err == nil {
		for _, f := range fams {
			if f.GetName() != "turnstile_worker_restarts_total" {
				continue
			}
			for _, mt := range f.Metric {
				for _, l := range mt.Label {
					if l.GetName() == "cause" {
						restarts[l.GetValue()] = uint64(mt.GetCounter().GetValue())
					}
				}
			}
		}
	}
	out := map[string]any{
		"pid":             os.Getpid(),
		"uptime_s":        time.Since(masterStart).Seconds(),
		"phase":           map[phase]string{phaseStarting: "starting", phaseRunning: "running", phaseStopping: "stopping"}[s.phase],
		"workers_desired": s.want,
		"restarts":        restarts,
		"workers":         m.gather("/debug/status"),
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// list answers /debug/stacks and /debug/requests: every worker's array,
// as {"worker", "pid", "items"} objects.
func (m *Master) list(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(m.gather(path))
	}
}

// control answers POST /ctl/<action>: the signal the master takes for it
// (gunicorn's: reload = HUP, stop = TERM, add-worker = TTIN,
// remove-worker = TTOU; reload-certs has none: certs.go), posted to the master's loop as the signal would
// be. The admin listener's guard (loopback or a Unix socket unless
// --admin-bind says otherwise) is the guard. 202: the master took it.
func (m *Master) control(sig os.Signal) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if why := m.refuse(sig); why != "" {
			http.Error(w, "refused: "+why, http.StatusConflict)
			return
		}
		m.Signal(sig)
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "ok: %s\n", signalName(sig))
	}
}

// refuse says why the master would ignore sig now (the cases its loop
// skips in silence, read from the snapshot), or "": the controls then
// answer 409 instead of an "ok" for nothing.
func (m *Master) refuse(sig os.Signal) string {
	s := m.snap.Load()
	if sig == syscall.SIGTERM {
		return "" // a second one while stopping kills the workers, as the signal does
	}
	switch s.phase {
	case phaseStarting:
		return "the server is starting"
	case phaseStopping:
		return "the server is stopping"
	}
	switch sig {
	case syscall.SIGTTOU:
		if s.want <= 1 {
			return "one worker is the least (--workers 1 now)"
		}
	case reloadCerts:
		if t := m.cfg.TLS(); !t.Enabled() || t.ACME {
			return "no --ssl-certfile to re-read (TLS off, or its certificates come from ACME)"
		}
	}
	return ""
}

// threads concatenates every worker's /debug/threads (text: the threads of
// its pools for sync work), each under a "worker N (pid P)" line.
func (m *Master) threads(w http.ResponseWriter, r *http.Request) {
	s := m.snap.Load()
	parts := make([][]byte, len(s.workers))
	eachReady(s, func(i int, wi workerInfo) {
		if code, body, err := ask(wi, "/debug/threads"); err == nil && code == http.StatusOK {
			parts[i] = append([]byte(fmt.Sprintf("worker %d (pid %d)\n", wi.id, wi.pid)), body...)
		}
	})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	for _, p := range parts {
		w.Write(p)
	}
}

// eachReady runs f at once for every ready worker of s that has an admin
// socket (i: its index in s.workers), and returns when every call did:
// the master's fan-out to its workers' admin endpoints.
func eachReady(s *snapshot, f func(i int, wi workerInfo)) {
	var wg sync.WaitGroup
	for i, wi := range s.workers {
		if !wi.ready || wi.admin == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i, wi)
		}()
	}
	wg.Wait()
}
