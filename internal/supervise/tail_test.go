package supervise

import "testing"

func TestTailLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`time=2026-12-01T10:00:00Z level=ERROR msg="wsgi: app raised" method=GET traceback="Traceback (most recent call last):\n  File \"a.py\"\nRuntimeError: x" worker=1`, "ERROR wsgi: app raised"},
		{`time=2026-12-01T10:00:00Z level=INFO msg=hello worker=1`, "INFO hello"},
		{`{"time":"2026-12-01T10:00:00Z","level":"ERROR","msg":"cannot load\nTraceback","worker":1}`, "ERROR cannot load"},
		{`Fatal Python error: Segmentation fault`, "Fatal Python error: Segmentation fault"},
		{`time=broken`, "time=broken"},
	} {
		if got := tailLine([]byte(tc.in)); got != tc.want {
			t.Errorf("tailLine(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
