// Package sysmon runs the Go runtime's sysmon thread under SCHED_BATCH.
//
// sysmon is the runtime's watchdog thread (it runs without a P: it retakes
// Ps from threads blocked in syscalls and cgo calls, preempts long-running
// goroutines, polls the network when nobody has). When every goroutine of
// a worker waits on Python, all Ps go idle and sysmon parks; the next
// syscall or cgo call wakes it and it polls every 20 µs for 50 rounds
// before it backs off. With the worker on one core each of those wake-ups
// preempts the thread on the core (a Go thread inside write(2), or the
// event loop), and a Go thread descheduled inside a syscall looks to
// sysmon like a long syscall, so its P is handed to another thread. Under
// SCHED_BATCH sysmon keeps its CPU share and its work but no longer
// preempts on waking: it runs when the thread on the core blocks or its
// slice ends. docs/design.md, "sysmon and the loop thread run under
// SCHED_BATCH", has the numbers (alone it costs ASGI at 16 connections;
// with the loop thread under SCHED_BATCH too every size gains).
//
// The runtime does not name sysmon: it is the first thread the runtime
// starts after the main thread (runtime.main calls newm(sysmon) before
// any package init), so Batch takes the process's second-lowest thread id
// among the threads that still carry the executable's name. A thread that
// sysmon itself starts (newm from sysmon clones it) inherits SCHED_BATCH;
// Batch's watcher puts such Go threads back to SCHED_OTHER once a second.
package sysmon

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Linux scheduling policies (sched(7)).
const (
	schedOther = 0
	schedBatch = 3
)

// Batch puts the sysmon thread under SCHED_BATCH and starts a goroutine
// that, every interval, sets any other Go thread found under SCHED_BATCH
// back to SCHED_OTHER. It returns sysmon's thread id. Errors: /proc
// unreadable, no candidate thread, or sched_setscheduler(2)'s errno (no
// privilege is needed to lower one's own threads to SCHED_BATCH).
func Batch(interval time.Duration) (int, error) {
	tid, err := find()
	if err != nil {
		return 0, err
	}
	if err := setPolicy(tid, schedBatch); err != nil {
		return 0, fmt.Errorf("sysmon: SCHED_BATCH on thread %d: %w", tid, err)
	}
	go func() {
		for range time.Tick(interval) {
			restore(tid)
		}
	}()
	return tid, nil
}

// goThreads lists the process's thread ids whose comm is the main
// thread's: Go's threads (Python's are named ts-py-N, ts-loop-0, and the
// threads they start inherit those names), ascending.
func goThreads() ([]int, error) {
	pid := os.Getpid()
	main, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
		if err != nil || strings.TrimSpace(string(comm)) != strings.TrimSpace(string(main)) {
			continue
		}
		tids = append(tids, tid)
	}
	slices.Sort(tids)
	return tids, nil
}

// find returns sysmon's thread id: the lowest Go thread id after the main
// thread's (the process id).
func find() (int, error) {
	tids, err := goThreads()
	if err != nil {
		return 0, fmt.Errorf("sysmon: %w", err)
	}
	pid := os.Getpid()
	for _, tid := range tids {
		if tid > pid {
			return tid, nil
		}
	}
	return 0, fmt.Errorf("sysmon: no thread after the main thread %d", pid)
}

// restore sets every Go thread but sysmon found under SCHED_BATCH back to
// SCHED_OTHER.
func restore(sysmon int) {
	tids, err := goThreads()
	if err != nil {
		return
	}
	for _, tid := range tids {
		if tid != sysmon && policy(tid) == schedBatch {
			_ = setPolicy(tid, schedOther)
		}
	}
}

func policy(tid int) int {
	r, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, uintptr(tid), 0, 0)
	if e != 0 {
		return -1
	}
	return int(r)
}

func setPolicy(tid, pol int) error {
	var param struct{ priority int32 }
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), uintptr(pol), uintptr(unsafe.Pointer(&param)))
	if e != 0 {
		return e
	}
	return nil
}
