package asgi

// The channel layer's fan-out to sockets (docs/design.md, "Fan-out to
// sockets"; internal/chlayer frames.go): chlayer names the sessions of a
// group's members by tag (slot index << 32 | generation, the Channel's
// tag), and writeFanout queues one prepared message on each of them; each
// session's writer goroutine writes it. No loop, no Python.
//
// Order on one socket: fan-out frames in the order the layer fanned them
// out (the master's order across workers). The writer takes the queued
// fan-out frames before it takes the app's records, and writes the records
// first: a websocket.send the app made before a group_send_frames call is
// on the wire before that frame; one made after it may come before or
// after it.

import (
	"sync"

	"turnstile/internal/chlayer"
	"turnstile/internal/websocket"
)

// Bounds of one session's queue of fan-out frames not yet written: past
// either a frame is dropped for that session and counted
// (turnstile_layer_frames_dropped_total). A client that reads keeps it
// near empty; one that does not is cut at the write timeout.
const (
	FanQueue = 1024    // frames
	FanBytes = 4 << 20 // payload bytes
)

// fanQueue is one session's fan-out frames waiting for its writer.
type fanQueue struct {
	mu    sync.Mutex
	q     []*websocket.Prepared // guarded by mu
	bytes int                   // guarded by mu
	spare []*websocket.Prepared // owned by the writer: the last batch's slice, for reuse
}

var fanLive struct {
	mu sync.RWMutex
	m  map[uint64]*wsSession // by tag; guarded by mu
}

func init() { chlayer.SocketWriter = writeFanout }

func (ws *wsSession) tag() uint64 { return uint64(ws.s.c.index)<<32 | uint64(ws.gen) }

// fanRegister makes the accepted session ws reachable by its tag.
func fanRegister(ws *wsSession) {
	fanLive.mu.Lock()
	if fanLive.m == nil {
		fanLive.m = map[uint64]*wsSession{}
	}
	fanLive.m[ws.tag()] = ws
	fanLive.mu.Unlock()
}

// fanUnregister forgets the session ws and its channels' link to it.
func fanUnregister(ws *wsSession) {
	tag := ws.tag()
	fanLive.mu.Lock()
	if fanLive.m[tag] == ws {
		delete(fanLive.m, tag)
	}
	fanLive.mu.Unlock()
	chlayer.Host.DropSocket(tag)
}

// writeFanout is chlayer.SocketWriter: data framed once, queued on every
// live session of tags, each session's writer woken.
func writeFanout(tags []uint64, text bool, data []byte) (queued, dropped int) {
	p, err := websocket.Prepare(text, data)
	if err != nil {
		return 0, 0
	}
	fanLive.mu.RLock()
	defer fanLive.mu.RUnlock()
	for _, tag := range tags {
		ws := fanLive.m[tag]
		if ws == nil {
			continue // ended, or not accepted yet
		}
		f := &ws.fan
		f.mu.Lock()
		ok := len(f.q) < FanQueue && f.bytes+p.Len() <= FanBytes
		if ok {
			f.q = append(f.q, p)
			f.bytes += p.Len()
		}
		f.mu.Unlock()
		if ok {
			queued++
			ws.wake()
		} else {
			dropped++
		}
	}
	return queued, dropped
}

// takeFan returns the fan-out frames queued so far. Writer goroutine.
func (ws *wsSession) takeFan() []*websocket.Prepared {
	f := &ws.fan
	f.mu.Lock()
	ps := f.q
	if len(ps) > 0 {
		f.q, f.bytes = f.spare[:0], 0
	}
	f.mu.Unlock()
	return ps
}

// writeFan writes frames taken by takeFan, unless the connection is
// closing. Writer goroutine.
func (ws *wsSession) writeFan(ps []*websocket.Prepared) {
	if len(ps) == 0 {
		return
	}
	ws.sess.BeginWrites()
	for _, p := range ps {
		if ws.sess.Dropping() {
			break
		}
		ws.sess.SendPrepared(p)
	}
	clear(ps)
	ws.fan.spare = ps[:0]
}
