package tests

// Deployment (issue 9): systemd socket activation started the way systemd
// does it, sd_notify, --user/--group, --umask. These run as root (as the
// tests do here and in CI). App: testapps/conf_app.py.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dpArgs is the binary and its arguments as Command builds them.
func dpArgs(t *testing.T, args ...string) []string {
	return Command(t, args...).Args
}

// dpGet sends one HTTP/1.1 request on c and returns the response.
func dpGet(t *testing.T, c net.Conn) (int, map[string]any) {
	t.Helper()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// dpProcStatus returns the fields of /proc/<pid>/status.
func dpProcStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// dpWorkerPids returns the pids of the master's children (its workers),
// from every thread's children list (the master forks from one thread).
func dpWorkerPids(t *testing.T, master int) []int {
	t.Helper()
	files, err := filepath.Glob("/proc/" + strconv.Itoa(master) + "/task/*/children")
	if err != nil || len(files) == 0 {
		t.Fatalf("no /proc/%d/task/*/children: %v", master, err)
	}
	var pids []int
	for _, file := range files {
		b, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			pids = append(pids, n)
		}
	}
	return pids
}

// systemd-socket-activate (Debian's systemd package) listens on a Unix
// socket and, at the first connection, execs turnstile with the socket as
// fd 3, LISTEN_FDS=1 and LISTEN_PID: exactly what systemd does for a
// .socket unit. That first connection is served; the socket file is
// systemd's and stays after turnstile stops.
func TestDeploy_SocketActivationSystemd(t *testing.T) {
	tool, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Fatal("systemd-socket-activate is not installed (Debian package systemd; .ci/run installs it)")
	}
	sock := filepath.Join(t.TempDir(), "ts.sock")
	args := append([]string{"-l", sock}, dpArgs(t, "--workers", "2", "conf_app:app")...)
	cmd := exec.Command(tool, args...)
	cmd.Dir = AppDir()
	type result struct {
		code int
		m    map[string]any
	}
	first := make(chan result, 1)
	go func() {
		// The tool binds, then waits for a connection before exec.
		deadline := time.Now().Add(30 * time.Second)
		var c net.Conn
		for {
			var err error
			if c, err = net.Dial("unix", sock); err == nil {
				break
			}
			if time.Now().After(deadline) {
				first <- result{code: -1}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		defer c.Close()
		code, m := dpGet(t, c)
		first <- result{code, m}
	}()
	s := cfStartCmd(t, cmd)
	var r result
	select {
	case r = <-first:
	case <-time.After(60 * time.Second):
		t.Fatalf("the first connection was not answered:\n%s", s.Logs())
	}
	if r.code != 200 {
		t.Fatalf("first request through the activated socket: %d", r.code)
	}
	if r.m["listen_fds"] != nil {
		t.Errorf("the app sees LISTEN_FDS=%v: it must be unset", r.m["listen_fds"])
	}
	if supCount(s.Logs(), "using the socket systemd passed (socket activation); --host, --port and --uds are not used") != 1 {
		t.Errorf("no socket activation record")
	}
	if s.Addr != "unix:"+sock {
		t.Errorf("listening on %q, want unix:%s", s.Addr, sock)
	}
	for i := 0; i < 5; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := dpGet(t, c); code != 200 {
			t.Errorf("request %d: %d", i, code)
		}
		c.Close()
	}
	if code := s.Stop(); code != 0 {
		t.Errorf("exit status %d", code)
	}
	if _, err := os.Stat(sock); err != nil {
		t.Errorf("the socket file of systemd was removed: %v", err)
	}
}

// The same by hand over TCP, with a socket the test owns, as systemd
// holds it across restarts: a connection made while no turnstile runs
// waits in the socket's queue and is served by the next start (no SYN
// filter left on systemd's socket, which stays open).
func TestDeploy_SocketActivationTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := func() *Server {
		args := append([]string{"-c", `export LISTEN_PID=$$ LISTEN_FDS=1; exec "$@"`, "sh"},
			dpArgs(t, "--workers", "2", "conf_app:app")...)
		cmd := exec.Command("sh", args...)
		cmd.Dir = AppDir()
		cmd.Env = cfEnv()
		cmd.ExtraFiles = []*os.File{f} // fd 3
		return cfStartCmd(t, cmd)
	}
	s := start()
	if s.Addr != ln.Addr().String() {
		t.Fatalf("listening on %s, want the passed socket %s", s.Addr, ln.Addr())
	}
	for i := 0; i < 10; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if code, m := dpGet(t, c); code != 200 || m["listen_fds"] != nil {
			t.Errorf("request %d: %d %v", i, code, m)
		}
		c.Close()
	}
	if code := s.Stop(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	// No turnstile now: the kernel still completes the handshake.
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("connecting while stopped: %v (a SYN filter left on the socket?)", err)
	}
	defer c.Close()
	done := make(chan int, 1)
	go func() { code, _ := dpGet(t, c); done <- code }()
	s2 := start()
	select {
	case code := <-done:
		if code != 200 {
			t.Errorf("the connection made between two starts: %d", code)
		}
	case <-time.After(60 * time.Second):
		t.Errorf("the connection made between two starts was not served:\n%s", s2.Logs())
	}
}

// sd_notify: READY=1 (with MAINPID) once every worker is ready,
// RELOADING=1 on SIGHUP then READY=1 when the rolling restart is done,
// STOPPING=1 on SIGTERM; the workers do not see NOTIFY_SOCKET.
func TestDeploy_Notify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := nc.ReadFromUnix(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func(want string) string {
		t.Helper()
		select {
		case m := <-msgs:
			if !strings.Contains("\n"+m+"\n", "\n"+want+"\n") {
				t.Fatalf("notification %q, want %s", m, want)
			}
			return m
		case <-time.After(60 * time.Second):
			t.Fatalf("no %s notification", want)
		}
		return ""
	}
	s := cfStart(t, cfEnv("NOTIFY_SOCKET="+path), "--workers", "2", "conf_app:app")
	m := next("READY=1")
	if !strings.Contains(m, "MAINPID="+strconv.Itoa(s.PID)+"\n") || !strings.Contains(m, "STATUS=") {
		t.Errorf("READY message %q lacks MAINPID=%d or STATUS", m, s.PID)
	}
	if app := cfApp(t, s); app["notify_socket"] != nil {
		t.Errorf("a worker sees NOTIFY_SOCKET=%v", app["notify_socket"])
	}
	s.Signal(syscall.SIGHUP)
	if m := next("RELOADING=1"); !strings.Contains(m, "MONOTONIC_USEC=") {
		t.Errorf("RELOADING message %q lacks MONOTONIC_USEC", m)
	}
	next("READY=1")
	// The master logs the second replacement before it notifies.
	supWaitLog(t, s, 10*time.Second, 2, "worker replaced", "cause", "hup")
	s.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if code := s.Wait(30 * time.Second); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

// dpReachable makes sure other users can traverse every directory above
// paths (the service user must reach the Python the binary links and the
// app), restoring the modes at cleanup. Here and in CI pyenv's Python is
// under /root (0700); a real deployment installs it under /usr or /opt.
func dpReachable(t *testing.T, paths ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range paths {
		for dir := p; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
			if seen[dir] {
				continue
			}
			seen[dir] = true
			fi, err := os.Stat(dir)
			if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o001 != 0 {
				continue
			}
			mode := fi.Mode().Perm()
			if err := os.Chmod(dir, mode|0o001); err != nil {
				t.Fatalf("chmod o+x %s: %v", dir, err)
			}
			t.Logf("made %s traversable (o+x) for the test; restored at cleanup", dir)
			t.Cleanup(func() { os.Chmod(dir, mode) })
		}
	}
}

// dpPythonHome is the directory of the virtualenv's base Python.
func dpPythonHome(t *testing.T) string {
	venv := os.Getenv("TURNSTILE_VENV")
	b, err := os.ReadFile(filepath.Join(venv, "pyvenv.cfg"))
	if err != nil {
		t.Fatalf("TURNSTILE_VENV: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "home" {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no home in pyvenv.cfg")
	return ""
}

// --user nobody --group nogroup: the master binds and stays root; the
// workers (and their replacements) run as nobody:nogroup with no other
// group, and still serve their admin socket.
func TestDeploy_UserGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (as make test does here and in CI)")
	}
	bin, _ := filepath.Abs(binPath(t))
	real, _ := filepath.EvalSymlinks(bin)
	dpReachable(t, dpPythonHome(t), os.Getenv("TURNSTILE_VENV"), AppDir(), real)
	// check imports the app as the workers will: as nobody.
	if out, stderr, code := cfRun(t, cfEnv(), "check", "--user", "nobody", "--group", "nogroup", "conf_app:app"); code != 0 {
		t.Fatalf("check --user nobody: exit %d\n%s%s", code, out, stderr)
	}
	private := t.TempDir() // 0700 root: nobody cannot read the app there
	if err := os.WriteFile(filepath.Join(private, "private_app.py"), []byte("def app(e, s):\n    pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The master refuses an app directory the user cannot read before it
	// forks (issue 28), as check does: one line, exit 2.
	if _, stderr, code := cfRun(t, cfEnv(), "check", "--app-dir", private, "--user", "nobody", "private_app:app"); code != 2 ||
		!strings.HasPrefix(stderr, "turnstile: --user nobody cannot ") || !strings.Contains(stderr, private+", the app directory") ||
		strings.Count(stderr, "\n") != 1 {
		t.Errorf("check --user nobody of an app nobody cannot read: exit %d, want 2 and one line naming it\n%s", code, stderr)
	}
	// A module nobody cannot read in a directory it can: check imports it
	// as nobody and fails there, exit 1.
	open := t.TempDir()
	dpReachable(t, open)
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(open, "private_app.py"), []byte("def app(e, s):\n    pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := cfRun(t, cfEnv(), "check", "--app-dir", open, "--user", "nobody", "private_app:app"); code != 1 {
		t.Errorf("check --user nobody of a module nobody cannot read: exit %d, want 1\n%s", code, stderr)
	}
	if _, stderr, code := cfRun(t, cfEnv(), "check", "--app-dir", private, "private_app:app"); code != 0 {
		t.Errorf("check of the same app as root: exit %d\n%s", code, stderr)
	}
	s := cfStart(t, cfEnv(), "--user", "nobody", "--group", "nogroup", "--workers", "2", "conf_app:app")
	check := func() {
		t.Helper()
		pids := dpWorkerPids(t, s.PID)
		if len(pids) != 2 {
			t.Fatalf("workers %v, want 2", pids)
		}
		for _, pid := range pids {
			st := dpProcStatus(t, pid)
			if st["Uid"] != "65534 65534 65534 65534" || st["Gid"] != "65534 65534 65534 65534" || st["Groups"] != "65534" {
				t.Errorf("worker %d: Uid %q Gid %q Groups %q, want nobody:nogroup", pid, st["Uid"], st["Gid"], st["Groups"])
			}
		}
		if st := dpProcStatus(t, s.PID); st["Uid"] != "0 0 0 0" {
			t.Errorf("master Uid %q, want root", st["Uid"])
		}
		m := cfApp(t, s)
		if m["uid"] != float64(65534) || m["gid"] != float64(65534) {
			t.Errorf("the app runs as %v:%v", m["uid"], m["gid"])
		}
		resp, err := http.Get(s.Admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("/readyz %d %s (workers' admin sockets)", resp.StatusCode, b)
		}
	}
	check()
	s.Signal(syscall.SIGHUP)
	supWaitLog(t, s, 60*time.Second, 2, "worker replaced", "cause", "hup")
	supWaitLog(t, s, 60*time.Second, 2, "worker stopped")
	check()
	if code := s.Stop(); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

// --umask applies in the master before it creates the Unix socket and the
// pid file, and the workers inherit it.
func TestDeploy_Umask(t *testing.T) {
	dir := t.TempDir()
	sock, pidFile := filepath.Join(dir, "u.sock"), filepath.Join(dir, "turnstile.pid")
	s := cfStart(t, cfEnv(), "--umask", "0o077", "--uds", sock, "--pid-file", pidFile, "conf_app:app")
	for path, want := range map[string]os.FileMode{sock: 0o700, pidFile: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(path), fi.Mode().Perm(), want)
		}
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}, Timeout: 30 * time.Second}
	resp, err := client.Get("http://turnstile/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET over --uds: %d", resp.StatusCode)
	}
	for _, pid := range dpWorkerPids(t, s.PID) {
		if u := dpProcStatus(t, pid)["Umask"]; u != "0077" {
			t.Errorf("worker %d: Umask %q, want 0077", pid, u)
		}
	}
	if code := s.Stop(); code != 0 {
		t.Errorf("exit status %d", code)
	}
}
