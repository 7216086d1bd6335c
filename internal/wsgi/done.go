package wsgi

import "runtime/cgo"

// wakeSlot is the WSGI pool's wake function (python.Pool.Dispatch): the
// pool's dispatcher goroutine calls it with the go_id of each finished
// job, the cgo.Handle of its slot, and it wakes the job's goroutine on the
// slot's channel. Never blocks: the channel holds one wake-up, and a
// withdrawn job's goroutine was already woken (gone.go).
func wakeSlot(id uintptr) {
	s := cgo.Handle(id).Value().(*slot)
	select {
	case s.done <- struct{}{}:
	default:
	}
}
