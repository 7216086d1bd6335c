package server

import (
	"context"
	"log/slog"
	"time"

	"turnstile/internal/config"
	"turnstile/internal/http1"
)

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
		slog.String("protocol", protocol(r)),
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

// protocol is the request's protocol as access logs write it.
func protocol(r *http1.Request) string {
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

// staticAccess is the static mounts' access hook: nil (no timing at all)
// without --access-log. Static responses are not in the request metrics.
func staticAccess(cfg *config.Config, log *slog.Logger) func(*http1.ResponseWriter, *http1.Request, time.Duration) {
	if !cfg.AccessLog {
		return nil
	}
	return func(w *http1.ResponseWriter, r *http1.Request, d time.Duration) {
		logAccess(log, r, w.Status(), w.Written(), d, slog.Bool("static", true))
	}
}
