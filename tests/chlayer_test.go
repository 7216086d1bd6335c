package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// channelsRedisVersion is the channels_redis whose own tests/test_core.py
// the layer must pass (requirements/test.txt pins the same).
const channelsRedisVersion = "4.3.0"

// channelsRedisTests downloads channels_redis's sdist with the virtualenv's
// pip (pip download --no-binary :all: --no-deps) once per machine and
// returns a directory holding its tests/test_core.py, unmodified.
func channelsRedisTests(t *testing.T, venv string) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "turnstile-channels-redis-"+channelsRedisVersion)
	tests := filepath.Join(dir, "tests")
	if _, err := os.Stat(filepath.Join(tests, "test_core.py")); err == nil {
		return tests
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "chr-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	pip := filepath.Join(venv, "bin", "pip")
	out, err := exec.Command(pip, "download", "-q", "--disable-pip-version-check", "--no-binary", ":all:", "--no-deps",
		"channels_redis=="+channelsRedisVersion, "-d", tmp).CombinedOutput()
	if err != nil {
		t.Skipf("cannot download channels_redis %s's sdist: %v\n%s", channelsRedisVersion, err, out)
	}
	sdist := filepath.Join(tmp, "channels_redis-"+channelsRedisVersion+".tar.gz")
	if out, err := exec.Command("tar", "-xzf", sdist, "-C", tmp).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	// Only test_core.py: the generic layer tests (the others are Sentinel
	// and pub/sub, Redis's own).
	if err := os.MkdirAll(tests, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(tmp, "channels_redis-"+channelsRedisVersion, "tests", "test_core.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tests, "test_core.py"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return tests
}

// runPytest has testapps/chlayer/conformance.py's app on s run pytest
// (GET /run?query, 5 minutes at most), logs its report and fails t unless
// pytest exited 0; it returns the report.
func runPytest(t *testing.T, s *Server, query string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Get(s.URL + "/run?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		RC     int    `json:"rc"`
		Output string `json:"output"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	t.Logf("pytest inside turnstile:\n%s", r.Output)
	if r.RC != 0 {
		t.Fatalf("pytest exit %d", r.RC)
	}
	return r.Output
}

// TestChannelLayer_ChannelsRedisConformance runs channels_redis's generic
// layer tests (tests/test_core.py of its sdist, unmodified) against
// turnstile.channels.ChannelLayer inside the server: testapps/chlayer's
// app runs pytest on a thread, its plugin puts the layer under
// RedisChannelLayer's name and skips the Redis-specific tests by name.
func TestChannelLayer_ChannelsRedisConformance(t *testing.T) {
	venv := needVenvImport(t, "import channels_redis, pytest_asyncio, async_timeout", "channels_redis, pytest-asyncio or async-timeout is not installed in the test virtualenv (requirements/test.txt)")
	tests := channelsRedisTests(t, venv)
	s := Start(t, "--app-dir", filepath.Join(AppDir(), "chlayer"), "conformance:app")
	output := runPytest(t, s, "path="+url.QueryEscape(tests))
	// Every skip is one of the plugin's named Redis-specific ones.
	for _, line := range strings.Split(output, "\n") {
		if strings.HasPrefix(line, "SKIPPED") && !strings.Contains(line, "Redis-specific") {
			t.Errorf("a skip not named by the plugin: %s", line)
		}
	}
	if m := regexp.MustCompile(`(\d+) passed`).FindStringSubmatch(output); m == nil {
		t.Errorf("no passed tests in the report")
	}
}

// TestChannelLayer_Rooms: Channels' own consumers on the layer, end to
// end. Two AsyncWebsocketConsumer and two WebsocketConsumer
// (async_to_sync(group_send)) sessions in one room and a sync Django view
// pushing to it: every member gets every message, all in one order; a
// member of another room gets none of them.
func TestChannelLayer_Rooms(t *testing.T) {
	s := Start(t, "--app-dir", filepath.Join(AppDir(), "chlayer"), "rooms_site:application")
	var conns []*websocket.Conn
	for _, p := range []string{"/ws/async/lobby/", "/ws/sync/lobby/", "/ws/async/lobby/", "/ws/sync/lobby/", "/ws/async/other/"} {
		c, _, err := wsDial(s, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	lobby, other := conns[:4], conns[4]
	// group_add runs in connect, before accept: every member is in the room.
	const per = 25
	var want int
	for round := 0; round < per; round++ {
		for i, c := range lobby {
			if err := c.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf("m%d-%d", i, round))); err != nil {
				t.Fatal(err)
			}
			want++
		}
	}
	if code, body := s.Get(t, "/push/lobby/?text=from-view"); code != 200 {
		t.Fatalf("push view: %d %s", code, body)
	}
	want++
	var orders [][]string
	for i, c := range lobby {
		var got []string
		vias := map[string]int{}
		for len(got) < want {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var m struct{ Text, Via string }
			if err := c.ReadJSON(&m); err != nil {
				t.Fatalf("member %d: after %d of %d messages: %v", i, len(got), want, err)
			}
			got = append(got, m.Text)
			vias[m.Via]++
		}
		if vias["async"] != 2*per || vias["sync"] != 2*per || vias["view"] != 1 {
			t.Errorf("member %d: messages by sender kind %v", i, vias)
		}
		orders = append(orders, got)
	}
	for i := 1; i < len(orders); i++ {
		if strings.Join(orders[i], ",") != strings.Join(orders[0], ",") {
			t.Errorf("member %d saw another order than member 0:\n%v\n%v", i, orders[i], orders[0])
		}
	}
	other.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, p, err := other.ReadMessage(); err == nil {
		t.Errorf("a member of another room got %q", p)
	}
	// /metrics and /debug/layer (through the master) show the traffic.
	if n := metricSum(t, s, "turnstile_layer_messages_delivered_total"); n < float64(4*want) {
		t.Errorf("turnstile_layer_messages_delivered_total = %v, want >= %d", n, 4*want)
	}
	if n := metricSum(t, s, "turnstile_layer_groups"); n != 2 {
		t.Errorf("turnstile_layer_groups = %v, want 2", n)
	}
	resp, err := adminClient.Get(s.adminURL() + "/debug/layer")
	if err != nil {
		t.Fatal(err)
	}
	var workers []struct {
		Groups []struct {
			Group   string `json:"group"`
			Members int    `json:"members"`
		} `json:"largest_groups"`
	}
	err = json.NewDecoder(resp.Body).Decode(&workers)
	resp.Body.Close()
	if err != nil || len(workers) != 1 || len(workers[0].Groups) == 0 || workers[0].Groups[0].Group != "lobby" || workers[0].Groups[0].Members != 4 {
		t.Errorf("/debug/layer: %+v (%v); want lobby with 4 members first", workers, err)
	}
	wsNoTracebacks(t, s)
}

// TestChannelLayer_DjustPush: djust 1.3.0rc13's push_to_view (a sync view's
// async_to_sync(group_send) to the view's group) reaches a mounted
// LiveView through turnstile's layer as a patch.
func TestChannelLayer_DjustPush(t *testing.T) {
	needVenvImport(t, "import djust", "djust is not installed in the test virtualenv (requirements/test.txt)")
	djustPush(t, "turnstile")
}

// djustPush mounts djust_site's CounterView over a WebSocket and has a
// sync view push_to_view to it (DJUST_LAYER=layer) on a server started
// with args: the LiveView must get the patch.
func djustPush(t *testing.T, layer string, args ...string) {
	t.Helper()
	cmd := Command(t, append(append([]string{}, args...), "--app-dir", filepath.Join(AppDir(), "ws_djust"), "djust_site.asgi:application")...)
	cmd.Env = append(os.Environ(), "DJUST_LAYER="+layer)
	s, listening := startCmd(t, cmd)
	WaitListening(t, s, listening, 30*time.Second)
	c, next := wsDialJSON(t, s, "/ws/live/", http.Header{"Origin": {"http://" + s.Addr}})
	defer c.Close()
	c.WriteJSON(map[string]any{"type": "mount", "view": "djust_site.views.CounterView", "params": map[string]any{}, "url": "/"})
	for m := next(); m["type"] != "mount"; m = next() {
	}
	if code, body := s.Get(t, "/push/?n=42"); code != 200 {
		t.Fatalf("push view: %d %s", code, body)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if m := next(); m["type"] == "patch" && strings.Contains(mustJSON(m["patches"]), "Count: 42") {
			if n := metricSum(t, s, "turnstile_layer_messages_sent_total"); layer == "turnstile" && n < 1 {
				t.Errorf("turnstile_layer_messages_sent_total = %v: the push did not go through turnstile's layer", n)
			}
			wsNoTracebacks(t, s)
			return
		}
	}
	t.Fatal("no patch with Count: 42 after push_to_view")
}

// TestChannelLayer_OwnTests runs testapps/chlayer/layer_tests inside the
// server with small limits: bad input (TypeError, nothing stored), the size
// and memory limits (ValueError, LayerMemoryFull), cancelled receives,
// receivers on several loops; it logs the measured cost of a call.
func TestChannelLayer_OwnTests(t *testing.T) {
	needVenvImport(t, "import channels_redis, pytest_asyncio", "channels_redis or pytest-asyncio is not installed in the test virtualenv (requirements/test.txt)")
	s := Start(t, "--app-dir", filepath.Join(AppDir(), "chlayer"), "--channel-layer-memory", "1", "--channel-layer-max-message", "65536", "conformance:app")
	runPytest(t, s, "s=1&path="+url.QueryEscape(filepath.Join(AppDir(), "chlayer", "layer_tests")))
}

// roomHello is the first frame of a testapps/chlayer/rooms_site.py session
// dialled with ?hello=1: the worker's pid, the loop thread's name and id()
// of the session's channel layer instance.
type roomHello struct {
	Hello int
	Loop  string
	Layer int64
}

// dialRoom opens a rooms_site session of kind ("async" or "sync") in room
// r on s, closed at t's cleanup, and reads its hello within 10 s.
func dialRoom(t testing.TB, s *Server, kind string, r int) (*websocket.Conn, roomHello, error) {
	var hello roomHello
	c, _, err := wsDial(s, fmt.Sprintf("/ws/%s/r%d/?hello=1", kind, r))
	if err != nil {
		return nil, hello, err
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	err = c.ReadJSON(&hello)
	return c, hello, err
}

// sendRoom sends session i's n messages to its room, "s<i>-<k>" for k
// from 0, one every 5 ms; it returns the first write's error.
func sendRoom(c *websocket.Conn, i, n int) error {
	for k := 0; k < n; k++ {
		if err := c.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf("s%d-%d", i, k))); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// TestChannelLayer_AcrossWorkers: with --workers 4 a group spans the
// workers (the master relays, internal/chlayer relay.go). Sessions of
// several rooms, spread over the workers, all send group messages at once;
// one worker is SIGKILLed in the middle of the run. Every surviving member
// of a room gets the same sequence of messages, and that sequence holds
// every message its live senders sent; of the dead worker's senders it
// holds the same prefix for every member. CHLAYER_FULL=1 runs the
// issue's size (200 sessions in 20 rooms, 10 000 group sends).
func TestChannelLayer_AcrossWorkers(t *testing.T) {
	rooms, per, sends := 4, 6, 10
	if os.Getenv("CHLAYER_FULL") != "" {
		rooms, per, sends = 20, 10, 50
	}
	s := Start(t, "--workers", "4", "--app-dir", filepath.Join(AppDir(), "chlayer"), "rooms_site:application")
	type session struct {
		c    *websocket.Conn
		room int
		pid  int
		got  []string
	}
	var sessions []*session
	pids := map[int]int{}
	for i := 0; i < rooms*per; i++ {
		c, hello, err := dialRoom(t, s, "async", i%rooms)
		if err != nil || hello.Hello == 0 {
			t.Fatalf("session %d: hello: %v %+v", i, err, hello)
		}
		sessions = append(sessions, &session{c: c, room: i % rooms, pid: hello.Hello})
		pids[hello.Hello]++
	}
	if len(pids) < 2 {
		t.Skipf("every session landed on one worker (%v): nothing crosses", pids)
	}
	t.Logf("sessions by worker pid: %v", pids)
	victim := sessions[0].pid
	start := time.Now()
	var wg sync.WaitGroup
	for i, se := range sessions {
		wg.Add(2)
		go func(i int, se *session) {
			defer wg.Done()
			_ = sendRoom(se.c, i, sends) // fails on the victim's sessions
		}(i, se)
		go func(se *session) { // reader: until 2 s without a message
			defer wg.Done()
			for {
				se.c.SetReadDeadline(time.Now().Add(2 * time.Second))
				var m struct{ Text string }
				if se.c.ReadJSON(&m) != nil {
					return
				}
				se.got = append(se.got, m.Text)
			}
		}(se)
	}
	time.Sleep(time.Duration(sends) * 5 * time.Millisecond / 2) // the middle of the run
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("%d sessions, %d rooms, %d sends each, in %v", len(sessions), rooms, sends, time.Since(start))
	seq := map[int][]string{}
	for i, se := range sessions {
		if se.pid == victim {
			continue
		}
		if prev, ok := seq[se.room]; ok {
			if strings.Join(prev, ",") != strings.Join(se.got, ",") {
				t.Errorf("room %d: session %d (pid %d) got another sequence (%d messages, first member %d)", se.room, i, se.pid, len(se.got), len(prev))
			}
			continue
		}
		seq[se.room] = se.got
	}
	for i, se := range sessions {
		if se.pid == victim {
			continue
		}
		n := 0
		for _, text := range seq[se.room] {
			if strings.HasPrefix(text, fmt.Sprintf("s%d-", i)) {
				n++
			}
		}
		if n != sends {
			t.Errorf("room %d: %d of the %d messages of live sender %d (pid %d) reached the room", se.room, n, sends, i, se.pid)
		}
	}
	if n := metricSum(t, s, "turnstile_layer_relay_frames_total"); n < float64(len(seq)*sends) {
		t.Errorf("turnstile_layer_relay_frames_total = %v: the group sends did not go through the master", n)
	}
}

// A bad --channel-layer-memory or --channel-layer-max-message exits 2 with
// one line naming it: a bad --channel-layer-memory does not also blame the
// default --channel-layer-max-message for exceeding it.
func TestChLayer_BadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--channel-layer-memory", "0"}, {"--channel-layer-memory", "-1"}, {"--channel-layer-memory", "x"},
		{"--channel-layer-max-message", "0"}, {"--channel-layer-max-message", "x"},
		{"--channel-layer-memory", "1", "--channel-layer-max-message", "2097152"},
	} {
		cmd := Command(t, append(args, "conformance:app")...)
		out, _ := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		want := args[len(args)-2]
		if cmd.ProcessState.ExitCode() != 2 || len(lines) != 1 || !strings.Contains(lines[0], want) {
			t.Errorf("%v: exit %d, output %q; want exit 2 and one line naming %s", args, cmd.ProcessState.ExitCode(), out, want)
		}
	}
}
