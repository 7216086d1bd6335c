package http1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRFC9112_ParseHead checks what parseHead extracts from accepted heads.
func TestRFC9112_ParseHead(t *testing.T) {
	for _, tc := range []struct {
		id, head string
		want     string // requestSummary without the header lines
	}{
		{"origin-query", "GET /a%20b?x=1&y HTTP/1.1\r\nHost: h:80\r\n\r\n",
			`"GET" "/a%20b?x=1&y" "/a%20b" "x=1&y" 1.1 host="h:80" cl=0 chunked=false expect=false close=false`},
		{"empty-query", "GET /a? HTTP/1.1\r\nHost: h\r\n\r\n",
			`"GET" "/a?" "/a" "" 1.1 host="h" cl=0 chunked=false expect=false close=false`},
		{"absolute-host-wins", "GET http://A.example:8080/p HTTP/1.1\r\nHost: other\r\n\r\n",
			`"GET" "http://A.example:8080/p" "/p" "" 1.1 host="A.example:8080" cl=0 chunked=false expect=false close=false`},
		{"chunked-expect", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-Continue\r\n\r\n",
			`"POST" "/" "/" "" 1.1 host="h" cl=-1 chunked=true expect=true close=false`},
		{"http10-expect-ignored", "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
			`"POST" "/" "/" "" 1.0 host="" cl=5 chunked=false expect=false close=true`},
		{"http10-keepalive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
			`"GET" "/" "/" "" 1.0 host="" cl=0 chunked=false expect=false close=false`},
		{"connection-list", "GET / HTTP/1.1\r\nHost: h\r\nConnection: ,upgrade, CLOSE ,\r\n\r\n",
			`"GET" "/" "/" "" 1.1 host="h" cl=0 chunked=false expect=false close=true`},
		{"cl-equal-list", "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 007, 7\r\n\r\n",
			`"PUT" "/" "/" "" 1.1 host="h" cl=7 chunked=false expect=false close=false`},
	} {
		t.Run(tc.id, func(t *testing.T) {
			var r Request
			if perr := parseHead([]byte(tc.head), &r); perr != nil {
				t.Fatalf("parseHead = %v", perr)
			}
			got, _, _ := strings.Cut(requestSummary(&r), "\n")
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	// RFC 9112 §3.2.2: the absolute-form authority replaces the Host
	// field's value too (one host for every reader), and an HTTP/1.0
	// request without Host gets one.
	for _, head := range []string{"GET http://a.example/p HTTP/1.1\r\nHost: other\r\nX: y\r\n\r\n", "GET http://a.example/p HTTP/1.0\r\nX: y\r\n\r\n"} {
		var r Request
		if perr := parseHead([]byte(head), &r); perr != nil {
			t.Fatal(perr)
		}
		if v := r.HeaderValue("host"); string(v) != "a.example" || len(r.Header) != 2 {
			t.Errorf("%q: Host field %q, %d fields; want a.example, 2", head, v, len(r.Header))
		}
	}
	t.Run("fields-ows-trimmed-case-kept", func(t *testing.T) {
		var r Request
		if perr := parseHead([]byte("GET / HTTP/1.1\r\nhOsT: h\r\nX-A: \t a b \t\r\nX-Empty:\r\n\r\n"), &r); perr != nil {
			t.Fatal(perr)
		}
		if len(r.Header) != 3 || string(r.Header[0].Name) != "hOsT" || string(r.Header[1].Value) != "a b" || len(r.Header[2].Value) != 0 {
			t.Errorf("Header = %q", r.Header)
		}
		if v := r.HeaderValue("x-a"); string(v) != "a b" {
			t.Errorf("HeaderValue(x-a) = %q", v)
		}
		if v := r.HeaderValue("missing"); v != nil {
			t.Errorf("HeaderValue(missing) = %q", v)
		}
	})
}

// TestRFC9112_HostValue: RFC 9112 §3.2 answers 400 to "a Host header
// field with an invalid field value": uri-host [ ":" port ] with port =
// *DIGIT (RFC 3986 §3.2.3), in the Host field and in an absolute-form
// target alike. A review sent "Host: EXAMPLE.com:abc" and got 200.
func TestRFC9112_HostValue(t *testing.T) {
	for h, ok := range map[string]bool{
		"a": true, "example.com:80": true, "example.com:": true, "[::1]": true,
		"[::1]:8080": true, "1.2.3.4:1": true, "x:99999": true,
		"EXAMPLE.com:abc": false, "a:b:80": false, "[::1]x": false, "[::1": false,
		"a]b": false, "[a[b]": false, "h:8a": false, "::1": false,
	} {
		for _, head := range []string{
			"GET / HTTP/1.1\r\nHost: " + h + "\r\n\r\n",
			"GET http://" + h + "/p HTTP/1.1\r\nHost: x\r\n\r\n",
		} {
			var r Request
			perr := parseHead([]byte(head), &r)
			if ok && perr != nil {
				t.Errorf("%q: %v, want accepted", head, perr)
			}
			if !ok && perr == nil {
				t.Errorf("%q: accepted, want 400", head)
			}
		}
	}
}

// TestRFC9112_Chunked drives the decoder directly, including the Buffered/
// Consume/Done fast path and the 413 bound.
func TestRFC9112_Chunked(t *testing.T) {
	body := func(data string, max int64) *Body {
		var b Body
		b.reset(bufio.NewReaderSize(strings.NewReader(data), 16), -1, true, max, false)
		return &b
	}
	t.Run("small-reads", func(t *testing.T) {
		b := body("4\r\nWiki\r\n6;x\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nA: 1\r\n\r\nNEXT", 0)
		out, err := io.ReadAll(io.LimitReader(b, 1<<20))
		if err != nil || string(out) != "Wikipedia in \r\n\r\nchunks." {
			t.Fatalf("got %q, %v", out, err)
		}
		if tr := b.Trailer(); len(tr) != 1 || string(tr[0].Name) != "A" || string(tr[0].Value) != "1" {
			t.Errorf("Trailer = %q", tr)
		}
		if !b.Done() {
			t.Error("Done = false after EOF")
		}
		if rest, _ := io.ReadAll(b.br); string(rest) != "NEXT" {
			t.Errorf("decoder consumed past the body: rest %q", rest)
		}
	})
	t.Run("too-large", func(t *testing.T) {
		b := body("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", 8)
		_, err := io.ReadAll(b)
		if err != ErrBodyTooLarge {
			t.Errorf("err = %v; want ErrBodyTooLarge", err)
		}
	})
	t.Run("extension-flood", func(t *testing.T) {
		flood := strings.Repeat("1;"+strings.Repeat("e", 1000)+"\r\na\r\n", 100) + "0\r\n\r\n"
		var b Body
		b.reset(bufio.NewReaderSize(strings.NewReader(flood), 4096), -1, true, 0, false)
		if _, err := io.ReadAll(&b); err == nil {
			t.Error("100 KB of chunk extensions accepted")
		}
	})
	t.Run("content-length-fast-path", func(t *testing.T) {
		var b Body
		br := bufio.NewReaderSize(strings.NewReader("helloNEXT"), 16)
		br.Peek(1)
		b.reset(br, 5, false, 0, false)
		if !b.Done() || string(b.Buffered()) != "hello" {
			t.Fatalf("Done=%v Buffered=%q", b.Done(), b.Buffered())
		}
		b.Consume(2)
		rest, err := io.ReadAll(&b)
		if string(rest) != "llo" || err != nil {
			t.Errorf("rest = %q, %v", rest, err)
		}
	})
}

// TestServer_SendFile sends a file region with sendfile, both with a
// declared length and chunked.
func TestServer_SendFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := bytes.Repeat([]byte("0123456789"), 100000) // 1 MB
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, nil, func(w *ResponseWriter, r *Request) {
		f, err := os.Open(path)
		if err != nil {
			panic(err)
		}
		defer f.Close()
		n := int64(-1)
		if string(r.Path) == "/len" {
			n = 500000
		}
		w.WriteHead(200, []byte("200 OK"), nil, n, false)
		w.Write([]byte("<"))
		if _, err := w.SendFile(f, 3, 499999); err != nil {
			panic(err)
		}
	})
	for _, path := range []string{"/len", "/chunked"} {
		t.Run(path, func(t *testing.T) {
			c, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			out, _ := io.ReadAll(c)
			_, body, _ := bytes.Cut(out, []byte("\r\n\r\n"))
			if path == "/chunked" {
				want := "1\r\n<\r\n7a11f\r\n" + string(data[3:500002]) + "\r\n0\r\n\r\n"
				if string(body) != want {
					t.Errorf("chunked body: %d bytes, prefix %q", len(body), body[:min(30, len(body))])
				}
				return
			}
			if string(body) != "<"+string(data[3:500002]) {
				t.Errorf("body: %d bytes, want 500000", len(body))
			}
		})
	}
}
