package wsgi

// Every //export of the WSGI bridge. Each runs on a Python thread with the
// GIL released (DESIGN.md, the crossing rule).

/*
#include "wsgi.h"
*/
import "C"

import (
	"errors"
	"io"
	"runtime/cgo"
	"unsafe"
)

// go_ts_wsgi_flush writes the head (if not sent yet) and the buffered body
// to the connection and flushes. Returns 0, or -1 when the client is gone.
//
//export go_ts_wsgi_flush
func go_ts_wsgi_flush(h C.uintptr_t) C.int {
	s := cgo.Handle(h).Value().(*slot)
	defer s.sync.Add(1)
	if s.werr != nil {
		return -1
	}
	if !s.headSent {
		err := s.writeHead(int64(s.job.content_length))
		C.ts_wsgi_job_head_sent(s.job) // mid-job: start_response(exc_info) reads it
		if err != nil {
			s.werr = err
			return -1
		}
	}
	if s.job.out_len > 0 {
		if _, err := s.w.Write(s.body()); err != nil {
			s.werr = err
			return -1
		}
	}
	if err := s.w.Flush(); err != nil {
		s.werr = err
		return -1
	}
	return 0
}

// go_ts_wsgi_early_hints writes a 103 Early Hints with the n bytes of
// header ("Name: value\r\n" lines, validated) before the head; http1
// sends nothing to an HTTP/1.0 client or once the head is out. A write
// error is kept for the next flush to report.
//
//export go_ts_wsgi_early_hints
func go_ts_wsgi_early_hints(h C.uintptr_t, header *C.char, n C.size_t) {
	s := cgo.Handle(h).Value().(*slot)
	defer s.sync.Add(1)
	if s.werr != nil || s.headSent {
		return
	}
	if err := s.w.WriteEarlyHints(unsafe.Slice((*byte)(unsafe.Pointer(header)), int(n))); err != nil {
		s.werr = err
	}
}

// go_ts_wsgi_read reads up to n body bytes into buf. Returns the count, 0 at
// the end of the body, or -1 on an error (client gone, timeout, framing,
// too large).
//
//export go_ts_wsgi_read
func go_ts_wsgi_read(h C.uintptr_t, buf *C.char, n C.size_t) C.long {
	s := cgo.Handle(h).Value().(*slot)
	defer s.sync.Add(1)
	p := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	for {
		k, err := s.r.Body.Read(p)
		if k > 0 {
			return C.long(k)
		}
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			s.rerr = err
			return -1
		}
	}
}
