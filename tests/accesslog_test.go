package tests

// The access record (issue 28): bytes, protocol, user_agent and referer
// for WSGI, ASGI and static responses.

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The access record has bytes, protocol, user_agent and referer for WSGI,
// ASGI and static responses.
func TestLogs_AccessFields(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("static-body\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		app, path string
		bytes     int
		static    bool
	}{
		{"hello:app", "/", 14, false},
		{"hello:app", "/s/f.txt", 12, true},
		{"asgi_hello:app", "/", 14, false},
		{"asgi_hello:app", "/s/f.txt", 12, true},
	} {
		t.Run(tc.app+tc.path, func(t *testing.T) {
			s := Start(t, "--access-log", "--static", "/s="+dir, tc.app)
			req, _ := http.NewRequest("GET", s.URL+tc.path, nil)
			req.Header.Set("User-Agent", "logs-test/1.0")
			req.Header.Set("Referer", "http://example.test/from")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			Raw(t, s.Addr, "GET "+tc.path+" HTTP/1.0\r\n\r\n", time.Second)
			recs := waitLogRecords(s.Logs, 5*time.Second, func(rec map[string]any) bool { return rec["msg"] == "access" })
			for len(recs) < 2 {
				recs = waitLogRecords(s.Logs, 5*time.Second, func(rec map[string]any) bool { return rec["msg"] == "access" })
				if len(recs) < 2 {
					t.Fatalf("access records: %v; want 2", recs)
				}
			}
			for i, want := range []struct {
				proto   string
				ua, ref any
			}{
				{"HTTP/1.1", "logs-test/1.0", "http://example.test/from"},
				{"HTTP/1.0", nil, nil},
			} {
				rec := recs[i]
				if rec["status"] != float64(200) || rec["bytes"] != float64(tc.bytes) || rec["protocol"] != want.proto ||
					rec["user_agent"] != want.ua || rec["referer"] != want.ref || rec["target"] != tc.path {
					t.Errorf("access record %v; want status 200, bytes %d, protocol %s, user_agent %v, referer %v", rec, tc.bytes, want.proto, want.ua, want.ref)
				}
				if (rec["static"] == true) != tc.static {
					t.Errorf("access record %v: static = %v; want %v", rec, rec["static"], tc.static)
				}
			}
		})
	}
}
