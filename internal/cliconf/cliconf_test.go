package cliconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type vals struct {
	workers int
	host    string
	grace   time.Duration
	static  []string
	access  bool
}

func flags(t *testing.T, args ...string) (*pflag.FlagSet, *vals) {
	t.Helper()
	v := &vals{}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("config", "", "")
	fs.IntVar(&v.workers, "workers", 1, "")
	fs.IntVar(&v.workers, "procs", 1, "alias of --workers")
	fs.StringVar(&v.host, "host", "127.0.0.1", "")
	fs.DurationVar(&v.grace, "graceful-timeout", 30*time.Second, "")
	fs.StringArrayVar(&v.static, "static", nil, "")
	fs.BoolVar(&v.access, "access-log", false, "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs, v
}

func file(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "c.toml")
	os.WriteFile(p, []byte(text), 0o644)
	return p
}

func sources(r *Result) map[string]Source {
	m := map[string]Source{}
	for _, s := range r.Settings() {
		m[s.Name] = s.Source
	}
	return m
}

func TestPrecedence(t *testing.T) {
	p := file(t, "workers = 2\nhost = \"0.0.0.0\"\ngraceful-timeout = \"5s\"\nstatic = [\"/a=x\", \"/b=y\"]\n")
	fs, v := flags(t, "--config", p, "--workers", "4")
	r, err := Load(fs, Options{ConfigFlag: "config", Environ: []string{"TURNSTILE_HOST=::1", "TURNSTILE_WORKERS=3", "PATH=/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if v.workers != 4 || v.host != "::1" || v.grace != 5*time.Second || strings.Join(v.static, "|") != "/a=x|/b=y" || v.access {
		t.Fatalf("values %+v", v)
	}
	want := map[string]Source{"workers": Flag, "host": Env, "graceful-timeout": File, "static": File, "access-log": Default}
	got := sources(r)
	for k, s := range want {
		if got[k] != s {
			t.Errorf("%s: source %s, want %s", k, got[k], s)
		}
	}
	if _, ok := got["procs"]; ok {
		t.Errorf("an alias is listed as a setting")
	}
}

func TestEnvList(t *testing.T) {
	fs, v := flags(t)
	if _, err := Load(fs, Options{Environ: []string{`TURNSTILE_STATIC=/a=x,"/b=y,z"`}}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(v.static, "|") != "/a=x|/b=y,z" {
		t.Fatalf("static %q", v.static)
	}
}

func TestAlias(t *testing.T) {
	fs, v := flags(t, "--procs", "6")
	r, err := Load(fs, Options{Environ: []string{"TURNSTILE_WORKERS=3"}})
	if err != nil || v.workers != 6 || sources(r)["workers"] != Flag {
		t.Fatalf("--procs over TURNSTILE_WORKERS: %v, workers %d", err, v.workers)
	}
	fs, _ = flags(t)
	_, err = Load(fs, Options{Environ: []string{"TURNSTILE_WORKERS=3", "TURNSTILE_PROCS=2"}})
	if err == nil || !strings.Contains(err.Error(), "sets the same setting as") {
		t.Fatalf("both alias and flag: %v", err)
	}
}

func TestErrors(t *testing.T) {
	p := file(t, "wrkers = 2\nhost = [\"a\"]\naccess-log = \"maybe\"\nworkers = \"abc\"\n")
	fs, _ := flags(t, "--config", p)
	_, err := Load(fs, Options{ConfigFlag: "config", Reserved: []string{"TURNSTILE_BIN"},
		Environ: []string{"TURNSTILE_BIN=/x", "TURNSTILE_GRACEFUL_TIMEOUT=soon", "TURNSTILE_HOTS=x"}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		p + ": wrkers: unknown setting (did you mean workers?)",
		p + ": host: want one value, not an array",
		p + `: access-log = "maybe": want true or false`,
		p + `: workers = "abc": want an integer`,
		`TURNSTILE_GRACEFUL_TIMEOUT="soon": want a duration like 30s or 1m30s`,
		"TURNSTILE_HOTS: unknown variable (did you mean TURNSTILE_HOST?)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "TURNSTILE_BIN") {
		t.Errorf("a reserved variable is reported:\n%v", err)
	}
}

// A repeatable setting takes one TOML value as well as an array (issue
// 28: bind = "127.0.0.1:8000").
func TestListScalar(t *testing.T) {
	p := file(t, "static = \"/a=x\"\n")
	fs, v := flags(t, "--config", p)
	// An empty environment: the test's own (make test sets TURNSTILE_BIN
	// and the like) is not what this test is about.
	if _, err := Load(fs, Options{ConfigFlag: "config", Environ: []string{}}); err != nil || len(v.static) != 1 || v.static[0] != "/a=x" {
		t.Fatalf("static = \"/a=x\": %v, %q", err, v.static)
	}
}

func TestRelabel(t *testing.T) {
	p := file(t, "workers = -1\n")
	fs, _ := flags(t, "--config", p, "--host", "")
	r, err := Load(fs, Options{ConfigFlag: "config", Environ: []string{"TURNSTILE_GRACEFUL_TIMEOUT=-1s"}})
	if err != nil {
		t.Fatal(err)
	}
	got := r.Relabel(errors.Join(
		errors.New("--workers -1: want at least 1"),
		errors.New("--graceful-timeout -1s: must not be negative"),
		errors.New(`--host "": want a host`),
		errors.New("an app is required"),
	))
	want := []string{p + ": workers -1: want at least 1", "TURNSTILE_GRACEFUL_TIMEOUT -1s: must not be negative", `--host "": want a host`, "an app is required"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A worker applies the master's export and neither the environment nor
// the file.
func TestWorkerSettings(t *testing.T) {
	p := file(t, "workers = 2\nstatic = [\"/a=x\"]\n")
	fs, _ := flags(t, "--config", p)
	r, err := Load(fs, Options{ConfigFlag: "config", Environ: []string{"TURNSTILE_HOST=::1"}})
	if err != nil {
		t.Fatal(err)
	}
	exported := r.Export()
	os.WriteFile(p, []byte("workers = 9\nbogus = 1\n"), 0o644)
	fs2, v2 := flags(t, "--config", p)
	r2, err := Load(fs2, Options{ConfigFlag: "config", Worker: true,
		Environ: []string{"TURNSTILE_HOST=10.0.0.1", "TURNSTILE_NOPE=1", EnvSettings + "=" + exported}})
	if err != nil {
		t.Fatal(err)
	}
	if v2.workers != 2 || v2.host != "::1" || strings.Join(v2.static, "|") != "/a=x" {
		t.Fatalf("worker values %+v", v2)
	}
	if s := sources(r2); s["workers"] != File || s["host"] != Env {
		t.Fatalf("worker sources %v", s)
	}
}
