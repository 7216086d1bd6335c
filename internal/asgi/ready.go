package asgi

/*
#include <stdlib.h>
#include "asgi.h"
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"
)

// The ready list's Go half (bridge.c, "Loop -> Go"). The loop lists a
// slot when it has something for Go (a head, body bytes, the app's end, a
// request for the next body chunk, a WebSocket record) and writes one
// eventfd for a whole burst; the dispatcher goroutine reads it through
// the netpoller, takes the list and wakes each slot's goroutine on its
// channel. Before, each slot had its own eventfd: one write(2) on the
// loop thread and one read(2) in Go per wake-up.

var ready struct {
	once sync.Once
	err  error
}

// startDispatcher starts the dispatcher goroutine, once.
func startDispatcher() error {
	ready.once.Do(func() {
		fd, err := C.ts_asgi_ready_open()
		if fd < 0 {
			ready.err = fmt.Errorf("asgi: ready list eventfd: %w", err)
			return
		}
		go dispatch(os.NewFile(uintptr(fd), "asgi-ready"))
	})
	return ready.err
}

// dispatch wakes the goroutines of the slots the loop lists, for ever.
func dispatch(f *os.File) {
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
			n := int(C.ts_asgi_ready_take(&idx[0], C.int(len(idx)), &armed))
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
