package tests

// The process_* series in /metrics (issue 28).

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// /metrics has the process_* series of every worker (worker="<id>") and
// of the master (no worker label).
func TestMetrics_ProcessSeries(t *testing.T) {
	s := Start(t, "--workers", "2", "hello:app")
	resp, err := http.Get(s.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(b)
	for _, name := range []string{"process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds",
		"process_start_time_seconds", "process_virtual_memory_bytes", "process_max_fds"} {
		for _, series := range []string{name + `{worker="1"} `, name + `{worker="2"} `, name + " "} {
			if !strings.Contains(text, "\n"+series) {
				t.Errorf("/metrics has no %s", series)
			}
		}
		if n := strings.Count(text, "# TYPE "+name+" "); n != 1 {
			t.Errorf("%d TYPE lines for %s; want 1", n, name)
		}
	}
	// client_golang's process_network_* are the network namespace's
	// totals, the same for every process: summed over the workers and the
	// master they counted the host's traffic once per process.
	if strings.Contains(text, "process_network_") {
		t.Errorf("/metrics has process_network_* series (host totals, not the process's)")
	}
	// A worker's resident memory holds CPython: more than the master's.
	var master, w1 float64
	fmt.Sscan(after(text, "\nprocess_resident_memory_bytes "), &master)
	fmt.Sscan(after(text, "\nprocess_resident_memory_bytes{worker=\"1\"} "), &w1)
	if master <= 0 || w1 <= master {
		t.Errorf("resident memory: master %v, worker 1 %v; want both > 0, the worker's larger", master, w1)
	}
}

func after(s, sep string) string {
	_, rest, _ := strings.Cut(s, sep)
	return rest
}
