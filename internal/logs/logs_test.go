package logs

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestMultilineWriter(t *testing.T) {
	var out bytes.Buffer
	log := New(MultilineWriter(&out), "info", "text")
	log.Error("wsgi: app raised", "method", "GET", "traceback", "Traceback (most recent call last):\n  File \"a.py\", line 1\nRuntimeError: x\n", "worker", 1)
	log.Info("plain", "addr", "127.0.0.1:1", "q", `say "hi"`)
	log.Error("cannot load the app a:b\nTraceback (most recent call last):\nSyntaxError: bad")
	log.Error("worker exited", "worker", 2, "stderr_tail", "INFO one\nFatal Python error: x")
	got := strings.Split(out.String(), "\n")
	want := []string{
		`level=ERROR msg="wsgi: app raised" method=GET worker=1`,
		`Traceback (most recent call last):`,
		`  File "a.py", line 1`,
		`RuntimeError: x`,
		`level=INFO msg=plain addr=127.0.0.1:1 q="say \"hi\""`,
		`level=ERROR msg="cannot load the app a:b"`,
		`Traceback (most recent call last):`,
		`SyntaxError: bad`,
		`level=ERROR msg="worker exited" worker=2`,
		`  stderr_tail:`,
		`    INFO one`,
		`    Fatal Python error: x`,
		``,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines:\n%s", len(got), out.String())
	}
	for i := range want {
		g := got[i]
		if strings.HasPrefix(g, "time=") {
			_, g, _ = strings.Cut(g, " ")
		}
		if g != want[i] {
			t.Errorf("line %d = %q; want %q", i, g, want[i])
		}
	}
}

func TestMultilineWriterJSON(t *testing.T) {
	var out bytes.Buffer
	slog.New(slog.NewJSONHandler(MultilineWriter(&out), nil)).Error("x", "traceback", "a\nb")
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Errorf("JSON record: %d lines; want 1: %q", n, out.String())
	}
}
