package python

/*
#include <stdlib.h>
#include "tspy.h"
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"unsafe"
)

// dispatchBatch is how many ids a Dispatcher takes per cgo call.
const dispatchBatch = 256

// Dispatcher is Go's consumer of a C wake list (wakelist.h) whose items
// name Go objects: the pool's done list (finished jobs, by go_id) and an
// ASGI loop's ready list (slots with something for Go, by index). Its
// goroutine reads the list's eventfd through the netpoller (no OS thread
// blocked), takes the list in batches of up to 256 ids in one cgo call
// each (ts_wakelist_take_ids) and hands each batch to wake, in push order,
// until the list is empty and armed; then it reads the eventfd again. A
// burst of completions thus costs one write(2) on the producer's side and
// one read(2) here (DESIGN.md, "asyncio wake-ups").
//
// One Dispatcher per list: a wake list has one consumer. Make it with
// StartDispatcher; it runs for the life of the process.
type Dispatcher struct {
	list *C.ts_wakelist
	file *os.File
	// ids is in C memory: the hot cgo call passes no Go pointer for
	// cgocheck to inspect.
	ids  []C.uintptr_t
	wake func(ids []uintptr)
}

// StartDispatcher starts the dispatcher goroutine of list, a
// *ts_wakelist (wakelist.h) with its id_of set, crossing as
// unsafe.Pointer (cgo gives each package its own C types). name labels
// the eventfd's *os.File. wake is called on the dispatcher's goroutine
// with each batch of ids (valid only during the call); it must not block.
// Errors: the list has no eventfd.
func StartDispatcher(list unsafe.Pointer, name string, wake func(ids []uintptr)) (*Dispatcher, error) {
	l := (*C.ts_wakelist)(list)
	if l.fd < 0 || l.id_of == nil {
		return nil, fmt.Errorf("python: wake list %s has no eventfd or no id_of", name)
	}
	buf := (*C.uintptr_t)(C.calloc(dispatchBatch, C.sizeof_uintptr_t)) // kept for the process's life
	if buf == nil {
		return nil, fmt.Errorf("python: wake list %s: out of memory", name)
	}
	d := &Dispatcher{
		list: l,
		file: os.NewFile(uintptr(l.fd), name),
		ids:  unsafe.Slice(buf, dispatchBatch),
		wake: wake,
	}
	go d.run()
	return d, nil
}

// run wakes the list's items, for ever.
func (d *Dispatcher) run() {
	var buf [8]byte
	ids := unsafe.Slice((*uintptr)(unsafe.Pointer(&d.ids[0])), len(d.ids)) // the same memory, as Go's type
	for {
		if _, err := io.ReadFull(d.file, buf[:]); err != nil {
			panic("python: " + d.file.Name() + " eventfd read: " + err.Error())
		}
		for {
			var armed C.int
			n := int(C.ts_wakelist_take_ids(d.list, &d.ids[0], C.int(len(d.ids)), &armed))
			if n > 0 {
				d.wake(ids[:n])
			}
			if armed != 0 {
				break
			}
		}
	}
}
