package tests

// Issue 29, "the last response announces the close": a worker that drains
// (it asked to be replaced, or the master stops it) says "Connection:
// close" on every response whose head has not left yet (RFC 9112 §9.6),
// keeps its idle kept-alive connections for --timeout-keep-alive-drain so
// that a request sent on one as the drain begins is still served, and
// sends HTTP/2 connections GOAWAY before the streams it still serves
// (RFC 9113 §6.8). Apps: testapps/sup_app.py ("ok <pid>"),
// testapps/h2_wsgi.py (/slow: 2 s).

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// drainConn is a raw kept-alive HTTP/1.1 connection.
type drainConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialDrain(t *testing.T, addr string) *drainConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &drainConn{t: t, c: c, br: bufio.NewReader(c)}
}

// send writes one request without waiting for its answer.
func (d *drainConn) send(method string) error {
	req := method + " / HTTP/1.1\r\nHost: drain\r\n"
	if method == "POST" {
		req += "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
	} else {
		req += "\r\n"
	}
	_, err := io.WriteString(d.c, req)
	return err
}

// read reads one whole response: its pid ("ok <pid>"), whether it
// announced the close, or an error (EOF, reset, a short body) if it is
// lost.
func (d *drainConn) read() (pid int, closed bool, err error) {
	d.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(d.br, nil)
	if err != nil {
		return 0, false, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, false, fmt.Errorf("body: %w", err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "ok ") {
		return 0, false, fmt.Errorf("%d %q; want 200 \"ok <pid>\"", resp.StatusCode, b)
	}
	pid, _ = strconv.Atoi(strings.TrimPrefix(string(b), "ok "))
	return pid, resp.Close, nil
}

// do sends a request and reads its response.
func (d *drainConn) do(method string) (pid int, closed bool, err error) {
	if err := d.send(method); err != nil {
		return 0, false, err
	}
	return d.read()
}

// dialFreshWorker dials addr until a connection's first GET is answered
// without "Connection: close", that is by a worker that has not begun
// draining (one accepted by the old worker just before it stopped is
// answered with the close): up to 51 connections, 50 ms apart. It returns
// that connection and the pid that answered; round names the test's
// round in failures.
func dialFreshWorker(t *testing.T, addr string, round int) (*drainConn, int) {
	t.Helper()
	for try := 0; ; try++ {
		a := dialDrain(t, addr)
		pid, closed, err := a.do("GET")
		if err != nil {
			t.Fatalf("round %d: first GET on A: %v", round, err)
		}
		if !closed {
			return a, pid
		}
		if try == 50 {
			t.Fatalf("round %d: every new connection is answered with Connection: close", round)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitStopped waits for the "worker stopped" record of pid.
func waitStopped(t *testing.T, s *Server, pid int) {
	t.Helper()
	supWaitLog(t, s, 30*time.Second, 1, "worker stopped", "pid", strconv.Itoa(pid))
}

// --max-requests 2, one worker: connection A makes the worker's first
// request and stays open, idle; connection B makes the second, which
// begins the drain: its response says "Connection: close". Then A sends a
// POST, at once or after a delay that puts it before the old worker's
// stop, as it begins, or inside the lame-duck window: it gets a whole 200
// from the old worker, with "Connection: close". Never an EOF.
func TestDrain_MaxRequestsRace(t *testing.T) {
	s := Start(t, "--workers", "1", "--max-requests", "2", "sup_app:app")
	delays := []time.Duration{0, 0, 10 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond,
		300 * time.Millisecond, 600 * time.Millisecond}
	replaced := 0
	for round, delay := range delays {
		// A's first request must reach a fresh worker (one that has not
		// begun draining): a connection accepted by the old worker just
		// before it stopped is answered with "Connection: close".
		a, pidA := dialFreshWorker(t, s.Addr, round)
		b := dialDrain(t, s.Addr)
		pidB, closedB, err := b.do("GET")
		if err != nil {
			t.Fatalf("round %d: GET on B: %v", round, err)
		}
		if pidB != pidA {
			t.Fatalf("round %d: A on pid %d, B on pid %d; want one worker", round, pidA, pidB)
		}
		if !closedB {
			t.Errorf("round %d: the --max-requests-th response has no Connection: close", round)
		}
		time.Sleep(delay)
		pid, closed, err := a.do("POST")
		if err != nil {
			t.Errorf("round %d (POST %v after the last request): lost: %v", round, delay, err)
		} else {
			if pid != pidA {
				t.Errorf("round %d: POST answered by pid %d; want the old worker %d", round, pid, pidA)
			}
			if !closed {
				t.Errorf("round %d (POST %v after the last request): no Connection: close from a draining worker", round, delay)
			}
		}
		replaced++
		supWaitLog(t, s, 30*time.Second, replaced, "worker replaced", "cause", "max-requests")
		waitStopped(t, s, pidA)
	}
}

// SIGHUP (a rolling restart) with a raw client on a kept-alive connection
// that keeps sending POSTs from the signal on, with a pause from none to
// most of --timeout-keep-alive-drain: every POST gets a whole 200, until
// one says "Connection: close" (the old worker drains): the connection is
// never closed under a request.
func TestDrain_SIGHUPRace(t *testing.T) {
	s := Start(t, "--workers", "1", "sup_app:app")
	pauses := []time.Duration{0, 0, 30 * time.Millisecond, 200 * time.Millisecond, 700 * time.Millisecond}
	for round, pause := range pauses {
		a, pidA := dialFreshWorker(t, s.Addr, round)
		s.Signal(syscall.SIGHUP)
		n, start := 0, time.Now()
		for {
			pid, closed, err := a.do("POST")
			n++
			if err != nil {
				t.Fatalf("round %d (pause %v): POST %d, %v after SIGHUP, lost: %v", round, pause, n, time.Since(start), err)
			}
			if pid != pidA {
				t.Fatalf("round %d: POST answered by pid %d; want %d (same connection)", round, pid, pidA)
			}
			if closed {
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("round %d: no Connection: close 30 s after SIGHUP", round)
			}
			time.Sleep(pause)
		}
		t.Logf("round %d (pause %v): %d POSTs, the last with Connection: close %v after SIGHUP", round, pause, n, time.Since(start).Round(time.Millisecond))
		supWaitLog(t, s, 30*time.Second, round+1, "worker replaced", "cause", "hup")
		waitStopped(t, s, pidA)
	}
}

// --workers 2 --max-requests 5 and clients pausing 200 ms between POSTs on
// kept-alive connections (Go's http.Client, which does not retry a POST
// whose request was written): none fails. Before the drain announced the
// close, about one request in six met a connection its worker had closed.
func TestDrain_MaxRequestsPausingClient(t *testing.T) {
	s := Start(t, "--workers", "2", "--max-requests", "5", "sup_app:app")
	const clients, each = 2, 30
	var mu sync.Mutex
	var fails []string
	closes := 0
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 15 * time.Second}
			for i := 0; i < each; i++ {
				resp, err := client.Post(s.URL+"/", "text/plain", strings.NewReader("hello"))
				if err == nil {
					b, rerr := io.ReadAll(resp.Body)
					resp.Body.Close()
					mu.Lock()
					if rerr != nil || resp.StatusCode != 200 || !bytes.HasPrefix(b, []byte("ok ")) {
						fails = append(fails, fmt.Sprintf("%d %q %v", resp.StatusCode, b, rerr))
					} else if resp.Close {
						closes++
					}
					mu.Unlock()
				} else {
					mu.Lock()
					fails = append(fails, err.Error())
					mu.Unlock()
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	replaced := supCount(s.Logs(), "worker replaced", "cause", "max-requests")
	t.Logf("%d POSTs, %d failed, %d answered with Connection: close, %d workers replaced", clients*each, len(fails), closes, replaced)
	if len(fails) > 0 {
		t.Errorf("%d of %d POSTs failed; want none: %q", len(fails), clients*each, fails[:min(len(fails), 5)])
	}
	if replaced < 3 {
		t.Errorf("%d workers replaced for max-requests; want several", replaced)
	}
	if closes == 0 {
		t.Errorf("no response said Connection: close; want the last one of each replaced worker to")
	}
}

// HTTP/2 (h2c): a drain sends GOAWAY (NO_ERROR) whose last-stream id is
// the stream in flight, before that stream's response, and the stream is
// still served to its end. Drained by --max-requests (the slow request is
// the worker's last) and by SIGTERM.
func TestDrain_HTTP2GoAwayFirst(t *testing.T) {
	for _, mode := range []string{"max-requests", "sigterm"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"--workers", "1", "h2_wsgi:app"}
			if mode == "max-requests" {
				args = append([]string{"--max-requests", "2"}, args...)
			}
			s := Start(t, args...)
			c, err := net.DialTimeout("tcp", s.Addr, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, http2.ClientPreface)
			fr := http2.NewFramer(c, c)
			fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			if err := fr.WriteSettings(); err != nil {
				t.Fatal(err)
			}
			var hb bytes.Buffer
			enc := hpack.NewEncoder(&hb)
			get := func(id uint32, path string) {
				hb.Reset()
				for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "drain"}, {":path", path}} {
					enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
				}
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
					t.Fatal(err)
				}
			}
			// events lists, in order, what the server sent: "goaway:<last>",
			// "headers:<id>:<status>", "end:<id>".
			var events []string
			readUntil := func(done func() bool) {
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				for !done() {
					f, err := fr.ReadFrame()
					if err != nil {
						t.Fatalf("reading frames: %v; so far %v", err, events)
					}
					switch f := f.(type) {
					case *http2.SettingsFrame:
						if !f.IsAck() {
							fr.WriteSettingsAck()
						}
					case *http2.PingFrame:
						if !f.IsAck() {
							fr.WritePing(true, f.Data)
						}
					case *http2.GoAwayFrame:
						if f.ErrCode != http2.ErrCodeNo {
							t.Errorf("GOAWAY with %v; want NO_ERROR", f.ErrCode)
						}
						events = append(events, fmt.Sprintf("goaway:%d", f.LastStreamID))
					case *http2.MetaHeadersFrame:
						events = append(events, fmt.Sprintf("headers:%d:%s", f.StreamID, f.PseudoValue("status")))
						if f.StreamEnded() {
							events = append(events, fmt.Sprintf("end:%d", f.StreamID))
						}
					case *http2.DataFrame:
						if f.StreamEnded() {
							events = append(events, fmt.Sprintf("end:%d", f.StreamID))
						}
					case *http2.RSTStreamFrame:
						events = append(events, fmt.Sprintf("rst:%d", f.StreamID))
					}
				}
			}
			has := func(e string) func() bool {
				return func() bool {
					for _, x := range events {
						if x == e {
							return true
						}
					}
					return false
				}
			}
			slow := uint32(1)
			if mode == "max-requests" {
				get(1, "/") // the worker's first request
				readUntil(has("end:1"))
				slow = 3
			}
			get(slow, "/slow") // 2 s; the last request under --max-requests 2
			if mode == "sigterm" {
				time.Sleep(500 * time.Millisecond) // the app is sleeping
				s.Signal(syscall.SIGTERM)
			}
			readUntil(has(fmt.Sprintf("end:%d", slow)))
			t.Logf("frames: %v", events)
			goaway, headers := -1, -1
			for i, e := range events {
				if strings.HasPrefix(e, "goaway:") && goaway < 0 {
					goaway = i
					if e != fmt.Sprintf("goaway:%d", slow) {
						t.Errorf("%s; want last-stream id %d (the stream in flight)", e, slow)
					}
				}
				if e == fmt.Sprintf("headers:%d:200", slow) {
					headers = i
				}
			}
			if goaway < 0 || headers < 0 || goaway > headers {
				t.Errorf("frames %v; want GOAWAY before a 200 on stream %d", events, slow)
			}
		})
	}
}
