package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"turnstile/internal/accesslog"
	"turnstile/internal/config"
	"turnstile/internal/http1"
	"turnstile/internal/inflight"
)

// accessLog is the worker's access log (--access-log): the fixed record
// of logAccess, or, with --access-log-format, the format compiled once at
// start (internal/accesslog): under --log-format text its line as
// gunicorn writes it, a bare line on stderr among the records; under json
// a record with the format's atoms as fields. nil when the access log is
// off.
type accessLog struct {
	log    *slog.Logger
	format *accesslog.Format // nil: logAccess's record
	json   bool
	pid    int
	worker string
	mu     sync.Mutex // guards buf
	buf    []byte
	out    io.Writer // the records' stderr
}

// newAccessLog returns cfg's access log, nil when it is off; the error of
// a format that does not compile (config.Validate refused it already).
func newAccessLog(cfg *config.Config, log *slog.Logger) (*accessLog, error) {
	if !cfg.AccessLog {
		return nil, nil
	}
	a := &accessLog{log: log, json: cfg.LogFormat == "json", pid: os.Getpid(), worker: workerID, out: os.Stderr}
	if cfg.AccessLogFormat != "" {
		f, err := accesslog.Compile(cfg.AccessLogFormat)
		if err != nil {
			return nil, err
		}
		f.RootPath = cfg.RootPath
		a.format = f
	}
	return a, nil
}

// keepHeader reports whether the app handlers must keep each response's
// header lines for the log (a %({name}o)s atom).
func (a *accessLog) keepHeader() bool {
	return a != nil && a.format != nil && a.format.ResponseHeaders
}

// write logs one finished request; loop is the event loop's index (ASGI),
// -1 for none (WSGI, static files); extra are the default record's
// further fields.
func (a *accessLog) write(r *http1.Request, res inflight.Result, loop int, extra ...slog.Attr) {
	if a.format == nil {
		logAccess(a.log, r, res.Status, res.Bytes, res.Duration, extra...)
		return
	}
	e := accesslog.Entry{Request: r, Result: res, Now: time.Now(), Pid: a.pid, Worker: a.worker, Loop: loop}
	if a.json {
		rec := slog.NewRecord(e.Now, slog.LevelInfo, "access", 0)
		rec.AddAttrs(a.format.Attrs(&e)...)
		_ = a.log.Handler().Handle(context.Background(), rec)
		return
	}
	// One write per line, as the records' handler writes them: a line
	// on the pipe to the master is not interleaved with another.
	a.mu.Lock()
	a.buf = append(a.format.Append(a.buf[:0], &e), '\n')
	a.out.Write(a.buf)
	a.mu.Unlock()
}

// logAccess writes the access record of one response (--access-log),
// whatever --log-level:
// who asked what, over which protocol, the status and body bytes sent,
// how long it took, and the client's User-Agent and Referer (left out
// when the request has none), then extra (the WSGI queue and GIL waits).
// Names as in common access logs. Everything comes from the request's
// already parsed fields: no extra work per request but the record.
func logAccess(log *slog.Logger, r *http1.Request, status int, bytes int64, d time.Duration, extra ...slog.Attr) {
	var arr [14]slog.Attr
	a := append(arr[:0],
		slog.String("remote", addrString(r.RemoteAddr)),
		slog.String("method", string(r.Method)),
		slog.String("target", string(r.Target)),
		slog.String("protocol", accesslog.ProtocolName(r)),
		slog.Int("status", status),
		slog.Int64("bytes", bytes),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
	)
	if ua := r.HeaderValue("User-Agent"); len(ua) > 0 {
		a = append(a, slog.String("user_agent", string(ua)))
	}
	if ref := r.HeaderValue("Referer"); len(ref) > 0 {
		a = append(a, slog.String("referer", string(ref)))
	}
	a = append(a, extra...)
	// As gunicorn's access log, the record does not depend on
	// --log-level: it goes to the handler directly (an INFO record),
	// past the level check of log.LogAttrs.
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "access", 0)
	rec.AddAttrs(a...)
	_ = log.Handler().Handle(context.Background(), rec)
}

// staticAccess is the static mounts' access hook: nil (no timing at all)
// without --access-log. Static responses are not in the request metrics.
func staticAccess(a *accessLog) func(*http1.ResponseWriter, *http1.Request, time.Duration) {
	if a == nil {
		return nil
	}
	return func(w *http1.ResponseWriter, r *http1.Request, d time.Duration) {
		a.write(r, inflight.Result{Status: w.Status(), Bytes: w.Written(), Duration: d}, -1, slog.Bool("static", true))
	}
}
