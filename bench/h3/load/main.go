// Command load is bench/h3's open-loop client: GET one URL at a fixed rate
// over HTTP/3 (quic-go's http3 client), HTTP/2 (golang.org/x/net/http2's
// Transport) or HTTP/1.1 (net/http's Transport, h2 not offered), all over
// TLS, so the three protocols meet the same client code. Debian 12's
// h2load (nghttp2 1.52.0) is built without ngtcp2 and cannot speak HTTP/3.
//
// Open loop: request i is due at start + i/rate and goes out in its own
// goroutine at that time whatever the earlier ones are doing; its latency
// is measured from the time it was due (so a server that stalls shows a
// tail, and the client's own scheduling lag is charged to no one but
// counted: Go's timers wait about a millisecond on one core, so requests
// leave in small bursts, as vegeta's do). -conns client connections: for
// h2 and h3 one connection per Transport, request i on connection i mod
// conns; for h1 one Transport with at most -conns connections (a request
// with every connection busy waits for one, and that wait is in its
// latency).
//
// Output on stdout: the line "measure start" after the -warmup seconds
// (same rate, not recorded), "measure end" when the measured requests
// have all finished, then one JSON object (result). The driver
// (bench/h3/run.py) reads the server's CPU at the two marks.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"
)

type result struct {
	Proto       string         `json:"proto"`
	Rate        int            `json:"rate"`
	Conns       int            `json:"conns"`
	Seconds     float64        `json:"seconds"`
	Sent        int            `json:"sent"`
	OK          int            `json:"ok"`
	Errors      int            `json:"errors"`
	FirstError  string         `json:"first_error,omitempty"`
	Protos      map[string]int `json:"protos"`
	P50ms       float64        `json:"p50_ms"`
	P99ms       float64        `json:"p99_ms"`
	P999ms      float64        `json:"p999_ms"`
	Maxms       float64        `json:"max_ms"`
	AchievedRPS float64        `json:"achieved_rps"`
}

func main() {
	url := flag.String("url", "https://127.0.0.1:8443/", "URL to GET")
	proto := flag.String("proto", "h3", "h3, h2 or h1 (all over TLS)")
	rate := flag.Int("rate", 1000, "requests per second")
	dur := flag.Duration("duration", 10*time.Second, "measured duration")
	warm := flag.Duration("warmup", 2*time.Second, "warm-up at the same rate, not recorded")
	conns := flag.Int("conns", 8, "client connections")
	timeout := flag.Duration("timeout", 10*time.Second, "per-request timeout")
	flag.Parse()

	tc := &tls.Config{InsecureSkipVerify: true} // the bench's self-signed certificate
	clients := make([]*http.Client, *conns)
	for i := range clients {
		var rt http.RoundTripper
		switch *proto {
		case "h3":
			rt = &http3.Transport{TLSClientConfig: tc.Clone(), QUICConfig: &quic.Config{}}
		case "h2":
			rt = &http2.Transport{TLSClientConfig: tc.Clone()}
		case "h1":
			if i == 0 {
				rt = &http.Transport{TLSClientConfig: tc.Clone(), MaxConnsPerHost: *conns,
					MaxIdleConnsPerHost: *conns, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
			} else {
				rt = clients[0].Transport
			}
		default:
			fmt.Fprintln(os.Stderr, "load: -proto must be h3, h2 or h1")
			os.Exit(2)
		}
		clients[i] = &http.Client{Transport: rt, Timeout: *timeout}
	}
	// One request per connection first (handshakes out of the way).
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := get(c, *url); err != nil {
				fmt.Fprintln(os.Stderr, "load: first request:", err)
				os.Exit(1)
			}
		}()
	}
	wg.Wait()

	run(clients, *url, *rate, *warm, nil)
	fmt.Println("measure start")
	os.Stdout.Sync()
	r := &result{Proto: *proto, Rate: *rate, Conns: *conns, Protos: map[string]int{}}
	t0 := time.Now()
	lat := run(clients, *url, *rate, *dur, r)
	r.Seconds = time.Since(t0).Seconds()
	fmt.Println("measure end")
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := int(p*float64(len(lat))+0.999999) - 1 // nearest rank
		return float64(lat[max(0, min(i, len(lat)-1))]) / 1e6
	}
	r.P50ms, r.P99ms, r.P999ms, r.Maxms = q(0.50), q(0.99), q(0.999), q(1)
	r.AchievedRPS = float64(r.Sent) / dur.Seconds()
	json.NewEncoder(os.Stdout).Encode(r)
}

// run sends rate requests per second for d, each at its due time, and
// waits for all of them. With r nil nothing is recorded. Returns the
// latencies (ns) of every request, errors included (an error counts with
// the time it took to fail).
func run(clients []*http.Client, url string, rate int, d time.Duration, r *result) []int64 {
	n := int(d.Seconds() * float64(rate))
	lat := make([]int64, n)
	var ok, errs atomic.Int64
	var mu sync.Mutex
	protos := map[string]int{}
	firstErr := ""
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(int64(i) * int64(time.Second) / int64(rate)))
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func(i int, due time.Time) {
			defer wg.Done()
			status, proto, err := get(clients[i%len(clients)], url)
			lat[i] = int64(time.Since(due))
			if err == nil && status != 200 {
				err = fmt.Errorf("status %d", status)
			}
			if err != nil {
				errs.Add(1)
			} else {
				ok.Add(1)
			}
			if r != nil {
				mu.Lock()
				if err != nil && firstErr == "" {
					firstErr = err.Error()
				}
				if err == nil {
					protos[proto]++
				}
				mu.Unlock()
			}
		}(i, due)
	}
	wg.Wait()
	if r != nil {
		r.Sent, r.OK, r.Errors, r.FirstError, r.Protos = n, int(ok.Load()), int(errs.Load()), firstErr, protos
	}
	return lat
}

func get(c *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Proto, err
}
