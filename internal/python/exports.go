package python

// Every //export of the Python bridge lives here: a file with //export may
// only declare things in its preamble (cmd/cgo). Each is called from a
// Python thread with the GIL released.

/*
#include <stddef.h>
*/
import "C"

import (
	"context"
	"log/slog"
	"unsafe"

	"turnstile/internal/chlayer"
)

// go_ts_log writes one record from Python (print, logging, wsgi.errors,
// tracebacks) to the server log. level is Python's logging level (10..50).
// kv holds nkv/2 fields (key, value, key, value..., UTF-8 of kvlen bytes
// each, borrowed for the call): none for the app's output, which is marked
// source=python; the fields of a record of the server's own Python half
// (_asgi.py's "asgi: app raised" with method, target, traceback) otherwise.
//
//export go_ts_log
func go_ts_log(level C.int, msg *C.char, n C.int, kv **C.char, kvlen *C.int, nkv C.int) {
	text := C.GoStringN(msg, n)
	if nkv == 0 {
		Logger().Log(context.Background(), slogLevel(int(level)), text, "source", "python")
		return
	}
	ptrs, lens := unsafe.Slice(kv, int(nkv)), unsafe.Slice(kvlen, int(nkv))
	args := make([]any, nkv)
	for i := range args {
		args[i] = C.GoStringN(ptrs[i], lens[i])
	}
	Logger().Log(context.Background(), slogLevel(int(level)), text, args...)
}

func slogLevel(pyLevel int) slog.Level {
	switch {
	case pyLevel >= 40:
		return slog.LevelError
	case pyLevel >= 30:
		return slog.LevelWarn
	case pyLevel >= 20:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

// The Channels layer (layer.c, internal/chlayer): each is one call from
// _turnstile_layer on a Python thread, GIL released; names and data are
// borrowed for the call and copied here. Codes as layer.c lists them.

//export go_ts_layer_open
func go_ts_layer_open(cfg *C.char, n C.int, errOut **C.char) C.int {
	h, err := layerOpen(C.GoBytes(unsafe.Pointer(cfg), n))
	if err != nil {
		*errOut = C.CString(err.Error())
		return -1
	}
	return C.int(h)
}

//export go_ts_layer_send
func go_ts_layer_send(h C.int, name *C.char, nlen C.int, data *C.char, dlen C.longlong) C.int {
	return C.int(layerCode(chlayer.Host.Send(int(h), C.GoStringN(name, nlen), C.GoBytes(unsafe.Pointer(data), C.int(dlen)))))
}

//export go_ts_layer_group_send
func go_ts_layer_group_send(h C.int, name *C.char, nlen C.int, data *C.char, dlen C.longlong, members, full *C.int) C.int {
	m, f, err := chlayer.Host.GroupSend(int(h), C.GoStringN(name, nlen), C.GoBytes(unsafe.Pointer(data), C.int(dlen)))
	*members, *full = C.int(m), C.int(f)
	return C.int(layerCode(err))
}

//export go_ts_layer_receive
func go_ts_layer_receive(h C.int, ep C.ulonglong, name *C.char, nlen C.int, out **C.char, outlen *C.longlong) C.int {
	d, ok, err := chlayer.Host.Receive(int(h), uint64(ep), C.GoStringN(name, nlen))
	if err != nil {
		return C.int(layerCode(err))
	}
	if !ok {
		return 5
	}
	*out = (*C.char)(C.CBytes(d))
	*outlen = C.longlong(len(d))
	return 0
}

//export go_ts_layer_unwait
func go_ts_layer_unwait(h C.int, ep C.ulonglong, name *C.char, nlen C.int) {
	chlayer.Host.Unwait(int(h), uint64(ep), C.GoStringN(name, nlen))
}

//export go_ts_layer_group
func go_ts_layer_group(h, op C.int, group *C.char, glen C.int, name *C.char, nlen C.int) C.int {
	g, c := C.GoStringN(group, glen), C.GoStringN(name, nlen)
	if op == 0 {
		return C.int(layerCode(chlayer.Host.GroupAdd(int(h), g, c)))
	}
	return C.int(layerCode(chlayer.Host.GroupDiscard(int(h), g, c)))
}

//export go_ts_layer_group_send_frames
func go_ts_layer_group_send_frames(h C.int, name *C.char, nlen C.int, text C.int, data *C.char, dlen C.longlong, sockets *C.int) C.int {
	n, err := chlayer.Host.GroupSendFrames(int(h), C.GoStringN(name, nlen), text != 0, C.GoBytes(unsafe.Pointer(data), C.int(dlen)))
	*sockets = C.int(n)
	return C.int(layerCode(err))
}

//export go_ts_layer_bind_socket
func go_ts_layer_bind_socket(name *C.char, nlen C.int, tag C.ulonglong) {
	chlayer.Host.BindSocket(C.GoStringN(name, nlen), uint64(tag))
}

//export go_ts_layer_flush
func go_ts_layer_flush(h C.int) C.int {
	return C.int(layerCode(chlayer.Host.Flush(int(h))))
}

//export go_ts_layer_endpoint
func go_ts_layer_endpoint(fd *C.int) C.ulonglong {
	id, f, err := chlayer.Host.NewEndpoint()
	if err != nil {
		return 0
	}
	*fd = C.int(f)
	return C.ulonglong(id)
}

//export go_ts_layer_close_endpoint
func go_ts_layer_close_endpoint(ep C.ulonglong) {
	chlayer.Host.CloseEndpoint(uint64(ep))
}

//export go_ts_layer_take
func go_ts_layer_take(ep C.ulonglong, out **C.char, outlen *C.longlong) {
	ds := chlayer.Host.Take(uint64(ep))
	if len(ds) == 0 {
		return
	}
	b := packDeliveries(ds)
	*out = (*C.char)(C.CBytes(b))
	*outlen = C.longlong(len(b))
}
