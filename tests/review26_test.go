package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runTS runs the binary with args and returns its output and exit status.
func runTS(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(binPath(t), args...).CombinedOutput()
	if err == nil {
		return string(out), 0
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("%v: %v", args, err)
	}
	return string(out), ee.ExitCode()
}

// Issue 26's review, as a user: ctl says why a control does nothing (one
// worker left, no certificates), names its actions, takes the admin
// address with its scheme, and does not take an app's 200 for an "ok".
func TestCtl_UserMistakes(t *testing.T) {
	s := Start(t, "--workers", "1", "wd_slow_wsgi:app")
	admin := adminAddr(s)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ctl", "remove-worker", "--admin", admin}, 1, "turnstile ctl remove-worker: refused: one worker is the least"},
		{[]string{"ctl", "reload-certs", "--admin", admin}, 1, "turnstile ctl reload-certs: refused: no --ssl-certfile"},
		{[]string{"ctl", "frobnicate", "--admin", admin}, 2, `unknown action "frobnicate": want one of add-worker, reload, reload-certs, remove-worker, requests, stacks, stop`},
		{[]string{"ctl", "--admin", admin}, 2, "want one action of add-worker, reload,"},
		{[]string{"ctl", "requests", "--admin", "http://" + admin + "/"}, 0, `"items":[]`},
		// The app's port answers 200 "done" to anything: not the admin listener.
		{[]string{"ctl", "stop", "--admin", s.Addr}, 1, "not as turnstile's admin listener does: is " + s.Addr + " the server's --admin-bind address?"},
		{[]string{"ctl", "stacks", "--admin", s.Addr}, 1, "not as turnstile's admin listener does"},
		{[]string{"top", "--once", "--admin", s.Addr}, 1, "turnstile top: " + s.Addr + " /debug/status answered 200 OK"},
		{[]string{"ctl", "stop", "--admin", "127.0.0.1:1"}, 1, "turnstile ctl stop: the server at 127.0.0.1:1 does not answer"},
	} {
		out, code := runTS(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("%v: exit %d, %q; want exit %d and one line with %q", c.args, code, out, c.code, c.want)
		}
	}
	// Nothing above stopped it: one worker still answers.
	v := topJSON(t, s)
	if v["phase"] != "running" || v["workers_desired"] != 1.0 {
		t.Errorf("after the mistakes: %v", v)
	}
	if out, code := runTS(t, "ctl", "add-worker", "--admin", admin); code != 0 || !strings.Contains(out, "ok: SIGTTIN") {
		t.Errorf("ctl add-worker: exit %d, %q", code, out)
	}
}

// A terminal smaller than the view keeps its top (the server's line, the
// workers) and the keys, and says how much is cut; it grows back.
func TestTop_TinyTerminal(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (scripts/test-deps)")
	}
	s := Start(t, "--workers", "2", "wd_slow_wsgi:app")
	session := strings.ReplaceAll("turnstile-tiny-"+time.Now().Format("150405.000"), ".", "")
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "60", "-y", "9",
		"TERM=xterm-256color "+binPath(t)+" top --admin "+adminAddr(s)+"; echo EXIT=$?; sleep 60")
	t.Cleanup(func() { exec.Command("tmux", "kill-session", "-t", session).Run() })
	waitFor := func(what string, ok func(string) bool) string {
		t.Helper()
		var screen string
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if screen = tmux("capture-pane", "-p", "-t", session); ok(screen) {
				return screen
			}
		}
		t.Fatalf("the view never showed %s:\n%s", what, screen)
		return ""
	}
	screen := waitFor("the top of the view, the cut and the keys in 9 rows", func(sc string) bool {
		return strings.HasPrefix(sc, "turnstile running") && strings.Contains(sc, "WORKER PID") &&
			strings.Contains(sc, "more lines: enlarge the terminal") && strings.Contains(sc, "q quit")
	})
	t.Logf("60x9:\n%s", screen)
	tmux("resize-window", "-t", session, "-x", "120", "-y", "32")
	waitFor("the whole view again", func(sc string) bool {
		return strings.Contains(sc, "LAST SLOW REQUESTS") && !strings.Contains(sc, "more lines")
	})
}

// An ASGI app's sync view: top shows the ts-http thread running it (not
// "loop"), ctl stacks samples it, and its slow call is among the slow
// requests with its frame.
func TestTop_ASGISyncCall(t *testing.T) {
	s := Start(t, "--workers", "1", "--slow-request-threshold", "500ms", "top_sync_slow:app")
	done := getAsync(s.URL + "/slow")
	defer func() { <-done }()
	var running, slow []any
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		w := onlyWorker(t, topJSON(t, s))
		running, _ = w["running"].([]any)
		slow, _ = w["slow_requests"].([]any)
		if len(running) == 1 && len(slow) >= 1 {
			break
		}
	}
	if len(running) != 1 || running[0].(map[string]any)["thread"] != "ts-http-0" || running[0].(map[string]any)["target"] != "/slow" {
		t.Errorf("running = %v; want /slow on ts-http-0", running)
	}
	if out, code := runTS(t, "ctl", "stacks", "--admin", adminAddr(s)); code != 0 ||
		!strings.Contains(out, `"thread":"ts-http-0"`) || !strings.Contains(out, `"target":"/slow"`) || !strings.Contains(out, "in slow_view") {
		t.Errorf("ctl stacks lacks the sync call's thread: exit %d\n%s", code, out)
	}
	if len(slow) == 0 {
		t.Fatalf("no slow_requests for the sync call")
	}
	rec := slow[0].(map[string]any)
	stack, _ := json.Marshal(rec["stack"])
	if rec["method"] != "GET" || rec["target"] != "/slow" || rec["thread"] != "ts-http-0" ||
		!strings.Contains(string(stack), "top_sync_slow.py:11 in slow_view") {
		t.Errorf("slow_requests[0] = %v", rec)
	}
	out, err := exec.Command(binPath(t), "top", "--admin", adminAddr(s), "--once", "--format", "text").Output()
	if err != nil || !strings.Contains(string(out), "GET /slow") || !strings.Contains(string(out), "in slow_view") {
		t.Errorf("top --once --format text (%v):\n%s", err, out)
	}
}

// A server still importing its app: top says its workers are starting
// (not "not answering" with no reason), and ctl's controls other than
// stop are refused until it runs.
func TestTop_WorkersStarting(t *testing.T) {
	cmd := Command(t, "--workers", "2", "sup_hangimport:app")
	cmd.Env = append(os.Environ(), "SUP_HANG_SECONDS=60")
	s, _ := startCmd(t, cmd)
	for end := time.Now().Add(10 * time.Second); s.adminURL() == "" && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
	}
	if s.adminURL() == "" {
		t.Fatalf("no admin listener:\n%s", s.Logs())
	}
	var out string
	var code int
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if out, code = runTS(t, "top", "--once", "--format", "text", "--admin", adminAddr(s)); strings.Contains(out, "workers 2/2") {
			break
		}
	}
	if code != 0 || !strings.Contains(out, "  starting  ") || strings.Count(out, "starting (not ready yet)") != 2 || strings.Contains(out, "not answering") {
		t.Errorf("top --once while importing: exit %d\n%s", code, out)
	}
	if out, code := runTS(t, "ctl", "add-worker", "--admin", adminAddr(s)); code != 1 || !strings.Contains(out, "refused: the server is starting") {
		t.Errorf("ctl add-worker while starting: exit %d, %q", code, out)
	}
}

// The help of top, ctl and version lists their own flags, not the
// server's hundred (the root's persistent flags, which check takes).
func TestCLI_SubcommandHelpOwnFlags(t *testing.T) {
	for _, args := range [][]string{{"top", "--help"}, {"ctl", "--help"}, {"version", "--help"}} {
		out, code := runTS(t, args...)
		if code != 0 || strings.Contains(out, "--backlog") || strings.Contains(out, "Global Flags") {
			t.Errorf("%v: exit %d; want its own flags only:\n%s", args, code, out)
		}
	}
	if out, _ := runTS(t, "check", "--help"); !strings.Contains(out, "--backlog") {
		t.Errorf("check --help lost the server's flags:\n%s", out)
	}
}
