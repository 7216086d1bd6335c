package tests

// The environ values turnstile derives from the request head, for the
// inputs a review found wrong (testapps/environ_echo.py): each must be
// the one value PEP 3333 and RFC 9112 give.

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// environOf sends raw over conn and returns the app's JSON of the environ.
func environOf(t *testing.T, conn net.Conn, raw string) map[string]string {
	t.Helper()
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	resp, _ := ReadAll(conn, 10*time.Second)
	head, body, ok := strings.Cut(resp, "\r\n\r\n")
	if !ok || !strings.HasPrefix(head, "HTTP/1.1 200") {
		t.Fatalf("response to %q:\n%s", raw, resp)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return env
}

func TestEnviron_FromTheHead(t *testing.T) {
	s := Start(t, "environ_echo:app")
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// RFC 9110 §8.6: equal repeated Content-Length values are one length;
	// the environ had "2, 2", and Django's int() of it gave a 500.
	for _, cl := range []string{"Content-Length: 2\r\nContent-Length: 2\r\n", "Content-Length: 2, 2\r\n", "Content-Length: 002\r\n"} {
		env := environOf(t, dial(), "POST /p HTTP/1.1\r\nHost: x\r\n"+cl+"Connection: close\r\n\r\nab")
		if env["CONTENT_LENGTH"] != "2" || env["body"] != "ab" {
			t.Errorf("%q: CONTENT_LENGTH %q, body %q; want \"2\", \"ab\"", cl, env["CONTENT_LENGTH"], env["body"])
		}
	}
	// RFC 9112 §3.2.2: an absolute-form target's authority replaces Host.
	env := environOf(t, dial(), "GET http://other:81/env?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if env["HTTP_HOST"] != "other:81" || env["SERVER_NAME"] != "other" || env["SERVER_PORT"] != "81" || env["PATH_INFO"] != "/env" || env["QUERY_STRING"] != "q=1" {
		t.Errorf("absolute-form target: %v", env)
	}
	// RFC 9112 §3.2: an invalid Host value is a 400, the port included.
	for _, host := range []string{"EXAMPLE.com:abc", "a:b:80", "[::1]x"} {
		resp, _ := Raw(t, s.Addr, "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n", 10*time.Second)
		if !strings.HasPrefix(resp, "HTTP/1.1 400") {
			t.Errorf("Host: %s → %q, want 400", host, firstLine(resp))
		}
	}
	// Two different Content-Length headers from the app cannot both frame
	// the response: a 500, not the second value with the first's body.
	resp, _ := Raw(t, s.Addr, "GET /two-lengths HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 10*time.Second)
	if !strings.HasPrefix(resp, "HTTP/1.1 500") {
		t.Errorf("two Content-Length headers from the app → %q, want 500", firstLine(resp))
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.Logs(), "conflicting Content-Length headers: 3 and 5"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) { // the log line may reach us after the response
			t.Errorf("no log line names the conflicting lengths:\n%s", s.Logs())
			break
		}
	}
}

// PEP 3333: "SERVER_NAME and SERVER_PORT ... can never be empty strings".
// On a Unix socket without Host there is no port: the scheme's default.
// The client of a Unix socket is unnamed: REMOTE_ADDR is "" (gunicorn's
// value), not Go's "@" for an unnamed address, and there is no port.
func TestEnviron_UnixSocketWithoutHost(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	Start(t, "--uds", sock, "environ_echo:app")
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := environOf(t, c, "GET /env HTTP/1.0\r\n\r\n")
	if env["SERVER_PORT"] != "80" || env["SERVER_NAME"] == "" {
		t.Errorf("SERVER_NAME %q, SERVER_PORT %q; want both set, the port 80", env["SERVER_NAME"], env["SERVER_PORT"])
	}
	if env["REMOTE_ADDR"] != "" || env["REMOTE_PORT"] != "" {
		t.Errorf("REMOTE_ADDR %q, REMOTE_PORT %q over a Unix socket; want both empty", env["REMOTE_ADDR"], env["REMOTE_PORT"])
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

// A request answered 503 by --queue-timeout spent its whole time queued:
// the access log and the queue-wait histogram said 0 before.
func TestQueueTimeout_WaitIsLogged(t *testing.T) {
	s := Start(t, "--blocking-threads", "1", "--queue-timeout", "0.3", "--access-log", "--graceful-timeout", "1", "case_b33:app")
	c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")) // holds the one thread
	buf := make([]byte, 1024)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for got := ""; !strings.Contains(got, "tick"); {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("/stream: %v", err)
		}
		got += string(buf[:n])
	}
	resp, _ := Raw(t, s.Addr, "GET /fast HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
	if !strings.HasPrefix(resp, "HTTP/1.1 503") {
		t.Fatalf("/fast behind a busy thread: %q, want 503", firstLine(resp))
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(s.Logs(), "\n") {
			var rec struct {
				Msg       string  `json:"msg"`
				Target    string  `json:"target"`
				Status    int     `json:"status"`
				QueueWait float64 `json:"queue_wait_us"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "access" || rec.Target != "/fast" {
				continue
			}
			if rec.Status != 503 || rec.QueueWait < 250000 {
				t.Errorf("access record %s: want status 503 and queue_wait_us >= 250000", line)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("no access record for /fast:\n%s", s.Logs())
}
