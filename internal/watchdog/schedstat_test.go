package watchdog

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSchedstat_OwnThread: a thread that spins 30 ms reads at least half
// of it as on-CPU time or CPU wait, and a thread that sleeps reads less
// than half of its sleep as either. Not more than half: on a VM the time
// the hypervisor takes the vCPU away (steal) is neither (CI: 26.3 of
// 30.1 ms).
func TestSchedstat_OwnThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	a := readSchedstat(tid)
	if !a.ok {
		t.Skip("no /proc/self/task/<tid>/schedstat on this kernel")
	}
	for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
	}
	b := readSchedstat(tid)
	sh, ok := b.since(a)
	if !ok {
		t.Fatalf("since: not ok (%+v, %+v)", a, b)
	}
	if sh.WindowMS < 30 || sh.OnCPUMS+sh.CPUWaitMS < 0.5*sh.WindowMS {
		t.Errorf("spinning 30 ms: %+v, want on-CPU + CPU wait near the window", sh)
	}
	time.Sleep(30 * time.Millisecond)
	c := readSchedstat(tid)
	sh, _ = c.since(b)
	if sh.OnCPUMS+sh.CPUWaitMS > 0.5*sh.WindowMS {
		t.Errorf("sleeping 30 ms: %+v, want the window mostly neither", sh)
	}
	if _, ok := readSchedstat(-1).since(a); ok {
		t.Error("no thread: since ok, want not ok")
	}
}

// TestSchedFile_Pread: the kept-open file reads as readSchedstat does,
// again and again (pread at offset 0), and reopens for another thread.
func TestSchedFile_Pread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	if !readSchedstat(tid).ok {
		t.Skip("no schedstat on this kernel")
	}
	var sf schedFile
	a := sf.read(tid)
	for end := time.Now().Add(10 * time.Millisecond); time.Now().Before(end); {
	}
	b := sf.read(tid)
	if !a.ok || !b.ok || b.on <= a.on {
		t.Fatalf("kept-open reads %+v then %+v; want both ok, on-CPU time growing", a, b)
	}
	if c := sf.read(-1); c.ok {
		t.Errorf("no thread: %+v, want not ok", c)
	}
}
