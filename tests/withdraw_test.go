package tests

// Issue 29: --timeout and the slow-request log measure running, not
// waiting; a queued WSGI request whose client left is withdrawn, never
// started. Apps: testapps/withdraw_app.py, testapps/timeout_asgi.py.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const pastTimeout = "request running past --timeout; replacing this worker gracefully"

// getTimed GETs path with a generous client timeout and returns status and
// body ("" and the error text on failure).
func getTimed(url string) (int, string) {
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// One thread, six concurrent 1 s requests: the last waits 5 s in the queue,
// longer than --timeout 3 and --slow-request-threshold 2s, but none runs
// for more than 1 s: no "running past --timeout", no replacement, no slow
// request record. A single 5 s view then gets all three.
func TestTimeout_QueuedIsNotRunning(t *testing.T) {
	s := Start(t, "--workers", "1", "--threads", "1", "--timeout", "3", "--slow-request-threshold", "2s", "withdraw_app:app")
	var wg sync.WaitGroup
	results := make([]string, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := getTimed(s.URL + "/sleep?1")
			results[i] = fmt.Sprintf("%d %s", code, body)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r != "200 slept" {
			t.Errorf("request %d = %q; want 200 slept", i, r)
		}
	}
	time.Sleep(time.Second) // a tick of the tracker (timeout/4) and of the watchdog
	logs := s.Logs()
	if n := supCount(logs, pastTimeout); n != 0 {
		t.Errorf("%d %q records for requests that queued, not ran, past --timeout", n, pastTimeout)
	}
	if n := supCount(logs, "worker replaced"); n != 0 {
		t.Errorf("a healthy, merely busy worker was replaced (%d records)", n)
	}
	if n := supCount(logs, "slow request"); n != 0 {
		t.Errorf("%d slow-request records for 1 s views that waited in the queue", n)
	}

	// The control: a view that runs 5 s is stuck past --timeout 3.
	if code, body := getTimed(s.URL + "/sleep?5"); code != 200 || body != "slept" {
		t.Fatalf("GET /sleep?5 = %d %q", code, body)
	}
	supWaitLog(t, s, 10*time.Second, 1, pastTimeout, "target", "/sleep?5")
	supWaitLog(t, s, 20*time.Second, 1, "worker replaced", "cause", "timeout")
	if n := supCount(s.Logs(), "slow request", "target", "/sleep"); n == 0 {
		t.Errorf("no slow-request record for the 5 s view")
	}
	for _, rec := range supRecords(s.Logs()) {
		if rec["msg"] == pastTimeout {
			if st, _ := rec["stack"].(string); !strings.Contains(st, "withdraw_app.py") {
				t.Errorf("stuck request logged with stack %q; want the app's frames", st)
			}
		}
	}
}

// ASGI: --timeout is about a loop that does not turn. A request awaiting
// asyncio.sleep(5) under --timeout 2 leaves the loop free: no replacement.
// A request that blocks the loop for 4 s is.
func TestTimeout_ASGIAwaitIsNotStuck(t *testing.T) {
	s := Start(t, "--workers", "1", "--timeout", "2", "timeout_asgi:app")
	if code, body := getTimed(s.URL + "/sleep?5"); code != 200 || body != "slept" {
		t.Fatalf("GET /sleep?5 = %d %q", code, body)
	}
	time.Sleep(time.Second)
	logs := s.Logs()
	if n := supCount(logs, pastTimeout) + supCount(logs, "event loop blocked past --timeout; replacing this worker gracefully"); n != 0 {
		t.Errorf("%d --timeout records for a request that only awaited", n)
	}
	if n := supCount(logs, "worker replaced"); n != 0 {
		t.Errorf("the worker of an idle loop was replaced (%d records)", n)
	}

	// The control: a loop blocked 4 s is stuck past --timeout 2.
	if code, body := getTimed(s.URL + "/block?4"); code != 200 || body != "blocked" {
		t.Fatalf("GET /block?4 = %d %q", code, body)
	}
	supWaitLog(t, s, 10*time.Second, 1, "event loop blocked past --timeout; replacing this worker gracefully")
	supWaitLog(t, s, 20*time.Second, 1, "worker replaced", "cause", "timeout")
	for _, rec := range supRecords(s.Logs()) {
		if rec["msg"] == "event loop blocked past --timeout; replacing this worker gracefully" {
			if st, _ := rec["stack"].(string); !strings.Contains(st, "timeout_asgi.py") {
				t.Errorf("blocked loop logged with stack %q; want the app's frames", st)
			}
		}
	}
}

// holdThread starts GET path on the one pool thread and returns a channel
// that gets the time its answer arrived. It waits until the view runs.
func holdThread(t *testing.T, s *Server, path string) <-chan time.Time {
	t.Helper()
	done := make(chan time.Time, 1)
	go func() {
		getTimed(s.URL + path)
		done <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond) // the view has started (one thread: it was idle)
	return done
}

// One thread held 2 s; 20 clients send GET /work?1 and leave after 0.3 s
// while queued. Their requests are withdrawn, never started: a fresh
// request is answered right after the held one ends (not 20 s later), the
// metric counts 20, the server log says so in a counted summary, and the
// access log has them as 499 withdrawn, none as 200.
func TestWithdraw_AbandonedQueued(t *testing.T) {
	s := Start(t, "--workers", "1", "--threads", "1", "--access-log", "withdraw_app:app")
	held := holdThread(t, s, "/sleep?2")
	start := time.Now()
	var conns []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("GET /work?1 HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(300 * time.Millisecond)
	for _, c := range conns {
		c.Close()
	}
	time.Sleep(200 * time.Millisecond)
	code, body := getTimed(s.URL + "/")
	answered := time.Now()
	heldEnd := <-held
	t.Logf("fresh request answered %v after the burst, %v after the held request ended", answered.Sub(start).Round(time.Millisecond), answered.Sub(heldEnd).Round(time.Millisecond))
	if code != 200 || body != "ok" {
		t.Fatalf("fresh GET / = %d %q", code, body)
	}
	// Run anyway, the 20 abandoned 1 s views would hold it ~20 s past the
	// held request; withdrawn, it is the next job (bound generous for a
	// shared machine).
	if d := answered.Sub(heldEnd); d > 1500*time.Millisecond {
		t.Errorf("fresh request answered %v after the held request ended; want at once (abandoned work withdrawn)", d)
	}
	if _, ran := getTimed(s.URL + "/ran"); ran != "0" {
		t.Errorf("/work started %s times; want 0 (every client left while queued)", ran)
	}
	if v := metricValue(t, s, "turnstile_requests_withdrawn_total"); v != 20 {
		t.Errorf("turnstile_requests_withdrawn_total = %v; want 20", v)
	}
	deadline := time.Now().Add(5 * time.Second)
	summed := 0
	for {
		summed = 0
		for _, rec := range supRecords(s.Logs()) {
			if rec["msg"] == "queued requests withdrawn: their clients left before a thread took them" {
				n, _ := rec["count"].(float64)
				summed += int(n)
			}
		}
		if summed >= 20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if summed != 20 {
		t.Errorf("withdrawal summaries count %d requests; want 20", summed)
	}
	withdrawn, ok200 := 0, 0
	for _, rec := range supRecords(s.Logs()) {
		if rec["msg"] != "access" || rec["target"] != "/work?1" {
			continue
		}
		switch {
		case rec["status"] == float64(499) && rec["withdrawn"] == true:
			withdrawn++
		case rec["status"] == float64(200):
			ok200++
		}
	}
	if withdrawn != 20 || ok200 != 0 {
		t.Errorf("access log: %d /work?1 records 499 withdrawn, %d 200; want 20 and 0", withdrawn, ok200)
	}
}

// What "the client left" means while a request is queued (the README's
// rule): a client that half-closes (shutdown(SHUT_WR)) after a complete
// request has left, like an EOF for gunicorn, uvicorn and nginx (499); one
// that pipelined a second request before its half-close, or that stays,
// gets its answers.
func TestWithdraw_HalfCloseAndPipelined(t *testing.T) {
	s := Start(t, "--workers", "1", "--threads", "1", "--access-log", "withdraw_app:app")
	held := holdThread(t, s, "/sleep?2")
	dial := func(raw string, halfClose bool) *net.TCPConn {
		c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		tc := c.(*net.TCPConn)
		if _, err := tc.Write([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		if halfClose {
			tc.CloseWrite()
		}
		t.Cleanup(func() { tc.Close() })
		return tc
	}
	single := dial("GET /work?0.2 HTTP/1.1\r\nHost: a\r\n\r\n", true)
	piped := dial("GET /work?0.2 HTTP/1.1\r\nHost: a\r\n\r\nGET /?second HTTP/1.1\r\nHost: a\r\n\r\n", true)
	// The second request arrives after the server read the first: it
	// waits in the kernel, not in the server's buffer.
	late := dial("GET /work?0.2 HTTP/1.1\r\nHost: a\r\n\r\n", false)
	time.Sleep(200 * time.Millisecond)
	late.Write([]byte("GET /?second HTTP/1.1\r\nHost: a\r\n\r\n"))
	late.CloseWrite()
	stays := dial("GET /work?0.2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false)
	<-held

	for name, c := range map[string]*net.TCPConn{"pipelined": piped, "pipelined later": late} {
		got, closed := ReadAll(c, 10*time.Second)
		if codes := StatusCodes(got); len(codes) != 2 || codes[0] != "200" || codes[1] != "200" || !closed {
			t.Errorf("%s, then half-closed: %q; want two 200 answers, then the close", name, got)
		}
	}
	if got, _ := ReadAll(stays, 10*time.Second); len(StatusCodes(got)) != 1 || StatusCodes(got)[0] != "200" {
		t.Errorf("client that stays: %q; want 200", got)
	}
	if got, closed := ReadAll(single, 10*time.Second); got != "" || !closed {
		t.Errorf("half-closed after one request: %q (closed %v); want no answer and the close (withdrawn)", got, closed)
	}
	if _, ran := getTimed(s.URL + "/ran"); ran != "3" {
		t.Errorf("/work started %s times; want 3 (the pipelining and the staying clients')", ran)
	}
	if v := metricValue(t, s, "turnstile_requests_withdrawn_total"); v != 1 {
		t.Errorf("turnstile_requests_withdrawn_total = %v; want 1", v)
	}
}

// HTTP/2 (h2c): streams reset by the client while queued are withdrawn,
// and the connection's other streams are served (a reset is per stream).
func TestWithdraw_H2StreamReset(t *testing.T) {
	s := Start(t, "--workers", "1", "--threads", "1", "withdraw_app:app")
	held := holdThread(t, s, "/sleep?2")
	cc := h2cConn(t, s.Addr)
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.Addr+"/work?1", nil)
			if resp, err := cc.RoundTrip(req); err == nil {
				resp.Body.Close()
				t.Errorf("abandoned stream answered %d; want the client's cancellation", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond)
	req, _ := http.NewRequest("GET", "http://"+s.Addr+"/", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatalf("fresh stream on the same connection: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	answered := time.Now()
	heldEnd := <-held
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("fresh stream = %d %q", resp.StatusCode, body)
	}
	if d := answered.Sub(heldEnd); d > 1500*time.Millisecond {
		t.Errorf("fresh stream answered %v after the held request ended; want at once", d)
	}
	if _, ran := getTimed(s.URL + "/ran"); ran != "0" {
		t.Errorf("/work started %s times; want 0", ran)
	}
	if v := metricValue(t, s, "turnstile_requests_withdrawn_total"); v != 5 {
		t.Errorf("turnstile_requests_withdrawn_total = %v; want 5", v)
	}
}

// The same on a server that was idle: its sweep ticked at the idle rate (a
// second at the default --queue-timeout) until a tick found work, so
// clients that left within that second behind a short view were served
// anyway (a fresh review: 20 of 20 run behind a 0.3 s view). A queued
// request wakes the sweep.
func TestWithdraw_AbandonedOnIdleServer(t *testing.T) {
	s := Start(t, "--workers", "1", "--threads", "1", "withdraw_app:app")
	time.Sleep(1500 * time.Millisecond) // the sweep has gone idle
	held := holdThread(t, s, "/sleep?0.6")
	var conns []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("GET /work?0.05 HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(20 * time.Millisecond)
	for _, c := range conns {
		c.Close()
	}
	<-held
	time.Sleep(1500 * time.Millisecond) // 20 × 0.05 s, were they run
	if _, ran := getTimed(s.URL + "/ran"); ran != "0" {
		t.Errorf("/work started %s times; want 0 (every client left while queued)", ran)
	}
}

// A worker that stops while a view holds its only thread answers the
// requests queued behind it 503 with Retry-After shortly before its
// graceful timeout: they had been closed under their clients at the
// timeout (an empty reply: a POST's client cannot tell whether it ran),
// and logged and counted as clients that left. From a fresh review.
func TestWithdraw_QueuedAtStopGet503(t *testing.T) {
	s := Start(t, "--workers", "1", "--threads", "1", "--graceful-timeout", "3", "withdraw_app:app")
	holdThread(t, s, "/sleep?10")
	type answer struct{ head string }
	answers := make(chan answer, 3)
	for i := 0; i < 3; i++ {
		go func() {
			resp, _ := rawExchange(s.Addr, "POST /work?0.01 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab", 8*time.Second)
			head, _, _ := strings.Cut(resp, "\r\n\r\n")
			answers <- answer{head: head}
		}()
	}
	time.Sleep(300 * time.Millisecond) // all three queued
	s.Signal(syscall.SIGTERM)
	for i := 0; i < 3; i++ {
		a := <-answers
		if !strings.HasPrefix(a.head, "HTTP/1.1 503 ") || !strings.Contains(a.head, "Retry-After: 1") {
			t.Errorf("a request queued at the stop got %q; want 503 with Retry-After", a.head)
		}
	}
	if strings.Contains(s.Logs(), "queued requests withdrawn") {
		t.Errorf("the stop's 503s were logged as clients that left")
	}
}
