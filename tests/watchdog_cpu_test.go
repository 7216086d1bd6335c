package tests

// The loop watchdog's CPU figures (issue 20's rooms bench: a loop that
// stalled for seconds while the machine's other work had its core): a
// stall record tells a loop held off the CPU from one that slept.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// loopWorker returns the process that runs ts-loop-0: the server process
// pid or one of its children (the worker).
func loopWorker(t *testing.T, pid int) int {
	t.Helper()
	pids := []int{pid}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if pp, _ := strconv.Atoi(f[1]); pp == pid {
			p, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			pids = append(pids, p)
		}
	}
	for _, p := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/comm", p))
		for _, c := range tasks {
			if b, _ := os.ReadFile(c); strings.TrimSpace(string(b)) == "ts-loop-0" {
				return p
			}
		}
	}
	t.Fatalf("no process with a ts-loop-0 thread under pid %d", pid)
	return 0
}

// A loop held off the CPU (here: its thread under SCHED_IDLE, pinned to one
// CPU that three spinning processes keep busy, as another tenant's work did in
// the rooms bench) stalls while runnable: its record reads the stall as
// time waiting for a CPU, not on one. TestB35_BlockedLoop has the other
// side: a loop asleep in time.sleep waits for neither.
func TestWatchdog_StallHeldOffCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no schedstat on this kernel")
	}
	s := Start(t, "--lifespan", "off", "--loop-stall-threshold", "100ms", "wd_block:app")
	tid := loopThread(t, loopWorker(t, s.PID))
	cpu := runtime.NumCPU() - 1
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(tid, &set); err != nil {
		t.Fatalf("sched_setaffinity(ts-loop-0): %v", err)
	}
	// SCHED_IDLE, not nice 19: a nice-19 thread woken by a probe often
	// ran within the 100 ms threshold behind two spinning processes (the
	// kernel's EEVDF placement keeps a sleeper's lag), so no stall came in
	// 10 s (CI, 3.13); an idle-policy thread never preempts them.
	if err := unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
		t.Fatalf("sched_setattr(ts-loop-0, SCHED_IDLE): %v", err)
	}
	var hogs []*exec.Cmd
	for i := 0; i < 3; i++ {
		h := exec.Command("taskset", "-c", strconv.Itoa(cpu), "sh", "-c", "while :; do :; done")
		if err := h.Start(); err != nil {
			t.Fatalf("hog: %v", err)
		}
		hogs = append(hogs, h)
	}
	stopHogs := func() {
		for _, h := range hogs {
			h.Process.Kill()
			h.Wait()
		}
		hogs = nil
	}
	defer stopHogs()
	// The watchdog's probes are the loop's only work: each wakes the
	// loop thread, which then waits for the CPU behind the hogs.
	recs := waitLogRecords(s.Logs, 10*time.Second, func(r map[string]any) bool {
		_, ok := r["loop_cpu_wait_ms"]
		return r["msg"] == "event loop stalled" && ok
	})
	stopHogs()
	if len(recs) == 0 {
		t.Fatalf("no stall record with the loop's CPU figures while the loop was held off the CPU:\n%s", s.Logs())
	}
	r := recs[0]
	win, _ := r["cpu_window_ms"].(float64)
	on, _ := r["loop_on_cpu_ms"].(float64)
	wait, _ := r["loop_cpu_wait_ms"].(float64)
	t.Logf("held off the CPU: stall %v ms; window %v ms, on CPU %v ms, waiting for a CPU %v ms", r["duration_ms"], win, on, wait)
	if win <= 0 || wait < 0.5*win || wait < 5*on {
		t.Errorf("held off the CPU: window %v ms, on CPU %v ms, waiting for a CPU %v ms; want the wait most of the window", win, on, wait)
	}
	if code, _ := s.Get(t, "/nap"); code != 200 {
		t.Errorf("GET /nap after the hogs = %d", code)
	}
}
