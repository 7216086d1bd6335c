package wsgi

/*
#include "../python/tspy.h"
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"runtime/cgo"
	"sync"
)

// The done list's Go half (internal/python/pool.c): a pool thread lists a
// finished job and writes one eventfd for a burst; the dispatcher
// goroutine reads it through the netpoller, takes the list and wakes each
// job's goroutine on its slot's channel.

var doneList struct {
	once sync.Once
	err  error
}

// startDispatcher starts the dispatcher goroutine, once.
func startDispatcher() error {
	doneList.once.Do(func() {
		fd, err := C.ts_pool_done_open()
		if fd < 0 {
			doneList.err = fmt.Errorf("wsgi: done list eventfd: %w", err)
			return
		}
		go dispatch(os.NewFile(uintptr(fd), "wsgi-done"))
	})
	return doneList.err
}

// dispatch wakes the goroutines of finished jobs, for ever.
func dispatch(f *os.File) {
	var buf [8]byte
	ids := make([]C.uintptr_t, 256)
	for {
		if _, err := io.ReadFull(f, buf[:]); err != nil {
			panic("wsgi: done list eventfd read: " + err.Error())
		}
		for {
			var armed C.int
			n := int(C.ts_pool_done_take(&ids[0], C.int(len(ids)), &armed))
			for _, id := range ids[:n] {
				s := cgo.Handle(id).Value().(*slot)
				select {
				case s.done <- struct{}{}:
				default:
				}
			}
			if armed != 0 {
				break
			}
		}
	}
}
