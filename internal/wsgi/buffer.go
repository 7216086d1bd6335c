package wsgi

// Request body buffering (issue 29): with Handler.BufferBytes set, a
// request's whole body is read by its handler goroutine before the job is
// queued, so a client that uploads slowly holds a goroutine and a file
// descriptor, never one of the few pool threads. Up to BufferBytes of the
// body travel in the request block (one copy, in the one submit call);
// the rest is written to an unlinked temporary file that wsgi.input reads
// back with pread in C, the GIL released and no call into Go.

import (
	"io"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"turnstile/internal/http1"
)

// spoolChunk is the size of one read from the request body into the spool
// file (and of wsgi.input's reads back, INPUT_CHUNK in input.c).
const spoolChunk = 64 << 10

var spoolBufs = sync.Pool{New: func() any { b := make([]byte, spoolChunk); return &b }}

// spool is the part of one request's body beyond the memory bound.
type spool struct {
	f        *os.File // nil: the body fitted in memory
	len      int64    // bytes written to f
	reserved int64    // bytes of Handler.BufferDiskBytes this request holds
}

// release closes the file (it has no name: its blocks are freed) and
// gives back the request's share of the disk budget.
func (sp *spool) release(h *Handler) {
	if sp.f != nil {
		sp.f.Close()
		sp.f = nil
	}
	if sp.reserved > 0 {
		h.spooled.Add(-sp.reserved)
		sp.reserved = 0
	}
}

// reserve takes n bytes of the disk budget for sp; false when the other
// requests hold too much of it.
func (sp *spool) reserve(h *Handler, n int64) bool {
	if h.spooled.Add(n) > h.BufferDiskBytes {
		h.spooled.Add(-n)
		return false
	}
	sp.reserved += n
	return true
}

// Spooled returns the request body bytes the handler's requests hold in
// spool files now (reserved: a Content-Length body's whole excess over the
// memory bound is reserved before it is read).
func (h *Handler) Spooled() int64 { return h.spooled.Load() }

// openSpool returns a read-write file without a name in dir (os.TempDir()
// when ""): O_TMPFILE, or where the file system has no O_TMPFILE a file
// created and unlinked at once. Either way nothing is left behind by a
// worker that dies.
func openSpool(dir string) (*os.File, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), dir+"/(request body)"), nil
	}
	f, err := os.CreateTemp(dir, "turnstile-body-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}

// Refusals of a body that cannot be buffered. Each closes the connection:
// the body is not read.
var (
	refuseTooLarge = refusal{413, "413 Content Too Large", "Content Too Large: the request body exceeds --request-buffer-disk\n", ""}
	refuseFull     = refusal{503, "503 Service Unavailable", "Service Unavailable: request body buffers full\n", "Retry-After: 1\r\n"}
	refuseSpoolErr = refusal{503, "503 Service Unavailable", "Service Unavailable: cannot spool the request body\n", "Retry-After: 1\r\n"}
)

type refusal struct {
	status int
	line   string
	body   string
	extra  string
}

// send answers r's refusal and closes the connection; it returns the status.
func (rf refusal) send(w *http1.ResponseWriter) int {
	head := "Content-Type: text/plain; charset=utf-8\r\n" + rf.extra
	if w.WriteHead(rf.status, []byte(rf.line), []byte(head), int64(len(rf.body)), true) == nil {
		w.Write([]byte(rf.body))
	}
	return rf.status
}

// buffer reads r's whole body: into block after bodyOff up to
// h.BufferBytes, the rest into a spool file recorded in sp. It returns
// the block and 0, or the status of the answer already given (413, 503)
// or due from http1 for a body read error (400, 408, 413; 0 when the
// client went away), with ok false.
func (h *Handler) buffer(w *http1.ResponseWriter, r *http1.Request, block []byte, bodyOff int, sp *spool) (_ []byte, status int, ok bool) {
	mem := int(h.BufferBytes)
	b := r.Body
	// A declared length is judged before a byte is read, so that no 100
	// Continue goes out for a body that will be refused (RFC 9110
	// §10.1.1), and its whole excess is reserved at once.
	if cl := r.ContentLength; cl > int64(mem) {
		over := cl - int64(mem)
		if over > h.BufferDiskBytes {
			return block, refuseTooLarge.send(w), false
		}
		if !sp.reserve(h, over) {
			return block, refuseFull.send(w), false
		}
	}
	if b.Done() {
		if pre := b.Buffered(); len(pre) <= mem {
			block = append(block, pre...)
			b.Consume(len(pre))
			return block, 0, true
		}
	}
	// Into memory, up to the bound.
	for len(block)-bodyOff < mem {
		if cap(block)-len(block) < 4<<10 {
			block = growBlock(block, bodyOff+mem)
		}
		limit := min(cap(block), bodyOff+mem)
		n, err := b.Read(block[len(block):limit])
		block = block[:len(block)+n]
		if err == io.EOF {
			return block, 0, true
		}
		if err != nil {
			return block, bodyErrStatus(err), false
		}
	}
	if b.AtEOF() {
		return block, 0, true
	}
	// The rest to disk.
	f, err := openSpool(h.BufferDir)
	if err != nil {
		h.logger().Error("wsgi: cannot create a spool file for a request body", "dir", h.BufferDir, "err", err)
		return block, refuseSpoolErr.send(w), false
	}
	sp.f = f
	bp := spoolBufs.Get().(*[]byte)
	defer spoolBufs.Put(bp)
	buf := *bp
	for {
		n, err := b.Read(buf)
		if n > 0 {
			if need := sp.len + int64(n) - sp.reserved; need > 0 {
				// A body of unknown length (chunked, or HTTP/2 without
				// content-length) reserves as it grows.
				if sp.len+int64(n) > h.BufferDiskBytes {
					return block, refuseTooLarge.send(w), false
				}
				if !sp.reserve(h, need) {
					return block, refuseFull.send(w), false
				}
			}
			if _, werr := f.Write(buf[:n]); werr != nil {
				h.logger().Error("wsgi: cannot spool a request body", "err", werr, "written", strconv.FormatInt(sp.len, 10))
				return block, refuseSpoolErr.send(w), false
			}
			sp.len += int64(n)
		}
		if err == io.EOF {
			if sp.len == 0 { // a chunked body's terminator was all that was left
				sp.f.Close()
				sp.f = nil
			}
			return block, 0, true
		}
		if err != nil {
			return block, bodyErrStatus(err), false
		}
	}
}

// growBlock grows block's capacity towards want bytes, by at most 1 MiB at
// a time, so that a small body in a large bound does not allocate it all.
func growBlock(block []byte, want int) []byte {
	add := min(max(16<<10, cap(block)), 1<<20, want-len(block))
	if add <= 0 {
		add = 4 << 10
	}
	nb := make([]byte, len(block), len(block)+add)
	copy(nb, block)
	return nb
}
