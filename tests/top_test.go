package tests

// issue 26: `turnstile top` and `turnstile ctl` through the real binary,
// against live servers: a WSGI app with a slow view (wd_slow_wsgi) and an
// ASGI app whose /sleep stalls the loop (wd_block).

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// adminAddr is s.Admin without its scheme, as --admin takes it.
func adminAddr(s *Server) string { return strings.TrimPrefix(s.adminURL(), "http://") }

// topJSON runs `turnstile top --once --format json` and decodes it.
func topJSON(t *testing.T, s *Server) map[string]any {
	t.Helper()
	out, err := exec.Command(binPath(t), "top", "--admin", adminAddr(s), "--once", "--format", "json").Output()
	if err != nil {
		t.Fatalf("top --once: %v\n%s", err, out)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("top --once --format json: %v\n%s", err, out)
	}
	return v
}

// onlyWorker is the snapshot's one worker.
func onlyWorker(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	ws, _ := v["workers"].([]any)
	if len(ws) != 1 {
		t.Fatalf("workers = %v; want one", v["workers"])
	}
	return ws[0].(map[string]any)
}

func getAsync(url string) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.Get(url); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	return done
}

func TestTop_OnceWSGISlowView(t *testing.T) {
	s := Start(t, "--workers", "1", "--threads", "4", "--slow-request-threshold", "1s", "wd_slow_wsgi:app")
	done := getAsync(s.URL + "/slow")
	time.Sleep(1500 * time.Millisecond)
	v := topJSON(t, s)
	if v["phase"] != "running" || v["workers_desired"] != 1.0 || v["uptime_s"].(float64) <= 0 {
		t.Errorf("server fields: phase %v, workers_desired %v, uptime_s %v", v["phase"], v["workers_desired"], v["uptime_s"])
	}
	w := onlyWorker(t, v)
	if w["worker"] != 1.0 || w["pid"].(float64) <= 0 || w["rss_bytes"].(float64) < 1<<20 || w["ready"] != true {
		t.Errorf("worker fields: %v", w)
	}
	if w["in_flight"] != 1.0 || w["queue_depth"] != 0.0 {
		t.Errorf("in_flight %v, queue_depth %v; want 1, 0", w["in_flight"], w["queue_depth"])
	}
	th := w["threads"].(map[string]any)
	if th["total"] != 4.0 || th["running"] != 1.0 || th["idle"].(float64)+th["waiting_for_gil"].(float64) != 3 {
		t.Errorf("threads = %v; want 4 total, 1 running, 3 idle or waiting", th)
	}
	run := w["running"].([]any)
	if len(run) != 1 {
		t.Fatalf("running = %v; want the one /slow", run)
	}
	r := run[0].(map[string]any)
	if r["method"] != "GET" || r["target"] != "/slow" || !strings.HasPrefix(r["thread"].(string), "ts-py-") ||
		r["age_s"].(float64) < 1.2 || r["queued"] != false {
		t.Errorf("running[0] = %v", r)
	}
	slow := w["slow_requests"].([]any)
	if len(slow) < 1 {
		t.Fatalf("slow_requests empty after 1.5 s of a 1 s threshold: %v", w)
	}
	sr := slow[0].(map[string]any)
	if sr["target"] != "/slow" || sr["thread"] != r["thread"] || sr["age_ms"].(float64) < 1000 {
		t.Errorf("slow_requests[0] = %v", sr)
	}
	if st, _ := sr["stack"].([]any); len(st) < 2 || !strings.HasSuffix(st[0].(string), "wd_slow_wsgi.py:7 in slow_view") || strings.TrimSpace(st[1].(string)) != "time.sleep(2.5)" {
		t.Errorf("slow_requests[0].stack = %v", sr["stack"])
	}
	if l := w["loops"].([]any); len(l) != 0 {
		t.Errorf("a WSGI worker has loops: %v", l)
	}
	<-done
	w = onlyWorker(t, topJSON(t, s))
	if w["requests"] != 1.0 || w["in_flight"] != 0.0 || w["errors_5xx"] != 0.0 || w["responses_503"] != 0.0 {
		t.Errorf("after the request: requests %v in_flight %v errors_5xx %v 503 %v", w["requests"], w["in_flight"], w["errors_5xx"], w["responses_503"])
	}
}

func TestTop_OnceASGIStalledLoop(t *testing.T) {
	s := Start(t, "--workers", "1", "--lifespan", "off", "wd_block:app")
	done := getAsync(s.URL + "/sleep")
	time.Sleep(1200 * time.Millisecond)
	w := onlyWorker(t, topJSON(t, s))
	loops := w["loops"].([]any)
	if len(loops) != 1 {
		t.Fatalf("loops = %v; want one", loops)
	}
	if l := loops[0].(map[string]any); l["loop"] != 0.0 || l["stalled_now_s"].(float64) < 0.5 {
		t.Errorf("loop during the stall = %v; want loop 0 stalled for about 1 s", l)
	}
	run := w["running"].([]any)
	if len(run) != 1 || run[0].(map[string]any)["target"] != "/sleep" || run[0].(map[string]any)["thread"] != "ts-loop-0" {
		t.Errorf("running = %v; want GET /sleep on the loop (thread ts-loop-0)", run)
	}
	<-done
	time.Sleep(300 * time.Millisecond)
	w = onlyWorker(t, topJSON(t, s))
	l := w["loops"].([]any)[0].(map[string]any)
	if l["stalled_now_s"] != 0.0 || l["stalls"] != 1.0 || l["stall_seconds"].(float64) < 2.5 || l["lag_p99_s"].(float64) < 2 {
		t.Errorf("loop after the stall = %v; want 1 stall of about 3 s, not stalled now", l)
	}
	// One stall: a probe queued during it and drained at its end is not
	// a second, unseen one.
	stalls := w["stalls"].([]any)
	if len(stalls) != 1 {
		t.Fatalf("stalls = %v; want the /sleep one", stalls)
	}
	st := stalls[0].(map[string]any)
	if d := st["duration_ms"].(float64); d < 2500 || d > 4000 {
		t.Errorf("stall duration_ms = %v; want about 3000", d)
	}
	stack, _ := st["stack"].([]any)
	if len(stack) < 2 || !strings.Contains(stack[0].(string), "wd_block.py:") || !strings.HasPrefix(strings.TrimSpace(stack[1].(string)), "time.sleep(BLOCK_S)") {
		t.Errorf("stall stack = %v", stack)
	}
	// The text form names the stall's top frame.
	out, err := exec.Command(binPath(t), "top", "--admin", adminAddr(s), "--once", "--format", "text").Output()
	if err != nil || !strings.Contains(string(out), "worker 1 loop 0") || !strings.Contains(string(out), "wd_block.py:") {
		t.Errorf("top --once --format text (%v):\n%s", err, out)
	}
}

// The full-screen view in tmux: the thread running /slow, its stack on t,
// and a server that goes away (one line, exit 1).
func TestTop_ViewInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (scripts/test-deps)")
	}
	s := Start(t, "--workers", "2", "--slow-request-threshold", "1s", "wd_slow_wsgi:app")
	session := "turnstile-top-" + time.Now().Format("150405.000")
	session = strings.ReplaceAll(session, ".", "")
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "140", "-y", "45",
		"TERM=xterm-256color "+binPath(t)+" top --admin "+adminAddr(s)+"; echo EXIT=$?; sleep 60")
	t.Cleanup(func() { exec.Command("tmux", "kill-session", "-t", session).Run() })
	// One key at a time: keys that arrive together reach Bubble Tea as
	// one message (a paste), and Esc then j as alt+j.
	keys := func(ks ...string) {
		for _, k := range ks {
			tmux("send-keys", "-t", session, k)
			time.Sleep(150 * time.Millisecond)
		}
	}
	capture := func() string { return tmux("capture-pane", "-p", "-t", session) }
	waitFor := func(what string, ok func(string) bool) string {
		t.Helper()
		var screen string
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if screen = capture(); ok(screen) {
				return screen
			}
		}
		t.Fatalf("the view never showed %s:\n%s", what, screen)
		return ""
	}
	waitFor("the worker table", func(sc string) bool {
		return strings.Contains(sc, "workers 2/2") && strings.Contains(sc, "WORKER") && strings.Contains(sc, "q quit")
	})
	done := getAsync(s.URL + "/slow")
	time.Sleep(800 * time.Millisecond)
	// Sort by in flight (s: worker → rss → req/s → in flight): the worker
	// running /slow comes first and is selected; Enter, then t.
	keys("s", "s", "s")
	waitFor("the in-flight order", func(sc string) bool { return strings.Contains(sc, "sort by in flight") })
	keys("Enter", "t")
	screen := waitFor("the thread running /slow and its stack", func(sc string) bool {
		return strings.Contains(sc, "THREADS") && strings.Contains(sc, "GET     ") && strings.Contains(sc, "/slow") &&
			strings.Contains(sc, "ts-py-") && strings.Contains(sc, "wd_slow_wsgi.py:7 in slow_view") && strings.Contains(sc, "time.sleep(2.5)")
	})
	t.Logf("the view:\n%s", screen)
	waitFor("the slow request's top frame", func(sc string) bool {
		return strings.Contains(sc, "LAST SLOW REQUESTS") && strings.Contains(sc, "GET /slow") && strings.Contains(sc, "in slow_view")
	})
	// l: the last slow request's full record, every frame.
	keys("l")
	waitFor("the last slow request's full record", func(sc string) bool {
		i := strings.Index(sc, "LAST SLOW REQUEST\n")
		return i >= 0 && strings.Contains(sc[i:], "worker ") && strings.Contains(sc[i:], "GET /slow slow at") &&
			strings.Contains(sc[i:], "time.sleep(2.5)") && strings.Contains(sc[i:], "wd_slow_wsgi.py:12 in app")
	})
	keys("l")
	<-done
	// Pause, help, sort.
	keys("p", "?", "s")
	waitFor("pause, help and the next sort order", func(sc string) bool {
		return strings.Contains(sc, "PAUSED") && strings.Contains(sc, "s sort (now by queue)")
	})
	keys("p")
	waitFor("the pause lifted", func(sc string) bool { return !strings.Contains(sc, "PAUSED") })
	// A resize is drawn again at the new size.
	tmux("resize-window", "-t", session, "-x", "100", "-y", "30")
	waitFor("the view after a resize", func(sc string) bool { return strings.Contains(sc, "workers 2/2") })
	// The server goes away: one clear line, exit 1.
	s.Stop()
	screen = waitFor("the server gone", func(sc string) bool { return strings.Contains(sc, "EXIT=") })
	if !strings.Contains(screen, "turnstile top: the server at "+adminAddr(s)+" went away") || !strings.Contains(screen, "EXIT=1") {
		t.Errorf("after the server stopped:\n%s", screen)
	}
}

// ctl against a live server: add and remove a worker (TTIN/TTOU), a
// rolling restart (HUP), stacks and requests, GET refused, stop (TERM).
func TestCtl_LiveServer(t *testing.T) {
	s := Start(t, "--workers", "1", "wd_slow_wsgi:app")
	ctl := func(action string) string {
		t.Helper()
		out, err := exec.Command(binPath(t), "ctl", action, "--admin", adminAddr(s)).CombinedOutput()
		if err != nil {
			t.Fatalf("ctl %s: %v\n%s", action, err, out)
		}
		return string(out)
	}
	waitWorkers := func(n int, check func(v map[string]any) bool) map[string]any {
		t.Helper()
		var v map[string]any
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			v = topJSON(t, s)
			ws := v["workers"].([]any)
			ready := 0
			for _, w := range ws {
				if w.(map[string]any)["ready"] == true && w.(map[string]any)["error"] == nil {
					ready++
				}
			}
			if v["workers_desired"] == float64(n) && len(ws) == n && ready == n && (check == nil || check(v)) {
				return v
			}
		}
		t.Fatalf("never %d ready workers: %v", n, v)
		return nil
	}
	if out := ctl("add-worker"); !strings.Contains(out, "SIGTTIN") {
		t.Errorf("ctl add-worker: %q", out)
	}
	waitWorkers(2, nil)
	ctl("remove-worker")
	before := waitWorkers(1, nil)
	pid := onlyWorker(t, before)["pid"]
	// A server without --ssl-certfile has no certificates to re-read:
	// 409 and exit status 1 (it said "ok" while the master ignored it).
	if out, err := exec.Command(binPath(t), "ctl", "reload-certs", "--admin", adminAddr(s)).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "refused: no --ssl-certfile") {
		t.Errorf("ctl reload-certs without TLS: %v\n%s\nwant exit status 1 and the 409", err, out)
	}
	ctl("reload")
	after := waitWorkers(1, func(v map[string]any) bool {
		return v["restarts"].(map[string]any)["hup"] == 1.0 && onlyWorker(t, v)["pid"] != pid
	})
	_ = after
	done := getAsync(s.URL + "/slow")
	time.Sleep(500 * time.Millisecond)
	var reqs []map[string]any
	if err := json.Unmarshal([]byte(ctl("requests")), &reqs); err != nil || len(reqs) != 1 {
		t.Fatalf("ctl requests: %v %v", err, reqs)
	}
	if items, _ := reqs[0]["items"].([]any); len(items) != 1 || items[0].(map[string]any)["target"] != "/slow" {
		t.Errorf("ctl requests = %v", reqs)
	}
	if out := ctl("stacks"); !strings.Contains(out, "in slow_view") || !strings.Contains(out, "time.sleep(2.5)") {
		t.Errorf("ctl stacks lacks the running view's frame: %s", out)
	}
	<-done
	resp, err := http.Get(s.adminURL() + "/ctl/stop")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /ctl/stop = %d; want 405", resp.StatusCode)
	}
	ctl("stop")
	if code := s.Wait(15 * time.Second); code != 0 {
		t.Errorf("after ctl stop: exit %d; want 0", code)
	}
	if out, err := exec.Command(binPath(t), "ctl", "stop", "--admin", adminAddr(s)).CombinedOutput(); err == nil ||
		err.(*exec.ExitError).ExitCode() != 1 || !strings.Contains(string(out), "turnstile ctl stop:") {
		t.Errorf("ctl against a stopped server: %v\n%s", err, out)
	}
}

// websocket_sessions counts the open sessions of an ASGI worker.
func TestTop_OnceWebSocketSessions(t *testing.T) {
	s := Start(t, "--workers", "1", "ws_echo:app")
	var conns []interface{ Close() error }
	for i := 0; i < 2; i++ {
		c, _, err := wsDial(s, "/echo")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	waitWS := func(n float64) {
		t.Helper()
		var w map[string]any
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if w = onlyWorker(t, topJSON(t, s)); w["websocket_sessions"] == n {
				return
			}
		}
		t.Fatalf("websocket_sessions = %v; want %v", w["websocket_sessions"], n)
	}
	waitWS(2)
	for _, c := range conns {
		c.Close()
	}
	waitWS(0)
}
