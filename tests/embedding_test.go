package tests

// The embedding pitfalls of DESIGN.md ("Embedding pitfalls already found"),
// each checked against the real binary with an app from testapps/embed_*.py.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A view that uses multiprocessing.Pool works: children start through
// forkserver/spawn, never as an os.fork() of the Go process.
func TestEmbed_MultiprocessingPool(t *testing.T) {
	s := Start(t, "embed_mp:app")
	client := &http.Client{Timeout: 60 * time.Second}
	for i := 0; i < 2; i++ {
		resp, err := client.Get(s.URL + "/")
		if err != nil {
			t.Fatalf("GET / (Pool(2).map) #%d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		f := strings.Fields(string(b))
		if resp.StatusCode != 200 || len(f) != 3 || f[0] != "285" {
			t.Fatalf("GET / (Pool(2).map(square, range(10))) #%d = %d %q; want 200 \"285 <start method> <pid>\"", i, resp.StatusCode, b)
		}
		if f[1] == "fork" {
			t.Errorf("multiprocessing start method = fork; want forkserver or spawn (a forked Go process has a dead runtime)")
		}
	}
	if code, body := s.Get(t, "/"); code != 200 || !strings.HasPrefix(body, "285 ") {
		t.Fatalf("GET / after two pools = %d %q; want 200", code, body)
	}
}

// A write to a pipe or socket whose other end is closed raises
// BrokenPipeError in the app, on a thread the app started and on the pool
// thread; SIGPIPE never kills the worker.
func TestEmbed_SIGPIPE(t *testing.T) {
	s := Start(t, "embed_sigpipe:app")
	pid := appPID(t, s)
	want := fmt.Sprintf("pipe:BrokenPipeError socket:BrokenPipeError %d", pid)
	check := func(path string) error {
		resp, err := http.Get(s.URL + path)
		if err != nil {
			return fmt.Errorf("GET %s: %v (did SIGPIPE kill the worker?)", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != want {
			return fmt.Errorf("GET %s = %d %q; want 200 %q", path, resp.StatusCode, b, want)
		}
		return nil
	}
	for _, path := range []string{"/thread", "/inline"} {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			if err := check(path); err != nil {
				t.Fatal(err)
			}
			concurrently(t, caseN, func(int) error { return check(path) })
			if got := appPID(t, s); got != pid {
				t.Fatalf("worker pid = %d after broken-pipe writes; want %d (unchanged)", got, pid)
			}
			if code := s.Wait(0); code != -1 {
				t.Fatalf("server exited with %d", code)
			}
		})
	}
}

// signal.signal and faulthandler.enable, at import and in a request, log
// and do nothing: no ValueError on a pool thread, no crash, and the server
// keeps its own SIGTERM (graceful stop, exit 0) and SIGPIPE handling.
func TestEmbed_SignalAndFaulthandler(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "handler-ran")
	t.Setenv("EMBED_SIGNAL_MARKER", marker)
	s := Start(t, "embed_signal:app")
	pid := 0
	for i := 0; i < 3; i++ {
		code, body := s.Get(t, "/")
		f := strings.Fields(body)
		want := "SIGTERM:ok SIGINT:ok SIGUSR1:ok SIGCHLD:ok SIGPIPE:ok faulthandler:ok"
		if code != 200 || len(f) != 7 || strings.Join(f[:6], " ") != want {
			t.Fatalf("GET / #%d = %d %q; want 200 %q <pid>", i, code, body, want)
		}
		p, _ := strconv.Atoi(f[6])
		if pid != 0 && p != pid {
			t.Fatalf("worker pid changed from %d to %d", pid, p)
		}
		pid = p
	}

	// The app asked for SIGPIPE's default action; a client that resets
	// while the server writes a 4 MiB body must not kill the worker.
	for i := 0; i < 5; i++ {
		c := dialT(t, s.Addr)
		io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		if _, err := http.ReadResponse(br, nil); err != nil {
			t.Fatalf("GET /big: %v", err)
		}
		c.(*net.TCPConn).SetLinger(0) // close with RST
		c.Close()
	}
	time.Sleep(200 * time.Millisecond)
	if code, body := s.Get(t, "/"); code != 200 {
		t.Fatalf("GET / after clients reset mid-body = %d %q; want 200", code, body)
	}

	s.Signal(syscall.SIGTERM)
	if code := s.Wait(10 * time.Second); code != 0 {
		t.Fatalf("exit status after SIGTERM = %d; want 0 (the server, not the app's handler, owns SIGTERM)", code)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the app's signal handler ran: %q", b)
	}
	if !strings.Contains(s.Logs(), `"msg":"stopped"`) {
		t.Fatalf("no \"stopped\" record after SIGTERM: the graceful stop did not run")
	}
}

// A 1 GiB upload (Content-Length, generated as it is sent) read by the app
// in 64 KiB reads arrives whole, and the worker's RSS stays within 64 MiB
// of its baseline, sampled during the upload: by default the body is
// spooled to a temporary file before the app runs (--request-buffer,
// 64 KiB in memory), never into memory; with --request-buffer 0 Go does
// not read ahead of the app. The app waits 2 s before its first read, when
// a server that buffers in memory would take in as much as the client can
// send.
func TestEmbed_Upload1GiB(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{{"spooled", nil}, {"streamed", []string{"--request-buffer", "0"}}} {
		t.Run(tc.name, func(t *testing.T) { upload1GiB(t, tc.args) })
	}
}

func upload1GiB(t *testing.T, args []string) {
	const (
		size        = int64(1 << 30)
		maxGrowthKB = 64 << 10
	)
	s := Start(t, append(args, "embed_upload:app")...)
	pid := appPID(t, s)
	base := vmRSSKB(t, pid)

	var maxGrowth atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				return
			}
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
					if g := kb - base; g > maxGrowth.Load() {
						maxGrowth.Store(g)
					}
				}
			}
		}
	}()

	body := newPatternReader(size)
	req, _ := http.NewRequest("POST", s.URL+"/?2", body)
	req.ContentLength = size
	client := &http.Client{Timeout: 5 * time.Minute}
	start := time.Now()
	resp, err := client.Do(req)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("POST 1 GiB: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf("%d %08x", size, body.crc)
	t.Logf("1 GiB upload in %v; worker RSS peak +%d kB", time.Since(start), maxGrowth.Load())
	if resp.StatusCode != 200 || string(b) != want {
		t.Fatalf("POST 1 GiB = %d %q; want 200 %q (length, crc32)", resp.StatusCode, b, want)
	}
	if g := maxGrowth.Load(); g >= maxGrowthKB {
		t.Fatalf("worker RSS grew by %d kB during a 1 GiB upload; want < %d kB (Go must not read ahead of the app into memory)", g, maxGrowthKB)
	}
}

// patternReader yields size bytes of a repeated pseudo-random 64 KiB
// block and keeps the crc32 (IEEE, as zlib.crc32) of what it produced.
type patternReader struct {
	block []byte
	left  int64
	off   int
	crc   uint32
}

func newPatternReader(size int64) *patternReader {
	b := make([]byte, 64<<10)
	rand.New(rand.NewSource(42)).Read(b)
	return &patternReader{block: b, left: size}
}

func (p *patternReader) Read(buf []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := copy(buf, p.block[p.off:])
	if int64(n) > p.left {
		n = int(p.left)
	}
	p.crc = crc32.Update(p.crc, crc32.IEEETable, buf[:n])
	p.off = (p.off + n) % len(p.block)
	p.left -= int64(n)
	return n, nil
}

// A view that holds the GIL inside C for ~2 s (catastrophic backtracking in
// the _sre engine, which never releases it) cannot stop Go from answering:
// the admin /livez and /metrics, and a new connection whose malformed
// request Go answers with 400, each within 100 ms (DESIGN.md, promise 1).
func TestEmbed_GILHeldInC(t *testing.T) {
	const bound = 100 * time.Millisecond
	s := Start(t, "--blocking-threads", "2", "embed_gil:app")
	if s.Admin == "" {
		t.Fatal("no \"admin listening\" record in the log")
	}

	// Calibrate N so that re.match(r"(a+)+b", "a"*N) takes about 2 s:
	// each extra "a" doubles the time.
	s.Get(t, "/spin?20") // warm up
	_, body := s.Get(t, "/spin?22")
	t22, err := strconv.ParseFloat(body, 64)
	if err != nil || t22 <= 0 {
		t.Fatalf("GET /spin?22 = %q", body)
	}
	n := 22 + int(math.Ceil(math.Log2(2.0/t22)))
	if n > 32 {
		n = 32
	}

	noKeep := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(url string) (int, time.Duration, error) {
		start := time.Now()
		resp, err := noKeep.Get(url)
		if err != nil {
			return 0, time.Since(start), err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start), nil
	}
	malformed := func() (string, time.Duration, error) {
		start := time.Now()
		c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
		if err != nil {
			return "", time.Since(start), err
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nno colon in this field line\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line), time.Since(start), err
	}
	// Warm up each probe once (first-use costs of the client).
	get(s.Admin + "/livez")
	get(s.Admin + "/metrics")
	malformed()

	type timed struct {
		start, end time.Time
		body       string
		err        error
	}
	spinDone, pingDone := make(chan timed, 1), make(chan timed, 1)
	spinStart := time.Now()
	go func() {
		resp, err := noKeep.Get(fmt.Sprintf("%s/spin?%d", s.URL, n))
		r := timed{start: spinStart, err: err}
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r.body = string(b)
		}
		r.end = time.Now()
		spinDone <- r
	}()
	time.Sleep(300 * time.Millisecond)
	go func() {
		start := time.Now()
		resp, err := noKeep.Get(s.URL + "/ping")
		r := timed{start: start, err: err}
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r.body = string(b)
		}
		r.end = time.Now()
		pingDone <- r
	}()

	var lastProbe time.Time
	for round := 0; round < 3; round++ {
		if code, d, err := get(s.Admin + "/livez"); err != nil || code != 200 || d > bound {
			t.Errorf("round %d: admin /livez = %d %v in %v while the GIL is held; want 200 within %v", round, code, err, d, bound)
		}
		if code, d, err := get(s.Admin + "/metrics"); err != nil || code != 200 || d > bound {
			t.Errorf("round %d: admin /metrics = %d %v in %v while the GIL is held; want 200 within %v", round, code, err, d, bound)
		}
		if line, d, err := malformed(); err != nil || !strings.HasPrefix(line, "HTTP/1.1 400") || d > bound {
			t.Errorf("round %d: connect + malformed request = %q %v in %v while the GIL is held; want \"HTTP/1.1 400 ...\" within %v", round, line, err, d, bound)
		}
		lastProbe = time.Now()
		time.Sleep(300 * time.Millisecond)
	}

	spin := <-spinDone
	ping := <-pingDone
	if spin.err != nil || ping.err != nil {
		t.Fatalf("spin: %v, ping: %v", spin.err, ping.err)
	}
	t.Logf("spin?%d: app says %ss, ended %v after the last probe; /ping took %v",
		n, spin.body, spin.end.Sub(lastProbe), ping.end.Sub(ping.start))
	// The test's own premise: the probes ran while the GIL was held.
	if !spin.end.After(lastProbe) {
		t.Fatalf("the spin ended before the last probe: probes did not run while the GIL was held (calibrate N)")
	}
	if ping.end.Sub(ping.start) < 500*time.Millisecond {
		t.Fatalf("/ping took %v during the spin: the regex did not hold the GIL, so this test proves nothing", ping.end.Sub(ping.start))
	}
}

// The app runs on the CPython the binary was built for: sys.version
// matches TURNSTILE_PYTHON's, the one libpython mapped into the worker
// lives in that Python's LIBDIR (the rpath; not a system libpython of the
// same soname), and sys.executable is the virtualenv's python.
func TestEmbed_PythonVersion(t *testing.T) {
	py := os.Getenv("TURNSTILE_PYTHON")
	if py == "" {
		t.Skip("TURNSTILE_PYTHON is not set: run `make test`")
	}
	out, err := exec.Command(py, "-c", `import json, sys, sysconfig
print(json.dumps({"version": sys.version, "libdir": sysconfig.get_config_var("LIBDIR"),
    "soname": sysconfig.get_config_var("INSTSONAME")}))`).Output()
	if err != nil {
		t.Fatalf("%s: %v", py, err)
	}
	var want struct{ Version, Libdir, Soname string }
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatalf("%s said %q: %v", py, out, err)
	}

	s := Start(t, "embed_version:app")
	_, body := s.Get(t, "/")
	var got struct {
		Version    string   `json:"version"`
		Executable string   `json:"executable"`
		Libpython  []string `json:"libpython"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("GET / = %q: %v", body, err)
	}
	if got.Version != want.Version {
		t.Errorf("sys.version = %q; want %q (the Python the binary was built for)", got.Version, want.Version)
	}
	if len(got.Libpython) != 1 {
		t.Fatalf("libpython mapped into the worker = %q; want exactly one, in %s", got.Libpython, want.Libdir)
	}
	lib, _ := filepath.EvalSymlinks(got.Libpython[0])
	libdir, _ := filepath.EvalSymlinks(want.Libdir)
	if filepath.Dir(lib) != libdir {
		t.Errorf("loaded libpython = %s; want one from %s (LIBDIR of %s)", got.Libpython[0], want.Libdir, py)
	}
	if want.Soname != "" && filepath.Base(got.Libpython[0]) != want.Soname {
		t.Errorf("loaded libpython = %s; want soname %s", filepath.Base(got.Libpython[0]), want.Soname)
	}
	if venv := os.Getenv("TURNSTILE_VENV"); venv != "" {
		if wantExe := filepath.Join(venv, "bin", "python"); got.Executable != wantExe {
			t.Errorf("sys.executable = %q; want %q (the virtualenv's python)", got.Executable, wantExe)
		}
	}
	// The start-up record says which CPython runs and which it was built for.
	for _, rec := range logRecords(s.Logs()) {
		if rec["msg"] == "turnstile starting" {
			ver := strings.Fields(want.Version)[0]
			if rec["python"] != ver || rec["built_for"] != ver {
				t.Errorf("start-up record python=%v built_for=%v; want both %s", rec["python"], rec["built_for"], ver)
			}
		}
	}
}

// Each request runs in a fresh contextvars.Context: a variable set by one
// request is unset in the next on the same (only) thread, and the
// iterable's __next__ and close() see the value set in the app call.
func TestEmbed_ContextVars(t *testing.T) {
	s := Start(t, "--blocking-threads", "1", "embed_ctx:app")
	for i := 0; i < caseN; i++ {
		v := fmt.Sprintf("req%d", i)
		if code, body := s.Get(t, "/set?"+v); code != 200 || body != "before=unset next="+v {
			t.Fatalf("GET /set?%s = %d %q; want 200 %q (a fresh context, and next() in the app call's context)", v, code, body, "before=unset next="+v)
		}
		if code, body := s.Get(t, "/get"); code != 200 || body != "get=unset" {
			t.Fatalf("GET /get after /set?%s = %d %q; want \"get=unset\": the variable leaked into the next request", v, code, body)
		}
		if code, body := s.Get(t, "/closed"); code != 200 || body != v {
			t.Fatalf("GET /closed after /set?%s = %d %q; want %q (close() runs in the request's context)", v, code, body, v)
		}
	}
}
