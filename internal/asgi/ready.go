package asgi

import (
	"fmt"
	"unsafe"

	"turnstile/internal/python"
)

// A loop's ready list, Go's half (queue.c, "Loop -> Go"). The loop lists a
// slot when it has something for Go (a head, body bytes, the app's end, a
// request for the next body chunk, a WebSocket record) and writes one
// eventfd for a whole burst; the loop's dispatcher (a python.Dispatcher,
// the same consumer as the WSGI pool's done list) reads it through the
// netpoller, takes the list in batches of slot indexes and wakes each
// slot's goroutine on its channel, or, for a WebSocket whose writer is
// idle, writes the app's messages itself when the socket takes them
// without waiting (wsSession.tryTurn): one goroutine hand-off less per
// frame.

// startDispatch starts l's ready-list dispatcher. NewLoop calls it.
func (l *Loop) startDispatch() error {
	_, err := python.StartDispatcher(unsafe.Pointer(&l.c.ready), fmt.Sprintf("asgi-ready-%d", l.index), wakeSlots)
	return err
}

// wakeSlots is the ready lists' wake function: ids are slot indexes. It
// reads the registry once per batch; slots are never freed, so the slice
// it read stays valid.
func wakeSlots(ids []uintptr) {
	slots.mu.Lock()
	all := slots.all
	slots.mu.Unlock()
	for _, i := range ids {
		s := all[i]
		if ws := s.ws.Load(); ws == nil || !ws.tryTurn() {
			s.wake()
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
