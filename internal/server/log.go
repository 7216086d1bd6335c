package server

import (
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns the server's logger: text or JSON records on w at
// level (debug, info, warning, error).
func NewLogger(w io.Writer, level, format string) *slog.Logger {
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
