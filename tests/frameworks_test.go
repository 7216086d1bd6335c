package tests

// Real frameworks from PyPI (requirements/test.txt) served by the real
// binary: a small Django project (testapps/djangoproj) and a Flask app
// (testapps/flaskapp.py), driven by Go's net/http client and, where the
// bytes on the wire matter (streaming, HEAD), by raw TCP.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fwConcurrency is how many copies of each case run at once against the
// same server (STYLE §12: each case also runs N times concurrently).
const fwConcurrency = 4

// fwRunN runs f n times at once, as concurrently does. f must not call
// t.Fatal (it runs off the test goroutine): it returns its failure.
func fwRunN(t *testing.T, n int, f func() error) {
	t.Helper()
	concurrently(t, n, func(int) error { return f() })
}

// fwRandom returns n reproducible pseudo-random bytes.
func fwRandom(n int, seed uint64) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 't', 's'}))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func fwSHA256(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// fwClient is a client with its own cookie jar that does not follow
// redirects, so a test sees each 302.
func fwClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// fwDo sends req and returns the response with its body read.
func fwDo(c *http.Client, req *http.Request) (*http.Response, string, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, string(b), fmt.Errorf("%s %s: reading body: %w", req.Method, req.URL, err)
	}
	return resp, string(b), nil
}

func fwGet(c *http.Client, u string) (*http.Response, string, error) {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		return nil, "", err
	}
	return fwDo(c, req)
}

func fwPostForm(c *http.Client, u string, form url.Values, header http.Header) (*http.Response, string, error) {
	req, err := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	return fwDo(c, req)
}

// fwOneDate checks that the response has exactly one Date field: the
// server adds one only when the app did not (RFC 9110 §6.6.1; Date is a
// singleton field, so §5.3 forbids sending it twice).
func fwOneDate(what string, h http.Header) error {
	if d := h.Values("Date"); len(d) != 1 {
		return fmt.Errorf("%s: %d Date fields %q; want exactly 1", what, len(d), d)
	}
	return nil
}

// fwNoPythonErrors fails t if the server log holds a Python traceback or
// an ERROR record other than those matching allowed.
func fwNoPythonErrors(t *testing.T, s *Server, allowed ...string) {
	t.Helper()
	for _, line := range strings.Split(s.Logs(), "\n") {
		if line == "" {
			continue
		}
		bad := strings.Contains(line, "Traceback") || strings.Contains(line, "Exception ignored")
		var rec struct{ Level string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "ERROR" {
			bad = true
		}
		for _, a := range allowed {
			if strings.Contains(line, a) {
				bad = false
			}
		}
		if bad {
			t.Errorf("server log has an error: %s", line)
		}
	}
}

// ---- Django ----------------------------------------------------------------

const djangoApp = "djangoproj.wsgi:application"

// fwVenvPython is the test virtualenv's interpreter, for setup steps.
func fwVenvPython(t *testing.T) string {
	t.Helper()
	v := os.Getenv("TURNSTILE_VENV")
	if v == "" {
		v = os.Getenv("VIRTUAL_ENV")
	}
	if v == "" {
		t.Fatal("neither TURNSTILE_VENV nor VIRTUAL_ENV is set: the Django setup needs the test virtualenv")
	}
	return filepath.Join(v, "bin", "python")
}

// djangoManage runs `python -m django ARGS` with the project's settings and
// the given extra environment.
func djangoManage(t *testing.T, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(fwVenvPython(t), append([]string{"-m", "django"}, args...)...)
	cmd.Dir = AppDir()
	cmd.Env = append(os.Environ(), "DJANGO_SETTINGS_MODULE=djangoproj.settings", "PYTHONPATH="+AppDir())
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("django %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

var djangoCSRFInputRE = regexp.MustCompile(`name="csrfmiddlewaretoken" value="([^"]+)"`)

// djangoCSRFToken returns the form's hidden CSRF token from an HTML page.
func djangoCSRFToken(html string) (string, error) {
	m := djangoCSRFInputRE.FindStringSubmatch(html)
	if m == nil {
		return "", fmt.Errorf("no csrfmiddlewaretoken input in page:\n%s", html)
	}
	return m[1], nil
}

func TestDjango_TemplateView(t *testing.T) {
	t.Parallel()
	s := Start(t, djangoApp)
	page := func(name string) string {
		return "<!doctype html>\n<title>Hello</title>\n<h1>Hello, " + name + "!</h1>\n" +
			"<ul><li>one</li><li>two</li><li>three</li></ul>\n"
	}
	tests := []struct {
		id       string
		path     string
		wantCode int
		wantBody string // exact; "" checks the status only
	}{
		{id: "plain", path: "/hello/world/", wantCode: 200, wantBody: page("world")},
		{id: "autoescaped", path: "/hello/%3Cb%3E%26/", wantCode: 200, wantBody: page("&lt;b&gt;&amp;")},
		{id: "utf8-path", path: "/hello/h%C3%A9llo%E2%98%83/", wantCode: 200, wantBody: page("héllo☃")},
		{id: "append-slash", path: "/hello/world", wantCode: 301},
		{id: "not-found", path: "/nope/", wantCode: 404},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			fwRunN(t, fwConcurrency, func() error {
				resp, body, err := fwGet(fwClient(), s.URL+tt.path)
				if err != nil {
					return err
				}
				if resp.StatusCode != tt.wantCode {
					return fmt.Errorf("GET %s = %d; want %d\n%s", tt.path, resp.StatusCode, tt.wantCode, body)
				}
				if tt.wantCode == 301 {
					if loc := resp.Header.Get("Location"); loc != tt.path+"/" {
						return fmt.Errorf("GET %s: Location = %q; want %q", tt.path, loc, tt.path+"/")
					}
				}
				if tt.wantBody == "" {
					return nil
				}
				if body != tt.wantBody {
					return fmt.Errorf("GET %s: body = %q; want %q", tt.path, body, tt.wantBody)
				}
				for k, want := range map[string]string{
					"Content-Type":           "text/html; charset=utf-8",
					"Content-Length":         strconv.Itoa(len(tt.wantBody)),
					"X-Frame-Options":        "DENY",
					"X-Content-Type-Options": "nosniff",
				} {
					if got := resp.Header.Get(k); got != want {
						return fmt.Errorf("GET %s: %s = %q; want %q", tt.path, k, got, want)
					}
				}
				return nil
			})
		})
	}
	t.Cleanup(func() { fwNoPythonErrors(t, s, "Not Found: /nope/") })
}

func TestDjango_CSRFForm(t *testing.T) {
	t.Parallel()
	s := Start(t, djangoApp)
	formURL := s.URL + "/form/"
	tests := []struct {
		id         string
		message    string
		sendCookie bool   // the csrftoken cookie from the GET
		token      string // "form", "header", "wrong" or "" (none)
		wantCode   int
		wantBody   string // substring of the response (or of the thanks page after a 302)
	}{
		{id: "valid", message: "hello there", sendCookie: true, token: "form", wantCode: 302, wantBody: "<li>Got: hello there</li>"},
		{id: "valid-header-token", message: "via header", sendCookie: true, token: "header", wantCode: 302, wantBody: "<li>Got: via header</li>"},
		{id: "invalid-form", message: "", sendCookie: true, token: "form", wantCode: 200, wantBody: "This field is required."},
		{id: "no-token", message: "x", sendCookie: true, token: "", wantCode: 403, wantBody: "CSRF verification failed"},
		{id: "wrong-token", message: "x", sendCookie: true, token: "wrong", wantCode: 403, wantBody: "CSRF verification failed"},
		{id: "no-cookie", message: "x", sendCookie: false, token: "form", wantCode: 403, wantBody: "CSRF verification failed"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			fwRunN(t, fwConcurrency, func() error {
				c := fwClient()
				resp, page, err := fwGet(c, formURL)
				if err != nil {
					return err
				}
				if resp.StatusCode != 200 {
					return fmt.Errorf("GET /form/ = %d; want 200\n%s", resp.StatusCode, page)
				}
				token, err := djangoCSRFToken(page)
				if err != nil {
					return err
				}
				u, _ := url.Parse(formURL)
				if !fwHasCookie(c.Jar.Cookies(u), "csrftoken") {
					return fmt.Errorf("GET /form/ set no csrftoken cookie (Set-Cookie: %q)", resp.Header.Values("Set-Cookie"))
				}
				if !tt.sendCookie {
					c.Jar, _ = cookiejar.New(nil)
				}
				form := url.Values{"message": {tt.message}}
				header := http.Header{}
				switch tt.token {
				case "form":
					form.Set("csrfmiddlewaretoken", token)
				case "header":
					header.Set("X-CSRFToken", token)
				case "wrong":
					form.Set("csrfmiddlewaretoken", strings.Repeat("a", len(token)))
				}
				resp, body, err := fwPostForm(c, formURL, form, header)
				if err != nil {
					return err
				}
				if resp.StatusCode != tt.wantCode {
					return fmt.Errorf("POST /form/ = %d; want %d\n%s", resp.StatusCode, tt.wantCode, body)
				}
				if tt.wantCode == 302 {
					if loc := resp.Header.Get("Location"); loc != "/form/thanks/" {
						return fmt.Errorf("POST /form/: Location = %q; want %q", loc, "/form/thanks/")
					}
					// The flash message travels in a cookie (messages'
					// FallbackStorage) to the next page.
					resp, body, err = fwGet(c, s.URL+"/form/thanks/")
					if err != nil {
						return err
					}
					if resp.StatusCode != 200 {
						return fmt.Errorf("GET /form/thanks/ = %d; want 200\n%s", resp.StatusCode, body)
					}
				}
				if !strings.Contains(body, tt.wantBody) {
					return fmt.Errorf("response does not contain %q:\n%s", tt.wantBody, body)
				}
				return nil
			})
		})
	}
	// Django logs each rejected POST at WARNING on django.security.csrf.
	t.Cleanup(func() { fwNoPythonErrors(t, s, "Forbidden (CSRF") })
}

func fwHasCookie(cs []*http.Cookie, name string) bool {
	for _, c := range cs {
		if c.Name == name && c.Value != "" {
			return true
		}
	}
	return false
}

// TestDjango_AdminLogin migrates a fresh SQLite database, creates a
// superuser, and logs in through the admin. Not parallel: the database is
// passed to the server in $TURNSTILE_TEST_DB (t.Setenv), and Start's
// command inherits the environment.
func TestDjango_AdminLogin(t *testing.T) {
	binPath(t) // skip early under -short or without the binary
	db := filepath.Join(t.TempDir(), "db.sqlite3")
	env := []string{"TURNSTILE_TEST_DB=" + db, "DJANGO_SUPERUSER_PASSWORD=turnstile-pw"}
	djangoManage(t, env, "migrate", "--noinput", "-v", "0")
	djangoManage(t, env, "createsuperuser", "--noinput", "--username", "admin", "--email", "admin@example.com")
	t.Setenv("TURNSTILE_TEST_DB", db)
	s := Start(t, djangoApp)

	c := fwClient()
	// 1. The admin index redirects an anonymous user to the login page.
	resp, body, err := fwGet(c, s.URL+"/admin/")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/admin/login/?next=/admin/" {
		t.Fatalf("GET /admin/ = %d Location %q; want 302 %q\n%s", resp.StatusCode, resp.Header.Get("Location"), "/admin/login/?next=/admin/", body)
	}

	// 2. The login page and its form.
	resp, page, err := fwGet(c, s.URL+"/admin/login/?next=/admin/")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /admin/login/ = %d; want 200\n%s", resp.StatusCode, page)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET /admin/login/: Content-Type = %q; want %q", ct, "text/html; charset=utf-8")
	}
	for _, want := range []string{`<form action="/admin/login/?next=/admin/" method="post" id="login-form">`, `name="username"`, `name="password"`, `type="submit"`} {
		if !strings.Contains(page, want) {
			t.Errorf("GET /admin/login/: page does not contain %q", want)
		}
	}
	token, err := djangoCSRFToken(page)
	if err != nil {
		t.Fatal(err)
	}

	// 3. A wrong password: the form again, with an error.
	resp, body, err = fwPostForm(c, s.URL+"/admin/login/?next=/admin/",
		url.Values{"csrfmiddlewaretoken": {token}, "username": {"admin"}, "password": {"wrong"}, "next": {"/admin/"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.Contains(body, "Please enter the correct username and password") {
		t.Errorf("POST /admin/login/ with a wrong password = %d; want 200 with the login error\n%s", resp.StatusCode, body)
	}

	// 4. The right password: a session (written to SQLite) and a redirect.
	resp, body, err = fwPostForm(c, s.URL+"/admin/login/?next=/admin/",
		url.Values{"csrfmiddlewaretoken": {token}, "username": {"admin"}, "password": {"turnstile-pw"}, "next": {"/admin/"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/admin/" {
		t.Fatalf("POST /admin/login/ = %d Location %q; want 302 %q\n%s", resp.StatusCode, resp.Header.Get("Location"), "/admin/", body)
	}

	// 5. The admin index, logged in.
	resp, body, err = fwGet(c, s.URL+"/admin/")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.Contains(body, "Site administration") || !strings.Contains(body, `href="/admin/auth/user/"`) {
		t.Fatalf("GET /admin/ logged in = %d; want 200 with the site administration index\n%s", resp.StatusCode, body)
	}
	fwNoPythonErrors(t, s)
}

func TestDjango_FileUpload(t *testing.T) {
	t.Parallel()
	s := Start(t, djangoApp)
	tests := []struct {
		id          string
		size        int
		wantStorage string // Django keeps files over 2.5 MiB on disk
	}{
		{id: "3MiB-on-disk", size: 3 << 20, wantStorage: "TemporaryUploadedFile"},
		{id: "100KiB-in-memory", size: 100 << 10, wantStorage: "InMemoryUploadedFile"},
		{id: "1B", size: 1, wantStorage: "InMemoryUploadedFile"},
	}
	for i, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			data := fwRandom(tt.size, uint64(100+i))
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			mw.WriteField("note", "caf\u00e9")
			fw, _ := mw.CreateFormFile("file", "blob.bin")
			fw.Write(data)
			mw.Close()
			want := map[string]any{"name": "blob.bin", "size": float64(tt.size), "sha256": fwSHA256(data), "storage": tt.wantStorage, "note": "caf\u00e9"}
			fwRunN(t, fwConcurrency, func() error {
				req, _ := http.NewRequest("POST", s.URL+"/upload/", bytes.NewReader(body.Bytes()))
				req.Header.Set("Content-Type", mw.FormDataContentType())
				resp, got, err := fwDo(fwClient(), req)
				if err != nil {
					return err
				}
				if resp.StatusCode != 200 {
					return fmt.Errorf("POST /upload/ (%d bytes) = %d; want 200\n%s", tt.size, resp.StatusCode, got)
				}
				var facts map[string]any
				if err := json.Unmarshal([]byte(got), &facts); err != nil {
					return fmt.Errorf("POST /upload/: body %q: %v", got, err)
				}
				for k, w := range want {
					if facts[k] != w {
						return fmt.Errorf("POST /upload/ (%d bytes): %s = %v; want %v", tt.size, k, facts[k], w)
					}
				}
				return nil
			})
		})
	}
	t.Cleanup(func() { fwNoPythonErrors(t, s) })
}

// ---- Flask -----------------------------------------------------------------

const flaskApp = "flaskapp:app"

func TestFlask_JSON(t *testing.T) {
	t.Parallel()
	s := Start(t, flaskApp)
	want := map[string]any{"framework": "flask", "numbers": []any{1.0, 2.0, 3.0}, "text": "h\u00e9llo \u2603", "echo": "a b&c"}
	fwRunN(t, fwConcurrency, func() error {
		resp, body, err := fwGet(fwClient(), s.URL+"/json?q=a%20b%26c")
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET /json = %d; want 200\n%s", resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			return fmt.Errorf("GET /json: Content-Type = %q; want %q", ct, "application/json")
		}
		if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
			return fmt.Errorf("GET /json: Content-Length = %q; body is %d bytes", cl, len(body))
		}
		if err := fwOneDate("GET /json", resp.Header); err != nil {
			return err
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			return fmt.Errorf("GET /json: %q: %v", body, err)
		}
		if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
			return fmt.Errorf("GET /json = %s; want %s", g, w)
		}
		return nil
	})
	fwNoPythonErrors(t, s)
}

// TestFlask_Streaming checks that a generator's chunks reach the client as
// they are produced (PEP 3333, §Buffering and Streaming: the server must
// not delay a block while the app makes the next one). The app sends
// chunk-0 at once, chunk-1..3 50 ms apart, then sleeps 1 s before chunk-4.
func TestFlask_Streaming(t *testing.T) {
	t.Parallel()
	const (
		query     = "?n=5&gap=0.05&last=1.0"
		wantBody  = "chunk-0\nchunk-1\nchunk-2\nchunk-3\nchunk-4\n"
		firstByte = 800 * time.Millisecond // generous: the first chunk is ready at once
		minTotal  = 1000 * time.Millisecond
	)
	tests := []struct {
		id          string
		path        string
		proto       string
		wantChunked bool // HTTP/1.1 without Content-Length: chunked; HTTP/1.0: close-delimited
	}{
		{id: "generator", path: "/stream", proto: "HTTP/1.1", wantChunked: true},
		{id: "stream_with_context", path: "/stream-ctx", proto: "HTTP/1.1", wantChunked: true},
		{id: "generator-http1.0", path: "/stream", proto: "HTTP/1.0", wantChunked: false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			s := Start(t, flaskApp)
			t.Cleanup(func() { fwNoPythonErrors(t, s) })

			// Raw TCP, alone on the server: when do the first bytes arrive?
			c, err := net.Dial("tcp", s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			fmt.Fprintf(c, "GET %s%s %s\r\nHost: %s\r\nConnection: close\r\n\r\n", tt.path, query, tt.proto, s.Addr)
			var raw bytes.Buffer
			var first time.Duration
			p := make([]byte, 4096)
			for {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, err := c.Read(p)
				raw.Write(p[:n])
				if first == 0 && bytes.Contains(raw.Bytes(), []byte("chunk-0\n")) {
					first = time.Since(start)
				}
				if err != nil {
					if err != io.EOF {
						t.Fatalf("reading the stream: %v (after %v; got %q)", err, time.Since(start), raw.String())
					}
					break
				}
			}
			total := time.Since(start)
			t.Logf("GET %s (%s): chunk-0 after %v, whole response after %v", tt.path, tt.proto, first, total)
			if first == 0 || first > firstByte {
				t.Errorf("GET %s: chunk-0 arrived after %v (whole response: %v); want < %v: the server held back a streamed chunk", tt.path, first, total, firstByte)
			}
			if total < minTotal {
				t.Errorf("GET %s: response complete after %v; the app sleeps %v before the last chunk", tt.path, total, minTotal)
			}
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw.Bytes())), nil)
			if err != nil {
				t.Fatalf("GET %s: parsing %q: %v", tt.path, raw.String(), err)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("GET %s: reading body from %q: %v", tt.path, raw.String(), err)
			}
			if resp.StatusCode != 200 || string(body) != wantBody {
				t.Errorf("GET %s = %d %q; want 200 %q", tt.path, resp.StatusCode, body, wantBody)
			}
			if chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"; chunked != tt.wantChunked {
				t.Errorf("GET %s (%s): chunked = %v (Transfer-Encoding %q); want %v", tt.path, tt.proto, chunked, resp.TransferEncoding, tt.wantChunked)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("GET %s: Content-Type = %q; want %q", tt.path, ct, "text/plain; charset=utf-8")
			}
			if tt.proto != "HTTP/1.1" {
				return
			}

			// Go's client, several streams at once: every chunk, in order.
			fwRunN(t, fwConcurrency, func() error {
				resp, body, err := fwGet(fwClient(), s.URL+tt.path+query)
				if err != nil {
					return err
				}
				if resp.StatusCode != 200 || body != wantBody {
					return fmt.Errorf("GET %s = %d %q; want 200 %q", tt.path, resp.StatusCode, body, wantBody)
				}
				return nil
			})
		})
	}

	// HEAD: Werkzeug answers it with an empty iterable and no
	// Content-Length, since the length of the streamed GET is unknown. The
	// server must then send no Content-Length either: RFC 9110 §8.6, "a
	// server MUST NOT send Content-Length in such a response unless its
	// field value equals the decimal number of octets that would have been
	// sent in the content of a response if the same request had used the
	// GET method" (here 40, which the server cannot know).
	for _, path := range []string{"/stream", "/stream-ctx"} {
		t.Run("head"+path, func(t *testing.T) {
			t.Parallel()
			s := Start(t, flaskApp)
			c, err := net.Dial("tcp", s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			fmt.Fprintf(c, "HEAD %s%s HTTP/1.1\r\nHost: %s\r\n\r\n", path, query, s.Addr)
			resp, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
			if err != nil {
				t.Fatalf("HEAD %s: %v", path, err)
			}
			if resp.StatusCode != 200 {
				t.Errorf("HEAD %s = %d; want 200", path, resp.StatusCode)
			}
			if cl := resp.Header.Values("Content-Length"); len(cl) > 0 && cl[0] != strconv.Itoa(len(wantBody)) {
				t.Errorf("HEAD %s: Content-Length = %q; want none (or %d, the GET's length)", path, cl, len(wantBody))
			}
			// The connection must still be usable: nothing follows the head.
			fmt.Fprintf(c, "GET /json HTTP/1.1\r\nHost: %s\r\n\r\n", s.Addr)
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("GET /json after HEAD %s on the same connection: %v", path, err)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"framework":"flask"`) {
				t.Errorf("GET /json after HEAD %s = %d %q (%v); want 200 with the JSON", path, resp.StatusCode, body, err)
			}
			fwNoPythonErrors(t, s)
		})
	}
}

// TestFlask_SendFile serves a file through send_file, which hands the
// server a wsgi.file_wrapper.
func TestFlask_SendFile(t *testing.T) {
	t.Parallel()
	s := Start(t, flaskApp)
	data := fwRandom(300<<10+7, 7)
	path := filepath.Join(t.TempDir(), "blob.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	target := "/file?path=" + url.QueryEscape(path)
	size := strconv.Itoa(len(data))

	t.Run("get", func(t *testing.T) {
		fwRunN(t, fwConcurrency, func() error {
			resp, body, err := fwGet(fwClient(), s.URL+target)
			if err != nil {
				return err
			}
			if resp.StatusCode != 200 {
				return fmt.Errorf("GET %s = %d; want 200", target, resp.StatusCode)
			}
			if cl := resp.Header.Get("Content-Length"); cl != size {
				return fmt.Errorf("GET %s: Content-Length = %q; want %q", target, cl, size)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
				return fmt.Errorf("GET %s: Content-Type = %q; want application/octet-stream", target, ct)
			}
			if body != string(data) {
				return fmt.Errorf("GET %s: got %d bytes (sha256 %s); want %d bytes (sha256 %s)", target, len(body), fwSHA256([]byte(body)), len(data), fwSHA256(data))
			}
			// Werkzeug's send_file sets Date itself.
			return fwOneDate("GET "+target, resp.Header)
		})
	})

	// HEAD on a raw connection, then GET on the same one: the HEAD
	// response must be headers only, or the GET's response is misread.
	t.Run("head", func(t *testing.T) {
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		fmt.Fprintf(c, "HEAD %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, s.Addr)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
		if err != nil {
			t.Fatalf("HEAD %s: %v", target, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("HEAD %s = %d; want 200", target, resp.StatusCode)
		}
		if cl := resp.Header.Get("Content-Length"); cl != size {
			t.Errorf("HEAD %s: Content-Length = %q; want %q (the GET's length)", target, cl, size)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("HEAD %s: Content-Type = %q; want application/octet-stream", target, ct)
		}
		if err := fwOneDate("HEAD "+target, resp.Header); err != nil {
			t.Error(err)
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if extra, _ := br.Peek(1); len(extra) > 0 {
			n := br.Buffered()
			more, _ := br.Peek(n)
			t.Fatalf("HEAD %s: the server sent bytes after the head: %q...", target, more[:min(len(more), 64)])
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /json HTTP/1.1\r\nHost: %s\r\n\r\n", s.Addr)
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET /json after HEAD on the same connection: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"framework":"flask"`) {
			t.Errorf("GET /json after HEAD = %d %q (%v); want 200 with the JSON", resp.StatusCode, body, err)
		}
	})

	t.Run("range", func(t *testing.T) {
		req, _ := http.NewRequest("GET", s.URL+target, nil)
		req.Header.Set("Range", "bytes=1000-1999")
		resp, body, err := fwDo(fwClient(), req)
		if err != nil {
			t.Fatal(err)
		}
		wantRange := "bytes 1000-1999/" + size
		if resp.StatusCode != 206 || resp.Header.Get("Content-Range") != wantRange || resp.Header.Get("Content-Length") != "1000" {
			t.Fatalf("GET %s Range: bytes=1000-1999 = %d Content-Range %q Content-Length %q; want 206 %q 1000",
				target, resp.StatusCode, resp.Header.Get("Content-Range"), resp.Header.Get("Content-Length"), wantRange)
		}
		if body != string(data[1000:2000]) {
			t.Errorf("GET %s Range: bytes=1000-1999: got %d bytes (sha256 %s); want data[1000:2000] (sha256 %s)", target, len(body), fwSHA256([]byte(body)), fwSHA256(data[1000:2000]))
		}
		if err := fwOneDate("GET "+target+" Range: bytes=1000-1999", resp.Header); err != nil {
			t.Error(err)
		}
	})

	t.Run("not-modified", func(t *testing.T) {
		resp, _, err := fwGet(fwClient(), s.URL+target)
		if err != nil {
			t.Fatal(err)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Fatalf("GET %s: no ETag", target)
		}
		req, _ := http.NewRequest("GET", s.URL+target, nil)
		req.Header.Set("If-None-Match", etag)
		resp, body, err := fwDo(fwClient(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 304 || body != "" {
			t.Errorf("GET %s If-None-Match %s = %d with %d body bytes; want 304, no body", target, etag, resp.StatusCode, len(body))
		}
		if err := fwOneDate("GET "+target+" If-None-Match", resp.Header); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { fwNoPythonErrors(t, s) })
}
