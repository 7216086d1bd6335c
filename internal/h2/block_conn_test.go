package h2_test

// readBlock, the lazily made stream channels and the reused response
// field strings over a real connection: the review of issue #24's
// allocation work (field blocks split and malformed, HPACK table size
// updates, one connection's dynamic table over many requests, response
// heads that change between requests, uploads reset mid-body).

import (
	"cmp"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"turnstile/internal/h2"
	"turnstile/internal/http1"
)

// headHandler answers with the request's x-echo value in an X-Echo
// response field, and X-Extra only when the request has x-extra, and a
// body naming the request's fields (echoHandler's).
func headHandler(w *http1.ResponseWriter, r *http1.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var hdr, b strings.Builder
	b.WriteString(string(r.Method) + " " + string(r.Target) + " " + itoa(len(body)) + "\n")
	for _, f := range r.Header {
		b.WriteString(string(f.Name) + ": " + string(f.Value) + "\n")
		switch strings.ToLower(string(f.Name)) {
		case "x-echo":
			hdr.WriteString("X-Echo: " + string(f.Value) + "\r\n")
		case "x-extra":
			hdr.WriteString("X-Extra: " + string(f.Value) + "\r\n")
		}
	}
	for _, f := range r.Body.Trailer() {
		b.WriteString("trailer " + string(f.Name) + ": " + string(f.Value) + "\n")
	}
	w.WriteHead(200, []byte("200 OK"), []byte(hdr.String()), int64(b.Len()), false)
	w.Write([]byte(b.String()))
}

// exchange reads stream id's response: its head's regular fields
// ("name: value"), status and body; status is "RST_STREAM CODE" or
// "GOAWAY CODE" when the stream or connection ends instead.
func exchange(rc *rawClient, id uint32) (status string, fields []string, body string) {
	var sb strings.Builder
	err := rc.until(func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == id && status == "" {
				status = f.PseudoValue("status")
				for _, hf := range f.RegularFields() {
					if hf.Name != "date" {
						fields = append(fields, hf.Name+": "+hf.Value)
					}
				}
			}
			return f.StreamID == id && f.StreamEnded()
		case *http2.DataFrame:
			if f.StreamID == id {
				sb.Write(f.Data())
			}
			if len(f.Data()) > 0 {
				rc.fr.WriteWindowUpdate(0, uint32(len(f.Data())))
				rc.flush()
			}
			return f.StreamID == id && f.StreamEnded()
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				status = "RST_STREAM " + f.ErrCode.String()
				return true
			}
		case *http2.GoAwayFrame:
			status = "GOAWAY " + f.ErrCode.String()
			return true
		}
		return false
	})
	if err != nil && status == "" {
		status = "error: " + err.Error()
	}
	return status, fields, sb.String()
}

// continued sends block as a HEADERS frame of its first split bytes and
// CONTINUATION frames of split bytes each.
func (rc *rawClient) continued(id uint32, end bool, block []byte, split int) {
	first := block[:min(split, len(block))]
	rest := block[len(first):]
	rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(rest) == 0})
	for len(rest) > 0 {
		n := min(split, len(rest))
		rc.fr.WriteContinuation(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	rc.flush()
}

// RFC 9113 §6.10, §4.3: a field section split over many CONTINUATION
// frames, fields cut across frames (7 bytes each: every string and
// integer of the block is cut somewhere), decodes as one block; the same
// fields again on the same connection come from the dynamic table (RFC
// 7541 §2.3.2) and still decode to the same values.
func TestFieldBlockContinued(t *testing.T) {
	rc := dial(t, serve(t, h2.Config{}, headHandler))
	long := strings.Repeat("0123456789", 30)
	want := "GET /c 0\nhost: example.test\nx-echo: e1\nx-long: " + long + "\n"
	for i, split := range []int{1, 7, 16384} {
		id := uint32(2*i + 1)
		rc.continued(id, true, rc.block("GET", "/c", "x-echo", "e1", "x-long", long), split)
		status, _, body := exchange(rc, id)
		if status != "200" || body != want {
			t.Fatalf("split %d: %s %q; want 200 %q", split, status, body, want)
		}
	}
}

// RFC 7541 §6.3, §4.2: a dynamic table size update at the start of a
// block is taken (0 empties the table; back to 4096); one above
// SETTINGS_HEADER_TABLE_SIZE (4096, ours by default) or one after a field
// while the table holds entries is a decoding error: a connection error
// COMPRESSION_ERROR (RFC 9113 §4.3).
func TestFieldBlockTableSizeUpdate(t *testing.T) {
	addr := serve(t, h2.Config{}, headHandler)
	rc := dial(t, addr)
	id := uint32(1)
	for i, size := range []uint32{0, 4096, 100, 4096, 4096} {
		if i == 4 {
			rc.enc.SetMaxDynamicTableSize(0) // two updates: 0 then 4096 (§4.2)
		}
		rc.enc.SetMaxDynamicTableSize(size)
		rc.headers(id, true, rc.block("GET", "/t", "x-echo", "s"+itoa(int(size))))
		rc.flush()
		if status, fields, _ := exchange(rc, id); status != "200" || len(fields) == 0 || fields[0] != "x-echo: s"+itoa(int(size)) {
			t.Fatalf("size update %d: %s %q", size, status, fields)
		}
		// Once more without an update: the table is in step.
		rc.headers(id+2, true, rc.block("GET", "/t", "x-echo", "s"+itoa(int(size))))
		rc.flush()
		if status, _, body := exchange(rc, id+2); status != "200" || !strings.Contains(body, "x-echo: s"+itoa(int(size))+"\n") {
			t.Fatalf("after size update %d: %s %q", size, status, body)
		}
		id += 4
	}

	t.Run("too large", func(t *testing.T) {
		rc := dial(t, addr)
		rc.enc.SetMaxDynamicTableSizeLimit(8192)
		rc.enc.SetMaxDynamicTableSize(8192)
		rc.headers(1, true, rc.block("GET", "/"))
		rc.flush()
		if status, _, _ := exchange(rc, 1); status != "GOAWAY COMPRESSION_ERROR" {
			t.Errorf("size update 8192: %s; want GOAWAY COMPRESSION_ERROR", status)
		}
	})
	t.Run("not at block start", func(t *testing.T) {
		rc := dial(t, addr)
		rc.headers(1, true, rc.block("GET", "/", "x-a", "1")) // the table holds entries
		rc.flush()
		if status, _, _ := exchange(rc, 1); status != "200" {
			t.Fatalf("first request: %s", status)
		}
		block := rc.block("GET", "/")
		block = append(block, 0x20) // size update to 0, after the fields
		rc.headers(3, true, block)
		rc.flush()
		if status, _, _ := exchange(rc, 3); status != "GOAWAY COMPRESSION_ERROR" {
			t.Errorf("size update after a field: %s; want GOAWAY COMPRESSION_ERROR", status)
		}
	})
}

// RFC 9113 §6.5.2: a header list at SETTINGS_MAX_HEADER_LIST_SIZE
// (names + values + 32 per field, RFC 7541 §4.1) is served; one byte
// over is answered 431 (turnstile's choice; §10.5.1 allows that or a
// connection error), and the connection goes on.
func TestFieldBlockListSize(t *testing.T) {
	const max = 1000
	rc := dial(t, serve(t, h2.Config{MaxHeadersSize: max}, headHandler))
	// :method GET, :scheme http, :path /, :authority example.test and
	// x-pad: 4*32 + 10 + 11 + 6 + 22 + 32 + 5 = 214 + len(value).
	for i, tc := range []struct {
		pad   int
		want  string
		split int
	}{{max - 214, "200", 0}, {max - 214 + 1, "431", 0}, {max - 214, "200", 0}, {max - 214 + 1, "431", 100}} {
		id := uint32(2*i + 1)
		rc.continued(id, true, rc.block("GET", "/", "x-pad", strings.Repeat("p", tc.pad)), cmp.Or(tc.split, 16384))
		if status, _, _ := exchange(rc, id); status != tc.want {
			t.Errorf("list of %d bytes (CONTINUATION every %d): %s; want %s", 214+tc.pad, tc.split, status, tc.want)
		}
	}
	// The fields of the list dropped were decoded all the same: the
	// dynamic table is in step (the x-pad field now comes from it).
	rc.continued(9, true, rc.block("GET", "/", "x-echo", "after", "x-pad", strings.Repeat("p", max-214+1)), 16384)
	if status, _, _ := exchange(rc, 9); status != "431" {
		t.Fatalf("list over the limit: %s; want 431", status)
	}
	rc.headers(11, true, rc.block("GET", "/", "x-echo", "after"))
	rc.flush()
	if status, fields, _ := exchange(rc, 11); status != "200" || len(fields) == 0 || fields[0] != "x-echo: after" {
		t.Errorf("after a 431: %s %q; want 200 with x-echo: after", status, fields)
	}
}

// RFC 9113 §6.10: a field block must go on in CONTINUATION frames of its
// stream with nothing between; anything else is a connection error
// PROTOCOL_ERROR. §5.1.1, §5.1: a malformed block on an even stream
// identifier or on a closed stream is the connection error a valid one
// there is (PROTOCOL_ERROR, STREAM_CLOSED), not a stream error: an
// RST_STREAM on an idle stream is forbidden (§6.4).
func TestFieldBlockConnectionErrors(t *testing.T) {
	addr := serve(t, h2.Config{}, headHandler)
	upper := func(rc *rawClient) []byte { return rc.block("GET", "/", "X-Up", "1") }
	for _, tc := range []struct {
		name string
		send func(rc *rawClient)
		want string
	}{
		{"DATA within a block", func(rc *rawClient) {
			rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block("GET", "/")[:3]})
			rc.fr.WriteData(1, true, []byte("x"))
		}, "GOAWAY PROTOCOL_ERROR"},
		{"CONTINUATION of another stream", func(rc *rawClient) {
			b := rc.block("GET", "/")
			rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:3]})
			rc.fr.WriteContinuation(3, true, b[3:])
		}, "GOAWAY PROTOCOL_ERROR"},
		{"malformed, even stream", func(rc *rawClient) { rc.headers(2, true, upper(rc)) }, "GOAWAY PROTOCOL_ERROR"},
		{"valid, even stream", func(rc *rawClient) { rc.headers(2, true, rc.block("GET", "/")) }, "GOAWAY PROTOCOL_ERROR"},
		{"malformed, closed stream", func(rc *rawClient) {
			rc.headers(1, true, rc.block("GET", "/"))
			rc.flush()
			exchange(rc, 1)
			rc.headers(1, true, upper(rc))
		}, "GOAWAY STREAM_CLOSED"},
		{"valid, closed stream", func(rc *rawClient) {
			rc.headers(1, true, rc.block("GET", "/"))
			rc.flush()
			exchange(rc, 1)
			rc.headers(1, true, rc.block("GET", "/"))
		}, "GOAWAY STREAM_CLOSED"},
		{"malformed, new stream", func(rc *rawClient) { rc.headers(1, true, upper(rc)) }, "RST_STREAM PROTOCOL_ERROR"},
	} {
		rc := dial(t, addr)
		tc.send(rc)
		rc.flush()
		var got string
		rc.until(func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				got = "RST_STREAM " + f.ErrCode.String()
			case *http2.GoAwayFrame:
				got = "GOAWAY " + f.ErrCode.String()
			}
			return got != ""
		})
		if got != tc.want {
			t.Errorf("%s: %s; want %s", tc.name, got, tc.want)
		}
	}
}

// RFC 9113 §8.1.1, §8.2.1, §8.3: a malformed request is a stream error
// PROTOCOL_ERROR; the connection goes on, and its HPACK table with it:
// the next request's fields refer to entries the malformed block added.
func TestFieldBlockMalformedThenValid(t *testing.T) {
	rc := dial(t, serve(t, h2.Config{}, headHandler))
	id := uint32(1)
	for _, tc := range []struct {
		name   string
		fields [][2]string
	}{
		{"uppercase name", [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"x-echo", "m1"}, {"X-Up", "1"}}},
		{"pseudo after regular", [][2]string{{":method", "GET"}, {":scheme", "http"}, {"x-echo", "m2"}, {":path", "/"}}},
		{"pseudo repeated", [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":path", "/b"}, {"x-echo", "m3"}}},
		{":status in a request", [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":status", "200"}, {"x-echo", "m4"}}},
	} {
		rc.hb.Reset()
		for _, f := range tc.fields {
			rc.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		rc.headers(id, true, rc.hb.Bytes())
		rc.flush()
		if status, _, _ := exchange(rc, id); status != "RST_STREAM PROTOCOL_ERROR" {
			t.Errorf("%s: %s; want RST_STREAM PROTOCOL_ERROR", tc.name, status)
		}
		// The x-echo field above was indexed (RFC 7541 §6.2.1): this one
		// is sent as a reference to it.
		echo := tc.fields[len(tc.fields)-1][1]
		if tc.name == "pseudo after regular" {
			echo = "m2"
		}
		rc.headers(id+2, true, rc.block("GET", "/v", "x-echo", echo))
		rc.flush()
		status, fields, _ := exchange(rc, id+2)
		if status != "200" || len(fields) == 0 || fields[0] != "x-echo: "+echo {
			t.Errorf("after %s: %s %q; want 200 with x-echo: %s", tc.name, status, fields, echo)
		}
		id += 4
	}
}

// RFC 9113 §8.1: a trailer section (a second HEADERS with END_STREAM)
// split over CONTINUATION frames reaches the handler.
func TestFieldBlockTrailerContinued(t *testing.T) {
	rc := dial(t, serve(t, h2.Config{}, headHandler))
	rc.headers(1, false, rc.block("POST", "/up"))
	rc.fr.WriteData(1, false, []byte("hello"))
	rc.hb.Reset()
	rc.enc.WriteField(hpack.HeaderField{Name: "x-sum", Value: strings.Repeat("s", 40)})
	rc.enc.WriteField(hpack.HeaderField{Name: "x-n", Value: "5"})
	rc.continued(1, true, append([]byte(nil), rc.hb.Bytes()...), 5)
	status, _, body := exchange(rc, 1)
	want := "POST /up 5\nhost: example.test\ntrailer x-sum: " + strings.Repeat("s", 40) + "\ntrailer x-n: 5\n"
	if status != "200" || body != want {
		t.Errorf("trailer over CONTINUATION: %s %q; want 200 %q", status, body, want)
	}
}

// Responses on one connection whose heads change (a field's value, a
// field present in one and not the next, a field added past the 8 the
// connection keeps) each carry exactly their own fields: the strings
// reused from the previous head (lastFieldLocked) never bring its values.
func TestResponseHeadsChange(t *testing.T) {
	rc := dial(t, serve(t, h2.Config{}, headHandler))
	reqs := [][]string{
		{"x-echo", "a"},
		{"x-echo", "a"},
		{"x-echo", "b", "x-extra", "1"},
		{"x-echo", "b"},
		{"x-extra", "2"},
		{},
		{"x-echo", "c", "x-extra", "3"},
		{"x-echo", "c", "x-extra", "3"},
		{"x-echo", "a"},
	}
	for i, fields := range reqs {
		id := uint32(2*i + 1)
		rc.headers(id, true, rc.block("GET", "/h", fields...))
		rc.flush()
		status, got, body := exchange(rc, id)
		var want []string
		for j := 0; j+1 < len(fields); j += 2 {
			want = append(want, fields[j]+": "+fields[j+1])
		}
		want = append(want, "content-length: "+itoa(len(body)))
		if status != "200" || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("response %d: %s %q; want 200 %q", i, status, got, want)
		}
	}
}

// A stream reset by the client while its handler waits for the body
// (ReadData on the channel it made then, chanLocked) ends that handler's
// read with an error; one reset before its handler first waits, too; the
// connection serves the next request.
func TestUploadReset(t *testing.T) {
	reads := make(chan error, 4)
	rc := dial(t, serve(t, h2.Config{}, func(w *http1.ResponseWriter, r *http1.Request) {
		if string(r.Path) == "/slow" {
			time.Sleep(100 * time.Millisecond) // reset arrives before the first wait
		}
		_, err := io.ReadAll(r.Body)
		reads <- err
		if err == nil {
			w.WriteSimple(200, "text/plain", []byte("ok"), nil)
		}
	}))
	for i, path := range []string{"/", "/slow"} {
		id := uint32(2*i + 1)
		rc.headers(id, false, rc.block("POST", path))
		rc.fr.WriteData(id, false, []byte("part"))
		rc.flush()
		time.Sleep(30 * time.Millisecond) // the handler started: on "/" it waits on dataCh

		rc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		rc.flush()
		select {
		case err := <-reads:
			if err == nil {
				t.Errorf("%s: body read after RST_STREAM ended without error", path)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the handler's read still waits 5 s after RST_STREAM", path)
		}
	}
	rc.headers(5, true, rc.block("POST", "/"))
	rc.flush()
	if status, _, body := exchange(rc, 5); status != "200" || body != "ok" {
		t.Errorf("after resets: %s %q; want 200 ok", status, body)
	}
}

// RFC 7541 §4.4: 200 requests on one connection whose fields repeat,
// change and evict each other from both dynamic tables (request fields
// the server decodes, response fields it encodes with the reused
// strings): every request arrives and every response leaves with its own
// values.
func TestFieldBlockTablesInStep(t *testing.T) {
	rc := dial(t, serve(t, h2.Config{}, headHandler))
	for i := 0; i < 200; i++ {
		id := uint32(2*i + 1)
		echo := "e" + itoa(i%7)
		fields := []string{"x-echo", echo, "x-big", strings.Repeat(itoa(i%13), 300+i%50)}
		if i%3 == 0 {
			fields = append(fields, "x-extra", itoa(i))
		}
		rc.headers(id, true, rc.block("GET", "/s", fields...))
		rc.flush()
		status, got, body := exchange(rc, id)
		want := "x-echo: " + echo
		if i%3 == 0 {
			want += ",x-extra: " + itoa(i)
		}
		want += ",content-length: " + itoa(len(body))
		if status != "200" || strings.Join(got, ",") != want || !strings.Contains(body, "x-big: "+fields[3]+"\n") {
			t.Fatalf("request %d: %s %q; want 200 %q", i, status, got, want)
		}
	}
}
