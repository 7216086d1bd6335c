// Package tests runs the real turnstile binary with real CPython, real apps
// from PyPI and real clients. `make test` builds the binary and the
// virtualenv and sets TURNSTILE_BIN and TURNSTILE_VENV; without them (plain
// `go test ./...`) these tests skip. They also skip under -short.
//
// Where the shared helpers are:
//
//   - harness_test.go (this file): the server process (Start, StartAsync,
//     Command, Server's methods), raw connections (Raw, rawExchange,
//     ReadAll, dialT, roundTripRaw, StatusCodes), many runs at once
//     (concurrently, onceThenConcurrently, caseN), log records
//     (logRecords, recordText, waitLogRecords, supCount, supWaitLog), the
//     admin listener (adminURL, metricSum, metricValue), JSON endpoints
//     (getJSON) and processes (appPID, vmRSSKB).
//   - load_test.go: clients that keep a server busy (startLoad,
//     clientLoad).
//   - wsclient_test.go: WebSocket clients, gorilla's and raw frames
//     (wsDial, wsRaw, rawWS).
//   - cluster_parts_test.go: the cluster of examples/cluster (network
//     namespaces, Redis, HAProxy and its runtime API, the hosts, clients
//     dialing from the clients' address, room members that reconnect).
//   - Families kept next to their tests: cf* in config_test.go (config
//     files, env, exit statuses), newPKI and TLSArgs in tls_test.go,
//     h2cConn, h2TLSConn and runCurl in http2_test.go, fw* in
//     frameworks_test.go (PyPI framework apps), asgi* in asgi_test.go,
//     supServing, supWaitReady and supWriteFile in supervise_test.go.
//   - Kept next to their first tests, used by others too: adminAddr in
//     top_test.go; waitFor in buffer_test.go; httpsURL, newKey, writePEM
//     and getTLSJSON in tls_test.go; h3Client and startH3 in
//     http3_test.go; startFailure in errors_test.go; wsNoTracebacks,
//     waitStats and mustJSON in websocket_test.go; firstLine in
//     environ_test.go.
package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one running turnstile process.
type Server struct {
	t        *testing.T
	cmd      *exec.Cmd
	Addr     string // host:port of the HTTP listener
	URL      string // http://Addr
	Admin    string // http://host:port of the admin listener
	PID      int
	mu       sync.Mutex
	logs     bytes.Buffer
	exited   chan struct{}
	exitCode int
}

// repoRoot is the repository's top directory.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// AppDir is testapps/, where every test app lives (one module per case).
func AppDir() string { return filepath.Join(repoRoot(), "testapps") }

// needVenvImport skips t with why unless TURNSTILE_VENV is set and its
// python runs imports (a Python import statement, "import djust") without
// an error; it returns the virtualenv's directory.
func needVenvImport(t testing.TB, imports, why string) string {
	t.Helper()
	venv := os.Getenv("TURNSTILE_VENV")
	if venv == "" || exec.Command(filepath.Join(venv, "bin", "python"), "-c", imports).Run() != nil {
		t.Skip(why)
	}
	return venv
}

func binPath(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped under -short")
	}
	bin := os.Getenv("TURNSTILE_BIN")
	if bin == "" {
		t.Skip("TURNSTILE_BIN is not set: run `make test`")
	}
	return bin
}

// Command returns an exec.Cmd for the binary with the test virtualenv and
// testapps/ on sys.path, plus args. For tests that check exit statuses.
func Command(t testing.TB, args ...string) *exec.Cmd {
	bin := binPath(t)
	base := []string{"--app-dir", AppDir(), "--host", "127.0.0.1", "--port", "0", "--admin-bind", "127.0.0.1:0", "--log-format", "json"}
	if v := os.Getenv("TURNSTILE_VENV"); v != "" {
		base = append(base, "--venv", v)
	}
	cmd := exec.Command(bin, append(base, args...)...)
	cmd.Dir = AppDir()
	return cmd
}

// Start runs the binary with args (the last one is MODULE:ATTR) and waits
// until it listens. The process is stopped at cleanup; its log goes to
// t.Logf.
func Start(t *testing.T, args ...string) *Server {
	t.Helper()
	s, listening := StartAsync(t, args...)
	WaitListening(t, s, listening, 30*time.Second)
	return s
}

// StartAsync starts the binary as Start does but returns at once, with a
// channel closed at the first "listening" record: for tests that look at
// the server while its workers start, or whose start takes longer than
// Start's 30 s.
func StartAsync(t *testing.T, args ...string) (*Server, <-chan struct{}) {
	t.Helper()
	return startCmd(t, Command(t, args...))
}

// startCmd starts cmd (a turnstile, possibly behind a wrapper) as
// StartAsync does.
func startCmd(t *testing.T, cmd *exec.Cmd) (*Server, <-chan struct{}) {
	t.Helper()
	s := &Server{t: t, cmd: cmd, exited: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout = s.cmd.Stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.PID = s.cmd.Process.Pid
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec["msg"] {
			case "listening":
				s.mu.Lock()
				s.Addr, _ = rec["addr"].(string)
				s.URL = "http://" + s.Addr
				s.mu.Unlock()
				if !signalled {
					signalled = true
					close(listening)
				}
			case "admin listening":
				a, _ := rec["addr"].(string)
				s.mu.Lock()
				s.Admin = "http://" + a
				s.mu.Unlock()
			}
		}
		s.cmd.Wait()
		s.exitCode = s.cmd.ProcessState.ExitCode()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.Stop()
		t.Logf("server log:\n%s", s.Logs())
	})
	return s, listening
}

// WaitListening waits up to limit for the listening record of a server
// from StartAsync.
func WaitListening(t *testing.T, s *Server, listening <-chan struct{}, limit time.Duration) {
	t.Helper()
	select {
	case <-listening:
	case <-s.exited:
		t.Fatalf("server exited with %d before listening:\n%s", s.exitCode, s.Logs())
	case <-time.After(limit):
		t.Fatalf("server did not listen within %v:\n%s", limit, s.Logs())
	}
}

// Logs returns everything the server has logged so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Stop sends SIGTERM and waits (10 s, then SIGKILL). Returns the exit code.
func (s *Server) Stop() int {
	select {
	case <-s.exited:
		return s.exitCode
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	return s.exitCode
}

// Signal sends sig to the server process.
func (s *Server) Signal(sig os.Signal) { s.cmd.Process.Signal(sig) }

// Wait waits for the process to exit within d and returns its exit code, or
// -1 on timeout.
func (s *Server) Wait(d time.Duration) int {
	select {
	case <-s.exited:
		return s.exitCode
	case <-time.After(d):
		return -1
	}
}

// Get fetches path with Go's client and returns status and body.
func (s *Server) Get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// Raw sends raw bytes on a new TCP connection, half-closes nothing, and
// reads until EOF or until timeout passes with no data. It returns what was
// read and whether the server closed the connection (EOF).
func Raw(t testing.TB, addr, raw string, timeout time.Duration) (string, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(raw)); err != nil {
		t.Fatalf("write: %v", err)
	}
	return ReadAll(c, timeout)
}

// ReadAll reads from c until EOF (true) or until timeout passes without
// new bytes (false).
func ReadAll(c net.Conn, timeout time.Duration) (string, bool) {
	var buf bytes.Buffer
	p := make([]byte, 64<<10)
	for {
		c.SetReadDeadline(time.Now().Add(timeout))
		n, err := c.Read(p)
		buf.Write(p[:n])
		if err == io.EOF {
			return buf.String(), true
		}
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return buf.String(), false
			}
			return buf.String(), true // reset counts as closed
		}
	}
}

// StatusCodes returns the status code of every response in raw bytes.
// Responses may follow a body directly, so the status line is found
// anywhere, not only after a CRLF.
func StatusCodes(raw string) []string {
	var codes []string
	for _, m := range statusLine.FindAllStringSubmatch(raw, -1) {
		codes = append(codes, m[1])
	}
	return codes
}

var statusLine = regexp.MustCompile(`HTTP/1\.[01] (\d{3}) `)

// ---- raw connections (with Raw, ReadAll and StatusCodes above) ------------

// dialT opens a TCP connection to addr (5 s timeout), failing t if it
// cannot. The caller closes it.
func dialT(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return c
}

// dialSup is dialT, under the name the supervisor and hardening tests
// use.
func dialSup(t *testing.T, addr string) net.Conn { return dialT(t, addr) }

// rawExchange is Raw without t, for goroutines: a dial error comes back
// as the text "dial: <error>" and false.
func rawExchange(addr, raw string, timeout time.Duration) (string, bool) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "dial: " + err.Error(), false
	}
	defer c.Close()
	io.WriteString(c, raw)
	return ReadAll(c, timeout)
}

// roundTripRaw writes parts on a new connection (sleeping gap between
// them), then reads one response within timeout. The body is read to its
// end (Content-Length, chunked or close).
func roundTripRaw(addr string, parts []string, gap, timeout time.Duration) (*http.Response, string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout + time.Duration(len(parts))*gap))
	for i, p := range parts {
		if i > 0 && gap > 0 {
			time.Sleep(gap)
		}
		if _, err := io.WriteString(c, p); err != nil {
			return nil, "", fmt.Errorf("write: %v", err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, string(b), fmt.Errorf("reading body: %v", err)
	}
	return resp, string(b), nil
}

// ---- many runs at once ---------------------------------------------------------

// caseN is how many times a cheap case runs concurrently against one server.
const caseN = 20

// concurrently runs f(0..n-1) at once and reports every error.
func concurrently(t testing.TB, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := f(i); err != nil {
				errs <- fmt.Errorf("run %d of %d: %w", i, n, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	k := 0
	for err := range errs {
		if k < 5 {
			t.Error(err)
		}
		k++
	}
	if k > 5 {
		t.Errorf("... and %d more failed runs", k-5)
	}
}

// onceThenConcurrently runs one on the test goroutine first, failing t at
// once if it fails (a broken case needs no n copies of its failure), then
// n copies of it at once through concurrently: each case also runs
// concurrently against one server.
func onceThenConcurrently(t testing.TB, n int, one func() error) {
	t.Helper()
	if err := one(); err != nil {
		t.Fatal(err)
	}
	concurrently(t, n, func(int) error { return one() })
}

// ---- log records ---------------------------------------------------------------

// logRecords parses the server's JSON log; lines that are not JSON come
// back as {"msg": line, "unparsed": true}.
func logRecords(logs string) []map[string]any {
	var recs []map[string]any
	for _, line := range strings.Split(logs, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			rec = map[string]any{"msg": line, "unparsed": true}
		}
		recs = append(recs, rec)
	}
	return recs
}

// recordText is every field of rec as one string, for searching.
func recordText(rec map[string]any) string {
	b, _ := json.Marshal(rec)
	var sb strings.Builder
	sb.Write(b)
	for _, v := range rec {
		if s, ok := v.(string); ok {
			sb.WriteString("\n" + s)
		}
	}
	return sb.String()
}

// waitLogRecords waits up to d for at least one log record matching
// match, then a little longer for stragglers, and returns the matches.
func waitLogRecords(logs func() string, d time.Duration, match func(rec map[string]any) bool) []map[string]any {
	deadline := time.Now().Add(d)
	var found []map[string]any
	for {
		found = found[:0]
		for _, rec := range logRecords(logs()) {
			if match(rec) {
				found = append(found, rec)
			}
		}
		if len(found) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(found) > 0 {
		time.Sleep(200 * time.Millisecond)
		found = found[:0]
		for _, rec := range logRecords(logs()) {
			if match(rec) {
				found = append(found, rec)
			}
		}
	}
	return found
}

// supRecords is logRecords without the lines that are not JSON.
func supRecords(logs string) []map[string]any {
	var recs []map[string]any
	for _, rec := range logRecords(logs) {
		if rec["unparsed"] != true {
			recs = append(recs, rec)
		}
	}
	return recs
}

// supCount counts the records whose msg is msg and whose fields include
// every key=value of match (values compared as fmt %v).
func supCount(logs, msg string, match ...string) int {
	n := 0
	for _, rec := range supRecords(logs) {
		if rec["msg"] != msg {
			continue
		}
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			if fmt.Sprint(rec[match[i]]) != match[i+1] {
				ok = false
			}
		}
		if ok {
			n++
		}
	}
	return n
}

// supWaitLog waits up to d for n records as supCount counts them.
func supWaitLog(t *testing.T, s *Server, d time.Duration, n int, msg string, match ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for supCount(s.Logs(), msg, match...) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %d %q records %v within %v", n, msg, match, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---- the admin listener and the app's JSON endpoints --------------------------

// adminClient scrapes the admin listener (5 s timeout a request).
var adminClient = &http.Client{Timeout: 5 * time.Second}

// adminURL is s.Admin, read under the lock StartAsync writes it with.
func (s *Server) adminURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Admin
}

// adminMetric reads the master's admin /metrics (Prometheus text format)
// and sums the samples of name over all its label sets (workers, status
// classes, ...). found is false when no sample of name is there; page is
// what /metrics returned, for messages.
func adminMetric(t testing.TB, s *Server, name string) (sum float64, found bool, page string) {
	t.Helper()
	resp, err := adminClient.Get(s.adminURL() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum, found = sum+v, true
	}
	return sum, found, string(b)
}

// metricSum is adminMetric's sum; it fails t when name is absent.
func metricSum(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	sum, found, page := adminMetric(t, s, name)
	if !found {
		t.Fatalf("no %s in /metrics:\n%s", name, page)
	}
	return sum
}

// metricValue is adminMetric's sum, or -1 when name is absent.
func metricValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	sum, found, _ := adminMetric(t, s, name)
	if !found {
		return -1
	}
	return sum
}

// getJSON fetches path on s into v.
func getJSON(t testing.TB, s *Server, path string, v any) {
	t.Helper()
	code, body := s.Get(t, path)
	if code != 200 {
		t.Fatalf("GET %s = %d %q", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %q: %v", path, body, err)
	}
}

// ---- processes -----------------------------------------------------------------

// appPID asks the app (GET /pid) which process runs it: the worker, which
// is not necessarily the process the test started.
func appPID(t testing.TB, s *Server) int {
	t.Helper()
	code, body := s.Get(t, "/pid")
	pid, err := strconv.Atoi(strings.TrimSpace(body))
	if code != 200 || err != nil {
		t.Fatalf("GET /pid = %d %q; want the worker's pid", code, body)
	}
	return pid
}

// vmRSSKB returns VmRSS of pid in kB (from /proc/<pid>/status).
func vmRSSKB(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading VmRSS of %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// freePort returns a TCP port free at the time of the call.
//
// The port is below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), so a listener the server binds to port
// 0 (the admin listener, a worker's) cannot be handed the same port before
// the test uses it (CI: pebble's http-01 validation reached the admin
// listener that had been given the challenge port). Free for TCP and UDP.
func freePort(t *testing.T) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				low = n
			}
		}
	}
	for i := 0; i < 1000; i++ {
		port := 10000 + rand.IntN(low-10000)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		return port
	}
	t.Fatal("no free port below the ephemeral range")
	return 0
}
