package config

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Every default of the table parses (Register panics otherwise), and the
// Config it gives is valid but for the app.
func TestSettings_Defaults(t *testing.T) {
	c := Defaults()
	c.App = "app:app"
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	if c.Port != DefaultPort || c.Host != DefaultHost || !c.ProxyHeaders || !c.DateHeader || c.MinBodyRate != 240 || c.TimeoutKeepAlive.String() != "5s" {
		t.Errorf("defaults: %+v", c)
	}
}

// Each name (a setting, an alias, a --no-X) is registered once.
func TestSettings_Names(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var c Config
	Register(fs, &c) // pflag panics on a name given twice
	for _, s := range Settings {
		if (s.Refused == "") == (s.Field == nil) {
			t.Errorf("%s: a setting has a Field, a refused flag none", s.Name)
		}
	}
}

// readmeRow is a row of the README's flag table: the names in its first
// cell and its Default cell.
type readmeRow struct {
	names []string // "--workers", "-w", "--no-date-header"
	def   string
}

var readmeName = regexp.MustCompile("--[a-z0-9-]+|`-[a-zA-Z]`")

// readmeFlagTable parses the table under "## Usage" (rows "| `--x` ...").
func readmeFlagTable(t *testing.T) []readmeRow {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, usage, _ := strings.Cut(string(b), "\n## Usage\n")
	usage, _, _ = strings.Cut(usage, "\n#")
	var rows []readmeRow
	for _, line := range strings.Split(usage, "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.Split(line, "|")[1:] // no cell holds a "|"
		if len(cells) < 3 {
			t.Fatalf("README row with fewer than 3 cells: %s", line)
		}
		var r readmeRow
		for _, n := range readmeName.FindAllString(cells[0], -1) {
			r.names = append(r.names, strings.Trim(n, "`"))
		}
		r.def = strings.TrimSpace(cells[1])
		rows = append(rows, r)
	}
	return rows
}

// The README's flag table lists every setting once with its aliases,
// shorthand and --no-X, and the table's default, and nothing else
// (refused flags are in "Coming from gunicorn / uvicorn").
func TestSettings_README(t *testing.T) {
	rows := readmeFlagTable(t)
	seen := map[string]bool{}
	for _, r := range rows {
		s := Lookup(strings.TrimPrefix(r.names[0], "--"))
		if s == nil || s.Refused != "" {
			t.Errorf("README row %v: no such setting", r.names)
			continue
		}
		seen[s.Name] = true
		want := []string{"--" + s.Name}
		if s.Negation != "" {
			want = append(want, "--no-"+s.Name)
		}
		if s.Short != "" {
			want = append(want, "-"+s.Short)
		}
		for _, a := range s.Aliases {
			want = append(want, "--"+a.Name)
		}
		if strings.Join(sorted(r.names), " ") != strings.Join(sorted(want), " ") {
			t.Errorf("README row %s: names %v; want %v", s.Name, r.names, want)
		}
		if r.def != s.ReadmeDefault() {
			t.Errorf("README row %s: default %q; want %q", s.Name, r.def, s.ReadmeDefault())
		}
	}
	for _, s := range Settings {
		if s.Refused == "" && !seen[s.Name] {
			t.Errorf("--%s has no row in the README's flag table", s.Name)
		}
	}
}

func sorted(a []string) []string {
	b := append([]string(nil), a...)
	for i := range b {
		for j := i + 1; j < len(b); j++ {
			if b[j] < b[i] {
				b[i], b[j] = b[j], b[i]
			}
		}
	}
	return b
}
