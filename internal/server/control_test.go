package server

import (
	"io"
	"log/slog"
	"testing"
)

// The "failed" reason a worker sends the master names the exception of an
// error record whose traceback is a field (the app failed to import), as
// it did when the traceback was in the message.
func TestLastErrorText(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(*slog.Logger)
		want string
	}{
		{"traceback field", func(l *slog.Logger) {
			l.Error("turnstile: cannot load the app a:app", "traceback",
				"Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nModuleNotFoundError: No module named 'x'")
		}, "turnstile: cannot load the app a:app: ModuleNotFoundError: No module named 'x'"},
		{"one line", func(l *slog.Logger) {
			l.Error("turnstile: cannot load the app b:app: no module named 'b'")
		}, "turnstile: cannot load the app b:app: no module named 'b'"},
		{"last error wins", func(l *slog.Logger) {
			l.Error("first", "traceback", "T\nE1")
			l.Warn("a warning")
			l.Error("second")
		}, "second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLastError(slog.NewTextHandler(io.Discard, nil))
			tc.log(slog.New(h).With("worker", 1))
			if got := h.text(); got != tc.want {
				t.Errorf("text() = %q; want %q", got, tc.want)
			}
		})
	}
}
