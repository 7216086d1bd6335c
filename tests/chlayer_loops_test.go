package tests

// The Channels layer across several event loops of a worker (issue 22's
// --loops meets issue 21's layer): testapps/chlayer/rooms_site.py's rooms,
// with AsyncWebsocketConsumer and WebsocketConsumer (async_to_sync) sessions
// spread over the loops, on turnstile.channels.ChannelLayer and on djust
// 1.3.0rc13's MultiLoopInMemoryChannelLayer.

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestChannelLayer_Loops: rooms whose members sit on every loop (and, with
// --workers 2, on both workers) all send group messages at once, from async
// and sync consumers. Sessions spread over the loops; every member of a
// room gets every message of the room, in one order for all members and
// each sender's messages in the order sent; an async member's handler runs
// on its own loop; and nothing is logged as an error. The sessions turn
// their loop's asyncio debug mode on (ROOMS_ASYNCIO_DEBUG), so a receive
// future resolved from another loop's thread would fail with asyncio's
// "Non-thread-safe operation" error instead of passing unseen. Then
// SIGTERM with every session open: each gets 1012 and the server exits 0.
func TestChannelLayer_Loops(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		layer string // ROOMS_LAYER
	}{
		{"turnstile_loops4", []string{"--loops", "4"}, ""},
		// One loop: the SIGTERM part (a consumer's disconnect awaiting
		// sync calls after the stop event) does not depend on the loops.
		{"turnstile_loops1", []string{"--loops", "1"}, ""},
		{"turnstile_workers2_loops2", []string{"--workers", "2", "--loops", "2"}, ""},
		{"djust_loops4", []string{"--loops", "4"}, "djust"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.layer == "djust" {
				needVenvImport(t, "import djust.layers", "djust is not installed in the test virtualenv (requirements/test.txt)")
			}
			t.Setenv("ROOMS_LAYER", tc.layer)
			t.Setenv("ROOMS_ASYNCIO_DEBUG", "1")
			testLayerLoops(t, tc.args, tc.layer)
		})
	}
}

func testLayerLoops(t *testing.T, args []string, layer string) {
	const rooms, per, sends = 3, 8, 10
	loops, workers := 0, 1
	for i, a := range args {
		switch a {
		case "--loops":
			fmt.Sscan(args[i+1], &loops)
		case "--workers":
			fmt.Sscan(args[i+1], &workers)
		}
	}
	s := Start(t, append(append([]string{}, args...), "--app-dir", filepath.Join(AppDir(), "chlayer"), "rooms_site:application")...)
	type session struct {
		c     *websocket.Conn
		room  int
		kind  string // async, sync
		pid   int
		loop  string
		layer int64 // id() of its channel layer instance
		got   []string
		on    map[string]int // the threads its handler ran on (async)
	}
	// Dialled all at once, as clients reconnect after a restart: the
	// first sessions of every loop start together (and so make the
	// layer's first instance together, see the README).
	sessions := make([]*session, rooms*per)
	// In batches of 4 a little apart, so that with --workers the master's
	// workers all get a turn to accept.
	concurrently(t, rooms*per, func(i int) error {
		time.Sleep(time.Duration(i/4) * 30 * time.Millisecond)
		kind := []string{"async", "sync"}[i/rooms%2]
		c, hello, err := dialRoom(t, s, kind, i%rooms)
		if err != nil || hello.Hello == 0 || !strings.HasPrefix(hello.Loop, "ts-loop-") {
			return fmt.Errorf("session %d (%s): hello: %v %+v", i, kind, err, hello)
		}
		sessions[i] = &session{c: c, room: i % rooms, kind: kind, pid: hello.Hello, loop: hello.Loop, layer: hello.Layer, on: map[string]int{}}
		return nil
	})
	if t.Failed() {
		t.FailNow()
	}
	perWorker := map[int]map[string]int{} // pid → loop → sessions
	for _, se := range sessions {
		if perWorker[se.pid] == nil {
			perWorker[se.pid] = map[string]int{}
		}
		perWorker[se.pid][se.loop]++
	}
	layers := map[int]map[int64]int{}
	for _, se := range sessions {
		if layers[se.pid] == nil {
			layers[se.pid] = map[int64]int{}
		}
		layers[se.pid][se.layer]++
	}
	t.Logf("sessions by worker pid and loop: %v; by layer instance: %v", perWorker, layers)
	if workers > 1 && len(perWorker) < 2 {
		t.Errorf("every session landed on one worker of %d: nothing crosses workers", workers)
	}
	// djust's layer holds its messages in the instance: two instances in
	// one worker would not see each other's messages (rooms_site makes it
	// at import). turnstile's layer is made lazily, and the first sessions
	// of the loops, starting together, may each make one (Channels' manager
	// checks, then builds, and the build crosses into Go without the GIL):
	// they share the worker's Go store, so the rooms still hold.
	for pid, ids := range layers {
		if layer == "djust" && len(ids) != 1 {
			t.Errorf("worker %d: the sessions use %d instances of djust's layer %v; want one", pid, len(ids), ids)
		}
	}
	// Spread: a worker with at least as many sessions as loops serves them
	// on every loop (Go gives a new connection the loop with the fewest in
	// flight, and these sessions stay open).
	for pid, byLoop := range perWorker {
		n := 0
		for _, k := range byLoop {
			n += k
		}
		if n >= loops && len(byLoop) != loops {
			t.Errorf("worker %d: %d sessions on %d loop(s) %v; want every one of %d loops", pid, n, len(byLoop), byLoop, loops)
		}
	}
	// Every room has members on several loops (when there are), of both kinds.
	for r := 0; r < rooms; r++ {
		where, kinds := map[string]bool{}, map[string]bool{}
		for _, se := range sessions {
			if se.room == r {
				where[fmt.Sprintf("%d/%s", se.pid, se.loop)] = true
				kinds[se.kind] = true
			}
		}
		if (loops > 1 && len(where) < 2) || len(kinds) != 2 {
			t.Fatalf("room %d: members on %v, kinds %v; want several loops and both kinds", r, where, kinds)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, se := range sessions {
		wg.Add(2)
		go func(i int, se *session) {
			defer wg.Done()
			if err := sendRoom(se.c, i, sends); err != nil {
				t.Errorf("session %d: write: %v", i, err)
			}
		}(i, se)
		go func(se *session) { // reader: every message of the room
			defer wg.Done()
			for len(se.got) < per*sends {
				se.c.SetReadDeadline(time.Now().Add(10 * time.Second))
				var m struct{ Text, Via, On string }
				if se.c.ReadJSON(&m) != nil {
					return
				}
				se.got = append(se.got, m.Text)
				if se.kind == "async" {
					se.on[m.On]++
				}
			}
		}(se)
	}
	wg.Wait()
	t.Logf("%d sessions in %d rooms, %d sends each, in %v", len(sessions), rooms, sends, time.Since(start))
	first := map[int]int{} // room → its first session
	for i, se := range sessions {
		if len(se.got) != per*sends {
			t.Errorf("session %d (%s, room %d, %d/%s): %d of the room's %d messages", i, se.kind, se.room, se.pid, se.loop, len(se.got), per*sends)
		}
		if se.kind == "async" && (len(se.on) != 1 || se.on[se.loop] == 0) {
			t.Errorf("session %d on %s: its handler ran on %v; want its own loop only", i, se.loop, se.on)
		}
		f, ok := first[se.room]
		if !ok {
			first[se.room] = i
			continue
		}
		if strings.Join(se.got, ",") != strings.Join(sessions[f].got, ",") {
			t.Errorf("room %d: session %d (%d/%s) got another order than session %d (%d/%s):\n%v\n%v",
				se.room, i, se.pid, se.loop, f, sessions[f].pid, sessions[f].loop, se.got, sessions[f].got)
		}
	}
	// Each sender's messages, all of them, in the order sent.
	for r, f := range first {
		next := map[string]int{}
		for _, text := range sessions[f].got {
			var i, k int
			if _, err := fmt.Sscanf(text, "s%d-%d", &i, &k); err != nil || sessions[i].room != r {
				t.Errorf("room %d: a message %q from outside the room", r, text)
				continue
			}
			key := fmt.Sprint(i)
			if k != next[key] {
				t.Errorf("room %d: sender %d's message %d came after %d; want the order sent", r, i, k, next[key]-1)
			}
			next[key] = k + 1
		}
	}
	var bad []string
	for _, rec := range logRecords(s.Logs()) {
		text := recordText(rec)
		for _, w := range []string{"different loop", "different event loop", "Non-thread-safe", "Task exception was never retrieved"} {
			if strings.Contains(text, w) {
				bad = append(bad, text)
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("the log names a cross-loop misuse:\n%s", strings.Join(bad, "\n"))
	}
	wsNoTracebacks(t, s)
	// SIGTERM with every session open (each consumer waiting in the
	// layer's receive on its own loop): every client gets 1012, every
	// consumer's disconnect (group_discard) runs, and the server exits 0.
	s.Signal(syscall.SIGTERM)
	concurrently(t, len(sessions), func(i int) error {
		if code, _, err := wsCloseCode(sessions[i].c, 10*time.Second); code != 1012 {
			return fmt.Errorf("session %d: close code %d (%v); want 1012", i, code, err)
		}
		return nil
	})
	if rc := s.Wait(15 * time.Second); rc != 0 {
		t.Errorf("exit status %d after SIGTERM; want 0", rc)
	}
	wsNoTracebacks(t, s)
}

// TestChannelLayer_LoopsDjustPush: djust 1.3.0rc13's push_to_view with
// --loops 4 reaches a mounted LiveView from a request on another loop (the
// LiveView's WebSocket is in flight on its loop, so Go gives the push
// request's new connection a loop with none), on turnstile's layer and on
// djust's MultiLoopInMemoryChannelLayer.
func TestChannelLayer_LoopsDjustPush(t *testing.T) {
	needVenvImport(t, "import djust", "djust is not installed in the test virtualenv (requirements/test.txt)")
	// asyncio's debug mode on every loop: a waiter woken from another
	// loop's thread fails loudly ("Non-thread-safe operation"), where
	// without it the LiveView's loop may still pick the message up on its
	// next turn: Channels' own in-memory layer passes without it, by luck,
	// and fails with it (push view: 500).
	t.Setenv("PYTHONASYNCIODEBUG", "1")
	for _, layer := range []string{"turnstile", "multiloop"} {
		t.Run(layer, func(t *testing.T) { djustPush(t, layer, "--loops", "4") })
	}
}
