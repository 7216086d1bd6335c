package python

import (
	"fmt"
	"strings"
	"testing"
)

func TestMismatchAttrs(t *testing.T) {
	if a := mismatchAttrs("3.11.7", "3.11.7", "/x/libpython3.11.so.1.0", "/x", true, 0); a != nil {
		t.Errorf("same version: %v; want nil", a)
	}
	a := mismatchAttrs("3.11.2", "3.11.7", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", "/root/.pyenv/versions/3.11.7/lib", false, 65534)
	s := fmt.Sprint(a...)
	for _, want := range []string{"3.11.2", "3.11.7", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
		"/root/.pyenv/versions/3.11.7/lib is not readable by this worker's user (uid 65534"} {
		if !strings.Contains(s, want) {
			t.Errorf("attrs %q lack %q", s, want)
		}
	}
	if len(a)%2 != 0 {
		t.Errorf("attrs %v: want key/value pairs", a)
	}
}

// The loader names the libpython this test binary loaded.
func TestLoadedLibrary(t *testing.T) {
	if p := LoadedLibrary(); !strings.Contains(p, "libpython") {
		t.Errorf("LoadedLibrary() = %q; want a libpython path", p)
	}
}
