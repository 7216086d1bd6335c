// Package logs makes the log records of the master (internal/supervise)
// and of a worker (internal/server): slog text or JSON records on stderr
// at a level, and, for a person reading a terminal, text records whose
// multi-line values (a traceback) follow their line as the lines
// themselves. It is pure Go (no cgo): the master links no Python.
//
// A worker writes its records on its stderr, a pipe the master reads and
// forwards line by line to its own output (internal/supervise, proc.go),
// so the format is chosen once for both (--log-format, --log-level).
package logs

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// LockedWriter is W with its writes serialised, one Write at a time, so
// that the records of concurrent writers (a logger and the master's
// stderr forwarders; a test server's goroutines) land whole, one after
// another. A reader of W (a buffer's String) holds the lock too (Lock,
// Unlock). W must be set before the first Write.
type LockedWriter struct {
	sync.Mutex
	W io.Writer
}

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.Lock()
	defer l.Unlock()
	return l.W.Write(p)
}

// New returns the server's logger: JSON records on w when format is
// "json", else slog's text records, at level (debug, info, warning or
// warn, error or critical, in any case; anything else is info).
func New(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warning", "warn":
		lv = slog.LevelWarn
	case "error", "critical":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// IsTerminal reports whether w is a terminal (a TTY).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// MultilineWriter returns w behind a writer that prints text records
// (slog's "time=... level=... msg=..." lines) for a person: a value that
// holds several lines (an app's traceback, a worker's last output), which
// the record carries escaped ("\n") on its one line, comes after the line
// as the lines themselves — a traceback raw as Python prints it, another
// value under a "  key:" header, indented. The record's line keeps every
// other field. Anything else (JSON, a line that is not a record) passes
// as it is. Each Write must be whole lines; each is written with one
// Write to w.
func MultilineWriter(w io.Writer) io.Writer { return &multiline{w: w} }

type multiline struct {
	w   io.Writer
	buf []byte
}

func (m *multiline) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, '\\') < 0 {
		return m.w.Write(p) // nothing escaped: no value with a newline
	}
	m.buf = m.buf[:0]
	rest := p
	for len(rest) > 0 {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			rest = nil
		}
		m.buf = appendMultiline(m.buf, line)
	}
	if _, err := m.w.Write(m.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// appendMultiline appends line (with its '\n', if any) to b, expanded as
// MultilineWriter describes.
func appendMultiline(b []byte, line []byte) []byte {
	text := strings.TrimSuffix(string(line), "\n")
	if !strings.HasPrefix(text, "time=") || !strings.Contains(text, `\n`) {
		return append(b, line...)
	}
	type block struct{ key, val string }
	var blocks []block
	var head strings.Builder
	s := text
	for len(s) > 0 {
		// One field: key=value, value bare or a Go-quoted string.
		eq := strings.IndexByte(s, '=')
		sp := strings.IndexByte(s, ' ')
		if eq < 0 || (sp >= 0 && sp < eq) {
			return append(b, line...) // not slog's text format after all
		}
		key := s[:eq]
		v := s[eq+1:]
		var raw string
		if strings.HasPrefix(v, `"`) {
			q, err := strconv.QuotedPrefix(v)
			if err != nil {
				return append(b, line...)
			}
			raw = q
		} else if i := strings.IndexByte(v, ' '); i >= 0 {
			raw = v[:i]
		} else {
			raw = v
		}
		s = strings.TrimPrefix(v[len(raw):], " ")
		if strings.HasPrefix(raw, `"`) && strings.Contains(raw, `\n`) {
			if val, err := strconv.Unquote(raw); err == nil && strings.Contains(val, "\n") {
				val = strings.TrimRight(val, "\n")
				if key == "msg" {
					// A message with a traceback: its first line stays.
					first, more, _ := strings.Cut(val, "\n")
					raw = strconv.Quote(first)
					blocks = append(blocks, block{"", more})
				} else {
					blocks = append(blocks, block{key, val})
					continue
				}
			}
		}
		if head.Len() > 0 {
			head.WriteByte(' ')
		}
		head.WriteString(key)
		head.WriteByte('=')
		head.WriteString(raw)
	}
	b = append(b, head.String()...)
	b = append(b, '\n')
	for _, bl := range blocks {
		indent := ""
		if bl.key != "" && bl.key != "traceback" {
			b = append(b, "  "+bl.key+":\n"...)
			indent = "    "
		}
		for _, l := range strings.Split(bl.val, "\n") {
			b = append(b, indent...)
			b = append(b, l...)
			b = append(b, '\n')
		}
	}
	return b
}
