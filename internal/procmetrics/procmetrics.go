// Package procmetrics gives the process_* series of /metrics (resident
// memory, CPU seconds, open fds, start time, ...) for the master and for
// each worker: client_golang's process collector, read from /proc at
// scrape time, less its process_network_* series. Those come from
// /proc/net/dev, the network namespace's totals, not the process's: every
// worker and the master reported the same figure, and a sum over them
// counted the host's traffic once per process.
package procmetrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Collector returns the process collector for this process.
func Collector() prometheus.Collector {
	return perProcess{collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

type perProcess struct{ c prometheus.Collector }

func hostWide(d *prometheus.Desc) bool {
	return strings.Contains(d.String(), `fqName: "process_network_`)
}

func (p perProcess) Describe(ch chan<- *prometheus.Desc) {
	all := make(chan *prometheus.Desc)
	go func() { p.c.Describe(all); close(all) }()
	for d := range all {
		if !hostWide(d) {
			ch <- d
		}
	}
}

func (p perProcess) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { p.c.Collect(all); close(all) }()
	for m := range all {
		if !hostWide(m.Desc()) {
			ch <- m
		}
	}
}
