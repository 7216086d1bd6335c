package python

/*
#include <stdlib.h>
#include "tspy.h"
*/
import "C"

import (
	"fmt"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// DefaultStackBytes is the stack of each Python thread: deep C recursion in
// Python (json, re, pickle of nested data) needs more than a default
// pthread stack.
const DefaultStackBytes = 16 << 20

// PoolConfig describes a pool of Python threads (StartPool).
type PoolConfig struct {
	// Name prefixes the threads' names: <Name>-<i>, as top -H shows them.
	// At most 9 bytes. Default "ts-py" (the WSGI pool).
	Name string
	// Threads is how many Python threads run jobs. Required (at least 1).
	Threads int
	// QueueSize bounds the jobs waiting for a thread (the bound rule): a
	// submission past it is refused and the caller answers 503.
	QueueSize int
	// StackBytes is each thread's stack. Default DefaultStackBytes.
	StackBytes int
	// NoTurn turns the barrier of the turnstile off, process-wide (the
	// last pool started decides), and NoBatch runs the pool threads
	// without SCHED_BATCH: both only for an A/B run (config.Switches:
	// TURNSTILE_POOL_TURN=0, TURNSTILE_POOL_BATCH=0).
	NoTurn, NoBatch bool
}

// Pool is a pool of Python threads waiting on a C-side job queue, with
// the done list through which finished jobs reach Go (pool.c). A worker
// may hold several; each has its own threads, queue, lock and done
// eventfd. The turnstile between their threads is one per process, as
// the GIL is (thread.c). Make it with StartPool; its methods are safe for
// concurrent use.
type Pool struct {
	c    *C.ts_pool
	name string

	dispatch struct {
		once sync.Once
		err  error
	}
}

// StartPool starts cfg.Threads Python threads (<Name>-0 ...) waiting on a
// C-side job queue bounded at cfg.QueueSize jobs. Call after Start. The
// barrier of the turnstile is on unless cfg.NoTurn; the pool threads run
// under SCHED_BATCH (no wake-up preemption of the Go thread that submits
// their jobs; docs/design.md) unless cfg.NoBatch. Threads and processes
// the app starts from a pool thread inherit SCHED_BATCH.
func StartPool(cfg PoolConfig) (*Pool, error) {
	if cfg.NoTurn {
		C.ts_turn_enabled = 0
	}
	batch := C.int(1)
	if cfg.NoBatch {
		batch = 0
	}
	if cfg.Name == "" {
		cfg.Name = "ts-py"
	}
	if cfg.StackBytes == 0 {
		cfg.StackBytes = DefaultStackBytes
	}
	name := C.CString(cfg.Name)
	defer C.free(unsafe.Pointer(name))
	c, err := C.ts_pool_start(name, C.int(cfg.Threads), C.int(cfg.QueueSize), C.size_t(cfg.StackBytes), batch)
	if c == nil {
		return nil, fmt.Errorf("python: cannot start %d pool threads: %w", cfg.Threads, err)
	}
	return &Pool{c: c, name: cfg.Name}, nil
}

// TurnEnabled reports whether the turnstile barrier is on.
func TurnEnabled() bool { return C.ts_turn_enabled != 0 }

// GILWaitTiming says where GIL waits are timed (gilwait.c): "take_gil",
// every wait including those inside CPython mid-request, or "attach",
// only the waits of turnstile's own attaches (when the interposition of
// pthread_cond_timedwait did not take). Valid after Start.
func GILWaitTiming() string {
	if C.ts_gilwait_active != 0 {
		return "take_gil"
	}
	return "attach"
}

// C returns the pool's C handle (a ts_pool *, tspy.h) for the C of an
// interface package, which submits to and cancels on it
// (ts_pool_submit, ts_pool_cancel): cgo gives each package its own
// C.ts_pool type, so the pointer crosses as unsafe.Pointer.
func (p *Pool) C() unsafe.Pointer { return unsafe.Pointer(p.c) }

// ThreadName is the name of thread i: <Name>-<i>.
func (p *Pool) ThreadName(i int) string { return p.name + "-" + strconv.Itoa(i) }

// ThreadState returns thread i's PyThreadState for SampleStack (nil out
// of range).
func (p *Pool) ThreadState(i int) unsafe.Pointer {
	return unsafe.Pointer(C.ts_pool_tstate(p.c, C.int(i)))
}

// Stop lets running jobs finish and joins the pool's threads, waiting at
// most timeout. It reports whether every thread ended; the pool takes no
// job after it.
func (p *Pool) Stop(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		C.ts_pool_stop(p.c)
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// PoolStats is a snapshot of a pool for metrics, /readyz and the gate.
type PoolStats struct {
	// Busy threads run a job, Idle ones wait for work; the rest are
	// between the two (waiting for the GIL before they take a job).
	Threads, Busy, Idle, Queued, QueueSize int
}

// Stats returns a snapshot of the pool, read under its lock.
func (p *Pool) Stats() PoolStats {
	var s C.ts_pool_stats
	C.ts_pool_get_stats(p.c, &s)
	return PoolStats{Threads: int(s.threads), Busy: int(s.busy), Idle: int(s.idle), Queued: int(s.queued), QueueSize: int(s.queue_size)}
}

// TurnStats counts the turnstile's work, process-wide (every pool's
// threads share the GIL and the turnstile; thread.c, gilwait.c).
type TurnStats struct {
	Attaches      [4]uint64 // by thread kind: pool, loop, sampler, main
	BarrierYields uint64
	GILPasses     uint64 // mid-job GIL wake-ups handed to a thread waiting to attach (gilwait.c)
}

// Turnstile returns the turnstile's counters.
func Turnstile() TurnStats {
	var ts TurnStats
	for i := range ts.Attaches {
		ts.Attaches[i] = uint64(C.ts_attach_count(C.int(i)))
	}
	ts.BarrierYields = uint64(C.ts_barrier_yield_count())
	ts.GILPasses = uint64(C.ts_gil_pass_count())
	return ts
}

// Dispatch starts, once, the pool's dispatcher (a Dispatcher on its done
// list): it calls wake with the go_id (ts_job) of each finished job, on
// its own goroutine, in completion order. wake must not block. Later
// calls return the first call's error and ignore their wake: a pool has
// one consumer of its done list. Errors: the eventfd cannot be wrapped.
func (p *Pool) Dispatch(wake func(id uintptr)) error {
	p.dispatch.once.Do(func() {
		_, p.dispatch.err = StartDispatcher(unsafe.Pointer(C.ts_pool_done_list(p.c)), p.name+"-done", func(ids []uintptr) {
			for _, id := range ids {
				wake(id)
			}
		})
	})
	return p.dispatch.err
}

// Threads is the pool's thread count.
func (p *Pool) Threads() int { return int(C.ts_pool_threads(p.c)) }

// Name is the pool's name, its threads' prefix ("ts-sess").
func (p *Pool) Name() string { return p.name }

// LaneStats is one pool thread's view (lanes.c, ts_pool_thread_stats):
// the connections bound to it, the calls on its own queue, the distinct
// connections among them and the oldest one's enqueue time, the call it
// runs (since when, and its tag: the submitter's name for the
// connection), its summed busy time, the longest queue wait since the
// previous reset and the calls it took.
type LaneStats struct {
	Bound, Queued, WaitingConns int
	RunningSince, OldestQueued  int64 // monotonic ns (python.Now); 0: none
	RunningTag                  uint64
	Busy, WaitMax               time.Duration
	Calls                       uint64
}

// ThreadStats returns thread i's LaneStats (zero out of range);
// resetWaitMax starts the next WaitMax period (the metrics scrape does).
func (p *Pool) ThreadStats(i int, resetWaitMax bool) LaneStats {
	var s C.ts_lane_stats
	reset := C.int(0)
	if resetWaitMax {
		reset = 1
	}
	C.ts_pool_thread_stats(p.c, C.int(i), &s, reset)
	return LaneStats{
		Bound: int(s.bound), Queued: int(s.queued), WaitingConns: int(s.waiting_conns),
		RunningSince: int64(s.running_since_ns), OldestQueued: int64(s.oldest_enqueued_ns),
		RunningTag: uint64(s.running_tag), Busy: time.Duration(s.busy_ns), WaitMax: time.Duration(s.wait_max_ns),
		Calls: uint64(s.calls),
	}
}

// BoundTags returns the tags of the connections bound to thread i (at
// most max), as the binder gave them (ts_pool_bind).
func (p *Pool) BoundTags(i, max int) []uint64 {
	if max <= 0 {
		return nil
	}
	buf := make([]C.uint64_t, max)
	n := int(C.ts_pool_thread_tags(p.c, C.int(i), &buf[0], C.int(max)))
	out := make([]uint64, n)
	for k := range out {
		out[k] = uint64(buf[k])
	}
	return out
}
