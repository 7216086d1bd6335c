package tests

// h2spec (github.com/summerwind/h2spec, a Go tool of this module: `go tool
// h2spec`) against h2c with prior knowledge and against h2 over TLS.
// Failures must be listed, with a reason, in h2spec-allow.txt.

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// h2specAllow reads h2spec-allow.txt: mode → test id → reason.
func h2specAllow(t *testing.T) map[string]map[string]string {
	f, err := os.Open("h2spec-allow.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	allow := map[string]map[string]string{"h2c": {}, "tls": {}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			t.Fatalf("h2spec-allow.txt: %q: want MODE TEST-ID REASON", line)
		}
		for mode := range allow {
			if fields[0] == "*" || fields[0] == mode {
				allow[mode][fields[1]] = strings.Join(fields[2:], " ")
			}
		}
	}
	return allow
}

type junitReport struct {
	Suites []struct {
		Package string `xml:"package,attr"`
		Cases   []struct {
			Name    string    `xml:"classname,attr"`
			Error   *struct{} `xml:"error"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestH2Spec(t *testing.T) {
	allow := h2specAllow(t)
	p := newPKI(t)
	for _, mode := range []string{"h2c", "tls"} {
		t.Run(mode, func(t *testing.T) {
			// Idle connections outlive h2spec's 10 s wait for a verdict, so
			// that an idle close never passes for the error it expects.
			var s *Server
			args := []string{}
			if mode == "tls" {
				s = Start(t, append(p.TLSArgs(), "--timeout-keep-alive", "60s", "h2_asgi:app")...)
				args = append(args, "-t", "-k")
			} else {
				s = Start(t, "--timeout-keep-alive", "60s", "h2_asgi:app")
			}
			host, port, _ := net.SplitHostPort(s.Addr)
			report := filepath.Join(t.TempDir(), "h2spec.xml")
			args = append([]string{"tool", "h2spec", "-h", host, "-p", port, "-o", "10", "-j", report}, args...)
			cmd := exec.Command("go", args...)
			cmd.Dir = repoRoot()
			done := make(chan struct{})
			var out []byte
			go func() { out, _ = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				cmd.Process.Kill()
				t.Fatal("h2spec did not finish within 5 minutes")
			}
			data, err := os.ReadFile(report)
			if err != nil {
				t.Fatalf("no h2spec report (%v):\n%s", err, out)
			}
			var rep junitReport
			if err := xml.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			failed := map[string]string{}
			total := 0
			for _, suite := range rep.Suites {
				for i, c := range suite.Cases {
					total++
					if c.Error != nil || c.Failure != nil {
						failed[fmt.Sprintf("%s/%d", suite.Package, i+1)] = c.Name
					}
				}
			}
			if total < 100 {
				t.Fatalf("h2spec ran %d cases; want the whole suite:\n%s", total, out)
			}
			for id, name := range failed {
				if _, ok := allow[mode][id]; !ok {
					t.Errorf("h2spec %s failed (%s), not in h2spec-allow.txt", id, name)
				}
			}
			for id := range allow[mode] {
				if _, ok := failed[id]; !ok {
					t.Errorf("h2spec-allow.txt lists %s for %s, which passes now: remove it", id, mode)
				}
			}
			if t.Failed() {
				t.Logf("h2spec output:\n%s", out)
			}
			t.Logf("h2spec %s: %d cases, %d allowed failures", mode, total, len(failed))
		})
	}
}
