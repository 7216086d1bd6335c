package supervise

import (
	"slices"
	"testing"
)

// sysmonAwake adds schedtrace at its longest period to GODEBUG, keeping
// the user's other settings, and leaves a GODEBUG that sets schedtrace,
// or TURNSTILE_SYSMON_AWAKE=0, alone.
func TestSysmonAwake(t *testing.T) {
	for _, tc := range []struct {
		id, off string
		env     []string
		want    []string
		added   bool
	}{
		{"no-godebug", "", []string{"A=1"}, []string{"A=1", "GODEBUG=" + schedtraceMax}, true},
		{"empty-godebug", "", []string{"GODEBUG="}, []string{"GODEBUG=" + schedtraceMax}, true},
		{"other-settings", "", []string{"GODEBUG=madvdontneed=1", "B=2"}, []string{"GODEBUG=madvdontneed=1," + schedtraceMax, "B=2"}, true},
		{"users-schedtrace", "", []string{"GODEBUG=gctrace=1, schedtrace=1000"}, []string{"GODEBUG=gctrace=1, schedtrace=1000"}, false},
		{"switched-off", "0", []string{"A=1"}, []string{"A=1"}, false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			t.Setenv("TURNSTILE_SYSMON_AWAKE", tc.off)
			got, added := sysmonAwake(slices.Clone(tc.env))
			if !slices.Equal(got, tc.want) || added != tc.added {
				t.Errorf("sysmonAwake(%q) = %q, %v; want %q, %v", tc.env, got, added, tc.want, tc.added)
			}
		})
	}
}

// Only the runtime's trace lines are dropped from a worker's output.
func TestIsSchedTrace(t *testing.T) {
	for line, want := range map[string]bool{
		"SCHED 0ms: gomaxprocs=2 idleprocs=2 threads=5 spinningthreads=0 needspinning=0 idlethreads=2 runqueue=0 [0 0]\n": true,
		"SCHED 2147483647ms: gomaxprocs=1 idleprocs=1 threads=4\n":                                                        true,
		"SCHED 12ms: something else\n":                                           false,
		"time=2026-11-30T14:20:08Z level=INFO msg=\"SCHED 0ms: gomaxprocs=1\"\n": false,
		"SCHEDULE 0ms: gomaxprocs=1\n":                                           false,
	} {
		if got := isSchedTrace([]byte(line)); got != want {
			t.Errorf("isSchedTrace(%q) = %v; want %v", line, got, want)
		}
	}
}
