package watchdog

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is one thread's scheduler figures, from the kernel's
// /proc/self/task/<tid>/schedstat (Documentation/scheduler/sched-stats.rst,
// "/proc/<pid>/schedstat": time spent on the cpu, time spent waiting on a
// runqueue, timeslices run; nanoseconds).
type cpuTimes struct {
	at   time.Time
	on   time.Duration // on a CPU
	wait time.Duration // runnable, on a run queue, waiting for a CPU
	ok   bool          // false: no such thread, or no schedstat (a kernel without CONFIG_SCHED_INFO)
}

// readSchedstat reads thread tid's cpuTimes (tid: a thread of this
// process, as python.NativeThreadID gives it).
func readSchedstat(tid int) cpuTimes {
	if tid <= 0 {
		return cpuTimes{at: time.Now()}
	}
	b, err := os.ReadFile(schedstatPath(tid))
	if err != nil {
		return cpuTimes{at: time.Now()}
	}
	return parseSchedstat(b)
}

func schedstatPath(tid int) string { return "/proc/self/task/" + strconv.Itoa(tid) + "/schedstat" }

// schedFile is one thread's schedstat file kept open: a reading is one
// pread(2) (the kernel writes the figures afresh at offset 0), for the
// loop thread, read at every probe the watchdog pushes.
type schedFile struct {
	tid int
	f   *os.File // nil: not open (no thread yet, or no schedstat)
	buf [96]byte
}

// read returns the thread's cpuTimes now, opening the file for tid
// first (a loop's thread does not change while it runs; a new tid
// reopens).
func (sf *schedFile) read(tid int) cpuTimes {
	if tid != sf.tid {
		if sf.f != nil {
			sf.f.Close()
			sf.f = nil
		}
		sf.tid = tid
		if tid > 0 {
			sf.f, _ = os.Open(schedstatPath(tid))
		}
	}
	if sf.f == nil {
		return cpuTimes{at: time.Now()}
	}
	n, err := sf.f.ReadAt(sf.buf[:], 0)
	if n == 0 && err != nil {
		return cpuTimes{at: time.Now()}
	}
	return parseSchedstat(sf.buf[:n])
}

// parseSchedstat reads "on-CPU-ns run-queue-wait-ns timeslices".
func parseSchedstat(b []byte) cpuTimes {
	t := cpuTimes{at: time.Now()}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return t
	}
	on, err1 := strconv.ParseInt(f[0], 10, 64)
	wait, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return t
	}
	t.on, t.wait, t.ok = time.Duration(on), time.Duration(wait), true
	return t
}

// cpuShare is a thread's use of the CPU between two readings: what a
// stall record reports, so that a stall the machine caused (the thread
// runnable but given no CPU: other processes, a CPU quota) reads apart
// from one the app caused (the thread on a CPU, or asleep: a blocking call,
// a lock, the GIL).
type cpuShare struct {
	WindowMS  float64 `json:"window_ms"`   // wall time between the readings
	OnCPUMS   float64 `json:"on_cpu_ms"`   // time on a CPU
	CPUWaitMS float64 `json:"cpu_wait_ms"` // runnable, waiting for a CPU (waits that ended in the window)
}

// since is the share between from and now (a zero share when either
// reading failed or they are of different threads' clocks).
func (now cpuTimes) since(from cpuTimes) (cpuShare, bool) {
	if !from.ok || !now.ok || now.on < from.on || now.wait < from.wait {
		return cpuShare{}, false
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return cpuShare{WindowMS: ms(now.at.Sub(from.at)), OnCPUMS: ms(now.on - from.on), CPUWaitMS: ms(now.wait - from.wait)}, true
}
