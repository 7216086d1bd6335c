package http1

import (
	"bufio"
	"bytes"
	"io"
)

// Chunked transfer coding, RFC 9112 §7.1:
//
//	chunked-body   = *chunk last-chunk trailer-section CRLF
//	chunk          = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//	chunk-size     = 1*HEXDIG
//	last-chunk     = 1*("0") [ chunk-ext ] CRLF
//	chunk-ext      = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )

type chunkState uint8

const (
	chunkSize     chunkState = iota // expecting a chunk-size line
	chunkData                       // inside chunk-data; remaining bytes left
	chunkDataCRLF                   // expecting the CRLF after chunk-data
	chunkTrailer                    // expecting trailer fields or the final CRLF
	chunkDone
)

const (
	// maxChunkOverhead bounds the bytes of chunk extensions (and other
	// size-line overhead) over a whole body, so that a client cannot make
	// the server parse megabytes of extensions for a few data bytes.
	maxChunkOverhead = 64 << 10
	// maxTrailerBytes and maxTrailerFields bound the trailer section.
	maxTrailerBytes  = 16 << 10
	maxTrailerFields = 64
)

// readChunked reads chunk data into p (len(p) > 0).
func (b *Body) readChunked(p []byte) (int, error) {
	for {
		switch b.state {
		case chunkSize:
			size, err := b.readSizeLine()
			if err != nil {
				return 0, err
			}
			if size == 0 {
				b.state = chunkTrailer
				continue
			}
			if b.max > 0 && size > b.max-b.total {
				return 0, ErrBodyTooLarge
			}
			b.total += size
			b.remaining = size
			b.state = chunkData
		case chunkData:
			if int64(len(p)) > b.remaining {
				p = p[:b.remaining]
			}
			n, err := b.br.Read(p)
			b.remaining -= int64(n)
			if b.remaining == 0 {
				b.state = chunkDataCRLF
			}
			if n > 0 {
				return n, nil
			}
			return 0, b.ioErr(err)
		case chunkDataCRLF:
			// "CRLF after data exactly": anything else is a framing error.
			c1, err := b.br.ReadByte()
			if err != nil {
				return 0, b.ioErr(err)
			}
			c2, err := b.br.ReadByte()
			if err != nil {
				return 0, b.ioErr(err)
			}
			if c1 != '\r' || c2 != '\n' {
				return 0, framingError("chunk data not followed by CRLF")
			}
			b.state = chunkSize
		case chunkTrailer:
			if err := b.readTrailer(); err != nil {
				return 0, err
			}
			b.state = chunkDone
			b.eof = true
			return 0, io.EOF
		default:
			b.eof = true
			return 0, io.EOF
		}
	}
}

// readLine returns the next line without its CRLF; the slice is valid until
// the next read. A bare LF or CR is a framing error, as is a line longer
// than the read buffer.
func (b *Body) readLine() ([]byte, error) {
	line, err := b.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, framingError("chunk line too long")
	}
	if err != nil {
		return nil, b.ioErr(err)
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, framingError("bare LF in chunked body")
	}
	line = line[:len(line)-2]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, framingError("bare CR in chunked body")
	}
	return line, nil
}

// readSizeLine parses chunk-size [ chunk-ext ] CRLF. Only BWS followed by
// ';' may follow the digits; no sign, "0x" or other whitespace.
func (b *Body) readSizeLine() (int64, error) {
	line, err := b.readLine()
	if err != nil {
		return 0, err
	}
	var size int64
	i := 0
	for ; i < len(line); i++ {
		d, ok := unhex(line[i])
		if !ok {
			break
		}
		if size > (1<<63-1)>>4 {
			return 0, framingError("chunk size overflows")
		}
		size = size<<4 | int64(d)
	}
	if i == 0 {
		return 0, framingError("invalid chunk size")
	}
	b.extBytes += len(line) - i + 2
	if b.extBytes > maxChunkOverhead {
		return 0, framingError("too many chunk extensions")
	}
	if ext := line[i:]; len(ext) > 0 {
		ext = trimOWS(ext)
		if len(ext) == 0 || ext[0] != ';' || !validChunkExt(ext) {
			return 0, framingError("invalid chunk extension")
		}
	}
	return size, nil
}

// validChunkExt checks the extension list loosely: it is ignored, so it
// only has to be free of CTLs (HTAB aside) and start with ';'.
func validChunkExt(ext []byte) bool { return validFieldValue(ext) }

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// readTrailer reads trailer-section CRLF (RFC 9112 §7.1.2). Fields are
// validated as header fields are (RFC 9112 §5) and kept in b.trailer.
func (b *Body) readTrailer() error {
	type span struct{ n0, n1, v0, v1 int }
	var spans [maxTrailerFields]span
	nf := 0
	b.trailerBuf = b.trailerBuf[:0]
	for {
		line, err := b.readLine()
		if err != nil {
			return err
		}
		if len(line) == 0 {
			break
		}
		if nf == maxTrailerFields || len(b.trailerBuf)+len(line) > maxTrailerBytes {
			return framingError("trailer section too large")
		}
		if line[0] == ' ' || line[0] == '\t' {
			return framingError("obs-fold in trailer")
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 || !isToken(line[:colon]) {
			return framingError("invalid trailer field name")
		}
		value := trimOWS(line[colon+1:])
		if !validFieldValue(value) {
			return framingError("invalid trailer field value")
		}
		off := len(b.trailerBuf)
		b.trailerBuf = append(b.trailerBuf, line...)
		v0 := off + (len(line) - len(line[colon+1:])) + indexOf(line[colon+1:], value)
		spans[nf] = span{off, off + colon, v0, v0 + len(value)}
		nf++
	}
	b.trailer = b.trailer[:0]
	for _, s := range spans[:nf] {
		b.trailer = append(b.trailer, Field{Name: b.trailerBuf[s.n0:s.n1:s.n1], Value: b.trailerBuf[s.v0:s.v1:s.v1]})
	}
	return nil
}

// indexOf returns the offset of sub inside s, where sub is a subslice of s.
func indexOf(s, sub []byte) int {
	if len(sub) == 0 {
		return 0
	}
	return cap(s) - cap(sub)
}
