package chlayer

// Fan-out without Python (docs/design.md, "Fan-out to sockets"): a group's
// members that are the channel of a WebSocket session of this worker get
// one payload written to their sockets by Go, framed once; no member's
// receive runs. A channel is linked to its session when it is made
// (turnstile.channels' new_channel inside the session's task: BindSocket
// with the session's tag, slot index << 32 | generation) and unlinked when
// the session ends (DropSocket, from internal/asgi).

import (
	"sort"
	"sync/atomic"
)

// SocketWriter writes one payload (text: a text message, else binary) to
// the WebSocket sessions named by tags, and returns how many it queued the
// frame on and how many it dropped (a session whose queue of fan-out
// frames is full). tags name sessions of this worker; a tag whose session
// has ended or is not accepted yet is skipped (neither count). It is
// called with the store's mutex held and must not call the store. Set once
// by internal/asgi before any app runs; data is not modified and may be
// kept.
var SocketWriter func(tags []uint64, text bool, data []byte) (queued, dropped int)

// frameStats are the fan-out's counters (Stats: FramesQueued,
// FramesDropped), outside s.mu: the writer runs without it.
var frameStats struct{ queued, dropped atomic.Uint64 }

// BindSocket links channel name (of any prefix) to the WebSocket session
// tag: a GroupSendFrames to a group it belongs to writes to that socket.
func (s *Store) BindSocket(name string, tag uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.socks == nil {
		s.socks = map[string]uint64{}
		s.sockNames = map[uint64][]string{}
	}
	s.socks[name] = tag
	s.sockNames[tag] = append(s.sockNames[tag], name)
}

// DropSocket unlinks every channel of the session tag (it ended).
func (s *Store) DropSocket(tag uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range s.sockNames[tag] {
		if s.socks[name] == tag {
			delete(s.socks, name)
		}
	}
	delete(s.sockNames, tag)
}

// GroupSendFrames writes data (one WebSocket message: text when text,
// else binary) to the socket of every member of group that is linked to a
// session (BindSocket); members without a socket get nothing. With the
// relay on it goes through the master, in the order of the group's other
// sends, to every worker with members. ErrTooLarge over the message size
// limit. sockets is the number of sockets the frame was queued on in this
// worker (0 with the relay on: the master fans out after the call).
func (s *Store) GroupSendFrames(h int, group string, text bool, data []byte) (sockets int, err error) {
	s.mu.Lock()
	c := s.config(h)
	if c == nil {
		s.mu.Unlock()
		return 0, ErrHandle
	}
	if len(data) > s.maxMsg {
		s.st.Rejected++
		s.mu.Unlock()
		return 0, ErrTooLarge
	}
	if l := s.relay; l != nil {
		s.mu.Unlock()
		l.sendWait(Frame{Op: OpGroupFrames, Prefix: c.Prefix, Name: group, Data: frameData(text, data)}, RelayWait)
		return 0, nil
	}
	defer s.mu.Unlock()
	// Under s.mu: two fan-outs to one group reach every socket in one
	// order. The writer only appends to the sessions' queues and wakes
	// their writers; it never calls back into the store.
	return s.writeFrames(s.groupSockets(s.space(c.Prefix), c, group), text, data), nil
}

// groupSockets returns the tags of group's live members that have a
// socket, in the members' sorted order. Called with s.mu held.
func (s *Store) groupSockets(sp *space, c *Config, group string) []uint64 {
	g := sp.groups[group]
	if len(g) == 0 || len(s.socks) == 0 {
		return nil
	}
	now := s.now()
	names := make([]string, 0, len(g))
	for name, deadline := range g {
		if deadline <= now {
			delete(g, name)
			continue
		}
		if _, ok := s.socks[name]; ok {
			names = append(names, name)
		}
	}
	if len(g) == 0 {
		delete(sp.groups, group)
		s.relayGroup(OpLeave, c.Prefix, group)
	}
	sort.Strings(names)
	tags := make([]uint64, len(names))
	for i, name := range names {
		tags[i] = s.socks[name]
	}
	return tags
}

// writeFrames hands tags to SocketWriter. Called with s.mu held.
func (s *Store) writeFrames(tags []uint64, text bool, data []byte) int {
	if len(tags) == 0 || SocketWriter == nil {
		return 0
	}
	q, d := SocketWriter(tags, text, data)
	frameStats.queued.Add(uint64(q))
	frameStats.dropped.Add(uint64(d))
	return q
}

// frameData is a relayed OpGroupFrames payload: one byte, 1 text or 0
// binary, then the message.
func frameData(text bool, data []byte) []byte {
	b := make([]byte, 1+len(data))
	if text {
		b[0] = 1
	}
	copy(b[1:], data)
	return b
}
