package cliconf

import (
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// notBool is --no-X for a bool --X: it sets the same variable negated.
type notBool struct{ b *bool }

func (n notBool) String() string { return strconv.FormatBool(!*n.b) }
func (n notBool) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*n.b = !on
	return nil
}
func (n notBool) Type() string     { return "bool" }
func (n notBool) IsBoolFlag() bool { return true }

type pairVals struct {
	proxy   bool
	threads int
	umask   string
}

// pairFlags has a --proxy-headers / --no-proxy-headers pair, an alias
// (--threads of --blocking-threads) and --umask, as cmd/turnstile does.
func pairFlags(t *testing.T, args ...string) (*pflag.FlagSet, *pairVals) {
	t.Helper()
	v := &pairVals{}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("config", "", "")
	fs.BoolVar(&v.proxy, "proxy-headers", true, "")
	fs.Var(notBool{&v.proxy}, "no-proxy-headers", "same as --proxy-headers=false")
	fs.Lookup("no-proxy-headers").NoOptDefVal = "true"
	fs.IntVar(&v.threads, "blocking-threads", 1, "")
	fs.IntVar(&v.threads, "threads", 1, "alias of --blocking-threads")
	fs.StringVar(&v.umask, "umask", "", "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs, v
}

func setting(r *Result, name string) (Setting, bool) {
	for _, s := range r.Settings() {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// --X and --no-X are one setting: the command line beats the environment
// which beats the file across both names, and the pair is listed once.
func TestNegatedPairPrecedence(t *testing.T) {
	fs, v := pairFlags(t, "--proxy-headers")
	r, err := Load(fs, Options{Environ: []string{"TURNSTILE_NO_PROXY_HEADERS=1"}})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := setting(r, "proxy-headers")
	if !v.proxy || s.Source != Flag || s.Origin != "--proxy-headers" || s.Value != "true" {
		t.Fatalf("--proxy-headers under TURNSTILE_NO_PROXY_HEADERS=1: proxy %v, %+v", v.proxy, s)
	}
	if _, listed := setting(r, "no-proxy-headers"); listed {
		t.Errorf("--no-proxy-headers is listed as its own setting")
	}

	fs, v = pairFlags(t, "--no-proxy-headers")
	r, err = Load(fs, Options{Environ: []string{"TURNSTILE_PROXY_HEADERS=true"}})
	s, _ = setting(r, "proxy-headers")
	if err != nil || v.proxy || s.Source != Flag || s.Origin != "--no-proxy-headers" || s.Value != "false" {
		t.Fatalf("--no-proxy-headers under TURNSTILE_PROXY_HEADERS=true: %v, proxy %v, %+v", err, v.proxy, s)
	}

	// The environment's --no-X beats the file's --X.
	p := file(t, "proxy-headers = true\n")
	fs, v = pairFlags(t, "--config", p)
	r, err = Load(fs, Options{ConfigFlag: "config", Environ: []string{"TURNSTILE_NO_PROXY_HEADERS=1"}})
	s, _ = setting(r, "proxy-headers")
	if err != nil || v.proxy || s.Source != Env || s.Origin != "TURNSTILE_NO_PROXY_HEADERS" {
		t.Fatalf("env --no-X over file --X: %v, proxy %v, %+v", err, v.proxy, s)
	}
	// The file's no-X = true, and a worker gets the same.
	p = file(t, "no-proxy-headers = true\n")
	fs, v = pairFlags(t, "--config", p)
	r, err = Load(fs, Options{Environ: []string{}, ConfigFlag: "config"})
	s, _ = setting(r, "proxy-headers")
	if err != nil || v.proxy || s.Source != File || s.Origin != p+": no-proxy-headers" {
		t.Fatalf("file no-proxy-headers = true: %v, proxy %v, %+v", err, v.proxy, s)
	}
	fs, v = pairFlags(t)
	if _, err := Load(fs, Options{Worker: true, Environ: []string{EnvSettings + "=" + r.Export()}}); err != nil || v.proxy {
		t.Fatalf("worker: %v, proxy %v", err, v.proxy)
	}
	// A bad value names its variable.
	fs, _ = pairFlags(t)
	if _, err := Load(fs, Options{Environ: []string{"TURNSTILE_NO_PROXY_HEADERS=maybe"}}); err == nil ||
		!strings.Contains(err.Error(), `TURNSTILE_NO_PROXY_HEADERS="maybe": want true or false`) {
		t.Fatalf("bad value: %v", err)
	}
}

// Both names of one setting in one source are an error naming both.
func TestBothNamesOneSource(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		toml string
		want []string
	}{
		{args: []string{"--no-proxy-headers", "--proxy-headers"}, want: []string{"--no-proxy-headers", "--proxy-headers"}},
		{args: []string{"--threads", "3", "--blocking-threads", "5"}, want: []string{"--threads", "--blocking-threads"}},
		{env: []string{"TURNSTILE_PROXY_HEADERS=1", "TURNSTILE_NO_PROXY_HEADERS=1"}, want: []string{"TURNSTILE_PROXY_HEADERS", "TURNSTILE_NO_PROXY_HEADERS"}},
		{toml: "proxy-headers = true\nno-proxy-headers = true\n", want: []string{": proxy-headers", "no-proxy-headers"}},
	} {
		args := c.args
		if c.toml != "" {
			args = []string{"--config", file(t, c.toml)}
		}
		fs, _ := pairFlags(t, args...)
		_, err := Load(fs, Options{ConfigFlag: "config", Environ: append([]string{}, c.env...)})
		if err == nil {
			t.Errorf("%v %v %q: no error", c.args, c.env, c.toml)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v %v %q: error lacks %q: %v", c.args, c.env, c.toml, w, err)
			}
		}
	}
	// One name alone is fine, and check's label names it.
	for _, name := range []string{"--threads", "--blocking-threads"} {
		fs, v := pairFlags(t, name, "4")
		r, err := Load(fs, Options{Environ: []string{}})
		s, _ := setting(r, "blocking-threads")
		if err != nil || v.threads != 4 || s.Origin != name {
			t.Errorf("%s 4: %v, threads %d, %+v", name, err, v.threads, s)
		}
	}
}

// A TOML integer for an octal setting is that integer (0o27 is mask 027);
// a string is taken as written.
func TestOctalInteger(t *testing.T) {
	for toml, want := range map[string]string{"umask = 0o27\n": "0o27", "umask = 0o22\n": "0o22", "umask = 0\n": "0o0", "umask = \"027\"\n": "027"} {
		fs, v := pairFlags(t, "--config", file(t, toml))
		if _, err := Load(fs, Options{ConfigFlag: "config", Octal: []string{"umask"}, Environ: []string{}}); err != nil || v.umask != want {
			t.Errorf("%q: %v, umask %q, want %q", toml, err, v.umask, want)
		}
	}
}

// A DefaultEnv variable sets its flag below the TURNSTILE_ variable, and
// is the value's label.
func TestDefaultEnv(t *testing.T) {
	opts := func(env ...string) Options {
		return Options{Environ: env, DefaultEnv: map[string]string{"umask": "UMASK_FROM"}}
	}
	fs, v := pairFlags(t)
	r, err := Load(fs, opts("UMASK_FROM=077"))
	if s, _ := setting(r, "umask"); err != nil || v.umask != "077" || s.Source != Env || r.Label("umask") != "UMASK_FROM" {
		t.Fatalf("UMASK_FROM=077: %v, umask %q, %+v", err, v.umask, s)
	}
	fs, v = pairFlags(t)
	r, err = Load(fs, opts("UMASK_FROM=077", "TURNSTILE_UMASK=027"))
	if err != nil || v.umask != "027" || r.Label("umask") != "TURNSTILE_UMASK" {
		t.Fatalf("TURNSTILE_UMASK over UMASK_FROM: %v, umask %q", err, v.umask)
	}
	fs, v = pairFlags(t, "--umask", "022")
	if _, err = Load(fs, opts("UMASK_FROM=077")); err != nil || v.umask != "022" {
		t.Fatalf("--umask over UMASK_FROM: %v, umask %q", err, v.umask)
	}
}
