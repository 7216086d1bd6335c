package tests

// ASGI frameworks from PyPI (requirements/test.txt: FastAPI 0.165.0,
// Starlette 1.10.0, Django 5.2.19) served by the real binary:
// testapps/asgi_fastapi.py, testapps/asgi_starlette.py and the Django
// project testapps/asgi_django (through get_asgi_application()). Helpers
// (fwClient, fwDo, fwRandom, ...) are in frameworks_test.go.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ---- FastAPI ----------------------------------------------------------------

const fastapiApp = "asgi_fastapi:app"

// fastapiJSON does req and decodes a JSON answer with the wanted status.
func fastapiJSON(req *http.Request, wantStatus int, v any) error {
	resp, body, err := fwDo(asgiClient, req)
	if err != nil {
		return err
	}
	if resp.StatusCode != wantStatus {
		return fmt.Errorf("%s %s = %d %q; want %d", req.Method, req.URL.RequestURI(), resp.StatusCode, body, wantStatus)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("%s %s: Content-Type %q; want application/json", req.Method, req.URL.RequestURI(), ct)
	}
	if err := fwOneDate(req.URL.RequestURI(), resp.Header); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("%s %s: %q: %v", req.Method, req.URL.RequestURI(), body, err)
	}
	return nil
}

func fastapiGet(s *Server, path string, wantStatus int, v any) error {
	req, _ := http.NewRequest("GET", s.URL+path, nil)
	return fastapiJSON(req, wantStatus, v)
}

// fastapiError is FastAPI's 422 body.
type fastapiError struct {
	Detail []struct {
		Type string `json:"type"`
		Loc  []any  `json:"loc"`
	} `json:"detail"`
}

func (e fastapiError) locs() string {
	var out []string
	for _, d := range e.Detail {
		b, _ := json.Marshal(d.Loc)
		out = append(out, string(b))
	}
	return strings.Join(out, " ")
}

func TestFastAPI_JSON(t *testing.T) {
	s := Start(t, fastapiApp)
	one := func() error {
		var got map[string]string
		if err := fastapiGet(s, "/", 200, &got); err != nil {
			return err
		}
		if len(got) != 1 || got["hello"] != "world" {
			return fmt.Errorf("GET / = %v; want {\"hello\": \"world\"}", got)
		}
		return nil
	}
	onceThenConcurrently(t, caseN, one)
	fwNoPythonErrors(t, s)
}

func TestFastAPI_PathAndQuery(t *testing.T) {
	s := Start(t, fastapiApp)
	type item struct {
		ItemID int     `json:"item_id"`
		Q      *string `json:"q"`
		Limit  int     `json:"limit"`
	}
	for _, tc := range []struct {
		id, path string
		item     int
		q        string // "" = null
		limit    int
	}{
		{"path-and-query", "/items/42?q=hello%20world&limit=5", 42, "hello world", 5},
		{"defaults", "/items/7", 7, "", 10},
		{"unicode-query", "/items/1?q=%E5%A5%94%E9%A9%B0", 1, "奔驰", 10},
	} {
		t.Run(tc.id, func(t *testing.T) {
			one := func() error {
				var got item
				if err := fastapiGet(s, tc.path, 200, &got); err != nil {
					return err
				}
				q := ""
				if got.Q != nil {
					q = *got.Q
				}
				if got.ItemID != tc.item || q != tc.q || got.Limit != tc.limit || (tc.q == "") != (got.Q == nil) {
					return fmt.Errorf("GET %s = %+v (q %q); want item_id %d q %q limit %d", tc.path, got, q, tc.item, tc.q, tc.limit)
				}
				return nil
			}
			onceThenConcurrently(t, fwConcurrency, one)
		})
	}
	for _, tc := range []struct{ id, path, loc string }{
		{"path-not-int", "/items/abc", `["path","item_id"]`},
		{"query-not-int", "/items/1?limit=many", `["query","limit"]`},
		{"query-out-of-range", "/items/1?limit=0", `["query","limit"]`},
	} {
		t.Run("422/"+tc.id, func(t *testing.T) {
			var e fastapiError
			if err := fastapiGet(s, tc.path, 422, &e); err != nil {
				t.Fatal(err)
			}
			if e.locs() != tc.loc {
				t.Fatalf("GET %s: 422 detail locations %s; want %s", tc.path, e.locs(), tc.loc)
			}
		})
	}
	fwNoPythonErrors(t, s)
}

func TestFastAPI_PostBody(t *testing.T) {
	s := Start(t, fastapiApp)
	post := func(body string, wantStatus int, v any) error {
		req, _ := http.NewRequest("POST", s.URL+"/items", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return fastapiJSON(req, wantStatus, v)
	}
	type answer struct {
		Item struct {
			Name     string   `json:"name"`
			Price    float64  `json:"price"`
			Quantity int      `json:"quantity"`
			Tags     []string `json:"tags"`
		} `json:"item"`
		Total float64 `json:"total"`
	}
	t.Run("model", func(t *testing.T) {
		one := func() error {
			var a answer
			if err := post(`{"name": "widget", "price": 2.5, "quantity": 4, "tags": ["a", "b"]}`, 201, &a); err != nil {
				return err
			}
			if a.Item.Name != "widget" || a.Item.Quantity != 4 || strings.Join(a.Item.Tags, ",") != "a,b" || a.Total != 10 {
				return fmt.Errorf("POST /items = %+v; want the widget back with total 10", a)
			}
			return nil
		}
		onceThenConcurrently(t, caseN, one)
	})
	// A body larger than one http.request message (64 KiB): the model is
	// parsed from several receive() calls.
	t.Run("large-body", func(t *testing.T) {
		tags := make([]string, 20000)
		for i := range tags {
			tags[i] = fmt.Sprintf("tag-%05d", i)
		}
		b, _ := json.Marshal(map[string]any{"name": "bulk", "price": 0.5, "quantity": 3, "tags": tags})
		var a answer
		if err := post(string(b), 201, &a); err != nil {
			t.Fatal(err)
		}
		if len(a.Item.Tags) != len(tags) || a.Item.Tags[len(tags)-1] != tags[len(tags)-1] || a.Total != 1.5 {
			t.Fatalf("POST /items with %d bytes: %d tags back, total %v; want %d tags, total 1.5", len(b), len(a.Item.Tags), a.Total, len(tags))
		}
	})
	for _, tc := range []struct{ id, body, loc string }{
		{"negative-price", `{"name": "widget", "price": -1}`, `["body","price"]`},
		{"missing-name", `{"price": 1}`, `["body","name"]`},
		{"malformed-json", `{"name": "widget", "price": `, `["body",26]`},
	} {
		t.Run("422/"+tc.id, func(t *testing.T) {
			var e fastapiError
			if err := post(tc.body, 422, &e); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(e.locs(), `["body"`) {
				t.Fatalf("POST /items %s: 422 detail locations %s; want a body error like %s", tc.body, e.locs(), tc.loc)
			}
		})
	}
	fwNoPythonErrors(t, s)
}

// A StreamingResponse (an async generator, 200 ms between chunks): chunked
// on the wire, each chunk leaving as the generator yields it.
func TestFastAPI_Streaming(t *testing.T) {
	s := Start(t, fastapiApp)
	const n, gap = 5, 200 * time.Millisecond
	var want strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&want, "chunk %d\n", i)
	}
	target := fmt.Sprintf("/stream?n=%d&gap_ms=%d", n, gap.Milliseconds())

	t.Run("raw", func(t *testing.T) {
		c := dialT(t, s.Addr)
		defer c.Close()
		start := time.Now()
		io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Fatalf("GET %s = %d TE %v; want 200 chunked", target, resp.StatusCode, resp.TransferEncoding)
		}
		var got []byte
		var firstAt time.Duration
		p := make([]byte, 256)
		for {
			k, err := resp.Body.Read(p)
			if k > 0 && firstAt == 0 {
				firstAt = time.Since(start)
			}
			got = append(got, p[:k]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("reading the stream after %q: %v", got, err)
			}
		}
		total := time.Since(start)
		if string(got) != want.String() {
			t.Fatalf("streamed body %q; want %q", got, want.String())
		}
		// The first chunk must not wait for the generator's end (800 ms
		// of gaps after it).
		if total-firstAt < 3*gap {
			t.Fatalf("first chunk after %v, whole body after %v; want the first chunk out at least %v before the end (streamed, not buffered)", firstAt, total, 3*gap)
		}
		t.Logf("first chunk after %v, last after %v", firstAt, total)
	})
	t.Run("concurrent", func(t *testing.T) {
		fwRunN(t, fwConcurrency, func() error {
			resp, body, err := fwGet(asgiClient, s.URL+target)
			if err != nil {
				return err
			}
			if resp.StatusCode != 200 || body != want.String() || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
				return fmt.Errorf("GET %s = %d %q %q", target, resp.StatusCode, body, resp.Header.Get("Content-Type"))
			}
			return nil
		})
	})
	fwNoPythonErrors(t, s)
}

// A client that leaves in the middle of a StreamingResponse is not an app
// error. Starlette, told spec_version 2.4, turns send()'s ClientDisconnected
// (an OSError) into its own ClientDisconnect, which is not one: it was
// logged with its traceback at ERROR for every aborted stream (uvicorn
// says 2.3 and Starlette cancels the stream quietly).
func TestFastAPI_StreamClientLeaves(t *testing.T) {
	s := Start(t, fastapiApp)
	for i := 0; i < 3; i++ {
		c := dialT(t, s.Addr)
		io.WriteString(c, "GET /stream?n=100&gap_ms=20 HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 16)
		if _, err := io.ReadAtLeast(resp.Body, p, len("chunk 0\n")); err != nil {
			t.Fatalf("first chunk: %v", err)
		}
		c.Close()
	}
	time.Sleep(500 * time.Millisecond) // the next chunks' send() find the client gone
	if resp, body, err := fwGet(asgiClient, s.URL+"/stream?n=2&gap_ms=0"); err != nil || resp.StatusCode != 200 || body != "chunk 0\nchunk 1\n" {
		t.Fatalf("after the aborted streams: %v %q", err, body)
	}
	fwNoPythonErrors(t, s)
}

// A route that awaits asyncio.to_thread runs its function on the server's
// parked pool (ts-exec-N), several at once.
func TestFastAPI_ToThread(t *testing.T) {
	s := Start(t, "--executor-threads", "4", fastapiApp)
	name := regexp.MustCompile(`^ts-exec-[0-3]$`)
	seen := make(chan string, 16)
	start := time.Now()
	fwRunN(t, 8, func() error {
		var got struct {
			Thread string `json:"thread"`
		}
		if err := fastapiGet(s, "/thread?ms=300", 200, &got); err != nil {
			return err
		}
		if !name.MatchString(got.Thread) {
			return fmt.Errorf("asyncio.to_thread ran on %q; want ts-exec-0..3", got.Thread)
		}
		seen <- got.Thread
		return nil
	})
	close(seen)
	d := time.Since(start)
	distinct := map[string]bool{}
	for n := range seen {
		distinct[n] = true
	}
	// 8 jobs of 300 ms on 4 threads: about 600 ms, and several threads.
	if len(distinct) < 2 {
		t.Errorf("8 concurrent to_thread calls ran on %v; want several of the pool's threads", distinct)
	}
	t.Logf("8 × 300 ms to_thread jobs took %v on %d threads", d, len(distinct))
	fwNoPythonErrors(t, s)
}

// ---- Starlette ----------------------------------------------------------------

// StaticFiles over a directory made by the test: bytes match, HEAD sends
// the head alone, a missing file is a 404, and a range request works.
func TestStarlette_StaticFiles(t *testing.T) {
	dir := t.TempDir()
	blob := fwRandom(300<<10, 21)
	os.WriteFile(filepath.Join(dir, "blob.bin"), blob, 0o644)
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello static\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "page.html"), []byte("<p>sub page</p>\n"), 0o644)
	t.Setenv("ASGI_STATIC_DIR", dir)
	s := Start(t, "asgi_starlette:app")

	for _, tc := range []struct {
		id, path, ctype string
		want            []byte
	}{
		{"binary", "/static/blob.bin", "application/octet-stream", blob},
		{"text", "/static/hello.txt", "text/plain; charset=utf-8", []byte("hello static\n")},
		{"subdir", "/static/sub/page.html", "text/html; charset=utf-8", []byte("<p>sub page</p>\n")},
	} {
		t.Run("GET/"+tc.id, func(t *testing.T) {
			one := func() error {
				resp, body, err := fwGet(asgiClient, s.URL+tc.path)
				if err != nil {
					return err
				}
				if resp.StatusCode != 200 || !bytes.Equal([]byte(body), tc.want) {
					return fmt.Errorf("GET %s = %d, %d bytes (sha256 %s); want 200, %d bytes (%s)", tc.path, resp.StatusCode, len(body), fwSHA256([]byte(body)), len(tc.want), fwSHA256(tc.want))
				}
				if ct := resp.Header.Get("Content-Type"); ct != tc.ctype {
					return fmt.Errorf("GET %s: Content-Type %q; want %q", tc.path, ct, tc.ctype)
				}
				if resp.ContentLength != int64(len(tc.want)) {
					return fmt.Errorf("GET %s: Content-Length %d; want %d", tc.path, resp.ContentLength, len(tc.want))
				}
				return fwOneDate(tc.path, resp.Header)
			}
			onceThenConcurrently(t, fwConcurrency, one)
		})
	}

	t.Run("HEAD", func(t *testing.T) {
		// Raw, pipelined with a GET: the HEAD answer has the GET's
		// Content-Length and no body, so the next response starts right
		// after its head.
		c := dialT(t, s.Addr)
		defer c.Close()
		io.WriteString(c, "HEAD /static/blob.bin HTTP/1.1\r\nHost: a\r\n\r\nGET /static/hello.txt HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		r1, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
		if err != nil {
			t.Fatal(err)
		}
		r1.Body.Close()
		if r1.StatusCode != 200 || r1.Header.Get("Content-Length") != fmt.Sprint(len(blob)) {
			t.Fatalf("HEAD /static/blob.bin = %d Content-Length %q; want 200 and %d", r1.StatusCode, r1.Header.Get("Content-Length"), len(blob))
		}
		r2, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("the response after the HEAD: %v (body bytes after a HEAD head?)", err)
		}
		b2, _ := io.ReadAll(r2.Body)
		if r2.StatusCode != 200 || string(b2) != "hello static\n" {
			t.Fatalf("GET after HEAD = %d %q; want 200 \"hello static\\n\"", r2.StatusCode, b2)
		}
	})

	t.Run("404", func(t *testing.T) {
		for _, p := range []string{"/static/missing.txt", "/static/sub/missing.html", "/static/sub/"} {
			resp, body, err := fwGet(asgiClient, s.URL+p)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 404 {
				t.Errorf("GET %s = %d %q; want 404", p, resp.StatusCode, body)
			}
		}
	})

	t.Run("range", func(t *testing.T) {
		req, _ := http.NewRequest("GET", s.URL+"/static/blob.bin", nil)
		req.Header.Set("Range", "bytes=1000-1999")
		resp, body, err := fwDo(asgiClient, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 206 || body != string(blob[1000:2000]) || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 1000-1999/%d", len(blob)) {
			t.Fatalf("GET blob.bin Range bytes=1000-1999 = %d, %d bytes, Content-Range %q; want 206 and bytes 1000-1999", resp.StatusCode, len(body), resp.Header.Get("Content-Range"))
		}
	})
	fwNoPythonErrors(t, s)
}

// A BackgroundTask runs after the response: the response arrives while
// the task (0.5 s) is still pending, and the task's marker shows up later
// through a second route. Async and sync task functions.
func TestStarlette_BackgroundTask(t *testing.T) {
	t.Setenv("ASGI_STATIC_DIR", t.TempDir()) // asgi_starlette mounts it
	s := Start(t, "asgi_starlette:app")
	for _, route := range []string{"/bg", "/bg-sync"} {
		t.Run(strings.TrimPrefix(route, "/"), func(t *testing.T) {
			one := func(i int) error {
				token := fmt.Sprintf("%s-%d-%d", strings.TrimPrefix(route, "/"), i, time.Now().UnixNano())
				resp, body, err := fwGet(asgiClient, s.URL+route+"?"+token)
				if err != nil {
					return err
				}
				if resp.StatusCode != 200 || body != "queued" {
					return fmt.Errorf("GET %s = %d %q; want 200 \"queued\"", route, resp.StatusCode, body)
				}
				answered := time.Now()
				_, status, err := fwGet(asgiClient, s.URL+"/bg-status?"+url.QueryEscape(token))
				if err != nil {
					return err
				}
				if status != "pending" && time.Since(answered) < 400*time.Millisecond {
					return fmt.Errorf("GET %s: the task had run (%q) when the response arrived; want the response first", route, status)
				}
				for time.Since(answered) < 5*time.Second {
					_, status, err = fwGet(asgiClient, s.URL+"/bg-status?"+url.QueryEscape(token))
					if err != nil {
						return err
					}
					if status == "done" {
						return nil
					}
					time.Sleep(50 * time.Millisecond)
				}
				return fmt.Errorf("GET %s: the background task did not run within 5 s after the response", route)
			}
			if err := one(0); err != nil {
				t.Fatal(err)
			}
			concurrently(t, fwConcurrency, func(i int) error { return one(i + 1) })
		})
	}
	fwNoPythonErrors(t, s)
}

// ---- Django through its ASGI handler ------------------------------------------------

const djangoASGIApp = "asgi_django.asgi:application"

func TestDjangoASGI_TemplateView(t *testing.T) {
	s := Start(t, djangoASGIApp)
	page := func(name string) string {
		return "<!doctype html>\n<title>Hello</title>\n<h1>Hello, " + name + "!</h1>\n" +
			"<ul><li>one</li><li>two</li><li>three</li></ul>\n"
	}
	for _, tc := range []struct{ id, path, want string }{
		{"sync-view", "/hello/world/", page("world")},
		{"async-view", "/async-hello/world/", page("world")},
		{"autoescape", "/hello/%3Cb%3E/", page("&lt;b&gt;")},
		{"unicode", "/hello/%E5%A5%94%E9%A9%B0/", page("奔驰")},
	} {
		t.Run(tc.id, func(t *testing.T) {
			one := func() error {
				resp, body, err := fwGet(asgiClient, s.URL+tc.path)
				if err != nil {
					return err
				}
				if resp.StatusCode != 200 || body != tc.want {
					return fmt.Errorf("GET %s = %d %q; want 200 %q", tc.path, resp.StatusCode, body, tc.want)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
					return fmt.Errorf("GET %s: Content-Type %q; want text/html; charset=utf-8", tc.path, ct)
				}
				return fwOneDate(tc.path, resp.Header)
			}
			onceThenConcurrently(t, fwConcurrency, one)
		})
	}
	t.Run("404", func(t *testing.T) {
		resp, _, err := fwGet(asgiClient, s.URL+"/nope/")
		if err != nil || resp.StatusCode != 404 {
			t.Fatalf("GET /nope/ = %v %v; want 404", resp, err)
		}
	})
	fwNoPythonErrors(t, s, "Not Found:")
}

// A form POST with CSRF: GET the form (token + csrftoken cookie), POST with
// both → 302 to the thanks page, which shows the flash message; without
// the token, or without the cookie → 403; an invalid form → 200 with its
// errors.
func TestDjangoASGI_CSRFForm(t *testing.T) {
	s := Start(t, djangoASGIApp)
	getForm := func(c *http.Client) (string, error) {
		resp, body, err := fwGet(c, s.URL+"/form/")
		if err != nil {
			return "", err
		}
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("GET /form/ = %d %q; want 200", resp.StatusCode, body)
		}
		if !fwHasCookie(c.Jar.Cookies(asgiURL(s.URL)), "csrftoken") {
			return "", fmt.Errorf("GET /form/ set no csrftoken cookie")
		}
		return djangoCSRFToken(body)
	}
	referer := http.Header{"Referer": {s.URL + "/form/"}}

	t.Run("valid", func(t *testing.T) {
		one := func() error {
			c := fwClient()
			token, err := getForm(c)
			if err != nil {
				return err
			}
			resp, body, err := fwPostForm(c, s.URL+"/form/", url.Values{"csrfmiddlewaretoken": {token}, "message": {"hi über"}}, referer)
			if err != nil {
				return err
			}
			if resp.StatusCode != 302 || resp.Header.Get("Location") != "/form/thanks/" {
				return fmt.Errorf("POST /form/ = %d Location %q %q; want 302 to /form/thanks/", resp.StatusCode, resp.Header.Get("Location"), body)
			}
			resp, body, err = fwGet(c, s.URL+"/form/thanks/")
			if err != nil {
				return err
			}
			if resp.StatusCode != 200 || !strings.Contains(body, "<li>Got: hi über</li>") {
				return fmt.Errorf("GET /form/thanks/ = %d %q; want 200 with the flash message", resp.StatusCode, body)
			}
			return nil
		}
		onceThenConcurrently(t, fwConcurrency, one)
	})
	t.Run("invalid-form", func(t *testing.T) {
		c := fwClient()
		token, err := getForm(c)
		if err != nil {
			t.Fatal(err)
		}
		resp, body, err := fwPostForm(c, s.URL+"/form/", url.Values{"csrfmiddlewaretoken": {token}, "message": {""}}, referer)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || !strings.Contains(body, "This field is required.") {
			t.Fatalf("POST /form/ with an empty message = %d %q; want 200 with the form's error", resp.StatusCode, body)
		}
	})
	t.Run("403-without-token", func(t *testing.T) {
		c := fwClient()
		if _, err := getForm(c); err != nil {
			t.Fatal(err)
		}
		resp, body, err := fwPostForm(c, s.URL+"/form/", url.Values{"message": {"hi"}}, referer)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 403 {
			t.Fatalf("POST /form/ without the token = %d %q; want 403", resp.StatusCode, body)
		}
	})
	t.Run("403-without-cookie", func(t *testing.T) {
		token, err := getForm(fwClient())
		if err != nil {
			t.Fatal(err)
		}
		resp, body, err := fwPostForm(fwClient(), s.URL+"/form/", url.Values{"csrfmiddlewaretoken": {token}, "message": {"hi"}}, referer)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 403 {
			t.Fatalf("POST /form/ without the cookie = %d %q; want 403", resp.StatusCode, body)
		}
	})
	fwNoPythonErrors(t, s, "Forbidden (CSRF")
}

func asgiURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
