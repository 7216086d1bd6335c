package tests

// TestCluster (issue 23): examples/cluster on one machine. Three turnstile
// hosts (--workers 2 --proxy-protocol), each in its own network namespace,
// behind HAProxy (the example's haproxy.cfg with short checks), with
// Redis between them (channels_redis), serving examples/cluster's
// rooms_site. Parts: cluster_parts_test.go. Root only; once per CI run
// (clusterGate). Steps, in order, on one cluster:
//
//  1. spread: room members land on every host; a group send from a
//     session on each host reaches every member, in order.
//  2. bad input: a forged X-Forwarded-For or PROXY header through the
//     balancer changes nothing; a host whose /readyz is 503 gets no traffic.
//  3. rolling deploy under HTTP + WebSocket load: 0 failed requests, every
//     member of a restarted host gets 1012 and reconnects.
//  4. SIGKILL of a host's master: DOWN within the check interval, only
//     in-flight requests fail, its members reconnect elsewhere; restarted,
//     it takes new connections.
//  5. Redis restarted: HTTP keeps serving, group messages resume (the gap
//     and the errors are logged).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

func TestCluster(t *testing.T) {
	clusterGate(t)
	start := time.Now()
	c := newCluster(t)
	t.Logf("cluster up in %v (net %s.0/24, balancer %s, redis %s)", time.Since(start).Round(time.Millisecond), c.net, c.lb, c.redis)

	// ---- 1. spread and fan-out -------------------------------------------------
	var members []*member
	for i := 0; i < 9; i++ {
		members = append(members, c.startMember(i, "r1"))
	}
	byHost := waitMembersUp(t, members, 15*time.Second)
	for _, h := range c.hosts {
		if len(byHost[h.name]) == 0 {
			t.Fatalf("no member landed on %s: %v", h.name, hostsOf(members))
		}
	}
	t.Logf("members per host: %v", hostsOf(members))
	fanOut(t, members, byHost, "a", 20)

	// ---- 2. bad input ---------------------------------------------------------------
	cl := c.httpClient()
	code, w, err := c.get(cl, "/who/", "X-Forwarded-For", "198.51.100.7", "Forwarded", "for=198.51.100.7")
	if err != nil || code != 200 || w.Client != c.net+".2" || w.XFF != nil {
		t.Fatalf("forged X-Forwarded-For through the balancer: %d %+v %v; want client %s.2 and no X-Forwarded-For", code, w, err, c.net)
	}
	// A PROXY header from a client is not the balancer's: HAProxy takes it
	// for a bad request line.
	if got := c.rawThrough(c.lb, "PROXY TCP4 198.51.100.7 "+c.net+".1 4711 80\r\nGET /who/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400") || strings.Contains(got, "198.51.100.7") {
		t.Fatalf("a client's PROXY v1 header through the balancer: got %q, want a 400", got)
	}
	hdr := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP("198.51.100.7"), Port: 4711}, &net.TCPAddr{IP: net.ParseIP(c.net + ".1"), Port: 80})
	v2, _ := hdr.Format()
	if got := c.rawThrough(c.lb, string(v2)+"GET /who/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400") || strings.Contains(got, "198.51.100.7") {
		t.Fatalf("a client's PROXY v2 header through the balancer: got %q, want a 400", got)
	}
	// Straight to a host from a client: a PROXY header from a peer not in
	// --forwarded-allow-ips closes the connection.
	h1 := c.hosts[0]
	if got := c.rawThrough(h1.addr+":8000", string(v2)+"GET /who/ HTTP/1.1\r\nHost: x\r\n\r\n"); strings.Contains(got, "198.51.100.7") || strings.Contains(got, " 200 ") {
		t.Fatalf("a client's PROXY header straight to %s: got %q, want the connection closed", h1.name, got)
	}
	// From the balancer's address the PROXY header is believed, and an
	// X-Forwarded-For after it is not: the client it names (198.51.100.7)
	// is not a trusted proxy.
	bal := dialFrom(t, c.net+".1", h1.addr+":8000")
	bal.Write(v2)
	got := exchange(t, bal, bufio.NewReader(bal), "/who/", "X-Forwarded-For: 203.0.113.9")
	if got["client"] != "198.51.100.7" {
		t.Fatalf("PROXY v2 from the balancer with X-Forwarded-For: client %v, want 198.51.100.7", got["client"])
	}
	// A host whose /readyz is 503 (one worker's loop stalled 3 s) gets no
	// traffic.
	h3 := c.hosts[2]
	stalled := make(chan error, 1)
	go func() {
		resp, err := c.httpClient().Get("http://" + h3.addr + ":8000/stall/?s=3")
		if err == nil {
			resp.Body.Close()
		}
		stalled <- err
	}()
	took := c.waitStatus(h3, "DOWN", 3*time.Second)
	t.Logf("stalled %s: DOWN after %v", h3.name, took.Round(time.Millisecond))
	for i := 0; i < 30; i++ {
		code, w, err := c.get(cl, "/who/")
		if err != nil || code != 200 || w.Host == h3.name {
			t.Fatalf("request %d while %s is not ready: %d %+v %v", i, h3.name, code, w, err)
		}
	}
	if err := <-stalled; err != nil {
		t.Fatalf("/stall/ on %s: %v", h3.name, err)
	}
	c.waitStatus(h3, "UP", 10*time.Second)

	// ---- 3. rolling deploy under load ------------------------------------------------
	load := c.startHTTPLoad(6)
	time.Sleep(300 * time.Millisecond)
	deployStart := time.Now()
	for _, h := range c.hosts {
		on := membersOn(members, h.name)
		c.setState(h, "drain")
		s := h.server()
		before := strings.Count(s.Logs(), `"msg":"worker replaced"`)
		s.Signal(syscall.SIGHUP)
		if !waitFor(60*time.Second, func() bool { return strings.Count(s.Logs(), `"msg":"worker replaced"`) >= before+2 }) {
			t.Fatalf("SIGHUP on %s: both workers not replaced within 60 s", h.name)
		}
		// Its sessions got 1012 as the old workers stopped, and were
		// taken by the other hosts while this one drains.
		for _, m := range on {
			waitReconnected(t, m, h.name, websocketCode1012, 15*time.Second)
		}
		c.setState(h, "ready")
		c.waitStatus(h, "UP", 10*time.Second)
		t.Logf("rolling deploy: %s done at %v, %d members reconnected after 1012", h.name, time.Since(deployStart).Round(time.Millisecond), len(on))
	}
	ok, failed := load.counts()
	if len(failed) > 0 {
		t.Fatalf("rolling deploy: %d failed HTTP requests, want 0: %v", len(failed), failed)
	}
	t.Logf("rolling deploy: %v, HTTP 200s per host %v, 0 failed", time.Since(deployStart).Round(time.Millisecond), ok)
	byHost = waitMembersUp(t, members, 15*time.Second)
	fanOut(t, members, byHost, "b", 10)

	// ---- 4. SIGKILL of a host's master -----------------------------------------------
	h2 := c.hosts[1]
	on := membersOn(members, h2.name)
	okBefore, failedBefore := load.counts()
	s := h2.server()
	killedAt := time.Now()
	syscall.Kill(s.PID, syscall.SIGKILL)
	took = c.waitStatus(h2, "DOWN", 5*time.Second)
	if took > clusterDownWithin {
		t.Errorf("SIGKILL of %s's master: DOWN after %v, want within %v (inter + 2 × fastinter)", h2.name, took, clusterDownWithin)
	}
	for _, m := range on {
		waitReconnected(t, m, h2.name, 0, 15*time.Second)
	}
	// The workers (parent-death SIGTERM) finish and go; then it starts again.
	if !waitFor(20*time.Second, func() bool { return len(c.pidsIn(h2)) == 0 }) {
		t.Fatalf("%s's workers still run 20 s after its master was killed", h2.name)
	}
	_, failedKill := load.counts()
	failedKill = failedKill[len(failedBefore):]
	// Each of the 6 clients has one request in flight at most.
	if len(failedKill) > 6 {
		t.Fatalf("SIGKILL of %s: %d failed requests, want at most the 6 in flight: %v", h2.name, len(failedKill), failedKill)
	}
	t.Logf("SIGKILL of %s's master: DOWN after %v, %d failed requests %v, %d members reconnected elsewhere, workers gone after %v",
		h2.name, took.Round(time.Millisecond), len(failedKill), failedKill, len(on), time.Since(killedAt).Round(time.Millisecond))
	_, listening := c.startHost(h2)
	WaitListening(t, h2.server(), listening, 60*time.Second)
	c.waitStatus(h2, "UP", 10*time.Second)
	// leastconn: the host back, with no sessions, takes the new ones.
	var fresh []*member
	for i := 0; i < 3; i++ {
		fresh = append(fresh, c.startMember(100+i, "r1"))
	}
	waitMembersUp(t, fresh, 15*time.Second)
	if len(membersOn(fresh, h2.name)) == 0 {
		t.Fatalf("%s back: no new member landed on it: %v", h2.name, hostsOf(fresh))
	}
	okH2 := okBefore[h2.name]
	if !waitFor(5*time.Second, func() bool { ok, _ := load.counts(); return ok[h2.name] > okH2 }) {
		t.Fatalf("%s back: no HTTP request reached it", h2.name)
	}
	members = append(members, fresh...)
	byHost = waitMembersUp(t, members, 15*time.Second)
	fanOut(t, members, byHost, "c", 10)

	// ---- 5. Redis restarted -------------------------------------------------------------
	_, failedBefore = load.counts()
	pushes, pushErrs := 0, 0
	stopPush := make(chan struct{})
	pushDone := make(chan struct{})
	go func() {
		defer close(pushDone)
		pc := c.httpClient()
		for i := 0; ; i++ {
			select {
			case <-stopPush:
				return
			default:
			}
			code, _, err := c.get(pc, "/push/r1/?text=p-"+strconv.Itoa(i))
			pushes++
			if err != nil || code != 200 {
				pushErrs++
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	down := time.Now()
	c.stopRedis()
	time.Sleep(time.Second)
	c.startRedis()
	up := time.Now()
	// Resumed: a message sent now reaches every member (reconnected or not).
	var resumed time.Duration
	for i := 0; ; i++ {
		text := "r-" + strconv.Itoa(i)
		pc := c.httpClient()
		c.get(pc, "/push/r1/?text="+text)
		if waitFor(time.Second, func() bool {
			for _, m := range members {
				if len(m.texts(text)) == 0 {
					return false
				}
			}
			return true
		}) {
			resumed = time.Since(down)
			break
		}
		if time.Since(up) > 20*time.Second {
			t.Fatalf("Redis restarted: group messages did not resume within 20 s; members %v", hostsOf(members))
		}
	}
	close(stopPush)
	<-pushDone
	_, failedRedis := load.counts()
	failedRedis = failedRedis[len(failedBefore):]
	reconnects := 0
	for _, m := range members {
		for _, ss := range m.sessionsCopy() {
			if !ss.ended.IsZero() && ss.ended.After(down) {
				reconnects++
			}
		}
	}
	t.Logf("Redis restarted (down %v): group messages reached every member again %v after it stopped; /push/ %d of %d failed; %d member sessions ended; /who/ failures %d",
		up.Sub(down).Round(time.Millisecond), resumed.Round(time.Millisecond), pushErrs, pushes, reconnects, len(failedRedis))
	if len(failedRedis) > 0 {
		t.Fatalf("Redis restarted: %d failed /who/ requests, want 0 (HTTP needs no Redis): %v", len(failedRedis), failedRedis)
	}
	load.Stop()
	t.Logf("TestCluster: %v", time.Since(start).Round(time.Millisecond))
}

// websocketCode1012 is "Service Restart" (RFC 6455 §7.4.1; IANA registry).
const websocketCode1012 = 1012

// waitMembersUp waits until every member has a session and returns them
// by host.
func waitMembersUp(t *testing.T, ms []*member, d time.Duration) map[string][]*member {
	t.Helper()
	if !waitFor(d, func() bool {
		for _, m := range ms {
			if h, _ := m.current(); h == "" {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("members not all connected within %v: %v", d, hostsOf(ms))
	}
	by := map[string][]*member{}
	for _, m := range ms {
		h, _ := m.current()
		by[h] = append(by[h], m)
	}
	return by
}

func membersOn(ms []*member, host string) []*member {
	var out []*member
	for _, m := range ms {
		if h, _ := m.current(); h == host {
			out = append(out, m)
		}
	}
	return out
}

// hostsOf is each member's current host ("" while reconnecting).
func hostsOf(ms []*member) []string {
	var out []string
	for _, m := range ms {
		h, n := m.current()
		out = append(out, fmt.Sprintf("%d:%s/%d", m.id, h, n))
	}
	return out
}

// waitReconnected waits until m's session on host ended (with code, when
// code is not 0) and m is connected to another host.
func waitReconnected(t *testing.T, m *member, host string, code int, d time.Duration) {
	t.Helper()
	var ss []wsSession
	if !waitFor(d, func() bool {
		ss = m.sessionsCopy()
		h, _ := m.current()
		if h == "" || h == host {
			return false
		}
		for _, s := range ss {
			if s.host == host && s.code != 0 && (code == 0 || s.code == code) {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("member %d: not reconnected away from %s (close code %d) within %v: sessions %+v", m.id, host, code, d, ss)
	}
}

// fanOut has one member on each host send n messages "<tag><k>-<i>" to the
// room, and checks that every member gets every message, each sender's in
// the order sent, marked with the sender's host.
func fanOut(t *testing.T, ms []*member, byHost map[string][]*member, tag string, n int) {
	t.Helper()
	var senders []*member
	for _, on := range byHost {
		senders = append(senders, on[0])
	}
	sentFrom := map[string]string{}
	for i := 0; i < n; i++ {
		for k, s := range senders {
			text := fmt.Sprintf("%s%d-%d", tag, k, i)
			sentFrom[text], _ = s.current()
			if err := s.send(text); err != nil {
				t.Fatalf("fan-out %s: send %s: %v", tag, text, err)
			}
		}
	}
	want := n * len(senders)
	if !waitFor(15*time.Second, func() bool {
		for _, m := range ms {
			if len(m.texts(tag)) < want {
				return false
			}
		}
		return true
	}) {
		var counts []string
		for _, m := range ms {
			h, _ := m.current()
			counts = append(counts, fmt.Sprintf("%d@%s:%d", m.id, h, len(m.texts(tag))))
		}
		t.Fatalf("fan-out %s: not every member got the %d messages within 15 s: %v", tag, want, counts)
	}
	for _, m := range ms {
		next := map[int]int{}
		for _, msg := range m.texts(tag) {
			var k, i int
			fmt.Sscanf(strings.TrimPrefix(msg.Text, tag), "%d-%d", &k, &i)
			if i != next[k] {
				b, _ := json.Marshal(m.texts(tag))
				t.Fatalf("fan-out %s: member %d got sender %d's message %d where %d was due: %s", tag, m.id, k, i, next[k], b)
			}
			next[k]++
			if msg.From != sentFrom[msg.Text] {
				t.Fatalf("fan-out %s: member %d: %s from %q, sent from %q", tag, m.id, msg.Text, msg.From, sentFrom[msg.Text])
			}
		}
	}
	t.Logf("fan-out %s: %d senders on %d hosts × %d messages reached all %d members in order", tag, len(senders), len(byHost), n, len(ms))
}
