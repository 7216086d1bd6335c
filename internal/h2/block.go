package h2

import (
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// fieldBlock is a field section (RFC 9113 §4.3): a HEADERS frame, the
// CONTINUATION frames that follow it (§6.10), and the fields HPACK
// (RFC 7541) decoded from their fragments. It is what x/net's Framer
// returns as a MetaHeadersFrame when its ReadMetaHeaders is set, decoded
// here instead because the Framer's allocates per block a frame value and
// a field slice grown one field at a time (a third of the worker's
// allocated bytes at 64 connections × 10 streams); a connection keeps one
// fieldBlock and reuses its Fields. The checks are the Framer's.
type fieldBlock struct {
	*http2.HeadersFrame
	// Fields holds the fields in order, pseudo-header fields first. It is
	// valid until the connection reads its next block.
	Fields []hpack.HeaderField
	// Truncated: the fields past SETTINGS_MAX_HEADER_LIST_SIZE (§6.5.2,
	// counted as RFC 7541 §4.1 sizes) were decoded and dropped.
	Truncated bool

	dec        *hpack.Decoder
	maxList    uint32 // our SETTINGS_MAX_HEADER_LIST_SIZE
	remain     uint32 // list size left
	sawRegular bool   // a regular field was emitted: no pseudo-header field may follow (§8.3)
	invalid    bool   // a field failed a check: the stream is malformed
}

func newFieldBlock(maxListSize uint32) *fieldBlock {
	b := &fieldBlock{maxList: maxListSize}
	b.dec = hpack.NewDecoder(4096, b.emit) // §6.5.2: SETTINGS_HEADER_TABLE_SIZE's initial value
	b.dec.SetMaxStringLength(int(maxListSize))
	return b
}

// emit takes one decoded field (hpack.Decoder's emit function). A field
// with an invalid name or value, or a pseudo-header field after a regular
// one (§8.2.1, §8.3), makes the block malformed; fields past the list
// size are dropped (Truncated). Either way decoding goes on without
// emitting, so the decoder's dynamic table stays in step with the peer's.
func (b *fieldBlock) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		b.invalid = true
	}
	if strings.HasPrefix(hf.Name, ":") {
		if b.sawRegular {
			b.invalid = true
		}
	} else {
		b.sawRegular = true
		if !validWireName(hf.Name) {
			b.invalid = true
		}
	}
	if b.invalid {
		b.dec.SetEmitEnabled(false)
		return
	}
	if size := hf.Size(); size > b.remain {
		b.dec.SetEmitEnabled(false)
		b.Truncated, b.remain = true, 0
		return
	}
	b.remain -= hf.Size()
	b.Fields = append(b.Fields, hf)
}

// validWireName reports whether name is a token (RFC 9110 §5.1) without
// uppercase letters (RFC 9113 §8.2.1: "A request or response containing
// uppercase characters in field names MUST be treated as malformed").
func validWireName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !httpguts.IsTokenRune(rune(c)) || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// readBlock decodes the field section that hf starts, reading its
// CONTINUATION frames from fr (the Framer's ReadFrameHeader has checked
// that they follow hf on its stream, §6.10), within the list size the
// block was made with (newFieldBlock). Errors, as the Framer's: a fragment
// larger than twice the list size left, or any fragment after the block
// turned malformed, is a connection error PROTOCOL_ERROR; an HPACK
// decoding error a connection error COMPRESSION_ERROR (RFC 7541 §2.3,
// RFC 9113 §4.3); a malformed block (fields above, pseudo-header fields
// repeated, unknown or of requests and responses mixed, §8.3) a stream
// error PROTOCOL_ERROR. A read error is returned as is.
func (b *fieldBlock) readBlock(fr *http2.Framer, hf *http2.HeadersFrame) error {
	b.HeadersFrame, b.Fields, b.Truncated = hf, b.Fields[:0], false
	b.remain, b.sawRegular, b.invalid = b.maxList, false, false
	b.dec.SetEmitEnabled(true)
	frag, ended := hf.HeaderBlockFragment(), hf.HeadersEnded()
	for {
		// "Too much" (the Framer's rule): a fragment more than twice the
		// list size still allowed, counted as the Framer counts it (its
		// header and trailer budgets), which is 0 once Truncated.
		if int64(len(frag)) > 2*(int64(b.remain)+int64(b.spare())) {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if b.invalid {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := b.dec.Write(frag); err != nil {
			return http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		fh, err := fr.ReadFrameHeader()
		if err != nil {
			return err
		}
		f, err := fr.ReadFrameForHeader(fh)
		if err != nil {
			return err
		}
		cf := f.(*http2.ContinuationFrame) // ReadFrameHeader refused any other type
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := b.dec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if b.invalid || !b.pseudoValid() {
		return http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol}
	}
	return nil
}

// pseudoValid reports whether the pseudo-header fields are known, each at
// most once, and not of a request and a response both (§8.3).
func (b *fieldBlock) pseudoValid() bool {
	var request, response bool
	for i, hf := range b.Fields {
		if !strings.HasPrefix(hf.Name, ":") {
			break // regular fields follow (emit)
		}
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			request = true
		case ":status":
			response = true
		default:
			return false
		}
		for _, prev := range b.Fields[:i] {
			if prev.Name == hf.Name {
				return false
			}
		}
	}
	return !(request && response)
}

// spare is the Framer's second budget (its trailer fields'): the list
// size, 0 once Truncated.
func (b *fieldBlock) spare() uint32 {
	if b.Truncated {
		return 0
	}
	return b.maxList
}
