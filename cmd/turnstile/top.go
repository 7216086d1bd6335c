package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"turnstile/internal/config"
)

// adminClient talks HTTP to the admin listener at addr: host:port, or
// unix:/path as --admin-bind takes it.
func adminClient(addr string) (*http.Client, string) {
	// The "admin listening" record and curl spell it with a scheme.
	addr = strings.TrimSuffix(strings.TrimPrefix(addr, "http://"), "/")
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			}}}, "http://admin"
	}
	return &http.Client{Timeout: 5 * time.Second}, "http://" + addr
}

// adminDo sends method path to the admin listener and returns the body;
// a status other than 200/202 is an error.
func adminDo(addr, method, path string) ([]byte, error) {
	c, base := adminClient(addr)
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusConflict: // a control the master would ignore now
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(b)))
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted:
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	case !isAdminAnswer(method, resp, b):
		// An app's port (or another server) answering 200 to anything:
		// printing its body as an "ok" would lie.
		return nil, fmt.Errorf("%s %s answered %s with %q, not as turnstile's admin listener does: is %s the server's --admin-bind address?",
			addr, path, resp.Status, truncate(strings.TrimSpace(string(b)), 60), addr)
	}
	return b, nil
}

// adminErr says "does not answer" for an error of the connection (not
// for an answer adminDo refused).
func adminErr(addr string, err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return fmt.Errorf("the server at %s does not answer: %w", addr, err)
	}
	return err
}

// isAdminAnswer reports whether resp looks like the admin listener's: a
// control's 202 "ok: SIGNAL", or a JSON /debug/ answer.
func isAdminAnswer(method string, resp *http.Response, b []byte) bool {
	if method == http.MethodPost {
		return resp.StatusCode == http.StatusAccepted && strings.HasPrefix(string(b), "ok: ")
	}
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// topStatus is the master's /debug/status as top reads it (the fields of
// internal/supervise's status and internal/server's Status).
type topStatus struct {
	PID            int               `json:"pid"`
	UptimeS        float64           `json:"uptime_s"`
	Phase          string            `json:"phase"`
	WorkersDesired int               `json:"workers_desired"`
	Restarts       map[string]uint64 `json:"restarts"`
	Workers        []struct {
		Worker    int            `json:"worker"`
		PID       int            `json:"pid"`
		Ready     bool           `json:"ready"`
		Error     string         `json:"error"`
		RSSBytes  int64          `json:"rss_bytes"`
		Requests  uint64         `json:"requests"`
		Errors    uint64         `json:"errors_5xx"`
		Unavail   uint64         `json:"responses_503"`
		InFlight  int            `json:"in_flight"`
		Queued    int            `json:"queue_depth"`
		GILWaitP  float64        `json:"gil_wait_p99_s"`
		WS        int            `json:"websocket_sessions"`
		ThreadsJS map[string]int `json:"threads"`
		Loops     []struct {
			Loop     int     `json:"loop"`
			LagP99S  float64 `json:"lag_p99_s"`
			StallS   float64 `json:"stall_seconds"`
			StalledS float64 `json:"stalled_now_s"`
		} `json:"loops"`
		Running []struct {
			Method string  `json:"method"`
			Target string  `json:"target"`
			Thread string  `json:"thread"`
			AgeS   float64 `json:"age_s"`
			Queued bool    `json:"queued"`
		} `json:"running"`
		Stalls []struct {
			Loop       int       `json:"loop"`
			DurationMS float64   `json:"duration_ms"`
			Start      time.Time `json:"start"`
			Stack      []string  `json:"stack"`
		} `json:"stalls"`
		Slow []struct {
			Method string    `json:"method"`
			Target string    `json:"target"`
			AgeMS  float64   `json:"age_ms"`
			Start  time.Time `json:"start"`
			Stack  []string  `json:"stack"`
		} `json:"slow_requests"`
	} `json:"workers"`
}

// topFrame is a stack's top frame ("file:line in func"), or "-".
func topFrame(stack []string) string {
	if len(stack) == 0 {
		return "-"
	}
	return stack[0]
}

// renderText writes one snapshot as text: the server line, the worker
// table, what each thread runs, the last stalls and slow requests.
func renderText(w io.Writer, st *topStatus, prevReq map[int]uint64, dt float64) {
	var causes []string
	for c, n := range st.Restarts {
		if n > 0 {
			causes = append(causes, fmt.Sprintf("%s=%d", c, n))
		}
	}
	sort.Strings(causes)
	var req, inflight, queued, unavail uint64
	for _, wk := range st.Workers {
		req += wk.Requests
		inflight += uint64(wk.InFlight)
		queued += uint64(wk.Queued)
		unavail += wk.Unavail
	}
	if len(causes) == 0 {
		causes = []string{"none"}
	}
	fmt.Fprintf(w, "turnstile pid %d  %s  up %s  workers %d/%d  requests %d  in flight %d  queued %d  503s %d  restarts %s\n",
		st.PID, st.Phase, time.Duration(st.UptimeS*float64(time.Second)).Truncate(time.Second), len(st.Workers), st.WorkersDesired,
		req, inflight, queued, unavail, strings.Join(causes, ","))
	fmt.Fprintf(w, "\n%-6s %-8s %8s %8s %7s %6s %6s %5s %5s %7s %5s %4s %9s %s\n",
		"WORKER", "PID", "RSS_MB", "REQ/S", "REQS", "INFL", "QUEUE", "RUN", "GIL", "IDLE", "503", "WS", "GILP99ms", "LOOPS (lag p99 ms / stall s)")
	for _, wk := range st.Workers {
		if wk.Error != "" || !wk.Ready {
			fmt.Fprintf(w, "%-6d %-8d %s\n", wk.Worker, wk.PID, workerDown(wk.Ready, wk.Error))
			continue
		}
		rate := "-"
		if p, ok := prevReq[wk.PID]; ok && dt > 0 {
			rate = fmt.Sprintf("%.1f", float64(wk.Requests-p)/dt)
		}
		var loops []string
		for _, l := range wk.Loops {
			s := fmt.Sprintf("#%d %.0f/%.1f", l.Loop, l.LagP99S*1000, l.StallS)
			if l.StalledS > 0 {
				s += fmt.Sprintf(" STALLED %.1fs", l.StalledS)
			}
			loops = append(loops, s)
		}
		fmt.Fprintf(w, "%-6d %-8d %8.1f %8s %7d %6d %6d %5d %5d %7d %5d %4d %9.2f %s\n",
			wk.Worker, wk.PID, float64(wk.RSSBytes)/(1<<20), rate, wk.Requests, wk.InFlight, wk.Queued,
			wk.ThreadsJS["running"], wk.ThreadsJS["waiting_for_gil"], wk.ThreadsJS["idle"], wk.Unavail, wk.WS, wk.GILWaitP*1000, strings.Join(loops, " "))
	}
	fmt.Fprintf(w, "\nRUNNING\n%-6s %-14s %-7s %8s %s\n", "WORKER", "THREAD", "METHOD", "AGE_S", "TARGET")
	for _, wk := range st.Workers {
		for _, r := range wk.Running {
			th := r.Thread
			if th == "" {
				th = "loop"
				if r.Queued {
					th = "(queued)"
				}
			}
			fmt.Fprintf(w, "%-6d %-14s %-7s %8.1f %s\n", wk.Worker, th, r.Method, r.AgeS, r.Target)
		}
	}
	fmt.Fprintf(w, "\nLAST STALLS\n")
	for _, wk := range st.Workers {
		for i := len(wk.Stalls) - 1; i >= 0 && i >= len(wk.Stalls)-5; i-- {
			s := wk.Stalls[i]
			fmt.Fprintf(w, "worker %d loop %d  %.0f ms  %s\n", wk.Worker, s.Loop, s.DurationMS, topFrame(s.Stack))
		}
	}
	fmt.Fprintf(w, "\nLAST SLOW REQUESTS\n")
	for _, wk := range st.Workers {
		for i := len(wk.Slow) - 1; i >= 0 && i >= len(wk.Slow)-5; i-- {
			s := wk.Slow[i]
			fmt.Fprintf(w, "worker %d %s %s  %.0f ms  %s\n", wk.Worker, s.Method, s.Target, s.AgeMS, topFrame(s.Stack))
		}
	}
}

// workerDown is a worker's row when it has no numbers: still starting
// (not ready, no error: importing the app), or not answering and why.
func workerDown(ready bool, err string) string {
	if !ready && err == "" {
		return "starting (not ready yet)"
	}
	return "not answering: " + err
}

func fetchStatus(addr string) (*topStatus, []byte, error) {
	b, err := adminDo(addr, http.MethodGet, "/debug/status")
	if err != nil {
		return nil, nil, err
	}
	var st topStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, nil, fmt.Errorf("/debug/status: %w", err)
	}
	return &st, b, nil
}

func topCommand(code *int) *cobra.Command {
	var admin, format string
	var once bool
	c := &cobra.Command{
		Use:   "top",
		Short: "A live view of a running server, from its admin listener's /debug/status",
		Long: "top shows the server (uptime, workers, requests, 503s, restarts by cause), each worker\n" +
			"(RSS, requests/s, pool threads running / waiting for the GIL / idle, GIL-wait p99,\n" +
			"each loop's lag and stalls), what each thread runs now, and the last stalls and slow\n" +
			"requests with their top frame, refreshed every second. --once prints one snapshot.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "json" && format != "text" {
				return fmt.Errorf("--format: json or text, not %q", format)
			}
			if once {
				st, raw, err := fetchStatus(admin)
				if err != nil {
					return fail(code, fmt.Errorf("turnstile top: %w", adminErr(admin, err)))
				}
				if format == "json" {
					os.Stdout.Write(raw)
				} else {
					renderText(os.Stdout, st, nil, 0)
				}
				return nil
			}
			return topLive(admin, code)
		},
	}
	c.Flags().StringVar(&admin, "admin", config.DefaultAdminBind, "the server's admin listener: host:port or unix:/path (its --admin-bind)")
	c.Flags().BoolVar(&once, "once", false, "print one snapshot and exit")
	c.Flags().StringVar(&format, "format", "text", "with --once: json (the /debug/status answer) or text")
	return c
}

// topLive runs the full-screen view (topview.go); on TERM=dumb (or no
// TERM) it prints the text snapshot every second instead. A server that
// goes away ends either with one line and exit status 1.
func topLive(admin string, code *int) error {
	if t := os.Getenv("TERM"); t != "dumb" && t != "" {
		return topTUI(admin, code)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	prev := map[int]uint64{}
	last := time.Time{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		st, _, err := fetchStatus(admin)
		if err != nil {
			return fail(code, fmt.Errorf("turnstile top: the server at %s went away: %v", admin, err))
		}
		now := time.Now()
		renderText(os.Stdout, st, prev, now.Sub(last).Seconds())
		fmt.Println()
		prev = map[int]uint64{}
		for _, wk := range st.Workers {
			prev[wk.PID] = wk.Requests
		}
		last = now
		select {
		case <-sigs:
			return nil
		case <-tick.C:
		}
	}
}

// ctlActions are `turnstile ctl`'s: POST to the master's /ctl/<action>
// (the signal gunicorn takes for it), or GET a /debug/ list.
var ctlActions = map[string]struct{ method, path, doc string }{
	"reload":        {http.MethodPost, "/ctl/reload", "rolling restart of the workers (SIGHUP)"},
	"reload-certs":  {http.MethodPost, "/ctl/reload-certs", "workers re-read the TLS certificate files, no restart"},
	"stop":          {http.MethodPost, "/ctl/stop", "graceful stop (SIGTERM)"},
	"add-worker":    {http.MethodPost, "/ctl/add-worker", "one worker more (SIGTTIN)"},
	"remove-worker": {http.MethodPost, "/ctl/remove-worker", "one worker less (SIGTTOU)"},
	"stacks":        {http.MethodGet, "/debug/stacks", "every running thread's stack, sampled (JSON)"},
	"requests":      {http.MethodGet, "/debug/requests", "every worker's requests in flight (JSON)"},
}

func ctlCommand(code *int) *cobra.Command {
	var admin string
	names := make([]string, 0, len(ctlActions))
	for n := range ctlActions {
		names = append(names, n)
	}
	sort.Strings(names)
	long := "ctl asks a running server, through its admin listener:\n"
	for _, n := range names {
		long += fmt.Sprintf("  %-14s %s\n", n, ctlActions[n].doc)
	}
	c := &cobra.Command{
		Use:       "ctl " + strings.Join(names, "|"),
		Short:     "Operator controls on a running server's admin listener",
		Long:      long,
		ValidArgs: names,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if _, ok := ctlActions[args[0]]; ok {
					return nil
				}
				return fmt.Errorf("ctl: unknown action %q: want one of %s", args[0], strings.Join(names, ", "))
			}
			return fmt.Errorf("ctl: want one action of %s (got %d arguments)", strings.Join(names, ", "), len(args))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			a := ctlActions[args[0]]
			b, err := adminDo(admin, a.method, a.path)
			if err != nil {
				return fail(code, fmt.Errorf("turnstile ctl %s: %w", args[0], adminErr(admin, err)))
			}
			os.Stdout.Write(b)
			return nil
		},
	}
	c.Flags().StringVar(&admin, "admin", config.DefaultAdminBind, "the server's admin listener: host:port or unix:/path (its --admin-bind)")
	return c
}

// fail prints err as one line on stderr and sets exit status 1 (a server
// that does not answer; 2 stays for usage errors).
func fail(code *int, err error) error {
	fmt.Fprintln(os.Stderr, err)
	*code = 1
	return nil
}
