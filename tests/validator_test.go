package tests

// PEP 3333 conformance as Python's reference checker sees it: the echo app
// in testapps/validated.py is wrapped in wsgiref.validate.validator, with
// every WSGIWarning raised as an error. Any violation by the server (a
// wrong environ, a wsgi.input that misbehaves, iterating before
// start_response, not calling close()) becomes a 500 and a traceback in the
// log, so each case checks for a 200 with the right echo and the test
// checks that the log has no traceback.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const validatedApp = "validated:application"

// valRequest is one request of a case and what the echo must say.
type valRequest struct {
	method  string
	target  string   // path and query
	body    []byte   // sent with Content-Length, unless chunks is set
	chunks  [][]byte // sent with Transfer-Encoding: chunked, one write (and a pause) per chunk
	ext     string   // chunk extension on every chunk-size line (";name=value")
	trailer string   // trailer fields after the last chunk ("Name: value\r\n")
	expect  bool     // send Expect: 100-continue and wait for the 100 before the body
	noCL    bool     // no body and no Content-Length header (GET, HEAD)
	wantCL  string   // CONTENT_LENGTH in the environ
	lines   int      // expected line count for read=lines/iter/readlines; 0: not checked
	wantGen bool     // the app streams its answer (resp=gen): chunked response
}

func (r valRequest) fullBody() []byte {
	if r.chunks == nil {
		return r.body
	}
	return bytes.Join(r.chunks, nil)
}

// wire writes the request to w, pausing between chunks. For Expect it
// writes the head only; the caller sends the body after the 100.
func (r valRequest) writeHead(w io.Writer, host string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.method, r.target, host)
	switch {
	case r.chunks != nil:
		b.WriteString("Transfer-Encoding: chunked\r\n")
	case !r.noCL:
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(r.body))
	}
	if r.body != nil || r.chunks != nil {
		b.WriteString("Content-Type: application/octet-stream\r\n")
	}
	if r.expect {
		b.WriteString("Expect: 100-continue\r\n")
	}
	b.WriteString("\r\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (r valRequest) writeBody(w io.Writer, pause time.Duration) error {
	if r.chunks == nil {
		_, err := w.Write(r.body)
		return err
	}
	for _, c := range r.chunks {
		if _, err := fmt.Fprintf(w, "%x%s\r\n%s\r\n", len(c), r.ext, c); err != nil {
			return err
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	_, err := io.WriteString(w, "0"+r.ext+"\r\n"+r.trailer+"\r\n")
	return err
}

// want is the echo's answer to r, byte for byte as Python writes it:
// json.dumps(facts, sort_keys=True) and a newline.
func (r valRequest) want() string {
	full := r.fullBody()
	path, query, _ := strings.Cut(r.target, "?")
	lines := "null"
	if r.lines > 0 {
		lines = strconv.Itoa(r.lines)
	}
	return fmt.Sprintf(`{"content_length": %s, "input_terminated": true, "length": %d, "lines": %s, "method": %s, "path": %s, "query": %s, "sha256": %s}`+"\n",
		valPyString(r.wantCL), len(full), lines, valPyString(r.method), valPyString(path), valPyString(query), valPyString(fwSHA256(full)))
}

// valPyString is s as Python's json.dumps writes it (ASCII-only input).
func valPyString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// check compares one response with what the echo must say.
func (r valRequest) check(resp *http.Response, body []byte) error {
	what := r.method + " " + r.target
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s = %d; want 200\n%s", what, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("%s: Content-Type = %q; want application/json", what, ct)
	}
	if err := fwOneDate(what, resp.Header); err != nil {
		return err
	}
	want := r.want()
	cl := resp.Header.Values("Content-Length")
	if r.method == "HEAD" {
		if len(body) != 0 {
			return fmt.Errorf("%s: %d body bytes; want none", what, len(body))
		}
		// RFC 9110 §8.6: a Content-Length on HEAD must be the GET's.
		// The app sets it, except when it streams (resp=gen).
		if (len(cl) > 0 || !r.wantGen) && (len(cl) != 1 || cl[0] != strconv.Itoa(len(want))) {
			return fmt.Errorf("%s: Content-Length = %q; want %d (the app's)", what, cl, len(want))
		}
		return nil
	}
	chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
	if chunked != r.wantGen {
		return fmt.Errorf("%s: chunked response = %v (Content-Length %q); want %v", what, chunked, cl, r.wantGen)
	}
	if string(body) != want {
		return fmt.Errorf("%s: echo = %s\nwant %s", what, body, want)
	}
	return nil
}

// valExchange runs reqs one after another on one raw connection (keep-alive)
// and checks each response. With pipelined, every request is written
// before any response is read (bodies must then be complete: no Expect).
func valExchange(addr string, reqs []valRequest, pipelined bool) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(c)
	bw := bufio.NewWriter(c)
	send := func(r valRequest) error {
		if err := r.writeHead(bw, addr); err != nil {
			return err
		}
		pause := 20 * time.Millisecond
		if pipelined {
			pause = 0
		}
		if r.expect {
			if err := bw.Flush(); err != nil {
				return err
			}
			// RFC 9110 §10.1.1: the client waits for 100 (Continue)
			// before the body. Go's reader skips 1xx responses, so read
			// this one by hand.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("%s %s with Expect: 100-continue: waiting for the 100: %v", r.method, r.target, err)
			}
			if !strings.HasPrefix(line, "HTTP/1.1 100 ") {
				return fmt.Errorf("%s %s with Expect: 100-continue: got %q; want HTTP/1.1 100 Continue", r.method, r.target, line)
			}
			if blank, err := br.ReadString('\n'); err != nil || blank != "\r\n" {
				return fmt.Errorf("%s %s: after the 100: %q, %v; want an empty line", r.method, r.target, blank, err)
			}
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
		}
		if r.chunks != nil && pause > 0 {
			// Flush each chunk on its own so the server sees it arrive
			// in pieces.
			if err := bw.Flush(); err != nil {
				return err
			}
			return r.writeBody(valFlushWriter{bw}, pause)
		}
		if err := r.writeBody(bw, 0); err != nil {
			return err
		}
		return bw.Flush()
	}
	recv := func(r valRequest) error {
		resp, err := http.ReadResponse(br, &http.Request{Method: r.method})
		if err != nil {
			return fmt.Errorf("%s %s: reading the response: %v", r.method, r.target, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("%s %s: reading the body: %v", r.method, r.target, err)
		}
		if resp.Close {
			return fmt.Errorf("%s %s: the server closes the connection (Connection: close); want keep-alive", r.method, r.target)
		}
		return r.check(resp, body)
	}
	if pipelined {
		for _, r := range reqs {
			if err := send(r); err != nil {
				return err
			}
		}
		for i, r := range reqs {
			if err := recv(r); err != nil {
				return fmt.Errorf("pipelined request %d: %w", i+1, err)
			}
		}
	} else {
		for i, r := range reqs {
			if err := send(r); err != nil {
				return err
			}
			if err := recv(r); err != nil {
				return fmt.Errorf("request %d on the connection: %w", i+1, err)
			}
		}
	}
	// After the last response a HEAD must not have left body bytes behind.
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := br.Read(make([]byte, 1)); n > 0 {
		return fmt.Errorf("unexpected bytes after the last response")
	}
	return nil
}

type valFlushWriter struct{ w *bufio.Writer }

func (f valFlushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

// valGo sends r with Go's client and checks the response.
func valGo(url string, r valRequest) error {
	var body io.Reader
	if !r.noCL {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, url+r.target, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", r.method, r.target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading the body: %w", r.method, r.target, err)
	}
	return r.check(resp, b)
}

func TestPEP3333_Validator(t *testing.T) {
	t.Parallel()

	// The checker itself: a method outside its list is a WSGIWarning,
	// which validated.py turns into an error. So a violation shows as a
	// 500 and a logged traceback, which the cases below must not see.
	t.Run("sanity/warning-is-an-error", func(t *testing.T) {
		t.Parallel()
		s := Start(t, validatedApp)
		req, _ := http.NewRequest("PROPFIND", s.URL+"/echo", nil)
		resp, body, err := fwDo(http.DefaultClient, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 500 {
			t.Errorf("PROPFIND /echo = %d %q; want 500 (the validator warns about the method)", resp.StatusCode, body)
		}
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(s.Logs(), "WSGIWarning") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !strings.Contains(s.Logs(), "WSGIWarning") {
			t.Errorf("server log has no WSGIWarning traceback after the 500")
		}
	})

	s := Start(t, validatedApp)

	small := []byte("hello, validator\n")
	big := fwRandom(8<<20, 8)
	over := fwRandom(64<<10+1, 9) // just past what the server hands Python with the request
	text := bytes.Repeat([]byte("a line of text, not too long\n"), 2000)
	chunks := [][]byte{[]byte("line1\n"), []byte("lin"), []byte("e2\n"), []byte("x"), bytes.Repeat([]byte("y"), 5000), []byte("\nlast")}
	var bigChunks [][]byte
	for i := range 24 {
		bigChunks = append(bigChunks, fwRandom(48<<10+i, uint64(20+i)))
	}

	get := valRequest{method: "GET", target: "/echo?x=1&y=%C3%A9", noCL: true}
	head := valRequest{method: "HEAD", target: "/echo", noCL: true}
	postSmall := valRequest{method: "POST", target: "/echo", body: small, wantCL: strconv.Itoa(len(small))}
	postOver := valRequest{method: "PUT", target: "/echo?read=small", body: over, wantCL: strconv.Itoa(len(over))}
	postChunked := valRequest{method: "POST", target: "/echo?read=lines", chunks: chunks, lines: 4}
	genResp := valRequest{method: "GET", target: "/echo?resp=gen", noCL: true, wantGen: true}
	headGen := valRequest{method: "HEAD", target: "/echo?resp=gen", noCL: true, wantGen: true}
	headWrite := valRequest{method: "HEAD", target: "/echo?resp=write", noCL: true}

	tests := []struct {
		id        string
		reqs      []valRequest // on one connection
		client    string       // "go" (net/http, one request) or "raw" (TCP, reqs in order)
		pipelined bool
	}{
		{id: "get", client: "go", reqs: []valRequest{get}},
		{id: "head", client: "raw", reqs: []valRequest{head, get}},
		{id: "post-small", client: "go", reqs: []valRequest{postSmall}},
		{id: "post-empty", client: "go", reqs: []valRequest{{method: "POST", target: "/echo", body: []byte{}, wantCL: "0"}}},
		{id: "post-8MiB", client: "go", reqs: []valRequest{{method: "POST", target: "/echo", body: big, wantCL: strconv.Itoa(len(big))}}},
		{id: "put-64KiB+1-small-reads", client: "go", reqs: []valRequest{postOver}},
		{id: "post-readline", client: "go", reqs: []valRequest{{method: "POST", target: "/echo?read=lines", body: text, wantCL: strconv.Itoa(len(text)), lines: 2000}}},
		{id: "post-iter", client: "go", reqs: []valRequest{{method: "POST", target: "/echo?read=iter", body: text, wantCL: strconv.Itoa(len(text)), lines: 2000}}},
		{id: "post-readlines", client: "go", reqs: []valRequest{{method: "POST", target: "/echo?read=readlines", body: text, wantCL: strconv.Itoa(len(text)), lines: 2000}}},
		{id: "response-generator", client: "go", reqs: []valRequest{genResp}},
		{id: "head-response-generator", client: "raw", reqs: []valRequest{headGen, get}},
		{id: "head-response-write-callable", client: "raw", reqs: []valRequest{headWrite, get}},
		{id: "response-write-callable", client: "go", reqs: []valRequest{{method: "POST", target: "/echo?resp=write", body: small, wantCL: strconv.Itoa(len(small))}}},

		{id: "chunked/lines-across-chunks", client: "raw", reqs: []valRequest{postChunked}},
		{id: "chunked/one-byte-chunks", client: "raw", reqs: []valRequest{{method: "POST", target: "/echo?read=small", chunks: bytes.SplitAfter([]byte("0123456789ab"), nil)}}},
		// RFC 9112 §7.1.1: unknown chunk extensions are ignored; §7.1.2:
		// a trailer section may follow the last chunk.
		{id: "chunked/extensions-and-trailer", client: "raw", reqs: []valRequest{{method: "POST", target: "/echo", chunks: chunks, ext: ";name=value;flag", trailer: "X-Checksum: abc\r\nX-Other: 1\r\n"}}},
		{id: "chunked/1MiB", client: "raw", reqs: []valRequest{{method: "POST", target: "/echo", chunks: bigChunks}}},
		{id: "expect-100-continue", client: "raw", reqs: []valRequest{{method: "POST", target: "/echo", body: over, wantCL: strconv.Itoa(len(over)), expect: true}}},

		{id: "keepalive/sequential", client: "raw", reqs: []valRequest{get, postSmall, head, postOver, postChunked, genResp, get}},
		{id: "keepalive/pipelined", client: "raw", pipelined: true, reqs: []valRequest{get, postSmall, head, postChunked, genResp, get}},
	}
	t.Run("group", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.id, func(t *testing.T) {
				t.Parallel()
				fwRunN(t, fwConcurrency, func() error {
					if tt.client == "go" {
						return valGo(s.URL, tt.reqs[0])
					}
					return valExchange(s.Addr, tt.reqs, tt.pipelined)
				})
			})
		}
	})
	// Every case has run: the validator must have found nothing.
	fwNoPythonErrors(t, s)
	for _, bad := range []string{"AssertionError", "WSGIWarning", "garbage collected without being closed"} {
		if strings.Contains(s.Logs(), bad) {
			t.Errorf("server log mentions %q", bad)
		}
	}
}
