package http1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// corpusEntry is one request of testdata/smuggling-corpus.txt (its header
// says where the requests come from and what each EXPECT means).
type corpusEntry struct {
	name, expect string
	status       int
	raw          string
}

func loadCorpus(t testing.TB, path string) []corpusEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusEntry
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 {
			t.Fatalf("%s:%d: want NAME EXPECT STATUS \"RAW\"", path, i+1)
		}
		status, err1 := strconv.Atoi(f[2])
		raw, err2 := strconv.Unquote(f[3])
		if err1 != nil || err2 != nil {
			t.Fatalf("%s:%d: %v %v", path, i+1, err1, err2)
		}
		switch f[1] {
		case "reject", "reject-body", "accept":
		default:
			t.Fatalf("%s:%d: unknown EXPECT %q", path, i+1, f[1])
		}
		out = append(out, corpusEntry{f[0], f[1], status, raw})
	}
	if len(out) == 0 {
		t.Fatalf("%s: no entries", path)
	}
	return out
}

// TestB16_SmugglingCorpus runs every request of the public smuggling
// corpus (testdata/smuggling-corpus.txt: defparam/smuggler's and
// PortSwigger http-request-smuggler's Transfer-Encoding and Content-Length
// mutations, and the latter's chunk-size tricks) against the server: one
// response each, a close wherever framing is in doubt, a connection that
// stays usable where the request is valid, and no hidden request ever
// reaching the handler. tests/http1_test.go runs the same file against the
// real binary.
func TestB16_SmugglingCorpus(t *testing.T) {
	ts := newTestServer(t, func(s *Server) { s.Logger = discardLogger }) // a thousand rejections
	for _, e := range loadCorpus(t, "testdata/smuggling-corpus.txt") {
		t.Run(e.name, func(t *testing.T) {
			before := len(ts.served())
			switch e.expect {
			case "accept":
				out, err := acceptExchange(ts.addr, e)
				if err != nil {
					t.Errorf("%v\n%q", err, out)
				}
			default:
				out, eof := ts.exchange(t, e.raw, 5*time.Second)
				if got := statuses(out); len(got) != 1 || got[0] != e.status {
					t.Errorf("statuses = %v; want [%d]\n%q", got, e.status, out)
				}
				if !eof {
					t.Errorf("connection left open after %d; want a close", e.status)
				}
				if !strings.Contains(out, "Connection: close\r\n") {
					t.Errorf("response lacks Connection: close:\n%q", out)
				}
			}
			served := ts.served()[before:]
			for _, p := range served {
				if strings.HasPrefix(p, "/smuggled/") {
					t.Errorf("hidden request %s reached the handler", p)
				}
			}
			want := map[string]int{"reject": 0, "accept": 2}[e.expect] // accept: the request and the follow-up
			if e.expect != "reject-body" && len(served) != want {
				t.Errorf("handler saw %v; want %d request(s)", served, want)
			}
		})
	}
}

// acceptExchange sends an "accept" entry, reads exactly one response,
// then sends a follow-up request on the same connection and reads its
// response and the close: a leftover byte taken for a request would show
// as an extra or a wrong response.
func acceptExchange(addr string, e corpusEntry) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var log bytes.Buffer
	br := bufio.NewReader(io.TeeReader(c, &log))
	if _, err := io.WriteString(c, e.raw); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
	if err != nil {
		return log.String(), fmt.Errorf("reading the response: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != e.status || resp.Close {
		return log.String(), fmt.Errorf("status %d close=%v; want %d and a kept connection", resp.StatusCode, resp.Close, e.status)
	}
	probe := "/probe/" + e.name
	if _, err := io.WriteString(c, "GET "+probe+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"); err != nil {
		return log.String(), fmt.Errorf("follow-up request: %v", err)
	}
	resp, err = http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		return log.String(), fmt.Errorf("reading the follow-up response: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(probe)) {
		return log.String(), fmt.Errorf("follow-up got %d %q; want 200 for %s", resp.StatusCode, body, probe)
	}
	if n, _ := br.Read(make([]byte, 1)); n != 0 {
		return log.String(), fmt.Errorf("bytes after the follow-up response")
	}
	return log.String(), nil
}
