// Package static serves files from directories mounted at URL prefixes
// (--static /static=./staticfiles), in Go, before the Python app: a static
// request never waits for a Python thread or the GIL (DESIGN.md, promise 1).
//
// # Life of a static request
//
//  1. Handler.ServeHTTP1 matches the request's path against the mounts,
//     longest prefix first, on percent-decoded segments (a path under no
//     mount goes to the app untouched).
//  2. checkSegments refuses traversal on the decoded segments below the
//     prefix (case B36): encoded "/" and "\", NUL → 400; "." and ".." →
//     404 (neither falls through to the app); drive letters, empty
//     segments → a miss. Nothing is resolved: the segments are joined
//     below the mount's directory as they are.
//  3. open opens the file with the symlink policy (case B38; open.go):
//     follow, owner or nofollow (openat(2) with O_NOFOLLOW per segment).
//     A directory, a non-regular file or a missing file is a miss: 404
//     from Go, or the app when Config.Fallthrough is set.
//  4. If Accept-Encoding allows br or gzip (q-values honoured), a regular
//     sibling file.br / file.gz is served instead, with Content-Encoding
//     and its own ETag; every static response says Vary: Accept-Encoding.
//  5. Preconditions in RFC 9110 §13.2.2 order: If-Match, else
//     If-Unmodified-Since (412); If-None-Match, else If-Modified-Since
//     (304); then If-Range and Range for GET (206, 416, or 200).
//  6. The body: files up to smallFile bytes are read and written with the
//     head in one socket write; larger ones go by sendfile(2)
//     (http1.ResponseWriter.SendFile).
package static

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"turnstile/internal/http1"
)

// Errors returned by ParseMount, ParseSymlinks and New.
var (
	// ErrMount: a --static value is not URL_PREFIX=DIR with a clean
	// absolute prefix and an existing directory.
	ErrMount = errors.New("static: bad mount")
	// ErrSymlinks: --static-symlinks is not follow, owner or nofollow.
	ErrSymlinks = errors.New("static: --static-symlinks: want follow, owner or nofollow")
)

// smallFile: files up to this many bytes are copied through the
// connection's buffer (one write with the head); larger ones use sendfile.
const smallFile = 64 << 10

// Config configures New. The zero value serves nothing.
type Config struct {
	// Mounts are the --static values, parsed by ParseMount (once, by
	// config.Validate), with distinct prefixes.
	Mounts []Mount
	// CacheControl is sent as Cache-Control on 200, 206 and 304 responses
	// (e.g. "public, max-age=3600"). Default "": none.
	CacheControl string
	// Symlinks is the symlink policy (ParseSymlinks). Default follow.
	Symlinks Symlinks
	// Fallthrough sends a miss (no such file, a directory) to the app
	// instead of answering 404. Refused paths (400, 403) never fall
	// through. Default off.
	Fallthrough bool
	// Index serves DIR/.../index.html for a URL ending in "/". Default
	// off: such a URL is a miss (no directory listings, ever).
	Index bool
	// Logger receives 5xx causes. Default: slog.Default().
	Logger *slog.Logger
	// Access, when set, is called after each response answered here
	// (not for a request handed to the app), for the access log.
	Access func(w *http1.ResponseWriter, r *http1.Request, d time.Duration)
}

// Mount is one parsed --static value.
type Mount struct {
	Prefix string // clean URL path: "/" or "/a/b" (no trailing slash)
	Dir    string // absolute directory path
	segs   []string
}

// ParseMount parses "URL_PREFIX=DIR", makes DIR absolute (against the
// current directory) and checks that it is a directory. The prefix must
// start with "/", must not end with "/" (except "/" itself) and must not
// contain ".", ".." or empty segments, "\" or "%". Errors wrap ErrMount.
func ParseMount(s string) (Mount, error) {
	prefix, dir, ok := strings.Cut(s, "=")
	if !ok || prefix == "" || dir == "" {
		return Mount{}, fmt.Errorf("%w: --static %q: want URL_PREFIX=DIR, e.g. /static=./staticfiles", ErrMount, s)
	}
	if prefix != "/" {
		prefix = strings.TrimSuffix(prefix, "/")
	}
	var segs []string
	if prefix != "/" {
		segs, ok = splitPath(prefix, nil)
		if !ok || strings.ContainsRune(prefix, '%') || checkSegments(segs) != pathOK || slices.Contains(segs, "") {
			return Mount{}, fmt.Errorf("%w: --static %q: the URL prefix must be a clean path like /static", ErrMount, s)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Mount{}, fmt.Errorf("%w: --static %q: %v", ErrMount, s, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return Mount{}, fmt.Errorf("%w: --static %q: directory %s: %v", ErrMount, s, abs, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return Mount{}, fmt.Errorf("%w: --static %q: %s is not a directory", ErrMount, s, abs)
	}
	return Mount{Prefix: prefix, Dir: abs, segs: segs}, nil
}

// Handler answers requests under its mounts and passes the others to the
// next handler. Safe for concurrent use.
type Handler struct {
	next   http1.Handler
	mounts []Mount // longest prefix first
	rawPre []string
	cc     string
	pol    Symlinks
	fall   bool
	index  bool
	log    *slog.Logger
	access func(w *http1.ResponseWriter, r *http1.Request, d time.Duration)
}

// New returns next wrapped in a static Handler, or next itself when
// cfg.Mounts is empty. Errors: a two-line CacheControl, a prefix mounted
// twice (wrapping ErrMount).
func New(cfg Config, next http1.Handler) (http1.Handler, error) {
	if len(cfg.Mounts) == 0 {
		return next, nil
	}
	if strings.ContainsAny(cfg.CacheControl, "\r\n\x00") {
		return nil, fmt.Errorf("static: --static-cache-control must be one line")
	}
	h := &Handler{next: next, cc: cfg.CacheControl, pol: cfg.Symlinks, fall: cfg.Fallthrough, index: cfg.Index, log: cfg.Logger, access: cfg.Access}
	if h.log == nil {
		h.log = slog.Default()
	}
	for _, m := range cfg.Mounts {
		for _, o := range h.mounts {
			if o.Prefix == m.Prefix {
				return nil, fmt.Errorf("%w: --static %s: URL prefix %s is already mounted", ErrMount, m.Dir, m.Prefix)
			}
		}
		h.mounts = append(h.mounts, m)
	}
	mime.TypeByExtension(".html") // load the host's MIME tables now, not in the first request
	slices.SortStableFunc(h.mounts, func(a, b Mount) int { return len(b.segs) - len(a.segs) })
	for _, m := range h.mounts {
		h.rawPre = append(h.rawPre, m.Prefix)
	}
	return h, nil
}

// Mounts returns the mounts, longest prefix first (for the start-up log).
func (h *Handler) Mounts() []Mount { return h.mounts }

// rawMatch is the cheap filter for paths without a percent-escape: could
// raw be under one of the mounts?
func (h *Handler) rawMatch(p []byte) bool {
	for _, pre := range h.rawPre {
		if pre == "/" {
			return true
		}
		if bytes.HasPrefix(p, []byte(pre)) && (len(p) == len(pre) || p[len(pre)] == '/') {
			return true
		}
	}
	return false
}

// ServeHTTP1 answers a request under a mount, or hands it to the app
// (not under a mount, or a miss under --static-fallthrough). A response
// answered here gets Config.Access's record.
func (h *Handler) ServeHTTP1(w *http1.ResponseWriter, r *http1.Request) {
	if h.access == nil {
		if h.route(w, r) {
			h.next.ServeHTTP1(w, r)
		}
		return
	}
	start := time.Now()
	if h.route(w, r) {
		h.next.ServeHTTP1(w, r)
		return
	}
	h.access(w, r, time.Since(start))
}

// route answers r when it is under a mount, or reports that it goes to
// the app (next).
func (h *Handler) route(w *http1.ResponseWriter, r *http1.Request) (next bool) {
	p := r.Path
	if len(p) == 0 || p[0] != '/' {
		return true
	}
	escaped := bytes.IndexByte(p, '%') >= 0
	if !escaped && !h.rawMatch(p) {
		return true
	}
	var arr [16]string
	segs, ok := splitPath(string(p), arr[:0])
	if !ok {
		// A bad percent-escape: ours to refuse if it is under a mount.
		if h.rawMatch(p) {
			h.fail(w, 400, "")
			return false
		}
		return true
	}
	var m *Mount
	var rest []string
	for i := range h.mounts {
		if rest, ok = matchPrefix(segs, h.mounts[i].segs); ok {
			m = &h.mounts[i]
			break
		}
	}
	if m == nil {
		return true
	}
	switch checkSegments(rest) {
	case pathBad:
		h.fail(w, 400, "")
		return false
	case pathRefused:
		h.fail(w, 404, "")
		return false
	case pathNotFound:
		return h.miss(w, r)
	}
	if len(rest) == 0 || rest[len(rest)-1] == "" {
		// The mount itself or a URL ending in "/": a directory.
		if !h.index || len(rest) == 0 {
			return h.miss(w, r)
		}
		rest = append(rest[:len(rest)-1:len(rest)-1], "index.html")
	}
	get, head := string(r.Method) == "GET", string(r.Method) == "HEAD"
	if !get && !head && !h.fall {
		h.fail(w, 405, "Allow: GET, HEAD\r\n")
		return false
	}
	var st unix.Stat_t
	fd, err := open(m.Dir, rest, "", h.pol, &st)
	if err == nil && !isRegular(&st) {
		unix.Close(fd)
		err = unix.ENOENT // a directory or a special file: no listing, no reading
	}
	if err != nil {
		return h.openError(w, r, err)
	}
	if !get && !head {
		unix.Close(fd)
		h.fail(w, 405, "Allow: GET, HEAD\r\n")
		return false
	}
	h.serve(w, r, m, rest, fd, &st)
	return false
}

// openError answers a failed open: a miss, 403, 503 or 500.
// It reports whether the request goes to the app instead (a miss under
// --static-fallthrough).
func (h *Handler) openError(w *http1.ResponseWriter, r *http1.Request, err error) (next bool) {
	switch {
	case err == errSymlink, err == unix.EACCES, err == unix.EPERM:
		h.fail(w, 403, "")
	case err == unix.ENOENT, err == unix.ENOTDIR, err == unix.ENAMETOOLONG, err == unix.ELOOP, err == unix.EINVAL:
		return h.miss(w, r)
	case err == unix.EMFILE, err == unix.ENFILE, err == unix.ENOMEM:
		h.log.Error("static: cannot open a file", "path", string(r.Path), "err", err)
		h.fail(w, 503, "Retry-After: 1\r\n")
	default:
		h.log.Error("static: cannot open a file", "path", string(r.Path), "err", err)
		h.fail(w, 500, "")
	}
	return false
}

// miss answers a path under a mount that names no regular file.
// It reports whether the request goes to the app instead
// (--static-fallthrough).
func (h *Handler) miss(w *http1.ResponseWriter, r *http1.Request) (next bool) {
	if h.fall {
		return true
	}
	h.fail(w, 404, "")
	return false
}

var statusLines = map[int]string{
	200: "200 OK",
	206: "206 Partial Content",
	304: "304 Not Modified",
	400: "400 Bad Request",
	403: "403 Forbidden",
	404: "404 Not Found",
	405: "405 Method Not Allowed",
	412: "412 Precondition Failed",
	416: "416 Range Not Satisfiable",
	500: "500 Internal Server Error",
	503: "503 Service Unavailable",
}

// fail writes a short text/plain answer with extra header lines.
func (h *Handler) fail(w *http1.ResponseWriter, status int, extra string) {
	line := statusLines[status]
	body := line + "\n"
	hdr := make([]byte, 0, 96)
	hdr = append(hdr, "Content-Type: text/plain; charset=utf-8\r\n"...)
	hdr = append(hdr, extra...)
	if w.WriteHead(status, []byte(line), hdr, int64(len(body)), false) == nil {
		w.Write([]byte(body))
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, smallFile); return &b }}

// fieldList returns the values of every field named name, joined with
// ", " (RFC 9110 §5.3), and whether there was one.
func fieldList(r *http1.Request, name string) (string, bool) {
	var out string
	found := false
	for i := range r.Header {
		f := &r.Header[i]
		if len(f.Name) != len(name) || !strings.EqualFold(string(f.Name), name) {
			continue
		}
		if !found {
			out, found = string(f.Value), true
		} else {
			out += ", " + string(f.Value)
		}
	}
	return out, found
}

// serve answers GET or HEAD for the open regular file f (closed here).
func (h *Handler) serve(w *http1.ResponseWriter, r *http1.Request, m *Mount, rest []string, fd int, st *unix.Stat_t) {
	ctype := contentType(rest[len(rest)-1])
	coding := ""
	var cst unix.Stat_t
	if ae := r.HeaderValue("Accept-Encoding"); len(ae) > 0 {
		coding, fd = h.precompressed(m, rest, string(ae), fd, &cst)
		if coding != "" {
			st = &cst
		}
	}
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()

	size := st.Size
	mtime := time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
	var etagBuf [48]byte
	etag := string(appendETag(etagBuf[:0], size, mtime.UnixNano(), coding))
	lastMod := mtime.Truncate(time.Second)

	// RFC 9110 §13.2.2, steps 1–4.
	if v, ok := fieldList(r, "If-Match"); ok {
		if !etagMatch(v, etag, false) {
			h.fail(w, 412, "")
			return
		}
	} else if v := r.HeaderValue("If-Unmodified-Since"); v != nil {
		if t, ok := parseDate(string(v)); ok && lastMod.After(t) {
			h.fail(w, 412, "")
			return
		}
	}
	notModified := false
	if v, ok := fieldList(r, "If-None-Match"); ok {
		notModified = etagMatch(v, etag, true)
	} else if v := r.HeaderValue("If-Modified-Since"); v != nil {
		if t, ok := parseDate(string(v)); ok && !lastMod.After(t) {
			notModified = true
		}
	}

	hdr := make([]byte, 0, 320)
	if notModified {
		// RFC 9110 §15.4.5: the fields a 200 would carry for caches.
		hdr = h.appendCommon(hdr, etag, coding)
		w.WriteHead(304, []byte(statusLines[304]), hdr, -1, false)
		return
	}

	// Step 5: Range, for GET only (§14.2), unless If-Range fails.
	status, off, n := 200, int64(0), size
	if rv := r.HeaderValue("Range"); rv != nil && string(r.Method) == "GET" {
		use := true
		if ir := r.HeaderValue("If-Range"); ir != nil {
			use = ifRange(trimOWS(string(ir)), etag, lastMod)
		}
		if use {
			br, kind := parseRange(string(rv), size)
			switch kind {
			case rangeOne:
				status, off, n = 206, br.start, br.length
			case rangeNone:
				h.fail(w, 416, "Content-Range: bytes */"+strconv.FormatInt(size, 10)+"\r\n")
				return
			}
		}
	}

	hdr = append(hdr, "Content-Type: "...)
	hdr = append(hdr, ctype...)
	hdr = append(hdr, "\r\nLast-Modified: "...)
	hdr = lastMod.UTC().AppendFormat(hdr, "Mon, 02 Jan 2006 15:04:05 GMT")
	hdr = append(hdr, "\r\nAccept-Ranges: bytes\r\n"...)
	if coding != "" {
		hdr = append(hdr, "Content-Encoding: "...)
		hdr = append(hdr, coding...)
		hdr = append(hdr, "\r\n"...)
	}
	hdr = h.appendCommon(hdr, etag, coding)
	if status == 206 {
		hdr = append(hdr, "Content-Range: bytes "...)
		hdr = strconv.AppendInt(hdr, off, 10)
		hdr = append(hdr, '-')
		hdr = strconv.AppendInt(hdr, off+n-1, 10)
		hdr = append(hdr, '/')
		hdr = strconv.AppendInt(hdr, size, 10)
		hdr = append(hdr, "\r\n"...)
	}
	if err := w.WriteHead(status, []byte(statusLines[status]), hdr, n, false); err != nil {
		return
	}
	if string(r.Method) == "HEAD" || n == 0 {
		return
	}
	if n <= smallFile {
		bp := bufPool.Get().(*[]byte)
		b := (*bp)[:n]
		if err := pread(fd, b, off); err == nil {
			w.Write(b)
		} else {
			// The file shrank or failed after the head went out: the
			// short body makes http1 close the connection.
			h.log.Warn("static: read failed after the head was sent", "path", string(r.Path), "err", err)
		}
		bufPool.Put(bp)
		return
	}
	// sendfile(2): back to blocking reads for the file, and an *os.File
	// for ResponseWriter.SendFile, which now owns (and closes) fd.
	unix.SetNonblock(fd, false)
	f := os.NewFile(uintptr(fd), rest[len(rest)-1])
	fd = -1
	defer f.Close()
	if _, err := w.SendFile(f, off, n); err != nil && !errors.Is(err, http1.ErrClientGone) {
		h.log.Warn("static: sendfile failed", "path", string(r.Path), "err", err)
	}
}

// appendCommon appends ETag, Vary and Cache-Control: the fields of 200,
// 206 and 304 alike.
func (h *Handler) appendCommon(hdr []byte, etag, coding string) []byte {
	hdr = append(hdr, "ETag: "...)
	hdr = append(hdr, etag...)
	hdr = append(hdr, "\r\nVary: Accept-Encoding\r\n"...)
	if h.cc != "" {
		hdr = append(hdr, "Cache-Control: "...)
		hdr = append(hdr, h.cc...)
		hdr = append(hdr, "\r\n"...)
	}
	return hdr
}

// ifRange evaluates If-Range (RFC 9110 §13.1.5): an entity-tag must match
// ours by strong comparison; an HTTP-date must equal Last-Modified
// exactly. A weak tag or a malformed value never matches (the whole
// representation is sent).
func ifRange(v, etag string, lastMod time.Time) bool {
	if strings.HasPrefix(v, "W/") {
		return false
	}
	if strings.HasPrefix(v, `"`) {
		return v == etag
	}
	t, ok := parseDate(v)
	return ok && t.Equal(lastMod)
}

// precompressed picks file.br or file.gz when Accept-Encoding gives the
// coding a non-zero q (the higher q first; br on a tie) and the sibling is
// a regular file. It returns the coding and the descriptor to send, with
// the sibling's stat in cst; or "" and fd itself. The descriptor not
// chosen is closed.
func (h *Handler) precompressed(m *Mount, rest []string, ae string, fd int, cst *unix.Stat_t) (string, int) {
	qbr, qgz := codingQ(ae)
	order := [2]string{"br", "gzip"}
	if qgz > qbr {
		order = [2]string{"gzip", "br"}
	}
	for _, c := range order {
		q, suffix := qbr, ".br"
		if c == "gzip" {
			q, suffix = qgz, ".gz"
		}
		if q <= 0 {
			continue
		}
		cfd, err := open(m.Dir, rest, suffix, h.pol, cst)
		if err != nil {
			continue
		}
		if !isRegular(cst) {
			unix.Close(cfd)
			continue
		}
		unix.Close(fd)
		return c, cfd
	}
	return "", fd
}
