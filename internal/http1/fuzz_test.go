package http1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// serializeHead writes r back as a canonical request head.
func serializeHead(r *Request) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/%d.%d\r\n", r.Method, r.Target, r.ProtoMajor, r.ProtoMinor)
	for _, f := range r.Header {
		fmt.Fprintf(&b, "%s: %s\r\n", f.Name, f.Value)
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

func requestSummary(r *Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %q %q %d.%d host=%q cl=%d chunked=%v expect=%v close=%v\n",
		r.Method, r.Target, r.Path, r.RawQuery, r.ProtoMajor, r.ProtoMinor, r.Host, r.ContentLength, r.Chunked, r.ExpectContinue, r.Close)
	for _, f := range r.Header {
		fmt.Fprintf(&b, "%q=%q\n", f.Name, f.Value)
	}
	return b.String()
}

// FuzzParseRequestHead checks the head parser's invariants: no accepted
// name or value holds CR, LF or NUL; TE and CL are never both accepted,
// nor either spelt with '_' for '-'; an accepted head re-serialises and
// re-parses identically.
func FuzzParseRequestHead(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /a?b=c HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"GET http://x/y HTTP/1.1\r\nHost: z\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		var r Request
		if parseHead(head, &r) != nil {
			return
		}
		var cl, te bool
		for _, fl := range r.Header {
			if bytes.ContainsAny(fl.Name, "\r\n\x00") || bytes.ContainsAny(fl.Value, "\r\n\x00") {
				t.Fatalf("accepted field with CR/LF/NUL: %q: %q", fl.Name, fl.Value)
			}
			cl = cl || equalFoldString(fl.Name, "content-length")
			te = te || equalFoldString(fl.Name, "transfer-encoding")
			if n := bytes.ReplaceAll(fl.Name, []byte("_"), []byte("-")); !bytes.Equal(n, fl.Name) &&
				(equalFoldString(n, "content-length") || equalFoldString(n, "transfer-encoding")) {
				t.Fatalf("accepted framing field spelt with '_': %q", fl.Name)
			}
		}
		if cl && te {
			t.Fatalf("accepted both Content-Length and Transfer-Encoding")
		}
		if bytes.ContainsAny(r.Target, "\r\n\x00 ") {
			t.Fatalf("accepted target %q", r.Target)
		}
		want := requestSummary(&r)
		again := serializeHead(&r)
		var r2 Request
		if perr := parseHead(again, &r2); perr != nil {
			t.Fatalf("re-parse of %q failed: %v", again, perr)
		}
		if got := requestSummary(&r2); got != want {
			t.Fatalf("re-parse differs:\n%s\nvs\n%s", got, want)
		}
	})
}

// decodeChunked runs the chunked decoder over data.
func decodeChunked(data []byte) ([]byte, []Field, error) {
	var b Body
	b.reset(bufio.NewReaderSize(bytes.NewReader(data), 64), -1, true, 0, false)
	out, err := io.ReadAll(&b)
	return out, b.Trailer(), err
}

// FuzzChunkedDecoder checks that the decoder never panics, never returns
// more bytes than it was given, and that a decoded body re-encodes and
// decodes to the same bytes and trailers.
func FuzzChunkedDecoder(f *testing.F) {
	for _, s := range []string{
		"0\r\n\r\n",
		"3\r\nabc\r\n0\r\n\r\n",
		"3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n",
		"0x0\r\n\r\n",
		" 1\r\na\r\n0\r\n\r\n",
		"1\na\r\n0\r\n\r\n",
		"ffffffffffffffffff\r\n",
		"A\r\n0123456789\r\n000\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, trailer, err := decodeChunked(data)
		if len(out) > len(data) {
			t.Fatalf("decoded %d bytes from %d", len(out), len(data))
		}
		if err != nil {
			return
		}
		var enc bytes.Buffer
		if len(out) > 0 {
			fmt.Fprintf(&enc, "%x\r\n%s\r\n", len(out), out)
		}
		enc.WriteString("0\r\n")
		for _, fl := range trailer {
			if bytes.ContainsAny(fl.Value, "\r\n\x00") {
				t.Fatalf("trailer value %q", fl.Value)
			}
			fmt.Fprintf(&enc, "%s: %s\r\n", fl.Name, fl.Value)
		}
		enc.WriteString("\r\n")
		out2, trailer2, err := decodeChunked(enc.Bytes())
		if err != nil || !bytes.Equal(out, out2) || fmt.Sprint(trailer) != fmt.Sprint(trailer2) {
			t.Fatalf("re-decode: %v %q vs %q", err, out2, out)
		}
	})
}
