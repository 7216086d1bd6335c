package accesslog

import (
	"bytes"
	"encoding/base64"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"turnstile/internal/http1"
	"turnstile/internal/inflight"
)

// Entry is one finished request as the access log sees it.
type Entry struct {
	Request *http1.Request
	Result  inflight.Result
	Now     time.Time // when it is logged: %(t)s
	Pid     int
	Worker  string // the worker's id; "" for none (a lone process)
	// Loop is the event loop's index (ASGI), -1 for none; Thread the
	// pool thread's index when Result.Ran, the request having run on a
	// pool (WSGI).
	Loop int
}

// DateLayout is gunicorn's %(t)s: time.strftime('[%d/%b/%Y:%H:%M:%S %z]'),
// Apache's Common Log Format date, in local time.
const DateLayout = "[02/Jan/2006:15:04:05 -0700]"

// Append appends e's line, as gunicorn writes it (without the newline),
// to b. Strings are written as gunicorn writes them: a request's bytes
// read as latin-1 (PEP 3333, §Unicode Issues) and written as UTF-8, '"'
// as '\"' (SafeAtoms); control characters (a %0A in the path) become
// \xHH, so that a line stays one line.
func (f *Format) Append(b []byte, e *Entry) []byte {
	var arr [128]byte // the values that are made, not sliced from the request
	for i := range f.Parts {
		p := &f.Parts[i]
		if p.Kind == literal {
			b = append(b, p.Text...)
			continue
		}
		v, num, ok := f.value(p, e, arr[:0])
		switch {
		case !ok:
			b = append(b, '-')
		case num:
			b = append(b, v...)
		default:
			b = appendString(b, v, true, p.Kind == User)
		}
	}
	return b
}

// Attrs returns e's fields as attributes of a JSON record: one per atom of
// the format, named as jsonKeys names them, numbers as numbers; headers
// and environ variables under the groups request_headers,
// response_headers and environ. A value that does not apply is left out
// (a string one is "-", as in the line). A name given twice (%(B)s and
// %(b)s) is written once. The worker atom is left out: a worker's records
// already carry "worker".
func (f *Format) Attrs(e *Entry) []slog.Attr {
	var out []slog.Attr
	groups := map[Kind][]any{}
	seen := map[string]bool{}
	var scratch []byte
	for i := range f.Parts {
		p := &f.Parts[i]
		if p.Kind == literal || p.Kind == Worker {
			continue
		}
		v, num, ok := f.value(p, e, scratch[:0])
		key := jsonKeys[p.Kind]
		switch p.Kind {
		case RequestHeader, ResponseHeader, Environ:
			gk := key + "." + p.Text
			if seen[gk] {
				continue
			}
			seen[gk] = true
			s := "-"
			if ok {
				s = string(appendString(nil, v, false, false))
			}
			groups[p.Kind] = append(groups[p.Kind], slog.String(p.Text, s))
			continue
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		switch {
		case !ok && num:
		case !ok:
			out = append(out, slog.String(key, "-"))
		case num && (p.Kind == QueueWaitMs || p.Kind == GILWaitMs):
			x, _ := strconv.ParseFloat(string(v), 64)
			out = append(out, slog.Float64(key, x))
		case num:
			x, _ := strconv.ParseInt(string(v), 10, 64)
			out = append(out, slog.Int64(key, x))
		default:
			out = append(out, slog.String(key, string(appendString(nil, v, false, p.Kind == User))))
		}
	}
	for _, k := range []Kind{RequestHeader, ResponseHeader, Environ} {
		if g := groups[k]; g != nil {
			out = append(out, slog.Group(jsonKeys[k], g...))
		}
	}
	return out
}

// value returns the raw bytes of atom p for e (request bytes as sent,
// not yet transcoded), whether it is a number, and whether it applies.
// It may append to scratch.
func (f *Format) value(p *Part, e *Entry, scratch []byte) (v []byte, num, ok bool) {
	r, res := e.Request, &e.Result
	d := res.Duration
	sec, us := int64(d/time.Second), int64(d%time.Second/time.Microsecond)
	switch p.Kind {
	case RemoteAddr:
		return remoteHost(scratch, r.RemoteAddr), false, true
	case Ident:
		return nil, false, false
	case User:
		u := basicUser(scratch, r.HeaderValue("Authorization"))
		return u, false, u != nil
	case Date:
		return e.Now.AppendFormat(scratch, DateLayout), false, true
	case RequestLine:
		v = append(scratch, r.Method...)
		v = append(v, ' ')
		v = append(v, r.Target...)
		v = append(v, ' ')
		return append(v, ProtocolName(r)...), false, true
	case Method:
		return r.Method, false, true
	case Path:
		return f.pathInfo(scratch, r), false, true
	case Query:
		return r.RawQuery, false, true
	case Protocol:
		return append(scratch, ProtocolName(r)...), false, true
	case Status:
		return strconv.AppendInt(scratch, int64(res.Status), 10), true, true
	case BytesInt, BytesDash:
		return strconv.AppendInt(scratch, res.Bytes, 10), true, true
	case Referer:
		v = r.HeaderValue("Referer")
		return v, false, v != nil
	case UserAgent:
		v = r.HeaderValue("User-Agent")
		return v, false, v != nil
	case Seconds:
		return strconv.AppendInt(scratch, sec, 10), true, true
	case Micros:
		return strconv.AppendInt(scratch, sec*1e6+us, 10), true, true
	case Millis:
		return strconv.AppendInt(scratch, sec*1e3+us/1e3, 10), true, true
	case SecondsFrac:
		v = strconv.AppendInt(scratch, sec, 10)
		v = append(v, '.')
		for div := int64(100000); div > 0; div /= 10 { // %06d
			v = append(v, byte('0'+us/div%10))
		}
		return v, false, true
	case Pid:
		v = append(scratch, '<')
		v = strconv.AppendInt(v, int64(e.Pid), 10)
		return append(v, '>'), false, true
	case RequestHeader:
		return lastHeader(r.Header, p.Text)
	case ResponseHeader:
		return responseHeader(res.Header, p.Text)
	case Environ:
		return f.environ(scratch, r, p.Text)
	case QueueWaitUs, GILWaitUs, QueueWaitMs, GILWaitMs:
		if !res.Pool {
			return nil, true, false
		}
		w := res.QueueWait
		if p.Kind == GILWaitUs || p.Kind == GILWaitMs {
			w = res.GILWait
		}
		if p.Kind == QueueWaitUs || p.Kind == GILWaitUs {
			return strconv.AppendInt(scratch, w.Microseconds(), 10), true, true
		}
		return strconv.AppendFloat(scratch, float64(w.Microseconds())/1000, 'f', 3, 64), true, true
	case Worker:
		return append(scratch, e.Worker...), true, e.Worker != ""
	case Loop:
		return strconv.AppendInt(scratch, int64(e.Loop), 10), true, e.Loop >= 0
	case Thread:
		return strconv.AppendInt(scratch, int64(res.Thread), 10), true, res.Ran
	}
	return nil, false, false
}

// ProtocolName is the request's SERVER_PROTOCOL: "HTTP/1.0", "HTTP/1.1",
// "HTTP/2.0" or "HTTP/3.0".
func ProtocolName(r *http1.Request) string {
	switch {
	case r.ProtoMajor == 3:
		return "HTTP/3.0"
	case r.ProtoMajor == 2:
		return "HTTP/2.0"
	case r.ProtoMajor == 1 && r.ProtoMinor == 0:
		return "HTTP/1.0"
	default:
		return "HTTP/1.1"
	}
}

// remoteHost appends REMOTE_ADDR: the client's host without its port
// (an IPv6 one without brackets), a Unix socket's path, "" for an
// unnamed Unix socket client (internal/http1, addr.go).
func remoteHost(b []byte, a net.Addr) []byte {
	switch a := a.(type) {
	case nil:
		return b
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap().WithZone("").AppendTo(b)
	}
	s := a.String()
	if a.Network() == "unix" {
		if s == "@" {
			return b
		}
		return append(b, s...)
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		return append(b, host...)
	}
	return append(b, s...)
}

// basicUser is gunicorn's _get_user: the user name of "Authorization:
// Basic <base64 user:password>" (RFC 7617), decoded into b's capacity
// (its length is ignored), nil for none
// or when it does not decode to UTF-8 (the one atom gunicorn decodes as
// UTF-8 rather than latin-1).
func basicUser(b, auth []byte) []byte {
	if len(auth) < 5 || !bytes.EqualFold(auth[:5], []byte("basic")) {
		return nil
	}
	_, cred, ok := bytes.Cut(auth, []byte(" "))
	if !ok {
		return nil
	}
	cred = bytes.TrimSpace(cred)
	n := base64.StdEncoding.DecodedLen(len(cred))
	b = slices.Grow(b[:0], n)[:n]
	n, err := base64.StdEncoding.Decode(b, cred)
	if err != nil {
		return nil
	}
	user, _, _ := bytes.Cut(b[:n], []byte(":"))
	if !utf8.Valid(user) {
		return nil
	}
	return user
}

// lastHeader is gunicorn's {name}i: the last field named name (its
// atoms dict keeps the last of repeated fields).
func lastHeader(h []http1.Field, name string) ([]byte, bool, bool) {
	for i := len(h) - 1; i >= 0; i-- {
		if strings.EqualFold(string(h[i].Name), name) {
			return h[i].Value, false, true
		}
	}
	return nil, false, false
}

// responseHeader is {name}o: the last of the app's header lines
// ("Name: value\r\n") named name.
func responseHeader(block []byte, name string) (v []byte, num, ok bool) {
	for len(block) > 0 {
		line := block
		if i := bytes.IndexByte(block, '\n'); i >= 0 {
			line, block = block[:i], block[i+1:]
		} else {
			block = nil
		}
		line = bytes.TrimRight(line, "\r")
		n, val, found := bytes.Cut(line, []byte(":"))
		if found && strings.EqualFold(string(n), name) {
			v, ok = bytes.TrimSpace(val), true
		}
	}
	return v, false, ok
}

// pathInfo appends PATH_INFO: the path percent-decoded, without
// RootPath when it starts with it (PEP 3333, §environ Variables).
func (f *Format) pathInfo(b []byte, r *http1.Request) []byte {
	start := len(b)
	p := r.Path
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]) {
			b = append(b, unhex(p[i+1])<<4|unhex(p[i+2]))
			i += 2
			continue
		}
		b = append(b, p[i])
	}
	if f.RootPath != "" && bytes.HasPrefix(b[start:], []byte(f.RootPath)) {
		b = append(b[:start], b[start+len(f.RootPath):]...)
	}
	return b
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// environ is {name}e for the variables the server sets (environKeys) and
// HTTP_* (repeated fields joined with ", ", as the WSGI environ joins
// them; a field whose name has "_" is not in the environ).
func (f *Format) environ(b []byte, r *http1.Request, key string) ([]byte, bool, bool) {
	switch key {
	case "request_method":
		return r.Method, false, true
	case "script_name":
		return append(b, f.RootPath...), false, true
	case "path_info":
		return f.pathInfo(b, r), false, true
	case "query_string":
		return r.RawQuery, false, true
	case "content_type":
		v := r.HeaderValue("Content-Type")
		return v, false, v != nil
	case "content_length":
		v := r.HeaderValue("Content-Length")
		return v, false, v != nil
	case "server_protocol":
		return append(b, ProtocolName(r)...), false, true
	case "remote_addr":
		return remoteHost(b, r.RemoteAddr), false, true
	case "remote_port":
		if a, ok := r.RemoteAddr.(*net.TCPAddr); ok && a.Port != 0 {
			return strconv.AppendInt(b, int64(a.Port), 10), false, true
		}
		return nil, false, false
	case "raw_uri":
		return r.Target, false, true
	case "wsgi.url_scheme":
		if r.Scheme == "" {
			return append(b, "http"...), false, true
		}
		return append(b, r.Scheme...), false, true
	}
	name := strings.ReplaceAll(strings.TrimPrefix(key, "http_"), "_", "-")
	if name == "content-type" || name == "content-length" {
		return nil, false, false // CONTENT_TYPE, CONTENT_LENGTH: no HTTP_ (PEP 3333)
	}
	found := false
	for i := range r.Header {
		h := &r.Header[i]
		if bytes.IndexByte(h.Name, '_') >= 0 || !strings.EqualFold(string(h.Name), name) {
			continue
		}
		if found {
			b = append(b, ", "...)
		}
		b = append(b, h.Value...)
		found = true
	}
	return b, false, found
}

// appendString appends v as gunicorn writes a str atom: each byte a
// latin-1 character in UTF-8 (unless utf: UTF-8 already); for a line
// (line set) '"' as '\"' and a control character as \xHH (gunicorn
// writes them raw), for a JSON string neither (the JSON handler escapes).
func appendString(b, v []byte, line, utf bool) []byte {
	for _, c := range v {
		switch {
		case c == '"' && line:
			b = append(b, '\\', '"')
		case (c < 0x20 || c == 0x7f) && line:
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
		case c < 0x80 || utf:
			b = append(b, c)
		default:
			b = utf8.AppendRune(b, rune(c))
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"
