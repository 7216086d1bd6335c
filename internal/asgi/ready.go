package asgi

/*
#include <stdlib.h>
#include "asgi.h"
*/
import "C"

import (
	"io"
	"os"
	"unsafe"
)

// A loop's ready list, Go's half (queue.c, "Loop -> Go"). The loop lists a
// slot when it has something for Go (a head, body bytes, the app's end, a
// request for the next body chunk, a WebSocket record) and writes one
// eventfd for a whole burst; the loop's dispatcher goroutine reads it
// through the netpoller, takes the list and wakes each slot's goroutine
// on its channel. Before, each slot had its own eventfd: one write(2) on
// the loop thread and one read(2) in Go per wake-up.

// dispatch wakes the goroutines of the slots l lists, for ever. NewLoop
// starts it.
func (l *Loop) dispatch(f *os.File) {
	var buf [8]byte
	// In C memory: the cgo call below passes no Go pointer to check.
	idx := unsafe.Slice((*C.int)(C.calloc(256, C.sizeof_int)), 256)
	var all []*slot
	for {
		if _, err := io.ReadFull(f, buf[:]); err != nil {
			panic("asgi: ready list eventfd read: " + err.Error())
		}
		for {
			var armed C.int
			n := int(C.ts_asgi_ready_take(l.c, &idx[0], C.int(len(idx)), &armed))
			if n > 0 {
				slots.mu.Lock()
				all = slots.all
				slots.mu.Unlock()
			}
			for _, i := range idx[:n] {
				all[i].wake()
			}
			if armed != 0 {
				break
			}
		}
	}
}

// wake makes the slot's goroutine look at the slot; wake-ups coalesce.
func (s *slot) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}
