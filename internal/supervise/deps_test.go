package supervise

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestMasterLinksNoCgo fails when a package the master imports, directly
// or not, has cgo files: the master must never link CPython (doc.go, step
// 1; issue 19). The standard library's cgo (runtime/cgo, net, os/user:
// each has a pure-Go fallback) is not counted. It asks `go list`, with
// CGO_ENABLED=1 so that files importing "C" are listed.
func TestMasterLinksNoCgo(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		seen++
		if f[1] == "false" && f[2] != "0" {
			t.Errorf("the master imports %s, which has cgo (%s files): keep it out of internal/supervise's imports", f[0], f[2])
		}
	}
	if seen < 10 {
		t.Fatalf("go list listed %d packages:\n%s", seen, out)
	}
}
