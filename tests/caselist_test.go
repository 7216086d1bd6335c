package tests

// TestCaseList keeps docs/cases.md, the list of conformance cases the tests
// are named after, true. It reads Go source only: no binary, so it runs
// under plain `go test ./...` and under -short too.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	// "## B01 — title"
	caseHeading = regexp.MustCompile(`^## (B\d\d) — \S`)
	// "  - `tests/cases_test.go`: `TestB01_LazyStartResponse` (…)"
	caseFileLine = regexp.MustCompile("^\\s*- `([^`]+\\.go)`: (.*)$")
	caseTestName = regexp.MustCompile("`(Test\\w+)`")
	// A case id in a test's name: TestB01_…, TestStatic_B36Traversal,
	// TestHTTP2_B25_…
	caseIDInName = regexp.MustCompile(`(?:^Test|_)(B\d\d)(?:[_A-Z]|$)`)
)

// goTestFuncs returns the names of the top-level Test functions declared
// in a Go file.
func goTestFuncs(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
			names[fn.Name.Name] = true
		}
	}
	return names
}

func TestCaseList(t *testing.T) {
	root := repoRoot()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "cases.md"))
	if err != nil {
		t.Fatal(err)
	}

	// Every Test function of tests/*.go, by file (relative to the root).
	declared := map[string]map[string]bool{}
	files, err := filepath.Glob(filepath.Join(root, "tests", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in tests/: %v", err)
	}
	for _, f := range files {
		declared["tests/"+filepath.Base(f)] = goTestFuncs(t, f)
	}

	type listed struct{ id, file, name string }
	var entries []listed
	sections := map[string]bool{}
	hasTestsLine := map[string]bool{}
	testsNone := map[string]bool{} // "- **Tests:** none …"
	id, file := "", ""
	for i, line := range strings.Split(string(doc), "\n") {
		n := i + 1
		if m := caseHeading.FindStringSubmatch(line); m != nil {
			id, file = m[1], ""
			if sections[id] {
				t.Errorf("docs/cases.md:%d: case %s is listed twice", n, id)
			}
			sections[id] = true
			continue
		}
		if strings.HasPrefix(line, "## ") {
			id, file = "", ""
			t.Errorf("docs/cases.md:%d: a section that is not a case (want \"## Bnn — title\"): %q", n, line)
			continue
		}
		if id == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "- **Tests:**"); ok {
			hasTestsLine[id] = true
			testsNone[id] = strings.HasPrefix(strings.TrimSpace(rest), "none")
		}
		rest := line
		switch m := caseFileLine.FindStringSubmatch(line); {
		case m != nil:
			file, rest = m[1], m[2]
		case strings.HasPrefix(line, "    ") && file != "":
			// a wrapped file line: same file
		default:
			file = ""
		}
		for _, tm := range caseTestName.FindAllStringSubmatch(rest, -1) {
			if file == "" {
				t.Errorf("docs/cases.md:%d: %s names %s without its file (want \"- `path_test.go`: `%s`\")", n, id, tm[1], tm[1])
				continue
			}
			entries = append(entries, listed{id, file, tm[1]})
		}
	}
	if len(sections) == 0 {
		t.Fatal("docs/cases.md lists no case (\"## Bnn — title\")")
	}
	perCase := map[string]int{}
	for _, e := range entries {
		perCase[e.id]++
	}
	for id := range sections {
		switch {
		case !hasTestsLine[id]:
			t.Errorf("docs/cases.md: %s has no \"- **Tests:**\" line (name the tests, or say none)", id)
		case perCase[id] == 0 && !testsNone[id]:
			t.Errorf("docs/cases.md: %s names no test and does not say \"- **Tests:** none\"", id)
		case perCase[id] > 0 && testsNone[id]:
			t.Errorf("docs/cases.md: %s says \"- **Tests:** none\" and names tests", id)
		}
	}

	// Every test named in the list exists in the file given for it.
	isListed := map[listed]bool{}
	for _, e := range entries {
		isListed[e] = true
		if _, ok := declared[e.file]; !ok {
			path := filepath.Join(root, filepath.FromSlash(e.file))
			if _, err := os.Stat(path); err != nil {
				t.Errorf("docs/cases.md: %s names %s in %s, and there is no such file", e.id, e.name, e.file)
				declared[e.file] = map[string]bool{}
				continue
			}
			declared[e.file] = goTestFuncs(t, path)
		}
		if !declared[e.file][e.name] {
			var elsewhere []string
			for f, names := range declared {
				if names[e.name] {
					elsewhere = append(elsewhere, f)
				}
			}
			sort.Strings(elsewhere)
			if len(elsewhere) > 0 {
				t.Errorf("docs/cases.md: %s names %s in %s; it is declared in %s", e.id, e.name, e.file, strings.Join(elsewhere, ", "))
			} else {
				t.Errorf("docs/cases.md: %s names %s in %s; no such test function", e.id, e.name, e.file)
			}
		}
	}

	// Every test in tests/ that carries a case id in its name is listed
	// under that case.
	var testFiles []string
	for f := range declared {
		if strings.HasPrefix(f, "tests/") {
			testFiles = append(testFiles, f)
		}
	}
	sort.Strings(testFiles)
	for _, f := range testFiles {
		var names []string
		for name := range declared[f] {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			m := caseIDInName.FindStringSubmatch(name)
			if m == nil {
				continue
			}
			if !sections[m[1]] {
				t.Errorf("%s: %s is named after case %s, which docs/cases.md does not list", f, name, m[1])
			} else if !isListed[listed{m[1], f, name}] {
				t.Errorf("%s: %s is not listed under %s in docs/cases.md", f, name, m[1])
			}
		}
	}
}
