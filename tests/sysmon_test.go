package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// schedPolicy is sched_getscheduler(2) of thread tid: 0 SCHED_OTHER, 3
// SCHED_BATCH.
func schedPolicy(t *testing.T, tid int) int {
	r, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
	if e != 0 {
		t.Fatalf("sched_getscheduler(%d): %v", tid, e)
	}
	return int(r)
}

// goThreadPolicies maps each of pid's threads named like its main thread
// (Go's threads; Python's are ts-py-N, ts-loop-0) to its policy.
func goThreadPolicies(t *testing.T, pid int) map[int]int {
	main, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	out := map[int]int{}
	for _, d := range dirs {
		tid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != strings.TrimSpace(string(main)) {
			continue
		}
		out[tid] = schedPolicy(t, tid)
	}
	return out
}

// The worker runs Go's sysmon thread under SCHED_BATCH (internal/sysmon;
// docs/design.md) and every other Go thread under SCHED_OTHER, for both
// interfaces, under load; TURNSTILE_SYSMON_BATCH=0 leaves them all
// SCHED_OTHER. sysmon is the first thread after the main thread; the one
// found is checked to be sleeping where sysmon sleeps (nanosleep, or a
// futex while it parks). The ASGI loop thread runs under SCHED_BATCH too,
// unless TURNSTILE_LOOP_BATCH=0.
func TestSysmon_BatchPolicy(t *testing.T) {
	for _, arm := range []struct {
		name, app string
		env       []string
		batch     bool
	}{
		{"wsgi", "hello:app", nil, true},
		{"asgi", "asgi_hello:app", nil, true},
		{"asgi-off", "asgi_hello:app", []string{"TURNSTILE_SYSMON_BATCH=0", "TURNSTILE_LOOP_BATCH=0"}, false},
	} {
		t.Run(arm.name, func(t *testing.T) {
			cmd := Command(t, arm.app)
			cmd.Env = append(os.Environ(), arm.env...)
			s, listening := startCmd(t, cmd)
			WaitListening(t, s, listening, 30*time.Second)
			for i := 0; i < 200; i++ { // load: Go's threads come and go
				if code, _ := s.Get(t, "/"); code != 200 {
					t.Fatalf("GET /: %d", code)
				}
			}
			pid := asgiServingPID(t, s)
			time.Sleep(1500 * time.Millisecond) // a round of the watcher
			pols := goThreadPolicies(t, pid)
			var batch []int
			for tid, p := range pols {
				if p == 3 {
					batch = append(batch, tid)
				}
			}
			slices.Sort(batch)
			t.Logf("worker %d: Go threads %v (policy by tid), SCHED_BATCH %v", pid, pols, batch)
			if strings.HasPrefix(arm.name, "asgi") {
				loop := loopThread(t, pid)
				if got, want := schedPolicy(t, loop), map[bool]int{true: 3, false: 0}[arm.batch]; got != want {
					t.Errorf("loop thread %d has policy %d; want %d", loop, got, want)
				}
			}
			if !arm.batch {
				if len(batch) != 0 {
					t.Fatalf("with TURNSTILE_SYSMON_BATCH=0, Go threads %v run SCHED_BATCH; want none", batch)
				}
				return
			}
			if len(batch) != 1 {
				t.Fatalf("Go threads under SCHED_BATCH: %v; want exactly one (sysmon)", batch)
			}
			var after []int
			for tid := range pols {
				if tid > pid {
					after = append(after, tid)
				}
			}
			slices.Sort(after)
			if batch[0] != after[0] {
				t.Fatalf("SCHED_BATCH thread %d is not the first thread after the main thread (%d)", batch[0], after[0])
			}
			// wchan is "0" while the thread runs: look a few times.
			var seen []string
			for i := 0; i < 20; i++ {
				wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/wchan", pid, batch[0]))
				w := string(wchan)
				if strings.Contains(w, "nanosleep") || strings.Contains(w, "futex") {
					return
				}
				seen = append(seen, w)
				time.Sleep(10 * time.Millisecond)
			}
			t.Errorf("thread %d waits in %q; sysmon sleeps in nanosleep or a futex", batch[0], seen)
		})
	}
}

// loopThread is the id of pid's event loop thread: the lowest-numbered
// thread named ts-loop-0 (the executor's threads inherit the name).
func loopThread(t *testing.T, pid int) int {
	dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	best := 0
	for _, d := range dirs {
		tid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile(d + "/comm"); strings.TrimSpace(string(comm)) == "ts-loop-0" && (best == 0 || tid < best) {
			best = tid
		}
	}
	if best == 0 {
		t.Fatalf("worker %d has no ts-loop-0 thread", pid)
	}
	return best
}
