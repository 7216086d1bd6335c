package config

import (
	"testing"

	"github.com/spf13/pflag"
)

// Every bad value of the command line is kept for ValueErrors, in the
// order given, and leaves its setting at the default; after ValueErrors a
// bad Set (the environment's, the file's) fails again.
func TestDeferValueErrors(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	Register(fs, &c)
	DeferValueErrors(fs)
	if err := fs.Parse([]string{"--keep-alive", "x", "-w", "abc", "--no-date-header=maybe", "--backlog", "7", "--workers-max-rss", "q"}); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got := ValueErrors(fs)
	want := []struct{ name, value string }{{"keep-alive", "x"}, {"workers", "abc"}, {"no-date-header", "maybe"}, {"workers-max-rss", "q"}}
	if len(got) != len(want) {
		t.Fatalf("ValueErrors = %+v; want %v", got, want)
	}
	for i, w := range want {
		if got[i].Flag.Name != w.name || got[i].Value != w.value || got[i].Err == nil {
			t.Errorf("ValueErrors[%d] = --%s %q (%v); want --%s %q with its error", i, got[i].Flag.Name, got[i].Value, got[i].Err, w.name, w.value)
		}
	}
	if c.Workers != 1 || c.Backlog != 7 || !c.DateHeader || c.TimeoutKeepAlive != Defaults().TimeoutKeepAlive {
		t.Errorf("after the bad values: workers %d, backlog %d, date-header %v, keep-alive %s; want the defaults and backlog 7", c.Workers, c.Backlog, c.DateHeader, c.TimeoutKeepAlive)
	}
	if err := fs.Set("workers", "abc"); err == nil {
		t.Error("Set after ValueErrors: nil; want the error")
	}
	if c.Workers != 1 {
		t.Errorf("a failed Set left workers %d; want 1", c.Workers)
	}
}
