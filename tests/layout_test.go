package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Issue 19: C files of one job each. A C file that grows past
// maxCFileLines is doing more than one job: split it along its section
// banners (docs/layout.md).
const maxCFileLines = 650

func TestLayout_CFilesOfOneJob(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(), "internal", "*", "*.c"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no C files under internal/: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > maxCFileLines {
			rel, _ := filepath.Rel(repoRoot(), f)
			t.Errorf("%s: %d lines, more than %d: split it along its section banners", rel, n, maxCFileLines)
		}
	}
}
