// Package tests runs the real turnstile binary with real CPython, real apps
// from PyPI and real clients. `make test` builds the binary and the
// virtualenv and sets TURNSTILE_BIN and TURNSTILE_VENV; without them (plain
// `go test ./...`) these tests skip. They also skip under -short.
package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
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
