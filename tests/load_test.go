package tests

// Client load for the tests that watch the server while it is busy:
// clients that GET one path in a loop and record every outcome. Used by
// the supervisor tests (a worker killed, restarted or recycled under
// load) and the accept-gate tests (every thread kept busy). Apps answer
// "<text> <pid>" (testapps/sup_app.py), so the load also counts answers
// per worker pid.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// loadOptions shape a load. The zero value is conc kept-alive clients,
// all started at once, each request timing out after 20 s.
type loadOptions struct {
	// Timeout is each request's http.Client timeout. Zero means 20 s.
	Timeout time.Duration
	// Fresh opens a new connection for every request (no keep-alive),
	// which exercises connections accepted at the moment a worker stops.
	Fresh bool
	// OneConnEach caps the clients' transport at conc connections
	// (http.Transport.MaxConnsPerHost), one kept-alive connection a
	// client.
	OneConnEach bool
	// Stagger is the pause after starting each client. Zero starts them
	// all at once.
	Stagger time.Duration
}

// clientLoad is conc clients that GET path in a loop until Stop,
// recording every outcome. mu guards the counters, which the clients
// write while the test reads them through snapshot and okBetween.
type clientLoad struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	ok     int
	errs   []error        // transport errors (refused, reset, timeout)
	bad    []string       // non-200 answers: "<status> <quoted body>"
	pids   map[string]int // 200 answers per worker pid (the body's second field)
	okAt   []time.Time    // when each 200 arrived
	client *http.Client
}

// startLoad starts conc clients that GET path on s in a loop, each
// pausing 1 ms between requests, and returns at once (after the last
// client started, see loadOptions.Stagger). The clients stop at Stop or
// at the test's cleanup.
func startLoad(t *testing.T, s *Server, conc int, path string, o loadOptions) *clientLoad {
	t.Helper()
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	tr := &http.Transport{MaxIdleConnsPerHost: conc, DisableKeepAlives: o.Fresh}
	if o.OneConnEach {
		tr.MaxConnsPerHost = conc
	}
	l := &clientLoad{stop: make(chan struct{}), pids: map[string]int{}, client: &http.Client{Timeout: timeout, Transport: tr}}
	t.Cleanup(l.Stop)
	for i := 0; i < conc; i++ {
		l.wg.Add(1)
		go l.run(s.URL + path)
		time.Sleep(o.Stagger)
	}
	return l
}

// run is one client: GET url until stop.
func (l *clientLoad) run(url string) {
	defer l.wg.Done()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		resp, err := l.client.Get(url)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		l.mu.Lock()
		switch {
		case err != nil:
			l.errs = append(l.errs, err)
		case resp.StatusCode != 200:
			l.bad = append(l.bad, fmt.Sprintf("%d %q", resp.StatusCode, body))
		default:
			l.ok++
			l.okAt = append(l.okAt, time.Now())
			if f := strings.Fields(string(body)); len(f) == 2 {
				l.pids[f[1]]++
			}
		}
		l.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// Stop stops the clients, waits for them and closes their idle
// connections. It may be called more than once.
func (l *clientLoad) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.client.CloseIdleConnections()
}

// snapshot returns the outcomes so far: the 200 count, and copies of the
// errors and non-200 answers.
func (l *clientLoad) snapshot() (ok int, errs []error, bad []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok, append([]error(nil), l.errs...), append([]string(nil), l.bad...)
}

// workerPids is how many worker pids have answered 200 so far.
func (l *clientLoad) workerPids() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pids)
}

// okBetween counts successes answered in [a, b).
func (l *clientLoad) okBetween(a, b time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.okAt {
		if !at.Before(a) && at.Before(b) {
			n++
		}
	}
	return n
}
