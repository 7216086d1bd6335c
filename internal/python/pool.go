package python

/*
#include "tspy.h"
*/
import "C"

import (
	"fmt"
	"time"
)

// DefaultStackBytes is the stack of each Python thread: deep C recursion in
// Python (json, re, pickle of nested data) needs more than a default
// pthread stack.
const DefaultStackBytes = 16 << 20

// StartPool starts n Python threads (ts-py-0 ...) waiting on a C-side job
// queue bounded at queueSize jobs. Call after Start. turn turns the
// barrier of the turnstile on; batch runs the pool threads under
// SCHED_BATCH (no wake-up preemption of the Go thread that submits their
// jobs; docs/design.md). Both are on but for an A/B run
// (config.Switches: TURNSTILE_POOL_TURN, TURNSTILE_POOL_BATCH). Threads and
// processes the app starts from a pool thread inherit SCHED_BATCH.
func StartPool(n, queueSize int, turn, batch bool) error {
	if !turn {
		C.ts_turn_enabled = 0
	}
	if !batch {
		C.ts_pool_batch = 0
	}
	if rc, err := C.ts_pool_start(C.int(n), C.int(queueSize), C.size_t(DefaultStackBytes)); rc != 0 {
		return fmt.Errorf("python: cannot start %d pool threads: %w", n, err)
	}
	return nil
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

// StopPool lets running jobs finish and joins the pool threads, waiting at
// most timeout. It reports whether every thread ended.
func StopPool(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		C.ts_pool_stop()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// PoolStats is a snapshot of the pool for metrics and /readyz.
type PoolStats struct {
	// Busy threads run a job, Idle ones wait for work; the rest are
	// between the two (waiting for the GIL before they take a job).
	Threads, Busy, Idle, Queued, QueueSize int
	Attaches                               [4]uint64 // by thread kind: pool, loop, sampler, main
	BarrierYields                          uint64
	GILPasses                              uint64 // mid-job GIL wake-ups handed to a thread waiting to attach (gilwait.c)
}

// Stats returns a snapshot of the pool.
func Stats() PoolStats {
	var s C.ts_pool_stats
	C.ts_pool_get_stats(&s)
	ps := PoolStats{Threads: int(s.threads), Busy: int(s.busy), Idle: int(s.idle), Queued: int(s.queued), QueueSize: int(s.queue_size)}
	for i := range ps.Attaches {
		ps.Attaches[i] = uint64(C.ts_attach_count(C.int(i)))
	}
	ps.BarrierYields = uint64(C.ts_barrier_yield_count())
	ps.GILPasses = uint64(C.ts_gil_pass_count())
	return ps
}
