package python

/*
#include <stdlib.h>
#include "tspy.h"
*/
import "C"

import (
	"strconv"
	"strings"
	"unsafe"
)

// Frame is one Python frame of a sampled stack.
type Frame struct {
	File     string
	Line     int
	Function string // co_qualname
}

// String gives "file:line in function".
func (f Frame) String() string {
	return f.File + ":" + strconv.Itoa(f.Line) + " in " + f.Function
}

// Now returns the monotonic clock the C side stamps heartbeats and jobs
// with, in nanoseconds.
func Now() int64 { return int64(C.ts_now_ns()) }

// sampleBytes bounds one sample's text.
const sampleBytes = 16 << 10

// SampleStack reads the Python stack of the thread whose PyThreadState is
// tstate, innermost frame first, without the GIL and without waiting for
// that thread (sample.c explains the racy read). It returns nil when the
// thread runs no Python.
func SampleStack(tstate unsafe.Pointer) []Frame {
	if tstate == nil {
		return nil
	}
	buf := (*C.char)(C.malloc(sampleBytes))
	defer C.free(unsafe.Pointer(buf))
	n := C.ts_sample_stack((*C.PyThreadState)(tstate), buf, sampleBytes)
	text := C.GoStringN(buf, C.int(n))
	var frames []Frame
	for _, line := range strings.Split(text, "\n") {
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 {
			continue
		}
		ln, _ := strconv.Atoi(parts[1])
		frames = append(frames, Frame{File: parts[0], Line: ln, Function: parts[2]})
	}
	return frames
}

// GILHolder returns the PyThreadState of the thread holding the GIL, or
// nil when it is free; read racily without the GIL, for the watchdog to
// name the thread a stalled loop waits for.
func GILHolder() unsafe.Pointer {
	return unsafe.Pointer(C.ts_gil_holder())
}

// NativeThreadID returns the OS thread id (gettid, as in top -H and
// py-spy) of tstate.
func NativeThreadID(tstate unsafe.Pointer) int {
	return int(C.ts_tstate_native_id((*C.PyThreadState)(tstate)))
}
