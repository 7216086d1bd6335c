package workerctl

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEncodeParse(t *testing.T) {
	for _, c := range []struct {
		id   string
		msg  Msg
		line string
		back Msg // what Parse returns; the zero Msg: msg itself
	}{
		{"ready", Msg{Kind: Ready}, "ready\n", Msg{}},
		{"failed", Msg{Kind: Failed, Reason: "cannot load the app a:b: ImportError: x"}, "failed cannot load the app a:b: ImportError: x\n", Msg{}},
		{"failed/empty", Msg{Kind: Failed}, "failed\n", Msg{}},
		{"failed/newlines", Msg{Kind: Failed, Reason: " a\nb\n"}, "failed a b\n", Msg{Kind: Failed, Reason: "a b"}},
		{"recycle", Msg{Kind: Recycle, Cause: CauseMaxRequests, Reason: "1000 requests served"}, "recycle max-requests 1000 requests served\n", Msg{}},
		{"recycle/no-why", Msg{Kind: Recycle, Cause: CauseTimeout}, "recycle timeout\n", Msg{}},
		{"recycle/timeout", Msg{Kind: Recycle, Cause: CauseTimeout, Reason: "GET /slow running 5.001s"}, "recycle timeout GET /slow running 5.001s\n", Msg{}},
	} {
		t.Run(c.id, func(t *testing.T) {
			b, err := c.msg.Encode()
			if err != nil || string(b) != c.line {
				t.Fatalf("Encode = %q, %v; want %q", b, err, c.line)
			}
			want := c.back
			if want == (Msg{}) {
				want = c.msg
			}
			got, err := Parse(strings.TrimSuffix(string(b), "\n"))
			if err != nil || got != want {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", b, got, err, want)
			}
		})
	}
}

func TestEncodeBad(t *testing.T) {
	for _, c := range []struct {
		id  string
		msg Msg
		err error
	}{
		{"zero", Msg{}, ErrKind},
		{"kind-out-of-range", Msg{Kind: Recycle + 1}, ErrKind},
		{"recycle/no-cause", Msg{Kind: Recycle, Reason: "x"}, ErrCause},
		{"recycle/cause-with-space", Msg{Kind: Recycle, Cause: "max requests"}, ErrCause},
		{"recycle/cause-with-newline", Msg{Kind: Recycle, Cause: "timeout\nready"}, ErrCause},
		{"ready/reason", Msg{Kind: Ready, Reason: "x"}, ErrField},
		{"ready/cause", Msg{Kind: Ready, Cause: CauseTimeout}, ErrField},
		{"failed/cause", Msg{Kind: Failed, Cause: CauseTimeout}, ErrField},
	} {
		t.Run(c.id, func(t *testing.T) {
			if b, err := c.msg.Encode(); !errors.Is(err, c.err) {
				t.Errorf("Encode(%+v) = %q, %v; want %v", c.msg, b, err, c.err)
			}
		})
	}
}

func TestParseBad(t *testing.T) {
	for _, c := range []struct {
		line string
		err  error
	}{
		{"", ErrKind},
		{"hello", ErrKind},
		{"READY", ErrKind},
		{" ready", ErrKind},
		{"ready now", ErrField},
		{"ready ", ErrField},
		{"recycle", ErrCause},
		{"recycle ", ErrCause},
		{"recycle  timeout", ErrCause},
	} {
		if m, err := Parse(c.line); !errors.Is(err, c.err) {
			t.Errorf("Parse(%q) = %+v, %v; want %v", c.line, m, err, c.err)
		}
	}
}

// A reason too long for one line is shortened at a character boundary.
func TestEncodeLong(t *testing.T) {
	reason := strings.Repeat("é", MaxLineBytes) // 2 bytes each
	for _, m := range []Msg{{Kind: Failed, Reason: reason}, {Kind: Recycle, Cause: CauseTimeout, Reason: "x" + reason}} {
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxLineBytes || len(b) < MaxLineBytes-utf8.UTFMax || !utf8.Valid(b) || b[len(b)-1] != '\n' {
			t.Errorf("%v: %d bytes, valid UTF-8 %v; want at most %d, whole characters, one line", m.Kind, len(b), utf8.Valid(b), MaxLineBytes)
		}
		got, err := Parse(strings.TrimSuffix(string(b), "\n"))
		if err != nil || got.Kind != m.Kind || got.Cause != m.Cause || !strings.HasPrefix(m.Reason, got.Reason) {
			t.Errorf("Parse of the shortened line: %v, %v", got.Kind, err)
		}
	}
}

func TestEnv(t *testing.T) {
	env := Env(12, "/tmp/d/w12-3.sock")
	want := []string{"TURNSTILE_WORKER=12", "TURNSTILE_WORKER_ADMIN=/tmp/d/w12-3.sock"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Errorf("Env = %q; want %q", env, want)
	}
	for _, kv := range env {
		if !IsEnv(kv) {
			t.Errorf("IsEnv(%q) = false", kv)
		}
	}
	for _, kv := range []string{"TURNSTILE_WORKERS=3", "TURNSTILE_WORKER_SETTINGS={}", "PATH=/bin", "TURNSTILE_WORKER"} {
		if IsEnv(kv) {
			t.Errorf("IsEnv(%q) = true", kv)
		}
	}
}

func TestExtraFiles(t *testing.T) {
	ln, ctl := os.NewFile(100, "listener"), os.NewFile(101, "control")
	files := ExtraFiles(ln, ctl, nil, nil)
	if files[ListenerFD-3] != ln || files[ControlFD-3] != ctl || len(files) != 2 {
		t.Errorf("ExtraFiles = %v; want the listener at fd %d, the control pipe at fd %d", files, ListenerFD, ControlFD)
	}
	q := os.NewFile(102, "quic")
	if files := ExtraFiles(ln, ctl, q, nil); len(files) != 3 || files[QUICFD-3] != q {
		t.Errorf("ExtraFiles with quic = %v; want the UDP socket at fd %d", files, QUICFD)
	}
	l := os.NewFile(103, "layer")
	if files := ExtraFiles(ln, ctl, nil, l); len(files) != 4 || files[QUICFD-3] != nil || files[LayerFD-3] != l {
		t.Errorf("ExtraFiles with the layer = %v; want the socketpair at fd %d", files, LayerFD)
	}
}
