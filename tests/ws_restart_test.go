package tests

// WebSockets at a stop and at a rolling restart (issue 29, "WebSockets at a
// restart"): what the client sent before the server's close frame reached
// it is delivered to the app before its websocket.disconnect (1012), and a
// rolling restart (SIGHUP) answers no new handshake with 503. App:
// testapps/ws_restart.py.

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsBlast is one client connection to /record that sends numbered text
// messages ("1", "2", ...) while it reads the echoes, until the server's
// close frame arrives.
type wsBlast struct {
	c       *websocket.Conn
	file    string       // where the app records what it received
	sent    atomic.Int64 // messages whose write returned
	echoed  atomic.Int64 // echoes read
	atClose int64        // sent when the server's close frame arrived
	code    int          // the server's close code; 0: no close frame
	err     error        // the read error when no close frame came
	done    chan struct{}
}

// wsStartBlast connects to /record. The sender writes as fast as it can
// while fewer than window messages await their echo, until the close
// frame arrives or total messages are sent (0: no limit): a window keeps
// messages in flight at any moment, without filling the socket buffers.
func wsStartBlast(t *testing.T, s *Server, file string, window, total int64) *wsBlast {
	t.Helper()
	c, _, err := wsDial(s, "/record?file="+url.QueryEscape(file))
	if err != nil {
		t.Fatalf("dial /record: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	b := &wsBlast{c: c, file: file, done: make(chan struct{})}
	var closed atomic.Bool
	go func() {
		for n := int64(1); !closed.Load() && (total == 0 || n <= total); n++ {
			for n-b.echoed.Load() > window && !closed.Load() {
				time.Sleep(100 * time.Microsecond)
			}
			if c.WriteMessage(websocket.TextMessage, []byte(strconv.FormatInt(n, 10))) != nil {
				return // ErrCloseSent once gorilla answered the server's close
			}
			b.sent.Store(n)
		}
	}()
	go func() {
		defer close(b.done)
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		for {
			_, _, err := c.ReadMessage()
			if err == nil {
				b.echoed.Add(1)
				continue
			}
			b.atClose = b.sent.Load()
			closed.Store(true)
			if ce, ok := err.(*websocket.CloseError); ok && ce.Code != websocket.CloseAbnormalClosure {
				b.code = ce.Code
			} else {
				b.err = err
			}
			return
		}
	}()
	return b
}

// check waits up to d for the app's "disconnect" line and returns how many
// of the messages sent before the close frame arrived the app did not
// record; anything else wrong (a gap, a duplicate, a close code other than
// 1012) is reported through t.
func (b *wsBlast) check(t *testing.T, d time.Duration) (lost int64) {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(d):
		t.Fatalf("no close frame within %v (%d sent)", d, b.sent.Load())
	}
	if b.code != websocket.CloseServiceRestart {
		t.Errorf("client: close code %d (%v); want 1012", b.code, b.err)
	}
	var lines []string
	deadline := time.Now().Add(d)
	for {
		data, _ := os.ReadFile(b.file)
		lines = strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if strings.HasPrefix(lines[len(lines)-1], "disconnect ") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	last := lines[len(lines)-1]
	if last != "disconnect 1012" {
		t.Errorf("app: last record %q; want \"disconnect 1012\"", last)
	} else {
		lines = lines[:len(lines)-1]
	}
	got := int64(0)
	for _, l := range lines {
		if l == "" {
			continue
		}
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n != got+1 {
			t.Errorf("app: record %q after %d; want %d (in order, no gap)", l, got, got+1)
			break
		}
		got = n
	}
	if got < b.atClose {
		lost = b.atClose - got
	}
	return lost
}

// A single server stopped (SIGTERM) right after a client wrote 2 000
// messages as fast as it could: the app receives every one of them, then
// websocket.disconnect with 1012; the client gets a close frame with 1012.
func TestWSRestart_SIGTERMDeliversRead(t *testing.T) {
	s := Start(t, "--graceful-timeout", "10s", "ws_restart:app")
	const n = 2000
	b := wsStartBlast(t, s, t.TempDir()+"/rec", n, n)
	deadline := time.Now().Add(10 * time.Second)
	for b.sent.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.Signal(syscall.SIGTERM)
	if rc := s.Wait(15 * time.Second); rc != 0 {
		t.Errorf("exit status %d; want 0", rc)
	}
	lost := b.check(t, 5*time.Second)
	t.Logf("%d sent before the close frame came, %d of them lost", b.atClose, lost)
	if b.atClose != n || lost != 0 {
		t.Errorf("%d of %d messages the client sent before the server's close frame never reached the app; want 0", lost, b.atClose)
	}
}

// SIGHUP with --workers 2, three times, while four clients per round send
// messages as fast as they can with up to 300 awaiting their echo: each
// connection ends with 1012 when its worker is replaced, and its app
// received every message sent before the close frame arrived.
func TestWSRestart_SIGHUPDeliversRead(t *testing.T) {
	s := Start(t, "--workers", "2", "--graceful-timeout", "10s", "ws_restart:app")
	dir := t.TempDir()
	totalLost, totalSent := int64(0), int64(0)
	for round := 1; round <= 3; round++ {
		var conns []*wsBlast
		for i := 0; i < 4; i++ {
			conns = append(conns, wsStartBlast(t, s, fmt.Sprintf("%s/rec-%d-%d", dir, round, i), 300, 0))
		}
		time.Sleep(300 * time.Millisecond)
		s.Signal(syscall.SIGHUP)
		supWaitLog(t, s, 30*time.Second, 2*round, "worker replaced", "cause", "hup")
		lost, sent := int64(0), int64(0)
		for _, b := range conns {
			lost += b.check(t, 10*time.Second)
			sent += b.atClose
		}
		t.Logf("SIGHUP %d: %d messages lost of %d sent before the close frames came", round, lost, sent)
		totalLost += lost
		totalSent += sent
	}
	if totalLost != 0 {
		t.Errorf("3 SIGHUPs: %d of %d messages sent before the server's close frame never reached the app; want 0", totalLost, totalSent)
	}
}

// SIGHUP with --workers 2, three times, while eight clients open new
// WebSocket connections in a loop (handshake, one echo, close): no
// handshake is answered 503 or fails.
func TestWSRestart_SIGHUPHandshakes(t *testing.T) {
	s := Start(t, "--workers", "2", "ws_restart:app")
	var (
		mu                 sync.Mutex
		ok, closed1012     int
		refused            = map[int]int{}
		failed, echoFailed []string
		stop               = make(chan struct{})
		wg                 sync.WaitGroup
		dialer             = websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, resp, err := dialer.Dial(wsURL(s, "/echo"), nil)
				if err != nil {
					mu.Lock()
					if resp != nil {
						refused[resp.StatusCode]++
					} else {
						failed = append(failed, err.Error())
					}
					mu.Unlock()
					continue
				}
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				err = c.WriteMessage(websocket.TextMessage, []byte("x"))
				if err == nil {
					_, _, err = c.ReadMessage()
				}
				mu.Lock()
				if ce, is := err.(*websocket.CloseError); is && ce.Code == websocket.CloseServiceRestart {
					closed1012++ // accepted, then closed by the stop before the echo
				} else if err != nil {
					echoFailed = append(echoFailed, err.Error())
				} else {
					ok++
				}
				mu.Unlock()
				c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""), time.Now().Add(time.Second))
				c.Close()
			}
		}()
	}
	for round := 1; round <= 3; round++ {
		time.Sleep(500 * time.Millisecond)
		s.Signal(syscall.SIGHUP)
		supWaitLog(t, s, 30*time.Second, 2*round, "worker replaced", "cause", "hup")
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	n503 := refused[503]
	t.Logf("3 SIGHUPs: %d handshakes echoed, %d accepted then closed with 1012, %d answered 503, other refusals %v, %d failed, %d echoes failed",
		ok, closed1012, n503, refused, len(failed), len(echoFailed))
	if len(refused) > 0 || len(failed) > 0 {
		t.Errorf("handshakes refused %v (status: count) and %d failed %q; want none", refused, len(failed), failed[:min(len(failed), 5)])
	}
	if len(echoFailed) > 0 {
		t.Errorf("%d accepted connections failed before their echo: %q", len(echoFailed), echoFailed[:min(len(echoFailed), 5)])
	}
	if ok == 0 {
		t.Error("no handshake succeeded")
	}
}

// An app that only sends (never calls receive()) learns of a stop from its
// send() raising, within about a second (WS_STOP_GRACE in _asgi.py: send()
// does not raise at once at a 1012 stop, so that an app reading its way to
// the disconnect can answer what it reads), and the server exits.
func TestWSRestart_SendOnlyAppLearnsOfStop(t *testing.T) {
	s := Start(t, "--graceful-timeout", "10s", "ws_restart:app")
	file := t.TempDir() + "/push"
	c, _, err := wsDial(s, "/push?file="+url.QueryEscape(file))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, m, err := c.ReadMessage(); err != nil || string(m) != "tick" {
		t.Fatalf("first message %q, %v; want tick", m, err)
	}
	start := time.Now()
	s.Signal(syscall.SIGTERM)
	if code, _, err := wsCloseCode(c, 5*time.Second); code != websocket.CloseServiceRestart {
		t.Errorf("close %d, %v; want 1012", code, err)
	}
	for {
		if b, _ := os.ReadFile(file); string(b) == "send raised" {
			break
		}
		if time.Since(start) > 4*time.Second {
			t.Fatalf("the app's send() did not raise within 4s of SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("send() raised %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if rc := s.Wait(5 * time.Second); rc != 0 {
		t.Errorf("exit status %d within 5s of the app's end; want 0", rc)
	}
}
