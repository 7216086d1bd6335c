package python

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A free-threaded CPython (Py_GIL_DISABLED) is refused at compile time with
// one clear line (tspy.h), never miscompiled: gilwait.c and sample.c read
// GIL-build layouts. The compiler sees the macro as a free-threaded
// Python.h would define it.
func TestBuild_RefusesFreeThreaded(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the package again")
	}
	cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-DPy_GIL_DISABLED=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("go build with Py_GIL_DISABLED succeeded; want it refused")
	}
	if !strings.Contains(string(out), "turnstile: free-threaded CPython (Py_GIL_DISABLED) is not supported yet") {
		t.Fatalf("go build with Py_GIL_DISABLED failed without the line that says why:\n%s", out)
	}
}
