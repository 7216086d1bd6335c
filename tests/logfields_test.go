package tests

// Log fields (issue 28): one JSON type per field ("worker" a number
// everywhere), no empty why, an ASGI worker's start record without the
// WSGI pool's settings, and the help text's defaults.

import (
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every JSON record's "worker" is a number, from the master and from the
// workers alike; and no record has an empty "why".
func TestLogs_JSONFieldTypes(t *testing.T) {
	for _, app := range []string{"hello:app", "asgi_hello:app"} {
		t.Run(app, func(t *testing.T) {
			s := Start(t, "--workers", "2", "--access-log", app)
			for i := 0; i < 4; i++ {
				s.Get(t, "/")
			}
			s.Signal(syscall.SIGHUP) // replacing worker ... (no why)
			deadline := time.Now().Add(20 * time.Second)
			for strings.Count(s.Logs(), `"msg":"replacing worker"`) < 2 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			s.Stop()
			fromMaster, fromWorkers := 0, 0
			for _, line := range strings.Split(s.Logs(), "\n") {
				if strings.TrimSpace(line) == "" {
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Errorf("not a JSON record: %q", line)
					continue
				}
				if why, ok := rec["why"]; ok && why == "" {
					t.Errorf("empty why: %s", line)
				}
				w, ok := rec["worker"]
				if !ok {
					continue
				}
				if _, num := w.(float64); !num {
					t.Errorf("worker is %T (%v), not a number: %s", w, w, line)
				}
				if msg, _ := rec["msg"].(string); msg == "access" || strings.HasPrefix(msg, "worker listening") {
					fromWorkers++
				} else {
					fromMaster++
				}
				if rec["msg"] == "worker listening" && rec["interface"] == "asgi" {
					for _, k := range []string{"turnstile_barrier", "gil_wait_timing"} {
						if _, ok := rec[k]; ok {
							t.Errorf("ASGI worker's listening record has the WSGI setting %s: %s", k, line)
						}
					}
					// its pools for sync work (issue 20): --blocking-threads is the HTTP one
					for _, k := range []string{"blocking_threads", "session_threads"} {
						if _, ok := rec[k]; !ok {
							t.Errorf("ASGI worker's listening record lacks %s: %s", k, line)
						}
					}
				}
			}
			if fromMaster == 0 || fromWorkers == 0 {
				t.Errorf("records with worker: %d from the master, %d from workers; want both", fromMaster, fromWorkers)
			}
		})
	}
}

// The help text: one default per flag, --admin-bind's unix: form.
func TestLogs_HelpText(t *testing.T) {
	out, err := exec.Command(binPath(t), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if n := strings.Count(line, "(default"); n > 1 {
			t.Errorf("two defaults: %q", line)
		}
		if strings.Contains(line, "--admin-bind") && !strings.Contains(line, "unix:") {
			t.Errorf("--admin-bind help %q; want the unix:/path form named", line)
		}
	}
}
