package tests

// The parts of tests/cluster_test.go (issue 23): the network namespaces
// (examples/cluster/netns.sh), Redis, HAProxy with examples/cluster's
// haproxy.cfg, the turnstile hosts, and the clients (HTTP load and
// WebSocket room members) that dial from the clients' address.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// clusterChecks replaces the CHECK timings of examples/cluster/haproxy.cfg
// in the test (the example's are for production: a dead host out in ~3 s).
// With these a dead host is out in inter + 2 × fastinter (~400 ms); fall
// stays 3, so a loop stalled under 300 ms (two shared cores) does not take
// a host out.
const (
	clusterExampleChecks = "inter 2s fastinter 500ms downinter 1s fall 3 rise 2"
	clusterTestChecks    = "inter 200ms fastinter 100ms downinter 200ms fall 3 rise 2"
	// clusterDownWithin bounds kill → HAProxy's DOWN: inter + 2 ×
	// fastinter with the test's timings, plus slack for two shared cores.
	clusterDownWithin = 1500 * time.Millisecond
)

// cluster is one run's cluster: NET.1 the balancer and Redis, NET.2 the
// clients, hosts NET.11-13 in namespaces TAGh1-3.
type cluster struct {
	t       *testing.T
	dir     string // examples/cluster
	tag     string
	net     string // three octets
	lb      string // the balancer's frontend, NET.1:port
	sock    string // HAProxy's runtime API socket
	redis   string // NET.1:port
	redisC  *exec.Cmd
	redisMu sync.Mutex
	hosts   []*clusterHost
}

// clusterHost is one turnstile host; srv changes when it is started again.
type clusterHost struct {
	name, ns, addr string // h1, TAGh1, NET.11
	mu             sync.Mutex
	srv            *Server
}

func (h *clusterHost) server() *Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.srv
}

// clusterGate skips the cluster test unless it can and should run here.
//
// CI (.ci/run) runs `make test` once for CPython 3.11 and once for 3.12;
// the cluster exercises HAProxy, Redis and the master's process handling,
// none of which differs between them, so it runs once per CI run: only
// with the 3.11 binary (make builds bin/turnstile-3.11). TURNSTILE_CLUSTER=1
// runs it with any binary, TURNSTILE_CLUSTER=0 skips it.
func clusterGate(t *testing.T) {
	bin := binPath(t)
	switch os.Getenv("TURNSTILE_CLUSTER") {
	case "0":
		t.Skip("TURNSTILE_CLUSTER=0")
	case "1":
	default:
		if !strings.HasSuffix(bin, "-3.11") {
			t.Skipf("the cluster test runs once per CI run, with the 3.11 binary (TURNSTILE_CLUSTER=1 runs it with %s)", filepath.Base(bin))
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("the cluster test needs root (network namespaces)")
	}
	for _, c := range []string{"ip", "haproxy", "redis-server"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("the cluster test needs %s (scripts/test-deps installs it)", c)
		}
	}
}

// newCluster makes the namespaces and starts Redis, three hosts and
// HAProxy; all of it is torn down at cleanup, also when t fails.
func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, dir: filepath.Join(repoRoot(), "examples", "cluster")}
	pid := os.Getpid()
	c.tag = "ts" + strconv.Itoa(pid%10000000)
	c.net = "10.231." + strconv.Itoa(c.freeOctet(pid))
	script := filepath.Join(c.dir, "netns.sh")
	t.Cleanup(func() {
		// Whatever still runs in a namespace is ours (the hosts' workers).
		for _, h := range c.hosts {
			for _, p := range c.pidsIn(h) {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
		if out, err := exec.Command(script, "down", c.tag, c.net, "3").CombinedOutput(); err != nil {
			t.Errorf("netns.sh down: %v\n%s", err, out)
		}
	})
	if out, err := exec.Command(script, "up", c.tag, c.net, "3").CombinedOutput(); err != nil {
		t.Fatalf("netns.sh up %s %s: %v\n%s", c.tag, c.net, err, out)
	}
	c.redis = c.net + ".1:" + c.freePort()
	c.startRedis()
	for i := 1; i <= 3; i++ {
		h := &clusterHost{name: "h" + strconv.Itoa(i), ns: c.tag + "h" + strconv.Itoa(i), addr: c.net + "." + strconv.Itoa(10+i)}
		c.hosts = append(c.hosts, h)
	}
	var wg sync.WaitGroup
	for _, h := range c.hosts {
		s, listening := c.startHost(h)
		wg.Add(1)
		go func() { defer wg.Done(); <-listening }()
		_ = s
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the hosts did not listen within 90 s")
	}
	c.startHAProxy()
	for _, h := range c.hosts {
		c.waitStatus(h, "UP", 20*time.Second)
	}
	return c
}

// pidsIn lists the processes running in h's namespace (its master and
// workers: the worker processes have process groups of their own).
func (c *cluster) pidsIn(h *clusterHost) []int {
	out, _ := exec.Command("ip", "netns", "pids", h.ns).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// freeOctet picks the third octet of a /24 no interface has yet, from
// pid, so that runs side by side never share addresses.
func (c *cluster) freeOctet(pid int) int {
	out, _ := exec.Command("ip", "-4", "-o", "addr").Output()
	for i := 0; i < 200; i++ {
		o := 20 + (pid+i)%200
		if !strings.Contains(string(out), " 10.231."+strconv.Itoa(o)+".") {
			return o
		}
	}
	c.t.Fatal("no free 10.231.X.0/24")
	return 0
}

func (c *cluster) freePort() string {
	ln, err := net.Listen("tcp", c.net+".1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// startRedis starts redis-server on c.redis (no persistence); it is
// stopped at cleanup.
func (c *cluster) startRedis() {
	host, port, _ := net.SplitHostPort(c.redis)
	cmd := exec.Command("redis-server", "--bind", host, "--port", port, "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning")
	log, _ := os.Create(filepath.Join(c.t.TempDir(), "redis.log"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.redisMu.Lock()
	c.redisC = cmd
	c.redisMu.Unlock()
	c.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !waitFor(10*time.Second, func() bool {
		conn, err := net.DialTimeout("tcp", c.redis, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	}) {
		c.t.Fatalf("redis-server did not listen on %s", c.redis)
	}
}

// stopRedis stops Redis (SIGTERM) and waits for it to exit.
func (c *cluster) stopRedis() {
	c.redisMu.Lock()
	cmd := c.redisC
	c.redisMu.Unlock()
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

// startHost starts h's turnstile in its namespace, as README.md's
// command line has it (--workers 2 --proxy-protocol
// --forwarded-allow-ips NET.1), in its own process group.
func (c *cluster) startHost(h *clusterHost) (*Server, <-chan struct{}) {
	args := []string{"netns", "exec", h.ns, binPath(c.t),
		"--app-dir", c.dir, "--host", h.addr, "--port", "8000", "--admin-bind", h.addr + ":9191",
		"--workers", "2", "--proxy-protocol", "--forwarded-allow-ips", c.net + ".1",
		"--graceful-timeout", "5", "--log-format", "json"}
	if v := os.Getenv("TURNSTILE_VENV"); v != "" {
		args = append(args, "--venv", v)
	}
	cmd := exec.Command("ip", append(args, "rooms_site:application")...)
	cmd.Env = append(os.Environ(), "CLUSTER_HOST="+h.name, "REDIS_URL=redis://"+c.redis+"/0", "CLUSTER_STALL=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s, listening := startCmd(c.t, cmd)
	h.mu.Lock()
	h.srv = s
	h.mu.Unlock()
	return s, listening
}

// startHAProxy runs examples/cluster/haproxy.cfg with this run's
// addresses, port, socket and the test's check timings.
func (c *cluster) startHAProxy() {
	b, err := os.ReadFile(filepath.Join(c.dir, "haproxy.cfg"))
	if err != nil {
		c.t.Fatal(err)
	}
	dir := c.t.TempDir()
	c.sock = filepath.Join(dir, "haproxy.sock")
	c.lb = c.net + ".1:" + c.freePort()
	cfg := string(b)
	for _, r := range [][2]string{
		{"bind 10.231.0.1:8080", "bind " + c.lb},
		{"/run/haproxy-cluster.sock", c.sock},
		{clusterExampleChecks, clusterTestChecks},
		{"10.231.0.", c.net + "."},
	} {
		if !strings.Contains(cfg, r[0]) {
			c.t.Fatalf("examples/cluster/haproxy.cfg has no %q any more: update tests/cluster_parts_test.go", r[0])
		}
		cfg = strings.ReplaceAll(cfg, r[0], r[1])
	}
	path := filepath.Join(dir, "haproxy.cfg")
	os.WriteFile(path, []byte(cfg), 0o600)
	log, _ := os.Create(filepath.Join(dir, "haproxy.log"))
	cmd := exec.Command("haproxy", "-f", path, "-db")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGUSR1) // soft stop
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if c.t.Failed() {
			b, _ := os.ReadFile(log.Name())
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			c.t.Logf("haproxy log (tail):\n%s", b)
		}
	})
	if !waitFor(10*time.Second, func() bool { _, err := c.api("show info"); return err == nil }) {
		b, _ := os.ReadFile(log.Name())
		c.t.Fatalf("haproxy did not start:\n%s", b)
	}
}

// api sends one command to HAProxy's runtime API and returns its answer.
func (c *cluster) api(cmd string) (string, error) {
	conn, err := net.DialTimeout("unix", c.sock, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}

// status is HAProxy's status of h in `show stat`: UP, DOWN, DRAIN, MAINT,
// or a transition ("UP 1/2": one check failed).
func (c *cluster) status(h *clusterHost) string {
	out, err := c.api("show stat")
	if err != nil {
		return "error: " + err.Error()
	}
	lines := strings.Split(out, "\n")
	if len(lines) == 0 {
		return ""
	}
	col := -1
	for i, f := range strings.Split(strings.TrimPrefix(lines[0], "# "), ",") {
		if f == "status" {
			col = i
		}
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) > col && col >= 0 && f[0] == "turnstile" && f[1] == h.name {
			return f[col]
		}
	}
	return ""
}

// waitStatus waits until HAProxy reports h as want and returns how long
// that took; it fails t after d.
func (c *cluster) waitStatus(h *clusterHost, want string, d time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	var last string
	if !waitFor(d, func() bool { last = c.status(h); return last == want }) {
		c.t.Fatalf("HAProxy: %s is %q after %v, want %q", h.name, last, d, want)
	}
	return time.Since(start)
}

// setState runs `set server turnstile/<h> state <state>`.
func (c *cluster) setState(h *clusterHost, state string) {
	c.t.Helper()
	out, err := c.api("set server turnstile/" + h.name + " state " + state)
	if err != nil || strings.TrimSpace(out) != "" {
		c.t.Fatalf("set server %s state %s: %q %v", h.name, state, out, err)
	}
}

// clientDialer dials from the clients' address, NET.2.
func (c *cluster) clientDialer() *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(c.net + ".2")}, Timeout: 5 * time.Second}
}

func (c *cluster) httpClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: c.clientDialer().DialContext, MaxIdleConnsPerHost: 1}}
}

// who is the JSON of rooms_site's /who/.
type who struct {
	Host   string  `json:"host"`
	PID    int     `json:"pid"`
	Client string  `json:"client"`
	XFF    *string `json:"xff"`
}

// get GETs path through the balancer and decodes /who/-shaped JSON.
func (c *cluster) get(cl *http.Client, path string, header ...string) (int, who, error) {
	req, _ := http.NewRequest("GET", "http://"+c.lb+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, who{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	var w who
	json.Unmarshal(b, &w)
	return resp.StatusCode, w, err
}

// ---- HTTP load -------------------------------------------------------------------

// httpLoad is n clients each GETting /who/ through the balancer, one
// kept-alive connection each, with a pause of 10 ms between requests.
type httpLoad struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	ok     map[string]int // 200s per host
	failed []string       // "time: error or status"
}

func (c *cluster) startHTTPLoad(n int) *httpLoad {
	l := &httpLoad{stop: make(chan struct{}), ok: map[string]int{}}
	for i := 0; i < n; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			cl := c.httpClient()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				code, w, err := c.get(cl, "/who/")
				l.mu.Lock()
				switch {
				case err != nil:
					l.failed = append(l.failed, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
				case code != 200:
					l.failed = append(l.failed, fmt.Sprintf("%s: status %d", time.Now().Format("15:04:05.000"), code))
				default:
					l.ok[w.Host]++
				}
				l.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	c.t.Cleanup(l.Stop)
	return l
}

func (l *httpLoad) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// counts returns a copy of the 200s per host and the failures so far.
func (l *httpLoad) counts() (map[string]int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := map[string]int{}
	for k, v := range l.ok {
		ok[k] = v
	}
	return ok, append([]string(nil), l.failed...)
}

// ---- WebSocket room members ----------------------------------------------------------

// member is one WebSocket client of a room through the balancer that
// connects again (after 50 ms) whenever its session ends, until stopped.
type member struct {
	c    *cluster
	id   int
	room string
	stop chan struct{}
	done chan struct{}
	wmu  sync.Mutex // guards writes on conn
	mu   sync.Mutex
	conn *websocket.Conn
	// sessions: one per connection, in order; the last is the current
	// one while up is true.
	sessions []wsSession
	up       bool
	dialErrs int
	msgs     []roomMsg // every message of every session, in arrival order
}

type wsSession struct {
	host  string
	pid   int
	code  int // the close code that ended it (0: still open, -1: no close frame)
	ended time.Time
}

type roomMsg struct {
	Text string `json:"text"`
	From string `json:"from"`
}

func (c *cluster) startMember(id int, room string) *member {
	m := &member{c: c, id: id, room: room, stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	c.t.Cleanup(m.Stop)
	return m
}

func (m *member) run() {
	defer close(m.done)
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, NetDialContext: m.c.clientDialer().DialContext}
	for {
		select {
		case <-m.stop:
			return
		default:
		}
		conn, _, err := d.DialContext(context.Background(), "ws://"+m.c.lb+"/ws/room/"+m.room+"/", nil)
		if err != nil {
			m.mu.Lock()
			m.dialErrs++
			m.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var hello struct {
			Hello string `json:"hello"`
			PID   int    `json:"pid"`
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := conn.ReadJSON(&hello); err != nil || hello.Hello == "" {
			conn.Close()
			m.mu.Lock()
			m.dialErrs++
			m.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		conn.SetReadDeadline(time.Time{})
		m.mu.Lock()
		m.conn, m.up = conn, true
		m.sessions = append(m.sessions, wsSession{host: hello.Hello, pid: hello.PID})
		m.mu.Unlock()
		code := -1
		for {
			_, b, err := conn.ReadMessage()
			if err != nil {
				if ce, ok := err.(*websocket.CloseError); ok {
					code = ce.Code
				}
				break
			}
			var msg roomMsg
			if json.Unmarshal(b, &msg) == nil {
				m.mu.Lock()
				m.msgs = append(m.msgs, msg)
				m.mu.Unlock()
			}
		}
		conn.Close()
		m.mu.Lock()
		m.up = false
		m.sessions[len(m.sessions)-1].code = code
		m.sessions[len(m.sessions)-1].ended = time.Now()
		m.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop closes the member's session and ends its reconnecting.
func (m *member) Stop() {
	select {
	case <-m.stop:
		return
	default:
		close(m.stop)
	}
	m.mu.Lock()
	if m.conn != nil {
		m.conn.Close()
	}
	m.mu.Unlock()
	<-m.done
}

// current returns the current session's host ("" while reconnecting)
// and how many sessions the member has had.
func (m *member) current() (string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.up {
		return "", len(m.sessions)
	}
	return m.sessions[len(m.sessions)-1].host, len(m.sessions)
}

func (m *member) sessionsCopy() []wsSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]wsSession(nil), m.sessions...)
}

// send writes text on the current session.
func (m *member) send(text string) error {
	m.mu.Lock()
	conn, up := m.conn, m.up
	m.mu.Unlock()
	if !up {
		return fmt.Errorf("member %d: not connected", m.id)
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	return conn.WriteMessage(websocket.TextMessage, []byte(text))
}

// texts returns the texts received so far with prefix.
func (m *member) texts(prefix string) []roomMsg {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []roomMsg
	for _, msg := range m.msgs {
		if strings.HasPrefix(msg.Text, prefix) {
			out = append(out, msg)
		}
	}
	return out
}

// rawThrough sends raw bytes to addr from the clients' address and reads
// the answer (until EOF or 3 s of silence).
func (c *cluster) rawThrough(addr, raw string) string {
	conn, err := c.clientDialer().Dial("tcp", addr)
	if err != nil {
		c.t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	io.WriteString(conn, raw)
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	b, _ := io.ReadAll(bufio.NewReader(conn))
	return string(b)
}
