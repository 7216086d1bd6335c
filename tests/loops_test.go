package tests

// Several event loops per worker (--loops, issue 22), against the real
// binary: testapps/loops_app.py answers with the loop thread that served
// it (ts-loop-N).

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// loopConn is one kept-alive HTTP/1.1 connection: the loop it is
// assigned to serves every request on it.
type loopConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialLoop(t testing.TB, s *Server) *loopConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &loopConn{c: c, br: bufio.NewReader(c)}
}

// get sends GET path on the connection and returns the status and body.
func (lc *loopConn) get(path string, timeout time.Duration) (int, string, error) {
	lc.c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(lc.c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(lc.br, nil)
	if err != nil {
		return 0, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), err
}

// mustGet is get, failing the test on an error or a status other than 200.
func (lc *loopConn) mustGet(t testing.TB, path string) string {
	t.Helper()
	code, body, err := lc.get(path, 10*time.Second)
	if err != nil || code != 200 {
		t.Fatalf("GET %s = %d %q, %v; want 200", path, code, body, err)
	}
	return body
}

// byLoop dials n connections one after another (each idle once it has its
// answer) and groups them by the loop that serves them.
func byLoop(t *testing.T, s *Server, n int) map[string][]*loopConn {
	t.Helper()
	out := map[string][]*loopConn{}
	for range n {
		lc := dialLoop(t, s)
		name := lc.mustGet(t, "/thread")
		out[name] = append(out[name], lc)
	}
	return out
}

// New connections spread over the loops, and a connection stays on its
// loop for every request it carries; the start-up line says how the loops
// share the GIL, and each loop has its series.
func TestLoops_Spread(t *testing.T) {
	s := Start(t, "--loops", "4", "loops_app:app")
	groups := byLoop(t, s, 8)
	var names []string
	for name, conns := range groups {
		names = append(names, name)
		for _, lc := range conns {
			for range 3 {
				if got := lc.mustGet(t, "/thread"); got != name {
					t.Fatalf("a connection first served by %s was then served by %s; want it to stay on its loop", name, got)
				}
			}
		}
	}
	sort.Strings(names)
	if want := []string{"ts-loop-0", "ts-loop-1", "ts-loop-2", "ts-loop-3"}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("8 connections one after another were served by %v; want every loop of %v", names, want)
	}
	// A burst of concurrent connections spreads too (the fewest in flight).
	var mu sync.Mutex
	seen := map[string]int{}
	concurrently(t, 16, func(int) error {
		lc := dialLoop(t, s)
		code, body, err := lc.get("/thread", 10*time.Second)
		if err != nil || code != 200 {
			return fmt.Errorf("GET /thread = %d, %v", code, err)
		}
		mu.Lock()
		seen[body]++
		mu.Unlock()
		return nil
	})
	if len(seen) < 2 {
		t.Errorf("16 concurrent connections went to %v; want more than one loop", seen)
	}
	recs := waitLogRecords(s.Logs, 2*time.Second, func(r map[string]any) bool { return r["msg"] == "event loops running" })
	if len(recs) == 0 {
		t.Fatal(`no "event loops running" record`)
	} else if gil, _ := recs[0]["gil"].(string); !strings.Contains(gil, "take turns holding the GIL") || recs[0]["loops"] != float64(4) {
		t.Errorf(`"event loops running" = %v; want loops 4 and the GIL said to be taken in turns`, recs[0])
	}
	_, _, page := adminMetric(t, s, "turnstile_loop_lag_seconds_count")
	for i := range 4 {
		found := false
		for _, line := range strings.Split(page, "\n") {
			if strings.HasPrefix(line, "turnstile_loop_stalls_total{") && strings.Contains(line, fmt.Sprintf(`loop="%d"`, i)) {
				found = true
			}
		}
		if !found {
			t.Errorf(`/metrics has no turnstile_loop_stalls_total with loop="%d"`, i)
		}
	}
}

// A loop blocked in time.sleep(2) gets no new connection while it is
// stalled, the other loop serves throughout, /readyz stays 200 (one loop
// of two stalled), and the stall record names its loop and connections.
// Twice: blocked in a request (the loop also has the most in flight), and
// blocked after answering (nothing in flight: only the stall keeps new
// connections away).
func TestLoops_BlockedLoop(t *testing.T) {
	for _, path := range []string{"/block", "/block-after"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) { testBlockedLoop(t, path) })
	}
}
func testBlockedLoop(t *testing.T, path string) {
	s := Start(t, "--loops", "2", "loops_app:app")
	groups := byLoop(t, s, 2)
	if len(groups) != 2 {
		t.Fatalf("2 connections one after another went to %d loop(s); want 2", len(groups))
	}
	blocker := groups["ts-loop-0"][0]
	done := make(chan error, 1)
	go func() {
		_, _, err := blocker.get(path, 10*time.Second)
		done <- err
	}()
	time.Sleep(400 * time.Millisecond) // past the 100 ms stall threshold
	end := time.Now().Add(1200 * time.Millisecond)
	n := 0
	for time.Now().Before(end) {
		t0 := time.Now()
		lc := dialLoop(t, s)
		code, body, err := lc.get("/thread", 5*time.Second)
		if err != nil || code != 200 {
			t.Fatalf("GET /thread while loop 0 blocks = %d %q, %v", code, body, err)
		}
		if body != "ts-loop-1" {
			t.Fatalf("a new connection %v after loop 0 blocked went to %s; want ts-loop-1", time.Since(t0), body)
		}
		if d := time.Since(t0); d > 500*time.Millisecond {
			t.Errorf("GET /thread on loop 1 took %v while loop 0 blocked; want it served at once", d)
		}
		c, _ := getAdmin(t, s, "/readyz")
		if c != 200 {
			t.Errorf("/readyz = %d with one loop of two stalled; want 200", c)
		}
		n++
		time.Sleep(100 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatalf("GET /block: %v", err)
	}
	t.Logf("%d connections served by loop 1 while loop 0 slept", n)
	recs := waitLogRecords(s.Logs, 3*time.Second, func(r map[string]any) bool { return r["msg"] == "event loop stalled" })
	if len(recs) == 0 {
		t.Fatal(`no "event loop stalled" record`)
	}
	conns, ok := recs[0]["connections"].(float64)
	if want := map[string]float64{"/block": 1, "/block-after": 0}[path]; recs[0]["loop"] != float64(0) || !ok || conns != want {
		t.Errorf(`"event loop stalled" = %v; want loop 0 with %v connection(s)`, recs[0], want)
	}
}

// /readyz turns 503 only when every loop of the worker is stalled.
func TestLoops_ReadyzEveryLoopStalled(t *testing.T) {
	s := Start(t, "--loops", "2", "loops_app:app")
	groups := byLoop(t, s, 2)
	if len(groups) != 2 {
		t.Fatalf("2 connections went to %d loop(s); want 2", len(groups))
	}
	go groups["ts-loop-0"][0].get("/block", 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	if c, body := getAdmin(t, s, "/readyz"); c != 200 {
		t.Errorf("/readyz with loop 0 of 2 stalled = %d %q; want 200", c, body)
	}
	go groups["ts-loop-1"][0].get("/block", 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	if c, body := getAdmin(t, s, "/readyz"); c != 503 || !strings.Contains(body, "every event loop (2) stalled") {
		t.Errorf("/readyz with both loops stalled = %d %q; want 503 saying every event loop (2) stalled", c, body)
	}
}

// getAdmin GETs path on the admin listener (the master's, which asks its
// workers).
func getAdmin(t testing.TB, s *Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.adminURL() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Lifespan runs once per loop with its own state: a loop's requests see
// the state its own startup made (an asyncio.Queue of that loop works),
// and every loop started.
func TestLoops_LifespanPerLoop(t *testing.T) {
	s := Start(t, "--loops", "3", "--lifespan", "on", "loops_app:app")
	groups := byLoop(t, s, 6)
	if len(groups) != 3 {
		t.Fatalf("6 connections went to %d loops; want 3", len(groups))
	}
	for name, conns := range groups {
		got := strings.Fields(conns[0].mustGet(t, "/state"))
		if len(got) != 4 || got[0] != name || got[1] != name || got[2] != "True" || got[3] != "ts-loop-0,ts-loop-1,ts-loop-2" {
			t.Errorf("GET /state on %s = %q; want the state made by %s's own startup, on its own loop, and all three started", name, got, name)
		}
	}
}

// SIGTERM with WebSockets on every loop: each client gets 1012, each app
// its websocket.disconnect, and each loop runs its lifespan shutdown.
func TestLoops_SIGTERMWebSockets(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	t.Setenv("LOOPS_RECORD", rec)
	s := Start(t, "--loops", "3", "--graceful-timeout", "10s", "loops_app:app")
	var conns []*websocket.Conn
	loops := map[string]int{}
	for range 6 {
		c, _, err := wsDial(s, "/ws")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, name, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		loops[string(name)]++
		conns = append(conns, c)
	}
	if len(loops) != 3 {
		t.Fatalf("6 WebSockets went to %v; want every one of 3 loops", loops)
	}
	s.Signal(syscall.SIGTERM)
	for i, c := range conns {
		if code, _, err := wsCloseCode(c, 10*time.Second); code != 1012 {
			t.Errorf("WebSocket %d: close code %d (%v); want 1012", i, code, err)
		}
	}
	if rc := s.Wait(15 * time.Second); rc != 0 {
		t.Errorf("exit status %d; want 0", rc)
	}
	b, _ := os.ReadFile(rec)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	disc, shut := map[string]int{}, map[string]int{}
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "disconnect" && f[2] == "1012":
			disc[f[1]]++
		case len(f) == 2 && f[0] == "shutdown":
			shut[f[1]]++
		}
	}
	for name, n := range loops {
		if disc[name] != n {
			t.Errorf("%s: %d websocket.disconnect 1012 delivered; want %d", name, disc[name], n)
		}
		if shut[name] != 1 {
			t.Errorf("%s: lifespan shutdown ran %d times; want once", name, shut[name])
		}
	}
	if t.Failed() {
		t.Logf("record:\n%s", b)
	}
}

// An asyncio.Lock shared by requests on two loops: the request on the
// second loop gets asyncio's own error (a 500, logged with the hint), and
// the server keeps serving on both loops.
func TestLoops_SharedAsyncioLock(t *testing.T) {
	s := Start(t, "--loops", "2", "loops_app:app")
	groups := byLoop(t, s, 4)
	a, b := groups["ts-loop-0"], groups["ts-loop-1"]
	if len(a) < 2 || len(b) < 1 {
		t.Fatalf("4 connections went to %d and %d connections on loops 0 and 1; want 2 and 2", len(a), len(b))
	}
	type res struct {
		code int
		body string
	}
	first := make(chan res, 1)
	go func() { c, body, _ := a[0].get("/lock", 10*time.Second); first <- res{c, body} }() // holds the lock 0.5 s
	time.Sleep(100 * time.Millisecond)
	second := make(chan res, 1)
	go func() { c, body, _ := a[1].get("/lock", 10*time.Second); second <- res{c, body} }() // waits on loop 0: the lock is bound to it
	time.Sleep(100 * time.Millisecond)
	code, body, err := b[0].get("/lock", 10*time.Second) // waits on loop 1: asyncio refuses
	if err != nil || code != 500 {
		t.Errorf("GET /lock on loop 1 while loop 0 holds it = %d %q, %v; want 500", code, body, err)
	}
	for _, ch := range []chan res{first, second} {
		if r := <-ch; r.code != 200 || r.body != "locked ts-loop-0" {
			t.Errorf("GET /lock on loop 0 = %d %q; want 200 locked ts-loop-0", r.code, r.body)
		}
	}
	recs := waitLogRecords(s.Logs, 2*time.Second, func(r map[string]any) bool { return r["msg"] == "asgi: app raised" })
	if len(recs) != 1 {
		t.Fatalf(`%d "asgi: app raised" records; want 1`, len(recs))
	}
	tb, _ := recs[0]["traceback"].(string)
	hint, _ := recs[0]["hint"].(string)
	if !strings.Contains(tb, "is bound to a different event loop") || !strings.Contains(hint, "--loops") {
		t.Errorf("record = %v; want asyncio's RuntimeError and the hint about --loops", recs[0])
	}
	for _, lc := range []*loopConn{a[0], b[0]} {
		lc.mustGet(t, "/thread")
	}
}

// A lifespan startup that fails on one loop (the second) fails the
// worker as a failed startup does with one loop: non-zero exit, the app's
// message naming the loop, no respawn; the loop that had started runs
// its lifespan shutdown.
func TestLoops_StartupFailsOnOneLoop(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	t.Setenv("LOOPS_RECORD", rec)
	t.Setenv("LOOPS_FAIL_ON", "ts-loop-1")
	code, _, log := startFailure(t, "--loops", "3", "loops_app:app")
	if code == 0 || code == -1 {
		t.Errorf("exit status = %d; want non-zero (an exit, not a signal)", code)
	}
	if !strings.Contains(log, "ASGI lifespan startup failed on loop 1: no database on ts-loop-1") {
		t.Errorf("log lacks the failed startup naming loop 1:\n%s", log)
	}
	if n := strings.Count(log, `"msg":"worker started"`); n > 1 {
		t.Errorf("%d worker start-ups; want 1 (no respawn loop)", n)
	}
	b, _ := os.ReadFile(rec)
	if got := strings.TrimSpace(string(b)); got != "failed ts-loop-1\nshutdown ts-loop-0" {
		t.Errorf("record = %q; want loop 1's failure, then loop 0's shutdown (loop 2 never started)", got)
	}
}

// Every stream of an HTTP/2 connection runs on the connection's loop.
func TestLoops_HTTP2ConnectionStays(t *testing.T) {
	s := Start(t, "--loops", "3", "loops_app:app")
	seen := map[string]bool{}
	for range 3 {
		cc := h2cConn(t, s.Addr)
		var mu sync.Mutex
		names := map[string]int{}
		concurrently(t, 8, func(int) error {
			req, _ := http.NewRequest("GET", s.URL+"/thread", nil)
			resp, err := cc.RoundTrip(req)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			names[string(b)]++
			mu.Unlock()
			return nil
		})
		if len(names) != 1 {
			t.Errorf("8 concurrent streams of one HTTP/2 connection ran on %v; want one loop", names)
		}
		for n := range names {
			seen[n] = true
		}
	}
	if len(seen) < 2 {
		t.Errorf("3 HTTP/2 connections one after another all went to %v; want them spread", seen)
	}
}

// The sync pools and the parked executor are the worker's: asgiref's
// thread-sensitive calls from every loop run on ts-http-N and complete on
// the loop that made them.
func TestLoops_SharedSyncPool(t *testing.T) {
	s := Start(t, "--loops", "2", "--blocking-threads", "2", "--executor-threads", "1", "loops_app:app")
	groups := byLoop(t, s, 4)
	if len(groups) != 2 {
		t.Fatalf("4 connections went to %d loops; want 2", len(groups))
	}
	for name, conns := range groups {
		var mu sync.Mutex
		concurrently(t, 4, func(i int) error {
			lc := conns[i%len(conns)]
			mu.Lock() // one request at a time per connection
			defer mu.Unlock()
			code, body, err := lc.get("/sync", 10*time.Second)
			f := strings.Fields(body)
			if err != nil || code != 200 || len(f) != 2 || f[0] != name || !strings.HasPrefix(f[1], "ts-http-") {
				return fmt.Errorf("GET /sync on %s = %d %q, %v; want it answered by %s after a call on ts-http-N", name, code, body, err, name)
			}
			return nil
		})
	}
}

// --loops outside 1..64: exit 2 with one line.
func TestLoops_BadValues(t *testing.T) {
	for _, v := range []string{"0", "-1", "65"} {
		_, stderr, code := cfRun(t, os.Environ(), "--loops", v, "loops_app:app")
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "--loops "+v+": want 1..64") {
			t.Errorf("--loops %s: exit %d, stderr %q; want exit 2 and one line naming 1..64", v, code, stderr)
		}
	}
}

// Four loops print at once (print writes a line's text and its newline as
// two writes, and the log call releases the GIL): every line is one record,
// none joined with another loop's, none lost; a line left without its
// newline is written when the worker stops.
func TestLoops_PrintLinesWhole(t *testing.T) {
	s := Start(t, "--loops", "4", "loops_print:app")
	tags := []string{"a", "b", "c", "d"}
	conns := make([]*loopConn, len(tags))
	for i := range conns {
		conns[i] = dialLoop(t, s)
	}
	concurrently(t, len(tags), func(i int) error {
		code, body, err := conns[i].get("/print?"+tags[i], 30*time.Second)
		if err != nil || code != 200 {
			return fmt.Errorf("GET /print?%s = %d %q, %v; want 200", tags[i], code, body, err)
		}
		return nil
	})
	c := dialLoop(t, s)
	c.mustGet(t, "/print?tail")
	if code := s.Stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM; want 0", code)
	}
	seen := map[string]int{}
	for _, r := range logRecords(s.Logs()) {
		if r["source"] == "python" {
			seen[r["msg"].(string)]++
		}
	}
	var bad []string
	for msg, n := range seen {
		f := strings.Fields(msg)
		if n != 1 || len(f) != 2 || (msg != "unfinished TAIL" && !strings.Contains("abcd", f[0])) {
			bad = append(bad, fmt.Sprintf("%q ×%d", msg, n))
		}
	}
	missing := 0
	for _, tag := range tags {
		for i := range 3000 {
			if seen[fmt.Sprintf("%s %d", tag, i)] == 0 {
				missing++
			}
		}
	}
	if seen["unfinished TAIL"] != 1 {
		t.Errorf(`no record "unfinished TAIL" after the stop; want the unfinished line written`)
	}
	sort.Strings(bad)
	if len(bad) > 5 {
		bad = bad[:5]
	}
	if missing > 0 || len(bad) > 0 {
		t.Errorf("4 loops printing 3000 lines each: %d lines missing, joined or repeated records %v; want each line once as its own record", missing, bad)
	}
}

// A request running on a loop names that loop's thread in /debug/requests
// and in turnstile top's RUNNING, so with several loops one sees which
// loop a slow or blocking request holds; /metrics counts it in that loop's
// turnstile_loop_connections.
func TestLoops_RunningNamesLoop(t *testing.T) {
	s := Start(t, "--loops", "2", "loops_app:app")
	groups := byLoop(t, s, 2)
	if len(groups["ts-loop-1"]) == 0 {
		t.Fatalf("2 connections went to %v; want one on ts-loop-1", groups)
	}
	done := make(chan struct{})
	go func() { groups["ts-loop-1"][0].get("/block", 10*time.Second); close(done) }()
	time.Sleep(400 * time.Millisecond)
	code, body := getAdmin(t, s, "/debug/requests")
	if code != 200 || !strings.Contains(body, `"target":"/block"`) || !strings.Contains(body, `"thread":"ts-loop-1"`) {
		t.Errorf("/debug/requests while loop 1 blocks in /block = %d %s; want /block with thread ts-loop-1", code, body)
	}
	_, metrics := getAdmin(t, s, "/metrics")
	for _, want := range []string{`turnstile_loop_connections{worker="1",loop="0"} 0`, `turnstile_loop_connections{worker="1",loop="1"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics while loop 1 blocks in /block has no %s; its loop series:\n%s", want, grepLines(metrics, "turnstile_loop_connections"))
		}
	}
	out, err := exec.Command(binPath(t), "top", "--admin", adminAddr(s), "--once", "--format", "text").Output()
	if err != nil || !regexp.MustCompile(`(?m)^1 +ts-loop-1 +GET .*/block$`).Match(out) {
		t.Errorf("turnstile top --once while loop 1 blocks in /block: %v\n%s\nwant a RUNNING row on ts-loop-1", err, out)
	}
	<-done
}

// grepLines returns the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
