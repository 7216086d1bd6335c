package h2

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestReadBlockAsFramer feeds the same field blocks to x/net's
// MetaHeadersFrame path (Framer.ReadMetaHeaders) and to readBlock and
// wants the same fields, the same Truncated and the same kind of error:
// readBlock replaces that path for its allocations only (block.go).
func TestReadBlockAsFramer(t *testing.T) {
	const maxList = 1000
	type field struct{ name, value string }
	req := []field{{":method", "GET"}, {":scheme", "https"}, {":path", "/"}, {":authority", "a"}}
	cases := []struct {
		name   string
		fields []field
		split  int    // >0: a CONTINUATION frame every split bytes of the block
		raw    []byte // instead of fields: this block, as is
	}{
		{name: "request", fields: append(req, field{"accept", "*/*"}, field{"cookie", "a=1"})},
		{name: "continuations", fields: append(req, field{"x-a", strings.Repeat("v", 40)}, field{"x-b", "w"}), split: 7},
		{name: "uppercase name", fields: append(req, field{"X-Up", "1"})},
		{name: "non-token name", fields: append(req, field{"x y", "1"})},
		{name: "NUL in value", fields: append(req, field{"x-a", "a\x00b"})},
		{name: "pseudo after regular", fields: []field{{":method", "GET"}, {"x-a", "1"}, {":path", "/"}}},
		{name: "pseudo repeated", fields: append(req, field{":path", "/again"})},
		{name: "unknown pseudo", fields: append(req, field{":bogus", "1"})},
		{name: "request and response pseudo", fields: append(req, field{":status", "200"})},
		{name: "list too large", fields: append(req, field{"x-a", strings.Repeat("v", 600)}, field{"x-b", strings.Repeat("w", 600)})},
		{name: "list too large, continued", fields: append(req, field{"x-a", strings.Repeat("v", 600)}, field{"x-b", strings.Repeat("w", 600)}), split: 500},
		{name: "fragment too large", fields: append(req, field{"x-a", strings.Repeat("v", 6000)})},
		{name: "hpack garbage", raw: []byte{0xff, 0xff, 0xff, 0xff, 0xff}},
		{name: "hpack index out of range", raw: []byte{0xbf, 0x10}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			block := tc.raw
			if block == nil {
				var hb bytes.Buffer
				enc := hpack.NewEncoder(&hb)
				for _, f := range tc.fields {
					enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
				}
				block = hb.Bytes()
			}
			var wire bytes.Buffer
			wfr := http2.NewFramer(&wire, nil)
			first, rest := block, []byte(nil)
			if tc.split > 0 && len(block) > tc.split {
				first, rest = block[:tc.split], block[tc.split:]
			}
			wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true, EndHeaders: len(rest) == 0})
			for len(rest) > 0 {
				n := min(tc.split, len(rest))
				wfr.WriteContinuation(1, n == len(rest), rest[:n])
				rest = rest[n:]
			}
			raw := wire.Bytes()

			// x/net's path.
			xfr := http2.NewFramer(nil, bytes.NewReader(raw))
			xfr.MaxHeaderListSize = maxList
			xfr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			xf, xerr := xfr.ReadFrame()

			// Ours.
			ofr := http2.NewFramer(nil, bytes.NewReader(raw))
			b := newFieldBlock(maxList)
			fh, oerr := ofr.ReadFrameHeader()
			if oerr != nil {
				t.Fatal(oerr)
			}
			f, oerr := ofr.ReadFrameForHeader(fh)
			if oerr == nil {
				oerr = b.readBlock(ofr, f.(*http2.HeadersFrame))
			}

			if kind(xerr) != kind(oerr) {
				t.Fatalf("x/net: %v (%s); readBlock: %v (%s)", xerr, kind(xerr), oerr, kind(oerr))
			}
			t.Logf("both: %s; %d fields, truncated %v", kind(oerr), len(b.Fields), b.Truncated)
			if xerr != nil {
				return
			}
			mh := xf.(*http2.MetaHeadersFrame)
			if mh.Truncated != b.Truncated {
				t.Errorf("Truncated: x/net %v, readBlock %v", mh.Truncated, b.Truncated)
			}
			if len(mh.Fields) != len(b.Fields) || (len(b.Fields) > 0 && !reflect.DeepEqual(mh.Fields, b.Fields)) {
				t.Errorf("fields:\nx/net     %v\nreadBlock %v", mh.Fields, b.Fields)
			}
		})
	}
}

// kind names an error as the connection acts on it: a stream error or a
// connection error with its code, or another error.
func kind(err error) string {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case err == nil:
		return "none"
	case errors.As(err, &se):
		return "stream " + se.Code.String()
	case errors.As(err, &ce):
		return "connection " + http2.ErrCode(ce).String()
	}
	return "other"
}
