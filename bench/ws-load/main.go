// Command ws-load is a WebSocket load client for bench/: it drives one
// running server and prints one result line (benchstat-readable) or JSON.
//
// Shapes:
//
//	echo   -conns N connections, each in a closed loop: send a -size byte
//	       text message, wait for its echo, again. Reports round trips/s
//	       and the round-trip time distribution.
//	rooms  -conns N clients in rooms of -room (4) at /room/<k>; each sends
//	       a message every -interval (400ms, first one at a random offset)
//	       and the server pushes it to every member of its room. Reports
//	       delivered messages/s and the send → receive latency
//	       distribution over every delivery.
//	ticks  -conns N clients at /ticks; the server sends each of them a
//	       -size byte text message every -interval (50ms) from a task of
//	       its connection; clients only read. Reports delivered
//	       messages/s and the server's send → receive latency.
//	bcast  as ticks at /bcast: one task of the server sends the message
//	       to every client in turn every -interval.
//	idle   connect -conns N clients and measure only memory. With
//	       -hold D, once every client is connected "connected <unix ns>"
//	       goes to stderr and the clients stay connected (and silent) D
//	       more before they close: bench/cluster/parts.py reads the
//	       balancer's CPU, memory and descriptors while they are held.
//	game   -conns N clients in rooms of -room (4) at -path<k>/ (the
//	       Channels app bench/apps/rooms_site.py); each presses a key every
//	       -interval ("k <unix ns> <dir>", first one at a random offset)
//	       and reads the app's frames: "a <ns> ..." acks its key, "t ..."
//	       is a tick of the room. Reports tick frames per client per
//	       second and the key round trip (press → ack) distribution. With
//	       -block, client 0 connects with ?block=1 (its handler stalls)
//	       and is left out of both figures.
//
// With -pid, the server's resident memory (VmRSS of the process and its
// descendants) is read before the clients connect and once they are all
// connected and idle: the difference over N is the RSS per connected
// client.
//
// The server app is bench/apps/ws_app.py (/echo and /room/<k>). ws-load is
// package main without tests: `go test ./...` only compiles it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

type result struct {
	Shape       string  `json:"shape"`
	Conns       int     `json:"conns"`
	Seconds     float64 `json:"seconds"`
	Messages    int64   `json:"messages"`
	MsgsPerSec  float64 `json:"msgs_per_sec"`
	P50ms       float64 `json:"p50_ms"`
	P95ms       float64 `json:"p95_ms"`
	P99ms       float64 `json:"p99_ms"`
	Errors      int64   `json:"errors"`
	Ticks       int64   `json:"ticks,omitempty"`
	TicksPerCS  float64 `json:"ticks_per_client_s,omitempty"`
	Keys        int64   `json:"keys,omitempty"`
	KeysLost    int64   `json:"keys_lost,omitempty"`
	RSSBaseKiB  int64   `json:"rss_base_kib"`
	RSSConnKiB  int64   `json:"rss_connected_kib"`
	RSSPerConnK float64 `json:"rss_per_conn_kib"`
}

func main() {
	url := flag.String("url", "ws://127.0.0.1:8000", "server base URL")
	shape := flag.String("shape", "echo", "echo, rooms, game or idle")
	gamePath := flag.String("path", "/ws/rooms/", "room path prefix (game)")
	block := flag.Bool("block", false, "client 0 is the blocker, ?block=1 (game)")
	conns := flag.Int("conns", 64, "connections (clients)")
	duration := flag.Duration("duration", 10*time.Second, "measured time")
	warmup := flag.Duration("warmup", time.Second, "load before measuring")
	size := flag.Int("size", 32, "message size in bytes")
	room := flag.Int("room", 4, "clients per room (rooms)")
	interval := flag.Duration("interval", 400*time.Millisecond, "send interval per client (rooms)")
	pid := flag.Int("pid", 0, "server pid, for RSS per connection")
	compress := flag.Bool("deflate", false, "offer permessage-deflate")
	asJSON := flag.Bool("json", false, "print JSON instead of a benchstat line")
	name := flag.String("name", "server", "label in the benchstat line")
	hold := flag.Duration("hold", 0, "idle: once all are connected, print \"connected <unix ns>\" to stderr and keep them this long")
	flag.Parse()
	push := *shape == "ticks" || *shape == "bcast"
	if push {
		set := false
		flag.Visit(func(f *flag.Flag) { set = set || f.Name == "interval" })
		if !set {
			*interval = 50 * time.Millisecond
		}
	}

	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, EnableCompression: *compress,
		ReadBufferSize: 4096, WriteBufferSize: 4096}
	res := result{Shape: *shape, Conns: *conns}
	if *pid > 0 {
		res.RSSBaseKiB = treeRSS(*pid)
	}

	// Connect everyone first (in parallel, bounded), then measure.
	cs := make([]*websocket.Conn, *conns)
	var wg sync.WaitGroup
	var dialErr atomic.Value
	sem := make(chan struct{}, 64)
	for i := range cs {
		path := "/echo"
		if *shape == "rooms" {
			path = "/room/" + strconv.Itoa(i / *room)
		}
		if push {
			path = fmt.Sprintf("/%s?ms=%d&size=%d", *shape, interval.Milliseconds(), *size)
		}
		if *shape == "game" {
			path = *gamePath + strconv.Itoa(i / *room) + "/"
			if *block && i == 0 {
				path += "?block=1"
			}
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, _, err := d.Dial(*url+path, nil)
			if err != nil {
				dialErr.Store(err)
				return
			}
			cs[i] = c
		}()
	}
	wg.Wait()
	if err, _ := dialErr.Load().(error); err != nil {
		fmt.Fprintln(os.Stderr, "ws-load: dial:", err)
		os.Exit(1)
	}
	if *shape == "idle" && *hold > 0 {
		fmt.Fprintf(os.Stderr, "connected %d\n", time.Now().UnixNano())
	}
	if *pid > 0 {
		time.Sleep(500 * time.Millisecond) // let the server settle
		res.RSSConnKiB = treeRSS(*pid)
		res.RSSPerConnK = float64(res.RSSConnKiB-res.RSSBaseKiB) / float64(*conns)
	}

	var lat []time.Duration
	switch *shape {
	case "echo":
		lat, res.Messages, res.Errors = echo(cs, *size, *warmup, *duration)
	case "rooms":
		lat, res.Messages, res.Errors = rooms(cs, *size, *interval, *warmup, *duration)
	case "ticks", "bcast":
		lat, res.Messages = receiveOnly(cs, *warmup, *duration)
	case "game":
		g := game(cs, *interval, *warmup, *duration, *block)
		lat, res.Errors = g.lat, g.errs
		res.Ticks, res.Keys, res.KeysLost = g.ticks, g.keys, g.lost
		res.Messages = int64(len(lat))
		if n := len(cs) - btoi(*block); n > 0 {
			res.TicksPerCS = float64(g.ticks) / float64(n) / duration.Seconds()
		}
	case "idle":
		time.Sleep(*hold)
	default:
		fmt.Fprintln(os.Stderr, "ws-load: unknown -shape", *shape)
		os.Exit(2)
	}
	for _, c := range cs {
		c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))
		c.Close()
	}
	if *shape != "idle" {
		res.Seconds = duration.Seconds()
		res.MsgsPerSec = float64(res.Messages) / duration.Seconds()
		slices.Sort(lat)
		res.P50ms, res.P95ms, res.P99ms = pct(lat, 50), pct(lat, 95), pct(lat, 99)
	}
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	// benchstat format: one line per run, name then value/unit pairs.
	fmt.Printf("BenchmarkWS/%s/%s/conns=%d 1 %.0f msgs/s %.3f p50-ms %.3f p95-ms %.3f p99-ms %.1f rss-KiB/conn %d errors\n",
		*shape, *name, *conns, res.MsgsPerSec, res.P50ms, res.P95ms, res.P99ms, res.RSSPerConnK, res.Errors)
}

func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return float64(sorted[i].Microseconds()) / 1000
}

// latencies gathers the samples of many connections' goroutines, each
// adding its own once, at its end.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(mine []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, mine...)
	l.mu.Unlock()
}

// readStamped reads c until an error (its read deadline, until, ends it)
// and returns the latency of each message stamped "<unix ns> ..." whose
// stamp falls between start and end; unstamped messages are skipped.
func readStamped(c *websocket.Conn, start, end, until time.Time) []time.Duration {
	var mine []time.Duration
	c.SetReadDeadline(until)
	for {
		_, m, err := c.ReadMessage()
		if err != nil {
			return mine
		}
		now := time.Now()
		sp := strings.IndexByte(string(m), ' ')
		if sp < 0 {
			continue
		}
		ns, err := strconv.ParseInt(string(m[:sp]), 10, 64)
		if err != nil {
			continue
		}
		if sent := time.Unix(0, ns); sent.After(start) && sent.Before(end) {
			mine = append(mine, now.Sub(sent))
		}
	}
}

// echo runs the closed loop on every connection.
func echo(cs []*websocket.Conn, size int, warmup, duration time.Duration) ([]time.Duration, int64, int64) {
	msg := []byte(strings.Repeat("x", size))
	start := time.Now().Add(warmup)
	end := start.Add(duration)
	var lat latencies
	var errs atomic.Int64
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				c.SetWriteDeadline(t0.Add(10 * time.Second))
				c.SetReadDeadline(t0.Add(10 * time.Second))
				if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
					errs.Add(1)
					break
				}
				if _, _, err := c.ReadMessage(); err != nil {
					errs.Add(1)
					break
				}
				if t0.After(start) {
					mine = append(mine, time.Since(t0))
				}
			}
			lat.add(mine)
		}()
	}
	wg.Wait()
	return lat.all, int64(len(lat.all)), errs.Load()
}

// rooms: every client sends "<unix ns> <padding>" every interval; every
// delivery's latency is measured by its receiver.
func rooms(cs []*websocket.Conn, size int, interval, warmup, duration time.Duration) ([]time.Duration, int64, int64) {
	start := time.Now().Add(warmup)
	end := start.Add(duration)
	var lat latencies
	var errs atomic.Int64
	var wg sync.WaitGroup
	pad := strings.Repeat("x", max(size-20, 0))
	for _, c := range cs {
		// receiver
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat.add(readStamped(c, start, end, end.Add(2*time.Second)))
		}()
		// sender
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.Int64N(int64(interval))))
			t := time.NewTicker(interval)
			defer t.Stop()
			for now := range t.C {
				if now.After(end) {
					return
				}
				c.SetWriteDeadline(now.Add(10 * time.Second))
				if err := c.WriteMessage(websocket.TextMessage, []byte(strconv.FormatInt(time.Now().UnixNano(), 10)+" "+pad)); err != nil {
					errs.Add(1)
					return
				}
			}
		}()
	}
	wg.Wait()
	return lat.all, int64(len(lat.all)), errs.Load()
}

// receiveOnly reads what the server pushes ("<unix ns> <padding>") and
// measures every delivery's latency from the server's send.
func receiveOnly(cs []*websocket.Conn, warmup, duration time.Duration) ([]time.Duration, int64) {
	start := time.Now().Add(warmup)
	end := start.Add(duration)
	var lat latencies
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat.add(readStamped(c, start, end, end))
		}()
	}
	wg.Wait()
	return lat.all, int64(len(lat.all))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

type gameResult struct {
	lat                     []time.Duration
	ticks, keys, lost, errs int64
}

// game: every client presses a key every interval and reads frames; a key's
// round trip is press → its ack ("a <ns> ..."); ticks ("t ...") are counted
// in the measured window. Client 0 is left out when block is set.
func game(cs []*websocket.Conn, interval, warmup, duration time.Duration, block bool) gameResult {
	start := time.Now().Add(warmup)
	end := start.Add(duration)
	// the measured window, for a driver sampling the server's CPU
	fmt.Fprintf(os.Stderr, "ws-load: window %d %d\n", start.UnixNano(), end.UnixNano())
	var mu sync.Mutex
	var r gameResult
	var wg sync.WaitGroup
	dirs := []string{"u", "r", "d", "l"}
	for ci, c := range cs {
		counted := !(block && ci == 0)
		var sent atomic.Int64 // presses sent inside the window
		wg.Add(1)
		go func() { // receiver
			defer wg.Done()
			var mine []time.Duration
			var ticks int64
			for {
				c.SetReadDeadline(end.Add(time.Second))
				_, m, err := c.ReadMessage()
				if err != nil {
					break // the deadline ends it
				}
				now := time.Now()
				if len(m) < 2 {
					continue
				}
				switch m[0] {
				case 't':
					if now.After(start) && now.Before(end) {
						ticks++
					}
				case 'a':
					rest := m[2:]
					sp := strings.IndexByte(string(rest), ' ')
					if sp < 0 {
						sp = len(rest)
					}
					ns, err := strconv.ParseInt(string(rest[:sp]), 10, 64)
					if err != nil {
						continue
					}
					at := time.Unix(0, ns)
					if at.After(start) && at.Before(end) {
						mine = append(mine, now.Sub(at))
					}
				}
			}
			if counted {
				mu.Lock()
				r.lat = append(r.lat, mine...)
				r.ticks += ticks
				r.keys += sent.Load()
				r.lost += sent.Load() - int64(len(mine))
				mu.Unlock()
			}
		}()
		wg.Add(1)
		go func() { // sender
			defer wg.Done()
			time.Sleep(time.Duration(rand.Int64N(int64(interval))))
			t := time.NewTicker(interval)
			defer t.Stop()
			for i := 0; ; i++ {
				now := <-t.C
				if now.After(end) {
					return
				}
				ts := time.Now()
				c.SetWriteDeadline(ts.Add(10 * time.Second))
				if err := c.WriteMessage(websocket.TextMessage, []byte("k "+strconv.FormatInt(ts.UnixNano(), 10)+" "+dirs[i%4])); err != nil {
					mu.Lock()
					r.errs++
					mu.Unlock()
					return
				}
				if ts.After(start) && ts.Before(end) {
					sent.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return r
}

// treeRSS sums VmRSS (KiB) over pid and its descendants.
func treeRSS(pid int) int64 {
	total := int64(0)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				total += kb
			}
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		kids, _ := os.ReadFile(f)
		for _, k := range strings.Fields(string(kids)) {
			if kp, err := strconv.Atoi(k); err == nil {
				total += treeRSS(kp)
			}
		}
	}
	return total
}
