package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The channel layer's fan-out to sockets (ChannelLayer.group_send_frames,
// internal/chlayer frames.go, internal/asgi fanout.go):
// testapps/chlayer/fanout_site.py.

// fanDial opens a session of fanout_site's TickRoom; deflate offers
// permessage-deflate and checks the server took it.
func fanDial(t *testing.T, s *Server, path string, deflate bool) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, EnableCompression: deflate}
	c, resp, err := d.Dial(wsURL(s, path), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	ext := resp.Header.Get("Sec-Websocket-Extensions")
	if deflate != strings.Contains(ext, "permessage-deflate") {
		t.Fatalf("%s: deflate offered %v, Sec-WebSocket-Extensions %q", path, deflate, ext)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tickText is fanout_site's tick_text.
func tickText(i int) string {
	s := fmt.Sprintf("t%d", i)
	if i%3 == 0 {
		s += strings.Repeat("x", 200)
	}
	return s
}

// fanRead reads n messages from c, each within 10 s.
func fanRead(t *testing.T, c *websocket.Conn, who string, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		typ, p, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("%s: after %d of %d messages: %v", who, len(got), n, err)
		}
		if typ == websocket.BinaryMessage {
			got = append(got, "bin:"+string(p))
		} else {
			got = append(got, string(p))
		}
	}
	return got
}

// TestChannelLayer_FanOut: an AsyncWebsocketConsumer room whose ticks go
// out by group_send_frames. Every member, plain or with permessage-deflate,
// gets every frame, in order, and no consumer handler runs for them; an
// ended session whose channel stays in the group is skipped; a consumer's
// own send made before a fan-out reaches its socket before that frame; the
// sync form (send_frames) and async_to_sync(group_send_frames) from a sync
// view; bad input raises in the caller.
func TestChannelLayer_FanOut(t *testing.T) {
	s := Start(t, "--app-dir", filepath.Join(AppDir(), "chlayer"), "fanout_site:application")
	members := []*websocket.Conn{
		fanDial(t, s, "/ws/tick/lobby/", false),
		fanDial(t, s, "/ws/tick/lobby/", false),
		fanDial(t, s, "/ws/tick/lobby/", true),
	}
	names := []string{"plain 0", "plain 1", "deflate"}
	other := fanDial(t, s, "/ws/tick/other/", false)
	gone := fanDial(t, s, "/ws/tick/lobby/?keep=1", false)
	gone.Close() // its channel stays in lobby (?keep=1); its session ends
	deadline := time.Now().Add(10 * time.Second)
	for metricSum(t, s, "turnstile_layer_sockets") != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("turnstile_layer_sockets = %v, want 4 once a session ended", metricSum(t, s, "turnstile_layer_sockets"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	send := func(c *websocket.Conn, cmd string) {
		t.Helper()
		if err := c.WriteMessage(websocket.TextMessage, []byte(cmd)); err != nil {
			t.Fatal(err)
		}
	}

	// Ticks, text then binary.
	const ticks, bins = 200, 50
	send(members[0], fmt.Sprintf("tick %d", ticks))
	send(members[1], fmt.Sprintf("bin %d", bins))
	for i, c := range members {
		got := fanRead(t, c, names[i], ticks+bins)
		nt, nb := 0, 0
		for _, m := range got {
			if strings.HasPrefix(m, "bin:") {
				if want := fmt.Sprintf("bin:b%d", nb); m != want {
					t.Fatalf("%s: binary frame %d is %.40q, want %q", names[i], nb, m, want)
				}
				nb++
				continue
			}
			if want := tickText(nt); m != want {
				t.Fatalf("%s: text frame %d is %.40q, want %.40q", names[i], nt, m, want)
			}
			nt++
		}
	}

	// No handler ran for them; the Channels way runs one per member.
	count := func() int {
		t.Helper()
		send(members[0], "count")
		var r struct{ Handled *int }
		members[0].SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := members[0].ReadJSON(&r); err != nil || r.Handled == nil {
			t.Fatalf("count: %v %+v", err, r)
		}
		return *r.Handled
	}
	if n := count(); n != 0 {
		t.Errorf("consumer handlers ran %d times for fan-out frames, want 0", n)
	}
	send(members[0], "chat hi")
	for i, c := range members {
		if got := fanRead(t, c, names[i], 1); got[0] != `{"chat": "hi"}` {
			t.Errorf("%s: chat %q", names[i], got[0])
		}
	}
	if n := count(); n != len(members) {
		t.Errorf("after one group_send: %d handler calls, want %d", n, len(members))
	}

	// A consumer's own sends and its fan-outs on one socket.
	const mixed = 20
	send(members[2], fmt.Sprintf("mixed %d", mixed))
	for i, c := range members {
		n := mixed
		if i == 2 {
			n *= 2
		}
		got := fanRead(t, c, names[i], n)
		pos := map[string]int{}
		for k, m := range got {
			pos[m] = k
		}
		for k := 0; k < mixed; k++ {
			f, ok := pos[fmt.Sprintf("fan%d", k)]
			if !ok || (k > 0 && f < pos[fmt.Sprintf("fan%d", k-1)]) {
				t.Fatalf("%s: fan%d missing or out of order: %q", names[i], k, got)
			}
			if i == 2 && pos[fmt.Sprintf("own%d", k)] > f {
				t.Errorf("%s: own%d (sent before fan%d) came after it: %q", names[i], k, k, got)
			}
		}
	}

	// The sync forms, from a sync Django view.
	if code, body := s.Get(t, "/push/lobby/?n=5"); code != 200 {
		t.Fatalf("push view: %d %s", code, body)
	}
	for i, c := range members {
		if got := strings.Join(fanRead(t, c, names[i], 6), ","); got != "p0,p1,p2,p3,p4,a0" {
			t.Errorf("%s: from the view: %s", names[i], got)
		}
	}

	// Bad input raises in the caller.
	send(members[0], "bad")
	var bad struct{ Bad [][2]string }
	members[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := members[0].ReadJSON(&bad); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"both": "TypeError", "neither": "TypeError", "int text": "TypeError", "bytes text": "TypeError",
		"str bytes": "TypeError", "list bytes": "TypeError", "surrogate": "ValueError", "oversize": "ValueError",
		"bad group": "TypeError", "int group": "TypeError",
	}
	for _, r := range bad.Bad {
		if want[r[0]] != r[1] {
			t.Errorf("bad input %q: %s, want %s", r[0], r[1], want[r[0]])
		}
		delete(want, r[0])
	}
	if len(want) != 0 {
		t.Errorf("bad input cases not run: %v", want)
	}
	// Nothing of the bad calls went out, nothing to the other room.
	for i, c := range append(members[1:], other) {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, p, err := c.ReadMessage(); err == nil {
			t.Errorf("member %d got %.60q", i+1, p)
		}
	}
	if n := metricSum(t, s, "turnstile_layer_frames_queued_total"); n != float64(len(members)*(ticks+bins+mixed+6)) {
		t.Errorf("turnstile_layer_frames_queued_total = %v, want %d", n, len(members)*(ticks+bins+mixed+6))
	}
	wsNoTracebacks(t, s)
}

// TestChannelLayer_FanOutAcrossWorkers: with --workers 2 a fan-out from a
// session on one worker reaches the members on both, in one order, each
// worker writing to its own sockets (through the master, as group_send).
func TestChannelLayer_FanOutAcrossWorkers(t *testing.T) {
	s := Start(t, "--workers", "2", "--app-dir", filepath.Join(AppDir(), "chlayer"), "fanout_site:application")
	var members []*websocket.Conn
	pids := map[int]int{}
	for i := 0; i < 16 && (len(pids) < 2 || len(members) < 6); i++ {
		c := fanDial(t, s, "/ws/tick/r/?hello=1", i%2 == 1)
		var hello struct{ Hello int }
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := c.ReadJSON(&hello); err != nil || hello.Hello == 0 {
			t.Fatalf("session %d: hello: %v %+v", i, err, hello)
		}
		members = append(members, c)
		pids[hello.Hello]++
	}
	if len(pids) < 2 {
		t.Skipf("every session landed on one worker (%v): nothing crosses", pids)
	}
	t.Logf("sessions by worker pid: %v", pids)
	const ticks = 100
	if err := members[0].WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf("tick %d", ticks))); err != nil {
		t.Fatal(err)
	}
	for i, c := range members {
		got := fanRead(t, c, fmt.Sprintf("member %d", i), ticks)
		for k, m := range got {
			if m != tickText(k) {
				t.Fatalf("member %d: frame %d is %.40q, want %.40q", i, k, m, tickText(k))
			}
		}
	}
	if code, body := s.Get(t, "/push/r/?n=3"); code != 200 {
		t.Fatalf("push view: %d %s", code, body)
	}
	for i, c := range members {
		if got := strings.Join(fanRead(t, c, fmt.Sprintf("member %d", i), 4), ","); got != "p0,p1,p2,a0" {
			t.Errorf("member %d: from the view: %s", i, got)
		}
	}
	wsNoTracebacks(t, s)
}

// TestChannelLayer_FanOutCost (FANOUT_COST=1; a measurement, not a check):
// the server's CPU per delivered frame, its Go threads apart from the
// threads that run Python, for ticks
// sent by group_send_frames against the Channels way (group_send, each
// member's handler sends). One measurement on a shared machine: an
// indication. FANOUT_CLIENTS (32) members, one tick every
// 50 ms (20 frames per member per second) for FANOUT_SECONDS (8).
func TestChannelLayer_FanOutCost(t *testing.T) {
	if os.Getenv("FANOUT_COST") == "" {
		t.Skip("a measurement: FANOUT_COST=1")
	}
	clients, seconds := 32, 8
	if n, err := strconv.Atoi(os.Getenv("FANOUT_CLIENTS")); err == nil {
		clients = n
	}
	if n, err := strconv.Atoi(os.Getenv("FANOUT_SECONDS")); err == nil {
		seconds = n
	}
	for _, way := range []string{"tick", "gtick"} {
		s := Start(t, "--app-dir", filepath.Join(AppDir(), "chlayer"), "fanout_site:application")
		var conns []*websocket.Conn
		var got atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < clients; i++ {
			c := fanDial(t, s, "/ws/tick/cost/", i%2 == 1)
			conns = append(conns, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c.SetReadDeadline(time.Now().Add(2 * time.Second))
					if _, _, err := c.ReadMessage(); err != nil {
						return
					}
					got.Add(1)
				}
			}()
		}
		time.Sleep(300 * time.Millisecond)
		before := serverCPU(t, s.PID)
		start := time.Now()
		tick := time.NewTicker(50 * time.Millisecond)
		for time.Since(start) < time.Duration(seconds)*time.Second {
			<-tick.C
			if err := conns[0].WriteMessage(websocket.TextMessage, []byte(way+" 1")); err != nil {
				t.Fatal(err)
			}
		}
		tick.Stop()
		time.Sleep(500 * time.Millisecond)
		after := serverCPU(t, s.PID)
		frames := got.Load()
		wall := time.Since(start).Seconds()
		goCPU, pyCPU := after[0]-before[0], after[1]-before[1]
		t.Logf("%s: %d clients, %d frames delivered in %.1f s: Go threads %.3f s CPU (%.1f µs/frame, %.3f core), Python threads %.3f s (%.1f µs/frame, %.3f core)",
			way, clients, frames, wall, goCPU, goCPU/float64(frames)*1e6, goCPU/wall, pyCPU, pyCPU/float64(frames)*1e6, pyCPU/wall)
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
		s.Stop()
	}
}

// serverCPU returns the CPU seconds (user + system) of the server's
// process tree: [0] its Go threads, [1] the threads that run Python (named
// ts-*: the loops, the pools, the interpreter's main thread), Go called
// from Python included.
func serverCPU(t *testing.T, pid int) [2]float64 {
	t.Helper()
	pids := []int{pid}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			pids = append(pids, p)
		}
	}
	var out [2]float64
	for _, p := range pids {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", p, task.Name()))
			if err != nil {
				continue
			}
			str := string(b)
			comm := str[strings.IndexByte(str, '(')+1 : strings.LastIndexByte(str, ')')]
			f := strings.Fields(str[strings.LastIndexByte(str, ')')+2:])
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			sec := (ut + st) / 100 // USER_HZ
			if strings.HasPrefix(comm, "ts-") {
				out[1] += sec
			} else {
				out[0] += sec
			}
		}
	}
	return out
}
