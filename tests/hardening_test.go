package tests

// Fixes from a review of the TLS, HTTP/2, static and supervision
// features: the settings and the key password stay out of the app's
// environment, --http 2 over TLS refuses clients that did not negotiate
// h2, HTTP/2 and --static values that cannot work stop start-up, and a
// worker the master SIGKILLs is not blamed on the OOM killer.
// Apps: testapps/environ_app.py, h2_wsgi.py, sup_app.py, hello.py.

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/youmark/pkcs8"
)

// The master hands its settings to the workers in TURNSTILE_WORKER_SETTINGS,
// which holds --ssl-keyfile-password when it came from the file or the
// environment: the worker unsets it (and TURNSTILE_SSL_KEYFILE_PASSWORD)
// before Python starts, so neither os.environ nor a subprocess's
// environment shows the password.
func TestTLS_PasswordNotInAppEnviron(t *testing.T) {
	const secret = "pw-Zq81xK-s3cret"
	p := newPKI(t)
	der, err := pkcs8.MarshalPrivateKey(p.serverKey, []byte(secret), nil)
	if err != nil {
		t.Fatal(err)
	}
	enc := filepath.Join(p.dir, "key-enc.pem")
	writePEM(t, enc, "ENCRYPTED PRIVATE KEY", der)
	for _, source := range []string{"file", "env"} {
		t.Run(source, func(t *testing.T) {
			toml := "ssl-certfile = \"" + p.CertFile + "\"\nssl-keyfile = \"" + enc + "\"\n"
			env := cfEnv("TURNSTILE_POOL_TURN=1")
			if source == "file" {
				toml += "ssl-keyfile-password = \"" + secret + "\"\n"
			} else {
				env = append(env, "TURNSTILE_SSL_KEYFILE_PASSWORD="+secret)
			}
			file := cfWriteFile(t, toml)
			s := cfStart(t, env, "--config", file, "--workers", "2", "environ_app:app")
			var got struct {
				Environ map[string]string `json:"environ"`
				Child   string            `json:"child"`
			}
			for i := 0; i < 4; i++ { // both workers, most likely
				resp := getTLSJSON(t, p.httpsClient(), httpsURL(s), &got)
				resp.Body.Close()
				all, _ := json.Marshal(got.Environ)
				for _, leak := range []string{secret, "TURNSTILE_WORKER_SETTINGS", "TURNSTILE_SSL_KEYFILE_PASSWORD"} {
					if strings.Contains(string(all), leak) {
						t.Errorf("os.environ holds %q", leak)
					}
					if strings.Contains(got.Child, leak) {
						t.Errorf("a subprocess's environment holds %q", leak)
					}
				}
				if got.Environ["TURNSTILE_POOL_TURN"] != "1" {
					t.Errorf("os.environ lacks TURNSTILE_POOL_TURN=1; the other TURNSTILE_* variables must stay")
				}
				if t.Failed() {
					break
				}
			}
		})
	}
}

// --http 2 over TLS: a client offering only http/1.1 by ALPN, or no ALPN,
// completes the handshake (crypto/tls allows it) and gets no byte of
// HTTP/2 (no SETTINGS frame): one HTTP/1.1 505 naming --http 2, then the
// close, as on a plain connection.
func TestHTTP2_OnlyRefusesHTTP11ALPN(t *testing.T) {
	p := newPKI(t)
	s := Start(t, append(p.TLSArgs(), "--http", "2", "--log-level", "debug", "h2_wsgi:app")...)
	for _, protos := range [][]string{{"http/1.1"}, nil} {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.Addr,
			&tls.Config{RootCAs: p.Pool, NextProtos: protos})
		if err != nil {
			t.Fatalf("ALPN %v: handshake: %v", protos, err)
		}
		// Not a whole client preface: an HTTP/2 server would send its
		// SETTINGS and wait for the rest.
		io.WriteString(c, "\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		c.Close()
		if !bytes.HasPrefix(b, []byte("HTTP/1.1 505 ")) || !bytes.Contains(b, []byte("--http 2")) {
			t.Errorf("ALPN %v: got %d bytes %q; want one 505 naming --http 2", protos, len(b), b[:min(len(b), 40)])
		}
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("ALPN %v: not closed within 5 s", protos)
		}
	}
	// An h2 client is still served.
	cc := h2TLSConn(t, s.Addr, p)
	if code, _, _ := do(t, cc, "GET", "https://"+s.Addr+"/", nil); code != 200 {
		t.Errorf("h2 client: status %d; want 200", code)
	}
	if !strings.Contains(s.Logs(), "did not negotiate h2") {
		t.Errorf("no debug record of the closed connection")
	}
}

// HTTP/2 stream window below 65535 (a client may send that much before
// our SETTINGS) stops start-up with exit 2 naming the flag.
func TestConfig_HTTP2StreamWindowTooSmall(t *testing.T) {
	for _, v := range []string{"1", "65534"} {
		_, stderr, code := cfRun(t, cfEnv(), "check", "--http2-initial-stream-window-size", v, "hello:app")
		if code != 2 || !strings.Contains(stderr, "--http2-initial-stream-window-size "+v+": want 65535..2147483647") {
			t.Errorf("window %s: exit %d, stderr %q; want 2 naming the flag", v, code, stderr)
		}
	}
	if _, stderr, code := cfRun(t, cfEnv(), "check", "--http2-initial-stream-window-size", "65535", "hello:app"); code != 0 {
		t.Errorf("window 65535: exit %d, stderr %q; want 0", code, stderr)
	}
}

// The same --static URL prefix twice is a start-up error (exit 2, one
// line), not a silently ignored second mount.
func TestStatic_DuplicatePrefix(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, args := range [][]string{
		{"--static", "/static=" + a, "--static", "/static=" + b},
		{"--static", "/static=" + a, "--static", "/static/=" + b},
	} {
		_, stderr, code := cfRun(t, cfEnv(), append(args, "hello:app")...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(stderr, "already mounted") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line saying the prefix is already mounted", args, code, stderr)
		}
	}
}

// A second SIGTERM makes the master SIGKILL its workers: the "worker
// stopped" record says so, and does not suggest the OOM killer.
func TestSupervise_SecondSignalKillIsNotOOM(t *testing.T) {
	s := Start(t, "--workers", "1", "--graceful-timeout", "60s", "sup_app:app")
	c := dialSup(t, s.Addr)
	defer c.Close()
	io.WriteString(c, "GET /sleep?30 HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(time.Second)
	s.Signal(syscall.SIGTERM)
	supWaitLog(t, s, 10*time.Second, 1, "stopping: workers finish in-flight requests")
	s.Signal(syscall.SIGTERM)
	if code := s.Wait(20 * time.Second); code == -1 {
		t.Fatalf("the master did not exit after the second SIGTERM")
	}
	logs := s.Logs()
	if supCount(logs, "second signal: killing the workers now") != 1 {
		t.Fatalf("no \"second signal\" record:\n%s", logs)
	}
	found := false
	for _, rec := range supRecords(logs) {
		if rec["msg"] != "worker stopped" {
			continue
		}
		cause, _ := rec["cause"].(string)
		if strings.Contains(cause, "SIGKILL") {
			found = true
		}
		if strings.Contains(cause, "OOM") || rec["possible_oom"] == true {
			t.Errorf("\"worker stopped\" record blames the OOM killer: %v", rec)
		}
	}
	if !found {
		t.Errorf("no \"worker stopped\" record with a SIGKILL cause:\n%s", logs)
	}
}
