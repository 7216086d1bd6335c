// Package accesslog compiles --access-log-format, gunicorn's access log
// format (a Python %-format over named atoms, gunicorn/glogging.py,
// Logger.atoms), once at start into a list of parts, and writes one
// request's line (Append) or its JSON fields (Attrs) from the request's
// parsed fields and its inflight.Result: no Python, no environ, nothing
// per request but the line. It is pure Go (no cgo), so the master checks a
// format (config.Validate) before it starts a worker.
//
// Atoms are gunicorn's, with its values: %(h)s remote address, %(l)s "-",
// %(u)s the Basic auth user, %(t)s the date ("[01/Dec/2026:21:43:12
// +0000]"), %(r)s the request line, %(m)s method, %(U)s path (percent-
// decoded, without --root-path), %(q)s query, %(H)s protocol, %(s)s status,
// %(B)s and %(b)s body bytes, %(f)s Referer, %(a)s User-Agent, %(T)s
// seconds, %(D)s microseconds, %(M)s milliseconds, %(L)s seconds with six
// decimals, %(p)s "<pid>", %({name}i)s a request header, %({name}o)s a
// response header of the app's, %({name}e)s an environ variable (the CGI
// ones the server sets and HTTP_*); and turnstile's own: %(queue_wait_us)s,
// %(queue_wait_ms)s, %(gil_wait_us)s, %(gil_wait_ms)s (a WSGI request's
// wait for a pool thread and its thread's wait for the GIL), %(worker)s,
// %(loop)s (the event loop's index, ASGI) and %(thread)s (the pool
// thread's index, WSGI). A value that does not apply is "-", as in
// gunicorn (SafeAtoms).
//
// Unlike gunicorn, an unknown atom, a conversion other than s, or an
// unbalanced "%(" is an error at start (Compile), not a "-" or a
// traceback per request.
package accesslog

import (
	"errors"
	"fmt"
	"strings"
)

// ErrFormat is wrapped by every error Compile returns.
var ErrFormat = errors.New("--access-log-format")

// Kind is what an atom writes.
type Kind uint8

const (
	literal Kind = iota
	RemoteAddr
	Ident
	User
	Date
	RequestLine
	Method
	Path
	Query
	Protocol
	Status
	BytesInt  // B
	BytesDash // b
	Referer
	UserAgent
	Seconds
	Micros
	Millis
	SecondsFrac
	Pid
	RequestHeader
	ResponseHeader
	Environ
	QueueWaitUs
	QueueWaitMs
	GILWaitUs
	GILWaitMs
	Worker
	Loop
	Thread
)

// atomKinds maps gunicorn's one-letter atoms and turnstile's named ones.
var atomKinds = map[string]Kind{
	"h": RemoteAddr, "l": Ident, "u": User, "t": Date, "r": RequestLine,
	"m": Method, "U": Path, "q": Query, "H": Protocol, "s": Status,
	"B": BytesInt, "b": BytesDash, "f": Referer, "a": UserAgent,
	"T": Seconds, "D": Micros, "M": Millis, "L": SecondsFrac, "p": Pid,
	"queue_wait_us": QueueWaitUs, "queue_wait_ms": QueueWaitMs,
	"gil_wait_us": GILWaitUs, "gil_wait_ms": GILWaitMs,
	"worker": Worker, "loop": Loop, "thread": Thread,
}

// jsonKeys are the field names of Attrs, by kind: the default access
// record's names where it has the field (method, protocol, status, bytes,
// user_agent, referer, queue_wait_us, gil_wait_us).
var jsonKeys = [...]string{
	RemoteAddr: "remote_addr", Ident: "ident", User: "user", Date: "date",
	RequestLine: "request_line", Method: "method", Path: "path", Query: "query",
	Protocol: "protocol", Status: "status", BytesInt: "bytes", BytesDash: "bytes",
	Referer: "referer", UserAgent: "user_agent", Seconds: "duration_s",
	Micros: "duration_us", Millis: "duration_ms", SecondsFrac: "duration",
	Pid: "pid", RequestHeader: "request_headers", ResponseHeader: "response_headers",
	Environ: "environ", QueueWaitUs: "queue_wait_us", QueueWaitMs: "queue_wait_ms",
	GILWaitUs: "gil_wait_us", GILWaitMs: "gil_wait_ms", Worker: "worker",
	Loop: "loop", Thread: "thread",
}

// environKeys are the environ variables %({name}e)s can name besides
// HTTP_*: those the server sets from the request (PEP 3333, §environ
// Variables; gunicorn's RAW_URI), lower-cased as gunicorn looks them up.
var environKeys = map[string]bool{
	"request_method": true, "script_name": true, "path_info": true,
	"query_string": true, "content_type": true, "content_length": true,
	"server_protocol": true, "remote_addr": true, "remote_port": true,
	"raw_uri": true, "wsgi.url_scheme": true,
}

// Part is one piece of a compiled format: a literal or an atom.
type Part struct {
	Kind Kind
	Text string // the literal; for a {name}i/o/e atom, name lower-cased
}

// Format is a compiled --access-log-format.
type Format struct {
	Parts []Part
	// RootPath is --root-path: %(U)s and PATH_INFO leave it out, as
	// the app's PATH_INFO does.
	RootPath string
	// ResponseHeaders: the format has a %({name}o)s atom, so the app
	// handlers keep the response's header lines (inflight.Result.Header).
	ResponseHeaders bool
}

// Compile parses format, a Python %-format over named atoms: "%%" is a
// "%", "%(NAME)s" an atom (NAME may hold balanced parentheses, as in
// Python). Errors (wrapping ErrFormat) name the first bad spot: an
// unknown atom, a conversion other than s, a "%" not followed by "(" or
// "%", an unbalanced "%(".
func Compile(format string) (*Format, error) {
	f := &Format{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			f.Parts = append(f.Parts, Part{Kind: literal, Text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(format); {
		c := format[i]
		if c != '%' {
			lit.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(format) {
			return nil, fmt.Errorf("%w %q: a lone %% at the end (write %%%% for a %%)", ErrFormat, format)
		}
		switch format[i+1] {
		case '%':
			lit.WriteByte('%')
			i += 2
			continue
		case '(':
		default:
			return nil, fmt.Errorf("%w %q: %q at byte %d: want %%(NAME)s or %%%%", ErrFormat, format, format[i:i+2], i)
		}
		// The key runs to the matching ')' (Python's
		// PyUnicode_Format counts nested parentheses).
		depth, j := 1, i+2
		for ; j < len(format) && depth > 0; j++ {
			switch format[j] {
			case '(':
				depth++
			case ')':
				depth--
			}
		}
		if depth > 0 {
			return nil, fmt.Errorf("%w %q: unbalanced %%( at byte %d", ErrFormat, format, i)
		}
		name := format[i+2 : j-1]
		if j >= len(format) || format[j] != 's' {
			conv := "nothing"
			if j < len(format) {
				conv = fmt.Sprintf("%q", format[j])
			}
			return nil, fmt.Errorf("%w %q: %%(%s) is followed by %s: want %%(%s)s", ErrFormat, format, name, conv, name)
		}
		p, err := atom(name)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrFormat, format, err)
		}
		if p.Kind == ResponseHeader {
			f.ResponseHeaders = true
		}
		flush()
		f.Parts = append(f.Parts, p)
		i = j + 1
	}
	flush()
	return f, nil
}

// atom resolves NAME of %(NAME)s.
func atom(name string) (Part, error) {
	if k, ok := atomKinds[name]; ok {
		return Part{Kind: k}, nil
	}
	if len(name) >= 3 && name[0] == '{' && name[len(name)-2] == '}' {
		key := strings.ToLower(name[1 : len(name)-2])
		if key == "" {
			return Part{}, fmt.Errorf("%%(%s)s names no header or variable", name)
		}
		switch name[len(name)-1] {
		case 'i':
			return Part{Kind: RequestHeader, Text: key}, nil
		case 'o':
			return Part{Kind: ResponseHeader, Text: key}, nil
		case 'e':
			if !environKeys[key] && !strings.HasPrefix(key, "http_") {
				return Part{}, fmt.Errorf("%%(%s)s: the access log knows the environ variables the server sets (REQUEST_METHOD, SCRIPT_NAME, PATH_INFO, QUERY_STRING, CONTENT_TYPE, CONTENT_LENGTH, SERVER_PROTOCOL, REMOTE_ADDR, REMOTE_PORT, RAW_URI, wsgi.url_scheme, HTTP_*), not %s", name, name[1:len(name)-2])
			}
			return Part{Kind: Environ, Text: key}, nil
		}
	}
	return Part{}, fmt.Errorf("unknown atom %%(%s)s: want one of h l u t r m U q H s B b f a T D M L p, {header}i, {header}o, {variable}e, queue_wait_us, queue_wait_ms, gil_wait_us, gil_wait_ms, worker, loop, thread", name)
}
