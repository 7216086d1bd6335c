package tests

// Issue 20: the sync work of async apps on turnstile's pools
// (docs/design.md, "Sync work of async apps"). The app is
// testapps/pools_site.py: Django sync views using the ORM on SQLite and a
// sync Channels WebsocketConsumer on InMemoryChannelLayer; every reply
// names the OS thread that ran the sync code (ts-sess-N, ts-http-N).

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const poolsApp = "pools_site:application"

// poolsNeedChannels skips t when the test virtualenv lacks Channels.
func poolsNeedChannels(t *testing.T) {
	t.Helper()
	venv := os.Getenv("TURNSTILE_VENV")
	if venv == "" || exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import channels, django").Run() != nil {
		t.Skip("channels and Django are not installed in the test virtualenv (requirements/test.txt)")
	}
}

// poolsFrame is a reply of the Room consumer.
type poolsFrame struct {
	Kind string `json:"kind"`
	N    int    `json:"n"`
	From int    `json:"from"`
	TID  uint64 `json:"tid"`
	Comm string `json:"comm"`
}

// poolsSession is one WebSocket to /ws/room/ and the frames it read.
type poolsSession struct {
	c     *websocket.Conn
	hello poolsFrame
}

func poolsDial(t *testing.T, s *Server) *poolsSession {
	t.Helper()
	c, _, err := wsDial(s, "/ws/room/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ps := &poolsSession{c: c}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := c.ReadJSON(&ps.hello); err != nil || ps.hello.Kind != "hello" {
		t.Fatalf("first frame %+v, %v; want hello", ps.hello, err)
	}
	return ps
}

// Each session's handlers always run on one thread, different sessions on
// different threads (6 sessions over 3 threads: 2 each), events of one
// session in order; with --session-threads 0, asgiref's one thread runs
// every session (unchanged).
func TestPools_ChannelsSessionsPinned(t *testing.T) {
	poolsNeedChannels(t)
	for _, arm := range []struct {
		threads string
		pinned  bool
	}{{"3", true}, {"0", false}} {
		t.Run("session-threads="+arm.threads, func(t *testing.T) {
			s := Start(t, "--session-threads", arm.threads, poolsApp)
			const nsess, nmsg = 6, 50
			sess := make([]*poolsSession, nsess)
			for i := range sess {
				sess[i] = poolsDial(t, s)
			}
			var wg sync.WaitGroup
			errs := make(chan error, nsess)
			for i, ps := range sess {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- poolsExchange(ps, i, nmsg)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			perThread := map[uint64]int{}
			for _, ps := range sess {
				perThread[ps.hello.TID]++
				if arm.pinned != strings.HasPrefix(ps.hello.Comm, "ts-sess-") {
					t.Errorf("session's thread %q; pinned to ts-sess-*: %v", ps.hello.Comm, arm.pinned)
				}
			}
			if arm.pinned {
				if len(perThread) != 3 {
					t.Errorf("sessions per thread %v; want 3 threads, 2 sessions each", perThread)
				}
				for tid, n := range perThread {
					if n != 2 {
						t.Errorf("thread %d runs %d sessions; want 2", tid, n)
					}
				}
			} else if len(perThread) != 1 {
				t.Errorf("sessions per thread %v; want asgiref's one thread for all", perThread)
			}
			for _, ps := range sess {
				ps.c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""))
			}
			wsNoTracebacks(t, s)
		})
	}
}

// poolsExchange sends nmsg messages on ps (every tenth broadcast to the
// group) and reads until every echo came: each frame must come from the
// session's own thread, echoes in order, each sender's broadcasts in order.
func poolsExchange(ps *poolsSession, me, nmsg int) error {
	go func() {
		for n := range nmsg {
			ps.c.WriteJSON(map[string]any{"n": n, "broadcast": n%10 == 0, "from": me})
		}
	}()
	next := 0
	lastFrom := map[int]int{}
	ps.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for next < nmsg {
		var f poolsFrame
		if err := ps.c.ReadJSON(&f); err != nil {
			return fmt.Errorf("session %d: reading after %d echoes: %v", me, next, err)
		}
		if f.TID != ps.hello.TID {
			return fmt.Errorf("session %d: frame %+v from thread %d; its handlers ran on %d (%s)", me, f, f.TID, ps.hello.TID, ps.hello.Comm)
		}
		switch f.Kind {
		case "echo":
			if f.N != next {
				return fmt.Errorf("session %d: echo %d; want %d (in order)", me, f.N, next)
			}
			next++
		case "bcast":
			if last, ok := lastFrom[f.From]; ok && f.N <= last {
				return fmt.Errorf("session %d: broadcast %d from %d after %d", me, f.N, f.From, last)
			}
			lastFrom[f.From] = f.N
		}
	}
	return nil
}

// Django ASGI sync views with the ORM on SQLite: over 500 requests, 50 at a
// time, at most --blocking-threads distinct threads (ts-http-N) run them
// and at most that many DB connections are opened; with --blocking-threads
// 0 Django starts its own thread per request, as under uvicorn.
func TestPools_DjangoHTTPBounded(t *testing.T) {
	poolsNeedChannels(t)
	for _, arm := range []struct {
		threads string
		bounded bool
	}{{"4", true}, {"0", false}} {
		t.Run("blocking-threads="+arm.threads, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "pools.sqlite3")
			t.Setenv("POOLS_DB", db)
			s := Start(t, "--blocking-threads", arm.threads, poolsApp)
			type reply struct {
				TID  uint64 `json:"tid"`
				Comm string `json:"comm"`
				Conn uint64 `json:"conn"`
			}
			var mu sync.Mutex
			tids, conns, comms := map[uint64]bool{}, map[uint64]bool{}, map[string]bool{}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 50}, Timeout: 30 * time.Second}
			work := make(chan int)
			var wg sync.WaitGroup
			var failed sync.Once
			for range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						resp, err := client.Get(s.URL + "/orm/")
						var r reply
						if err == nil {
							err = json.NewDecoder(resp.Body).Decode(&r)
							resp.Body.Close()
							if err == nil && resp.StatusCode != 200 {
								err = fmt.Errorf("status %d", resp.StatusCode)
							}
						}
						if err != nil {
							failed.Do(func() { t.Errorf("GET /orm/: %v", err) })
							continue
						}
						mu.Lock()
						tids[r.TID], conns[r.Conn], comms[r.Comm] = true, true, true
						mu.Unlock()
					}
				}()
			}
			for i := range 500 {
				work <- i
			}
			close(work)
			wg.Wait()
			onPool := 0
			for c := range comms {
				if strings.HasPrefix(c, "ts-http-") {
					onPool++
				}
			}
			if arm.bounded {
				if len(tids) > 4 || len(conns) > 4 || onPool != len(comms) {
					t.Errorf("%d view threads %v, %d DB connections; want at most 4 ts-http-* threads and connections", len(tids), comms, len(conns))
				}
			} else if onPool != 0 {
				t.Errorf("views ran on %v; want asgiref's threads (--blocking-threads 0)", comms)
			}
			wsNoTracebacks(t, s)
		})
	}
}

// A sync handler that raises: the exception reaches the app as under
// asgiref (the consumer fails: 1011, one traceback), and the thread keeps
// serving the other session pinned to it.
func TestPools_HandlerRaises(t *testing.T) {
	poolsNeedChannels(t)
	s := Start(t, "--session-threads", "1", poolsApp)
	a, b := poolsDial(t, s), poolsDial(t, s)
	if a.hello.Comm != "ts-sess-0" || b.hello.Comm != "ts-sess-0" {
		t.Fatalf("sessions on %q and %q; want ts-sess-0", a.hello.Comm, b.hello.Comm)
	}
	a.c.WriteJSON(map[string]any{"n": 0, "raise": true})
	if code, _, err := wsCloseCode(a.c, 5*time.Second); code != 1011 {
		t.Errorf("session whose handler raised closed %d, %v; want 1011", code, err)
	}
	b.c.WriteJSON(map[string]any{"n": 7})
	var f poolsFrame
	b.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := b.c.ReadJSON(&f); err != nil || f.Kind != "echo" || f.N != 7 || f.Comm != "ts-sess-0" {
		t.Errorf("other session's reply %+v, %v; want echo 7 from ts-sess-0", f, err)
	}
	// A sync view that raises: Django answers 500 itself, as under asgiref.
	if code, _ := s.Get(t, "/raise/"); code != 500 {
		t.Errorf("GET /raise/ = %d; want 500", code)
	}
	if code, _ := s.Get(t, "/orm/"); code != 200 {
		t.Errorf("GET /orm/ after the failure = %d; want 200", code)
	}
	tracebacks := 0
	for _, rec := range logRecords(s.Logs()) {
		if strings.Contains(recordText(rec), "ValueError: boom from a sync handler") {
			tracebacks++
		}
	}
	if tracebacks != 1 {
		t.Errorf("%d records with the handler's ValueError; want 1:\n%s", tracebacks, s.Logs())
	}
}

// A pinned thread busy past --slow-request-threshold: its stack is logged
// with the sessions pinned to it and those waiting.
func TestPools_SlowSyncCall(t *testing.T) {
	poolsNeedChannels(t)
	s := Start(t, "--session-threads", "1", "--slow-request-threshold", "200ms", poolsApp)
	a, b, c := poolsDial(t, s), poolsDial(t, s), poolsDial(t, s)
	a.c.WriteJSON(map[string]any{"n": 0, "sleep": 0.8})
	time.Sleep(100 * time.Millisecond)
	b.c.WriteJSON(map[string]any{"n": 0})
	c.c.WriteJSON(map[string]any{"n": 0})
	time.Sleep(100 * time.Millisecond)
	// /debug/threads (admin) meanwhile: the thread runs a's call, 3 bound, b's and c's queued
	resp, err := adminClient.Get(s.adminURL() + "/debug/threads")
	if err != nil {
		t.Fatal(err)
	}
	threads, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`ts-sess-0  running \S+: GET /ws/room/ \(open [^)]*\); bound 3, queued 2 from 2 connections`).Match(threads) {
		t.Errorf("/debug/threads:\n%s\nwant ts-sess-0 running a call of GET /ws/room/, bound 3, queued 2 from 2 connections", threads)
	}
	if n := strings.Count(string(threads), "    bound: GET /ws/room/ (open "); n != 3 {
		t.Errorf("/debug/threads lists %d bound sessions; want 3:\n%s", n, threads)
	}
	for _, ps := range []*poolsSession{a, b, c} {
		var f poolsFrame
		ps.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := ps.c.ReadJSON(&f); err != nil || f.Kind != "echo" {
			t.Fatalf("reply %+v, %v; want an echo", f, err)
		}
	}
	var slow map[string]any
	for _, rec := range logRecords(s.Logs()) {
		if rec["msg"] == "slow sync call" && slow == nil {
			slow = rec
		}
	}
	if slow == nil {
		t.Fatalf("no slow sync call record:\n%s", s.Logs())
	}
	stack, _ := slow["stack"].(string)
	conn, _ := slow["conn"].(string)
	if slow["thread"] != "ts-sess-0" || slow["pinned"] != 3.0 || slow["waiting_conns"] != 2.0 || !strings.Contains(stack, "pools_site.py") ||
		!strings.HasPrefix(conn, "GET /ws/room/") {
		t.Errorf("slow sync call record %v; want ts-sess-0, pinned 3, waiting_conns 2, conn GET /ws/room/, a stack in pools_site.py", slow)
	}
}

// A session whose thread is stuck past --timeout: logged and the worker
// replaced, as a stuck WSGI request.
func TestPools_Timeout(t *testing.T) {
	poolsNeedChannels(t)
	s := Start(t, "--session-threads", "1", "--timeout", "1", "--graceful-timeout", "1", poolsApp)
	a := poolsDial(t, s)
	a.c.WriteJSON(map[string]any{"n": 0, "sleep": 30})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(s.Logs(), "sync call running past --timeout") {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(s.Logs(), "sync call running past --timeout") {
		t.Fatalf("no --timeout record for the stuck sync call:\n%s", s.Logs())
	}
	for time.Now().Before(deadline) && !strings.Contains(s.Logs(), `"msg":"worker replaced"`) {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(s.Logs(), `"msg":"worker replaced"`) {
		t.Errorf("no replacement worker after the timeout:\n%s", s.Logs())
	}
}

// Bad values exit 2 with one line; --blocking-threads 0 is refused for a
// WSGI app (it has no other threads).
func TestPools_BadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--session-threads", "-1"}, {"--session-threads", "x"}, {"--session-threads", "1.5"},
		{"--blocking-threads", "-1"}, {"--session-threads", "1025"},
	} {
		cmd := Command(t, append(args, poolsApp)...)
		out, _ := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if cmd.ProcessState.ExitCode() != 2 || len(lines) != 1 || !strings.Contains(lines[0], args[0]) {
			t.Errorf("%v: exit %d, output %q; want exit 2 and one line naming %s", args, cmd.ProcessState.ExitCode(), out, args[0])
		}
	}
	cmd := Command(t, "--blocking-threads", "0", "hello:app")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(string(out), "--blocking-threads 0: off is for ASGI apps only") {
		t.Errorf("WSGI app with --blocking-threads 0: exit %d, output %q; want refused", cmd.ProcessState.ExitCode(), out)
	}
}

// An ASGI app that never imports asgiref binds nothing and runs no call on
// the pools.
func TestPools_Untouched(t *testing.T) {
	s := Start(t, "asgi_hello:app")
	for range 20 {
		if code, _ := s.Get(t, "/"); code != 200 {
			t.Fatalf("GET / = %d", code)
		}
	}
	if n := metricValue(t, s, "turnstile_sync_calls_total"); n != 0 {
		t.Errorf("turnstile_sync_calls_total = %v; want 0 for an app without asgiref", n)
	}
}

// djust 1.3 (testapps/ws_djust; the page shows "Thread: <python name>/<OS
// name>" of the thread that mounted it): without its own pool, the page
// renders on ts-http-* and the LiveView session on ts-sess-*; with
// LIVEVIEW_CONFIG["worker_threads"] djust's own threads run the sessions
// and turnstile steps aside (one INFO line, no error); with PooledHTTP the
// page renders on djust-http-*.
func TestPools_Djust13(t *testing.T) {
	venv := os.Getenv("TURNSTILE_VENV")
	if venv == "" || exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import djust.worker_pool").Run() != nil {
		t.Skip("djust 1.3 (djust.worker_pool) is not installed in the test virtualenv (requirements/test.txt)")
	}
	for _, arm := range []struct {
		name, env, val string
		page, session  string
		stepAside      bool
	}{
		{"turnstile", "", "", "/ts-http-", "/ts-sess-", false},
		{"worker_threads=2", "DJUST_WORKER_THREADS", "2", "/ts-http-", "djust-worker-", true},
		{"PooledHTTP(threads=2)", "DJUST_POOLED_HTTP", "2", "djust-http-", "/ts-sess-", true},
	} {
		t.Run(arm.name, func(t *testing.T) {
			if arm.env != "" {
				t.Setenv(arm.env, arm.val)
			}
			s := Start(t, "--app-dir", filepath.Join(AppDir(), "ws_djust"), "djust_site.asgi:application")
			code, page := s.Get(t, "/")
			if code != 200 || !strings.Contains(page, "Thread: ") || (arm.page != "" && !strings.Contains(page, arm.page)) {
				t.Errorf("GET / = %d, %q; want the page rendered on %s", code, poolsThreadLine(page), arm.page)
			}
			c, _, err := websocket.DefaultDialer.Dial(wsURL(s, "/ws/live/"), http.Header{"Origin": {"http://" + s.Addr}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.WriteJSON(map[string]any{"type": "mount", "view": "djust_site.views.CounterView", "params": map[string]any{}, "url": "/"})
			var html string
			for deadline := time.Now().Add(5 * time.Second); html == "" && time.Now().Before(deadline); {
				var m map[string]any
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if err := c.ReadJSON(&m); err != nil {
					t.Fatalf("reading a frame: %v", err)
				}
				if m["type"] == "mount" {
					html, _ = m["html"].(string)
				}
			}
			if !strings.Contains(html, "Thread: ") || !strings.Contains(html, arm.session) {
				t.Errorf("mount frame %q; want the session mounted on %s", poolsThreadLine(html), arm.session)
			}
			c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""))
			wsCloseCode(c, 5*time.Second)
			if got := strings.Count(s.Logs(), "steps aside"); (got == 1) != arm.stepAside {
				t.Errorf("%d step-aside records; want one: %v", got, arm.stepAside)
			}
			wsNoTracebacks(t, s)
			for _, rec := range logRecords(s.Logs()) {
				if msg, _ := rec["msg"].(string); rec["level"] == "WARN" && strings.HasPrefix(msg, "turnstile:") {
					t.Errorf("warning from the binding: %s", msg)
				}
			}
		})
	}
}

func poolsThreadLine(page string) string {
	if _, after, ok := strings.Cut(page, "Thread: "); ok {
		line, _, _ := strings.Cut(after, "<")
		return line
	}
	return "(no Thread: line)"
}

// The HTTP pool's bound: with --blocking-threads 1 --queue-size 2, at most
// 3 requests are bound at once; more are answered 503 + Retry-After before
// the app runs, and the pool serves again once they end.
func TestPools_HTTPFull503(t *testing.T) {
	poolsNeedChannels(t)
	t.Setenv("POOLS_DB", filepath.Join(t.TempDir(), "pools.sqlite3"))
	s := Start(t, "--blocking-threads", "1", "--queue-size", "2", poolsApp)
	type result struct {
		code  int
		retry string
	}
	results := make(chan result, 8)
	for range 8 {
		go func() {
			resp, err := http.Get(s.URL + "/orm/?sleep=0.5")
			if err != nil {
				results <- result{code: -1}
				return
			}
			resp.Body.Close()
			results <- result{resp.StatusCode, resp.Header.Get("Retry-After")}
		}()
	}
	ok, busy := 0, 0
	for range 8 {
		r := <-results
		switch {
		case r.code == 200:
			ok++
		case r.code == 503 && r.retry == "1":
			busy++
		default:
			t.Errorf("status %d, Retry-After %q; want 200, or 503 with Retry-After: 1", r.code, r.retry)
		}
	}
	if ok != 3 || busy != 5 {
		t.Errorf("%d answered, %d 503; want 3 and 5 (1 thread + 2 queued)", ok, busy)
	}
	if code, _ := s.Get(t, "/orm/"); code != 200 {
		t.Errorf("GET /orm/ after the burst = %d; want 200", code)
	}
}

// poolsThreadNames counts the threads of process pid by name
// (/proc/<pid>/task/*/comm), the thread's number cut off: "ts-http" for
// ts-http-0..49, "ts-loop" for ts-loop-0, Go's under the binary's name.
func poolsThreadNames(pid int) map[string]int {
	names := map[string]int{}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/comm", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(b))
		if i := strings.LastIndexByte(name, '-'); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" && i+1 < len(name) {
			name = name[:i]
		}
		names[name]++
	}
	return names
}

// Overload: 400 concurrent requests to a Django sync view that sleeps 1 s.
// With --blocking-threads 50 the worker's threads, by name
// (/proc/<worker>/task/*/comm), stay the pools plus a fixed few: 50
// ts-http-N and 4 ts-sess-N (--session-threads' default), then ts-py-main,
// ts-loop-0, at most 8 ts-exec-N (--executor-threads) and Go's own threads
// (named after the binary: at most its idle count + 4); the requests wait
// as coroutines. A thread a Python thread starts inherits its starter's
// name, so a thread per request would show as more ts-loop-0 or ts-http-N.
// With 0, Django starts a thread per request (asgiref's behaviour). The RSS
// comparison with uvicorn is bench/rooms/overload.py's.
func TestPools_Overload400(t *testing.T) {
	poolsNeedChannels(t)
	for _, arm := range []struct {
		threads string
		bounded bool
	}{{"50", true}, {"0", false}} {
		t.Run("blocking-threads="+arm.threads, func(t *testing.T) {
			s := Start(t, "--blocking-threads", arm.threads, poolsApp)
			var first struct {
				PID int `json:"pid"`
			}
			getJSON(t, s, "/sleep/?s=0", &first)
			status := func(field string) int { // a number of /proc/<worker>/status
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", first.PID))
				if err != nil {
					return -1
				}
				var n int
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, field+":"); ok {
						fmt.Sscan(v, &n)
					}
				}
				return n
			}
			threads := func() int { return status("Threads") }
			idle, idleNames := threads(), poolsThreadNames(first.PID)
			stop := make(chan struct{})
			peak := make(chan int)
			var peakNames map[string]int // the names at the peak
			go func() {
				max := 0
				for {
					select {
					case <-stop:
						peak <- max
						return
					case <-time.After(50 * time.Millisecond):
						if n := threads(); n > max {
							max, peakNames = n, poolsThreadNames(first.PID)
						}
					}
				}
			}()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 400}, Timeout: 30 * time.Second}
			var wg sync.WaitGroup
			var mu sync.Mutex
			codes := map[int]int{}
			var firstErr error
			go func() { // a request not answered in 15 s: show what the threads do
				time.Sleep(15 * time.Second)
				select {
				case <-stop:
				default:
					if resp, err := adminClient.Get(s.adminURL() + "/debug/threads"); err == nil {
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						t.Logf("/debug/threads after 15 s:\n%s", b)
					}
				}
			}()
			for range 400 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code := -1
					resp, err := client.Get(s.URL + "/sleep/?s=1")
					if err == nil {
						resp.Body.Close()
						code = resp.StatusCode
					}
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					codes[code]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			close(stop)
			max := <-peak
			t.Logf("idle %d threads %v, peak %d during the burst %v; VmHWM %d kB; statuses %v",
				idle, idleNames, max, peakNames, status("VmHWM"), codes)
			if codes[200] != 400 {
				t.Errorf("statuses %v (first error: %v); want 400 × 200", codes, firstErr)
			}
			if arm.bounded {
				goIdle := idle
				for name, n := range idleNames {
					if strings.HasPrefix(name, "ts-") {
						goIdle -= n
					}
				}
				bound := 50 + 4 + 1 + 1 + 8 + goIdle + 4 // the pools, then the fixed few
				if max > bound {
					t.Errorf("peak %d threads; want at most %d: 54 in the pools, ts-py-main, ts-loop-0, 8 ts-exec, Go's %d + 4", max, bound, goIdle)
				}
				goPeak := max
				for name, n := range peakNames {
					if strings.HasPrefix(name, "ts-") {
						goPeak -= n
					}
				}
				if peakNames["ts-http"] != 50 || peakNames["ts-sess"] != 4 || peakNames["ts-loop"] != 1 ||
					peakNames["ts-py-main"] != 1 || peakNames["ts-exec"] > 8 || goPeak > goIdle+4 {
					t.Errorf("threads at the peak %v (Go's %d, idle %d); want 50 ts-http, 4 ts-sess, 1 ts-loop, 1 ts-py-main, at most 8 ts-exec, Go's at most idle + 4",
						peakNames, goPeak, goIdle)
				}
			}
			if !arm.bounded && max < idle+300 {
				t.Errorf("peak %d threads with a thread per request; want at least %d", max, idle+300)
			}
		})
	}
}
