package accesslog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"turnstile/internal/http1"
	"turnstile/internal/inflight"
)

func TestCompile_Errors(t *testing.T) {
	for _, tc := range []struct{ id, format, want string }{
		{"unknown-atom", "%(h)s %(x)s", "unknown atom %(x)s"},
		{"unbalanced", `%(h)s "%(r`, "unbalanced %( at byte 7"},
		{"conversion-d", "%(s)d", "%(s) is followed by 'd': want %(s)s"},
		{"no-conversion", "%(s)", "%(s) is followed by nothing"},
		{"positional", "%s", `"%s" at byte 0: want %(NAME)s or %%`},
		{"lone-percent", "100%", "a lone % at the end"},
		{"empty-header", "%({}i)s", "names no header"},
		{"environ-unknown", "%({foo}e)s", "not foo"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			_, err := Compile(tc.format)
			if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Compile(%q) = %v; want one line with %q", tc.format, err, tc.want)
			}
		})
	}
}

func TestCompile_Parts(t *testing.T) {
	f, err := Compile(`%(h)s "%(r)s" 100%% %({X-Req}i)s%({(a)}o)s`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Part{{RemoteAddr, ""}, {literal, ` "`}, {RequestLine, ""}, {literal, `" 100% `},
		{RequestHeader, "x-req"}, {ResponseHeader, "(a)"}}
	if len(f.Parts) != len(want) {
		t.Fatalf("parts %+v; want %+v", f.Parts, want)
	}
	for i := range want {
		if f.Parts[i] != want[i] {
			t.Errorf("part %d = %+v; want %+v", i, f.Parts[i], want[i])
		}
	}
	if !f.ResponseHeaders {
		t.Error("ResponseHeaders = false; want true")
	}
}

// entry is one WSGI request as gunicorn's own tests would log it.
func entry() *Entry {
	r := &http1.Request{
		Method: []byte("GET"), Target: []byte(`/app/a%20b/caf%C3%A9?x=1&y="q"`), Path: []byte("/app/a%20b/caf%C3%A9"),
		RawQuery: []byte(`x=1&y="q"`), ProtoMajor: 1, ProtoMinor: 1,
		Header: []http1.Field{
			{Name: []byte("User-Agent"), Value: []byte(`ua "q"`)},
			{Name: []byte("X-Req"), Value: []byte("one")},
			{Name: []byte("x-req"), Value: []byte("two")},
			{Name: []byte("Authorization"), Value: []byte("Basic dXNlcjpwYXNz")},
		},
		RemoteAddr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40000},
	}
	return &Entry{
		Request: r,
		Result: inflight.Result{Status: 404, Bytes: 9, Duration: 2*time.Second + 3456*time.Microsecond, Pool: true,
			QueueWait: 1500 * time.Microsecond, GILWait: 250 * time.Microsecond, Ran: true, Thread: 3,
			Header: []byte("Content-Type: text/plain\r\nX-Resp: a\r\nx-resp: b\r\n")},
		Now: time.Date(2026, 12, 1, 21, 43, 12, 0, time.FixedZone("", 3600)), Pid: 4242, Worker: "2", Loop: -1,
	}
}

func TestAppend(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{`%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"`,
			`10.0.0.7 - user [01/Dec/2026:21:43:12 +0100] "GET /app/a%20b/caf%C3%A9?x=1&y=\"q\" HTTP/1.1" 404 9 "-" "ua \"q\""`},
		{"%(m)s %(U)s %(q)s %(H)s %(B)s", `GET /a b/cafÃ© x=1&y=\"q\" HTTP/1.1 9`},
		{"%(T)s %(D)s %(M)s %(L)s %(p)s", "2 2003456 2003 2.003456 <4242>"},
		{"%({x-req}i)s %({X-RESP}o)s %({content-type}o)s %({nope}i)s", "two b text/plain -"},
		{"%({http_x_req}e)s %({PATH_INFO}e)s %({script_name}e)s %({remote_port}e)s %({wsgi.url_scheme}e)s", "one, two /a b/cafÃ© /app 40000 http"},
		{"%(queue_wait_us)s %(queue_wait_ms)s %(gil_wait_us)s %(gil_wait_ms)s %(worker)s %(loop)s %(thread)s", "1500 1.500 250 0.250 2 - 3"},
	} {
		f, err := Compile(tc.format)
		if err != nil {
			t.Fatal(err)
		}
		f.RootPath = "/app"
		if got := string(f.Append(nil, entry())); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.format, got, tc.want)
		}
	}
}

// The Basic user is UTF-8 (gunicorn decodes it so), the rest latin-1; a
// control character stays on the line.
func TestAppend_Bytes(t *testing.T) {
	f, err := Compile("%(u)s %(U)s %(a)s")
	if err != nil {
		t.Fatal(err)
	}
	e := entry()
	e.Request.Path = []byte("/%00a%0Ab")
	e.Request.Header = []http1.Field{
		{Name: []byte("Authorization"), Value: []byte("basic am9zw6k6eA==")}, // josé:x
		{Name: []byte("User-Agent"), Value: []byte("caf\xe9")},
	}
	if got, want := string(f.Append(nil, e)), `josé /\x00a\x0ab café`; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestAttrs(t *testing.T) {
	f, err := Compile(`%(h)s "%(r)s" %(s)s %(b)s %(B)s %(f)s %(D)s %(queue_wait_ms)s %(worker)s %(loop)s %(thread)s %({x-req}i)s %({x-resp}o)s`)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, nil)
	rec := slog.NewRecord(time.Time{}, slog.LevelInfo, "access", 0)
	rec.AddAttrs(f.Attrs(entry())...)
	h.Handle(context.Background(), rec)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	delete(got, "level")
	want := `{"msg":"access","remote_addr":"10.0.0.7","request_line":"GET /app/a%20b/caf%C3%A9?x=1\u0026y=\"q\" HTTP/1.1","status":404,"bytes":9,"referer":"-","duration_us":2003456,"queue_wait_ms":1.5,"thread":3,"request_headers":{"x-req":"two"},"response_headers":{"x-resp":"b"}}`
	var w map[string]any
	json.Unmarshal([]byte(want), &w)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("Attrs:\n got %s\nwant %s", gb, wb)
	}
}

// Compiling is done once; a line allocates nothing but its buffer's
// growth.
func TestAppend_Allocs(t *testing.T) {
	f, _ := Compile(`%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(D)s`)
	e := entry()
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf = f.Append(buf[:0], e) }); n > 3 {
		t.Errorf("Append: %v allocations; want at most 3", n)
	}
}
