package tests

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Static files served in Go before the app (--static, internal/static).

// staticClient never adds Accept-Encoding or decompresses by itself.
var staticClient = &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 30 * time.Second}

// staticTree is a temp dir with srv/static (the mount) and srv/secret.txt.
type staticTree struct {
	root, dir string
	big       []byte
}

func newStaticTree(t *testing.T) *staticTree {
	t.Helper()
	root := t.TempDir()
	st := &staticTree{root: root, dir: filepath.Join(root, "srv", "static")}
	st.write(t, "srv/secret.txt", "CANARY secret\n")
	st.write(t, "srv/static/a.txt", "hello static\n")
	st.write(t, "srv/static/css/site.css", "body{color:red}\n")
	st.write(t, "srv/static/app.js", "console.log('identity')\n")
	st.write(t, "srv/static/app.js.br", "BR-BYTES")
	st.write(t, "srv/static/app.js.gz", "GZ-BYTES")
	st.write(t, "srv/static/only.gz.txt", "plain\n")
	st.write(t, "srv/static/sub/index.html", "<p>index</p>\n")
	st.big = make([]byte, 1<<20+12345) // past the copy threshold: sendfile
	r := rand.New(rand.NewPCG(1, 2))
	for i := range st.big {
		st.big[i] = byte(r.Uint32())
	}
	st.write(t, "srv/static/big.bin", string(st.big))
	return st
}

func (st *staticTree) write(t *testing.T, rel, body string) {
	t.Helper()
	p := filepath.Join(st.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// staticGet sends method path with header pairs and returns the response
// and its body.
func staticGet(t *testing.T, s *Server, method, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := staticClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, path, err)
	}
	return resp, string(b)
}

// rawStatus sends one request with the path exactly as given (no client
// normalisation, like curl --path-as-is) and returns status and body.
func rawStatus(t *testing.T, s *Server, path string) (string, string) {
	t.Helper()
	out, _ := Raw(t, s.Addr, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
	codes := StatusCodes(out)
	if len(codes) != 1 {
		t.Fatalf("GET %s: want one response, got %q", path, out)
	}
	_, body, _ := strings.Cut(out, "\r\n\r\n")
	return codes[0], body
}

// Case B36: traversal via encoded dots, absolute paths, drive letters.
func TestStatic_B36Traversal(t *testing.T) {
	st := newStaticTree(t)
	paths := []string{
		"/static/../secret.txt",
		"/static/%2e%2e/secret.txt",
		"/static/.%2e/secret.txt",
		"/static/..%2fsecret.txt",
		"/static/..%5csecret.txt",
		"/static//etc/passwd",
		"/static/%2fetc%2fpasswd",
		"/static/C:/Windows/win.ini",
		"/static/a.txt%00.png",
		// more of the same family
		"/static/%2E%2E/secret.txt",
		"/static/%2e%2e%2fsecret.txt",
		"/static/css/../../secret.txt",
		`/static/..\secret.txt`,
		"/static/%252e%252e/secret.txt",
		"/static/c%3a/windows/win.ini",
		"/static/..",
		"/static/%zz",
	}
	for _, mode := range []struct {
		id    string
		flags []string
	}{
		{"fallthrough-off", nil},
		{"fallthrough-on", []string{"--static-fallthrough"}},
	} {
		t.Run(mode.id, func(t *testing.T) {
			args := append([]string{"--static", "/static=" + st.dir}, mode.flags...)
			s := Start(t, append(args, "hello:app")...)
			for _, p := range paths {
				code, body := rawStatus(t, s, p)
				if strings.Contains(body, "CANARY") || strings.Contains(body, "root:") {
					t.Errorf("GET %s: served a file outside the mount: %s %q", p, code, body)
				}
				if mode.id == "fallthrough-off" && code != "400" && code != "403" && code != "404" {
					t.Errorf("GET %s = %s; want 400, 403 or 404", p, code)
				}
				if code == "500" {
					t.Errorf("GET %s = 500", p)
				}
			}
			// Dot segments (404) and encoded separators (400) are
			// refused in Go even when misses go to the app.
			for _, p := range paths[:5] {
				code, body := rawStatus(t, s, p)
				if (code != "400" || body != "400 Bad Request\n") && (code != "404" || body != "404 Not Found\n") {
					t.Errorf("GET %s = %s %q; want 400 or 404 from Go", p, code, body)
				}
			}
			if code, body := rawStatus(t, s, "/static/a.txt"); code != "200" || body != "hello static\n" {
				t.Errorf("GET /static/a.txt = %s %q; want 200 and the file", code, body)
			}
		})
	}
}

// Case B38: symlinks inside the mount; the policy is a documented switch.
func TestStatic_B38Symlinks(t *testing.T) {
	root := t.TempDir()
	static := filepath.Join(root, "srv", "static")
	build := filepath.Join(root, "opt", "build")
	for _, d := range []string{static, filepath.Join(build, "assets")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(build, "app.css"), []byte("body{}\n"), 0o644)
	os.WriteFile(filepath.Join(build, "assets", "logo.png"), []byte("PNG-BYTES"), 0o644)
	os.WriteFile(filepath.Join(static, "plain.txt"), []byte("plain\n"), 0o644)
	if err := os.Symlink(filepath.Join(build, "app.css"), filepath.Join(static, "app.css")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(build, "assets")+"/", filepath.Join(static, "assets")); err != nil {
		t.Fatal(err)
	}

	linked := filepath.Join(root, "current")
	if err := os.Symlink(static, linked); err != nil {
		t.Fatal(err)
	}
	// A link owned by another user than its target: refused by "owner"
	// (nginx if_not_owner). Changing a link's owner needs root.
	otherOwner := os.Geteuid() == 0
	if otherOwner {
		other := filepath.Join(static, "other.css")
		if err := os.Symlink(filepath.Join(build, "app.css"), other); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		id     string
		policy []string
		follow bool
	}{
		{"default", nil, true},
		{"follow", []string{"--static-symlinks", "follow"}, true},
		{"owner", []string{"--static-symlinks", "owner"}, true}, // same owner here
		{"nofollow", []string{"--static-symlinks", "nofollow"}, false},
	} {
		t.Run(tt.id, func(t *testing.T) {
			args := append([]string{"--static", "/static=" + static, "--static", "/linked=" + linked}, tt.policy...)
			s := Start(t, append(args, "hello:app")...)
			css, cssBody := rawStatus(t, s, "/static/app.css")
			logo, logoBody := rawStatus(t, s, "/static/assets/logo.png")
			dd, _ := rawStatus(t, s, "/static/../static/app.css")
			if tt.follow {
				if css != "200" || cssBody != "body{}\n" {
					t.Errorf("/static/app.css = %s %q; want 200 body{}", css, cssBody)
				}
				if logo != "200" || logoBody != "PNG-BYTES" {
					t.Errorf("/static/assets/logo.png = %s %q; want 200 PNG-BYTES", logo, logoBody)
				}
				if dd != "404" && dd != "400" {
					t.Errorf("/static/../static/app.css = %s; want 404 or 400", dd)
				}
			} else {
				for p, c := range map[string]string{"/static/app.css": css, "/static/assets/logo.png": logo, "/static/../static/app.css": dd} {
					if c != "403" && c != "404" {
						t.Errorf("%s = %s; want 403 or 404", p, c)
					}
				}
			}
			if otherOwner {
				want := "200"
				if tt.id == "owner" || tt.id == "nofollow" {
					want = "403"
				}
				if code, _ := rawStatus(t, s, "/static/other.css"); code != want {
					t.Errorf("/static/other.css (link owned by 65534) = %s; want %s", code, want)
				}
			}
			// The mount directory itself may be a symlink in every mode
			// (a deploy's "current" link).
			if code, _ := rawStatus(t, s, "/linked/plain.txt"); code != "200" {
				t.Errorf("/linked/plain.txt (mount through a symlink) = %s; want 200", code)
			}
			if code, _ := rawStatus(t, s, "/static/plain.txt"); code != "200" {
				t.Errorf("/static/plain.txt = %s; want 200", code)
			}
		})
	}
}

func TestStatic_GetHead(t *testing.T) {
	st := newStaticTree(t)
	s := Start(t, "--static", "/static="+st.dir, "--static-cache-control", "public, max-age=3600", "hello:app")

	resp, body := staticGet(t, s, "GET", "/static/a.txt")
	if resp.StatusCode != 200 || body != "hello static\n" {
		t.Fatalf("GET /static/a.txt = %d %q", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"Content-Type":   "text/plain; charset=utf-8",
		"Content-Length": "13",
		"Accept-Ranges":  "bytes",
		"Cache-Control":  "public, max-age=3600",
		"Vary":           "Accept-Encoding",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q; want %q", k, got, want)
		}
	}
	if e := resp.Header.Get("ETag"); !strings.HasPrefix(e, `"`) || !strings.HasSuffix(e, `"`) {
		t.Errorf("ETag = %q; want a strong quoted tag", e)
	}
	if _, err := http.ParseTime(resp.Header.Get("Last-Modified")); err != nil {
		t.Errorf("Last-Modified = %q: %v", resp.Header.Get("Last-Modified"), err)
	}

	head, hbody := staticGet(t, s, "HEAD", "/static/a.txt")
	if head.StatusCode != 200 || hbody != "" || head.ContentLength != 13 || head.Header.Get("ETag") != resp.Header.Get("ETag") {
		t.Errorf("HEAD = %d len %d body %q etag %q", head.StatusCode, head.ContentLength, hbody, head.Header.Get("ETag"))
	}

	big, bbody := staticGet(t, s, "GET", "/static/big.bin")
	if big.StatusCode != 200 || !bytes.Equal([]byte(bbody), st.big) {
		t.Errorf("GET big.bin = %d, %d bytes; want 200, %d bytes equal", big.StatusCode, len(bbody), len(st.big))
	}
	if ct := big.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("big.bin Content-Type = %q", ct)
	}
	if r, _ := staticGet(t, s, "GET", "/static/css/site.css"); r.Header.Get("Content-Type") != "text/css; charset=utf-8" {
		t.Errorf("site.css Content-Type = %q", r.Header.Get("Content-Type"))
	}

	for _, m := range []string{"POST", "PUT", "DELETE", "OPTIONS"} {
		r, _ := staticGet(t, s, m, "/static/a.txt")
		if r.StatusCode != 405 || r.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s = %d Allow %q; want 405 Allow GET, HEAD", m, r.StatusCode, r.Header.Get("Allow"))
		}
	}
	for _, p := range []string{"/static/missing.txt", "/static/css/", "/static/css", "/static", "/static/", "/static/sub/"} {
		if r, b := staticGet(t, s, "GET", p); r.StatusCode != 404 {
			t.Errorf("GET %s = %d %q; want 404 (no listing)", p, r.StatusCode, b)
		}
	}
	// Outside the mount: the app.
	if r, b := staticGet(t, s, "GET", "/staticx/a.txt"); r.StatusCode != 200 || b != "You asked for /staticx/a.txt\n" {
		t.Errorf("GET /staticx/a.txt = %d %q; want the app", r.StatusCode, b)
	}
	// Percent-encoded prefix: the same resource.
	if r, b := staticGet(t, s, "GET", "/%73tatic/a.txt"); r.StatusCode != 200 || b != "hello static\n" {
		t.Errorf("GET /%%73tatic/a.txt = %d %q; want the file", r.StatusCode, b)
	}
	// Keep-alive: several static answers on one connection, then the app.
	out, _ := Raw(t, s.Addr, "GET /static/a.txt HTTP/1.1\r\nHost: a\r\n\r\nHEAD /static/a.txt HTTP/1.1\r\nHost: a\r\n\r\n"+
		"GET /static/nope HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10*time.Second)
	if got := strings.Join(StatusCodes(out), ","); got != "200,200,404,200" {
		t.Errorf("pipelined statuses = %s; want 200,200,404,200\n%s", got, out)
	}
}

func TestStatic_IndexOption(t *testing.T) {
	st := newStaticTree(t)
	s := Start(t, "--static", "/static="+st.dir, "--static-index", "hello:app")
	if r, b := staticGet(t, s, "GET", "/static/sub/"); r.StatusCode != 200 || b != "<p>index</p>\n" || r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("GET /static/sub/ = %d %q %q; want index.html", r.StatusCode, b, r.Header.Get("Content-Type"))
	}
	if r, _ := staticGet(t, s, "GET", "/static/css/"); r.StatusCode != 404 {
		t.Errorf("GET /static/css/ (no index.html) = %d; want 404", r.StatusCode)
	}
}

func TestStatic_Range(t *testing.T) {
	st := newStaticTree(t)
	s := Start(t, "--static", "/static="+st.dir, "hello:app")
	full, _ := staticGet(t, s, "GET", "/static/a.txt")
	etag, lm := full.Header.Get("ETag"), full.Header.Get("Last-Modified")
	const file = "hello static\n" // 13 bytes
	size := len(st.big)

	tests := []struct {
		id     string
		hdr    []string
		status int
		body   string
		cr     string // Content-Range
	}{
		{"first", []string{"Range", "bytes=0-4"}, 206, "hello", "bytes 0-4/13"},
		{"open-ended", []string{"Range", "bytes=6-"}, 206, "static\n", "bytes 6-12/13"},
		{"suffix", []string{"Range", "bytes=-7"}, 206, "static\n", "bytes 6-12/13"},
		{"past-end-clamped", []string{"Range", "bytes=10-100"}, 206, "ic\n", "bytes 10-12/13"},
		{"multiple-whole", []string{"Range", "bytes=0-1,3-4"}, 200, file, ""},
		{"unsatisfiable", []string{"Range", "bytes=13-"}, 416, "", "bytes */13"},
		{"bad-syntax-ignored", []string{"Range", "bytes=x-y"}, 200, file, ""},
		{"other-unit-ignored", []string{"Range", "items=0-1"}, 200, file, ""},
		{"if-range-etag", []string{"Range", "bytes=0-4", "If-Range", etag}, 206, "hello", "bytes 0-4/13"},
		{"if-range-stale-etag", []string{"Range", "bytes=0-4", "If-Range", `"old"`}, 200, file, ""},
		{"if-range-weak", []string{"Range", "bytes=0-4", "If-Range", "W/" + etag}, 200, file, ""},
		{"if-range-date", []string{"Range", "bytes=0-4", "If-Range", lm}, 206, "hello", "bytes 0-4/13"},
		{"if-range-other-date", []string{"Range", "bytes=0-4", "If-Range", "Mon, 02 Jan 2006 15:04:05 GMT"}, 200, file, ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			r, b := staticGet(t, s, "GET", "/static/a.txt", tt.hdr...)
			if r.StatusCode != tt.status || r.Header.Get("Content-Range") != tt.cr {
				t.Fatalf("status %d Content-Range %q; want %d %q", r.StatusCode, r.Header.Get("Content-Range"), tt.status, tt.cr)
			}
			if tt.status != 416 && b != tt.body {
				t.Errorf("body %q; want %q", b, tt.body)
			}
		})
	}
	t.Run("head-ignores-range", func(t *testing.T) {
		r, _ := staticGet(t, s, "HEAD", "/static/a.txt", "Range", "bytes=0-4")
		if r.StatusCode != 200 || r.ContentLength != 13 {
			t.Errorf("HEAD with Range = %d len %d; want 200, 13", r.StatusCode, r.ContentLength)
		}
	})
	t.Run("sendfile-range", func(t *testing.T) {
		r, b := staticGet(t, s, "GET", "/static/big.bin", "Range", "bytes=100000-")
		if r.StatusCode != 206 || !bytes.Equal([]byte(b), st.big[100000:]) {
			t.Errorf("big range = %d, %d bytes; want 206, %d", r.StatusCode, len(b), size-100000)
		}
		r, b = staticGet(t, s, "GET", "/static/big.bin", "Range", "bytes=5-9")
		if r.StatusCode != 206 || b != string(st.big[5:10]) {
			t.Errorf("big small range = %d %q", r.StatusCode, b)
		}
	})
}

func TestStatic_Conditional(t *testing.T) {
	st := newStaticTree(t)
	s := Start(t, "--static", "/static="+st.dir, "--static-cache-control", "no-cache", "hello:app")
	full, _ := staticGet(t, s, "GET", "/static/a.txt")
	etag, lm := full.Header.Get("ETag"), full.Header.Get("Last-Modified")
	past := "Mon, 02 Jan 2006 15:04:05 GMT"
	future := time.Now().Add(24 * time.Hour).UTC().Format(http.TimeFormat)

	tests := []struct {
		id     string
		method string
		hdr    []string
		status int
	}{
		{"inm-match", "GET", []string{"If-None-Match", etag}, 304},
		{"inm-weak-match", "GET", []string{"If-None-Match", "W/" + etag}, 304},
		{"inm-list", "GET", []string{"If-None-Match", `"x", ` + etag}, 304},
		{"inm-star", "GET", []string{"If-None-Match", "*"}, 304},
		{"inm-head", "HEAD", []string{"If-None-Match", etag}, 304},
		{"inm-other", "GET", []string{"If-None-Match", `"x"`}, 200},
		{"ims-same", "GET", []string{"If-Modified-Since", lm}, 304},
		{"ims-future", "GET", []string{"If-Modified-Since", future}, 304},
		{"ims-past", "GET", []string{"If-Modified-Since", past}, 200},
		{"ims-bad-date", "GET", []string{"If-Modified-Since", "yesterday"}, 200},
		// RFC 9110 §13.2.2: If-None-Match wins over If-Modified-Since.
		{"inm-over-ims", "GET", []string{"If-None-Match", `"x"`, "If-Modified-Since", future}, 200},
		{"im-match", "GET", []string{"If-Match", etag}, 200},
		{"im-star", "GET", []string{"If-Match", "*"}, 200},
		{"im-other", "GET", []string{"If-Match", `"x"`}, 412},
		{"im-weak", "GET", []string{"If-Match", "W/" + etag}, 412},
		{"ius-past", "GET", []string{"If-Unmodified-Since", past}, 412},
		{"ius-future", "GET", []string{"If-Unmodified-Since", future}, 200},
		// If-Match wins over If-Unmodified-Since.
		{"im-over-ius", "GET", []string{"If-Match", etag, "If-Unmodified-Since", past}, 200},
		// 412 comes before 304.
		{"im-before-inm", "GET", []string{"If-Match", `"x"`, "If-None-Match", etag}, 412},
		// 304 before Range.
		{"inm-with-range", "GET", []string{"If-None-Match", etag, "Range", "bytes=0-1"}, 304},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			r, b := staticGet(t, s, tt.method, "/static/a.txt", tt.hdr...)
			if r.StatusCode != tt.status {
				t.Fatalf("status %d; want %d", r.StatusCode, tt.status)
			}
			if tt.status == 304 {
				if b != "" || r.Header.Get("ETag") != etag || r.Header.Get("Cache-Control") != "no-cache" || r.Header.Get("Vary") != "Accept-Encoding" {
					t.Errorf("304: body %q ETag %q Cache-Control %q Vary %q", b, r.Header.Get("ETag"), r.Header.Get("Cache-Control"), r.Header.Get("Vary"))
				}
				if r.Header.Get("Content-Length") != "" {
					t.Errorf("304 with Content-Length %q", r.Header.Get("Content-Length"))
				}
			}
		})
	}
}

func TestStatic_Precompressed(t *testing.T) {
	st := newStaticTree(t)
	s := Start(t, "--static", "/static="+st.dir, "hello:app")
	tests := []struct {
		ae, body, coding string
	}{
		{"", "console.log('identity')\n", ""},
		{"gzip, deflate, br", "BR-BYTES", "br"},
		{"br", "BR-BYTES", "br"},
		{"gzip", "GZ-BYTES", "gzip"},
		{"br;q=0.5, gzip;q=0.9", "GZ-BYTES", "gzip"},
		{"br;q=0, gzip", "GZ-BYTES", "gzip"},
		{"*", "BR-BYTES", "br"},
		{"*;q=0.2, br;q=0", "GZ-BYTES", "gzip"},
		{"identity", "console.log('identity')\n", ""},
		{"gzip;q=0, br;q=0", "console.log('identity')\n", ""},
		{"deflate", "console.log('identity')\n", ""},
	}
	etags := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.ae, func(t *testing.T) {
			r, b := staticGet(t, s, "GET", "/static/app.js", "Accept-Encoding", tt.ae)
			if r.StatusCode != 200 || b != tt.body || r.Header.Get("Content-Encoding") != tt.coding {
				t.Fatalf("= %d %q Content-Encoding %q; want 200 %q %q", r.StatusCode, b, r.Header.Get("Content-Encoding"), tt.body, tt.coding)
			}
			if r.Header.Get("Vary") != "Accept-Encoding" || r.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
				t.Errorf("Vary %q Content-Type %q", r.Header.Get("Vary"), r.Header.Get("Content-Type"))
			}
			if prev, ok := etags[tt.coding]; ok && prev != r.Header.Get("ETag") {
				t.Errorf("ETag %q; the same coding earlier had %q", r.Header.Get("ETag"), prev)
			}
			etags[tt.coding] = r.Header.Get("ETag")
		})
	}
	if len(etags) == 3 && (etags[""] == etags["br"] || etags[""] == etags["gzip"] || etags["br"] == etags["gzip"]) {
		t.Errorf("ETags must differ per coding: %v", etags)
	}
	// A 304 for the br representation's tag, a 200 for another coding's.
	if r, _ := staticGet(t, s, "GET", "/static/app.js", "Accept-Encoding", "br", "If-None-Match", etags["br"]); r.StatusCode != 304 {
		t.Errorf("br If-None-Match br tag = %d; want 304", r.StatusCode)
	}
	if r, _ := staticGet(t, s, "GET", "/static/app.js", "Accept-Encoding", "gzip", "If-None-Match", etags["br"]); r.StatusCode != 200 {
		t.Errorf("gzip If-None-Match br tag = %d; want 200", r.StatusCode)
	}
	// No sibling: identity even when br is accepted.
	if r, b := staticGet(t, s, "GET", "/static/a.txt", "Accept-Encoding", "br, gzip"); b != "hello static\n" || r.Header.Get("Content-Encoding") != "" {
		t.Errorf("a.txt with br accepted = %q %q; want identity", b, r.Header.Get("Content-Encoding"))
	}
}

// A miss goes to the app only with --static-fallthrough; WSGI and ASGI
// apps behind the mount.
func TestStatic_Fallthrough(t *testing.T) {
	st := newStaticTree(t)
	for _, tt := range []struct {
		id, app, appBody string
	}{
		{"wsgi", "hello:app", "You asked for /static/missing.txt\n"},
		{"asgi", "asgi_hello:app", "Hello, World!\n"},
	} {
		t.Run(tt.id, func(t *testing.T) {
			off := Start(t, "--static", "/static="+st.dir, tt.app)
			on := Start(t, "--static", "/static="+st.dir, "--static-fallthrough", tt.app)
			for _, s := range []*Server{off, on} {
				if r, b := staticGet(t, s, "GET", "/static/a.txt"); r.StatusCode != 200 || b != "hello static\n" {
					t.Errorf("GET /static/a.txt = %d %q", r.StatusCode, b)
				}
				if r, b := staticGet(t, s, "GET", "/"); r.StatusCode != 200 || !strings.Contains(b, "Hello, World!") {
					t.Errorf("GET / = %d %q; want the app", r.StatusCode, b)
				}
				if code, body := rawStatus(t, s, "/static/../secret.txt"); code != "404" || body != "404 Not Found\n" {
					t.Errorf("traversal = %s %q; want 404 from Go in both modes", code, body)
				}
				if code, _ := rawStatus(t, s, "/static/..%2fsecret.txt"); code != "400" {
					t.Errorf("encoded slash = %s; want 400 in both modes", code)
				}
			}
			if r, b := staticGet(t, off, "GET", "/static/missing.txt"); r.StatusCode != 404 || b != "404 Not Found\n" {
				t.Errorf("off: miss = %d %q; want 404 from Go", r.StatusCode, b)
			}
			if r, b := staticGet(t, on, "GET", "/static/missing.txt"); r.StatusCode != 200 || b != tt.appBody {
				t.Errorf("on: miss = %d %q; want the app's %q", r.StatusCode, b, tt.appBody)
			}
			// A POST to an existing file is 405 in both modes; to a
			// missing one it reaches the app only with fallthrough.
			if r, _ := staticGet(t, on, "POST", "/static/a.txt"); r.StatusCode != 405 {
				t.Errorf("on: POST file = %d; want 405", r.StatusCode)
			}
			if r, _ := staticGet(t, off, "POST", "/static/missing.txt"); r.StatusCode != 405 {
				t.Errorf("off: POST miss = %d; want 405", r.StatusCode)
			}
			if r, _ := staticGet(t, on, "POST", "/static/missing.txt"); r.StatusCode != 200 {
				t.Errorf("on: POST miss = %d; want the app's 200", r.StatusCode)
			}
		})
	}
}

// A mount at "/" with fallthrough: files first, then the app.
func TestStatic_RootMount(t *testing.T) {
	st := newStaticTree(t)
	s := Start(t, "--static", "/="+st.dir, "--static-fallthrough", "hello:app")
	if r, b := staticGet(t, s, "GET", "/a.txt"); r.StatusCode != 200 || b != "hello static\n" {
		t.Errorf("GET /a.txt = %d %q", r.StatusCode, b)
	}
	if r, b := staticGet(t, s, "GET", "/"); r.StatusCode != 200 || b != "Hello, World!\n" {
		t.Errorf("GET / = %d %q; want the app", r.StatusCode, b)
	}
	if code, body := rawStatus(t, s, "/../secret.txt"); code != "404" || body != "404 Not Found\n" {
		t.Errorf("GET /../secret.txt = %s %q; want 404 from Go", code, body)
	}
}

// Bad --static values stop the server at start with one clear line.
func TestStatic_StartupErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--static", "/static=" + filepath.Join(dir, "missing")}, "no such file or directory"},
		{[]string{"--static", "/static=" + file}, "is not a directory"},
		{[]string{"--static", "static=" + dir}, "URL prefix"},
		{[]string{"--static", "/static"}, "URL_PREFIX=DIR"},
		{[]string{"--static", "/s=" + dir, "--static-symlinks", "sometimes"}, "--static-symlinks"},
	} {
		cmd := Command(t, append(tt.args, "hello:app")...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%v: started; want a start-up error", tt.args)
			continue
		}
		if !strings.Contains(string(out), tt.want) {
			t.Errorf("%v: output %q; want it to mention %q", tt.args, out, tt.want)
		}
	}
}

// Static files over HTTP/2 (h2c, prior knowledge): the same handler behind
// http1's HTTP/2 bridge, sendfile included; several streams at once on one
// connection.
func TestStatic_HTTP2(t *testing.T) {
	st := newStaticTree(t)
	s := Start(t, "--static", "/static="+st.dir, "hello:app")
	cc := h2cConn(t, s.Addr)
	get := func(path string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: body: %v", path, err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("GET %s over %s", path, resp.Proto)
		}
		return resp, b
	}
	if r, b := get("/static/a.txt"); r.StatusCode != 200 || string(b) != "hello static\n" || r.Header.Get("ETag") == "" {
		t.Errorf("a.txt = %d %q etag %q", r.StatusCode, b, r.Header.Get("ETag"))
	}
	if r, b := get("/static/app.js", "Accept-Encoding", "br"); string(b) != "BR-BYTES" || r.Header.Get("Content-Encoding") != "br" {
		t.Errorf("app.js br = %q %q", b, r.Header.Get("Content-Encoding"))
	}
	if r, b := get("/static/big.bin", "Range", "bytes=1000-"); r.StatusCode != 206 || !bytes.Equal(b, st.big[1000:]) {
		t.Errorf("big.bin range = %d, %d bytes", r.StatusCode, len(b))
	}
	if r, _ := get("/static/missing"); r.StatusCode != 404 {
		t.Errorf("missing = %d; want 404", r.StatusCode)
	}
	done := make(chan []byte, 4)
	for range 4 {
		go func() {
			req, _ := http.NewRequest("GET", s.URL+"/static/big.bin", nil)
			resp, err := cc.RoundTrip(req)
			if err != nil {
				done <- nil
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			done <- b
		}()
	}
	for range 4 {
		if b := <-done; !bytes.Equal(b, st.big) {
			t.Errorf("concurrent big.bin: %d bytes; want %d equal", len(b), len(st.big))
		}
	}
}
